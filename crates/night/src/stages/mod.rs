//! One module per stage of the night, each with one entry point,
//! `run(&mut NightRun) -> Result<Next, NightError>`. The loop that calls
//! them in order, persists the record and resumes is `crate::run`.

use std::path::PathBuf;

use crate::error::NightError;
use crate::event::Stage;
use crate::run::NightRun;

mod advantage;
mod collect;
mod deploy;
mod export;
mod judge;
mod practice;
mod predict;
pub(crate) mod train;
mod understand;
mod verify;

/// What the night does after a stage.
#[derive(Debug)]
pub enum Next {
    /// On to the next stage.
    Continue,
    /// The night ends keeping the current model (the report says why).
    Kept,
    /// The night ends on this new checkpoint.
    Deployed(PathBuf),
}

pub(crate) fn run(stage: Stage, night: &mut NightRun<'_>) -> Result<Next, NightError> {
    match stage {
        Stage::Practice => practice::run(night),
        Stage::Collect => collect::run(night),
        Stage::Judge => judge::run(night),
        Stage::Predict => predict::run(night),
        Stage::Understand => understand::run(night),
        Stage::Advantage => advantage::run(night),
        Stage::Train => train::run(night),
        Stage::Export => export::run(night),
        Stage::Verify => verify::run(night),
        Stage::Deploy => deploy::run(night),
    }
}
