//! `reverie sleep`, `reverie night` and `reverie checkpoint`.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use reverie_core::Home;
use reverie_night::{run_night, trigger, NightConfig, NightEvent, PracticeBatch};
use reverie_practice::Family;
use reverie_store::{Store, StoreError};

use crate::output;

#[derive(Args)]
pub struct SleepArgs {
    /// A GGUF to train instead of the active model.
    #[arg(long)]
    model: Option<std::path::PathBuf>,
    /// A JSON file with a `NightConfig` (any subset of fields).
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Print progress as JSON lines and the outcome as the last line.
    #[arg(long)]
    json: bool,
    /// Layers to offload to the GPU while judging (CUDA builds).
    #[arg(long)]
    gpu_layers: Option<u32>,
    /// Wait until this local time (HH:MM) before starting.
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

/// Waits for `--at` and `--when-idle`, checking Ctrl-C every second.
fn wait_for_trigger(store: &Store, a: &SleepArgs, cancel: &AtomicBool) -> anyhow::Result<()> {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    let stop = || cancel.load(Ordering::SeqCst);
    if let Some(at) = &a.at {
        let (h, m) = trigger::parse_clock(at).map_err(anyhow::Error::msg)?;
        let wait = trigger::seconds_until(trigger::local_seconds_of_day(), h, m);
        eprintln!(
            "sleeping at {at} (in {}h{:02}m); Ctrl-C to cancel",
            wait / 3600,
            wait % 3600 / 60
        );
        let until = Instant::now() + Duration::from_secs(wait as u64);
        while Instant::now() < until {
            if stop() {
                anyhow::bail!("cancelled before the night started");
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    if let Some(minutes) = a.when_idle {
        let idle_ms = minutes as i64 * 60_000;
        let mut said = false;
        loop {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis() as i64;
            if trigger::is_idle(now, store.last_message_ms()?, idle_ms) {
                break;
            }
            if !said {
                eprintln!(
                    "waiting until nobody has chatted for {minutes} minutes; Ctrl-C to cancel"
                );
                said = true;
            }
            if stop() {
                anyhow::bail!("cancelled before the night started");
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    Ok(())
}

pub fn sleep(home: &Home, a: SleepArgs) -> anyhow::Result<ExitCode> {
    let store = Store::open(home)?;
    let model = reverie_models::active::resolve(home, a.model.as_deref())?;
    let mut cfg: NightConfig = match &a.config {
        Some(p) => serde_json::from_slice(&std::fs::read(p)?)?,
        None => NightConfig::default(),
    };
    if let Some(n) = a.gpu_layers {
        cfg.gpu_layers = n;
    }
    for spec in &a.practice {
        let (family, tasks) = practice_spec(spec)?;
        cfg.practice.push(PracticeBatch {
            family: family.as_str().to_string(),
            tasks,
        });
    }
    if let Some(n) = a.practice_samples {
        cfg.practice_samples = n;
    }
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let c = cancel.clone();
        ctrlc::set_handler(move || c.store(true, std::sync::atomic::Ordering::SeqCst))?;
    }
    wait_for_trigger(&store, &a, &cancel)?;
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
fn print_morning(r: &serde_json::Value) {
    let tasks = r["tasks"].as_array().cloned().unwrap_or_default();
    if !tasks.is_empty() {
        println!("\n  reward  expected  advantage  sub-task");
        for (i, t) in tasks.iter().enumerate() {
            let pred = &r["predictions"][i];
            let adv = &r["advantages"][i];
            let num = |v: &serde_json::Value| {
                v.as_f64()
                    .map_or("  –  ".to_string(), |x| format!("{x:5.2}"))
            };
            let desc: String = t["description"]
                .as_str()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect();
            println!(
                "  {}   {}     {}      {desc}",
                num(&t["reward"]),
                num(&pred["reward"]),
                num(adv)
            );
        }
    }
    if let Some(losses) = r["train"]["losses"].as_array().filter(|l| !l.is_empty()) {
        let f = |i: usize, k: &str| losses[i][k].as_f64().unwrap_or(0.0);
        let last = losses.len() - 1;
        println!(
            "\n  training: {} steps, loss {:.4} → {:.4} (oapl {:.4}, env {:.4}, user {:.4})",
            losses.len(),
            f(0, "total"),
            f(last, "total"),
            f(last, "oapl"),
            f(last, "env"),
            f(last, "user")
        );
    }
    let v = &r["verify"];
    if let (Some(b), Some(a)) = (
        v["perplexity_before"].as_f64(),
        v["perplexity_after"].as_f64(),
    ) {
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
        serde_json::json!({
            "id": n.id, "started_ms": n.started_ms, "finished_ms": n.finished_ms, "status": n.status.as_str(),
            "stage": n.stage, "summary": n.report["summary"], "deploy": n.report["deploy"], "verify": n.report["verify"],
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
                        n.report["deploy"]
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
            v["report"] = n.report.clone();
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
