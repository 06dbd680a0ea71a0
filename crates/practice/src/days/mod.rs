//! Simulated days: a simulated person poses tasks as ordinary requests in
//! ordinary channels, two or three to a channel, with files in the
//! workspace, follow-ups and ratings as people give them; every reply is
//! checked by a program that only the simulator runs. Nothing a night
//! reads holds a check, an expected answer or a verdict (a 👍/👎 is what a
//! person would have given). Measures the judge against the checks and
//! the model before and after nights on such days.

mod agreement;
mod check;
mod family;
mod user;

pub use agreement::{agreement, covers, rewards_of, Agreement};
pub use check::verdict;
pub use family::{DayFamily, DayTask, Hidden, Step};
pub use user::{pose_channel, task_outcomes, DayOptions, Posed};

use std::sync::Arc;

use reverie_agent::CancelFlag;
use reverie_infer::Engine;
use reverie_store::Store;
use reverie_tools::Services;

use crate::paired::Outcome;
use crate::runner::eval_params;
use crate::{PracticeError, EVAL_SEED};

/// `n` tasks taking turns over `families`, task `i` from `seed + i`.
pub fn day_tasks(families: &[DayFamily], n: usize, seed: u64, level: u32) -> Vec<DayTask> {
    (0..n)
        .filter_map(|i| {
            let f = families.get(i % families.len().max(1))?;
            Some(f.task(seed.wrapping_add(i as u64), level))
        })
        .collect()
}

/// How a day's tasks are spread over channels: `per_channel` to a channel
/// named `{prefix}-{k}` (from 1), the first `skip` channels already posed
/// (a day resumed after a stop).
#[derive(Debug, Clone, Copy)]
pub struct Channels<'a> {
    pub prefix: &'a str,
    pub per_channel: usize,
    pub skip: usize,
}

impl<'a> Channels<'a> {
    pub fn new(prefix: &'a str, per_channel: usize) -> Self {
        Channels {
            prefix,
            per_channel: per_channel.max(1),
            skip: 0,
        }
    }

    /// The name of channel `k` (from 0).
    pub fn name(&self, k: usize) -> String {
        format!("{}-{}", self.prefix, k + 1)
    }
}

/// A day: `tasks` posed in `channels`, those of skipped channels not
/// again. `on` hears each channel's requests as they finish.
#[allow(clippy::too_many_arguments)]
pub fn simulate_day(
    engine: &Engine,
    store: &Arc<Store>,
    services: &Arc<Services>,
    tasks: &[DayTask],
    channels: Channels<'_>,
    opts: &DayOptions,
    cancel: &CancelFlag,
    on: &mut dyn FnMut(&[Posed]),
) -> Result<Vec<Posed>, PracticeError> {
    let mut out = Vec::new();
    let per = channels.per_channel.max(1);
    for (k, chunk) in tasks.chunks(per).enumerate().skip(channels.skip) {
        if cancel.is_cancelled() {
            break;
        }
        let posed = pose_channel(
            engine,
            store,
            services,
            &channels.name(k),
            chunk,
            k * per,
            opts,
            cancel,
        )?;
        on(&posed);
        out.extend(posed);
    }
    Ok(out)
}

/// `tasks` (of one family or several) measured as an eval: one task to a
/// channel named `{prefix}-{k}`, greedy, without follow-ups or ratings,
/// each starting with no notes (a note an earlier task saved, the same
/// "room of Friday's meeting" with another code, made a recall depend on
/// the tasks before it). One outcome per task (passed when every step
/// passed), named by the task's first request and its number; `on` hears each channel's requests.
#[allow(clippy::too_many_arguments)]
pub fn eval_day_tasks(
    engine: &Engine,
    store: &Arc<Store>,
    services: &Arc<Services>,
    tasks: &[DayTask],
    prefix: &str,
    family_tools: bool,
    cancel: &CancelFlag,
    on: &mut dyn FnMut(&[Posed]),
) -> Result<Vec<(DayFamily, Outcome)>, PracticeError> {
    let opts = DayOptions {
        system_prompt: reverie_agent::DEFAULT_SYSTEM_PROMPT.to_string(),
        params: eval_params(),
        max_calls: 8,
        family_tools,
        follow_up: 0.0,
        feedback: 0.0,
        seed: EVAL_SEED,
    };
    let mut forgotten = Ok(());
    let posed = simulate_day(
        engine,
        store,
        services,
        tasks,
        Channels::new(prefix, 1),
        &opts,
        cancel,
        &mut |posed| {
            if forgotten.is_ok() {
                forgotten = forget_notes(store);
            }
            on(posed);
        },
    )?;
    forgotten?;
    Ok(task_outcomes(&posed)
        .into_iter()
        .map(|(t, family, passed)| {
            let prompt = tasks
                .get(t)
                .and_then(|task| task.steps.first())
                .map_or(family.as_str(), |s| s.request.as_str());
            // Tasks of one family often open with the same words over
            // other files: the number keeps them apart when paired.
            let prompt = format!("{prompt} (task {})", t + 1);
            (family, Outcome { prompt, passed })
        })
        .collect())
}

/// Deletes every note in `store`.
fn forget_notes(store: &Store) -> Result<(), PracticeError> {
    for note in store.every_note()? {
        store.delete_note(note.id)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::Home;

    #[test]
    fn a_measured_task_starts_with_no_notes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path().to_path_buf())).unwrap();
        store
            .add_note("Friday", "the room is thunder-3122")
            .unwrap();
        store.add_note("Locker", "velvet-7716").unwrap();
        forget_notes(&store).unwrap();
        assert!(store.every_note().unwrap().is_empty());
    }
}
