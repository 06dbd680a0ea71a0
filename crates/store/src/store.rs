//! The typed API over the database.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use reverie_core::{ChannelId, Home, Message, MessageId, MessageRole, TokenSpan};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::blobs::{self, BlobHash};
use crate::codec;
use crate::error::{Result, StoreError};
use crate::migrations::MIGRATIONS;
use crate::records::{CallAttachment, Channel, Checkpoint, Night, NightStatus, ToolCall};

/// Reverie's database and blob folder. Cheap to share behind an `Arc`; calls
/// are serialized on one connection.
pub struct Store {
    conn: Mutex<Connection>,
    blobs: PathBuf,
    path: PathBuf,
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Store {
    /// Opens (creating if needed) the database and blob folder of `home`.
    pub fn open(home: &Home) -> Result<Store> {
        std::fs::create_dir_all(home.root()).map_err(|source| StoreError::Blob {
            path: home.root().to_path_buf(),
            source,
        })?;
        Store::open_at(&home.database(), &home.blobs())
    }

    pub fn open_at(db: &Path, blobs: &Path) -> Result<Store> {
        let open_err = |source| StoreError::Open {
            path: db.to_path_buf(),
            source,
        };
        let mut conn = Connection::open(db).map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(open_err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             PRAGMA foreign_keys = ON;",
        )
        .map_err(open_err)?;
        migrate(&mut conn)?;
        Ok(Store {
            conn: Mutex::new(conn),
            blobs: blobs.to_path_buf(),
            path: db.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite half-written:
        // every write is one transaction.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Schema version (number of migrations applied).
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// `PRAGMA integrity_check`; `Ok(())` when the database is sound.
    pub fn integrity_check(&self) -> Result<std::result::Result<(), String>> {
        let msg: String = self
            .conn()
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        Ok(if msg == "ok" { Ok(()) } else { Err(msg) })
    }

    // ---- channels ---------------------------------------------------------

    pub fn create_channel(&self, name: &str) -> Result<ChannelId> {
        let name = reverie_core::channel_name(name)?;
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        // Ids come from a counter that only grows (never max(id) + 1).
        let id: i64 = tx.query_row(
            "UPDATE channel_ids SET last = MAX(last, (SELECT COALESCE(MAX(id), 0) FROM channels)) + 1
             RETURNING last",
            [],
            |r| r.get(0),
        )?;
        let res = tx.execute(
            "INSERT INTO channels (id, name, created_ms) VALUES (?1, ?2, ?3)",
            params![id, name, now_ms()],
        );
        match res.and_then(|_| tx.commit()) {
            Ok(()) => Ok(ChannelId(id)),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Err(StoreError::ChannelExists(name.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The channel called `name`, created if it does not exist.
    pub fn ensure_channel(&self, name: &str) -> Result<ChannelId> {
        let name = reverie_core::channel_name(name)?;
        match self.channel_by_name(name)? {
            Some(c) => Ok(c.id),
            None => self.create_channel(name),
        }
    }

    pub fn channel_by_name(&self, name: &str) -> Result<Option<Channel>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT id, name, system_prompt, created_ms, workspace, agent_section FROM channels WHERE name = ?1",
                [name],
                channel_row,
            )
            .optional()?)
    }

    pub fn channel(&self, id: ChannelId) -> Result<Channel> {
        self.conn()
            .query_row(
                "SELECT id, name, system_prompt, created_ms, workspace, agent_section FROM channels WHERE id = ?1",
                [id.0],
                channel_row,
            )
            .optional()?
            .ok_or(StoreError::NoSuchChannelId(id.0))
    }

    pub fn channels(&self) -> Result<Vec<Channel>> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare("SELECT id, name, system_prompt, created_ms, workspace, agent_section FROM channels ORDER BY id")?;
        let rows = stmt.query_map([], channel_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn rename_channel(&self, id: ChannelId, name: &str) -> Result<()> {
        let name = reverie_core::channel_name(name)?;
        let n = self
            .conn()
            .execute(
                "UPDATE channels SET name = ?1 WHERE id = ?2",
                params![name, id.0],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::ChannelExists(name.to_string())
                }
                e => e.into(),
            })?;
        if n == 0 {
            return Err(StoreError::NoSuchChannelId(id.0));
        }
        Ok(())
    }

    pub fn set_system_prompt(&self, id: ChannelId, prompt: &str) -> Result<()> {
        let n = self.conn().execute(
            "UPDATE channels SET system_prompt = ?1 WHERE id = ?2",
            params![prompt, id.0],
        )?;
        if n == 0 {
            return Err(StoreError::NoSuchChannelId(id.0));
        }
        Ok(())
    }

    /// Deletes a channel with its messages, tokens and tool calls.
    pub fn delete_channel(&self, id: ChannelId) -> Result<()> {
        let n = self
            .conn()
            .execute("DELETE FROM channels WHERE id = ?1", [id.0])?;
        if n == 0 {
            return Err(StoreError::NoSuchChannelId(id.0));
        }
        Ok(())
    }

    // ---- messages ---------------------------------------------------------

    /// Appends a message and its tokens in one transaction; durable on return.
    pub fn append_message(
        &self,
        channel: ChannelId,
        role: MessageRole,
        text: &str,
        tokens: &TokenSpan,
    ) -> Result<MessageId> {
        if !tokens.is_consistent() {
            return Err(StoreError::InconsistentSpan {
                ids: tokens.ids.len(),
                roles: tokens.roles.len(),
                logprobs: tokens.logprobs.len(),
            });
        }
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let exists: bool = tx
            .query_row("SELECT 1 FROM channels WHERE id = ?1", [channel.0], |_| {
                Ok(true)
            })
            .optional()?
            .unwrap_or(false);
        if !exists {
            return Err(StoreError::NoSuchChannelId(channel.0));
        }
        tx.execute(
            "INSERT INTO messages (channel_id, role, text, created_ms) VALUES (?1, ?2, ?3, ?4)",
            params![channel.0, role.as_str(), text, now_ms()],
        )?;
        let id = tx.last_insert_rowid();
        let (ids, roles, logprobs) = codec::encode(tokens);
        tx.execute(
            "INSERT INTO token_spans (message_id, n_tokens, ids, roles, logprobs)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, tokens.len() as i64, ids, roles, logprobs],
        )?;
        tx.commit()?;
        Ok(MessageId(id))
    }

    /// Every message of a channel, oldest first, with its tokens.
    pub fn messages(&self, channel: ChannelId) -> Result<Vec<Message>> {
        self.query_messages("WHERE m.channel_id = ?1 AND m.retracted = 0", [channel.0])
    }

    /// The messages of a channel that a regenerate or an edit took back,
    /// oldest first, with their tokens: what the person did not keep.
    pub fn retracted_messages(&self, channel: ChannelId) -> Result<Vec<Message>> {
        self.query_messages("WHERE m.channel_id = ?1 AND m.retracted = 1", [channel.0])
    }

    /// Messages of every channel created at or after `since_ms`.
    pub fn messages_since(&self, since_ms: i64) -> Result<Vec<Message>> {
        self.query_messages("WHERE m.created_ms >= ?1 AND m.retracted = 0", [since_ms])
    }

    /// When the newest message was written (ms since the epoch), if any.
    pub fn last_message_ms(&self) -> Result<Option<i64>> {
        Ok(self
            .conn()
            .query_row("SELECT MAX(created_ms) FROM messages", [], |r| r.get(0))?)
    }

    /// When the latest night started (none yet: `None`), without reading
    /// any night's report.
    pub fn last_night_started_ms(&self) -> Result<Option<i64>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT started_ms FROM nights ORDER BY id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Tokens of the channel's conversation as the model sees it: every
    /// message that was not taken back.
    pub fn context_tokens(&self, channel: ChannelId) -> Result<u64> {
        let n: i64 = self.conn().query_row(
            "SELECT COALESCE(SUM(t.n_tokens), 0) FROM messages m JOIN token_spans t ON t.message_id = m.id
             WHERE m.channel_id = ?1 AND m.retracted = 0
               AND m.id >= COALESCE((SELECT MAX(id) FROM messages
                                     WHERE channel_id = ?1 AND role = 'system' AND retracted = 0), 0)",
            [channel.0],
            |r| r.get(0),
        )?;
        Ok(n.max(0) as u64)
    }

    pub fn message_count(&self) -> Result<i64> {
        Ok(self
            .conn()
            .query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0))?)
    }

    fn query_messages(&self, filter: &str, arg: [i64; 1]) -> Result<Vec<Message>> {
        let conn = self.conn();
        let sql = format!(
            "SELECT m.id, m.channel_id, m.role, m.text, m.created_ms,
                    t.n_tokens, t.ids, t.roles, t.logprobs
             FROM messages m LEFT JOIN token_spans t ON t.message_id = m.id
             {filter} ORDER BY m.id"
        );
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query(arg)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            let role: String = r.get(2)?;
            let n: Option<i64> = r.get(5)?;
            let tokens = match n {
                None => TokenSpan::default(),
                Some(n) => {
                    let ids: Vec<u8> = r.get(6)?;
                    let roles: Vec<u8> = r.get(7)?;
                    let lps: Vec<u8> = r.get(8)?;
                    codec::decode(n as usize, &ids, &roles, &lps)
                        .ok_or(StoreError::CorruptTokens(id))?
                }
            };
            out.push(Message {
                id: MessageId(id),
                channel: ChannelId(r.get(1)?),
                role: role.parse().map_err(|_| StoreError::CorruptTokens(id))?,
                text: r.get(3)?,
                created_ms: r.get(4)?,
                tokens,
            });
        }
        Ok(out)
    }

    // ---- tool calls -------------------------------------------------------

    pub fn record_tool_call(
        &self,
        message: MessageId,
        call_id: &str,
        name: &str,
        arguments: &str,
    ) -> Result<()> {
        self.conn().execute(
            "INSERT INTO tool_calls (message_id, call_id, name, arguments, started_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![message.0, call_id, name, arguments, now_ms()],
        )?;
        Ok(())
    }

    pub fn finish_tool_call(
        &self,
        message: MessageId,
        call_id: &str,
        ok: bool,
        result: &str,
    ) -> Result<()> {
        let n = self.conn().execute(
            "UPDATE tool_calls SET ok = ?1, result = ?2, finished_ms = ?3
             WHERE message_id = ?4 AND call_id = ?5",
            params![ok, result, now_ms(), message.0, call_id],
        )?;
        one_call(n, message)
    }

    /// Records the files call `call_id` of reply `message` showed in the chat.
    pub fn set_call_attachments(
        &self,
        message: MessageId,
        call_id: &str,
        attachments: &[CallAttachment],
    ) -> Result<()> {
        let json = serde_json::to_string(attachments).expect("attachments serialize");
        let n = self.conn().execute(
            "UPDATE tool_calls SET attachments = ?1 WHERE message_id = ?2 AND call_id = ?3",
            params![json, message.0, call_id],
        )?;
        one_call(n, message)
    }

    /// Records that call `call_id` of reply `message` repeated an earlier
    /// call of its turn to no effect (same arguments, same result).
    pub fn mark_repeated_call(&self, message: MessageId, call_id: &str) -> Result<()> {
        let n = self.conn().execute(
            "UPDATE tool_calls SET repeated = 1 WHERE message_id = ?1 AND call_id = ?2",
            params![message.0, call_id],
        )?;
        one_call(n, message)
    }

    /// The replies of `channel` whose every call repeated an earlier call
    /// of its turn to no effect.
    pub fn replies_repeating_calls(&self, channel: ChannelId) -> Result<Vec<MessageId>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT c.message_id FROM tool_calls c JOIN messages m ON m.id = c.message_id
             WHERE m.channel_id = ?1 GROUP BY c.message_id HAVING MIN(c.repeated) = 1
             ORDER BY c.message_id",
        )?;
        let rows = stmt.query_map([channel.0], |r| Ok(MessageId(r.get(0)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn tool_calls(&self, message: MessageId) -> Result<Vec<ToolCall>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT message_id, call_id, name, arguments, result, ok, attachments
             FROM tool_calls WHERE message_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([message.0], |r| {
            let attachments: String = r.get(6)?;
            Ok(ToolCall {
                message: MessageId(r.get(0)?),
                call_id: r.get(1)?,
                name: r.get(2)?,
                arguments: r.get(3)?,
                result: r.get(4)?,
                ok: r.get(5)?,
                // Written by this module only; unreadable means none.
                attachments: serde_json::from_str(&attachments).unwrap_or_default(),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    // ---- stray ends of turn ----------------------------------------------

    /// Records that the reply `message` ended its turn looking unfinished and
    /// whether the model then said the end was unintended.
    pub fn record_stray_end(&self, message: MessageId, unintended: bool) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO stray_ends (message_id, unintended, created_ms) VALUES (?1, ?2, ?3)",
            params![message.0, unintended, now_ms()],
        )?;
        Ok(())
    }

    /// Replies of `channel` whose end of turn the model called unintended.
    pub fn unintended_ends(&self, channel: ChannelId) -> Result<Vec<MessageId>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT s.message_id FROM stray_ends s JOIN messages m ON m.id = s.message_id
             WHERE m.channel_id = ?1 AND s.unintended = 1 ORDER BY s.message_id",
        )?;
        let rows = stmt.query_map([channel.0], |r| Ok(MessageId(r.get(0)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    // ---- blobs ------------------------------------------------------------

    /// Stores `bytes` (once per content) and returns its hash.
    pub fn put_blob(&self, name: &str, bytes: &[u8]) -> Result<BlobHash> {
        let hash = blobs::write(&self.blobs, bytes)?;
        self.conn().execute(
            "INSERT OR IGNORE INTO blobs (hash, size, name, created_ms) VALUES (?1, ?2, ?3, ?4)",
            params![hash.0, bytes.len() as i64, name, now_ms()],
        )?;
        Ok(hash)
    }

    /// Reads a blob back, checking its hash.
    pub fn blob(&self, hash: &BlobHash) -> Result<Vec<u8>> {
        blobs::read(&self.blobs, hash)
    }

    pub fn blob_path(&self, hash: &BlobHash) -> PathBuf {
        blobs::path_of(&self.blobs, hash)
    }

    /// The number of the image stored as blob `hash` (given on first use),
    /// which its positions in a token sequence carry.
    pub fn image_number(&self, hash: &BlobHash) -> Result<u32> {
        let conn = self.conn();
        conn.execute(
            "INSERT OR IGNORE INTO images (hash) VALUES (?1)",
            params![hash.0],
        )?;
        let n: i64 = conn.query_row(
            "SELECT number FROM images WHERE hash = ?1",
            params![hash.0],
            |r| r.get(0),
        )?;
        Ok(n as u32)
    }

    /// The blob of image `number`.
    pub fn image_blob(&self, number: u32) -> Result<BlobHash> {
        self.conn()
            .query_row(
                "SELECT hash FROM images WHERE number = ?1",
                params![number as i64],
                |r| r.get(0),
            )
            .optional()?
            .map(BlobHash)
            .ok_or(StoreError::NotFound {
                what: "image",
                id: number as i64,
            })
    }

    /// The bytes of image `number`, checked against their hash.
    pub fn image(&self, number: u32) -> Result<Vec<u8>> {
        self.blob(&self.image_blob(number)?)
    }

    // ---- nights and checkpoints -------------------------------------------

    pub fn start_night(&self) -> Result<i64> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO nights (started_ms, status) VALUES (?1, 'running')",
            [now_ms()],
        )?;
        Ok(conn.last_insert_rowid())
    }

    pub fn update_night(
        &self,
        id: i64,
        status: NightStatus,
        stage: &str,
        report: &serde_json::Value,
    ) -> Result<()> {
        let finished = (status != NightStatus::Running).then(now_ms);
        let n = self.conn().execute(
            "UPDATE nights SET status = ?1, stage = ?2, report = ?3,
                    finished_ms = COALESCE(?4, finished_ms) WHERE id = ?5",
            params![status.as_str(), stage, report.to_string(), finished, id],
        )?;
        if n == 0 {
            return Err(StoreError::NotFound { what: "night", id });
        }
        Ok(())
    }

    pub fn nights(&self) -> Result<Vec<Night>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, started_ms, finished_ms, status, stage, report FROM nights ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            let status: String = r.get(3)?;
            let report: String = r.get(5)?;
            Ok(Night {
                id: r.get(0)?,
                started_ms: r.get(1)?,
                finished_ms: r.get(2)?,
                status: NightStatus::parse(&status),
                stage: r.get(4)?,
                report: serde_json::from_str(&report).unwrap_or(serde_json::Value::Null),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Records a checkpoint file; it becomes active if `activate`.
    pub fn add_checkpoint(
        &self,
        path: &str,
        sha256: &str,
        night: Option<i64>,
        activate: bool,
    ) -> Result<i64> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let parent: Option<i64> = tx
            .query_row("SELECT id FROM checkpoints WHERE active = 1", [], |r| {
                r.get(0)
            })
            .optional()?;
        tx.execute(
            "INSERT INTO checkpoints (path, sha256, parent_id, night_id, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![path, sha256, parent, night, now_ms()],
        )?;
        let id = tx.last_insert_rowid();
        if activate {
            tx.execute("UPDATE checkpoints SET active = (id = ?1)", [id])?;
        }
        tx.commit()?;
        Ok(id)
    }

    /// Makes checkpoint `id` the active one (rollback or roll forward).
    pub fn activate_checkpoint(&self, id: i64) -> Result<Checkpoint> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let exists = tx
            .query_row("SELECT 1 FROM checkpoints WHERE id = ?1", [id], |_| Ok(()))
            .optional()?
            .is_some();
        if !exists {
            return Err(StoreError::NotFound {
                what: "checkpoint",
                id,
            });
        }
        tx.execute("UPDATE checkpoints SET active = (id = ?1)", [id])?;
        tx.commit()?;
        drop(conn);
        self.checkpoints()?
            .into_iter()
            .find(|c| c.id == id)
            .ok_or(StoreError::NotFound {
                what: "checkpoint",
                id,
            })
    }

    pub fn checkpoints(&self) -> Result<Vec<Checkpoint>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, path, sha256, parent_id, night_id, created_ms, active
             FROM checkpoints ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Checkpoint {
                id: r.get(0)?,
                path: r.get(1)?,
                sha256: r.get(2)?,
                parent: r.get(3)?,
                night: r.get(4)?,
                created_ms: r.get(5)?,
                active: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

fn channel_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Channel> {
    Ok(Channel {
        id: ChannelId(r.get(0)?),
        name: r.get(1)?,
        system_prompt: r.get(2)?,
        created_ms: r.get(3)?,
        workspace: r.get(4)?,
        agent_section: r.get(5)?,
    })
}

/// An update that should have found one call of `message`.
fn one_call(updated: usize, message: MessageId) -> Result<()> {
    if updated == 0 {
        return Err(StoreError::NotFound {
            what: "tool call of message",
            id: message.0,
        });
    }
    Ok(())
}

fn migrate(conn: &mut Connection) -> Result<()> {
    let known = MIGRATIONS.len() as i64;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Exclusive)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > known {
        return Err(StoreError::SchemaTooNew {
            found: version,
            known,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tracing::info!(version = i + 1, "applying database migration");
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    tx.commit()?;
    Ok(())
}
