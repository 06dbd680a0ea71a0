//! Practice episodes need no judge: their check already gave the reward,
//! and the tasker that wrote a task is rewarded by how the solvers did.
//! Eval episodes are never trained on.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use reverie_agent::CancelFlag;
use reverie_core::Home;
use reverie_practice::{run, Family, RunConfig};

use reverie_core::{ChannelId, MessageRole};
use reverie_practice::tasker::tasker_reward;
use reverie_store::{EpisodeKind, Store};

use crate::config::{NightConfig, PracticeBatch};
use crate::error::NightError;
use crate::judge::JudgedTask;

/// The sub-tasks of the practice and tasker episodes recorded since
/// `since_ms`, and every practice, tasker or eval channel (which the judge
/// must skip). A pass earns 1, or `stopped_pass` when the harness had to
/// stop the turn and ask for the answer: attempts that answer by
/// themselves are then preferred to ones that call tools until stopped.
pub fn episode_tasks(
    store: &Store,
    since_ms: i64,
    stopped_pass: f32,
) -> Result<(Vec<JudgedTask>, HashSet<i64>), NightError> {
    let episodes = store.episodes_since(since_ms)?;
    let mut tasks = Vec::new();
    let mut skip = HashSet::new();
    for e in &episodes {
        skip.insert(e.channel);
        if e.kind == EpisodeKind::Eval {
            continue;
        }
        let msgs = store.messages(ChannelId(e.channel))?;
        let Some(first) = msgs.iter().position(|m| m.role == MessageRole::User) else {
            continue;
        };
        let turns = msgs[first..]
            .iter()
            .filter(|m| m.role == MessageRole::Assistant)
            .count() as u32;
        let level = format!("{}, level {}", e.family, e.difficulty);
        let task = if e.kind == EpisodeKind::Tasker {
            // Rewarded by how the solvers did on the task it wrote; its
            // proposals of one family are compared with each other.
            let attempts: Vec<bool> = episodes
                .iter()
                .filter(|p| {
                    p.kind == EpisodeKind::Practice && !e.prompt.is_empty() && p.prompt == e.prompt
                })
                .map(|p| p.passed)
                .collect();
            let passed = attempts.iter().filter(|&&p| p).count();
            JudgedTask {
                channel: e.channel,
                description: format!("tasker ({level}): write a task passed about half the time"),
                first,
                last: msgs.len() - 1,
                turns,
                reward: tasker_reward(passed, attempts.len()),
                reason: e.why.clone(),
                group: Some(format!("tasker: {}", e.family)),
                checked: true,
                kind: crate::judge::TaskKind::Tasker,
                judged: None,
                feedback: None,
                evidence: Vec::new(),
                taken_back: Vec::new(),
            }
        } else {
            JudgedTask {
                channel: e.channel,
                description: format!("practice ({level}): {}", e.prompt),
                first,
                last: msgs.len() - 1,
                turns,
                reward: match (e.passed, reverie_agent::wrap_up::was_stopped(&msgs)) {
                    (false, _) => 0.0,
                    (true, false) => 1.0,
                    (true, true) => stopped_pass,
                },
                reason: format!("checked by program: {}", e.why),
                group: Some(format!("{}: {}", e.family, e.prompt)),
                checked: true,
                kind: crate::judge::TaskKind::Practice,
                judged: None,
                feedback: None,
                evidence: Vec::new(),
                taken_back: Vec::new(),
            }
        };
        tasks.push(task);
    }
    Ok((tasks, skip))
}

/// The batches of `cfg.practice`, checked.
pub fn batches(cfg: &NightConfig) -> Result<Vec<(Family, usize)>, NightError> {
    check_batches(&cfg.practice)
}

/// Practice batches, checked: known families, never the held-out one, at
/// least one task each.
pub fn check_batches(batches: &[PracticeBatch]) -> Result<Vec<(Family, usize)>, NightError> {
    batches
        .iter()
        .map(|b| {
            let f = Family::parse(&b.family).map_err(NightError::Config)?;
            if f.held_out() {
                return Err(NightError::Config(format!(
                    "{} is the held-out family: it is only measured, never practised",
                    b.family
                )));
            }
            if b.tasks == 0 {
                return Err(NightError::Config(format!(
                    "practice {}: ask for at least one task",
                    b.family
                )));
            }
            Ok((f, b.tasks))
        })
        .collect()
}

/// The practice stage: every batch of `cfg.practice` on `model`, each at
/// the level where about half the recent attempts pass. `on(i, n, label)`
/// after each of the `n` attempts. Returns one line per batch.
pub fn practise(
    home: &Home,
    model: &Path,
    cfg: &NightConfig,
    cancel: &CancelFlag,
    on: &mut dyn FnMut(usize, usize, String),
) -> Result<Vec<String>, NightError> {
    let batches = batches(cfg)?;
    let samples = cfg.practice_samples.max(1);
    let total: usize = batches.iter().map(|(_, n)| n * samples).sum();
    let store = Arc::new(Store::open(home)?);
    let services = Arc::new(reverie_tools::Services::new(home));
    let engine = cfg.engine(model)?;
    services.set_model_name(&engine.info().name);
    // A child: each attempt's turn resets its flag, never the night's.
    let flag = cancel.child();
    let seed = crate::trigger::now_ms() as u64;
    let mut lines = Vec::new();
    let mut done = 0;
    for (k, &(family, n)) in batches.iter().enumerate() {
        let batch_seed = seed.wrapping_add(k as u64 * 1000);
        let run_cfg =
            RunConfig::practice_at_level(&store, family, n, samples, Some(batch_seed), None)?;
        let level = run_cfg.difficulty;
        let eps = run(&engine, &store, &services, &run_cfg, &flag, &mut |i, e| {
            let mark = if e.verdict.passed { "pass" } else { "fail" };
            on(
                done + i,
                total,
                format!("{} level {level}: {mark}", family.as_str()),
            );
        })?;
        done += eps.len();
        let passed = eps.iter().filter(|e| e.verdict.passed).count();
        lines.push(format!(
            "practised {} at level {level}: {passed} of {} attempts passed",
            family.as_str(),
            eps.len()
        ));
        if cancel.is_cancelled() {
            return Err(NightError::Cancelled);
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::{Home, TokenRole, TokenSpan};
    use reverie_store::NewEpisode;

    #[test]
    fn practice_becomes_rewarded_tasks_and_eval_is_only_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let span = TokenSpan::default();
        let record = |name: &str, kind: EpisodeKind, passed: bool| {
            let ch = store.ensure_channel(name).unwrap();
            store
                .append_message(ch, MessageRole::System, "sys", &span)
                .unwrap();
            store
                .append_message(ch, MessageRole::User, "Start with 2. Add 3.", &span)
                .unwrap();
            store
                .append_message(ch, MessageRole::Assistant, "5", &span)
                .unwrap();
            store
                .record_episode(&NewEpisode {
                    channel: ch,
                    family: "arithmetic",
                    kind,
                    difficulty: 2,
                    prompt: "Start with 2. Add 3.",
                    expected: "5",
                    passed,
                    why: "answered 5",
                })
                .unwrap();
            ch
        };
        let p = record("practice/arithmetic/1-0", EpisodeKind::Practice, true);
        let e = record("eval/arithmetic/1-0", EpisodeKind::Eval, true);
        let (tasks, skip) = episode_tasks(&store, 0, 0.5).unwrap();
        assert_eq!(skip, HashSet::from([p.0, e.0]));
        assert_eq!(tasks.len(), 1);
        let t = &tasks[0];
        assert_eq!(
            (t.channel, t.first, t.last, t.turns, t.reward),
            (p.0, 1, 2, 1, 1.0)
        );
        assert!(t.reason.starts_with("checked by program"));
        assert_eq!(
            t.group.as_deref(),
            Some("arithmetic: Start with 2. Add 3."),
            "attempts of one task share a group"
        );

        // A pass that came only after the harness stopped the turn earns
        // less; a person typing the same words is not the harness.
        let notice = |ch, roles: TokenRole| {
            let mut span = TokenSpan::default();
            span.push(7, roles, None);
            let text = "This turn was stopped: it reached the limit of tool calls for one turn.";
            store
                .append_message(ch, MessageRole::User, text, &span)
                .unwrap();
            store
                .append_message(ch, MessageRole::Assistant, "5", &TokenSpan::default())
                .unwrap();
        };
        let stopped = record("practice/arithmetic/1-1", EpisodeKind::Practice, true);
        notice(stopped, TokenRole::Warning);
        let quoted = record("practice/arithmetic/1-2", EpisodeKind::Practice, true);
        notice(quoted, TokenRole::User);
        let reward = |ch: reverie_core::ChannelId| {
            let (tasks, _) = episode_tasks(&store, 0, 0.25).unwrap();
            tasks.iter().find(|t| t.channel == ch.0).unwrap().reward
        };
        assert_eq!(reward(stopped), 0.25);
        assert_eq!(reward(quoted), 1.0);
        assert_eq!(reward(p), 1.0);
    }

    #[test]
    fn the_tasker_is_rewarded_by_how_the_solvers_did_on_its_task() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let span = TokenSpan::default();
        let record = |name: &str, kind: EpisodeKind, prompt: &str, passed: bool| {
            let ch = store.ensure_channel(name).unwrap();
            store
                .append_message(ch, MessageRole::User, "write a task", &span)
                .unwrap();
            store
                .append_message(ch, MessageRole::Assistant, "{}", &span)
                .unwrap();
            store
                .record_episode(&NewEpisode {
                    channel: ch,
                    family: "strings",
                    kind,
                    difficulty: 3,
                    prompt,
                    expected: "x",
                    passed,
                    why: "",
                })
                .unwrap();
            ch
        };
        for (i, passed) in [true, false, false, true].into_iter().enumerate() {
            record(
                &format!("practice/s/0.{i}"),
                EpisodeKind::Practice,
                "half",
                passed,
            );
            record(
                &format!("practice/s/1.{i}"),
                EpisodeKind::Practice,
                "easy",
                true,
            );
        }
        let good = record("tasker/s/0", EpisodeKind::Tasker, "half", true);
        let easy = record("tasker/s/1", EpisodeKind::Tasker, "easy", false);
        let broken = record("tasker/s/2", EpisodeKind::Tasker, "", false);
        let (tasks, skip) = episode_tasks(&store, 0, 0.5).unwrap();
        assert!(
            skip.contains(&good.0) && skip.contains(&broken.0),
            "the judge skips taskers"
        );
        let reward = |ch: reverie_core::ChannelId| {
            let t = tasks.iter().find(|t| t.channel == ch.0).unwrap();
            assert_eq!(t.group.as_deref(), Some("tasker: strings"));
            assert!(t.description.starts_with("tasker (strings, level 3)"));
            t.reward
        };
        assert_eq!(reward(good), 1.0, "passed half the time");
        assert_eq!(reward(easy), 0.0, "always passed");
        assert_eq!(reward(broken), 0.0, "not a task");
    }

    #[test]
    fn practice_batches_must_name_a_trainable_family_and_a_task() {
        let cfg = |family: &str, tasks| NightConfig {
            practice: vec![crate::config::PracticeBatch {
                family: family.into(),
                tasks,
            }],
            ..NightConfig::default()
        };
        assert_eq!(
            batches(&cfg("ledger", 3)).unwrap(),
            vec![(Family::Ledger, 3)]
        );
        let err = |c: &NightConfig| batches(c).unwrap_err().to_string();
        assert!(err(&cfg("units", 3)).contains("held-out"));
        assert!(err(&cfg("ledger", 0)).contains("at least one task"));
        assert!(err(&cfg("poetry", 1)).contains("no task family"));
        assert!(batches(&NightConfig::default()).unwrap().is_empty());
    }
}
