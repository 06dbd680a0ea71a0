//! Durable storage: one SQLite database (WAL, foreign keys, versioned
//! migrations) and a content-addressed blob folder.
//!
//! This crate owns every byte of SQL in Reverie; other crates see only typed
//! methods on [`Store`]. A write is durable when its method returns
//! (`synchronous = FULL`), so a crash or `kill -9` never loses a message the
//! caller was told about. It must never decide *what* to store: callers pass
//! domain types from `reverie-core`.
//!
//! ```
//! use reverie_core::{Home, MessageRole, TokenRole, TokenSpan};
//! use reverie_store::Store;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(&Home::new(dir.path())).unwrap();
//! let ch = store.ensure_channel("general").unwrap();
//! let mut tokens = TokenSpan::default();
//! tokens.push(42, TokenRole::User, None);
//! store.append_message(ch, MessageRole::User, "hi", &tokens).unwrap();
//! assert_eq!(store.messages(ch).unwrap()[0].tokens, tokens);
//! ```

mod blobs;
mod codec;
mod error;
mod feedback;
mod migrations;
mod practice;
mod records;
mod review;
mod store;
mod tool_records;

pub use blobs::BlobHash;
pub use error::StoreError;
pub use feedback::Feedback;
pub use practice::{EpisodeKind, NewEpisode, PracticeEpisode};
pub use records::{
    BoardPost, CallAttachment, Channel, Checkpoint, Night, NightStatus, Note, NoteChange, Revision,
    RevisionState, ToolCall,
};
pub use review::ReviewMark;
pub use store::Store;
