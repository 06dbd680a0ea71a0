//! The closed set of events a chat sends to whoever displays it.

use serde::{Deserialize, Serialize};

use crate::message::{ChannelId, MessageId};

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model produced an end-of-generation token.
    EndOfTurn,
    /// The `max_tokens` budget ran out.
    MaxTokens,
    /// Someone asked it to stop.
    Cancelled,
    /// The watchdog saw no progress for too long and ended it.
    Stalled,
    /// The context window is full.
    ContextFull,
    /// The turn made as many tool calls as one turn may.
    ToolLimit,
}

/// Everything a chat reports outward; the CLI and the desktop app consume
/// only this.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChatEvent {
    /// One sampled token: its id, its text (may be empty while a multi-byte
    /// character is incomplete) and the sampler's log-probability.
    Token {
        channel: ChannelId,
        id: i32,
        piece: String,
        logprob: f32,
    },
    ToolCallStarted {
        channel: ChannelId,
        call_id: String,
        name: String,
        arguments: String,
    },
    ToolCallFinished {
        channel: ChannelId,
        call_id: String,
        ok: bool,
        result: String,
    },
    /// A file or image a tool put into the chat (content hash in the blob
    /// store).
    Attachment {
        channel: ChannelId,
        blob: String,
        name: String,
        image: bool,
    },
    /// Something the harness tells the person (and recorded for the model as
    /// `warning` tokens where the model sees it), e.g. the tool-call limit.
    Notice {
        channel: ChannelId,
        text: String,
    },
    TurnEnd {
        channel: ChannelId,
        message: Option<MessageId>,
        reason: StopReason,
    },
    /// The turn ended looking unfinished and the model was asked whether it
    /// meant to stop; `unintended` is its "no".
    StrayEnd {
        channel: ChannelId,
        message: MessageId,
        unintended: bool,
    },
    Error {
        channel: ChannelId,
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_a_type_tag() {
        let ev = ChatEvent::TurnEnd {
            channel: ChannelId(3),
            message: Some(MessageId(9)),
            reason: StopReason::MaxTokens,
        };
        let json = serde_json::to_string(&ev).unwrap();
        assert_eq!(
            json,
            r#"{"type":"turn_end","channel":3,"message":9,"reason":"max_tokens"}"#
        );
        let back: ChatEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ev);
    }
}
