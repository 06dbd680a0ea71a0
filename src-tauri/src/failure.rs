//! What a command returns when it fails: the error chain as one sentence,
//! which the window shows as is.

use serde::{Serialize, Serializer};

#[derive(Debug)]
pub struct Failure(pub String);

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(format!("{:#}", e.into()))
    }
}

impl Serialize for Failure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

pub type Reply<T> = Result<T, Failure>;

/// Fails a command with `message`.
pub fn refuse<T>(message: impl Into<String>) -> Reply<T> {
    Err(Failure(message.into()))
}
