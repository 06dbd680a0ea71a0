//! Channels and the messages exchanged in them.

use serde::{Deserialize, Serialize};

use crate::token::TokenSpan;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChannelId(pub i64);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MessageId(pub i64);

/// Who wrote a message, in chat-template terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    System,
    User,
    Assistant,
    /// The result of a tool call, fed back to the model.
    Tool,
}

impl MessageRole {
    pub const ALL: [MessageRole; 4] = [
        MessageRole::System,
        MessageRole::User,
        MessageRole::Assistant,
        MessageRole::Tool,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MessageRole::System => "system",
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
            MessageRole::Tool => "tool",
        }
    }
}

impl std::str::FromStr for MessageRole {
    type Err = ParseRoleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MessageRole::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| ParseRoleError::new("message role", s))
    }
}

/// A name that is not one of the known roles.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {found:?}; expected one of: {expected}")]
pub struct ParseRoleError {
    kind: &'static str,
    found: String,
    expected: String,
}

impl ParseRoleError {
    pub(crate) fn new(kind: &'static str, found: &str) -> Self {
        let expected = match kind {
            "message role" => MessageRole::ALL.map(|r| r.as_str()).join(", "),
            _ => crate::TokenRole::ALL.map(|r| r.as_str()).join(", "),
        };
        ParseRoleError {
            kind,
            found: found.to_string(),
            expected,
        }
    }
}

/// One message of a channel, with the exact tokens that carried it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: MessageId,
    pub channel: ChannelId,
    pub role: MessageRole,
    pub text: String,
    /// Milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// The tokens fed to or produced by the model for this message
    /// (scaffolding included), empty if the message never reached a model.
    pub tokens: TokenSpan,
}
