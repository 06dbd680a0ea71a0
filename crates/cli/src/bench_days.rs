//! `reverie bench days`: do nights on ordinary days help? A simulated
//! person poses tasks in ordinary channels (files in the workspace,
//! follow-ups, optional 👍/👎); only this benchmark runs their checks. The
//! model is measured on fresh tasks of every family, then N times a day is
//! simulated and slept on (no practice), then it is measured again. Each
//! measurement runs in a data folder of its own that no night reads.
//! Reported: the judge's agreement with the hidden checks night by night,
//! the value model's error, success per family before and after (paired
//! task by task, with McNemar's p), the held-out families, perplexity and
//! stage times.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use reverie_agent::{CancelFlag, DEFAULT_SYSTEM_PROMPT};
use reverie_core::{Home, SamplingParams};
use reverie_night::{JudgeModel, NightConfig};
use reverie_practice::days::{
    agreement, day_tasks, eval_day_tasks, rewards_of, simulate_day, task_outcomes, Channels,
    DayFamily, DayOptions, Posed,
};
use reverie_practice::{paired, Outcome, Paired, EVAL_SEED};
use reverie_store::Store;
use reverie_tools::Services;
use serde::{Deserialize, Serialize};

use crate::bench::share_embedder;
use crate::chat::EngineArgs;
use crate::output;

#[derive(Args)]
pub struct DaysArgs {
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    plan: Plan,
    /// Take the measurement before the nights from an earlier run's
    /// results file (the same families, level and tasks per family)
    /// instead of measuring again; with `--nights 0 --model CHECKPOINT`
    /// this compares a checkpoint with that earlier measurement.
    #[arg(long)]
    before: Option<std::path::PathBuf>,
    /// Go on with a run that was stopped, from its results file: what it
    /// measured, posed and slept on is kept, a day goes on at its first
    /// unfinished channel and a night at its last finished stage (training
    /// at its last step). The run's own settings apply; the model's
    /// loading options (`--ctx`, `--threads`) are given again.
    #[arg(long, conflicts_with = "before")]
    resume: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

/// What a run does, kept in its results file so that `--resume` goes on
/// with the same plan.
#[derive(Args, Serialize, Deserialize, Clone, Debug)]
struct Plan {
    /// Simulated days, each followed by a night.
    #[arg(long, default_value_t = 3)]
    nights: usize,
    /// Tasks the person poses in one day.
    #[arg(long, default_value_t = 24)]
    tasks: usize,
    /// Fresh tasks per family in each measurement (the same tasks before
    /// and after, answered greedily).
    #[arg(long, default_value_t = 10)]
    eval: usize,
    /// Tasks posed in one channel before the person moves to another.
    #[arg(long, default_value_t = 3)]
    per_channel: usize,
    /// Level of every task (1 = easiest). At 2 the default model passes
    /// about half of the arithmetic and most of the notes tasks.
    #[arg(long, default_value_t = 2)]
    level: u32,
    /// Families the days pose, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "arithmetic,strings,ledger,files,edit"
    )]
    families: Vec<String>,
    /// Families only measured, never posed in a day (notes: a desk family
    /// that needs its own tool; at level 2 the default model passed 0 of
    /// 10 when the offer left that tool out, 5 of 10 once it was offered).
    #[arg(long, value_delimiter = ',', default_value = "notes,units")]
    held_out: Vec<String>,
    /// Share of replies the person rates 👍/👎 (from the hidden check).
    #[arg(long, default_value_t = 0.0)]
    feedback: f64,
    /// Chance that a wrong answer gets a follow-up ("are you sure?").
    #[arg(long, default_value_t = 0.5)]
    follow_up: f64,
    /// Tasks per family in each night's verify gate (default: a night's
    /// own); 0 turns the gate's task checks off.
    #[arg(long)]
    verify: Option<usize>,
    /// Offer only each family's tools, not the agent's usual offer.
    #[arg(long)]
    family_tools: bool,
    /// The nights' judge and value model: `installed` (the model before
    /// any night), `deployed` (the model the day ran on) or a GGUF file.
    #[arg(long, default_value = "installed")]
    #[serde(default = "earlier_judge")]
    judge: String,
    /// The nights' settings from a file in the form of `night.json`
    /// (learning rate, epochs, steps…) instead of the defaults; the
    /// judge, GPU layers and verify tasks given here still apply.
    #[arg(long)]
    #[serde(default)]
    night_config: Option<PathBuf>,
    #[arg(long, default_value_t = 2026)]
    seed: u64,
}

/// The judge of runs saved before the judge was chosen: they judged with
/// the deployed model.
fn earlier_judge() -> String {
    "deployed".into()
}

/// Where a run stands, saved after each step of it beside its data folder
/// (never in it: nothing a night reads holds a verdict), so a run stopped
/// midway keeps its figures and `--resume` goes on from there.
#[derive(Serialize, Deserialize)]
struct Progress {
    plan: Plan,
    data_folder: PathBuf,
    model: PathBuf,
    before_measured: Measured,
    /// The results file the first measurement was taken from (`--before`).
    #[serde(default)]
    before_from: Option<PathBuf>,
    /// Each finished night's figures.
    #[serde(default)]
    nights: Vec<serde_json::Value>,
    /// The day being posed or slept on.
    #[serde(default)]
    day: Option<DayProgress>,
    /// Present once the run is over.
    #[serde(default)]
    after_measured: Option<Measured>,
}

/// A day posed so far: its requests channel by channel, and whether every
/// channel is done (then only its night is left).
#[derive(Serialize, Deserialize)]
struct DayProgress {
    night: usize,
    channels: usize,
    posed: Vec<Posed>,
    complete: bool,
    seconds: f64,
}

/// Success of one family in one measurement.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct FamilyScore {
    family: DayFamily,
    held_out: bool,
    tasks: usize,
    passed: usize,
}

/// One measurement: every family's outcomes, task by task.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct Measured {
    scores: Vec<FamilyScore>,
    outcomes: Vec<(DayFamily, Outcome)>,
    seconds: f64,
    /// What was measured: the level and the tasks per family.
    level: u32,
    eval: usize,
    /// The model file measured (runs saved before it was kept have none).
    #[serde(default)]
    model: Option<PathBuf>,
}

impl Measured {
    /// Nothing measured yet.
    fn empty(plan: &Plan) -> Measured {
        Measured {
            scores: Vec::new(),
            outcomes: Vec::new(),
            seconds: 0.0,
            level: plan.level,
            eval: plan.eval,
            model: None,
        }
    }

    /// Whether every one of `families` is measured (a stopped run's
    /// measurement may hold only the first few).
    fn covers(&self, families: &[DayFamily]) -> bool {
        families
            .iter()
            .all(|f| self.scores.iter().any(|s| s.family == *f))
    }
}

pub fn days(home: &Home, a: DaysArgs) -> anyhow::Result<ExitCode> {
    let say = |s: String| eprintln!("{s}");
    let resumed = a.resume.as_deref().map(Progress::read).transpose()?;
    let plan = resumed.as_ref().map_or(&a.plan, |p| &p.plan).clone();
    let parse = |names: &[String]| -> anyhow::Result<Vec<DayFamily>> {
        names
            .iter()
            .filter(|n| !n.trim().is_empty())
            .map(|n| DayFamily::parse(n).map_err(anyhow::Error::msg))
            .collect()
    };
    let trained = parse(&plan.families)?;
    let held_out = parse(&plan.held_out)?;
    anyhow::ensure!(
        !trained.is_empty(),
        "name at least one family for the days (--families arithmetic,files)"
    );
    if let Some(f) = trained.iter().find(|f| held_out.contains(f)) {
        anyhow::bail!(
            "{} is both posed and held out; a held-out family is only measured",
            f.as_str()
        );
    }
    anyhow::ensure!(
        (0.0..=1.0).contains(&plan.feedback) && (0.0..=1.0).contains(&plan.follow_up),
        "--feedback and --follow-up are shares between 0 and 1"
    );
    // Read before anything is measured: a mistyped file costs nothing.
    let defaults = match &plan.night_config {
        Some(file) => NightConfig::load(home, Some(file), &Default::default())?,
        None => NightConfig::default(),
    };
    let every: Vec<DayFamily> = trained.iter().chain(&held_out).copied().collect();
    let mut progress = match resumed {
        Some(p) => {
            say(format!(
                "resuming the run in {} ({} of {} nights done), with its own settings",
                p.data_folder.display(),
                p.nights.len(),
                p.plan.nights
            ));
            p
        }
        None => {
            let given_before = a
                .before
                .as_ref()
                .map(|file| earlier(file, plan.level, plan.eval, &every))
                .transpose()?;
            let bench = crate::bench::fresh_home(home, "days", a.engine.model.as_deref())?;
            share_embedder(home, &bench)?;
            Progress {
                plan: plan.clone(),
                data_folder: bench.root().to_path_buf(),
                model: reverie_models::active::resolve(&bench, None)?,
                before_measured: given_before.unwrap_or_else(|| Measured::empty(&plan)),
                before_from: a.before.clone(),
                nights: Vec::new(),
                day: None,
                after_measured: None,
            }
        }
    };
    let bench = Home::new(progress.data_folder.clone());
    let results = bench.root().with_extension("results.json");
    progress.save(&results)?;
    if !progress.before_measured.covers(&every) {
        say(format!(
            "measuring {} on fresh tasks",
            progress.model.display()
        ));
        let m = measure(
            home,
            &a.engine,
            &plan,
            &progress.model.clone(),
            &every,
            &held_out,
            "before",
            progress.before_measured.clone(),
            &mut |m| {
                progress.before_measured = m.clone();
                progress.save(&results)
            },
        )?;
        progress.before_measured = m;
    }
    let before = progress.before_measured.clone();
    say(format!("before: {}", describe_scores(&before.scores)));

    let night_cfg = NightConfig {
        gpu_layers: a.engine.gpu_layers,
        verify_tasks: plan.verify.unwrap_or(defaults.verify_tasks),
        judge: JudgeModel::parse(&plan.judge)?,
        ..defaults
    };
    for night in progress.nights.len() + 1..=plan.nights {
        let model = reverie_models::active::resolve(&bench, None)?;
        if progress.day.as_ref().is_none_or(|d| d.night != night) {
            progress.day = Some(DayProgress {
                night,
                channels: 0,
                posed: Vec::new(),
                complete: false,
                seconds: 0.0,
            });
        }
        let (posed, day_seconds) =
            pose_day(&a.engine, &plan, &trained, &bench, &results, &mut progress)?;
        // The night's own time; the day's is counted across stops.
        let started = Instant::now();
        let out = crate::bench::sleep(&bench, &model, &night_cfg)?;
        let truth: Vec<bool> = posed.iter().map(|p| p.passed).collect();
        // Each reply's number of one kind (the judge's grade, the reward
        // trained on, the advantage) set against the hidden checks.
        let against = |number: &dyn Fn(usize) -> Option<f32>, threshold: f32| {
            let per_task: Vec<(i64, usize, usize, f32)> = (out.report.tasks.iter().enumerate())
                .filter_map(|(i, t)| Some((t.channel, t.first, t.last, number(i)?)))
                .collect();
            agreement(&truth, &rewards_of(&posed, &per_task), threshold)
        };
        let tasks = &out.report.tasks;
        let judge = against(
            &|i| Some(tasks[i].judged.unwrap_or(tasks[i].reward)),
            night_cfg.success_threshold,
        );
        let reward = against(&|i| Some(tasks[i].reward), night_cfg.success_threshold);
        // Whether what the night trains on pushes right replies up and wrong
        // ones down: its AUC is the figure that matters for learning.
        let advantage = against(&|i| out.report.advantages.get(i).copied().flatten(), 0.0);
        say(format!(
            "night {night}: judge accuracy {:.0}% κ {:.2} over {} requests, advantage AUC {:.2}; {}",
            judge.accuracy * 100.0,
            judge.kappa,
            judge.covered,
            advantage.auc,
            crate::bench::deployed_or_kept(&out)
        ));
        let train = out.report.train.clone().unwrap_or_default();
        progress.nights.push(serde_json::json!({
            "night": out.night,
            // The model the day ran on and the night trained.
            "day_model": model,
            "requests": posed.len(),
            "passed_first": posed.iter().filter(|p| p.first_passed).count(),
            "passed_final": posed.iter().filter(|p| p.passed).count(),
            "followed_up": posed.iter().filter(|p| p.followed_up).count(),
            "rated": posed.iter().filter(|p| p.rated.is_some()).count(),
            "day_success": day_success(&posed),
            // The judge's own grade against the hidden checks, and the
            // reward the night trained on (the person's rating where given).
            "judge": judge,
            "reward": reward,
            "advantage": advantage,
            "judged_sub_tasks": out.report.tasks.len(),
            "judge_model": out.report.judge_model(),
            "value_mean_abs_error": out.report.summary.as_ref().and_then(|s| s.mean_abs_prediction_error),
            "deployed": out.deployed,
            "kept_reason": out.kept_reason,
            "verify": out.report.verify,
            "train_steps": train.steps,
            "train_sequences": train.sequences,
            "train_lr": night_cfg.train.optim.lr,
            "train_epochs": night_cfg.train.epochs,
            "losses": train.losses,
            "stage_seconds": out.report.seconds,
            "day_seconds": day_seconds,
            "seconds": day_seconds + started.elapsed().as_secs_f64(),
        }));
        progress.day = None;
        progress.save(&results)?;
    }

    let after_model = reverie_models::active::resolve(&bench, None)?;
    // With no nights there is nothing to measure again, unless the first
    // measurement came from a file: then this model is compared with it.
    let after = match progress.after_measured.clone() {
        Some(m) if m.covers(&every) => Some(m),
        None if plan.nights == 0 && progress.before_from.is_none() => None,
        so_far => {
            say("measuring the model after the nights".into());
            let m = measure(
                home,
                &a.engine,
                &plan,
                &after_model,
                &every,
                &held_out,
                "after",
                so_far.unwrap_or_else(|| Measured::empty(&plan)),
                &mut |m| {
                    progress.after_measured = Some(m.clone());
                    progress.save(&results)
                },
            )?;
            progress.after_measured = Some(m.clone());
            Some(m)
        }
    };
    let per_night = &progress.nights;
    let base = &progress.model;
    let compare = |keep: &dyn Fn(DayFamily) -> bool| -> Option<Paired> {
        let after = after.as_ref()?;
        let of = |m: &Measured| -> Vec<Outcome> {
            m.outcomes
                .iter()
                .filter(|(f, _)| keep(*f))
                .map(|(_, o)| o.clone())
                .collect()
        };
        Some(paired(&of(&before), &of(after)))
    };
    let per_family: BTreeMap<&str, Option<Paired>> = every
        .iter()
        .map(|f| (f.as_str(), compare(&|g| g == *f)))
        .collect();
    let trained_paired = compare(&|f| !held_out.contains(&f));
    let heldout_paired = compare(&|f| held_out.contains(&f));
    let report = serde_json::json!({
        "model": base,
        "families": trained.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
        "held_out": held_out.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
        "tasks_per_day": plan.tasks,
        "eval_per_family": plan.eval,
        "level": plan.level,
        "feedback": plan.feedback,
        "follow_up": plan.follow_up,
        "nights": per_night,
        "plan": plan,
        "nights_deployed": per_night.iter().filter(|n| !n["deployed"].is_null()).count(),
        "before": before.scores,
        "after": after.as_ref().map(|m| m.scores.clone()),
        "paired": per_family,
        "trained_paired": trained_paired,
        "heldout_paired": heldout_paired,
        "measure_seconds": [Some(before.seconds), after.as_ref().map(|m| m.seconds)],
        "data_folder": bench.root(),
        "before_measured": before,
        "after_measured": after,
        "results_file": results,
    });
    save(&results, &report)?;
    if a.json {
        output::json(&report)?;
    } else {
        println!("before: {}", describe_scores(&before.scores));
        if let Some(m) = &after {
            println!("after:  {}", describe_scores(&m.scores));
        }
        for (name, p) in [("trained", trained_paired), ("held out", heldout_paired)] {
            if let Some(p) = p {
                println!(
                    "{name}: {:+.1} points ({} gained, {} lost of {}, p = {:.3})",
                    p.difference() * 100.0,
                    p.gained,
                    p.lost,
                    p.tasks,
                    p.p_value
                );
            }
        }
        for n in per_night {
            println!(
                "night {}: judge accuracy {:.0}% κ {:.2} (failures caught {:.0}%), value error {}, {}",
                n["night"],
                n["judge"]["accuracy"].as_f64().unwrap_or(0.0) * 100.0,
                n["judge"]["kappa"].as_f64().unwrap_or(0.0),
                n["judge"]["failure_recall"].as_f64().unwrap_or(0.0) * 100.0,
                n["value_mean_abs_error"],
                if n["deployed"].is_null() { "kept" } else { "deployed" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Success of the day's tasks (every step, after follow-ups).
fn day_success(posed: &[Posed]) -> f64 {
    let tasks = task_outcomes(posed);
    tasks.iter().filter(|t| t.2).count() as f64 / tasks.len().max(1) as f64
}

/// `model` on `plan.eval` fresh tasks of each family, one task to a
/// channel, greedy, without follow-ups or ratings, in a data folder of its
/// own. Goes on from `so_far` (the families a stopped run measured) and
/// hands the measurement to `saved` after each family.
#[allow(clippy::too_many_arguments)]
fn measure(
    home: &Home,
    engine: &EngineArgs,
    plan: &Plan,
    model: &Path,
    families: &[DayFamily],
    held_out: &[DayFamily],
    when: &str,
    so_far: Measured,
    saved: &mut dyn FnMut(&Measured) -> anyhow::Result<()>,
) -> anyhow::Result<Measured> {
    let started = Instant::now();
    let mut m = so_far;
    let done: Vec<DayFamily> = m.scores.iter().map(|s| s.family).collect();
    let seconds_before = m.seconds;
    let scratch = crate::bench::fresh_home(home, &format!("days-eval-{when}"), Some(model))?;
    share_embedder(home, &scratch)?;
    let store = Arc::new(Store::open(&scratch)?);
    let services = Arc::new(Services::new(&scratch));
    // The model named, not `--model`: after the nights it is a checkpoint.
    let engine = engine.load_file(&scratch, model, 1)?;
    m.model = Some(model.to_path_buf());
    for &f in families.iter().filter(|f| !done.contains(f)) {
        let tasks = day_tasks(&[f], plan.eval, EVAL_SEED, plan.level);
        let prefix = format!("eval-{}", f.as_str());
        let results = eval_day_tasks(
            &engine,
            &store,
            &services,
            &tasks,
            &prefix,
            plan.family_tools,
            &CancelFlag::default(),
            &mut |_| {},
        )?;
        let passed = results.iter().filter(|r| r.1.passed).count();
        eprintln!("  {} {passed}/{}", f.as_str(), results.len());
        m.scores.push(FamilyScore {
            family: f,
            held_out: held_out.contains(&f),
            tasks: results.len(),
            passed,
        });
        // Named by position, as the results files of earlier runs are.
        m.outcomes
            .extend(results.into_iter().enumerate().map(|(t, (f, o))| {
                let prompt = format!("{}-{t}", f.as_str());
                (f, Outcome { prompt, ..o })
            }));
        m.seconds = seconds_before + started.elapsed().as_secs_f64();
        saved(&m)?;
    }
    Ok(m)
}

/// Poses the day in `progress.day` from its first unfinished channel (none
/// when it is complete), saving the progress after each channel; returns
/// the day's requests and seconds. A channel the stop cut short is deleted
/// first, so the night never sees half of one.
fn pose_day(
    engine: &EngineArgs,
    plan: &Plan,
    trained: &[DayFamily],
    bench: &Home,
    results: &Path,
    progress: &mut Progress,
) -> anyhow::Result<(Vec<Posed>, f64)> {
    let Some(day) = progress.day.as_ref() else {
        anyhow::bail!("no day to pose");
    };
    if day.complete {
        return Ok((day.posed.clone(), day.seconds));
    }
    let (night, done, seconds_before) = (day.night, day.channels, day.seconds);
    let prefix = format!("day{night}");
    let channels = Channels {
        skip: done,
        ..Channels::new(&prefix, plan.per_channel)
    };
    let tasks = day_tasks(
        trained,
        plan.tasks,
        plan.seed.wrapping_add(10_000 * night as u64),
        plan.level,
    );
    let store = Arc::new(Store::open(bench)?);
    for k in done..tasks.len().div_ceil(channels.per_channel) {
        if let Some(cut) = store.channel_by_name(&channels.name(k))? {
            eprintln!(
                "day {night}: channel {} was cut short by the stop; posing it again",
                channels.name(k)
            );
            store.delete_channel(cut.id)?;
        }
    }
    let opts = DayOptions {
        system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
        params: SamplingParams {
            seed: plan.seed as u32 ^ night as u32,
            max_tokens: 512,
            ..SamplingParams::default()
        },
        max_calls: 8,
        family_tools: plan.family_tools,
        follow_up: plan.follow_up,
        feedback: plan.feedback,
        seed: plan.seed ^ night as u64,
    };
    let services = Arc::new(Services::new(bench));
    // The day runs on what the nights deployed, not on `--model`.
    let model = reverie_models::active::resolve(bench, None)?;
    let engine = engine.load_file(bench, &model, 1)?;
    let started = Instant::now();
    let mut saved = Ok(());
    simulate_day(
        &engine,
        &store,
        &services,
        &tasks,
        channels,
        &opts,
        &CancelFlag::default(),
        &mut |posed| {
            for p in posed {
                eprintln!(
                    "day {night}: {} ({}) {}{}",
                    p.family.as_str(),
                    p.step + 1,
                    if p.passed { "passed" } else { "failed" },
                    if p.followed_up {
                        " after a follow-up"
                    } else {
                        ""
                    }
                )
            }
            if let Some(day) = progress.day.as_mut() {
                day.channels += 1;
                day.posed.extend_from_slice(posed);
                day.seconds = seconds_before + started.elapsed().as_secs_f64();
            }
            if saved.is_ok() {
                saved = progress.save(results);
            }
        },
    )?;
    saved?;
    let Some(day) = progress.day.as_mut() else {
        anyhow::bail!("no day to pose");
    };
    day.complete = true;
    let posed = (day.posed.clone(), day.seconds);
    progress.save(results)?;
    Ok(posed)
}

impl Progress {
    fn read(file: &Path) -> anyhow::Result<Progress> {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let p: Progress = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} cannot be resumed: it is not the results file of a bench days run (the files of runs from before `--resume` keep no plan)",
                file.display()
            )
        })?;
        anyhow::ensure!(
            p.data_folder.is_dir(),
            "the run's data folder {} is gone; start a new run",
            p.data_folder.display()
        );
        Ok(p)
    }

    fn save(&self, file: &Path) -> anyhow::Result<()> {
        save(file, &serde_json::to_value(self)?)
    }
}

/// Writes `value` to `path` whole or not at all.
fn save(path: &Path, value: &serde_json::Value) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value)?)
        .and_then(|_| std::fs::rename(&tmp, path))
        .with_context(|| format!("writing {}", path.display()))
}

/// The measurement of an earlier run's results file, if it measured the
/// same tasks.
fn earlier(
    file: &Path,
    level: u32,
    eval: usize,
    families: &[DayFamily],
) -> anyhow::Result<Measured> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a results file of bench days", file.display()))?;
    let m: Measured = serde_json::from_value(v["before_measured"].clone()).with_context(|| {
        format!(
            "{} holds no measurement (`before_measured`); give the results file of a bench days run",
            file.display()
        )
    })?;
    let measured: Vec<DayFamily> = m.scores.iter().map(|s| s.family).collect();
    let names = |f: &[DayFamily]| f.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(",");
    anyhow::ensure!(
        m.level == level && m.eval == eval && measured == families,
        "{} measured level {}, {} tasks each of {}; this run asks for level {}, {} tasks each of {}: pass the same --level, --eval, --families and --held-out",
        file.display(),
        m.level,
        m.eval,
        names(&measured),
        level,
        eval,
        names(families)
    );
    Ok(m)
}

fn describe_scores(scores: &[FamilyScore]) -> String {
    scores
        .iter()
        .map(|s| {
            format!(
                "{}{} {}/{}",
                s.family.as_str(),
                if s.held_out { " (held out)" } else { "" },
                s.passed,
                s.tasks
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_measurement_is_reused_only_for_the_same_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("days.results.json");
        let m = Measured {
            scores: vec![FamilyScore {
                family: DayFamily::Arithmetic,
                held_out: false,
                tasks: 1,
                passed: 1,
            }],
            outcomes: vec![(
                DayFamily::Arithmetic,
                Outcome {
                    prompt: "arithmetic-0".into(),
                    passed: true,
                },
            )],
            seconds: 1.0,
            level: 2,
            eval: 1,
            model: None,
        };
        save(&file, &serde_json::json!({ "before_measured": m })).unwrap();
        let back = earlier(&file, 2, 1, &[DayFamily::Arithmetic]).unwrap();
        assert_eq!(back.outcomes[0].1, m.outcomes[0].1);
        let err = earlier(&file, 3, 1, &[DayFamily::Arithmetic]).unwrap_err();
        assert!(
            format!("{err:#}").contains("pass the same --level"),
            "{err:#}"
        );
        let err = earlier(&file, 2, 1, &[DayFamily::Files]).unwrap_err();
        assert!(format!("{err:#}").contains("files"), "{err:#}");
        save(&file, &serde_json::json!({"nights": []})).unwrap();
        let err = earlier(&file, 2, 1, &[DayFamily::Arithmetic]).unwrap_err();
        assert!(
            format!("{err:#}").contains("holds no measurement"),
            "{err:#}"
        );
    }
}
