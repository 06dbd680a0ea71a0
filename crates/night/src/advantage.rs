//! Advantage = reward − predicted reward, with the turn delta folded into
//! the reward of solved sub-tasks only (fewer turns is better only when the
//! task succeeded). Attempts of one practice task are compared with each
//! other instead (by default only those that did better than the group
//! count), and the understanding pass adds a second opinion.

use std::collections::HashMap;

use reverie_train::data::group_baseline;

use crate::config::NightConfig;
use crate::judge::{JudgedTask, TaskKind};
use crate::value::Prediction;

/// Every task's advantage, `None` where there is nothing to compare with:
/// - one of two or more attempts of a practice task: its reward against
///   the group's baseline ([`group_baseline`]), which is measured, not
///   guessed; below the baseline, scaled by `cfg.failed_attempt_weight`;
/// - otherwise its reward against the value model's prediction
///   ([`advantage`]); for sub-tasks the judge rewarded, less the mean of
///   that over the night's judged sub-tasks. The judge's yes/no reading and
///   the value model's grade are two instruments whose scales differ by an
///   offset that says nothing about the day (the judge centres near 0.5,
///   the grade leans high): left in, it pushed every reply of a day down,
///   right ones too; below 0, scaled by `cfg.failed_day_weight`;
/// - then, where the understanding pass scored the task, the mean of that
///   and the understanding advantage (score − the night's mean score).
pub fn task_advantages(
    tasks: &[JudgedTask],
    preds: &[Option<Prediction>],
    understanding: &[Option<f32>],
    cfg: &NightConfig,
) -> Vec<Option<f32>> {
    let mut groups: HashMap<&str, Vec<f32>> = HashMap::new();
    for t in tasks {
        if let Some(g) = &t.group {
            groups.entry(g).or_default().push(t.reward);
        }
    }
    let scored: Vec<f32> = understanding.iter().flatten().copied().collect();
    let mean_score = scored.iter().sum::<f32>() / scored.len().max(1) as f32;
    let own: Vec<Option<(f32, bool)>> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let group = t.group.as_deref().and_then(|g| groups.get(g));
            match (group, preds.get(i).and_then(Option::as_ref)) {
                (Some(rs), _) if rs.len() >= 2 => {
                    let a = t.reward - group_baseline(rs, cfg.train.loss.beta1);
                    let a = if a < 0.0 && t.checked {
                        a * cfg.failed_attempt_weight
                    } else {
                        a
                    };
                    Some((a, false))
                }
                (_, Some(p)) => Some((
                    advantage(
                        t.reward,
                        t.turns,
                        p.reward,
                        p.turns,
                        cfg.success_threshold,
                        cfg.turn_weight,
                    ),
                    t.kind == TaskKind::Judged,
                )),
                _ => None,
            }
        })
        .collect();
    let judged: Vec<f32> = own.iter().flatten().filter(|a| a.1).map(|a| a.0).collect();
    let offset = match judged.len() {
        0 | 1 => 0.0,
        n => judged.iter().sum::<f32>() / n as f32,
    };
    own.into_iter()
        .enumerate()
        .map(|(i, a)| {
            let (a, by_judge) = a?;
            let task = match (by_judge, a - offset) {
                (true, below) if below < 0.0 => below * cfg.failed_day_weight,
                (true, centred) => centred,
                (false, _) => a,
            };
            Some(match understanding.get(i).copied().flatten() {
                Some(score) => (task + (score - mean_score)) / 2.0,
                None => task,
            })
        })
        .collect()
}

pub fn advantage(
    reward: f32,
    turns: u32,
    predicted_reward: f32,
    predicted_turns: u32,
    success: f32,
    turn_weight: f32,
) -> f32 {
    let mut r = reward;
    if reward >= success {
        let pt = predicted_turns.max(1) as f32;
        r += turn_weight * (pt - turns as f32) / pt;
    }
    r - predicted_reward
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_count_only_for_solved_tasks() {
        // solved faster than expected: bonus
        assert!((advantage(0.9, 2, 0.5, 4, 0.5, 0.1) - (0.4 + 0.05)).abs() < 1e-6);
        // failed quickly: no bonus for speed
        assert!((advantage(0.2, 1, 0.5, 4, 0.5, 0.1) - (-0.3)).abs() < 1e-6);
        // solved but slower than expected: a small penalty
        assert!(advantage(0.9, 8, 0.9, 4, 0.5, 0.1) < 0.0);
    }

    fn task(reward: f32, group: Option<&str>) -> JudgedTask {
        JudgedTask {
            channel: 1,
            description: "t".into(),
            first: 0,
            last: 1,
            turns: 1,
            reward,
            reason: String::new(),
            group: group.map(String::from),
            checked: false,
            kind: crate::judge::TaskKind::Judged,
            judged: None,
            feedback: None,
            evidence: Vec::new(),
            taken_back: Vec::new(),
        }
    }

    fn pred(reward: f32) -> Option<Prediction> {
        Some(Prediction {
            reward,
            turns: 1,
            tokens: Default::default(),
            answered: None,
        })
    }

    #[test]
    fn attempts_of_one_task_are_judged_against_each_other() {
        let cfg = NightConfig::default();
        let tasks = [
            task(1.0, Some("a")),
            task(0.0, Some("a")),
            task(0.0, Some("b")),
            task(0.0, Some("b")),
            JudgedTask {
                kind: TaskKind::Practice,
                ..task(1.0, Some("lonely"))
            },
            task(0.5, None),
            task(0.5, None),
        ];
        // The value model thinks everything passes; for grouped attempts it
        // is not asked.
        let preds = [
            pred(1.0),
            pred(1.0),
            pred(1.0),
            pred(1.0),
            pred(0.25),
            pred(0.25),
            None,
        ];
        let advs = task_advantages(&tasks, &preds, &[None; 7], &cfg);
        let v = group_baseline(&[1.0, 0.0], cfg.train.loss.beta1);
        assert!((advs[0].unwrap() - (1.0 - v)).abs() < 1e-6 && advs[0].unwrap() > 0.0);
        assert!((advs[1].unwrap() + v).abs() < 1e-6 && advs[1].unwrap() < 0.0);
        assert_eq!(advs[2], Some(0.0), "all attempts failed: nothing to learn");
        assert_eq!(advs[3], Some(0.0));
        assert!(
            (advs[4].unwrap() - 0.75).abs() < 1e-6,
            "a single attempt falls back to the value model"
        );
        assert!((advs[5].unwrap() - 0.25).abs() < 1e-6);
        assert_eq!(advs[6], None, "no group and no prediction");
    }

    #[test]
    fn a_failed_checked_attempt_weighs_what_the_config_says() {
        let checked = |reward| JudgedTask {
            checked: true,
            kind: crate::judge::TaskKind::Practice,
            ..task(reward, Some("a"))
        };
        let tasks = [checked(1.0), checked(0.0), checked(0.0)];
        let advs = |w| {
            let cfg = NightConfig {
                failed_attempt_weight: w,
                ..NightConfig::default()
            };
            task_advantages(&tasks, &[None, None, None], &[None; 3], &cfg)
        };
        let full = advs(1.0);
        let (pass, fail) = (full[0].unwrap(), full[1].unwrap());
        assert!(pass > 0.0 && fail < 0.0);
        assert_eq!(
            advs(0.0),
            vec![Some(pass), Some(0.0), Some(0.0)],
            "the default learns from the pass only"
        );
        let half = advs(0.5);
        assert!((half[0].unwrap() - pass).abs() < 1e-6);
        assert!((half[1].unwrap() - fail / 2.0).abs() < 1e-6);
    }

    #[test]
    fn a_judged_sub_task_below_expectation_weighs_what_the_config_says() {
        let rated = JudgedTask {
            kind: TaskKind::Rated,
            feedback: Some(false),
            ..task(0.0, None)
        };
        let tasks = [task(0.9, None), task(0.1, None), rated];
        let preds = [pred(0.5), pred(0.5), pred(0.5)];
        let advs = |w| {
            let cfg = NightConfig {
                failed_day_weight: w,
                ..NightConfig::default()
            };
            task_advantages(&tasks, &preds, &[None; 3], &cfg)
        };
        let full = advs(1.0);
        let (up, down) = (full[0].unwrap(), full[1].unwrap());
        assert!(up > 0.0 && down < 0.0, "{full:?}");
        assert_eq!(NightConfig::default().failed_day_weight, 1.0);
        let none = advs(0.0);
        assert_eq!(none[..2], [Some(up), Some(0.0)]);
        assert_eq!(none[2], full[2], "a 👎 is not scaled");
        assert!(none[2].unwrap() < 0.0);
        assert!((advs(0.5)[1].unwrap() - down / 2.0).abs() < 1e-6);
    }

    #[test]
    fn the_understanding_score_is_averaged_in_against_the_nights_mean() {
        let cfg = NightConfig::default();
        let tasks = [task(0.5, None), task(0.5, None), task(0.5, None)];
        let preds = [pred(0.5), pred(0.5), pred(0.5)];
        let advs = task_advantages(&tasks, &preds, &[Some(1.0), Some(0.0), None], &cfg);
        assert_eq!(advs, vec![Some(0.25), Some(-0.25), Some(0.0)]);
    }

    #[test]
    fn judged_sub_tasks_are_measured_against_each_other_not_the_grades_scale() {
        let cfg = NightConfig::default();
        // The judge reads right and wrong answers near 0.5; the value model
        // expected 0.75 of each.
        let tasks = [
            task(0.53, None),
            task(0.47, None),
            task(0.50, None),
            JudgedTask {
                kind: TaskKind::Rated,
                feedback: Some(true),
                ..task(1.0, None)
            },
        ];
        let preds = [pred(0.75), pred(0.75), pred(0.75), pred(0.75)];
        let advs: Vec<f32> = task_advantages(&tasks, &preds, &[None; 4], &cfg)
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert!(advs[0] > 0.0 && advs[1] < 0.0, "{advs:?}");
        assert!(advs[2].abs() < 1e-6, "{advs:?}");
        assert!((advs[..3].iter().sum::<f32>()).abs() < 1e-6);
        assert!(
            (advs[3] - 0.25).abs() < 1e-6,
            "a rating is on the grade's own scale: {advs:?}"
        );
    }
}
