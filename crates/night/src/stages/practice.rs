//! Stage 0, practice (when the night's config asks for it): the model
//! writes tasks of each family, attempts them, and a program checks them.

use crate::error::NightError;
use crate::event::{NightEvent, Stage};
use crate::run::NightRun;
use crate::stages::Next;

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    if night.cfg.practice.is_empty() {
        return Ok(Next::Continue);
    }
    let base = night.base().to_path_buf();
    let (home, cfg, cancel) = (night.home, night.cfg, night.cancel);
    let lines = crate::practice::practise(home, &base, cfg, cancel, &mut |i, n, label| {
        night.emit(NightEvent::Item {
            stage: Stage::Practice,
            index: i + 1,
            count: n,
            label,
        })
    })?;
    for l in &lines {
        night.note(Stage::Practice, l.clone());
    }
    night.report.practice = lines;
    Ok(Next::Continue)
}
