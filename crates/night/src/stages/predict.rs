//! Stage 3, predict: the value model's expected reward and turns for each
//! sub-task, from its description and the sub-tasks of finished nights.

use std::collections::HashMap;

use crate::error::NightError;
use crate::event::Stage;
use crate::report::MemoryReport;
use crate::run::NightRun;
use crate::stages::Next;
use crate::value::{Prediction, Similarity, ValueMemory};

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let tasks = night.report.tasks.clone();
    let started = night
        .store
        .nights()?
        .into_iter()
        .find(|n| n.id == night.id)
        .map_or(0, |n| n.started_ms);
    let mem = ValueMemory::from_finished_nights(night.store, started)?;
    let similarity = Similarity::new(night.home, night.store);
    // The memory is frozen for the night, so a prediction depends on the
    // description alone: the attempts of one practice task ask once.
    let mut asked: HashMap<&str, Option<Prediction>> = HashMap::new();
    let mut preds: Vec<Option<Prediction>> = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        night.item(Stage::Predict, i, tasks.len(), task.description.clone())?;
        if let Some(p) = asked.get(task.description.as_str()) {
            preds.push(p.clone());
            continue;
        }
        let cfg = night.cfg;
        let p = match mem.predict(night.engine()?, &task.description, cfg, &similarity) {
            Ok(p) => Some(p),
            Err(why) => {
                let msg = format!("no prediction for {:?}: {why}", task.description);
                night.note(Stage::Predict, msg);
                None
            }
        };
        asked.insert(&task.description, p.clone());
        preds.push(p);
    }
    night.report.memory = Some(MemoryReport {
        entries: mem.entries.len(),
        similarity: similarity.kind().to_string(),
        asked: Some(asked.len()),
    });
    night.report.predictions = preds;
    Ok(Next::Continue)
}
