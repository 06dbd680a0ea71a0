//! Stage 9, deploy: a verified model becomes the active checkpoint (the
//! day's model is recorded as its parent, so the night can be rolled back);
//! otherwise the current model stays and the report says why.

use crate::error::NightError;
use crate::event::Stage;
use crate::report::Deployment;
use crate::run::NightRun;
use crate::stages::Next;

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let verdict = night.report.verify.clone().unwrap_or_default();
    if !verdict.ok {
        let why = if verdict.why.is_empty() {
            "verification failed".to_string()
        } else {
            verdict.why
        };
        return Ok(night.keep(Stage::Deploy, why));
    }
    let (store, base, merged) = (night.store, night.base().to_path_buf(), night.merged());
    crate::checkpoint::record_base(store, &base)?;
    let sha = reverie_models::fetch::sha256_file(&merged)?;
    let cp = store.add_checkpoint(&merged.display().to_string(), &sha, Some(night.id), true)?;
    reverie_models::active::set_active(night.home, &merged)?;
    night.report.deploy = Some(Deployment {
        checkpoint: Some(cp),
        path: Some(merged.clone()),
        kept: None,
    });
    Ok(Next::Deployed(merged))
}
