//! `reverie bench judge`: how often the night's judge is right. A simulated
//! user poses tasks of the day families as ordinary messages in ordinary
//! channels (two or three to a channel, in a fresh data folder); the agent
//! answers with the family's tools (all of them with `--all-tools`); each
//! answer is checked by the family's program, which only this benchmark
//! runs. The same channels are then judged, side by side, by the night's
//! verdict judge and, when asked, by the earlier window judge
//! (`--window`), by the verdict judge asking its question once or as a
//! grade (`--variants`), without the failures the record proves, without
//! the traces of the answers' figures and without any checks (`--plain`);
//! each reward is read two ways: the judge's greedy answer and its
//! probability under the logits (what the night uses). `--again FOLDER`
//! judges an earlier run's channels again. Reported per way: coverage, accuracy, Cohen's κ,
//! recall on failures and the area under the ROC curve against the hidden
//! checks.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use reverie_agent::{CancelFlag, DEFAULT_SYSTEM_PROMPT};
use reverie_core::{Home, SamplingParams};
use reverie_night::{channel_windows, judge_window, Asked, JudgeOptions, JudgeWay, NightConfig};
use reverie_practice::days::{
    agreement, covers, day_tasks, simulate_day, Agreement, Channels, DayFamily, DayOptions, Posed,
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
    /// Families posed, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "arithmetic,strings,ledger,units,files,notes,edit"
    )]
    families: Vec<String>,
    /// Judge again the channels of an earlier run's data folder (its
    /// hidden verdicts are kept beside it, in `FOLDER.posed.json`) instead
    /// of posing new tasks.
    #[arg(long, value_name = "FOLDER")]
    again: Option<std::path::PathBuf>,
    /// Also judge with the earlier window judge (the slowest by far: about
    /// 45 s a window of ten messages on the default model).
    #[arg(long)]
    window: bool,
    /// Also ask the verdict judge's question once only, and as a 0–10
    /// grade.
    #[arg(long)]
    variants: bool,
    /// Offer all of the agent's tools on every task, not only the task
    /// family's (a small model given all of them rarely gets past the
    /// call, which leaves the judge nothing but failures to grade).
    #[arg(long)]
    all_tools: bool,
    /// Also judge with the verdict judge without the failures the record
    /// proves, without the traces of where an answer's figures were read,
    /// and without any check at all.
    #[arg(long)]
    plain: bool,
    /// Also judge without the failures the record proves (only the windows
    /// where it proved one are judged again).
    #[arg(long)]
    unverified: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    tasks: usize,
    passed: usize,
    per_family: Vec<(String, usize, usize)>,
    /// One entry per way of judging, the night's first.
    ways: Vec<Way>,
    /// Each task's family and hidden verdict, in order.
    checks: Vec<(String, bool)>,
    answer_seconds: f64,
    home: String,
}

#[derive(Serialize)]
struct Way {
    name: &'static str,
    /// Reward = the probability under the judge's logits (what nights use).
    expected: Agreement,
    /// Reward = the judge's greedy answer.
    written: Agreement,
    seconds: f64,
    /// Each task's reward (probability), in the order of `checks`.
    rewards: Vec<Option<f32>>,
    /// What the judge was shown of each task beyond the messages (checks,
    /// traces, notices, files), in the order of `checks`.
    evidence: Vec<Vec<String>>,
}

pub fn judge(home: &Home, a: JudgeArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(a.tasks > 0, "ask for at least one task (--tasks 1 or more)");
    let families = a
        .families
        .iter()
        .map(|n| DayFamily::parse(n).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(
        !families.is_empty(),
        "name at least one family (--families arithmetic,notes)"
    );
    let bench = match &a.again {
        Some(dir) => Home::new(dir.clone()),
        None => crate::bench::fresh_home(home, "judge", a.engine.model.as_deref())?,
    };
    let store = Arc::new(Store::open(&bench)?);
    let engine = a.engine.load(&bench, 1)?;
    let services = Arc::new(Services::new(&bench));
    // The verdicts stay outside the folder the judge reads.
    let verdicts = std::path::PathBuf::from(format!("{}.posed.json", bench.root().display()));
    let started = Instant::now();
    let posed = match &a.again {
        Some(dir) => {
            let text = std::fs::read_to_string(&verdicts).map_err(|e| {
                anyhow::anyhow!(
                    "{} holds no earlier run's verdicts ({}: {e}); name a folder `reverie bench judge` made",
                    dir.display(),
                    verdicts.display()
                )
            })?;
            serde_json::from_str::<Vec<Posed>>(&text)?
        }
        None => {
            let posed = pose(&engine, &store, &services, &families, &a)?;
            std::fs::write(&verdicts, serde_json::to_string(&posed)?)?;
            posed
        }
    };
    let answer_seconds = started.elapsed().as_secs_f64();

    let cfg = NightConfig::default();
    let mut channels: Vec<i64> = posed.iter().map(|p| p.channel).collect();
    channels.dedup();
    let mut windows = Vec::new();
    for &ch in &channels {
        windows.extend(channel_windows(
            &store,
            &services,
            reverie_core::ChannelId(ch),
            0,
            cfg.window,
        )?);
    }
    let verdict = JudgeOptions::default();
    let mut ways: Vec<(&'static str, JudgeOptions)> =
        vec![("verdict asked both ways (nights)", verdict)];
    if a.window {
        ways.push((
            "window (earlier)",
            JudgeOptions {
                way: JudgeWay::Window,
                ..verdict
            },
        ));
    }
    if a.variants {
        for (name, asked) in [
            ("verdict, asked once", Asked::Right),
            ("verdict, graded 0-10", Asked::Grade),
        ] {
            ways.push((name, JudgeOptions { asked, ..verdict }));
        }
    }
    let unverified = JudgeOptions {
        verify: false,
        ..verdict
    };
    if a.plain || a.unverified {
        ways.push(("verdict without the verifier", unverified));
    }
    if a.plain {
        ways.push((
            "verdict without figure traces",
            JudgeOptions {
                traces: false,
                ..verdict
            },
        ));
        ways.push((
            "verdict without checks",
            JudgeOptions {
                checks: false,
                verify: false,
                ..verdict
            },
        ));
    }
    let truth: Vec<bool> = posed.iter().map(|p| p.passed).collect();
    let mut judged = Vec::new();
    // The night's judgement of each window: without the verifier, a window
    // where it proved nothing is judged the same, so it is not asked again.
    let mut nights: Vec<Option<reverie_night::Judgement>> = vec![None; windows.len()];
    for (name, options) in ways {
        let started = Instant::now();
        // Each task's reward (expected, written), where a sub-task covered it.
        let mut rewards: [Vec<Option<f32>>; 2] = [vec![None; posed.len()], vec![None; posed.len()]];
        let mut evidence = vec![Vec::new(); posed.len()];
        for (w, window) in windows.iter().enumerate() {
            eprintln!("{name}: window {}/{}", w + 1, windows.len());
            let proved = |j: &reverie_night::Judgement| {
                j.tasks
                    .iter()
                    .any(|t| t.evidence.iter().any(|e| e.starts_with("[verified]")))
            };
            let j = match &nights[w] {
                Some(j) if options == unverified && !proved(j) => j.clone(),
                _ => match judge_window(&engine, window, cfg.retries, options) {
                    Ok(j) => j,
                    Err(_) => continue,
                },
            };
            if options == verdict {
                nights[w] = Some(j.clone());
            }
            for (t, written) in j.tasks.iter().zip(&j.written) {
                for (k, p) in posed.iter().enumerate() {
                    if p.channel == window.channel.0 && covers(t.first, t.last, p) {
                        if rewards[0][k].is_none() {
                            evidence[k] = t.evidence.clone();
                        }
                        rewards[0][k].get_or_insert(t.reward);
                        rewards[1][k].get_or_insert(*written);
                    }
                }
            }
        }
        let agree = |r: &[Option<f32>]| agreement(&truth, r, cfg.success_threshold);
        let way = Way {
            name,
            expected: agree(&rewards[0]),
            written: agree(&rewards[1]),
            seconds: started.elapsed().as_secs_f64(),
            rewards: std::mem::take(&mut rewards[0]),
            evidence,
        };
        eprintln!(
            "{name}: accuracy {:.1}%, κ {:.2}, AUC {:.2} over {} tasks",
            way.expected.accuracy * 100.0,
            way.expected.kappa,
            way.expected.auc,
            way.expected.covered
        );
        judged.push(way);
    }
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
        ways: judged,
        checks: posed
            .iter()
            .map(|p| (p.family.as_str().to_string(), p.passed))
            .collect(),
        answer_seconds,
        home: bench.root().display().to_string(),
    };
    if a.json {
        output::json(&report)?;
    } else {
        println!(
            "{} tasks, {} passed their hidden checks",
            report.tasks, report.passed
        );
        for w in &report.ways {
            for (read, ag) in [("probability", &w.expected), ("greedy", &w.written)] {
                println!(
                    "{:24} {read:11} covered {:3}  accuracy {:5.1}%  κ {:5.2}  failures caught {:5.1}%  AUC {:4.2}",
                    w.name,
                    ag.covered,
                    ag.accuracy * 100.0,
                    ag.kappa,
                    ag.failure_recall * 100.0,
                    ag.auc
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Poses `a.tasks` tasks of `families` as a simulated day, answered by
/// the agent; returns each request with its hidden verdict.
fn pose(
    engine: &reverie_infer::Engine,
    store: &Arc<Store>,
    services: &Arc<Services>,
    families: &[DayFamily],
    a: &JudgeArgs,
) -> anyhow::Result<Vec<Posed>> {
    let tasks = day_tasks(families, a.tasks, a.seed, a.level);
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
    Ok(simulate_day(
        engine,
        store,
        services,
        &tasks,
        Channels::new("day", a.per_channel),
        &opts,
        &CancelFlag::default(),
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
    )?)
}
