//! How well a judge's rewards agree with the hidden checks: accuracy,
//! Cohen's κ, and the share of failures it caught.

use serde::Serialize;

use super::user::Posed;

/// Agreement of one way of judging with the hidden checks.
#[derive(Serialize, Default, Debug, Clone, PartialEq)]
pub struct Agreement {
    /// Tasks a judged sub-task covered.
    pub covered: usize,
    /// Of those, the ones whose reward (≥ the success threshold) matched
    /// the check.
    pub agreed: usize,
    pub accuracy: f64,
    pub kappa: f64,
    /// Failed tasks the judge called failed, of the failed tasks covered.
    pub failure_recall: f64,
    pub mean_reward_passed: f64,
    pub mean_reward_failed: f64,
    /// The chance that a passed task's reward is above a failed one's
    /// (ties count half): how well the rewards rank, whatever the
    /// threshold. 0.5 is chance.
    pub auc: f64,
}

/// The judge's rewards against the checks' verdicts: a reward at or above
/// `threshold` calls a task passed; `None` is a task no sub-task covered.
pub fn agreement(truth: &[bool], rewards: &[Option<f32>], threshold: f32) -> Agreement {
    let pairs: Vec<(bool, f32)> = truth
        .iter()
        .zip(rewards)
        .filter_map(|(t, r)| r.map(|r| (*t, r)))
        .collect();
    let n = pairs.len();
    if n == 0 {
        return Agreement::default();
    }
    let said = |r: f32| r >= threshold;
    let agreed = pairs.iter().filter(|(t, r)| *t == said(*r)).count();
    let po = agreed as f64 / n as f64;
    let truly = pairs.iter().filter(|(t, _)| *t).count() as f64 / n as f64;
    let called = pairs.iter().filter(|(_, r)| said(*r)).count() as f64 / n as f64;
    let pe = truly * called + (1.0 - truly) * (1.0 - called);
    let failed: Vec<f32> = pairs.iter().filter(|(t, _)| !t).map(|p| p.1).collect();
    let passed: Vec<f32> = pairs.iter().filter(|(t, _)| *t).map(|p| p.1).collect();
    let mean = |v: &[f32]| v.iter().map(|&x| x as f64).sum::<f64>() / v.len().max(1) as f64;
    Agreement {
        covered: n,
        agreed,
        accuracy: po,
        kappa: if pe < 1.0 {
            (po - pe) / (1.0 - pe)
        } else {
            0.0
        },
        failure_recall: failed.iter().filter(|r| !said(**r)).count() as f64
            / failed.len().max(1) as f64,
        mean_reward_passed: mean(&passed),
        mean_reward_failed: mean(&failed),
        auc: auc(&passed, &failed),
    }
}

/// The area under the ROC curve of `passed` against `failed` rewards (0.5
/// when either side is empty).
fn auc(passed: &[f32], failed: &[f32]) -> f64 {
    if passed.is_empty() || failed.is_empty() {
        return 0.5;
    }
    let mut wins = 0.0;
    for p in passed {
        for f in failed {
            wins += if p > f {
                1.0
            } else if p == f {
                0.5
            } else {
                0.0
            };
        }
    }
    wins / (passed.len() * failed.len()) as f64
}

/// Whether the sub-task `first..=last` is the one that graded `p`: it ends
/// on the request's answer or spans it.
pub fn covers(first: usize, last: usize, p: &Posed) -> bool {
    (first..=last).contains(&p.reply) || (first <= p.request && p.reply <= last)
}

/// Each posed request's reward from the first of `judged` (channel, first
/// and last message, reward) that covers it.
pub fn rewards_of(posed: &[Posed], judged: &[(i64, usize, usize, f32)]) -> Vec<Option<f32>> {
    posed
        .iter()
        .map(|p| {
            judged
                .iter()
                .find(|(c, first, last, _)| *c == p.channel && covers(*first, *last, p))
                .map(|j| j.3)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::days::DayFamily;

    fn posed(channel: i64, request: usize, reply: usize) -> Posed {
        Posed {
            channel,
            family: DayFamily::Arithmetic,
            task: 0,
            step: 0,
            request,
            reply,
            first_passed: true,
            passed: true,
            why: String::new(),
            followed_up: false,
            rated: None,
        }
    }

    #[test]
    fn agreement_counts_kappa_and_caught_failures() {
        let truth = [true, true, false, false, true];
        let rewards = [Some(0.9), Some(0.2), Some(0.1), Some(0.8), None];
        let a = agreement(&truth, &rewards, 0.5);
        assert_eq!((a.covered, a.agreed), (4, 2));
        assert!((a.accuracy - 0.5).abs() < 1e-9);
        // Chance agreement is 0.5 here, so κ is 0.
        assert!(a.kappa.abs() < 1e-9, "{}", a.kappa);
        assert!((a.failure_recall - 0.5).abs() < 1e-9);
        // 0.9 and 0.2 against 0.1 and 0.8: three of four pairs ranked right.
        assert!((a.auc - 0.75).abs() < 1e-9, "{}", a.auc);
        let perfect = agreement(&[true, false], &[Some(1.0), Some(0.0)], 0.5);
        assert!((perfect.kappa - 1.0).abs() < 1e-9);
        assert_eq!(agreement(&[true], &[None], 0.5), Agreement::default());
    }

    #[test]
    fn a_sub_task_covers_the_request_whose_answer_it_spans() {
        let p = posed(1, 3, 6);
        assert!(covers(3, 6, &p));
        assert!(
            covers(5, 6, &p),
            "a span starting at a tool result still ends on the answer"
        );
        assert!(!covers(7, 9, &p));
        assert!(!covers(1, 2, &p));
        let judged = [(2, 3, 6, 0.1), (1, 0, 2, 0.2), (1, 3, 6, 0.9)];
        assert_eq!(
            rewards_of(&[p, posed(1, 8, 9)], &judged),
            vec![Some(0.9), None]
        );
    }
}
