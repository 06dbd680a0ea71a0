use std::path::PathBuf;

/// What went wrong in the store, with enough context to act on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("the database was written by a newer Reverie (schema {found}, this build knows {known}); upgrade Reverie")]
    SchemaTooNew { found: i64, known: i64 },
    #[error("a channel named {0:?} already exists; pick another name")]
    ChannelExists(String),
    #[error("no channel named {0:?}; list them with `reverie channel list`")]
    NoSuchChannel(String),
    #[error("channel id {0} does not exist")]
    NoSuchChannelId(i64),
    #[error("{what} {id} does not exist")]
    NotFound { what: &'static str, id: i64 },
    #[error("token span has {ids} ids, {roles} roles and {logprobs} log-probs; they must match")]
    InconsistentSpan {
        ids: usize,
        roles: usize,
        logprobs: usize,
    },
    #[error("stored tokens of message {0} are corrupt")]
    CorruptTokens(i64),
    #[error("blob {path}: {source}")]
    Blob {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    ChannelName(#[from] reverie_core::BadChannelName),
    #[error("blob {0} is missing or does not match its hash")]
    BlobMismatch(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;
