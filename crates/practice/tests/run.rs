//! Practice on a tiny llama.cpp model: every attempt is recorded with the
//! check's verdict, only the family's tools are offered, and a reply held
//! to the right answer passes.

use std::sync::Arc;

use reverie_agent::CancelFlag;
use reverie_core::{Home, MessageRole, SamplingParams};
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{Constraint, Engine, EngineConfig};
use reverie_practice::{run, Episode, Family, PracticeError, RunConfig, Tally, Task};
use reverie_store::{EpisodeKind, Store};
use reverie_tools::Services;

struct Setup {
    _dir: tempfile::TempDir,
    home: Home,
    engine: Engine,
    store: Arc<Store>,
    services: Arc<Services>,
}

impl Setup {
    /// Runs `cfg` on the tiny model, not cancelled, without a callback.
    fn run(&self, cfg: &RunConfig) -> Result<Vec<Episode>, PracticeError> {
        run(
            &self.engine,
            &self.store,
            &self.services,
            cfg,
            &CancelFlag::default(),
            &mut |_, _| {},
        )
    }
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    synth::write(&model, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
    let home = Home::new(dir.path().join("home"));
    let engine = Engine::load(
        &model,
        EngineConfig {
            slots: 1,
            n_ctx: 4096,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    Setup {
        store: Arc::new(Store::open(&home).unwrap()),
        services: Arc::new(Services::new(&home)),
        engine,
        home,
        _dir: dir,
    }
}

fn config(family: Family, eval: bool) -> RunConfig {
    RunConfig {
        family,
        n: 2,
        samples: 1,
        seed: 11,
        difficulty: 2,
        eval,
        params: SamplingParams {
            temperature: 0.0,
            top_k: 1,
            max_tokens: 16,
            ..SamplingParams::default()
        },
        max_tool_calls: 2,
        tasker_share: 0.0,
        reply_constraint: None,
        wrap_up_constraint: None,
    }
}

fn says_the_answer(task: &Task) -> Constraint {
    Constraint::Gbnf(format!("root ::= \"The result is {}.\"", task.expected))
}

#[test]
fn attempts_are_recorded_with_their_verdicts_and_only_the_familys_tools() {
    let s = setup();
    let eps = s.run(&config(Family::Arithmetic, false)).unwrap();
    assert_eq!(eps.len(), 2);
    assert_ne!(eps[0].task.prompt, eps[1].task.prompt);
    let stored = s.store.episodes_since(0).unwrap();
    assert_eq!(stored.len(), 2);
    for (e, row) in eps.iter().zip(&stored) {
        assert_eq!(row.kind, EpisodeKind::Practice);
        assert_eq!(row.passed, e.verdict.passed);
        assert_eq!(row.why, e.verdict.why);
        assert_eq!(row.expected, e.task.expected);
        let ch = s.store.channel_by_name(&e.channel).unwrap().unwrap();
        let msgs = s.store.messages(ch.id).unwrap();
        let system = &msgs
            .iter()
            .find(|m| m.role == MessageRole::System)
            .unwrap()
            .text;
        assert!(
            system.contains("\"calculator\""),
            "the family's tool is offered"
        );
        assert!(!system.contains("\"write_file\""), "other tools are not");
        assert!(msgs
            .iter()
            .any(|m| m.role == MessageRole::User && m.text == e.task.prompt));
    }
    let _ = &s.home;
}

#[test]
fn each_task_is_attempted_the_asked_number_of_times_with_its_own_seed() {
    let s = setup();
    let mut cfg = config(Family::Strings, false);
    cfg.samples = 3;
    cfg.params.temperature = 1.0;
    cfg.params.top_k = 0;
    let mut seen = Vec::new();
    let eps = run(
        &s.engine,
        &s.store,
        &s.services,
        &cfg,
        &CancelFlag::default(),
        &mut |i, e| seen.push((i, e.channel.clone())),
    )
    .unwrap();
    assert_eq!(eps.len(), 6);
    assert_eq!(
        seen.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..6).collect::<Vec<_>>()
    );
    let prompts: Vec<&str> = eps.iter().map(|e| e.task.prompt.as_str()).collect();
    assert!(
        prompts[..3].iter().all(|p| *p == prompts[0]),
        "one task, three attempts"
    );
    assert!(prompts[3..].iter().all(|p| *p == prompts[3]));
    assert_ne!(prompts[0], prompts[3]);
    let channels: std::collections::HashSet<&String> = eps.iter().map(|e| &e.channel).collect();
    assert_eq!(channels.len(), 6, "every attempt has its own channel");
    assert!(eps[0].channel.ends_with("-0.0") && eps[5].channel.ends_with("-1.2"));
    let replies: std::collections::HashSet<&String> = eps[..3].iter().map(|e| &e.reply).collect();
    assert!(
        replies.len() > 1,
        "attempts are sampled with different seeds: {replies:?}"
    );
    assert_eq!(s.store.episodes_since(0).unwrap().len(), 6);
}

#[test]
fn the_model_writes_the_tasks_and_its_proposals_are_recorded() {
    let s = setup();
    let mut cfg = config(Family::Arithmetic, false);
    cfg.tasker_share = 1.0;
    cfg.samples = 2;
    let eps = s.run(&cfg).unwrap();
    assert_eq!(eps.len(), 4);
    let stored = s.store.episodes_since(0).unwrap();
    let taskers: Vec<_> = stored
        .iter()
        .filter(|e| e.kind == EpisodeKind::Tasker)
        .collect();
    assert_eq!(taskers.len(), 2, "one proposal per task");
    for (i, t) in taskers.iter().enumerate() {
        let ch = s
            .store
            .channels()
            .unwrap()
            .into_iter()
            .find(|c| c.id.0 == t.channel)
            .unwrap();
        assert!(ch.name.starts_with("tasker/arithmetic/"), "{}", ch.name);
        let msgs = s.store.messages(ch.id).unwrap();
        let request = msgs.iter().find(|m| m.role == MessageRole::User).unwrap();
        assert!(
            request.text.contains("family \"arithmetic\" at level 2"),
            "{}",
            request.text
        );
        let attempts = &eps[i * 2..i * 2 + 2];
        if t.prompt.is_empty() {
            // What it wrote was not a task: the solvers got a generated one.
            assert!(t.why.starts_with("not a task"), "{}", t.why);
            assert!(!t.passed);
        } else {
            // The solvers attempted exactly the task it wrote.
            assert!(attempts.iter().all(|e| e.task.prompt == t.prompt));
            let passed = attempts.iter().filter(|e| e.verdict.passed).count();
            assert!(
                t.why
                    .starts_with(&format!("the solvers passed {passed} of 2")),
                "{}",
                t.why
            );
        }
    }
    let mut eval = config(Family::Units, true);
    eval.tasker_share = 1.0;
    s.run(&eval).unwrap();
    assert_eq!(
        s.store
            .episodes_since(0)
            .unwrap()
            .iter()
            .filter(|e| e.kind == EpisodeKind::Tasker)
            .count(),
        2,
        "eval batches never ask the tasker"
    );
}

#[test]
fn a_reply_with_the_right_answer_passes_and_eval_is_marked_as_eval() {
    let s = setup();
    let mut cfg = config(Family::Units, true);
    cfg.reply_constraint = Some(says_the_answer);
    cfg.params.max_tokens = 64;
    let eps = s.run(&cfg).unwrap();
    assert!(
        eps.iter().all(|e| e.verdict.passed),
        "{:?}",
        eps.iter().map(|e| &e.verdict).collect::<Vec<_>>()
    );
    // Answered by itself: nothing for the harness to stop.
    let tally = Tally::of(&eps);
    assert_eq!((tally.passed, tally.stopped), (eps.len(), 0));
    assert_eq!(tally.success(), 1.0);
    assert!(s
        .store
        .episodes_since(0)
        .unwrap()
        .iter()
        .all(|r| r.kind == EpisodeKind::Eval && r.passed));
}

/// Every reply is a calculator call whose expression is the right answer.
fn calls_with_the_answer(task: &Task) -> Constraint {
    Constraint::Gbnf(format!(
        r#"root ::= "<tool_call>\n{{\"name\": \"calculator\", \"arguments\": {{\"expression\": \"{}\"}}}}\n</tool_call>""#,
        task.expected
    ))
}

/// Arithmetic attempts that call the calculator until the limit, then give
/// their last reply under `wrap_up`.
fn stopped_attempts(wrap_up: fn(&Task) -> Constraint) -> (Setup, Vec<Episode>) {
    let s = setup();
    let mut cfg = config(Family::Arithmetic, true);
    cfg.reply_constraint = Some(calls_with_the_answer);
    cfg.wrap_up_constraint = Some(wrap_up);
    // The tiny model spends a token per byte.
    cfg.params.max_tokens = 256;
    let eps = s.run(&cfg).unwrap();
    (s, eps)
}

#[test]
fn a_turn_stopped_at_the_call_limit_is_judged_on_its_last_answer() {
    let (s, eps) = stopped_attempts(says_the_answer);
    for e in &eps {
        assert_eq!(e.tool_calls, 2, "{:?}", e.reply);
        assert!(e.stopped);
        assert!(e.reply.starts_with("The result is"), "{}", e.reply);
        assert!(e.verdict.passed, "{:?}", e.verdict);
    }
    // The answer follows the notice that stopped the turn.
    let ch = s
        .store
        .channel_by_name(&eps[0].channel)
        .unwrap()
        .unwrap()
        .id;
    let texts: Vec<String> = s
        .store
        .messages(ch)
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    let notice = texts
        .iter()
        .position(|t| t.contains("limit of tool calls for one turn"))
        .unwrap();
    assert_eq!(texts.len(), notice + 2, "{texts:?}");
}

#[test]
fn a_stopped_turn_whose_last_reply_is_still_a_call_has_not_answered() {
    let (_s, eps) = stopped_attempts(calls_with_the_answer);
    for e in &eps {
        assert_eq!(e.tool_calls, 2, "{:?}", e.reply);
        assert!(e.reply.contains(&e.task.expected), "{}", e.reply);
        assert!(!e.verdict.passed);
        assert!(e.verdict.why.contains("no answer"), "{}", e.verdict.why);
    }
}

#[test]
fn bad_requests_are_refused_with_what_to_do() {
    let s = setup();
    let held_out = s.run(&config(Family::Units, false));
    assert!(held_out
        .unwrap_err()
        .to_string()
        .contains("held-out family"));
    let mut none = config(Family::Strings, false);
    none.n = 0;
    let e = s.run(&none).unwrap_err();
    assert!(e.to_string().contains("at least one task"));
    assert!(Family::parse("poetry")
        .unwrap_err()
        .contains("arithmetic, strings, ledger and units"));
    assert!(s.store.episodes_since(0).unwrap().is_empty());
}
