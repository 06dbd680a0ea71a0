//! Stage 5, advantage: each sub-task's advantage over what the value model
//! (or its practice group) expected, and the night's summary numbers.

use crate::advantage::task_advantages;
use crate::error::NightError;
use crate::report::Summary;
use crate::run::NightRun;
use crate::stages::Next;

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let r = &night.report;
    let advantages = task_advantages(&r.tasks, &r.predictions, &r.understanding, night.cfg);
    let judged: Vec<f32> = r.tasks.iter().map(|t| t.reward).collect();
    let predicted: Vec<f32> = r.predictions.iter().flatten().map(|p| p.reward).collect();
    let errors: Vec<f32> = r
        .tasks
        .iter()
        .zip(&r.predictions)
        .filter_map(|(t, p)| p.as_ref().map(|p| (t.reward - p.reward).abs()))
        .collect();
    night.report.summary = Some(Summary {
        tasks: judged.len(),
        mean_reward: mean(&judged),
        mean_predicted: mean(&predicted),
        mean_abs_prediction_error: mean(&errors),
    });
    night.report.advantages = advantages;
    Ok(Next::Continue)
}

fn mean(v: &[f32]) -> Option<f32> {
    (!v.is_empty()).then(|| v.iter().sum::<f32>() / v.len() as f32)
}
