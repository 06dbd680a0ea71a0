//! Practice: task families whose answers a program can check, so the agent
//! can be rewarded without a judge. Four families: `arithmetic` (a chain of
//! operations, with the `calculator` tool), `strings` (composed text
//! transformations), `ledger` (bookkeeping in a CSV file through the file
//! tools) and `units` (unit conversions), which is held out: never trained
//! on, only measured, to see whether training on the others helps or hurts
//! in general.
//!
//! [`run`] gives the agent `n` fresh tasks of a family, each in its own
//! channel with only that family's tools, checks every final answer and
//! records the verdict. Practice episodes are trained on by the next night
//! with the verdict as their reward; eval episodes never are.

mod check;
pub mod days;
mod family;
mod paired;
mod runner;
pub mod tasker;

pub use check::{check, Verdict};
pub use family::{Family, Task};
pub use paired::{paired, Outcome, Paired};
pub use runner::{
    eval_params, fresh_seed, next_difficulty, run, run_model, Episode, RunConfig, Tally,
    TaskWriter, EVAL_SEED, PRACTICE_TASKER_SHARE, PRACTICE_TEMPERATURE,
};

#[derive(Debug, thiserror::Error)]
pub enum PracticeError {
    #[error(transparent)]
    Store(#[from] reverie_store::StoreError),
    #[error(transparent)]
    Agent(#[from] reverie_agent::AgentError),
    #[error(transparent)]
    Tools(#[from] reverie_tools::ToolError),
    #[error(transparent)]
    Infer(#[from] reverie_infer::InferError),
    #[error("{0}")]
    Invalid(String),
}
