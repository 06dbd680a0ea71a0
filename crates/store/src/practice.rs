//! Practice and eval episodes: a task from a verifiable family, the channel
//! the agent attempted it in, and the programmatic check's verdict.

use reverie_core::ChannelId;
use rusqlite::params;
use serde::Serialize;

use crate::error::Result;
use crate::store::{now_ms, Store};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PracticeEpisode {
    pub id: i64,
    pub channel: i64,
    pub family: String,
    pub kind: EpisodeKind,
    pub difficulty: u32,
    pub prompt: String,
    pub expected: String,
    pub passed: bool,
    pub why: String,
    pub created_ms: i64,
}

/// What an episode was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeKind {
    /// An attempt at a task, trained on.
    Practice,
    /// An attempt that only measures, never trained on.
    Eval,
    /// The model proposing a task; `prompt` is the task it proposed.
    Tasker,
}

impl EpisodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EpisodeKind::Practice => "practice",
            EpisodeKind::Eval => "eval",
            EpisodeKind::Tasker => "tasker",
        }
    }

    fn parse(s: &str) -> Option<EpisodeKind> {
        [
            EpisodeKind::Practice,
            EpisodeKind::Eval,
            EpisodeKind::Tasker,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// What a runner records; the store adds the id and the time.
pub struct NewEpisode<'a> {
    pub channel: ChannelId,
    pub family: &'a str,
    pub kind: EpisodeKind,
    pub difficulty: u32,
    pub prompt: &'a str,
    pub expected: &'a str,
    pub passed: bool,
    pub why: &'a str,
}

impl Store {
    pub fn record_episode(&self, e: &NewEpisode<'_>) -> Result<i64> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO practice_episodes
                 (channel_id, family, kind, difficulty, prompt, expected, passed, why, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                e.channel.0,
                e.family,
                e.kind.as_str(),
                e.difficulty,
                e.prompt,
                e.expected,
                e.passed,
                e.why,
                now_ms()
            ],
        )?;
        Ok(conn.last_insert_rowid())
    }

    /// Episodes recorded at or after `since_ms`, oldest first.
    pub fn episodes_since(&self, since_ms: i64) -> Result<Vec<PracticeEpisode>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, channel_id, family, kind, difficulty, prompt, expected, passed, why, created_ms
             FROM practice_episodes WHERE created_ms >= ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([since_ms], |r| {
            Ok(PracticeEpisode {
                id: r.get(0)?,
                channel: r.get(1)?,
                family: r.get(2)?,
                kind: {
                    let kind: String = r.get(3)?;
                    EpisodeKind::parse(&kind).ok_or_else(|| {
                        rusqlite::Error::FromSqlConversionFailure(
                            3,
                            rusqlite::types::Type::Text,
                            format!("unknown episode kind {kind:?}").into(),
                        )
                    })?
                },
                difficulty: r.get(4)?,
                prompt: r.get(5)?,
                expected: r.get(6)?,
                passed: r.get(7)?,
                why: r.get(8)?,
                created_ms: r.get(9)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
