//! Before and after on the same tasks: which tasks a change fixed, which it
//! broke, and how likely a split that uneven would be if the change did
//! nothing. Eval tasks come from a fixed seed and are solved greedily, so
//! the two runs face the same tasks and only the model differs; comparing
//! task by task is then far less noisy than comparing two success rates.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::runner::Episode;

/// Task-by-task comparison of two runs of the same tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Paired {
    /// Tasks attempted in both runs.
    pub tasks: usize,
    /// Failed before, passed after.
    pub gained: usize,
    /// Passed before, failed after.
    pub lost: usize,
    /// Exact two-sided McNemar test: the chance, if the change made no
    /// difference, that the tasks whose outcome changed would split between
    /// gained and lost at least this unevenly. 1 when nothing changed.
    pub p_value: f64,
}

impl Paired {
    /// Success after minus success before, over the shared tasks.
    pub fn difference(&self) -> f64 {
        (self.gained as f64 - self.lost as f64) / self.tasks.max(1) as f64
    }
}

/// One attempted task: its prompt and whether the answer passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
pub struct Outcome {
    pub prompt: String,
    pub passed: bool,
}

impl Outcome {
    /// The outcomes of `episodes`, in order.
    pub fn of(episodes: &[Episode]) -> Vec<Outcome> {
        episodes
            .iter()
            .map(|e| Outcome {
                prompt: e.task.prompt.clone(),
                passed: e.verdict.passed,
            })
            .collect()
    }
}

/// Compares `before` and `after` on the tasks both attempted (matched by
/// prompt; with several attempts at one prompt, the first of each run).
pub fn paired(before: &[Outcome], after: &[Outcome]) -> Paired {
    let mut first: HashMap<&str, bool> = HashMap::new();
    for o in before {
        first.entry(o.prompt.as_str()).or_insert(o.passed);
    }
    let (mut tasks, mut gained, mut lost) = (0, 0, 0);
    let mut seen = HashSet::new();
    for o in after {
        let Some(&was) = first.get(o.prompt.as_str()) else {
            continue;
        };
        if !seen.insert(o.prompt.as_str()) {
            continue;
        }
        tasks += 1;
        match (was, o.passed) {
            (false, true) => gained += 1,
            (true, false) => lost += 1,
            _ => {}
        }
    }
    Paired {
        tasks,
        gained,
        lost,
        p_value: mcnemar_exact(gained, lost),
    }
}

/// Two-sided exact McNemar p-value: `2 · P(X ≤ min(b, c))` for
/// `X ~ Binomial(b + c, ½)`, capped at 1.
fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    let k = b.min(c);
    // P(X = i) term by term from P(X = 0) = 2^-n.
    let mut term = 0.5f64.powi(n as i32);
    let mut tail = 0.0;
    for i in 0..=k {
        tail += term;
        term *= (n - i) as f64 / (i + 1) as f64;
    }
    (2.0 * tail).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::{mcnemar_exact, paired, Outcome};

    fn ep(prompt: &str, passed: bool) -> Outcome {
        Outcome {
            prompt: prompt.into(),
            passed,
        }
    }

    #[test]
    fn exact_p_values_match_the_binomial_tail() {
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        // 5 of 5 changed the same way: 2 / 32.
        assert!((mcnemar_exact(5, 0) - 0.0625).abs() < 1e-12);
        assert!((mcnemar_exact(0, 6) - 0.03125).abs() < 1e-12);
        // n = 10, k = 2: 2 · (1 + 10 + 45) / 1024.
        assert!((mcnemar_exact(8, 2) - 112.0 / 1024.0).abs() < 1e-12);
        // Large n neither overflows nor loses the tail.
        let p = mcnemar_exact(300, 200);
        assert!(p > 0.0 && p < 1e-5, "{p}");
    }

    #[test]
    fn tasks_are_matched_by_prompt_not_by_position() {
        let before = [ep("a", true), ep("b", false), ep("c", false), ep("d", true)];
        // Reordered, one task missing from before, one new task, one repeat.
        let after = [
            ep("c", true),
            ep("a", false),
            ep("e", true),
            ep("b", true),
            ep("b", false),
            ep("d", true),
        ];
        let p = paired(&before, &after);
        assert_eq!((p.tasks, p.gained, p.lost), (4, 2, 1));
        assert!((p.difference() - 0.25).abs() < 1e-12);
        assert!((p.p_value - 1.0).abs() < 1e-12);
    }

    #[test]
    fn no_shared_tasks_is_no_evidence() {
        let p = paired(&[ep("a", true)], &[ep("b", false)]);
        assert_eq!((p.tasks, p.gained, p.lost), (0, 0, 0));
        assert_eq!(p.p_value, 1.0);
        assert_eq!(p.difference(), 0.0);
    }
}
