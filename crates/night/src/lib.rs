//! The night: one call turns the day's trajectories into a better
//! checkpoint, or keeps the old one and says why.
//!
//! Stages, each persisted in the night's record so a killed night resumes
//! after the last completed one: **collect** the messages since the last
//! night; **judge** them in windows of ten messages with the deployed model
//! as reward model (grammar-constrained JSON, retried, skipped with a logged
//! reason when still invalid); **predict** each sub-task's reward and turns
//! with the same model as value model, from the description and similar
//! sub-tasks of *earlier* nights only; compute **advantages**; **train** a
//! LoRA with OAPL + ECHO on the recorded tokens; **export** a merged q8_0
//! GGUF; **verify** it loads in llama.cpp and that its perplexity on a fixed
//! text has not regressed; **deploy** it as the active checkpoint (the
//! previous ones stay for rollback). Progress streams as [`NightEvent`]s.
//! Spans a person excluded or re-rewarded in the reviewer are applied right
//! after judging. Practice episodes skip the judge (their check is the
//! reward); eval episodes are never trained on.
//!
//! This crate decides what a night does; it never draws progress and never
//! writes SQL.

mod advantage;
pub mod checkpoint;
mod config;
mod error;
mod event;
mod judge;
pub mod lock;
mod pipeline;
mod practice;
mod review;
pub mod trigger;
mod value;
mod verify;

pub use advantage::advantage;
pub use config::{NightConfig, PracticeBatch};
pub use error::NightError;
pub use event::{NightEvent, Stage};
pub use judge::{JudgedTask, Window};
pub use pipeline::{run_night, NightOutcome};
pub use practice::check_batches;
pub use value::{predict, MemoryEntry, Prediction, Similarity, ValueMemory};
