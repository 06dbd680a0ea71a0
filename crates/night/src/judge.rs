//! The deployed model as reward model: sub-tasks of a window of messages.

use reverie_core::{ChannelId, MessageRole, SamplingParams};
use reverie_infer::{ChatMessage, Constraint, Engine, GenerateRequest, Transcript};
use serde::{Deserialize, Serialize};

const PROMPT: &str = include_str!("../../../assets/prompts/judge.md");
const UNDERSTANDING: &str = include_str!("../../../assets/prompts/understanding.md");

/// Consecutive messages of one channel, numbered as in the channel.
#[derive(Debug, Clone)]
pub struct Window {
    pub channel: ChannelId,
    pub messages: Vec<(usize, MessageRole, String)>,
}

/// A judged sub-task: its message span, length and reward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgedTask {
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
}

#[derive(Deserialize)]
struct Answer {
    subtasks: Vec<RawTask>,
}

#[derive(Deserialize)]
struct RawTask {
    description: String,
    first: usize,
    last: usize,
    turns: u32,
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
    numbered
        .chunks(size.max(1))
        .map(|c| Window {
            channel,
            messages: c.to_vec(),
        })
        .collect()
}

fn schema(lo: usize, hi: usize) -> serde_json::Value {
    let idx = serde_json::json!({"type": "integer", "minimum": lo, "maximum": hi});
    serde_json::json!({
        "type": "object",
        "properties": {"subtasks": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
            "type": "object",
            "properties": {
                "description": {"type": "string", "minLength": 3, "maxLength": 160},
                "first": idx, "last": idx,
                "turns": {"type": "integer", "minimum": 1, "maximum": 20},
                "reward": {"type": "integer", "minimum": 0, "maximum": 10},
                "reason": {"type": "string", "maxLength": 160}
            },
            "required": ["description", "first", "last", "turns", "reward", "reason"],
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

/// Asks `engine` to judge `w`; greedy first, then sampled retries. Returns
/// the sub-tasks or the reason every attempt was rejected.
pub fn judge_window(
    engine: &Engine,
    w: &Window,
    retries: usize,
) -> Result<Vec<JudgedTask>, String> {
    let (lo, hi) = match (w.messages.first(), w.messages.last()) {
        (Some(a), Some(b)) => (a.0, b.0),
        _ => return Err("empty window".into()),
    };
    let lines: Vec<String> = w
        .messages
        .iter()
        .map(|(i, r, t)| format!("[{i}] {}: {}", r.as_str(), excerpt(t)))
        .collect();
    let prompt = PROMPT.replace("{{messages}}", &lines.join("\n"));
    let mut why = String::new();
    for attempt in 0..=retries {
        let raw = match ask_json(engine, &prompt, schema(lo, hi), attempt, 600) {
            Ok((text, _)) => text,
            Err(e) => {
                why = e;
                continue;
            }
        };
        let parsed: Answer = match serde_json::from_str(raw.trim()) {
            Ok(a) => a,
            Err(e) => {
                why = format!("not the expected JSON ({e})");
                continue;
            }
        };
        let tasks: Vec<JudgedTask> = parsed
            .subtasks
            .into_iter()
            .filter(|t| t.first <= t.last && t.first >= lo && t.last <= hi)
            .map(|t| RawTask {
                last: answer_end(w, t.last),
                ..t
            })
            .map(|t| JudgedTask {
                channel: w.channel.0,
                description: t.description.trim().to_string(),
                first: t.first,
                last: t.last,
                turns: t.turns,
                reward: t.reward.min(10) as f32 / 10.0,
                reason: t.reason,
                group: None,
            })
            .collect();
        if tasks.is_empty() {
            why = "every sub-task had an inverted message span".into();
            continue;
        }
        return Ok(tasks);
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
}
