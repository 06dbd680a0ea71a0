//! Channels and the messages exchanged in them.

use serde::{Deserialize, Serialize};

use crate::token::TokenSpan;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChannelId(pub i64);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MessageId(pub i64);

/// Longest channel name, in characters.
pub const MAX_CHANNEL_NAME: usize = 80;

/// A channel name that breaks the rule, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadChannelName {
    #[error("a channel name is 1 to {MAX_CHANNEL_NAME} characters (this one has {0})")]
    Length(usize),
    #[error("a channel name cannot hold control characters (tabs, line breaks): {0:?}")]
    ControlCharacter(String),
}

/// The channel-name rule, for every way a channel is named (the window,
/// `reverie channel`, the store): 1 to 80 characters once trimmed, no
/// control characters. Returns the trimmed name.
pub fn channel_name(name: &str) -> Result<&str, BadChannelName> {
    let name = name.trim();
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_CHANNEL_NAME {
        return Err(BadChannelName::Length(chars));
    }
    if name.chars().any(char::is_control) {
        return Err(BadChannelName::ControlCharacter(name.to_string()));
    }
    Ok(name)
}

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

/// Where a channel's live context starts: at its last system message (a
/// channel compacted near the end of its context starts again there, with
/// its summary in the system prompt), or at its first message.
pub fn live_start(messages: &[Message]) -> usize {
    messages
        .iter()
        .rposition(|m| m.role == MessageRole::System)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_names_are_trimmed_short_and_printable() {
        assert_eq!(channel_name("  work "), Ok("work"));
        assert_eq!(channel_name(&"é".repeat(80)), Ok("é".repeat(80).as_str()));
        assert!(channel_name(&"a".repeat(81))
            .unwrap_err()
            .to_string()
            .contains("1 to 80"));
        assert!(channel_name("   ").is_err());
        assert!(channel_name("a\nb")
            .unwrap_err()
            .to_string()
            .contains("control"));
    }
}
