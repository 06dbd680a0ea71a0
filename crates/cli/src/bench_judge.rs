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
use reverie_agent::{CancelFlag, ChannelSession, ToolSetup, DEFAULT_SYSTEM_PROMPT};
use reverie_core::{Home, MessageRole, SamplingParams};
use reverie_night::{judge_window, windows, JudgeOptions, NightConfig};
use reverie_practice::{check, Family};
use reverie_store::Store;
use serde::Serialize;

use crate::chat::{open_toolbox, EngineArgs};
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

/// How a person opens a request (the first three open a channel, the last
/// moves on within one); the task follows.
const OPENINGS: [&str; 4] = [
    "",
    "Hi! Could you help me with this? ",
    "Quick one: ",
    "Thanks. Next thing: ",
];

/// One posed task: where its request and answer are, and the hidden verdict.
struct Posed {
    channel: i64,
    family: Family,
    request: usize,
    reply: usize,
    passed: bool,
}

/// Agreement of one way of judging with the hidden checks.
#[derive(Serialize, Default, Debug, PartialEq)]
struct Agreement {
    /// Tasks a judged sub-task covered.
    covered: usize,
    /// Of those, the ones whose reward (≥ the night's success threshold)
    /// matched the check.
    agreed: usize,
    accuracy: f64,
    kappa: f64,
    /// Failed tasks the judge called failed, of the failed tasks covered.
    failure_recall: f64,
    mean_reward_passed: f64,
    mean_reward_failed: f64,
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
        Family::Arithmetic,
        Family::Strings,
        Family::Ledger,
        Family::Units,
    ];
    let mut posed: Vec<Posed> = Vec::new();
    for i in 0..a.tasks {
        let family = families[i % families.len()];
        let task = family.task(a.seed.wrapping_add(i as u64), a.level);
        let name = format!("day-{}", i / a.per_channel.max(1) + 1);
        let toolbox = open_toolbox(&bench, &store, &name, None)?;
        let workspace = toolbox.workspace().root().to_path_buf();
        let mut setup = ToolSetup::new(toolbox);
        // As in practice and eval: eight calls, 512 tokens a reply.
        setup.max_calls = 8;
        if !a.all_tools {
            setup.allowed = Some(family.tools().iter().map(|t| t.to_string()).collect());
        }
        let mut session =
            ChannelSession::open(&engine, &store, &name, DEFAULT_SYSTEM_PROMPT)?.with_tools(setup);
        let per = a.per_channel.max(1);
        let opening = if i % per == 0 {
            OPENINGS[(i / per) % 3]
        } else {
            OPENINGS[3]
        };
        let params = SamplingParams {
            seed: a.seed as u32 ^ i as u32,
            max_tokens: 512,
            ..SamplingParams::default()
        };
        let outcome = session.send(
            &format!("{opening}{}", task.prompt),
            &params,
            &cancel,
            &mut |_| {},
        )?;
        let passed = check(&task, &outcome.reply, &workspace).passed;
        let ids: Vec<_> = store
            .messages(session.channel())?
            .iter()
            .map(|m| m.id)
            .collect();
        let at = |id| ids.iter().position(|m| *m == id).unwrap_or(0);
        posed.push(Posed {
            channel: session.channel().0,
            family,
            request: at(outcome.user_message),
            reply: at(outcome.reply_message),
            passed,
        });
        eprintln!(
            "task {}/{}: {} in {name}: {}",
            i + 1,
            a.tasks,
            family.as_str(),
            if passed { "passed" } else { "failed" }
        );
    }
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
        let msgs: Vec<(MessageRole, String)> = store
            .messages(reverie_core::ChannelId(ch))?
            .into_iter()
            .map(|m| (m.role, m.text))
            .collect();
        for (w, window) in windows(reverie_core::ChannelId(ch), &msgs, 0, cfg.window)
            .iter()
            .enumerate()
        {
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

/// Whether the sub-task `first..=last` is the one that graded `p`: it ends
/// on the task's answer or spans it.
fn covers(first: usize, last: usize, p: &Posed) -> bool {
    (first..=last).contains(&p.reply) || (first <= p.request && p.reply <= last)
}

/// The judge's rewards against the checks' verdicts: a reward at or above
/// `threshold` calls a task passed.
fn agreement(truth: &[bool], rewards: &[Option<f32>], threshold: f32) -> Agreement {
    let pairs: Vec<(bool, f32)> = truth
        .iter()
        .zip(rewards)
        .filter_map(|(t, r)| r.map(|r| (*t, r)))
        .collect();
    let n = pairs.len();
    if n == 0 {
        return Agreement::default();
    }
    let said = |r: f32| r >= threshold;
    let agreed = pairs.iter().filter(|(t, r)| *t == said(*r)).count();
    let po = agreed as f64 / n as f64;
    let truly = pairs.iter().filter(|(t, _)| *t).count() as f64 / n as f64;
    let called = pairs.iter().filter(|(_, r)| said(*r)).count() as f64 / n as f64;
    let pe = truly * called + (1.0 - truly) * (1.0 - called);
    let failed: Vec<f32> = pairs.iter().filter(|(t, _)| !t).map(|p| p.1).collect();
    let passed: Vec<f32> = pairs.iter().filter(|(t, _)| *t).map(|p| p.1).collect();
    let mean = |v: &[f32]| v.iter().map(|&x| x as f64).sum::<f64>() / v.len().max(1) as f64;
    Agreement {
        covered: n,
        agreed,
        accuracy: po,
        kappa: if pe < 1.0 {
            (po - pe) / (1.0 - pe)
        } else {
            0.0
        },
        failure_recall: failed.iter().filter(|r| !said(**r)).count() as f64
            / failed.len().max(1) as f64,
        mean_reward_passed: mean(&passed),
        mean_reward_failed: mean(&failed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_counts_kappa_and_caught_failures() {
        let truth = [true, true, false, false, true];
        let rewards = [Some(0.9), Some(0.2), Some(0.1), Some(0.8), None];
        let a = agreement(&truth, &rewards, 0.5);
        assert_eq!((a.covered, a.agreed), (4, 2));
        assert!((a.accuracy - 0.5).abs() < 1e-9);
        // Chance agreement is 0.5 here, so κ is 0.
        assert!(a.kappa.abs() < 1e-9, "{}", a.kappa);
        assert!((a.failure_recall - 0.5).abs() < 1e-9);
        let perfect = agreement(&[true, false], &[Some(1.0), Some(0.0)], 0.5);
        assert!((perfect.kappa - 1.0).abs() < 1e-9);
        assert_eq!(agreement(&[true], &[None], 0.5), Agreement::default());
    }

    #[test]
    fn a_sub_task_covers_the_task_whose_answer_it_spans() {
        let p = Posed {
            channel: 1,
            family: Family::Arithmetic,
            request: 3,
            reply: 6,
            passed: true,
        };
        assert!(covers(3, 6, &p));
        assert!(
            covers(5, 6, &p),
            "a span starting at a tool result still ends on the answer"
        );
        assert!(!covers(7, 9, &p));
        assert!(!covers(1, 2, &p));
    }
}
