//! Schema versions. Each entry upgrades the schema by one; `user_version`
//! records how many have run. Never edit a released entry: add a new one.

pub const MIGRATIONS: &[&str] = &[
    // 1: channels, messages, tokens, tools, blobs, nights, checkpoints.
    r#"
    CREATE TABLE channels (
        id            INTEGER PRIMARY KEY,
        name          TEXT NOT NULL UNIQUE,
        system_prompt TEXT NOT NULL DEFAULT '',
        created_ms    INTEGER NOT NULL
    );
    CREATE TABLE messages (
        id         INTEGER PRIMARY KEY,
        channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
        role       TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        text       TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE INDEX messages_by_channel ON messages(channel_id, id);
    CREATE INDEX messages_by_time ON messages(created_ms);
    CREATE TABLE token_spans (
        message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
        n_tokens   INTEGER NOT NULL,
        ids        BLOB NOT NULL,
        roles      BLOB NOT NULL,
        logprobs   BLOB NOT NULL
    );
    CREATE TABLE tool_calls (
        id          INTEGER PRIMARY KEY,
        message_id  INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        call_id     TEXT NOT NULL,
        name        TEXT NOT NULL,
        arguments   TEXT NOT NULL,
        result      TEXT,
        ok          INTEGER,
        started_ms  INTEGER NOT NULL,
        finished_ms INTEGER,
        UNIQUE (message_id, call_id)
    );
    CREATE TABLE blobs (
        hash       TEXT PRIMARY KEY,
        size       INTEGER NOT NULL,
        name       TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE nights (
        id          INTEGER PRIMARY KEY,
        started_ms  INTEGER NOT NULL,
        finished_ms INTEGER,
        status      TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'cancelled')),
        stage       TEXT NOT NULL DEFAULT '',
        report      TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE checkpoints (
        id         INTEGER PRIMARY KEY,
        path       TEXT NOT NULL,
        sha256     TEXT NOT NULL,
        parent_id  INTEGER REFERENCES checkpoints(id),
        night_id   INTEGER REFERENCES nights(id),
        created_ms INTEGER NOT NULL,
        active     INTEGER NOT NULL DEFAULT 0
    );
    "#,
    // 2: "did you mean to end your turn?" cases, for the night and for a
    // learned detector later.
    r#"
    CREATE TABLE stray_ends (
        message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
        unintended INTEGER NOT NULL,
        created_ms INTEGER NOT NULL
    );
    "#,
    // 3: the agent's tools: per-channel workspace and agent-owned prompt
    // section, file revisions for undo/redo, notes, recipes, the shared
    // board and cached sentence embeddings.
    r#"
    ALTER TABLE channels ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
    ALTER TABLE channels ADD COLUMN agent_section TEXT NOT NULL DEFAULT '';
    CREATE TABLE revisions (
        id         INTEGER PRIMARY KEY,
        workspace  TEXT NOT NULL,
        tool       TEXT NOT NULL,
        summary    TEXT NOT NULL,
        changes    TEXT NOT NULL,
        state      TEXT NOT NULL CHECK (state IN ('done', 'undone', 'dropped')),
        created_ms INTEGER NOT NULL
    );
    CREATE INDEX revisions_by_workspace ON revisions(workspace, id);
    CREATE TABLE notes (
        id         INTEGER PRIMARY KEY,
        title      TEXT NOT NULL,
        body       TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE recipes (
        name       TEXT PRIMARY KEY,
        template   TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE board_posts (
        id         INTEGER PRIMARY KEY,
        board      TEXT NOT NULL,
        author     TEXT NOT NULL,
        text       TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE INDEX board_posts_by_board ON board_posts(board, id);
    CREATE TABLE embeddings (
        model     TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        vector    BLOB NOT NULL,
        PRIMARY KEY (model, text_hash)
    );
    "#,
    // 4: messages retracted by an edit or a regenerate (kept, not shown or
    // replayed), and the reviewer's marks on episodes for the next night.
    r#"
    ALTER TABLE messages ADD COLUMN retracted INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE review_marks (
        id            INTEGER PRIMARY KEY,
        channel_id    INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
        first_message INTEGER NOT NULL,
        last_message  INTEGER NOT NULL,
        reward        REAL CHECK (reward IS NULL OR (reward >= 0 AND reward <= 1)),
        excluded      INTEGER NOT NULL DEFAULT 0,
        created_ms    INTEGER NOT NULL,
        UNIQUE (channel_id, first_message, last_message)
    );
    "#,
    // 5: practice and eval episodes with their programmatic verdicts.
    r#"
    CREATE TABLE practice_episodes (
        id         INTEGER PRIMARY KEY,
        channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
        family     TEXT NOT NULL,
        kind       TEXT NOT NULL CHECK (kind IN ('practice', 'eval')),
        difficulty INTEGER NOT NULL,
        prompt     TEXT NOT NULL,
        expected   TEXT NOT NULL,
        passed     INTEGER NOT NULL,
        why        TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE INDEX practice_by_time ON practice_episodes(created_ms);
    "#,
    // 6: tasker episodes (the model proposing a practice task).
    r#"
    CREATE TABLE practice_episodes_6 (
        id         INTEGER PRIMARY KEY,
        channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
        family     TEXT NOT NULL,
        kind       TEXT NOT NULL CHECK (kind IN ('practice', 'eval', 'tasker')),
        difficulty INTEGER NOT NULL,
        prompt     TEXT NOT NULL,
        expected   TEXT NOT NULL,
        passed     INTEGER NOT NULL,
        why        TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    INSERT INTO practice_episodes_6 SELECT * FROM practice_episodes;
    DROP TABLE practice_episodes;
    ALTER TABLE practice_episodes_6 RENAME TO practice_episodes;
    CREATE INDEX practice_by_time ON practice_episodes(created_ms);
    "#,
    // 7: a call that repeated an earlier call of its turn to no effect is
    // a field, not recognised by the reminder added to its result. Calls
    // recorded before: a reply whose every result message (the tool
    // messages right after it) ended with the reminder.
    r#"
    ALTER TABLE tool_calls ADD COLUMN repeated INTEGER NOT NULL DEFAULT 0;
    UPDATE tool_calls SET repeated = 1 WHERE message_id IN (
        WITH reply_results AS (
            SELECT r.id AS reply, t.text AS text
            FROM messages r JOIN messages t
              ON t.channel_id = r.channel_id AND t.id > r.id AND t.role = 'tool'
            WHERE r.role = 'assistant'
              AND NOT EXISTS (SELECT 1 FROM messages x
                              WHERE x.channel_id = r.channel_id AND x.id > r.id
                                AND x.id < t.id AND x.role <> 'tool')
        )
        SELECT reply FROM reply_results GROUP BY reply
        HAVING MIN(substr(text, -length('(Same call and result as earlier in this turn: use it and answer.)')) = '(Same call and result as earlier in this turn: use it and answer.)') = 1
    );
    "#,
    // 8: a person's verdict on an assistant reply (thumbs up or down); it
    // becomes the reward of the sub-task the reply ends.
    r#"
    CREATE TABLE feedback (
        message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
        good       INTEGER NOT NULL CHECK (good IN (0, 1)),
        created_ms INTEGER NOT NULL
    );
    "#,
    // 9: channel ids are never reused: a new channel must not inherit a
    // deleted one's workspace, undo history or jobs.
    r#"
    CREATE TABLE channel_ids (last INTEGER NOT NULL);
    INSERT INTO channel_ids SELECT COALESCE(MAX(id), 0) FROM channels;
    "#,
    // 10: when a note was last recalled, so recall can prefer what is
    // both relevant and recent; notes the routine cleaning took away are
    // hidden, not deleted, and each cleaning change is recorded so it can
    // be undone.
    r#"
    ALTER TABLE notes ADD COLUMN used_ms INTEGER;
    ALTER TABLE notes ADD COLUMN hidden_ms INTEGER;
    CREATE TABLE note_changes (
        id         INTEGER PRIMARY KEY,
        at_ms      INTEGER NOT NULL,
        what       TEXT NOT NULL,
        removed    TEXT NOT NULL,
        added      INTEGER,
        undone_ms  INTEGER
    );
    "#,
    // 11: images the model saw, numbered: every position of an image in a
    // token sequence carries the negative of its number, and the number
    // leads to the blob, so a conversation replays whatever became of the
    // file it came from; and the files each call showed in the chat.
    r#"
    CREATE TABLE images (
        number INTEGER PRIMARY KEY,
        hash   TEXT NOT NULL UNIQUE REFERENCES blobs(hash)
    );
    -- The files a call showed in the chat (JSON: blob, name, image), so a
    -- channel opened again shows them where they were.
    ALTER TABLE tool_calls ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]';
    "#,
];

#[cfg(test)]
mod tests {
    use super::MIGRATIONS;

    /// Calls recorded before the `repeated` field: a reply whose every
    /// result carried the reminder is flagged, others are not.
    #[test]
    fn calls_repeated_before_the_field_existed_are_flagged_from_their_results() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..6] {
            conn.execute_batch(sql).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO channels (id, name, created_ms) VALUES (1, 'c', 0);
             INSERT INTO messages (id, channel_id, role, text, created_ms) VALUES
               (1, 1, 'user', '2+2?', 0),
               (2, 1, 'assistant', 'call', 0),
               (3, 1, 'tool', '2+2 = 4', 0),
               (4, 1, 'assistant', 'call', 0),
               (5, 1, 'tool', '2+2 = 4

(Same call and result as earlier in this turn: use it and answer.)', 0),
               (6, 1, 'assistant', 'two calls', 0),
               (7, 1, 'tool', 'x

(Same call and result as earlier in this turn: use it and answer.)', 0),
               (8, 1, 'tool', 'fresh', 0),
               (9, 1, 'assistant', '4', 0);
             INSERT INTO tool_calls (message_id, call_id, name, arguments, started_ms) VALUES
               (2, 'call_1', 'calculator', '{}', 0),
               (4, 'call_1', 'calculator', '{}', 0),
               (6, 'call_1', 'calculator', '{}', 0),
               (6, 'call_2', 'calculator', '{}', 0);",
        )
        .unwrap();
        conn.execute_batch(MIGRATIONS[6]).unwrap();
        let flagged: Vec<(i64, String)> = conn
            .prepare("SELECT message_id, call_id FROM tool_calls WHERE repeated = 1")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(flagged, [(4, "call_1".to_string())]);
    }
}
