//! `reverie bench judge`: how often the night's judge is right. A simulated
//! user poses tasks of the practice families as ordinary messages in
//! ordinary channels (two or three to a channel, in a fresh data folder);
//! the agent answers with the family's tools (all of them with
//! `--all-tools`); each answer is checked by the
//! family's program, which only this benchmark runs. The judge then grades
//! the channels as a night would (also without the calculator's checks,
//! with `--plain`), and each grade is read two ways: the digit the judge wrote and the
//! expected grade under its logits (what the night uses). Reported per
//! way: coverage, accuracy, Cohen's κ and recall on failures against the
//! hidden checks.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use reverie_agent::{CancelFlag, DEFAULT_SYSTEM_PROMPT};
use reverie_core::{Home, SamplingParams};
use reverie_night::{channel_windows, judge_window, JudgeOptions, NightConfig};
use reverie_practice::days::{
    agreement, covers, day_tasks, simulate_day, Agreement, DayFamily, DayOptions,
};
use reverie_store::Store;
use reverie_tools::Services;
use serde::Serialize;

use crate::chat::EngineArgs;
use crate::output;

#[derive(Args)]
pub struct JudgeArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Simulated tasks in all.
    #[arg(long, default_value_t = 60)]
    tasks: usize,
    /// Tasks posed in one channel before the user moves to another.
    #[arg(long, default_value_t = 3)]
    per_channel: usize,
    /// Level of every family's tasks (1 = easiest).
    #[arg(long, default_value_t = 1)]
    level: u32,
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// Offer all of the agent's tools on every task, not only the task
    /// family's (a small model given all of them rarely gets past the
    /// call, which leaves the judge nothing but failures to grade).
    #[arg(long)]
    all_tools: bool,
    /// Also judge without the calculator's checks, to compare (twice the
    /// judging time).
    #[arg(long)]
    plain: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    tasks: usize,
    passed: usize,
    per_family: Vec<(String, usize, usize)>,
    /// Calculator checks shown, reward = expected grade (what nights use).
    checks_expected: Agreement,
    checks_written: Agreement,
    /// Without the checks (with `--plain` only).
    plain_expected: Option<Agreement>,
    plain_written: Option<Agreement>,
    answer_seconds: f64,
    judge_seconds: f64,
    home: String,
}

pub fn judge(home: &Home, a: JudgeArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(a.tasks > 0, "ask for at least one task (--tasks 1 or more)");
    let bench = crate::bench::fresh_home(home, "judge", a.engine.model.as_deref())?;
    let store = Arc::new(Store::open(&bench)?);
    let engine = a.engine.load(&bench, 1)?;
    let cancel = CancelFlag::default();

    let started = Instant::now();
    let families = [
        DayFamily::Arithmetic,
        DayFamily::Strings,
        DayFamily::Ledger,
        DayFamily::Units,
    ];
    let tasks = day_tasks(&families, a.tasks, a.seed, a.level);
    let opts = DayOptions {
        system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
        // As in practice and eval: eight calls, 512 tokens a reply.
        params: SamplingParams {
            seed: a.seed as u32,
            max_tokens: 512,
            ..SamplingParams::default()
        },
        max_calls: 8,
        family_tools: !a.all_tools,
        follow_up: 0.0,
        feedback: 0.0,
        seed: a.seed,
    };
    let services = Arc::new(Services::new(&bench));
    let posed = simulate_day(
        &engine,
        &store,
        &services,
        &tasks,
        a.per_channel,
        "day",
        &opts,
        &cancel,
        &mut |posed| {
            for p in posed {
                eprintln!(
                    "task {}/{}: {}: {}",
                    p.task + 1,
                    a.tasks,
                    p.family.as_str(),
                    if p.passed { "passed" } else { "failed" }
                );
            }
        },
    )?;
    let answer_seconds = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let cfg = NightConfig::default();
    let mut channels: Vec<i64> = posed.iter().map(|p| p.channel).collect();
    channels.dedup();
    // Per way of judging: each task's reward, where a sub-task covered it.
    let mut rewards: [Vec<Option<f32>>; 4] = Default::default();
    for r in rewards.iter_mut() {
        r.resize(posed.len(), None);
    }
    for (c, &ch) in channels.iter().enumerate() {
        let ws = channel_windows(
            &store,
            &services,
            reverie_core::ChannelId(ch),
            0,
            cfg.window,
        )?;
        for (w, window) in ws.iter().enumerate() {
            let ways: &[bool] = if a.plain { &[true, false] } else { &[true] };
            for (way, &checks) in ways.iter().enumerate() {
                eprintln!(
                    "judging channel {}/{} window {} ({})",
                    c + 1,
                    channels.len(),
                    w + 1,
                    if checks { "with checks" } else { "plain" }
                );
                let Ok(j) = judge_window(&engine, window, cfg.retries, JudgeOptions { checks })
                else {
                    continue;
                };
                for (t, written) in j.tasks.iter().zip(&j.written) {
                    for (k, p) in posed.iter().enumerate() {
                        if p.channel == ch && covers(t.first, t.last, p) {
                            rewards[way * 2][k].get_or_insert(t.reward);
                            rewards[way * 2 + 1][k].get_or_insert(*written);
                        }
                    }
                }
            }
        }
    }
    let judge_seconds = started.elapsed().as_secs_f64();
    let truth: Vec<bool> = posed.iter().map(|p| p.passed).collect();
    let agree = |r: &[Option<f32>]| agreement(&truth, r, cfg.success_threshold);
    let per_family = families
        .iter()
        .map(|f| {
            let of: Vec<_> = posed.iter().filter(|p| p.family == *f).collect();
            let passed = of.iter().filter(|p| p.passed).count();
            (f.as_str().to_string(), of.len(), passed)
        })
        .collect();
    let report = Report {
        tasks: posed.len(),
        passed: truth.iter().filter(|p| **p).count(),
        per_family,
        checks_expected: agree(&rewards[0]),
        checks_written: agree(&rewards[1]),
        plain_expected: a.plain.then(|| agree(&rewards[2])),
        plain_written: a.plain.then(|| agree(&rewards[3])),
        answer_seconds,
        judge_seconds,
        home: bench.root().display().to_string(),
    };
    if a.json {
        output::json(&report)?;
    } else {
        println!(
            "{} tasks, {} passed their hidden checks",
            report.tasks, report.passed
        );
        let ways = [
            (
                "checks + expected grade (nights)",
                Some(&report.checks_expected),
            ),
            ("checks + written digit", Some(&report.checks_written)),
            ("no checks + expected grade", report.plain_expected.as_ref()),
            ("no checks + written digit", report.plain_written.as_ref()),
        ];
        for (name, ag) in ways.into_iter().filter_map(|(n, a)| Some((n, a?))) {
            println!(
                "{name:34} covered {:3}  accuracy {:5.1}%  κ {:5.2}  failures caught {:5.1}%",
                ag.covered,
                ag.accuracy * 100.0,
                ag.kappa,
                ag.failure_recall * 100.0
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
