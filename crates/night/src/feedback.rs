//! The person's 👍/👎 on replies: a rated reply sets the reward of the
//! sub-task it ends (the judge's grade is kept beside it), a rated reply no
//! sub-task covers becomes one, and the judge's agreement with the person
//! is the night's live measure of the judge.

use reverie_core::{MessageId, MessageRole};
use reverie_store::Feedback;
use serde::{Deserialize, Serialize};

use crate::judge::{counted_turns, JudgedTask, TaskKind};

/// A rated reply: its index in the channel's transcript and the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rating {
    pub index: usize,
    pub good: bool,
}

/// How often the judge's grade agreed with the person's ratings: a grade
/// of at least one half agrees with 👍, below it with 👎.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct JudgeAgreement {
    /// Sub-tasks whose reward a rating set.
    pub rated: usize,
    /// Of those, the ones the judge had also graded.
    pub compared: usize,
    pub agreed: usize,
    /// The judge called a 👎 reply good.
    pub missed_failures: usize,
}

impl JudgeAgreement {
    pub fn of(tasks: &[JudgedTask]) -> JudgeAgreement {
        let mut a = JudgeAgreement::default();
        for t in tasks {
            let Some(good) = t.feedback else { continue };
            a.rated += 1;
            let Some(judged) = t.judged else { continue };
            a.compared += 1;
            let judge_good = judged >= 0.5;
            if judge_good == good {
                a.agreed += 1;
            } else if !good {
                a.missed_failures += 1;
            }
        }
        a
    }

    /// The share of compared sub-tasks the judge got right.
    pub fn rate(&self) -> Option<f32> {
        (self.compared > 0).then(|| self.agreed as f32 / self.compared as f32)
    }
}

/// The ratings that count tonight: those given since the last night, and
/// any on a reply of tonight's part of the channel (from message `from`).
pub fn tonight(ratings: &[Feedback], ids: &[MessageId], from: usize, since_ms: i64) -> Vec<Rating> {
    ratings
        .iter()
        .filter_map(|f| {
            let index = ids.iter().position(|id| *id == f.message)?;
            (index >= from || f.created_ms >= since_ms).then_some(Rating {
                index,
                good: f.good,
            })
        })
        .collect()
}

/// Applies one channel's `ratings` to `tasks` (other channels' sub-tasks
/// are left alone); `transcript` is the channel's. Returns one note per
/// change.
pub fn apply(
    tasks: &mut Vec<JudgedTask>,
    channel: i64,
    ratings: &[Rating],
    transcript: &[(MessageRole, String)],
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut ratings = ratings.to_vec();
    // A later reply's rating is the one that stands for its sub-task.
    ratings.sort_by_key(|r| r.index);
    for r in ratings {
        let covering = tasks
            .iter_mut()
            .filter(|t| t.channel == channel && !t.checked && (t.first..=t.last).contains(&r.index))
            .min_by_key(|t| (t.last != r.index, t.last - t.first));
        let reward = if r.good { 1.0 } else { 0.0 };
        let thumb = if r.good { "👍" } else { "👎" };
        match covering {
            Some(t) => {
                if t.judged.is_none() && t.kind == TaskKind::Judged {
                    t.judged = Some(t.reward);
                }
                notes.push(format!(
                    "{thumb} from you sets the reward of {:?} to {reward:.0}{}",
                    t.description,
                    t.judged
                        .map(|j| format!(" (judge said {j:.2})"))
                        .unwrap_or_default()
                ));
                t.reward = reward;
                t.feedback = Some(r.good);
                t.kind = TaskKind::Rated;
            }
            None if r.index < transcript.len() => {
                let first = (0..r.index)
                    .rev()
                    .find(|&i| transcript[i].0 == MessageRole::User)
                    .unwrap_or(r.index);
                let ask: String = transcript[first].1.chars().take(120).collect();
                notes.push(format!(
                    "{thumb} from you on a reply the judge did not cover: {ask:?}"
                ));
                tasks.push(JudgedTask {
                    channel,
                    description: ask,
                    first,
                    last: r.index,
                    turns: counted_turns(
                        transcript.iter().enumerate().map(|(i, m)| (i, m.0)),
                        first,
                        r.index,
                    ),
                    reward,
                    reason: "rated by you".into(),
                    group: None,
                    checked: false,
                    kind: TaskKind::Rated,
                    judged: None,
                    feedback: Some(r.good),
                    evidence: Vec::new(),
                    taken_back: Vec::new(),
                });
            }
            None => {}
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript() -> Vec<(MessageRole, String)> {
        use MessageRole::*;
        [
            (System, "sys"),
            (User, "what is 17 times 3?"),
            (Assistant, "calling the calculator"),
            (Tool, "51"),
            (Assistant, "51"),
            (User, "and 2 + 2?"),
            (Assistant, "5"),
            (User, "spell cat backwards"),
            (Assistant, "tac"),
        ]
        .into_iter()
        .map(|(r, t)| (r, t.to_string()))
        .collect()
    }

    fn judged(first: usize, last: usize, reward: f32) -> JudgedTask {
        JudgedTask {
            channel: 1,
            description: format!("task {first}"),
            first,
            last,
            turns: 1,
            reward,
            reason: String::new(),
            group: None,
            checked: false,
            kind: TaskKind::Judged,
            judged: None,
            feedback: None,
            evidence: Vec::new(),
            taken_back: Vec::new(),
        }
    }

    #[test]
    fn a_rating_overrides_the_judge_and_keeps_its_grade() {
        let mut tasks = vec![judged(1, 4, 0.0), judged(5, 6, 0.9)];
        let ratings = [
            Rating {
                index: 4,
                good: true,
            },
            Rating {
                index: 6,
                good: false,
            },
        ];
        let notes = apply(&mut tasks, 1, &ratings, &transcript());
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("judge said 0.00"), "{notes:?}");
        let t = &tasks[0];
        assert_eq!(
            (t.reward, t.judged, t.feedback, t.kind),
            (1.0, Some(0.0), Some(true), TaskKind::Rated)
        );
        assert_eq!((tasks[1].reward, tasks[1].judged), (0.0, Some(0.9)));
        let a = JudgeAgreement::of(&tasks);
        assert_eq!(
            (a.rated, a.compared, a.agreed, a.missed_failures),
            (2, 2, 0, 1)
        );
        assert_eq!(a.rate(), Some(0.0));
    }

    #[test]
    fn a_rated_reply_no_sub_task_covers_becomes_one_with_counted_turns() {
        let mut tasks = vec![judged(1, 4, 0.5)];
        let ratings = [Rating {
            index: 8,
            good: true,
        }];
        apply(&mut tasks, 1, &ratings, &transcript());
        assert_eq!(tasks.len(), 2);
        let t = &tasks[1];
        assert_eq!((t.first, t.last, t.turns, t.reward), (7, 8, 1, 1.0));
        assert_eq!(t.description, "spell cat backwards");
        assert_eq!(t.judged, None, "no judge grade to compare");
        assert_eq!(JudgeAgreement::of(&tasks).compared, 0);

        // Another channel's sub-tasks are left alone; its reply after a
        // tool call took two turns.
        let mut tasks = vec![judged(1, 4, 0.5)];
        apply(
            &mut tasks,
            2,
            &[Rating {
                index: 4,
                good: false,
            }],
            &transcript(),
        );
        assert_eq!(tasks[0], judged(1, 4, 0.5));
        assert_eq!(
            (tasks[1].channel, tasks[1].first, tasks[1].turns),
            (2, 1, 2)
        );
    }

    #[test]
    fn old_ratings_of_old_replies_were_last_night_s() {
        let ids: Vec<MessageId> = (10..19).map(MessageId).collect();
        let rating = |message, created_ms| Feedback {
            message: MessageId(message),
            channel: reverie_core::ChannelId(1),
            good: true,
            created_ms,
        };
        let ratings = [
            rating(12, 50),
            rating(14, 500),
            rating(16, 50),
            rating(99, 500),
        ];
        // Tonight's part starts at index 5 (id 15); the last night began at 100.
        let counted = tonight(&ratings, &ids, 5, 100);
        assert_eq!(
            counted.iter().map(|r| r.index).collect::<Vec<_>>(),
            vec![4, 6],
            "a new rating of an old reply counts, an old rating of an old reply does not, an unknown message is skipped"
        );
    }

    #[test]
    fn the_reply_that_ends_a_sub_task_speaks_for_it() {
        // Two ratings inside one sub-task: the later one (its end) stands.
        let mut tasks = vec![judged(1, 4, 0.5)];
        let ratings = [
            Rating {
                index: 4,
                good: true,
            },
            Rating {
                index: 2,
                good: false,
            },
        ];
        apply(&mut tasks, 1, &ratings, &transcript());
        assert_eq!((tasks[0].reward, tasks[0].judged), (1.0, Some(0.5)));
    }
}
