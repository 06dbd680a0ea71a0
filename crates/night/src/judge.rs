//! The deployed model as reward model: sub-tasks of a window of messages.

use std::sync::Arc;

use reverie_core::{ChannelId, MessageRole, SamplingParams};
use reverie_infer::{ChatMessage, Constraint, Engine, GenerateRequest, Transcript};
use reverie_tools::past::PastWorkspace;
use serde::{Deserialize, Serialize};

const PROMPT: &str = include_str!("../../../assets/prompts/judge.md");
const UNDERSTANDING: &str = include_str!("../../../assets/prompts/understanding.md");

/// A numbered message: its index in the channel, role and text.
pub type Numbered = (usize, MessageRole, String);

/// Consecutive messages of one channel, numbered as in the channel, and the
/// rest of the channel, which the judge may ask to read.
#[derive(Debug, Clone)]
pub struct Window {
    pub channel: ChannelId,
    pub messages: Vec<Numbered>,
    pub channel_messages: Arc<Vec<Numbered>>,
    /// The channel's workspace as it was at the window's last message,
    /// which the judge may list, read and run Python over.
    pub files: Option<Arc<WorkspaceThen>>,
    /// Messages the harness wrote to the model (notices of a stopped turn,
    /// questions): they open no sub-task.
    pub harness: Arc<std::collections::BTreeSet<usize>>,
    /// For each sub-task ending in the window (keyed by its final answer),
    /// the files the assistant changed for it, as they were at the answer.
    pub changed: std::collections::BTreeMap<usize, crate::verdict::ChangedFiles>,
    /// For each sub-task ending in the window (keyed by its final answer),
    /// the notes saved between its request and its answer (title and body).
    pub notes_added: std::collections::BTreeMap<usize, Vec<String>>,
}

/// A workspace as it was, and the services its Python runs with.
pub struct WorkspaceThen {
    pub past: PastWorkspace,
    pub services: Arc<reverie_tools::Services>,
}

impl std::fmt::Debug for WorkspaceThen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.past.fmt(f)
    }
}

/// Requests (more messages, the rest of a long one, a sum) the judge may
/// make before it must report.
pub const MAX_REQUESTS: usize = 3;
/// Workspace files the judge is told of at most.
const MAX_FILES_LISTED: usize = 40;
/// Messages one read returns at most.
const READ_LIMIT: usize = 10;
/// Characters of a message shown at a time; the judge reads on by asking.
const PAGE: usize = 1500;

/// Where a sub-task's reward came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// The judge read the day and rewarded it.
    #[default]
    Judged,
    /// A practice attempt: its family's check is the reward.
    Practice,
    /// A tasker's proposal: rewarded by its solvers' pass rate.
    Tasker,
    /// The person rated the reply that ends it: their 👍/👎 is the reward.
    Rated,
    /// A reply kept or taken back with ↻: ranked within its group.
    Preference,
}

/// A judged sub-task: its message span, length and reward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct JudgedTask {
    #[ts(type = "number")]
    pub channel: i64,
    pub description: String,
    pub first: usize,
    pub last: usize,
    pub turns: u32,
    /// In `[0, 1]`.
    pub reward: f32,
    pub reason: String,
    /// Attempts of one practice task share a group: each is judged against
    /// the group's pass rate instead of the value model's guess.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Rewarded by a program (a practice or tasker episode), not judged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checked: bool,
    /// Reports written before kinds were recorded hold judged tasks here.
    #[serde(default)]
    pub kind: TaskKind,
    /// The judge's own grade where the person's rating replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged: Option<f32>,
    /// The person's 👍 (true) or 👎 on the reply that ends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<bool>,
    /// What the judge was shown beyond the messages and what it asked for:
    /// calculator checks, reads, pages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<String>>", optional)]
    pub evidence: Vec<String>,
    /// A reply the person took back: its messages (ids), which train in
    /// place of `first..=last`'s after the transcript before `first`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<i32>>", optional)]
    pub taken_back: Vec<i64>,
}

/// Model turns of the span `first..=last`, counted from the record: each
/// assistant message is one (a tool call and the answer after it are two).
/// `messages` are (index, role) pairs of the channel.
pub fn counted_turns(
    messages: impl IntoIterator<Item = (usize, MessageRole)>,
    first: usize,
    last: usize,
) -> u32 {
    messages
        .into_iter()
        .filter(|(i, r)| (first..=last).contains(i) && *r == MessageRole::Assistant)
        .count()
        .max(1) as u32
}

/// The judge's answer: the sub-tasks, or a request.
#[derive(Deserialize)]
#[serde(untagged)]
enum Answer {
    Tasks { subtasks: Vec<RawTask> },
    Read { read: ReadRange },
    More { more: usize },
    Calculate { calculate: String },
    File { file: String },
    Python { python: String },
}

#[derive(Deserialize)]
struct ReadRange {
    first: usize,
    last: usize,
}

#[derive(Deserialize)]
struct RawTask {
    description: String,
    first: usize,
    last: usize,
    reward: u32,
    reason: String,
}

/// A sub-task ends with the assistant's answer: a span the judge closed on
/// the user's request is extended to the assistant message that follows.
fn answer_end(w: &Window, last: usize) -> usize {
    let pos = w.messages.iter().position(|(i, _, _)| *i == last);
    match pos.map(|p| (&w.messages[p], w.messages.get(p + 1))) {
        Some(((_, MessageRole::User, _), Some((next, MessageRole::Assistant, _)))) => *next,
        _ => last,
    }
}

/// Splits a channel's messages from `from` on into windows of `size`.
pub fn windows(
    channel: ChannelId,
    messages: &[(MessageRole, String)],
    from: usize,
    size: usize,
) -> Vec<Window> {
    let numbered: Vec<_> = messages
        .iter()
        .enumerate()
        .skip(from)
        .filter(|(_, (r, _))| *r != MessageRole::System)
        .map(|(i, (r, t))| (i, *r, t.clone()))
        .collect();
    let all: Arc<Vec<Numbered>> = Arc::new(
        messages
            .iter()
            .enumerate()
            .filter(|(_, (r, _))| *r != MessageRole::System)
            .map(|(i, (r, t))| (i, *r, t.clone()))
            .collect(),
    );
    numbered
        .chunks(size.max(1))
        .map(|c| Window {
            channel,
            messages: c.to_vec(),
            channel_messages: all.clone(),
            files: None,
            harness: Default::default(),
            changed: Default::default(),
            notes_added: Default::default(),
        })
        .collect()
}

/// `channel`'s windows from message `from` on, each with the workspace as
/// it was when its last message was written and the files each of its
/// sub-tasks changed (a channel that never had a workspace has none; one
/// that cannot be read is left out, with a warning).
pub fn channel_windows(
    store: &reverie_store::Store,
    services: &Arc<reverie_tools::Services>,
    channel: ChannelId,
    from: usize,
    size: usize,
) -> Result<Vec<Window>, reverie_store::StoreError> {
    let messages = store.messages(channel)?;
    let times: Vec<i64> = messages.iter().map(|m| m.created_ms).collect();
    let harness: Arc<std::collections::BTreeSet<usize>> = Arc::new(
        messages
            .iter()
            .enumerate()
            .filter(|(_, m)| reverie_agent::wrap_up::from_harness(m))
            .map(|(i, _)| i)
            .collect(),
    );
    let msgs: Vec<(MessageRole, String)> = messages.into_iter().map(|m| (m.role, m.text)).collect();
    let root = reverie_tools::workspace_root(&store.channel(channel)?, services);
    let mut out = windows(channel, &msgs, from, size);
    // The notes each sub-task saved, keyed by its final answer: the
    // sub-tasks are the channel's, the same for every window.
    let notes = store.every_note()?;
    let all = out
        .first()
        .map(|w| w.channel_messages.clone())
        .unwrap_or_default();
    let notes_added: std::collections::BTreeMap<usize, Vec<String>> =
        crate::verdict::spans(&all, &|i| harness.contains(&i))
            .into_iter()
            .map(|s| {
                let (from, to) = (times[s.first], times[s.last]);
                let added = notes
                    .iter()
                    .filter(|n| n.created_ms > from && n.created_ms <= to)
                    .map(|n| format!("{}\n{}", n.title, n.body))
                    .collect();
                (s.last, added)
            })
            .collect();
    for w in &mut out {
        w.harness = harness.clone();
        w.notes_added = notes_added.clone();
    }
    if !root.is_dir() {
        return Ok(out);
    }
    let key = reverie_tools::Workspace::open(&root)
        .map(|ws| ws.key())
        .ok();
    let revisions: Vec<(i64, Vec<String>)> = match &key {
        Some(k) => store
            .revisions(k)?
            .into_iter()
            .map(|r| (r.created_ms, changed_paths(&r.changes)))
            .collect(),
        None => Vec::new(),
    };
    let read = |at: i64, path: &str| match PastWorkspace::at(store, &root, at) {
        Ok(past) => past
            .read(path)
            .unwrap_or_else(|why| format!("cannot be read: {why}")),
        Err(e) => format!("cannot be read: {e}"),
    };
    for w in &mut out {
        let at = w.messages.last().map_or(0, |m| times[m.0]);
        match PastWorkspace::at(store, &root, at) {
            Ok(past) => {
                w.files = Some(Arc::new(WorkspaceThen {
                    past,
                    services: services.clone(),
                }))
            }
            Err(e) => tracing::warn!(
                "channel {}: the judge cannot see its workspace: {e}",
                channel.0
            ),
        }
        let (lo, hi) = (w.messages[0].0, w.messages[w.messages.len() - 1].0);
        let spans: Vec<crate::verdict::Span> =
            crate::verdict::spans(&w.channel_messages, &|i| w.harness.contains(&i))
                .into_iter()
                .filter(|s| (lo..=hi).contains(&s.last))
                .collect();
        w.changed = crate::verdict::changed_files(&spans, &|i| times[i], &revisions, &read);
    }
    Ok(out)
}

/// The paths a revision's changes name.
fn changed_paths(changes: &str) -> Vec<String> {
    let v: Vec<serde_json::Value> = serde_json::from_str(changes).unwrap_or_default();
    v.iter()
        .filter_map(|c| c["path"].as_str().map(str::to_string))
        .collect()
}

/// What the judge may ask for besides reporting: any message range of the
/// channel (`read_bounds`), the next page of a cut message (`cut`), a sum.
struct Offer {
    read_bounds: Option<(usize, usize)>,
    cut: Vec<usize>,
    files: Vec<String>,
}

/// The answer's schema: sub-tasks within the shown messages `lo..=hi`, or,
/// while requests remain, one of the requests offered.
fn schema(lo: usize, hi: usize, offer: Option<Offer>) -> serde_json::Value {
    let tasks = tasks_schema(lo, hi);
    let Some(offer) = offer else {
        return tasks;
    };
    let one = |key: &str, value: serde_json::Value| {
        serde_json::json!({
            "type": "object",
            "properties": {key: value},
            "required": [key],
            "additionalProperties": false
        })
    };
    let mut any = vec![tasks];
    if let Some((a, b)) = offer.read_bounds {
        let idx = serde_json::json!({"type": "integer", "minimum": a, "maximum": b});
        any.push(one(
            "read",
            serde_json::json!({
                "type": "object",
                "properties": {"first": idx, "last": idx},
                "required": ["first", "last"],
                "additionalProperties": false
            }),
        ));
    }
    if !offer.cut.is_empty() {
        any.push(one("more", serde_json::json!({"enum": offer.cut})));
    }
    if !offer.files.is_empty() {
        any.push(one("file", serde_json::json!({"enum": offer.files})));
        any.push(one(
            "python",
            serde_json::json!({"type": "string", "minLength": 3, "maxLength": 400}),
        ));
    }
    any.push(one(
        "calculate",
        serde_json::json!({"type": "string", "minLength": 3, "maxLength": 120}),
    ));
    serde_json::json!({ "anyOf": any })
}

/// Sub-tasks whose answers end in `lo..=hi`. The grade comes before the
/// reason: with the reason first, the default model wrote praise and then
/// graded failures higher (`reverie bench judge`).
fn tasks_schema(lo: usize, hi: usize) -> serde_json::Value {
    let idx = serde_json::json!({"type": "integer", "minimum": lo, "maximum": hi});
    serde_json::json!({
        "type": "object",
        "properties": {"subtasks": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
            "type": "object",
            "properties": {
                "description": {"type": "string", "minLength": 3, "maxLength": 160},
                "first": idx, "last": idx,
                "reward": {"type": "integer", "minimum": 0, "maximum": 10},
                "reason": {"type": "string", "maxLength": 160}
            },
            "required": ["description", "first", "last", "reward", "reason"],
            "additionalProperties": false
        }}},
        "required": ["subtasks"],
        "additionalProperties": false
    })
}

/// The first page of `text`, saying how much is left.
fn excerpt(text: &str) -> String {
    crate::verdict::cut(text, PAGE)
}

/// How the judge works; the night uses the default, benchmarks compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JudgeOptions {
    /// Show the calculator's checks of the sums in the messages.
    pub checks: bool,
    /// Show where the figures of each final answer were read (the verdict
    /// judge; with `checks`).
    pub traces: bool,
    /// Give a reward of 0, without asking, to a sub-task whose failure the
    /// record proves (`crate::verifier`; the verdict judge).
    pub verify: bool,
    pub way: JudgeWay,
    /// What the verdict judge asks.
    pub asked: Asked,
}

/// The verdict judge's question, and how the reward is read from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Asked {
    /// "Is the final answer right?": P(yes) ÷ (P(yes) + P(no)). The
    /// default model leans to "no" (0.26–0.42 on every family, passed or
    /// failed), so at 0.5 it calls almost everything failed.
    Right,
    /// That, and "is it wrong?" read the other way, averaged (twice the
    /// time): a leaning towards one word cancels out. On the default model
    /// this ranks as well as `Right` and is the only one of the three whose
    /// 0.5 threshold means something (`reverie bench judge`).
    #[default]
    BothWays,
    /// A grade from 0 to 10 as JSON: the expected grade under the logits
    /// (the default model leans high: 0.68–0.85 on every family).
    Grade,
}

/// How the judge finds and grades sub-tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum JudgeWay {
    /// Sub-tasks cut from the record, each asked "is the answer right?"
    /// (`crate::verdict`).
    #[default]
    Verdict,
    /// The judge splits a window into sub-tasks and grades each 0–10 in
    /// one JSON answer, with requests to read more first.
    Window,
}

impl Default for JudgeOptions {
    fn default() -> Self {
        JudgeOptions {
            checks: true,
            traces: true,
            verify: true,
            way: JudgeWay::default(),
            asked: Asked::default(),
        }
    }
}

/// What the judge has been shown of one channel so far.
struct Reading<'a> {
    window: &'a Window,
    options: JudgeOptions,
    shown: Vec<Numbered>,
    /// Pages shown of each message beyond its first.
    pages: std::collections::HashMap<usize, usize>,
    /// What it asked for, in words, and the calculator's answers.
    requests: Vec<String>,
}

/// What to do with one answer.
enum Step {
    Read(usize, usize),
    More(usize),
    Calculate(String),
    File(String),
    Python(String),
    /// Sub-tasks, each with its place among the answer's sub-tasks (whose
    /// grades are read from the logits in that order).
    Report(Vec<(usize, JudgedTask)>),
    Invalid(String),
}

/// `text` from page `pages` on is cut: the part shown and how many
/// characters are left.
fn page(text: &str, pages: usize) -> (String, usize) {
    let total = text.chars().count();
    let shown = PAGE * pages;
    (
        text.chars().take(shown).collect(),
        total.saturating_sub(shown),
    )
}

impl<'a> Reading<'a> {
    fn new(window: &'a Window, options: JudgeOptions) -> Reading<'a> {
        Reading {
            window,
            options,
            shown: window.messages.clone(),
            pages: Default::default(),
            requests: Vec::new(),
        }
    }

    /// The window's own first and last message numbers.
    fn own(&self) -> (usize, usize) {
        let m = &self.window.messages;
        (m[0].0, m[m.len() - 1].0)
    }

    fn prompt(&self) -> String {
        let (lo, hi) = self.own();
        let lines: Vec<String> = self
            .shown
            .iter()
            .map(|(i, r, t)| {
                let (text, left) = page(t, self.pages_of(*i));
                let cut = if left > 0 {
                    format!(" … [cut: {left} more characters; {{\"more\": {i}}} reads on]")
                } else {
                    String::new()
                };
                format!("[{i}] {}: {text}{cut}", r.as_str())
            })
            .collect();
        let evidence = self.evidence();
        let evidence = if evidence.is_empty() {
            String::new()
        } else {
            format!("\n\nChecked for you:\n{}", evidence.join("\n"))
        };
        let files = self.files();
        let files = if files.is_empty() {
            String::new()
        } else {
            format!(
                "\n\nFiles in the assistant's workspace at message [{hi}]: {}. To read one as it was then: {{\"file\": \"PATH\"}}; to run Python over them (read-only, to count or add up): {{\"python\": \"CODE\"}}.",
                files.join(", ")
            )
        };
        let all = &self.window.channel_messages;
        let (first, last) = (
            all.first().map_or(lo, |m| m.0),
            all.last().map_or(hi, |m| m.0),
        );
        PROMPT
            .replace("{{messages}}", &(lines.join("\n") + &evidence + &files))
            .replace("{{lo}}", &lo.to_string())
            .replace("{{hi}}", &hi.to_string())
            .replace("{{first}}", &first.to_string())
            .replace("{{last}}", &last.to_string())
    }

    /// The workspace's files at the window's end, as many as the prompt
    /// lists.
    fn files(&self) -> Vec<String> {
        let mut files = self
            .window
            .files
            .as_ref()
            .map(|f| f.past.files())
            .unwrap_or_default();
        files.truncate(MAX_FILES_LISTED);
        files
    }

    fn pages_of(&self, message: usize) -> usize {
        1 + self.pages.get(&message).copied().unwrap_or(0)
    }

    /// The calculator's checks of the sums shown, then what the judge
    /// asked for.
    fn evidence(&self) -> Vec<String> {
        let shown = self.shown.iter().map(|(i, r, t)| (*i, *r, t.as_str()));
        let mut out = if self.options.checks {
            crate::claims::checks(shown)
        } else {
            Vec::new()
        };
        out.extend(self.requests.iter().cloned());
        out
    }

    fn schema(&self) -> serde_json::Value {
        let (lo, hi) = (self.shown[0].0, self.shown[self.shown.len() - 1].0);
        let all = &self.window.channel_messages;
        let offer = (self.requests.len() < MAX_REQUESTS).then(|| Offer {
            read_bounds: (all.len() > self.shown.len()).then(|| {
                (
                    all.first().map_or(lo, |m| m.0),
                    all.last().map_or(hi, |m| m.0),
                )
            }),
            cut: self
                .shown
                .iter()
                .filter(|(i, _, t)| page(t, self.pages_of(*i)).1 > 0)
                .map(|m| m.0)
                .collect(),
            files: self.files(),
        });
        schema(lo, hi, offer)
    }

    /// Shows the next page of message `i`.
    fn more(&mut self, i: usize) {
        *self.pages.entry(i).or_default() += 1;
        let n = self.pages_of(i);
        self.requests
            .push(format!("the judge read page {n} of message {i}"));
    }

    /// Runs the calculator on `expr` and shows the answer.
    fn calculate(&mut self, expr: &str) {
        let answer = match reverie_tools::calculator::evaluate(expr) {
            Ok(v) => reverie_tools::calculator::format_number(v),
            Err(e) => format!("error: {e}"),
        };
        self.requests
            .push(format!("[calculator] {} = {answer}", expr.trim()));
    }

    /// Shows the workspace file `path` as it was at the window's end.
    fn file(&mut self, path: &str) {
        let (_, hi) = self.own();
        let shown = match self.window.files.as_ref().map(|f| f.past.read(path)) {
            Some(Ok(text)) => match page(&text, 1) {
                (shown, 0) => shown,
                (shown, left) => format!("{shown} … [{left} more characters]"),
            },
            Some(Err(why)) => format!("cannot be read: {why}"),
            None => "cannot be read: the channel has no workspace".into(),
        };
        self.requests
            .push(format!("[file {path} at message {hi}]\n{shown}"));
    }

    /// Runs `code` over the workspace as it was at the window's end and
    /// shows what it printed.
    fn python(&mut self, code: &str) {
        let (_, hi) = self.own();
        let ran = match &self.window.files {
            Some(f) => f.past.python(&f.services, code),
            None => Err("the channel has no workspace".into()),
        };
        let shown = match ran {
            Ok(out) if out.trim().is_empty() => "(no output)".to_string(),
            Ok(out) => excerpt(out.trim_end()),
            Err(why) => format!("failed: {}", excerpt(why.trim_end())),
        };
        self.requests.push(format!(
            "[python over the files at message {hi}] {}\n→ {shown}",
            code.trim()
        ));
    }

    /// Adds messages `first..=last` of the channel (at most [`READ_LIMIT`])
    /// to what is shown.
    fn read(&mut self, first: usize, last: usize) {
        let (first, last) = (first.min(last), first.max(last));
        let last = last.min(first + READ_LIMIT - 1);
        self.requests
            .push(format!("the judge read messages {first}–{last}"));
        for m in self.window.channel_messages.iter() {
            if (first..=last).contains(&m.0) && !self.shown.iter().any(|s| s.0 == m.0) {
                self.shown.push(m.clone());
            }
        }
        self.shown.sort_by_key(|m| m.0);
    }

    /// Interprets one answer. A sub-task belongs to the window its answer
    /// ends in, so one that ends outside this window is left to that one.
    fn step(&self, raw: &str) -> Step {
        let tasks = match serde_json::from_str::<Answer>(raw.trim()) {
            Err(e) => return Step::Invalid(format!("not the expected JSON ({e})")),
            Ok(Answer::Read { read }) => return Step::Read(read.first, read.last),
            Ok(Answer::More { more }) => return Step::More(more),
            Ok(Answer::Calculate { calculate }) => return Step::Calculate(calculate),
            Ok(Answer::File { file }) => return Step::File(file),
            Ok(Answer::Python { python }) => return Step::Python(python),
            Ok(Answer::Tasks { subtasks }) => subtasks,
        };
        let (lo, hi) = self.own();
        let shown_lo = self.shown[0].0;
        let evidence = self.evidence();
        let tasks: Vec<(usize, JudgedTask)> = tasks
            .into_iter()
            .enumerate()
            .filter(|(_, t)| {
                t.first <= t.last && t.first >= shown_lo && (lo..=hi).contains(&t.last)
            })
            .map(|(k, t)| {
                let last = answer_end(self.window, t.last);
                let turns = counted_turns(
                    self.window.channel_messages.iter().map(|m| (m.0, m.1)),
                    t.first,
                    last,
                );
                (k, t, last, turns)
            })
            .map(|(k, t, last, turns)| {
                (
                    k,
                    JudgedTask {
                        channel: self.window.channel.0,
                        description: t.description.trim().to_string(),
                        first: t.first,
                        last,
                        turns,
                        reward: t.reward.min(10) as f32 / 10.0,
                        reason: t.reason,
                        group: None,
                        checked: false,
                        kind: crate::judge::TaskKind::Judged,
                        judged: None,
                        feedback: None,
                        evidence: evidence.clone(),
                        taken_back: Vec::new(),
                    },
                )
            })
            .collect();
        // One sub-task per answer: the small judge often lists the same
        // request several times with shifted starts, which would train
        // the same reply over and over with different rewards.
        let mut answers = std::collections::HashSet::new();
        let tasks: Vec<(usize, JudgedTask)> = tasks
            .into_iter()
            .filter(|(_, t)| answers.insert(t.last))
            .collect();
        if tasks.is_empty() {
            Step::Invalid("no sub-task ended inside the window".into())
        } else {
            Step::Report(tasks)
        }
    }
}

/// The judge's sub-tasks for one window, and what it asked for first.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub tasks: Vec<JudgedTask>,
    /// Each task's grade as the judge wrote it (its likeliest digit), where
    /// `tasks` hold the expected grade.
    pub written: Vec<f32>,
    pub requests: Vec<String>,
}

/// Asks `engine` to judge `w`; greedy first, then sampled retries. The
/// judge may first make up to [`MAX_REQUESTS`] requests: other messages of
/// the channel, the rest of a long message, a sum. Each sub-task's reward
/// is the expected grade under the judge's own logits (the greedy digit
/// where it cannot be read). Returns the sub-tasks or the reason every
/// attempt was rejected.
pub fn judge_window(
    engine: &Engine,
    w: &Window,
    retries: usize,
    options: JudgeOptions,
) -> Result<Judgement, String> {
    if w.messages.is_empty() {
        return Err("empty window".into());
    }
    if options.way == JudgeWay::Verdict {
        return crate::verdict::judge(engine, w, options);
    }
    let mut why = String::new();
    for attempt in 0..=retries {
        let mut reading = Reading::new(w, options);
        loop {
            let asked = ask_json(engine, &reading.prompt(), reading.schema(), attempt, 600);
            let (raw, answer) = match asked {
                Ok(a) => a,
                Err(e) => {
                    why = e;
                    break;
                }
            };
            let step = reading.step(&raw);
            let may_ask = reading.requests.len() < MAX_REQUESTS;
            match step {
                Step::Read(..) | Step::More(_) | Step::Calculate(_) | Step::File(_) if !may_ask => {
                    why = "asked for more after its last request".into();
                    break;
                }
                Step::Read(first, last) => reading.read(first, last),
                Step::More(i) => reading.more(i),
                Step::Calculate(expr) => reading.calculate(&expr),
                Step::File(path) => reading.file(&path),
                Step::Python(code) => reading.python(&code),
                Step::Invalid(e) => {
                    why = e;
                    break;
                }
                Step::Report(tasks) => {
                    let grades = crate::grade::expected_grades(engine, &answer);
                    let written = tasks.iter().map(|(_, t)| t.reward).collect();
                    let tasks = tasks
                        .into_iter()
                        .map(|(k, mut t)| {
                            if let Some(&Some(g)) = grades.get(k) {
                                t.reward = g;
                            }
                            t
                        })
                        .collect();
                    return Ok(Judgement {
                        tasks,
                        written,
                        requests: reading.requests,
                    });
                }
            }
        }
    }
    Err(why)
}

/// The understanding pass: how well the assistant understood the task and
/// the user the answer, averaged into `[0, 1]`.
pub fn understanding(
    engine: &Engine,
    messages: &[(usize, MessageRole, String)],
    retries: usize,
) -> Result<f32, String> {
    let lines: Vec<String> = messages
        .iter()
        .map(|(i, r, t)| format!("[{i}] {}: {}", r.as_str(), excerpt(t)))
        .collect();
    let prompt = UNDERSTANDING.replace("{{messages}}", &lines.join("\n"));
    let score = serde_json::json!({"type": "integer", "minimum": 0, "maximum": 10});
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"assistant_understood": score, "user_understood": score},
        "required": ["assistant_understood", "user_understood"],
        "additionalProperties": false
    });
    let mut why = String::new();
    for attempt in 0..=retries {
        match ask_json(engine, &prompt, schema.clone(), attempt, 64) {
            Ok((text, _)) => match serde_json::from_str::<serde_json::Value>(text.trim()) {
                Ok(v) => {
                    let a = v["assistant_understood"].as_u64().unwrap_or(0).min(10) as f32;
                    let u = v["user_understood"].as_u64().unwrap_or(0).min(10) as f32;
                    return Ok((a + u) / 20.0);
                }
                Err(e) => why = format!("not the expected JSON ({e})"),
            },
            Err(e) => why = e,
        }
    }
    Err(why)
}

/// One grammar-constrained answer to `prompt` as a user message. Returns the
/// text and the exact tokens (prompt as context, answer as action with
/// log-probs).
pub fn ask_json(
    engine: &Engine,
    prompt: &str,
    schema: serde_json::Value,
    attempt: usize,
    max_tokens: usize,
) -> Result<(String, reverie_core::TokenSpan), String> {
    let mut t = Transcript::default();
    let mut span = engine
        .extend_transcript(&mut t, &[ChatMessage::new(MessageRole::User, prompt)])
        .map_err(|e| e.to_string())?;
    // The prompt is the harness's, not the user's: no imitation loss on it.
    for r in span.roles.iter_mut() {
        *r = reverie_core::TokenRole::Context;
    }
    let params = if attempt == 0 {
        SamplingParams::greedy(max_tokens)
    } else {
        SamplingParams {
            temperature: 0.7,
            seed: 1000 + attempt as u32,
            max_tokens,
            ..SamplingParams::default()
        }
    };
    let req = GenerateRequest::new(ChannelId(-1 - attempt as i64), t.tokens.ids.clone(), params)
        .with_constraint(Constraint::JsonSchema(schema));
    let reply = engine
        .generate(req)
        .map_err(|e| e.to_string())?
        .complete()
        .map_err(|e| e.to_string())?;
    if reply.reason != reverie_core::StopReason::EndOfTurn {
        return Err(format!("the answer did not finish ({:?})", reply.reason));
    }
    span.append(&reply.span());
    Ok((reply.text, span))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A data folder in `dir` with the channel "work" and its toolbox.
    pub(crate) fn work_channel(
        dir: &std::path::Path,
    ) -> (
        Arc<reverie_store::Store>,
        Arc<reverie_tools::Services>,
        ChannelId,
        reverie_tools::Toolbox,
    ) {
        let home = reverie_core::Home::new(dir.join("home"));
        let store = Arc::new(reverie_store::Store::open(&home).unwrap());
        let services = Arc::new(reverie_tools::Services::new(&home));
        let ch = store.ensure_channel("work").unwrap();
        let tools = reverie_tools::Toolbox::open(store.clone(), ch, services.clone()).unwrap();
        (store, services, ch, tools)
    }

    #[test]
    fn spans_end_on_the_answer_and_windows_skip_the_system_prompt() {
        let msgs = vec![
            (MessageRole::System, "sys".to_string()),
            (MessageRole::User, "q1".into()),
            (MessageRole::Assistant, "a1".into()),
            (MessageRole::User, "q2".into()),
            (MessageRole::Assistant, "a2".into()),
        ];
        let ws = windows(ChannelId(1), &msgs, 0, 3);
        assert_eq!(ws.len(), 2);
        assert_eq!(
            ws[0].messages.iter().map(|m| m.0).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(
            answer_end(&ws[0], 1),
            2,
            "a span closed on a request takes its answer"
        );
        assert_eq!(answer_end(&ws[0], 2), 2);
        assert_eq!(
            answer_end(&ws[0], 3),
            3,
            "no answer inside the window: unchanged"
        );
    }

    fn channel(n: usize) -> Vec<(MessageRole, String)> {
        let mut msgs = vec![(MessageRole::System, "sys".to_string())];
        for i in 1..=n {
            let role = if i % 2 == 1 {
                MessageRole::User
            } else {
                MessageRole::Assistant
            };
            msgs.push((role, format!("message {i}")));
        }
        msgs
    }

    #[test]
    fn the_judge_may_read_beyond_its_window_and_keeps_only_what_ends_in_it() {
        let ws = windows(ChannelId(7), &channel(12), 0, 4);
        assert_eq!(ws.len(), 3);
        let w = &ws[1]; // messages 5..=8
        let mut r = Reading::new(w, JudgeOptions::default());
        let prompt = r.prompt();
        assert!(prompt.contains("among messages [5] to [8]"), "{prompt}");
        assert!(prompt.contains("has messages [1] to [12]"), "{prompt}");
        assert!(prompt.contains("[5] user: message 5") && !prompt.contains("[4] "));
        let schema = r.schema().to_string();
        assert!(
            schema.contains("anyOf") && schema.contains("\"read\""),
            "{schema}"
        );

        // A read is a request, not a report.
        match r.step(r#"{"read": {"first": 3, "last": 4}}"#) {
            Step::Read(3, 4) => {}
            _ => panic!("a read request"),
        }
        r.read(3, 4);
        assert!(r
            .prompt()
            .contains("[3] user: message 3\n[4] assistant: message 4\n[5] user"));
        r.read(30, 1);
        assert_eq!(
            r.requests,
            vec![
                "the judge read messages 3–4",
                "the judge read messages 1–10"
            ],
            "a read takes at most ten messages"
        );
        r.calculate("17*23");
        assert!(
            !r.schema().to_string().contains("\"read\""),
            "after the last request only a report is accepted"
        );

        // A sub-task that began before the window and ends in it is kept;
        // one that ends after the window is left to the next window.
        let answer = r#"{"subtasks": [
            {"description": "ends later", "first": 7, "last": 10, "reason": "?", "reward": 5},
            {"description": "started earlier", "first": 3, "last": 6, "reason": "ok", "reward": 8},
            {"description": "inverted", "first": 8, "last": 7, "reason": "?", "reward": 5}
        ]}"#;
        match r.step(answer) {
            Step::Report(tasks) => {
                assert_eq!(tasks.len(), 1);
                let (k, t) = &tasks[0];
                assert_eq!(*k, 1, "its place among the answer's grades");
                assert_eq!((t.channel, t.first, t.last, t.reward), (7, 3, 6, 0.8));
                assert!(
                    t.evidence.contains(&"[calculator] 17*23 = 391".to_string()),
                    "{:?}",
                    t.evidence
                );
            }
            _ => panic!("a report"),
        }
        match r.step(r#"{"subtasks": [{"description": "x", "first": 9, "last": 10, "reason": "", "reward": 1}]}"#) {
            Step::Invalid(why) => assert!(why.contains("ended inside the window"), "{why}"),
            _ => panic!("nothing ends in the window"),
        }
        match r.step("not json") {
            Step::Invalid(why) => assert!(why.starts_with("not the expected JSON")),
            _ => panic!("invalid"),
        }
    }

    #[test]
    fn a_long_message_is_shown_a_page_at_a_time_and_read_on_request() {
        let long: String = (0..PAGE + 700)
            .map(|i| if i == PAGE + 650 { 'Z' } else { 'a' })
            .collect();
        let msgs = vec![
            (MessageRole::User, "summarise the log".to_string()),
            (MessageRole::Tool, long),
            (MessageRole::Assistant, "It ends as it began.".to_string()),
        ];
        let ws = windows(ChannelId(1), &msgs, 0, 10);
        let mut r = Reading::new(&ws[0], JudgeOptions::default());
        let prompt = r.prompt();
        assert!(!prompt.contains('Z'), "the second page is not shown yet");
        assert!(
            prompt.contains("[cut: 700 more characters; {\"more\": 1} reads on]"),
            "{prompt}"
        );
        assert!(r.schema().to_string().contains(r#""more":{"enum":[1]}"#));
        match r.step(r#"{"more": 1}"#) {
            Step::More(1) => r.more(1),
            _ => panic!("a request for the next page"),
        }
        let prompt = r.prompt();
        assert!(
            prompt.contains('Z') && !prompt.contains("[cut:"),
            "{prompt}"
        );
        assert!(!r.schema().to_string().contains("\"more\""));
        assert_eq!(r.requests, ["the judge read page 2 of message 1"]);
    }

    #[test]
    fn the_judge_is_shown_the_calculator_on_the_sums_of_the_day() {
        let msgs = vec![
            (MessageRole::User, "What is 17 × 23?".to_string()),
            (MessageRole::Assistant, "17 × 23 = 391".to_string()),
        ];
        let ws = windows(ChannelId(1), &msgs, 0, 10);
        let prompt = Reading::new(&ws[0], JudgeOptions::default()).prompt();
        assert!(
            prompt.contains("[check] message 1 says 17 * 23 = 391: correct"),
            "{prompt}"
        );
        assert!(prompt.contains("Rubric"), "the prompt states how to grade");
    }

    #[test]
    fn the_judge_reads_a_workspace_file_as_it_was_at_the_answer() {
        use reverie_core::TokenSpan;
        let dir = tempfile::tempdir().unwrap();
        let (store, services, ch, tools) = work_channel(dir.path());
        let say = |role, text: &str| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            store
                .append_message(ch, role, text, &TokenSpan::default())
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        say(MessageRole::User, "Set the port to 9091 in app.ini");
        tools
            .call(
                "write_file",
                &serde_json::json!({"path": "app.ini", "content": "port = 9091\n"}),
            )
            .unwrap();
        say(MessageRole::Assistant, "Done: the port is 9091.");
        say(MessageRole::User, "Now set it back to 80");
        tools
            .call(
                "write_file",
                &serde_json::json!({"path": "app.ini", "content": "port = 80\n"}),
            )
            .unwrap();
        say(MessageRole::Assistant, "Done.");

        let ws = channel_windows(&store, &services, ch, 0, 2).unwrap();
        assert_eq!(ws.len(), 2);
        let mut r = Reading::new(&ws[0], JudgeOptions::default());
        assert!(
            r.prompt()
                .contains("Files in the assistant's workspace at message [1]: app.ini"),
            "{}",
            r.prompt()
        );
        assert!(r
            .schema()
            .to_string()
            .contains(r#""file":{"enum":["app.ini"]}"#));
        match r.step(r#"{"file": "app.ini"}"#) {
            Step::File(p) => r.file(&p),
            _ => panic!("a request for the file"),
        }
        // The first answer is judged on the file as it was then, not now.
        assert_eq!(r.requests, ["[file app.ini at message 1]\nport = 9091\n"]);
        assert!(r.prompt().contains("port = 9091"));
        let mut later = Reading::new(&ws[1], JudgeOptions::default());
        later.file("app.ini");
        later.file("missing.txt");
        assert!(
            later.requests[0].ends_with("port = 80\n"),
            "{:?}",
            later.requests
        );
        assert!(
            later.requests[1].contains("cannot be read"),
            "{:?}",
            later.requests
        );
        // A channel whose workspace was never made is shown no files.
        let bare = store.ensure_channel("chat").unwrap();
        store
            .append_message(bare, MessageRole::User, "hi", &TokenSpan::default())
            .unwrap();
        let ws = channel_windows(&store, &services, bare, 0, 2).unwrap();
        assert!(ws[0].files.is_none());
        assert!(!Reading::new(&ws[0], JudgeOptions::default())
            .prompt()
            .contains("Files in"));
    }

    #[test]
    fn one_sub_task_is_kept_per_answer() {
        let msgs = vec![
            (MessageRole::User, "What is 6 * 7?".to_string()),
            (MessageRole::Assistant, "42".to_string()),
            (MessageRole::User, "And 2 + 2?".to_string()),
            (MessageRole::Assistant, "4".to_string()),
        ];
        let ws = windows(ChannelId(1), &msgs, 0, 10);
        let r = Reading::new(&ws[0], JudgeOptions::default());
        let task = |first: usize, last: usize, reward: u32| serde_json::json!({"description": "a sum", "first": first, "last": last, "reward": reward, "reason": "r"});
        let raw = serde_json::json!({"subtasks": [task(0, 1, 9), task(0, 3, 2), task(2, 3, 8), task(1, 3, 5)]});
        let Step::Report(tasks) = r.step(&raw.to_string()) else {
            panic!("a report")
        };
        let kept: Vec<(usize, usize, usize, f32)> = tasks
            .iter()
            .map(|(k, t)| (*k, t.first, t.last, t.reward))
            .collect();
        // The first listed of each answer, with its place in the answer
        // (the grades are read from the logits in that order).
        assert_eq!(kept, [(0, 0, 1, 0.9), (1, 0, 3, 0.2)]);
    }

    #[test]
    fn a_channel_shown_whole_offers_no_reads() {
        let ws = windows(ChannelId(1), &channel(4), 0, 10);
        let r = Reading::new(&ws[0], JudgeOptions::default());
        assert!(!r.schema().to_string().contains("\"read\""));
    }
}
