//! The simulated person: poses a channel's tasks as ordinary messages —
//! a greeting or straight to the point, "thanks" and the next thing, a
//! recall at the end — follows up on some wrong answers as people do, and
//! rates some replies. Each reply is checked by the simulator alone; the
//! channel holds only what a person would have written.

use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reverie_agent::{CancelFlag, ChannelSession, ToolSetup};
use reverie_core::SamplingParams;
use reverie_infer::Engine;
use reverie_store::Store;
use reverie_tools::{Services, Toolbox};
use serde::{Deserialize, Serialize};

use super::check::verdict;
use super::family::{DayFamily, DayTask};
use crate::check::Verdict;
use crate::runner::unanswered;
use crate::PracticeError;

/// How a person opens a channel's first request.
const OPENINGS: [&str; 3] = ["", "Hi! Could you help me with this? ", "Quick one: "];
/// How they move on to the next request in a channel.
const NEXT: [&str; 3] = [
    "Thanks. Next thing: ",
    "Great, thank you. Another one: ",
    "OK. ",
];
/// What they say when an answer looks wrong.
const FOLLOW_UPS: [&str; 3] = [
    "That doesn't look right to me. Could you check it again?",
    "Hmm, are you sure? Please double-check.",
    "I don't think that's it. Can you look again?",
];

#[derive(Debug, Clone)]
pub struct DayOptions {
    pub system_prompt: String,
    pub params: SamplingParams,
    /// Tool calls one turn may make.
    pub max_calls: usize,
    /// Offer only the channel's families' tools; else the agent's usual
    /// offer, as in the person's own channels.
    pub family_tools: bool,
    /// Chance that a wrong answer gets one follow-up.
    pub follow_up: f64,
    /// Chance that a checked reply gets a 👍 (passed) or 👎 (failed).
    pub feedback: f64,
    /// Seeds the person's choices (openings, follow-ups, ratings).
    pub seed: u64,
}

/// One request as it went, with the hidden verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Posed {
    pub channel: i64,
    pub family: DayFamily,
    /// The task's index in what was posed, and the step within it.
    pub task: usize,
    pub step: usize,
    /// Positions in the channel's messages of the request and of the
    /// final reply (after a follow-up, the second answer).
    pub request: usize,
    pub reply: usize,
    /// The first answer's verdict, and the final one's.
    pub first_passed: bool,
    pub passed: bool,
    pub why: String,
    pub followed_up: bool,
    /// The 👍 (true) or 👎 given to the final reply, if any.
    pub rated: Option<bool>,
}

/// Poses `tasks` (numbered from `first_index`) in the channel `name`, one
/// after another, each later step after all the others.
#[allow(clippy::too_many_arguments)]
pub fn pose_channel(
    engine: &Engine,
    store: &Arc<Store>,
    services: &Arc<Services>,
    name: &str,
    tasks: &[DayTask],
    first_index: usize,
    opts: &DayOptions,
    cancel: &CancelFlag,
) -> Result<Vec<Posed>, PracticeError> {
    let mut rng = StdRng::seed_from_u64(opts.seed ^ hash(name));
    let channel = store.ensure_channel(name)?;
    let toolbox = Toolbox::open(store.clone(), channel, services.clone())?;
    let workspace = toolbox.workspace().root().to_path_buf();
    let mut setup = ToolSetup::new(toolbox);
    setup.max_calls = opts.max_calls;
    if opts.family_tools {
        let mut allowed: Vec<String> = tasks
            .iter()
            .flat_map(|t| t.family.tools().iter().map(|s| s.to_string()))
            .collect();
        allowed.sort();
        allowed.dedup();
        setup.allowed = Some(allowed);
    }
    let mut session =
        ChannelSession::open(engine, store, name, &opts.system_prompt)?.with_tools(setup);
    let order: Vec<(usize, usize)> = {
        let steps = |later| {
            tasks.iter().enumerate().flat_map(move |(t, task)| {
                task.steps
                    .iter()
                    .enumerate()
                    .filter(move |(_, s)| s.later == later)
                    .map(move |(s, _)| (t, s))
            })
        };
        steps(false).chain(steps(true)).collect()
    };
    let mut out = Vec::new();
    for (n, &(t, s)) in order.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let task = &tasks[t];
        let step = &task.steps[s];
        if s == 0 {
            put_files(&workspace, &task.files)?;
        }
        let opening = if n == 0 {
            OPENINGS[rng.random_range(0..OPENINGS.len())]
        } else {
            NEXT[rng.random_range(0..NEXT.len())]
        };
        let notes_before = store.notes()?.iter().map(|n| n.id).max().unwrap_or(0);
        let ask = |text: &str, session: &mut ChannelSession, k: u32| {
            let params = SamplingParams {
                seed: opts.params.seed ^ (hash(name) as u32) ^ (n as u32) << 8 ^ k,
                ..opts.params.clone()
            };
            let outcome = session.send(text, &params, cancel, &mut |_| {})?;
            let v = match unanswered(session, &outcome) {
                Some(why) => Verdict { passed: false, why },
                None => verdict(
                    &step.hidden,
                    &outcome.reply,
                    &workspace,
                    store,
                    notes_before,
                ),
            };
            Ok::<_, PracticeError>((outcome, v))
        };
        let (first, first_v) = ask(&format!("{opening}{}", step.request), &mut session, 0)?;
        let mut last = (first.clone(), first_v.clone());
        let follow = !first_v.passed && rng.random_bool(opts.follow_up.clamp(0.0, 1.0));
        if follow && !cancel.is_cancelled() {
            let text = FOLLOW_UPS[rng.random_range(0..FOLLOW_UPS.len())];
            last = ask(text, &mut session, 1)?;
        }
        let rated = rng
            .random_bool(opts.feedback.clamp(0.0, 1.0))
            .then_some(last.1.passed);
        if rated.is_some() {
            store.set_feedback(channel, last.0.reply_message, rated)?;
        }
        let ids: Vec<_> = store.messages(channel)?.iter().map(|m| m.id).collect();
        let at = |id| ids.iter().position(|m| *m == id).unwrap_or(0);
        out.push(Posed {
            channel: channel.0,
            family: task.family,
            task: first_index + t,
            step: s,
            request: at(first.user_message),
            reply: at(last.0.reply_message),
            first_passed: first_v.passed,
            passed: last.1.passed,
            why: last.1.why,
            followed_up: follow,
            rated,
        });
    }
    Ok(out)
}

/// Writes a task's files into the workspace, as the person's own files.
fn put_files(workspace: &Path, files: &[(String, String)]) -> Result<(), PracticeError> {
    for (path, text) in files {
        let to = workspace.join(path);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io(&to, e))?;
        }
        std::fs::write(&to, text).map_err(|e| io(&to, e))?;
    }
    Ok(())
}

fn io(path: &Path, e: std::io::Error) -> PracticeError {
    PracticeError::Invalid(format!("writing {}: {e}", path.display()))
}

/// A stable hash of a channel name (FNV-1a), so each channel's choices
/// differ but repeat from run to run.
fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Whether each task passed (every step), in task order.
pub fn task_outcomes(posed: &[Posed]) -> Vec<(usize, DayFamily, bool)> {
    let mut out: Vec<(usize, DayFamily, bool)> = Vec::new();
    for p in posed {
        match out.iter_mut().find(|(t, _, _)| *t == p.task) {
            Some(o) => o.2 &= p.passed,
            None => out.push((p.task, p.family, p.passed)),
        }
    }
    out.sort_by_key(|o| o.0);
    out
}
