//! `reverie sleep`, `reverie night` and `reverie checkpoint`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use reverie_core::Home;
use reverie_night::{
    run_night, CancelFlag, NightConfig, NightEvent, NightOverrides, NightReport, Observed,
    PracticeBatch, Schedule,
};
use reverie_practice::Family;
use reverie_store::{Store, StoreError};

use crate::output;

#[derive(Args)]
pub struct SleepArgs {
    /// A GGUF to train instead of the active model.
    #[arg(long)]
    model: Option<std::path::PathBuf>,
    /// A JSON file with a `NightConfig` (any subset of fields); by default
    /// `night.json` in the data folder, when there is one.
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Print progress as JSON lines and the outcome as the last line.
    #[arg(long)]
    json: bool,
    /// Layers to offload to the GPU while judging (CUDA builds).
    #[arg(long)]
    gpu_layers: Option<u32>,
    /// Wait until this local time (HH:MM) before starting, and until
    /// something new was said since the last night (or it practises).
    #[arg(long)]
    at: Option<String>,
    /// Then wait until nobody has chatted for this many minutes.
    #[arg(long)]
    when_idle: Option<u64>,
    /// Practise first, as the night's first stage: FAMILY or FAMILY:TASKS
    /// (8 tasks by default; repeat for several families).
    #[arg(long = "practice", value_name = "FAMILY[:TASKS]")]
    practice: Vec<String>,
    /// Attempts per practice task (default 6).
    #[arg(long)]
    practice_samples: Option<usize>,
    /// The judge and value model: `installed` (the model before any night,
    /// the default), `deployed` (the model the day ran on) or a GGUF file.
    #[arg(long, value_name = "installed|deployed|FILE")]
    judge: Option<String>,
}

/// `arithmetic` or `arithmetic:6` → the family and its task count.
fn practice_spec(spec: &str) -> anyhow::Result<(Family, usize)> {
    let (name, n) = match spec.split_once(':') {
        Some((f, n)) => (
            f,
            n.parse::<usize>().map_err(|_| {
                anyhow::anyhow!("--practice {spec}: the task count after ':' must be a number")
            })?,
        ),
        None => (spec, 8),
    };
    let batch = PracticeBatch {
        family: name.to_string(),
        tasks: n,
    };
    let checked = reverie_night::check_batches(&[batch])
        .map_err(|e| anyhow::anyhow!("--practice {spec}: {e}"))?;
    Ok(checked[0])
}

/// Waits until the schedule of `--at` and `--when-idle` is due (the same
/// rule as the window's schedule), checking Ctrl-C every second.
fn wait_for_schedule(
    store: &Store,
    a: &SleepArgs,
    practises: bool,
    cancel: &CancelFlag,
) -> anyhow::Result<()> {
    let mut schedule = Schedule::new(a.at.as_deref(), a.when_idle)?;
    if !schedule.is_set() {
        return Ok(());
    }
    let when = match (&a.at, a.when_idle) {
        (Some(at), Some(min)) => format!("at {at}, once nobody has chatted for {min} minutes"),
        (Some(at), None) => format!("at {at}"),
        (None, Some(min)) => format!("once nobody has chatted for {min} minutes"),
        (None, None) => unreachable!("a set schedule has a time or idle minutes"),
    };
    eprintln!("sleeping {when}, when something new was said; Ctrl-C to cancel");
    loop {
        if cancel.is_cancelled() {
            anyhow::bail!("cancelled before the night started");
        }
        if schedule.due(&Observed::now(store, practises)?) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

pub fn sleep(home: &Home, a: SleepArgs) -> anyhow::Result<ExitCode> {
    let store = Store::open(home)?;
    let model = reverie_models::active::resolve(home, a.model.as_deref())?;
    let mut overrides = NightOverrides {
        gpu_layers: a.gpu_layers,
        practice_samples: a.practice_samples,
        judge: a
            .judge
            .as_deref()
            .map(reverie_night::JudgeModel::parse)
            .transpose()?,
        ..NightOverrides::default()
    };
    for spec in &a.practice {
        let (family, tasks) = practice_spec(spec)?;
        overrides.practice.push(PracticeBatch {
            family: family.as_str().to_string(),
            tasks,
        });
    }
    let cfg = NightConfig::load(home, a.config.as_deref(), &overrides)?;
    let cancel = CancelFlag::default();
    {
        let c = cancel.clone();
        ctrlc::set_handler(move || c.cancel())?;
    }
    wait_for_schedule(&store, &a, !cfg.practice.is_empty(), &cancel)?;
    if let Some(pid) = reverie_night::lock::sleeping(home) {
        anyhow::bail!("a night is already running (process {pid}); wait for it or stop it");
    }
    let _sleeping = reverie_night::lock::SleepGuard::acquire(home)?;
    let bar = if a.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    bar.set_style(
        ProgressStyle::with_template("{prefix:>9} [{bar:30}] {pos}/{len} {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    let json = a.json;
    let outcome = run_night(home, &store, &model, &cfg, &cancel, &mut |ev| {
        if json {
            println!("{}", serde_json::to_string(&ev).unwrap_or_default());
            return;
        }
        match &ev {
            NightEvent::StageStarted { stage } => {
                bar.reset();
                bar.set_length(1);
                bar.set_prefix(stage.as_str());
                bar.set_message("");
            }
            NightEvent::Item {
                index,
                count,
                label,
                ..
            } => {
                bar.set_length(*count as u64);
                bar.set_position(*index as u64);
                bar.set_message(label.chars().take(50).collect::<String>());
            }
            NightEvent::TrainStep {
                step,
                total,
                loss,
                oapl,
                env,
                user,
                tokens_per_s,
                eta_s,
            } => {
                bar.set_length(*total as u64);
                bar.set_position(*step as u64);
                bar.set_message(format!("loss {loss:.4} (oapl {oapl:.4} env {env:.4} user {user:.4}) {tokens_per_s:.0} tok/s, {eta_s:.0}s left"));
            }
            NightEvent::Note { stage, message } => {
                bar.println(format!("{}: {message}", stage.as_str()))
            }
            NightEvent::StageFinished { stage, seconds } => {
                bar.println(format!("{:>9} done in {seconds:.1}s", stage.as_str()));
            }
        }
    });
    bar.finish_and_clear();
    let outcome = outcome?;
    let summary = serde_json::json!({
        "night": outcome.night,
        "deployed": outcome.deployed,
        "kept_reason": outcome.kept_reason,
        "report": outcome.report,
    });
    if json {
        output::json(&summary)?;
    } else {
        print_morning(&outcome.report);
        match (&outcome.deployed, &outcome.kept_reason) {
            (Some(p), _) => println!(
                "Good morning: night {} trained and deployed {}",
                outcome.night,
                p.display()
            ),
            (None, Some(why)) => println!(
                "Good morning: night {} kept the current model: {why}",
                outcome.night
            ),
            _ => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The night at a glance: what was judged, what was expected, what trained.
fn print_morning(r: &NightReport) {
    if !r.tasks.is_empty() {
        println!("\n  judged by {}", r.judge_model().display());
        println!("\n  reward  expected  advantage  sub-task");
        let num = |v: Option<f32>| v.map_or("  –  ".to_string(), |x| format!("{x:5.2}"));
        for (i, t) in r.tasks.iter().enumerate() {
            let pred = r.predictions.get(i).and_then(Option::as_ref);
            let adv = r.advantages.get(i).copied().flatten();
            let desc: String = t.description.chars().take(60).collect();
            println!(
                "  {}   {}     {}      {desc}",
                num(Some(t.reward)),
                num(pred.map(|p| p.reward)),
                num(adv)
            );
        }
    }
    if let Some(losses) = r
        .train
        .as_ref()
        .map(|t| &t.losses)
        .filter(|l| !l.is_empty())
    {
        let (first, last) = (losses[0], losses[losses.len() - 1]);
        println!(
            "\n  training: {} steps, loss {:.4} → {:.4} (oapl {:.4}, env {:.4}, user {:.4})",
            losses.len(),
            first.total,
            last.total,
            last.oapl,
            last.env,
            last.user
        );
    }
    let v = r.verify.clone().unwrap_or_default();
    if let (Some(b), Some(a)) = (v.perplexity_before, v.perplexity_after) {
        println!("  sanity perplexity: {b:.2} → {a:.2}\n");
    }
}

#[derive(Subcommand)]
pub enum NightCommand {
    /// Every night, oldest first.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One night's full record.
    Show {
        id: i64,
        #[arg(long)]
        json: bool,
    },
}

pub fn night(home: &Home, cmd: NightCommand) -> anyhow::Result<ExitCode> {
    let store = Store::open(home)?;
    let nights = store.nights()?;
    let row = |n: &reverie_store::Night| {
        let r = NightReport::from_json_or_empty(&n.report);
        serde_json::json!({
            "id": n.id, "started_ms": n.started_ms, "finished_ms": n.finished_ms, "status": n.status.as_str(),
            "stage": n.stage, "summary": r.summary, "deploy": r.deploy, "verify": r.verify,
        })
    };
    match cmd {
        NightCommand::List { json } => {
            let rows: Vec<_> = nights.iter().map(row).collect();
            if json {
                output::json(&serde_json::json!({ "nights": rows }))?;
            } else {
                for n in &nights {
                    println!(
                        "{:>4}  {:<10} {:<10} {}",
                        n.id,
                        n.status.as_str(),
                        n.stage,
                        serde_json::to_string(&NightReport::from_json_or_empty(&n.report).deploy)?
                    );
                }
            }
        }
        NightCommand::Show { id, json } => {
            let n = nights
                .iter()
                .find(|n| n.id == id)
                .ok_or(StoreError::NotFound { what: "night", id })?;
            let mut v = row(n);
            v["report"] = NightReport::from_json_or_empty(&n.report).to_json();
            if json {
                output::json(&v)?;
            } else {
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Subcommand)]
pub enum CheckpointCommand {
    /// Every checkpoint; the active one is marked.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Make an earlier (or later) checkpoint the active model.
    Rollback { id: i64 },
}

pub fn checkpoint(home: &Home, cmd: CheckpointCommand) -> anyhow::Result<ExitCode> {
    let store = Store::open(home)?;
    match cmd {
        CheckpointCommand::List { json } => {
            let cps = store.checkpoints()?;
            if json {
                let rows: Vec<_> = cps
                    .iter()
                    .map(|c| serde_json::json!({"id": c.id, "path": c.path, "sha256": c.sha256, "parent": c.parent, "night": c.night, "created_ms": c.created_ms, "active": c.active}))
                    .collect();
                output::json(&serde_json::json!({ "checkpoints": rows }))?;
            } else {
                for c in &cps {
                    println!(
                        "{} {:>4}  night {:<5} {}",
                        if c.active { "*" } else { " " },
                        c.id,
                        c.night.map(|n| n.to_string()).unwrap_or("-".into()),
                        c.path
                    );
                }
            }
        }
        CheckpointCommand::Rollback { id } => {
            let path = reverie_night::checkpoint::rollback(home, &store, id)?;
            println!("Reverie will now run checkpoint {id}: {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn practice_specs_name_a_trainable_family_and_a_count() {
        assert_eq!(practice_spec("ledger").unwrap(), (Family::Ledger, 8));
        assert_eq!(practice_spec("strings:3").unwrap(), (Family::Strings, 3));
        let e = practice_spec("strings:x").unwrap_err().to_string();
        assert!(e.contains("must be a number"), "{e}");
        let e = practice_spec("units:2").unwrap_err().to_string();
        assert!(e.contains("held-out"), "{e}");
        assert!(practice_spec("poetry").is_err());
    }
}
