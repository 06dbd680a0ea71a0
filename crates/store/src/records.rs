//! Plain records the store hands back.

use reverie_core::{ChannelId, MessageId};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    pub id: ChannelId,
    pub name: String,
    pub system_prompt: String,
    pub created_ms: i64,
    /// Folder the channel's file tools work in; empty for the default one.
    pub workspace: String,
    /// The part of the system prompt the agent edits with `update_sys`.
    pub agent_section: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub message: MessageId,
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    pub result: Option<String>,
    pub ok: Option<bool>,
    /// Files the call showed in the chat.
    pub attachments: Vec<CallAttachment>,
}

/// A file a tool call showed in the chat: its blob, its name, and whether
/// it is an image (shown inline).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallAttachment {
    pub blob: String,
    pub name: String,
    pub image: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NightStatus {
    Running,
    Done,
    Failed,
    Cancelled,
}

impl NightStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NightStatus::Running => "running",
            NightStatus::Done => "done",
            NightStatus::Failed => "failed",
            NightStatus::Cancelled => "cancelled",
        }
    }

    pub(crate) fn parse(s: &str) -> NightStatus {
        match s {
            "done" => NightStatus::Done,
            "failed" => NightStatus::Failed,
            "cancelled" => NightStatus::Cancelled,
            _ => NightStatus::Running,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Night {
    pub id: i64,
    pub started_ms: i64,
    pub finished_ms: Option<i64>,
    pub status: NightStatus,
    pub stage: String,
    pub report: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub id: i64,
    pub path: String,
    pub sha256: String,
    pub parent: Option<i64>,
    pub night: Option<i64>,
    pub created_ms: i64,
    pub active: bool,
}

/// A file-changing tool call in a workspace: `changes` is the tool crate's
/// own encoding of the forward and inverse edits.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub id: i64,
    pub workspace: String,
    pub tool: String,
    pub summary: String,
    pub changes: String,
    pub state: RevisionState,
    pub created_ms: i64,
}

/// Where a revision stands in its workspace's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisionState {
    /// Applied; the next undo reverts the newest of these.
    Done,
    /// Reverted; the next redo re-applies the oldest-undone of these.
    Undone,
    /// Undone and then superseded by a new edit: no longer redoable.
    Dropped,
}

impl RevisionState {
    pub fn as_str(self) -> &'static str {
        match self {
            RevisionState::Done => "done",
            RevisionState::Undone => "undone",
            RevisionState::Dropped => "dropped",
        }
    }

    pub(crate) fn parse(s: &str) -> RevisionState {
        match s {
            "undone" => RevisionState::Undone,
            "dropped" => RevisionState::Dropped,
            _ => RevisionState::Done,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub id: i64,
    pub title: String,
    pub body: String,
    pub created_ms: i64,
    /// When a search last returned it (`None`: never).
    pub used_ms: Option<i64>,
}

/// One change the routine note cleaning made: the notes it hid and the
/// note it wrote in their place (a merge), in words.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteChange {
    pub id: i64,
    pub at_ms: i64,
    pub what: String,
    pub removed: Vec<i64>,
    pub added: Option<i64>,
    pub undone_ms: Option<i64>,
}

impl Note {
    /// The later of its creation and its last recall, in ms since the epoch.
    pub fn touched_ms(&self) -> i64 {
        self.used_ms.unwrap_or(0).max(self.created_ms)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct BoardPost {
    pub id: i64,
    pub board: String,
    pub author: String,
    pub text: String,
    pub created_ms: i64,
}
