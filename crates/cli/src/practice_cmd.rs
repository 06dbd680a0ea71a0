//! `reverie practice` and `reverie eval`: verifiable tasks for the agent,
//! trained on by the next night (practice) or only measured (eval).

use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use reverie_agent::CancelFlag;
use reverie_core::Home;
use reverie_practice::{
    run, Episode, Family, RunConfig, Tally, TaskWriter, EVAL_SEED, PRACTICE_TEMPERATURE,
};
use reverie_store::Store;

use crate::chat::EngineArgs;
use crate::output;

#[derive(Args)]
pub struct PracticeArgs {
    /// arithmetic, strings or ledger (units is held out: eval only).
    #[arg(long)]
    family: String,
    /// How many tasks.
    #[arg(long, default_value_t = 8)]
    n: usize,
    /// Attempts per task; with two or more, the night judges each attempt
    /// against its task's pass rate.
    #[arg(long, default_value_t = 4)]
    samples: usize,
    /// Who writes the tasks: the model (a tasker channel, rewarded for tasks
    /// passed about half the time), the family's generator, or every other
    /// task each.
    #[arg(long, default_value = "mixed")]
    tasker: TaskWriter,
    /// Task seed (default: a new one each run).
    #[arg(long)]
    seed: Option<u64>,
    /// 1 (easiest) to 8; default: the tasker picks the level where about
    /// half the recent attempts pass.
    #[arg(long)]
    difficulty: Option<u32>,
    #[arg(long, default_value_t = PRACTICE_TEMPERATURE)]
    temperature: f32,
    /// Tool calls one task may make.
    #[arg(long, default_value_t = 8)]
    max_tool_calls: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Args)]
pub struct EvalArgs {
    /// arithmetic, strings, ledger or units (held out).
    #[arg(long)]
    family: String,
    #[arg(long, default_value_t = 20)]
    n: usize,
    /// Fixed by default, so two evals see the same tasks.
    #[arg(long, default_value_t = EVAL_SEED)]
    seed: u64,
    #[arg(long, default_value_t = 3)]
    difficulty: u32,
    #[arg(long, default_value_t = 8)]
    max_tool_calls: usize,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

fn batch(home: &Home, engine: &EngineArgs, cfg: RunConfig, json: bool) -> anyhow::Result<ExitCode> {
    let store = Arc::new(Store::open(home)?);
    let engine = engine.load(home, 1)?;
    let services = Arc::new(reverie_tools::Services::new(home));
    services.set_model_name(&engine.info().name);
    let cancel = CancelFlag::default();
    {
        let c = cancel.clone();
        ctrlc::set_handler(move || c.cancel())?;
    }
    let mut show = |i: usize, e: &Episode| {
        if !json {
            let mark = if e.verdict.passed { "pass" } else { "fail" };
            eprintln!(
                "{:>3}/{} {mark}  {}  ({} tool calls)",
                i + 1,
                cfg.episodes(),
                output::shorten(&e.verdict.why, 90),
                e.tool_calls
            );
        }
    };
    let episodes = run(&engine, &store, &services, &cfg, &cancel, &mut show)?;
    let tally = Tally::of(&episodes);
    let (passed, rate) = (tally.passed, tally.success());
    if json {
        output::json(&serde_json::json!({
            "family": cfg.family.as_str(),
            "kind": if cfg.eval { "eval" } else { "practice" },
            "difficulty": cfg.difficulty,
            "seed": cfg.seed,
            "tasks": cfg.n,
            "attempts_per_task": cfg.samples.max(1),
            "n": episodes.len(),
            "passed": passed,
            "success_rate": rate,
            "stopped": tally.stopped,
            "episodes": episodes,
        }))?;
    } else {
        println!(
            "{} {}: {passed}/{} passed ({:.0}%) at level {}",
            if cfg.eval { "eval" } else { "practice" },
            cfg.family.as_str(),
            episodes.len(),
            rate * 100.0,
            cfg.difficulty
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A practice batch: sampled, at the tasker's level unless one is given.
pub fn practice_config(
    home: &Home,
    family: Family,
    n: usize,
    seed: Option<u64>,
    difficulty: Option<u32>,
    temperature: f32,
    max_tool_calls: usize,
) -> anyhow::Result<RunConfig> {
    let store = Store::open(home)?;
    let mut cfg = RunConfig::practice_at_level(&store, family, n, 1, seed, difficulty)?;
    cfg.params.temperature = temperature;
    cfg.max_tool_calls = max_tool_calls;
    Ok(cfg)
}

pub fn practice(home: &Home, a: PracticeArgs) -> anyhow::Result<ExitCode> {
    let family = Family::parse(&a.family).map_err(anyhow::Error::msg)?;
    let mut cfg = practice_config(
        home,
        family,
        a.n,
        a.seed,
        a.difficulty,
        a.temperature,
        a.max_tool_calls,
    )?;
    cfg.samples = a.samples;
    cfg.tasker_share = a.tasker.share();
    batch(home, &a.engine, cfg, a.json)
}

pub fn eval(home: &Home, a: EvalArgs) -> anyhow::Result<ExitCode> {
    let family = Family::parse(&a.family).map_err(anyhow::Error::msg)?;
    let cfg = RunConfig {
        max_tool_calls: a.max_tool_calls,
        ..RunConfig::eval(family, a.n, a.seed, a.difficulty)
    };
    batch(home, &a.engine, cfg, a.json)
}

/// Runs a batch on `model` in `home` without printing; returns its episodes.
pub fn episodes(
    home: &Home,
    model: &std::path::Path,
    cfg: &RunConfig,
) -> anyhow::Result<Vec<Episode>> {
    let store = Arc::new(Store::open(home)?);
    let services = Arc::new(reverie_tools::Services::new(home));
    Ok(reverie_practice::run_model(
        model,
        0,
        &store,
        &services,
        cfg,
        &CancelFlag::default(),
    )?)
}
