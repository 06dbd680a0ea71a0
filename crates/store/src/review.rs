//! What a person changes after the fact: retracting the tail of a channel
//! (edit and re-run, regenerate) and marking episodes for the next night.

use reverie_core::{ChannelId, MessageId};
use rusqlite::{params, TransactionBehavior};
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::store::{now_ms, Store};

/// A person's verdict on the messages `first..=last` of a channel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewMark {
    pub id: i64,
    pub channel: i64,
    pub first_message: i64,
    pub last_message: i64,
    /// Replaces the judge's reward for every sub-task in the span.
    pub reward: Option<f32>,
    /// Leave the span out of training.
    pub excluded: bool,
    pub created_ms: i64,
}

impl ReviewMark {
    pub fn covers(&self, channel: ChannelId, message: MessageId) -> bool {
        self.channel == channel.0 && (self.first_message..=self.last_message).contains(&message.0)
    }
}

impl Store {
    /// Hides `from` and every later message of its channel from the
    /// transcript (they stay in the database, marked retracted). Returns how
    /// many were retracted.
    pub fn retract_from(&self, channel: ChannelId, from: MessageId) -> Result<usize> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let belongs: Option<i64> = tx
            .query_row(
                "SELECT channel_id FROM messages WHERE id = ?1",
                [from.0],
                |r| r.get(0),
            )
            .ok();
        if belongs != Some(channel.0) {
            return Err(StoreError::NotFound {
                what: "message of this channel",
                id: from.0,
            });
        }
        let n = tx.execute(
            "UPDATE messages SET retracted = 1
             WHERE channel_id = ?1 AND id >= ?2 AND retracted = 0",
            params![channel.0, from.0],
        )?;
        tx.commit()?;
        Ok(n)
    }

    /// Sets (or replaces) the mark on a span; a mark with no reward and not
    /// excluded is removed.
    pub fn set_review_mark(
        &self,
        channel: ChannelId,
        first: MessageId,
        last: MessageId,
        reward: Option<f32>,
        excluded: bool,
    ) -> Result<()> {
        if first.0 > last.0 {
            return Err(StoreError::Invalid(format!(
                "a review span must start before it ends (got messages {}..{})",
                first.0, last.0
            )));
        }
        if let Some(r) = reward {
            if !(0.0..=1.0).contains(&r) || !r.is_finite() {
                return Err(StoreError::Invalid(format!(
                    "a reward is between 0 and 1 (got {r})"
                )));
            }
        }
        let conn = self.conn();
        if reward.is_none() && !excluded {
            conn.execute(
                "DELETE FROM review_marks
                 WHERE channel_id = ?1 AND first_message = ?2 AND last_message = ?3",
                params![channel.0, first.0, last.0],
            )?;
            return Ok(());
        }
        conn.execute(
            "INSERT INTO review_marks
                 (channel_id, first_message, last_message, reward, excluded, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (channel_id, first_message, last_message)
             DO UPDATE SET reward = excluded.reward, excluded = excluded.excluded,
                           created_ms = excluded.created_ms",
            params![channel.0, first.0, last.0, reward, excluded, now_ms()],
        )?;
        Ok(())
    }

    /// Every mark, oldest first.
    pub fn review_marks(&self) -> Result<Vec<ReviewMark>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, channel_id, first_message, last_message, reward, excluded, created_ms
             FROM review_marks ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(ReviewMark {
                id: r.get(0)?,
                channel: r.get(1)?,
                first_message: r.get(2)?,
                last_message: r.get(3)?,
                reward: r.get::<_, Option<f64>>(4)?.map(|v| v as f32),
                excluded: r.get(5)?,
                created_ms: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
