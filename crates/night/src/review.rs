//! A person's marks from the reviewer, applied to the judge's sub-tasks:
//! an excluded span trains nothing, and a set reward replaces the judge's.

use reverie_core::{ChannelId, MessageId};
use reverie_store::ReviewMark;

use crate::judge::JudgedTask;

/// Applies `marks` to `tasks`, whose `first`/`last` index the channel's
/// messages (`ids(channel)[i]` is that message's id). Returns what was kept
/// and one line per change for the night's notes.
pub fn apply(
    tasks: Vec<JudgedTask>,
    marks: &[ReviewMark],
    ids: &dyn Fn(i64) -> Vec<MessageId>,
) -> (Vec<JudgedTask>, Vec<String>) {
    let mut kept = Vec::with_capacity(tasks.len());
    let mut notes = Vec::new();
    for mut t in tasks {
        let channel_ids = ids(t.channel);
        let Some(&first) = channel_ids.get(t.first) else {
            kept.push(t);
            continue;
        };
        let ch = ChannelId(t.channel);
        let covering: Vec<&ReviewMark> = marks.iter().filter(|m| m.covers(ch, first)).collect();
        if covering.iter().any(|m| m.excluded) {
            notes.push(format!("left out by you: {:?}", t.description));
            continue;
        }
        if let Some(r) = covering.iter().rev().find_map(|m| m.reward) {
            notes.push(format!(
                "reward of {:?} set by you: {:.2} (judge said {:.2})",
                t.description, r, t.reward
            ));
            t.reward = r;
        }
        kept.push(t);
    }
    (kept, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(first: usize, reward: f32) -> JudgedTask {
        JudgedTask {
            channel: 1,
            description: format!("task at {first}"),
            first,
            last: first + 1,
            turns: 1,
            reward,
            reason: String::new(),
            group: None,
            checked: false,
            kind: crate::judge::TaskKind::Judged,
            judged: None,
            feedback: None,
            evidence: Vec::new(),
            taken_back: Vec::new(),
        }
    }

    fn mark(first: i64, last: i64, reward: Option<f32>, excluded: bool) -> ReviewMark {
        ReviewMark {
            id: 0,
            channel: 1,
            first_message: first,
            last_message: last,
            reward,
            excluded,
            created_ms: 0,
        }
    }

    #[test]
    fn exclusions_drop_tasks_and_rewards_replace_the_judges() {
        // message index i has id 10 + i
        let ids = |_: i64| (0..20).map(|i| MessageId(10 + i)).collect::<Vec<_>>();
        let tasks = vec![task(0, 0.5), task(4, 0.5), task(8, 0.5)];
        let marks = [mark(10, 11, None, true), mark(14, 15, Some(1.0), false)];
        let (kept, notes) = apply(tasks, &marks, &ids);
        assert_eq!(kept.len(), 2);
        assert_eq!((kept[0].first, kept[0].reward), (4, 1.0));
        assert_eq!((kept[1].first, kept[1].reward), (8, 0.5));
        assert_eq!(notes.len(), 2);
        assert!(notes[0].starts_with("left out by you"), "{notes:?}");
        assert!(notes[1].contains("judge said 0.50"), "{notes:?}");
    }
}
