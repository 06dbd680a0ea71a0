//! Practice episodes need no judge: their check already gave the reward.
//! Eval episodes are never trained on.

use std::collections::HashSet;

use reverie_core::{ChannelId, MessageRole};
use reverie_store::Store;

use crate::error::NightError;
use crate::judge::JudgedTask;

/// The sub-tasks of the practice episodes recorded since `since_ms`, and
/// every practice or eval channel (which the judge must skip).
pub fn episode_tasks(
    store: &Store,
    since_ms: i64,
) -> Result<(Vec<JudgedTask>, HashSet<i64>), NightError> {
    let mut tasks = Vec::new();
    let mut skip = HashSet::new();
    for e in store.episodes_since(since_ms)? {
        skip.insert(e.channel);
        if e.kind != "practice" {
            continue;
        }
        let msgs = store.messages(ChannelId(e.channel))?;
        let Some(first) = msgs.iter().position(|m| m.role == MessageRole::User) else {
            continue;
        };
        tasks.push(JudgedTask {
            channel: e.channel,
            description: format!(
                "practice ({}, level {}): {}",
                e.family, e.difficulty, e.prompt
            ),
            first,
            last: msgs.len() - 1,
            turns: msgs[first..]
                .iter()
                .filter(|m| m.role == MessageRole::Assistant)
                .count() as u32,
            reward: if e.passed { 1.0 } else { 0.0 },
            reason: format!("checked by program: {}", e.why),
            group: Some(format!("{}: {}", e.family, e.prompt)),
        });
    }
    Ok((tasks, skip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::{Home, TokenSpan};
    use reverie_store::NewEpisode;

    #[test]
    fn practice_becomes_rewarded_tasks_and_eval_is_only_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let span = TokenSpan::default();
        let record = |name: &str, eval: bool, passed: bool| {
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
                    eval,
                    difficulty: 2,
                    prompt: "Start with 2. Add 3.",
                    expected: "5",
                    passed,
                    why: "answered 5",
                })
                .unwrap();
            ch
        };
        let p = record("practice/arithmetic/1-0", false, true);
        let e = record("eval/arithmetic/1-0", true, true);
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
}
