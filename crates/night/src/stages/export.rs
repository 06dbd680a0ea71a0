//! Stage 7, export: the base with the adapter merged in, as a q8_0 GGUF
//! carrying every metadata key of the base file.

use crate::error::NightError;
use crate::report::ExportSection;
use crate::run::NightRun;
use crate::stages::{train, Next};

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let trained = match night.trained.take() {
        Some(t) => t,
        None => train::resume(night)?,
    };
    let path = night.merged();
    let report =
        reverie_train::export::write_merged_q8_0(&trained.model, Some(&trained.lora), &path)?;
    night.report.export = Some(ExportSection { path, report });
    Ok(Next::Continue)
}
