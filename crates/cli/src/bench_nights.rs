//! `reverie bench nights`: does a night help? Measure a practised family
//! and the held-out family, run nights of practice + sleep, measure again.
//! Works in its own data folder, so the person's days are untouched.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use reverie_core::Home;
use reverie_night::NightConfig;
use reverie_practice::{
    paired, Episode, Family, Outcome, Paired, RunConfig, Tally, EVAL_SEED, PRACTICE_TEMPERATURE,
};

use crate::output;
use crate::practice_cmd::{episodes, practice_config};

#[derive(Args)]
pub struct NightsArgs {
    #[arg(long)]
    model: Option<PathBuf>,
    /// The family practised and trained on.
    #[arg(long, default_value = "arithmetic")]
    family: String,
    #[arg(long, default_value_t = 3)]
    nights: usize,
    /// Practice tasks per night.
    #[arg(long, default_value_t = 12)]
    practice: usize,
    /// Attempts per practice task (the night's baseline for each task).
    #[arg(long, default_value_t = NightConfig::default().practice_samples)]
    samples: usize,
    /// Eval tasks per family, before and after.
    #[arg(long, default_value_t = 30)]
    eval: usize,
    /// Tasks per family in each night's own verify gate (0: off, so every
    /// night deploys whatever it trained). On by default, like a real
    /// night: a night that would have been refused is reported as kept.
    #[arg(long, default_value_t = NightConfig::default().verify_tasks)]
    verify: usize,
    /// The nights' learning rate (default: a night's own).
    #[arg(long)]
    lr: Option<f64>,
    /// Optimizer steps each night takes at least (default: a night's own).
    #[arg(long)]
    min_steps: Option<usize>,
    /// Scale of a failed attempt's negative advantage (default: a night's
    /// own; 1 pushes failed attempts down as hard as passes are pulled up).
    #[arg(long)]
    failed_weight: Option<f32>,
    /// ECHO on practice episodes (default: a night's own).
    #[arg(long)]
    practice_echo: Option<bool>,
    /// Sampling temperature of the practice attempts.
    #[arg(long, default_value_t = PRACTICE_TEMPERATURE)]
    temperature: f32,
    #[arg(long)]
    json: bool,
}

pub fn nights(home: &Home, a: NightsArgs) -> anyhow::Result<ExitCode> {
    let family = Family::parse(&a.family).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        !family.held_out(),
        "pick a family to train on; units is held out"
    );
    let bench = crate::bench::fresh_home(home, "nights", a.model.as_deref())?;
    let base = reverie_models::active::resolve(&bench, None)?;
    crate::bench::share_embedder(home, &bench)?;
    // Progress goes to stderr, so `--json` keeps stdout to the report.
    let say = |s: String| eprintln!("{s}");
    let measure = |model: &std::path::Path| -> anyhow::Result<(Vec<Episode>, Vec<Episode>)> {
        let trained = episodes(
            &bench,
            model,
            &RunConfig::eval(family, a.eval, EVAL_SEED, 3),
        )?;
        let heldout = episodes(
            &bench,
            model,
            &RunConfig::eval(Family::Units, a.eval, EVAL_SEED, 3),
        )?;
        Ok((trained, heldout))
    };
    let (trained_eps_before, heldout_eps_before) = measure(&base)?;
    let (trained_before, heldout_before) = (
        Tally::of(&trained_eps_before),
        Tally::of(&heldout_eps_before),
    );
    say(format!(
        "before: {} {:.0}% ({:.0}% stopped), held-out units {:.0}%",
        family.as_str(),
        trained_before.success() * 100.0,
        trained_before.stopped_share() * 100.0,
        heldout_before.success() * 100.0
    ));
    let mut night_cfg = NightConfig {
        verify_tasks: a.verify,
        ..NightConfig::default()
    };
    if let Some(lr) = a.lr {
        night_cfg.train.optim.lr = lr;
    }
    if let Some(steps) = a.min_steps {
        night_cfg.min_train_steps = steps;
    }
    if let Some(w) = a.failed_weight {
        night_cfg.failed_attempt_weight = w;
    }
    if let Some(echo) = a.practice_echo {
        night_cfg.practice_echo = echo;
    }
    let mut per_night = Vec::new();
    for i in 0..a.nights {
        let t = Instant::now();
        let model = reverie_models::active::resolve(&bench, None)?;
        let mut cfg = practice_config(&bench, family, a.practice, None, None, a.temperature, 8)?;
        cfg.samples = a.samples;
        let practised = Tally::of(&episodes(&bench, &model, &cfg)?);
        let practice_s = t.elapsed().as_secs_f64();
        let out = crate::bench::sleep(&bench, &model, &night_cfg)?;
        say(format!(
            "night {}: practice {:.0}% at level {}, {}",
            i + 1,
            practised.success() * 100.0,
            cfg.difficulty,
            crate::bench::deployed_or_kept(&out)
        ));
        let train = out.report.train.clone().unwrap_or_default();
        per_night.push(serde_json::json!({
            "night": out.night,
            "practice_success": practised.success(),
            "practice_stopped": practised.stopped_share(),
            "difficulty": cfg.difficulty,
            "deployed": out.deployed,
            "kept_reason": out.kept_reason,
            // Perplexity before and after, and the gate's task checks.
            "verify": out.report.verify,
            // Past tasks shown to the value model, how they were ranked,
            // and how many distinct descriptions it was asked about.
            "memory": out.report.memory,
            "train_steps": train.steps,
            "train_sequences": train.sequences,
            "without_signal": train.without_signal,
            "losses": train.losses,
            "stage_seconds": out.report.seconds,
            "practice_seconds": practice_s,
            "seconds": t.elapsed().as_secs_f64(),
        }));
    }
    let after = reverie_models::active::resolve(&bench, None)?;
    let (trained_eps_after, heldout_eps_after) = measure(&after)?;
    let (trained_after, heldout_after) =
        (Tally::of(&trained_eps_after), Tally::of(&heldout_eps_after));
    // Same tasks, solved greedily: task by task is the fair comparison.
    let compare = |b: &[Episode], a: &[Episode]| paired(&Outcome::of(b), &Outcome::of(a));
    let trained_paired = compare(&trained_eps_before, &trained_eps_after);
    let heldout_paired = compare(&heldout_eps_before, &heldout_eps_after);
    let report = serde_json::json!({
        "model": base,
        "family": family.as_str(),
        "eval_tasks": a.eval,
        "practice_tasks_per_night": a.practice,
        "attempts_per_task": a.samples,
        "verify_tasks": a.verify,
        "lr": night_cfg.train.optim.lr,
        "practice_echo": night_cfg.practice_echo,
        "failed_attempt_weight": night_cfg.failed_attempt_weight,
        "practice_temperature": a.temperature,
        "min_train_steps": night_cfg.min_train_steps,
        "nights_deployed": per_night.iter().filter(|n| !n["deployed"].is_null()).count(),
        "nights": per_night,
        "trained_before": trained_before.success(),
        "trained_after": trained_after.success(),
        "heldout_before": heldout_before.success(),
        "heldout_after": heldout_after.success(),
        "trained_passed_before": trained_before.passed,
        "trained_passed_after": trained_after.passed,
        "heldout_passed_before": heldout_before.passed,
        "heldout_passed_after": heldout_after.passed,
        // Tasks gained and lost, and the exact McNemar p-value of the split.
        "trained_paired": trained_paired,
        "heldout_paired": heldout_paired,
        // Eval turns the harness had to stop: a night should teach the
        // model to answer by itself.
        "trained_stopped_before": trained_before.stopped_share(),
        "trained_stopped_after": trained_after.stopped_share(),
        "heldout_stopped_before": heldout_before.stopped_share(),
        "heldout_stopped_after": heldout_after.stopped_share(),
        "data_folder": bench.root(),
    });
    if a.json {
        output::json(&report)?;
    } else {
        println!(
            "{}: {:.0}% → {:.0}% ({}; stopped by the harness {:.0}% → {:.0}%); held-out units: {:.0}% → {:.0}% ({}) ({} tasks each; {} of {} nights deployed)",
            family.as_str(),
            trained_before.success() * 100.0,
            trained_after.success() * 100.0,
            describe(&trained_paired),
            trained_before.stopped_share() * 100.0,
            trained_after.stopped_share() * 100.0,
            heldout_before.success() * 100.0,
            heldout_after.success() * 100.0,
            describe(&heldout_paired),
            a.eval,
            report["nights_deployed"],
            a.nights
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(p: &Paired) -> String {
    format!(
        "{} tasks gained, {} lost, p = {:.3}",
        p.gained, p.lost, p.p_value
    )
}
