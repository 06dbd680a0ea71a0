//! Running a batch: one channel per task, the family's tools only, the
//! check, the record. Sequential: practice runs when nobody is chatting.

use std::path::Path;
use std::sync::Arc;

use reverie_agent::{CancelFlag, ChannelSession, ToolSetup, TurnOutcome};
use reverie_core::{SamplingParams, StopReason};
use reverie_infer::{Constraint, Engine, EngineConfig};
use reverie_store::{EpisodeKind, NewEpisode, PracticeEpisode, Store};
use reverie_tools::{Services, Toolbox};
use serde::Serialize;

use crate::check::{check, Verdict};
use crate::family::{Family, Task};
use crate::tasker;
use crate::PracticeError;

/// What the solver is told before every task.
pub const SOLVER_PROMPT: &str = "You are solving a practice task. Use your tools when they help, \
check your work, and end with the answer in the form the task asks for.";

pub struct RunConfig {
    pub family: Family,
    pub n: usize,
    /// Attempts per task, each with its own sampling seed. Two or more give
    /// the night a group per task whose pass rate is the baseline each
    /// attempt is judged against (no guess from the value model needed).
    pub samples: usize,
    /// Task `i` uses seed `seed + i`; the same seed gives the same tasks.
    pub seed: u64,
    pub difficulty: u32,
    /// Eval episodes are measured only, never trained on.
    pub eval: bool,
    pub params: SamplingParams,
    pub max_tool_calls: usize,
    /// The share of tasks the model writes ([`crate::tasker`]) instead of
    /// the family's generator: 0 none, 1 all; never for eval batches. The
    /// generator's tasks keep the family's whole spread in every batch,
    /// whatever a small tasker keeps writing (one shape of task that every
    /// attempt fails teaches nothing: a group needs a pass and a fail).
    pub tasker_share: f32,
    /// Constrains the shape of the solver's replies for a task (a format a
    /// model cannot keep yet; tests that need a known answer).
    pub reply_constraint: Option<fn(&Task) -> Constraint>,
    /// Constrains the answer that follows a turn stopped at the tool-call
    /// limit (by default, any reply without a call).
    pub wrap_up_constraint: Option<fn(&Task) -> Constraint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Episode {
    pub channel: String,
    pub task: Task,
    pub verdict: Verdict,
    pub reply: String,
    pub tool_calls: usize,
    /// The harness stopped the turn (call limit, a call repeated to no
    /// effect, failures) and asked for the answer.
    pub stopped: bool,
}

/// How a batch of episodes went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Tally {
    pub attempts: usize,
    pub passed: usize,
    /// Turns the harness had to stop, whether they passed or not.
    pub stopped: usize,
}

impl Tally {
    pub fn of(episodes: &[Episode]) -> Tally {
        Tally {
            attempts: episodes.len(),
            passed: episodes.iter().filter(|e| e.verdict.passed).count(),
            stopped: episodes.iter().filter(|e| e.stopped).count(),
        }
    }

    /// The share of attempts that passed (0 for none).
    pub fn success(&self) -> f64 {
        self.passed as f64 / self.attempts.max(1) as f64
    }

    /// The share of attempts the harness had to stop (0 for none).
    pub fn stopped_share(&self) -> f64 {
        self.stopped as f64 / self.attempts.max(1) as f64
    }
}

/// Sampling temperature of practice attempts: warm enough that the
/// attempts at one task differ, since a group whose attempts all agree
/// (all pass or all fail) has no advantage to teach, and cool enough that
/// some pass: on the default model at arithmetic level 3, 0.7 passed
/// 11–23 % of attempts, 0.5 passed 21–42 %.
pub const PRACTICE_TEMPERATURE: f32 = 0.5;

/// The share of practice tasks the model writes by default.
pub const PRACTICE_TASKER_SHARE: f32 = 0.5;

/// The seed of measuring batches, so every eval of a family sees the same
/// tasks.
pub const EVAL_SEED: u64 = 1_000_003;

/// How measuring runs sample: greedy, so the same model on the same
/// tasks gives the same answers; 512 tokens a reply.
pub fn eval_params() -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        top_k: 1,
        seed: 1,
        max_tokens: 512,
        ..SamplingParams::default()
    }
}

impl RunConfig {
    /// A measuring batch: greedy and one attempt per task, so the same model
    /// on the same tasks gives the same score.
    pub fn eval(family: Family, n: usize, seed: u64, difficulty: u32) -> RunConfig {
        RunConfig {
            family,
            n,
            samples: 1,
            seed,
            difficulty,
            eval: true,
            params: eval_params(),
            max_tool_calls: 8,
            tasker_share: 0.0,
            reply_constraint: None,
            wrap_up_constraint: None,
        }
    }

    /// A practice batch: sampled, `samples` attempts per task, every other
    /// task written by the model.
    pub fn practice(
        family: Family,
        n: usize,
        samples: usize,
        seed: u64,
        difficulty: u32,
    ) -> RunConfig {
        RunConfig {
            family,
            n,
            samples,
            seed,
            difficulty,
            eval: false,
            params: SamplingParams {
                // Low enough that a small model's attempts still pass
                // sometimes, high enough that attempts differ.
                temperature: PRACTICE_TEMPERATURE,
                seed: seed as u32,
                max_tokens: 512,
                ..SamplingParams::default()
            },
            max_tool_calls: 8,
            tasker_share: PRACTICE_TASKER_SHARE,
            reply_constraint: None,
            wrap_up_constraint: None,
        }
    }

    /// A practice batch of `family` for `store`'s history: at `difficulty`,
    /// or at the level where about half the recent attempts passed; with
    /// `seed`, or a fresh one. The night and `reverie practice` both choose
    /// their batches here.
    pub fn practice_at_level(
        store: &Store,
        family: Family,
        n: usize,
        samples: usize,
        seed: Option<u64>,
        difficulty: Option<u32>,
    ) -> Result<RunConfig, PracticeError> {
        let difficulty = match difficulty {
            Some(d) => d,
            None => next_difficulty(&store.episodes_since(0)?, family),
        };
        let seed = seed.unwrap_or_else(fresh_seed);
        Ok(RunConfig::practice(family, n, samples, seed, difficulty))
    }

    /// Whether the model writes task `i`: spread evenly through the batch,
    /// `tasker_share` of the tasks, the first one from the generator.
    pub fn tasker_writes(&self, i: usize) -> bool {
        let share = self.tasker_share.clamp(0.0, 1.0) as f64;
        !self.eval && ((i + 1) as f64 * share).floor() > (i as f64 * share).floor()
    }

    /// Episodes the batch records: tasks × attempts.
    pub fn episodes(&self) -> usize {
        self.n * self.samples.max(1)
    }
}

/// A seed no earlier run used: the clock in nanoseconds.
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// Who writes a practice batch's tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskWriter {
    /// The model writes every other task, the family's generator the rest.
    Mixed,
    /// The model writes every task (a tasker channel each).
    Model,
    /// The family's generator writes every task.
    Program,
}

impl TaskWriter {
    /// The share of tasks the model writes.
    pub fn share(self) -> f32 {
        match self {
            TaskWriter::Mixed => PRACTICE_TASKER_SHARE,
            TaskWriter::Model => 1.0,
            TaskWriter::Program => 0.0,
        }
    }
}

impl std::str::FromStr for TaskWriter {
    type Err = PracticeError;

    fn from_str(s: &str) -> Result<TaskWriter, PracticeError> {
        match s {
            "mixed" => Ok(TaskWriter::Mixed),
            "model" => Ok(TaskWriter::Model),
            "program" => Ok(TaskWriter::Program),
            other => Err(PracticeError::Invalid(format!(
                "{other:?} is not a task writer; use mixed, model or program"
            ))),
        }
    }
}

/// Runs `cfg.n` tasks, `cfg.samples` attempts each; `on(i, episode)` after
/// each attempt. A task that fails to
/// run (not to be solved) counts as failed with the error as its reason.
pub fn run(
    engine: &Engine,
    store: &Arc<Store>,
    services: &Arc<Services>,
    cfg: &RunConfig,
    cancel: &CancelFlag,
    on: &mut dyn FnMut(usize, &Episode),
) -> Result<Vec<Episode>, PracticeError> {
    if cfg.n == 0 {
        return Err(PracticeError::Invalid(
            "ask for at least one task (--n 1 or more)".into(),
        ));
    }
    if cfg.family.held_out() && !cfg.eval {
        return Err(PracticeError::Invalid(format!(
            "{} is the held-out family: it is only measured (reverie eval), never practised",
            cfg.family.as_str()
        )));
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let kind = if cfg.eval { "eval" } else { "practice" };
    let samples = cfg.samples.max(1);
    let mut out = Vec::with_capacity(cfg.episodes());
    for i in 0..cfg.n {
        if cancel.is_cancelled() {
            break;
        }
        let generated = || {
            cfg.family
                .task(cfg.seed.wrapping_add(i as u64), cfg.difficulty)
        };
        let proposal = if cfg.tasker_writes(i) {
            Some(propose(engine, store, cfg, i, stamp, cancel)?)
        } else {
            None
        };
        // An unusable proposal still leaves the solvers something to practise.
        let task = match &proposal {
            Some(Proposal { task: Ok(t), .. }) => t.clone(),
            _ => generated(),
        };
        let (mut passed, mut attempts) = (0, 0);
        for attempt in 0..samples {
            if cancel.is_cancelled() {
                break;
            }
            let name = if samples == 1 {
                format!("{kind}/{}/{stamp}-{i}", cfg.family.as_str())
            } else {
                format!("{kind}/{}/{stamp}-{i}.{attempt}", cfg.family.as_str())
            };
            let ep = solve(engine, store, services, cfg, &task, &name, attempt, cancel)?;
            passed += ep.verdict.passed as usize;
            attempts += 1;
            on(out.len(), &ep);
            out.push(ep);
        }
        if let Some(p) = proposal {
            record_proposal(store, cfg, &p, passed, attempts)?;
        }
    }
    Ok(out)
}

/// One attempt at `task` in its own channel `name`, recorded with its
/// verdict.
#[allow(clippy::too_many_arguments)]
fn solve(
    engine: &Engine,
    store: &Arc<Store>,
    services: &Arc<Services>,
    cfg: &RunConfig,
    task: &Task,
    name: &str,
    attempt: usize,
    cancel: &CancelFlag,
) -> Result<Episode, PracticeError> {
    let params = SamplingParams {
        seed: cfg.params.seed.wrapping_add(attempt as u32),
        ..cfg.params.clone()
    };
    let channel = store.ensure_channel(name)?;
    let toolbox = Toolbox::open(store.clone(), channel, services.clone())?;
    let workspace = toolbox.workspace().root().to_path_buf();
    let mut setup = ToolSetup::new(toolbox);
    setup.max_calls = cfg.max_tool_calls;
    setup.allowed = Some(cfg.family.tools().iter().map(|s| s.to_string()).collect());
    if let Some(f) = cfg.wrap_up_constraint {
        setup.wrap_up = Some(f(task));
    }
    let mut session = ChannelSession::open(engine, store, name, SOLVER_PROMPT)?.with_tools(setup);
    session.set_reply_constraint(cfg.reply_constraint.map(|f| f(task)));
    let outcome = session.send(&task.prompt, &params, cancel, &mut |_| {});
    let stopped = matches!(&outcome, Ok(o) if o.reason == StopReason::ToolLimit);
    let (reply, tool_calls, verdict) = match outcome {
        Ok(o) => {
            let v = match unanswered(&session, &o) {
                Some(why) => Verdict { passed: false, why },
                None => check(task, &o.reply, &workspace),
            };
            (o.reply, o.tool_calls, v)
        }
        Err(e) => (
            String::new(),
            0,
            Verdict {
                passed: false,
                why: format!("the attempt failed to run: {e}"),
            },
        ),
    };
    store.record_episode(&NewEpisode {
        channel,
        family: cfg.family.as_str(),
        kind: if cfg.eval {
            EpisodeKind::Eval
        } else {
            EpisodeKind::Practice
        },
        difficulty: task.difficulty,
        prompt: &task.prompt,
        expected: &task.expected,
        passed: verdict.passed,
        why: &verdict.why,
    })?;
    Ok(Episode {
        channel: name.to_string(),
        task: task.clone(),
        verdict,
        reply,
        tool_calls,
        stopped,
    })
}

/// Why a turn gave no answer: it was stopped with a call still in its
/// reply, so a number inside that call is not the agent's answer.
pub(crate) fn unanswered(session: &ChannelSession, o: &TurnOutcome) -> Option<String> {
    let holds_a_call = session
        .tools()
        .is_some_and(|t| !t.format.parse(&o.reply).is_empty());
    (o.reason == StopReason::ToolLimit && holds_a_call).then(|| {
        format!(
            "no answer: the turn was stopped after {} tool calls",
            o.tool_calls
        )
    })
}

/// The tasker's channel and the task it wrote (or why it is not one).
struct Proposal {
    channel: reverie_core::ChannelId,
    task: Result<Task, String>,
}

/// The model, in its own tasker channel, writes task `i` of the batch as
/// JSON in the family's schema.
fn propose(
    engine: &Engine,
    store: &Arc<Store>,
    cfg: &RunConfig,
    i: usize,
    stamp: u128,
    cancel: &CancelFlag,
) -> Result<Proposal, PracticeError> {
    let family = cfg.family;
    let Some(schema) = tasker::schema(family, cfg.difficulty) else {
        return Err(PracticeError::Invalid(format!(
            "{} tasks cannot be written by the model",
            family.as_str()
        )));
    };
    let name = format!("tasker/{}/{stamp}-{i}", family.as_str());
    let channel = store.ensure_channel(&name)?;
    let mut session = ChannelSession::open(engine, store, &name, tasker::TASKER_PROMPT)?;
    session.set_reply_constraint(Some(Constraint::JsonSchema(schema)));
    let params = SamplingParams {
        temperature: 1.0,
        seed: cfg.params.seed.wrapping_add(7919 * (i as u32 + 1)),
        max_tokens: 400,
        ..cfg.params.clone()
    };
    let request = tasker::request(family, cfg.difficulty);
    let task = match session.send(&request, &params, cancel, &mut |_| {}) {
        Ok(o) => tasker::task_from_json(family, cfg.difficulty, &o.reply),
        Err(e) => Err(format!("the tasker failed to run: {e}")),
    };
    Ok(Proposal { channel, task })
}

/// Records the tasker's episode: its task and how the solvers did on it
/// (`passed` of `attempts`), or why what it wrote was not a task.
fn record_proposal(
    store: &Store,
    cfg: &RunConfig,
    p: &Proposal,
    passed: usize,
    attempts: usize,
) -> Result<(), PracticeError> {
    let reward = tasker::tasker_reward(passed, attempts);
    let (prompt, expected, why) = match &p.task {
        Ok(t) => (
            t.prompt.as_str(),
            t.expected.as_str(),
            format!("the solvers passed {passed} of {attempts}: reward {reward:.2}"),
        ),
        Err(why) => ("", "", format!("not a task: {why}")),
    };
    store.record_episode(&NewEpisode {
        channel: p.channel,
        family: cfg.family.as_str(),
        kind: EpisodeKind::Tasker,
        difficulty: cfg.difficulty,
        prompt,
        expected,
        passed: p.task.is_ok() && reward >= 0.5,
        why: &why,
    })?;
    Ok(())
}

/// `cfg`'s episodes, run on the model at `model` (loaded on its own, with
/// one slot).
pub fn run_model(
    model: &Path,
    gpu_layers: u32,
    store: &Arc<Store>,
    services: &Arc<Services>,
    cfg: &RunConfig,
    cancel: &CancelFlag,
) -> Result<Vec<Episode>, PracticeError> {
    let engine = Engine::load(model, EngineConfig::sized(1, 8192, gpu_layers, None))?;
    run(&engine, store, services, cfg, cancel, &mut |_, _| {})
}

/// The difficulty for the next practice batch of `family`: the tasker's
/// rule keeps the pass rate near one half, where there is most to learn
/// (up one level above 70 %, down one below 30 %, over the last 20
/// attempts of the family). Eval attempts count as well as practice: a
/// first night after an eval starts at the level the eval measured, where
/// a group of attempts is most likely to have both passes and failures.
pub fn next_difficulty(history: &[PracticeEpisode], family: Family) -> u32 {
    let recent: Vec<&PracticeEpisode> = history
        .iter()
        .rev()
        .filter(|e| {
            e.family == family.as_str()
                && matches!(e.kind, EpisodeKind::Practice | EpisodeKind::Eval)
        })
        .take(20)
        .collect();
    let Some(last) = recent.first() else {
        return 2;
    };
    let rate = recent.iter().filter(|e| e.passed).count() as f64 / recent.len() as f64;
    match rate {
        r if r > 0.7 => (last.difficulty + 1).min(8),
        r if r < 0.3 => last.difficulty.saturating_sub(1).max(1),
        _ => last.difficulty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tasker_writes_its_share_of_a_batch_spread_evenly_and_never_for_eval() {
        let writes = |share: f32, eval: bool, n: usize| -> Vec<bool> {
            let mut cfg = RunConfig::practice(Family::Arithmetic, n, 2, 1, 2);
            cfg.tasker_share = share;
            cfg.eval = eval;
            (0..n).map(|i| cfg.tasker_writes(i)).collect()
        };
        let default = RunConfig::practice(Family::Arithmetic, 6, 2, 1, 2);
        assert_eq!(
            (0..6).map(|i| default.tasker_writes(i)).collect::<Vec<_>>(),
            [false, true, false, true, false, true]
        );
        assert!(writes(1.0, false, 5).iter().all(|&w| w));
        assert!(writes(0.0, false, 5).iter().all(|&w| !w));
        assert!(writes(1.0, true, 5).iter().all(|&w| !w), "eval never asks");
        let quarter = writes(0.25, false, 8);
        assert_eq!(quarter.iter().filter(|&&w| w).count(), 2);
        assert_eq!(
            quarter,
            [false, false, false, true, false, false, false, true]
        );
    }

    fn ep(passed: bool, difficulty: u32) -> PracticeEpisode {
        PracticeEpisode {
            id: 0,
            channel: 1,
            family: "arithmetic".into(),
            kind: EpisodeKind::Practice,
            difficulty,
            prompt: String::new(),
            expected: String::new(),
            passed,
            why: String::new(),
            created_ms: 0,
        }
    }

    #[test]
    fn the_tasker_keeps_the_pass_rate_near_half() {
        let f = Family::Arithmetic;
        assert_eq!(next_difficulty(&[], f), 2);
        assert_eq!(next_difficulty(&vec![ep(true, 3); 10], f), 4);
        assert_eq!(next_difficulty(&vec![ep(false, 3); 10], f), 2);
        let mixed: Vec<_> = (0..10).map(|i| ep(i % 2 == 0, 3)).collect();
        assert_eq!(next_difficulty(&mixed, f), 3);
        assert_eq!(next_difficulty(&vec![ep(false, 1); 10], f), 1);
        let other = PracticeEpisode {
            family: "strings".into(),
            ..ep(true, 5)
        };
        assert_eq!(
            next_difficulty(&[other], f),
            2,
            "other families do not count"
        );
        let kind = |kind: EpisodeKind, passed: bool| PracticeEpisode {
            kind,
            ..ep(passed, 3)
        };
        let evals: Vec<_> = (0..10)
            .map(|i| kind(EpisodeKind::Eval, i % 2 == 0))
            .collect();
        assert_eq!(
            next_difficulty(&evals, f),
            3,
            "an eval at level 3 that passed half its tasks starts practice there"
        );
        assert_eq!(
            next_difficulty(&vec![kind(EpisodeKind::Tasker, true); 10], f),
            2,
            "the tasker's own episodes are not attempts"
        );
    }

    #[test]
    fn task_writers_are_named_and_an_unknown_one_is_an_error() {
        let share = |s: &str| s.parse::<TaskWriter>().map(TaskWriter::share);
        assert_eq!(share("model").unwrap(), 1.0);
        assert_eq!(share("program").unwrap(), 0.0);
        assert_eq!(share("mixed").unwrap(), PRACTICE_TASKER_SHARE);
        let e = share("the model").unwrap_err().to_string();
        assert!(e.contains("mixed, model or program"), "{e}");
    }
}
