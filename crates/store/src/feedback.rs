//! A person's thumbs up or down on an assistant reply: the strongest reward
//! the night gets for the sub-task the reply ends.

use reverie_core::{ChannelId, MessageId, MessageRole};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::store::{now_ms, Store};

/// A rating of one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Feedback {
    pub message: MessageId,
    pub channel: ChannelId,
    /// 👍 when true, 👎 when false.
    pub good: bool,
    pub created_ms: i64,
}

impl Store {
    /// Rates `message`, an assistant reply of `channel` still in its
    /// transcript; `None` takes a rating back. Rating again replaces it.
    pub fn set_feedback(
        &self,
        channel: ChannelId,
        message: MessageId,
        good: Option<bool>,
    ) -> Result<()> {
        let conn = self.conn();
        let row: Option<(i64, String, bool)> = conn
            .query_row(
                "SELECT channel_id, role, retracted FROM messages WHERE id = ?1",
                [message.0],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((owner, role, retracted)) = row.filter(|r| r.0 == channel.0) else {
            return Err(StoreError::NotFound {
                what: "message of this channel",
                id: message.0,
            });
        };
        if role != MessageRole::Assistant.as_str() {
            return Err(StoreError::Invalid(format!(
                "only the assistant's replies can be rated; message {} is a {role} message",
                message.0
            )));
        }
        if retracted && good.is_some() {
            return Err(StoreError::Invalid(format!(
                "message {} was taken back by a regenerate or an edit; rate the reply that replaced it",
                message.0
            )));
        }
        debug_assert_eq!(owner, channel.0);
        match good {
            Some(good) => conn.execute(
                "INSERT INTO feedback (message_id, good, created_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (message_id) DO UPDATE SET good = excluded.good,
                                                        created_ms = excluded.created_ms",
                params![message.0, good, now_ms()],
            )?,
            None => conn.execute("DELETE FROM feedback WHERE message_id = ?1", [message.0])?,
        };
        Ok(())
    }

    /// The ratings of `channel`'s shown replies, oldest message first.
    pub fn feedback(&self, channel: ChannelId) -> Result<Vec<Feedback>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT f.message_id, f.good, f.created_ms FROM feedback f
             JOIN messages m ON m.id = f.message_id
             WHERE m.channel_id = ?1 AND m.retracted = 0 ORDER BY f.message_id",
        )?;
        let rows = stmt.query_map([channel.0], |r| {
            Ok(Feedback {
                message: MessageId(r.get(0)?),
                channel,
                good: r.get(1)?,
                created_ms: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The latest assistant message still in `channel`'s transcript.
    pub fn last_reply(&self, channel: ChannelId) -> Result<Option<MessageId>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT id FROM messages
                 WHERE channel_id = ?1 AND role = ?2 AND retracted = 0
                 ORDER BY id DESC LIMIT 1",
                params![channel.0, MessageRole::Assistant.as_str()],
                |r| r.get(0),
            )
            .optional()?
            .map(MessageId))
    }
}
