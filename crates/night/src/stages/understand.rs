//! Stage 4, understand: on a reproducible share of the judge's sub-tasks,
//! did the assistant understand the task and the user the answer.

use reverie_core::{ChannelId, MessageRole};

use crate::error::NightError;
use crate::event::Stage;
use crate::judge::{understanding, JudgedTask, TaskKind};
use crate::run::NightRun;
use crate::stages::Next;

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let tasks = night.report.tasks.clone();
    let picked = for_understanding(&tasks, night.cfg.understanding_fraction, night.id as u64);
    let mut scores: Vec<Option<f32>> = vec![None; tasks.len()];
    for (n, &i) in picked.iter().enumerate() {
        let task = &tasks[i];
        night.item(Stage::Understand, n, picked.len(), task.description.clone())?;
        let msgs: Vec<(usize, MessageRole, String)> = night
            .store
            .messages(ChannelId(task.channel))?
            .into_iter()
            .enumerate()
            .filter(|(k, m)| {
                *k >= task.first && *k <= task.last + 1 && m.role != MessageRole::System
            })
            .map(|(k, m)| (k, m.role, m.text))
            .collect();
        let retries = night.cfg.retries;
        match understanding(night.engine()?, &msgs, retries) {
            Ok(s) => scores[i] = Some(s),
            Err(why) => night.note(
                Stage::Understand,
                format!("no understanding score for {:?}: {why}", task.description),
            ),
        }
    }
    night.report.understanding = scores;
    Ok(Next::Continue)
}

/// The sub-tasks that get the understanding pass: a reproducible share of
/// those the judge rewarded. Practice and tasker rewards were measured by a
/// program, and averaging a guess into them would only halve the measured
/// advantage and add noise.
fn for_understanding(tasks: &[JudgedTask], fraction: f64, seed: u64) -> Vec<usize> {
    let judged: Vec<usize> = (0..tasks.len())
        .filter(|&i| tasks[i].kind == TaskKind::Judged && tasks[i].group.is_none())
        .collect();
    sample(judged.len(), fraction, seed)
        .into_iter()
        .map(|k| judged[k])
        .collect()
}

/// A reproducible choice of `ceil(fraction · n)` indices out of `n`.
fn sample(n: usize, fraction: f64, seed: u64) -> Vec<usize> {
    let k = ((n as f64) * fraction.clamp(0.0, 1.0)).ceil() as usize;
    let mut idx: Vec<usize> = (0..n).collect();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        idx.swap(i, (state % (i as u64 + 1)) as usize);
    }
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

#[cfg(test)]
mod tests {
    use super::{for_understanding, sample};
    use crate::judge::{JudgedTask, TaskKind};

    #[test]
    fn the_understanding_sample_is_a_reproducible_share() {
        assert_eq!(sample(10, 0.3, 7).len(), 3);
        assert_eq!(sample(3, 0.3, 7).len(), 1);
        assert_eq!(sample(0, 0.3, 7), Vec::<usize>::new());
        assert_eq!(sample(10, 0.3, 7), sample(10, 0.3, 7));
        assert!(sample(10, 1.0, 1) == (0..10).collect::<Vec<_>>());
        let s = sample(50, 0.3, 9);
        assert!(s.windows(2).all(|w| w[0] < w[1]) && s.iter().all(|&i| i < 50));
    }

    #[test]
    fn only_the_judges_rewards_get_the_understanding_pass() {
        let task = |group: Option<&str>, kind| JudgedTask {
            channel: 1,
            description: String::new(),
            first: 0,
            last: 1,
            turns: 1,
            reward: 1.0,
            reason: String::new(),
            group: group.map(String::from),
            checked: kind != TaskKind::Judged,
            kind,
            judged: None,
            feedback: None,
            evidence: Vec::new(),
            taken_back: Vec::new(),
        };
        let tasks: Vec<JudgedTask> = (0..20)
            .map(|i| match i % 4 {
                0 => task(None, TaskKind::Judged),
                1 => task(Some("tasker: arithmetic"), TaskKind::Tasker),
                _ => task(Some("arithmetic: Start with 3"), TaskKind::Practice),
            })
            .collect();
        let picked = for_understanding(&tasks, 0.3, 7);
        assert_eq!(
            picked.len(),
            2,
            "30 % of the 5 judged sub-tasks: {picked:?}"
        );
        assert!(
            picked.iter().all(|&i| tasks[i].group.is_none()),
            "{picked:?}"
        );
        assert_eq!(picked, for_understanding(&tasks, 0.3, 7));
        assert_eq!(
            for_understanding(&tasks, 1.0, 7),
            [0, 4, 8, 12, 16],
            "every judged one and nothing else"
        );
        assert!(for_understanding(&tasks[1..4], 1.0, 7).is_empty());
    }
}
