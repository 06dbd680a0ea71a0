//! `reverie bench value`: how well the value model's baselines match what
//! happened. Every judged sub-task of the finished nights in a data folder
//! is predicted again, with the memory of the nights before it only, and
//! the answer is read two ways side by side: the grade it wrote (greedy)
//! and the mean grade under the model's distribution (the baseline the
//! night uses).

use std::process::ExitCode;

use clap::Args;
use reverie_core::Home;
use reverie_night::{JudgedTask, NightConfig, NightReport, Similarity, ValueMemory};
use reverie_store::{NightStatus, Store};
use serde::Serialize;

use crate::chat::EngineArgs;
use crate::output;

#[derive(Args)]
pub struct ValueArgs {
    #[command(flatten)]
    engine: EngineArgs,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Default)]
struct Report {
    tasks: usize,
    /// Sub-tasks the value model gave no answer for.
    unanswered: usize,
    mean_reward: f64,
    mae_answered: f64,
    mae_mean: f64,
    /// `mae_mean ÷ mae_answered`: below 1, the mean is the better baseline.
    mae_ratio: f64,
    /// How much the predictions vary across sub-tasks (a constant guess has 0).
    spread_answered: f64,
    spread_mean: f64,
}

pub fn value(home: &Home, a: ValueArgs) -> anyhow::Result<ExitCode> {
    let store = Store::open(home)?;
    let nights: Vec<_> = store
        .nights()?
        .into_iter()
        .filter(|n| n.status == NightStatus::Done)
        .collect();
    anyhow::ensure!(
        !nights.is_empty(),
        "no finished night in {}: point --home at a data folder that has slept (e.g. one under bench/ made by `reverie bench nights`)",
        home.root().display()
    );
    let engine = a.engine.load(home, 1)?;
    let cfg = NightConfig::default();
    let similarity = Similarity::new(home, &store);
    let (mut actual, mut answered, mut mean) = (Vec::new(), Vec::new(), Vec::new());
    let mut unanswered = 0;
    for night in &nights {
        let mut earlier = ValueMemory::from_finished_nights(&store, night.started_ms)?;
        earlier.entries.retain(|e| e.night < night.id);
        let tasks: Vec<JudgedTask> = NightReport::from_json_or_empty(&night.report).tasks;
        for (i, t) in tasks.iter().enumerate() {
            if !a.json {
                eprint!("\rnight {}: sub-task {}/{}", night.id, i + 1, tasks.len());
            }
            match earlier.predict(&engine, &t.description, &cfg, &similarity) {
                Ok(p) => {
                    actual.push(f64::from(t.reward));
                    answered.push(f64::from(p.answered()));
                    mean.push(f64::from(p.reward));
                }
                Err(_) => unanswered += 1,
            }
        }
        if !a.json {
            eprintln!();
        }
    }
    let mae = |p: &[f64]| {
        p.iter()
            .zip(&actual)
            .map(|(p, r)| (p - r).abs())
            .sum::<f64>()
            / p.len().max(1) as f64
    };
    let spread = |p: &[f64]| {
        let m = p.iter().sum::<f64>() / p.len().max(1) as f64;
        (p.iter().map(|x| (x - m).powi(2)).sum::<f64>() / p.len().max(1) as f64).sqrt()
    };
    let (mae_answered, mae_mean) = (mae(&answered), mae(&mean));
    let report = Report {
        tasks: actual.len(),
        unanswered,
        mean_reward: actual.iter().sum::<f64>() / actual.len().max(1) as f64,
        mae_answered,
        mae_mean,
        mae_ratio: if mae_answered > 0.0 {
            mae_mean / mae_answered
        } else {
            f64::NAN
        },
        spread_answered: spread(&answered),
        spread_mean: spread(&mean),
    };
    if a.json {
        output::json(&report)?;
    } else {
        println!(
            "{} sub-tasks (mean reward {:.2}, {} unanswered)\n  grade written: mean abs error {:.3}, spread {:.3}\n  mean grade:    mean abs error {:.3}, spread {:.3}\n  ratio {:.2}",
            report.tasks,
            report.mean_reward,
            report.unanswered,
            report.mae_answered,
            report.spread_answered,
            report.mae_mean,
            report.spread_mean,
            report.mae_ratio
        );
    }
    Ok(ExitCode::SUCCESS)
}
