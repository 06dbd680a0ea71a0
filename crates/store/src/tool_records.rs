//! What the agent's tools keep: channel workspaces and prompt sections, file
//! revisions, notes, recipes, the shared board and the embedding cache.

use reverie_core::ChannelId;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

use crate::error::{Result, StoreError};
use crate::records::{BoardPost, Note, NoteChange, Revision, RevisionState};
use crate::store::{now_ms, Store};

fn revision_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Revision> {
    Ok(Revision {
        id: r.get(0)?,
        workspace: r.get(1)?,
        tool: r.get(2)?,
        summary: r.get(3)?,
        changes: r.get(4)?,
        state: RevisionState::parse(&r.get::<_, String>(5)?),
        created_ms: r.get(6)?,
    })
}

const REVISION_COLUMNS: &str = "id, workspace, tool, summary, changes, state, created_ms";

impl Store {
    // ---- channel workspace and agent-owned prompt section ------------------

    pub fn set_workspace(&self, id: ChannelId, workspace: &str) -> Result<()> {
        self.update_channel_column("workspace", id, workspace)
    }

    pub fn set_agent_section(&self, id: ChannelId, section: &str) -> Result<()> {
        self.update_channel_column("agent_section", id, section)
    }

    fn update_channel_column(
        &self,
        column: &'static str,
        id: ChannelId,
        value: &str,
    ) -> Result<()> {
        let sql = format!("UPDATE channels SET {column} = ?1 WHERE id = ?2");
        let n = self.conn().execute(&sql, params![value, id.0])?;
        if n == 0 {
            return Err(StoreError::NoSuchChannelId(id.0));
        }
        Ok(())
    }

    // ---- file revisions (undo / redo) ---------------------------------------

    /// Records an applied revision; anything undone in `workspace` stops
    /// being redoable, as in every editor.
    pub fn push_revision(
        &self,
        workspace: &str,
        tool: &str,
        summary: &str,
        changes: &str,
    ) -> Result<i64> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "UPDATE revisions SET state = 'dropped' WHERE workspace = ?1 AND state = 'undone'",
            [workspace],
        )?;
        tx.execute(
            "INSERT INTO revisions (workspace, tool, summary, changes, state, created_ms)
             VALUES (?1, ?2, ?3, ?4, 'done', ?5)",
            params![workspace, tool, summary, changes, now_ms()],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// The revision the next undo reverts: the newest applied one.
    pub fn undo_candidate(&self, workspace: &str) -> Result<Option<Revision>> {
        self.first_revision(workspace, RevisionState::Done, "DESC")
    }

    /// The revision the next redo re-applies: the oldest undone one.
    pub fn redo_candidate(&self, workspace: &str) -> Result<Option<Revision>> {
        self.first_revision(workspace, RevisionState::Undone, "ASC")
    }

    fn first_revision(
        &self,
        workspace: &str,
        state: RevisionState,
        order: &'static str,
    ) -> Result<Option<Revision>> {
        let sql = format!(
            "SELECT {REVISION_COLUMNS} FROM revisions
             WHERE workspace = ?1 AND state = ?2 ORDER BY id {order} LIMIT 1"
        );
        Ok(self
            .conn()
            .query_row(&sql, params![workspace, state.as_str()], revision_row)
            .optional()?)
    }

    pub fn set_revision_state(&self, id: i64, state: RevisionState) -> Result<()> {
        let n = self.conn().execute(
            "UPDATE revisions SET state = ?1 WHERE id = ?2",
            params![state.as_str(), id],
        )?;
        if n == 0 {
            return Err(StoreError::NotFound {
                what: "revision",
                id,
            });
        }
        Ok(())
    }

    /// Every revision of `workspace`, oldest first.
    pub fn revisions(&self, workspace: &str) -> Result<Vec<Revision>> {
        let conn = self.conn();
        let sql =
            format!("SELECT {REVISION_COLUMNS} FROM revisions WHERE workspace = ?1 ORDER BY id");
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([workspace], revision_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    // ---- notes -------------------------------------------------------------

    pub fn add_note(&self, title: &str, body: &str) -> Result<i64> {
        self.add_note_at(title, body, now_ms())
    }

    /// A note written at `created_ms` (notes brought over with their dates).
    pub fn add_note_at(&self, title: &str, body: &str, created_ms: i64) -> Result<i64> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO notes (title, body, created_ms) VALUES (?1, ?2, ?3)",
            params![title, body, created_ms],
        )?;
        Ok(conn.last_insert_rowid())
    }

    /// Records one cleaning change in one transaction: hides `removed`,
    /// writes `added` (title, body) if given.
    pub fn change_notes(
        &self,
        what: &str,
        removed: &[i64],
        added: Option<(&str, &str)>,
    ) -> Result<NoteChange> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let at = now_ms();
        for id in removed {
            tx.execute(
                "UPDATE notes SET hidden_ms = ?1 WHERE id = ?2 AND hidden_ms IS NULL",
                params![at, id],
            )?;
        }
        let added = match added {
            Some((title, body)) => {
                tx.execute(
                    "INSERT INTO notes (title, body, created_ms) VALUES (?1, ?2, ?3)",
                    params![title, body, at],
                )?;
                Some(tx.last_insert_rowid())
            }
            None => None,
        };
        let ids = serde_json::to_string(removed).expect("ids serialize");
        tx.execute(
            "INSERT INTO note_changes (at_ms, what, removed, added) VALUES (?1, ?2, ?3, ?4)",
            params![at, what, ids, added],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(NoteChange {
            id,
            at_ms: at,
            what: what.to_string(),
            removed: removed.to_vec(),
            added,
            undone_ms: None,
        })
    }

    /// Every cleaning change, oldest first.
    pub fn note_changes(&self) -> Result<Vec<NoteChange>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, at_ms, what, removed, added, undone_ms FROM note_changes ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            let removed: String = r.get(3)?;
            Ok(NoteChange {
                id: r.get(0)?,
                at_ms: r.get(1)?,
                what: r.get(2)?,
                removed: serde_json::from_str(&removed).unwrap_or_default(),
                added: r.get(4)?,
                undone_ms: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Undoes cleaning change `id`: its hidden notes come back and the note
    /// it wrote goes.
    pub fn undo_note_change(&self, id: i64) -> Result<NoteChange> {
        let change = self
            .note_changes()?
            .into_iter()
            .find(|c| c.id == id && c.undone_ms.is_none())
            .ok_or(StoreError::NotFound {
                what: "note change not yet undone",
                id,
            })?;
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for n in &change.removed {
            tx.execute("UPDATE notes SET hidden_ms = NULL WHERE id = ?1", [n])?;
        }
        if let Some(a) = change.added {
            tx.execute("DELETE FROM notes WHERE id = ?1", [a])?;
        }
        tx.execute(
            "UPDATE note_changes SET undone_ms = ?1 WHERE id = ?2",
            params![now_ms(), id],
        )?;
        tx.commit()?;
        Ok(change)
    }

    pub fn notes(&self) -> Result<Vec<Note>> {
        self.query_notes("WHERE hidden_ms IS NULL")
    }

    /// Every note ever saved, those a cleaning hid included, oldest first.
    pub fn every_note(&self) -> Result<Vec<Note>> {
        self.query_notes("")
    }

    /// The notes `filter` (a WHERE clause or nothing) keeps, oldest first.
    fn query_notes(&self, filter: &str) -> Result<Vec<Note>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT id, title, body, created_ms, used_ms FROM notes {filter} ORDER BY id"
        ))?;
        let rows = stmt.query_map([], |r| {
            Ok(Note {
                id: r.get(0)?,
                title: r.get(1)?,
                body: r.get(2)?,
                created_ms: r.get(3)?,
                used_ms: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Marks notes `ids` as recalled now.
    pub fn touch_notes(&self, ids: &[i64]) -> Result<()> {
        let conn = self.conn();
        let at = now_ms();
        for id in ids {
            conn.execute(
                "UPDATE notes SET used_ms = ?1 WHERE id = ?2",
                params![at, id],
            )?;
        }
        Ok(())
    }

    pub fn delete_note(&self, id: i64) -> Result<()> {
        let n = self
            .conn()
            .execute("DELETE FROM notes WHERE id = ?1", [id])?;
        if n == 0 {
            return Err(StoreError::NotFound { what: "note", id });
        }
        Ok(())
    }

    // ---- recipes -----------------------------------------------------------

    /// Saves (or replaces) the text template `name`.
    pub fn save_recipe(&self, name: &str, template: &str) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO recipes (name, template, created_ms) VALUES (?1, ?2, ?3)",
            params![name, template, now_ms()],
        )?;
        Ok(())
    }

    pub fn recipe(&self, name: &str) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT template FROM recipes WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Recipe names with their templates, by name.
    pub fn recipes(&self) -> Result<Vec<(String, String)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT name, template FROM recipes ORDER BY name")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    // ---- the board shared by channels --------------------------------------

    pub fn post_to_board(&self, board: &str, author: &str, text: &str) -> Result<i64> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO board_posts (board, author, text, created_ms) VALUES (?1, ?2, ?3, ?4)",
            params![board, author, text, now_ms()],
        )?;
        Ok(conn.last_insert_rowid())
    }

    /// Posts on `board` with an id above `after`, oldest first, at most `limit`.
    pub fn board_posts(&self, board: &str, after: i64, limit: usize) -> Result<Vec<BoardPost>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, board, author, text, created_ms FROM board_posts
             WHERE board = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![board, after, limit as i64], |r| {
            Ok(BoardPost {
                id: r.get(0)?,
                board: r.get(1)?,
                author: r.get(2)?,
                text: r.get(3)?,
                created_ms: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    // ---- embedding cache ---------------------------------------------------

    /// The cached embedding of the text whose hash is `text_hash` under
    /// `model`, if any.
    pub fn cached_embedding(&self, model: &str, text_hash: &str) -> Result<Option<Vec<f32>>> {
        let bytes: Option<Vec<u8>> = self
            .conn()
            .query_row(
                "SELECT vector FROM embeddings WHERE model = ?1 AND text_hash = ?2",
                params![model, text_hash],
                |r| r.get(0),
            )
            .optional()?;
        Ok(bytes.map(|b| {
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        }))
    }

    pub fn cache_embedding(&self, model: &str, text_hash: &str, vector: &[f32]) -> Result<()> {
        let bytes: Vec<u8> = vector.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.conn().execute(
            "INSERT OR REPLACE INTO embeddings (model, text_hash, vector) VALUES (?1, ?2, ?3)",
            params![model, text_hash, bytes],
        )?;
        Ok(())
    }
}
