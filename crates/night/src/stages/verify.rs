//! Stage 8, verify: llama.cpp loads the new model and its perplexity on a
//! fixed text has not risen too far; every family ever practised, the
//! held-out ones and desk work are measured on the same tasks with the old
//! and the new model, and a family that loses more tasks than it gains
//! keeps the old model.

use crate::error::NightError;
use crate::event::Stage;
use crate::report::Verdict;
use crate::run::NightRun;
use crate::stages::Next;
use crate::verify::{families_to_check, perplexity, task_success, FamilyCheck, Measured};

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let (store, cfg) = (night.store, night.cfg);
    let (base, merged) = (night.base().to_path_buf(), night.merged());
    // The night that deployed tonight's old model measured it already.
    let earlier = Measured::of(store, &base)?;
    let before = match earlier.as_ref().and_then(|m| m.perplexity) {
        Some(p) => p,
        None => perplexity(&base, cfg.gpu_layers)?,
    };
    night.check_cancel()?;
    let mut verdict = perplexity_verdict(before, perplexity(&merged, cfg.gpu_layers), cfg);
    night.check_cancel()?;
    let families = families_to_check(store, &cfg.verify_desk)?;
    if verdict.ok && cfg.verify_tasks > 0 && !families.is_empty() {
        let n = families.len();
        let old = (base.as_path(), earlier.as_ref());
        let (home, cancel) = (night.home, night.cancel);
        let checks = task_success(home, old, &merged, &families, cfg, cancel, &mut |i, f| {
            let label = format!("{} tasks, old and new model", f.as_str());
            let _ = night.item(Stage::Verify, i, n, label);
        })?;
        verdict = with_task_checks(verdict, checks);
    }
    if let Some(m) = earlier.as_ref().filter(|m| m.perplexity.is_some()) {
        verdict.perplexity_before_from_night = Some(m.night);
    }
    night.report.verify = Some(verdict);
    Ok(Next::Continue)
}

/// The perplexity part of the verdict: the new model must load and may
/// not be more than `cfg.max_perplexity_regression` more perplexed.
fn perplexity_verdict(
    before: f64,
    after: Result<f64, reverie_infer::InferError>,
    cfg: &crate::NightConfig,
) -> Verdict {
    let after = match after {
        Ok(after) => after,
        Err(e) => {
            return Verdict {
                why: format!("llama.cpp cannot run the new model: {e}"),
                perplexity_before: Some(before),
                ..Verdict::default()
            }
        }
    };
    let worse = after / before - 1.0;
    let ok = worse <= cfg.max_perplexity_regression;
    Verdict {
        ok,
        why: if ok {
            String::new()
        } else {
            format!(
                "perplexity on the sanity text rose {:.1}% ({before:.2} → {after:.2}), more than the allowed {:.0}%",
                worse * 100.0,
                cfg.max_perplexity_regression * 100.0
            )
        },
        perplexity_before: Some(before),
        perplexity_after: Some(after),
        ..Verdict::default()
    }
}

/// Adds the task checks to the perplexity verdict; the first family that
/// lost more tasks than it gained fails it.
fn with_task_checks(mut verdict: Verdict, checks: Vec<FamilyCheck>) -> Verdict {
    if let Some(c) = checks.iter().find(|c| c.regressed()) {
        let solved = |rate: f64| (rate * c.tasks as f64).round() as usize;
        verdict.ok = false;
        verdict.why = format!(
            "{} tasks: {} of {} solved before, {} after (level {}): the new model lost {} and gained {}",
            c.family,
            solved(c.before),
            c.tasks,
            solved(c.after),
            c.level,
            c.paired.lost,
            c.paired.gained
        );
    }
    verdict.tasks = checks;
    verdict
}

#[cfg(test)]
mod tests {
    use super::{perplexity_verdict, with_task_checks};
    use crate::report::Verdict;
    use crate::verify::FamilyCheck;
    use crate::NightConfig;

    #[test]
    fn a_family_that_loses_tasks_fails_the_verdict_and_says_which() {
        let check = |family: &str, before, after| {
            let family = reverie_practice::days::DayFamily::parse(family).unwrap();
            FamilyCheck::with_rates(family, 16, before, after)
        };
        let ok = Verdict {
            ok: true,
            ..Verdict::default()
        };
        let kept = with_task_checks(
            ok.clone(),
            vec![check("arithmetic", 0.25, 0.5), check("units", 0.25, 0.25)],
        );
        assert!(kept.ok);
        assert_eq!(kept.tasks.len(), 2);
        // One task of sixteen is enough to refuse the night.
        let failed = with_task_checks(
            ok,
            vec![check("arithmetic", 0.5, 0.5), check("units", 0.375, 0.3125)],
        );
        assert!(!failed.ok);
        assert_eq!(
            failed.why,
            "units tasks: 6 of 16 solved before, 5 after (level 3): the new model lost 1 and gained 0"
        );
    }

    #[test]
    fn perplexity_that_rose_too_far_or_a_model_that_will_not_load_fails() {
        let cfg = NightConfig::default();
        let allowed = cfg.max_perplexity_regression;
        assert!(perplexity_verdict(10.0, Ok(10.0 * (1.0 + allowed) - 1e-6), &cfg).ok);
        let risen = perplexity_verdict(10.0, Ok(10.0 * (1.0 + allowed) + 0.5), &cfg);
        assert!(!risen.ok && risen.why.contains("perplexity on the sanity text rose"));
        assert_eq!(risen.perplexity_after, Some(10.0 * (1.0 + allowed) + 0.5));
        let broken = perplexity_verdict(
            10.0,
            Err(reverie_infer::InferError::Backend("bad tensor".into())),
            &cfg,
        );
        assert!(!broken.ok && broken.why.starts_with("llama.cpp cannot run the new model"));
        assert_eq!(broken.perplexity_after, None);
    }
}
