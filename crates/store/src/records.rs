//! Plain records the store hands back.

use reverie_core::{ChannelId, MessageId};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    pub id: ChannelId,
    pub name: String,
    pub system_prompt: String,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub message: MessageId,
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    pub result: Option<String>,
    pub ok: Option<bool>,
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
