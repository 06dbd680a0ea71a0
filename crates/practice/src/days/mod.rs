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

use crate::PracticeError;

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
