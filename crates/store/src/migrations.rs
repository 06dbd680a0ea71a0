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
];
