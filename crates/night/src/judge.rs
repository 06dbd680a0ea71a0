//! The deployed model as reward model: sub-tasks of a window of messages.

use std::sync::Arc;

use reverie_core::{ChannelId, MessageRole, SamplingParams};
use reverie_infer::{ChatMessage, Constraint, Engine, GenerateRequest, Transcript};
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
}

/// Reads the judge may ask for before it must report.
pub const MAX_READS: usize = 2;
/// Messages one read returns at most.
const READ_LIMIT: usize = 10;

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

/// The judge's answer: the sub-tasks, or a request to read more messages.
#[derive(Deserialize)]
#[serde(untagged)]
enum Answer {
    Tasks { subtasks: Vec<RawTask> },
    Read { read: ReadRange },
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
        })
        .collect()
}

/// The answer's schema: sub-tasks within the shown messages `lo..=hi`, or,
/// while reads remain, a read of any message range of the channel.
fn schema(lo: usize, hi: usize, read_bounds: Option<(usize, usize)>) -> serde_json::Value {
    let tasks = tasks_schema(lo, hi);
    let Some((a, b)) = read_bounds else {
        return tasks;
    };
    let idx = serde_json::json!({"type": "integer", "minimum": a, "maximum": b});
    let read = serde_json::json!({
        "type": "object",
        "properties": {"read": {
            "type": "object",
            "properties": {"first": idx, "last": idx},
            "required": ["first", "last"],
            "additionalProperties": false
        }},
        "required": ["read"],
        "additionalProperties": false
    });
    serde_json::json!({"anyOf": [tasks, read]})
}

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

fn excerpt(text: &str) -> String {
    let t: String = text.chars().take(600).collect();
    if t.len() < text.len() {
        format!("{t} …")
    } else {
        t
    }
}

/// What the judge has been shown of one channel so far.
struct Reading<'a> {
    window: &'a Window,
    shown: Vec<Numbered>,
    reads: Vec<(usize, usize)>,
}

/// What to do with one answer.
enum Step {
    Read(usize, usize),
    Report(Vec<JudgedTask>),
    Invalid(String),
}

impl<'a> Reading<'a> {
    fn new(window: &'a Window) -> Reading<'a> {
        Reading {
            window,
            shown: window.messages.clone(),
            reads: Vec::new(),
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
            .map(|(i, r, t)| format!("[{i}] {}: {}", r.as_str(), excerpt(t)))
            .collect();
        let all = &self.window.channel_messages;
        let (first, last) = (
            all.first().map_or(lo, |m| m.0),
            all.last().map_or(hi, |m| m.0),
        );
        PROMPT
            .replace("{{messages}}", &lines.join("\n"))
            .replace("{{lo}}", &lo.to_string())
            .replace("{{hi}}", &hi.to_string())
            .replace("{{first}}", &first.to_string())
            .replace("{{last}}", &last.to_string())
    }

    fn schema(&self) -> serde_json::Value {
        let (lo, hi) = (self.shown[0].0, self.shown[self.shown.len() - 1].0);
        let all = &self.window.channel_messages;
        let can_read = self.reads.len() < MAX_READS && all.len() > self.shown.len();
        let bounds = (
            all.first().map_or(lo, |m| m.0),
            all.last().map_or(hi, |m| m.0),
        );
        schema(lo, hi, can_read.then_some(bounds))
    }

    /// Adds messages `first..=last` of the channel (at most [`READ_LIMIT`])
    /// to what is shown.
    fn read(&mut self, first: usize, last: usize) {
        let (first, last) = (first.min(last), first.max(last));
        let last = last.min(first + READ_LIMIT - 1);
        self.reads.push((first, last));
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
            Ok(Answer::Tasks { subtasks }) => subtasks,
        };
        let (lo, hi) = self.own();
        let shown_lo = self.shown[0].0;
        let tasks: Vec<JudgedTask> = tasks
            .into_iter()
            .filter(|t| t.first <= t.last && t.first >= shown_lo && (lo..=hi).contains(&t.last))
            .map(|t| {
                let last = answer_end(self.window, t.last);
                let turns = counted_turns(
                    self.window.channel_messages.iter().map(|m| (m.0, m.1)),
                    t.first,
                    last,
                );
                (t, last, turns)
            })
            .map(|(t, last, turns)| JudgedTask {
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
            })
            .collect();
        if tasks.is_empty() {
            Step::Invalid("no sub-task ended inside the window".into())
        } else {
            Step::Report(tasks)
        }
    }
}

/// The judge's sub-tasks for one window, and the message ranges it read
/// beyond it.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub tasks: Vec<JudgedTask>,
    pub reads: Vec<(usize, usize)>,
}

/// Asks `engine` to judge `w`; greedy first, then sampled retries. The
/// judge may first read up to [`MAX_READS`] ranges of the channel's other
/// messages. Returns the sub-tasks or the reason every attempt was
/// rejected.
pub fn judge_window(engine: &Engine, w: &Window, retries: usize) -> Result<Judgement, String> {
    if w.messages.is_empty() {
        return Err("empty window".into());
    }
    let mut why = String::new();
    for attempt in 0..=retries {
        let mut reading = Reading::new(w);
        loop {
            let raw = match ask_json(engine, &reading.prompt(), reading.schema(), attempt, 600) {
                Ok((text, _)) => text,
                Err(e) => {
                    why = e;
                    break;
                }
            };
            match reading.step(&raw) {
                Step::Read(first, last) if reading.reads.len() < MAX_READS => {
                    reading.read(first, last)
                }
                Step::Read(..) => {
                    why = "asked to read after its last read".into();
                    break;
                }
                Step::Invalid(e) => {
                    why = e;
                    break;
                }
                Step::Report(tasks) => {
                    return Ok(Judgement {
                        tasks,
                        reads: reading.reads,
                    })
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
mod tests {
    use super::*;

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
        let mut r = Reading::new(w);
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
            r.reads,
            vec![(3, 4), (1, 10)],
            "a read takes at most ten messages"
        );
        assert!(
            !r.schema().to_string().contains("\"read\""),
            "after the last read only a report is accepted"
        );

        // A sub-task that began before the window and ends in it is kept;
        // one that ends after the window is left to the next window.
        let answer = r#"{"subtasks": [
            {"description": "started earlier", "first": 3, "last": 6, "turns": 2, "reward": 8, "reason": "ok"},
            {"description": "ends later", "first": 7, "last": 10, "turns": 2, "reward": 5, "reason": "?"},
            {"description": "inverted", "first": 8, "last": 7, "turns": 1, "reward": 5, "reason": "?"}
        ]}"#;
        match r.step(answer) {
            Step::Report(tasks) => {
                assert_eq!(tasks.len(), 1);
                let t = &tasks[0];
                assert_eq!((t.channel, t.first, t.last, t.reward), (7, 3, 6, 0.8));
            }
            _ => panic!("a report"),
        }
        match r.step(r#"{"subtasks": [{"description": "x", "first": 9, "last": 10, "turns": 1, "reward": 1, "reason": ""}]}"#) {
            Step::Invalid(why) => assert!(why.contains("ended inside the window"), "{why}"),
            _ => panic!("nothing ends in the window"),
        }
        match r.step("not json") {
            Step::Invalid(why) => assert!(why.starts_with("not the expected JSON")),
            _ => panic!("invalid"),
        }
    }

    #[test]
    fn a_channel_shown_whole_offers_no_reads() {
        let ws = windows(ChannelId(1), &channel(4), 0, 10);
        let r = Reading::new(&ws[0]);
        assert!(!r.schema().to_string().contains("\"read\""));
    }
}
