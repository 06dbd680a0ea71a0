//! Practice episodes need no judge: their check already gave the reward,
//! and the tasker that wrote a task is rewarded by how the solvers did.
//! Eval episodes are never trained on.

use std::collections::HashSet;

use reverie_core::{ChannelId, MessageRole};
use reverie_practice::tasker::tasker_reward;
use reverie_store::Store;

use crate::error::NightError;
use crate::judge::JudgedTask;

/// The sub-tasks of the practice and tasker episodes recorded since
/// `since_ms`, and every practice, tasker or eval channel (which the judge
/// must skip).
pub fn episode_tasks(
    store: &Store,
    since_ms: i64,
) -> Result<(Vec<JudgedTask>, HashSet<i64>), NightError> {
    let episodes = store.episodes_since(since_ms)?;
    let mut tasks = Vec::new();
    let mut skip = HashSet::new();
    for e in &episodes {
        skip.insert(e.channel);
        if e.kind == "eval" {
            continue;
        }
        let msgs = store.messages(ChannelId(e.channel))?;
        let Some(first) = msgs.iter().position(|m| m.role == MessageRole::User) else {
            continue;
        };
        let turns = msgs[first..]
            .iter()
            .filter(|m| m.role == MessageRole::Assistant)
            .count() as u32;
        let level = format!("{}, level {}", e.family, e.difficulty);
        let task = if e.kind == "tasker" {
            // Rewarded by how the solvers did on the task it wrote; its
            // proposals of one family are compared with each other.
            let attempts: Vec<bool> = episodes
                .iter()
                .filter(|p| p.kind == "practice" && !e.prompt.is_empty() && p.prompt == e.prompt)
                .map(|p| p.passed)
                .collect();
            let passed = attempts.iter().filter(|&&p| p).count();
            JudgedTask {
                channel: e.channel,
                description: format!("tasker ({level}): write a task passed about half the time"),
                first,
                last: msgs.len() - 1,
                turns,
                reward: tasker_reward(passed, attempts.len()),
                reason: e.why.clone(),
                group: Some(format!("tasker: {}", e.family)),
            }
        } else {
            JudgedTask {
                channel: e.channel,
                description: format!("practice ({level}): {}", e.prompt),
                first,
                last: msgs.len() - 1,
                turns,
                reward: if e.passed { 1.0 } else { 0.0 },
                reason: format!("checked by program: {}", e.why),
                group: Some(format!("{}: {}", e.family, e.prompt)),
            }
        };
        tasks.push(task);
    }
    Ok((tasks, skip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::{Home, TokenSpan};
    use reverie_store::{EpisodeKind, NewEpisode};

    #[test]
    fn practice_becomes_rewarded_tasks_and_eval_is_only_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let span = TokenSpan::default();
        let record = |name: &str, kind: EpisodeKind, passed: bool| {
            let ch = store.ensure_channel(name).unwrap();
            store
                .append_message(ch, MessageRole::System, "sys", &span)
                .unwrap();
            store
                .append_message(ch, MessageRole::User, "Start with 2. Add 3.", &span)
                .unwrap();
            store
                .append_message(ch, MessageRole::Assistant, "5", &span)
                .unwrap();
            store
                .record_episode(&NewEpisode {
                    channel: ch,
                    family: "arithmetic",
                    kind,
                    difficulty: 2,
                    prompt: "Start with 2. Add 3.",
                    expected: "5",
                    passed,
                    why: "answered 5",
                })
                .unwrap();
            ch
        };
        let p = record("practice/arithmetic/1-0", EpisodeKind::Practice, true);
        let e = record("eval/arithmetic/1-0", EpisodeKind::Eval, true);
        let (tasks, skip) = episode_tasks(&store, 0).unwrap();
        assert_eq!(skip, HashSet::from([p.0, e.0]));
        assert_eq!(tasks.len(), 1);
        let t = &tasks[0];
        assert_eq!(
            (t.channel, t.first, t.last, t.turns, t.reward),
            (p.0, 1, 2, 1, 1.0)
        );
        assert!(t.reason.starts_with("checked by program"));
        assert_eq!(
            t.group.as_deref(),
            Some("arithmetic: Start with 2. Add 3."),
            "attempts of one task share a group"
        );
    }

    #[test]
    fn the_tasker_is_rewarded_by_how_the_solvers_did_on_its_task() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let span = TokenSpan::default();
        let record = |name: &str, kind: EpisodeKind, prompt: &str, passed: bool| {
            let ch = store.ensure_channel(name).unwrap();
            store
                .append_message(ch, MessageRole::User, "write a task", &span)
                .unwrap();
            store
                .append_message(ch, MessageRole::Assistant, "{}", &span)
                .unwrap();
            store
                .record_episode(&NewEpisode {
                    channel: ch,
                    family: "strings",
                    kind,
                    difficulty: 3,
                    prompt,
                    expected: "x",
                    passed,
                    why: "",
                })
                .unwrap();
            ch
        };
        for (i, passed) in [true, false, false, true].into_iter().enumerate() {
            record(
                &format!("practice/s/0.{i}"),
                EpisodeKind::Practice,
                "half",
                passed,
            );
            record(
                &format!("practice/s/1.{i}"),
                EpisodeKind::Practice,
                "easy",
                true,
            );
        }
        let good = record("tasker/s/0", EpisodeKind::Tasker, "half", true);
        let easy = record("tasker/s/1", EpisodeKind::Tasker, "easy", false);
        let broken = record("tasker/s/2", EpisodeKind::Tasker, "", false);
        let (tasks, skip) = episode_tasks(&store, 0).unwrap();
        assert!(
            skip.contains(&good.0) && skip.contains(&broken.0),
            "the judge skips taskers"
        );
        let reward = |ch: reverie_core::ChannelId| {
            let t = tasks.iter().find(|t| t.channel == ch.0).unwrap();
            assert_eq!(t.group.as_deref(), Some("tasker: strings"));
            assert!(t.description.starts_with("tasker (strings, level 3)"));
            t.reward
        };
        assert_eq!(reward(good), 1.0, "passed half the time");
        assert_eq!(reward(easy), 0.0, "always passed");
        assert_eq!(reward(broken), 0.0, "not a task");
    }
}
