//! The night: one call turns the day's trajectories into a better
//! checkpoint, or keeps the old one and says why.
//!
//! [`run_night`] runs ten stages in order, one module each under
//! `stages/`, and persists the typed [`NightReport`] after every one, so a
//! killed night resumes after the last finished stage: **practice** (when
//! asked: the model writes tasks and attempts them, a program checks);
//! **collect** the messages since the last night; **judge** each request
//! the person made (cut from the record) with the deployed model as reward
//! model, the reward being its probability of "yes" to "is the final
//! answer right?" (`verdict`; a failure the record proves, such as a file
//! asked for that no tool wrote or a sum's figure missing from the answer,
//! gets 0 without asking, and a code asked back and given gets 1:
//! `verifier`, `figure`, `file_facts`;
//! practice episodes bring their checks' verdicts, the
//! person's 👍/👎 and ↻ outrank the judge, and the reviewer's marks
//! apply); **predict** each sub-task's reward and turns
//! with the same model as value model, from the description and similar
//! sub-tasks of *earlier* nights only; **understand** a sampled share of
//! the judged sub-tasks; compute **advantages**; **train** a LoRA with
//! OAPL + ECHO on the recorded tokens (`dataset` builds the sequences and
//! the per-token marks the reviewer shows); **export** a merged q8_0 GGUF;
//! **verify** that llama.cpp loads it, that its perplexity on a fixed text
//! has not regressed and that no practised or held-out family lost more
//! of its fixed tasks than it gained; **deploy** it as the active checkpoint (the previous ones stay
//! for rollback). Progress streams as [`NightEvent`]s; one [`CancelFlag`]
//! stops any stage within seconds. [`NightConfig::load`] reads the
//! user's `night.json` for both shells, and [`Schedule`] decides when a
//! night starts by itself.
//!
//! This crate decides what a night does; it never draws progress and never
//! writes SQL.

pub use reverie_agent::CancelFlag;

mod advantage;
pub mod checkpoint;
mod claims;
mod config;
pub mod dataset;
pub mod episodes;
mod error;
mod estimate;
mod event;
mod feedback;
mod figure;
mod file_facts;
mod grade;
mod grounding;
mod judge;
pub mod lock;
mod practice;
mod preferences;
pub mod report;
mod review;
mod run;
mod stages;
pub mod trigger;
mod value;
mod verdict;
mod verifier;
mod verify;

pub use advantage::advantage;
pub use config::{JudgeModel, NightConfig, NightOverrides, PracticeBatch};
pub use error::NightError;
pub use estimate::{estimate, Estimate};
pub use event::{NightEvent, Stage};
pub use feedback::JudgeAgreement;
pub use judge::{
    channel_windows, judge_window, windows, Asked, JudgeOptions, JudgeWay, JudgedTask, Judgement,
    TaskKind, Window,
};
pub use practice::check_batches;
pub use report::NightReport;
pub use run::{run_night, NightOutcome, NightRun};
pub use trigger::{Observed, Schedule};
pub use value::{predict, MemoryEntry, Prediction, Similarity, ValueMemory};
pub use verify::FamilyCheck;
