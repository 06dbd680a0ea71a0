//! The reviewer: days of each channel as episodes, an episode with the
//! night's judgement of it and its tokens by role, marks for the next
//! night, and the night records.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use reverie_core::{ChannelId, MessageId, TokenRole};
use serde::Serialize;
use serde_json::Value;
use tauri::State;

use crate::failure::{refuse, Reply};
use crate::state::App;

/// One sub-task as a night judged it, with message ids instead of indices.
#[derive(Serialize, Clone)]
pub struct SubTaskView {
    pub night: i64,
    pub description: String,
    pub first_message: i64,
    pub last_message: i64,
    pub turns: u64,
    pub reward: f64,
    pub predicted_reward: Option<f64>,
    pub predicted_turns: Option<u64>,
    pub advantage: Option<f64>,
    pub understanding: Option<f64>,
    pub reason: String,
}

/// Every sub-task every night found, by channel.
fn subtasks(app: &App) -> Reply<HashMap<i64, Vec<SubTaskView>>> {
    let mut ids: HashMap<i64, Vec<i64>> = HashMap::new();
    let mut out: HashMap<i64, Vec<SubTaskView>> = HashMap::new();
    for n in app.store.nights()? {
        let r = &n.report;
        let empty = Vec::new();
        let tasks = r["tasks"].as_array().unwrap_or(&empty);
        for (i, t) in tasks.iter().enumerate() {
            let ch = t["channel"].as_i64().unwrap_or(0);
            let channel_ids = match ids.get(&ch) {
                Some(v) => v,
                None => {
                    let v = app
                        .store
                        .messages(ChannelId(ch))
                        .map(|ms| ms.iter().map(|m| m.id.0).collect())
                        .unwrap_or_default();
                    ids.entry(ch).or_insert(v)
                }
            };
            let at = |k: &str| {
                t[k].as_u64()
                    .and_then(|i| channel_ids.get(i as usize))
                    .copied()
            };
            let (Some(first), Some(last)) = (at("first"), at("last")) else {
                continue;
            };
            let pred = &r["predictions"][i];
            out.entry(ch).or_default().push(SubTaskView {
                night: n.id,
                description: t["description"].as_str().unwrap_or_default().to_string(),
                first_message: first,
                last_message: last,
                turns: t["turns"].as_u64().unwrap_or(0),
                reward: t["reward"].as_f64().unwrap_or(0.0),
                predicted_reward: pred["reward"].as_f64(),
                predicted_turns: pred["turns"].as_u64(),
                advantage: r["advantages"][i].as_f64(),
                understanding: r["understanding"][i].as_f64(),
                reason: t["reason"].as_str().unwrap_or_default().to_string(),
            });
        }
    }
    Ok(out)
}

#[derive(Serialize)]
pub struct EpisodeSummary {
    pub channel: i64,
    pub channel_name: String,
    /// Local day, `YYYY-MM-DD`.
    pub day: String,
    pub first_message: i64,
    pub last_message: i64,
    pub messages: usize,
    pub subtasks: usize,
    pub mean_reward: Option<f64>,
    pub mean_advantage: Option<f64>,
    pub reward_override: Option<f32>,
    pub excluded: bool,
}

/// `YYYY-MM-DD` of a local day number (days since 1970-01-01).
fn civil(days: i64) -> String {
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, s) = v.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| s / n as f64)
}

/// Each channel's messages of each local day; `tz_offset_min` is the
/// browser's `Date.getTimezoneOffset()`.
#[tauri::command]
pub async fn list_episodes(
    app: State<'_, Arc<App>>,
    tz_offset_min: i64,
) -> Reply<Vec<EpisodeSummary>> {
    let tasks = subtasks(&app)?;
    let marks = app.store.review_marks()?;
    let mut out = Vec::new();
    for c in app.store.channels()? {
        let msgs = app.store.messages(c.id)?;
        let mut start = 0;
        while start < msgs.len() {
            let day = |ms: i64| (ms - tz_offset_min * 60_000).div_euclid(86_400_000);
            let d = day(msgs[start].created_ms);
            let mut end = start;
            while end + 1 < msgs.len() && day(msgs[end + 1].created_ms) == d {
                end += 1;
            }
            let (first, last) = (msgs[start].id.0, msgs[end].id.0);
            let inside: Vec<&SubTaskView> = tasks
                .get(&c.id.0)
                .map(|v| {
                    v.iter()
                        .filter(|t| t.first_message >= first && t.first_message <= last)
                        .collect()
                })
                .unwrap_or_default();
            let mark = marks.iter().find(|m| {
                m.channel == c.id.0 && m.first_message == first && m.last_message == last
            });
            out.push(EpisodeSummary {
                channel: c.id.0,
                channel_name: c.name.clone(),
                day: civil(d),
                first_message: first,
                last_message: last,
                messages: end + 1 - start,
                subtasks: inside.len(),
                mean_reward: mean(inside.iter().map(|t| t.reward)),
                mean_advantage: mean(inside.iter().filter_map(|t| t.advantage)),
                reward_override: mark.and_then(|m| m.reward),
                excluded: mark.is_some_and(|m| m.excluded),
            });
            start = end + 1;
        }
    }
    out.sort_by(|a, b| b.day.cmp(&a.day).then(a.channel_name.cmp(&b.channel_name)));
    Ok(out)
}

#[derive(Serialize)]
pub struct TokenView {
    pub piece: String,
    pub role: &'static str,
    /// The advantage training gives this token (action tokens of judged
    /// sub-tasks, and the token that ended a turn by mistake).
    pub advantage: Option<f64>,
}

#[derive(Serialize)]
pub struct EpisodeMessage {
    pub id: i64,
    pub role: &'static str,
    pub text: String,
    pub created_ms: i64,
    pub tokens: Vec<TokenView>,
}

#[derive(Serialize)]
pub struct EpisodeView {
    pub channel: i64,
    pub messages: Vec<EpisodeMessage>,
    pub subtasks: Vec<SubTaskView>,
    /// False when no model is loaded to turn token ids into text.
    pub token_text: bool,
}

#[tauri::command]
pub async fn episode(
    app: State<'_, Arc<App>>,
    channel: i64,
    first_message: i64,
    last_message: i64,
) -> Reply<EpisodeView> {
    let ch = ChannelId(channel);
    let msgs: Vec<_> = app
        .store
        .messages(ch)?
        .into_iter()
        .filter(|m| (first_message..=last_message).contains(&m.id.0))
        .collect();
    if msgs.is_empty() {
        return refuse(format!(
            "channel {channel} has no messages {first_message}..{last_message}"
        ));
    }
    let subs: Vec<SubTaskView> = subtasks(&app)?
        .remove(&channel)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.last_message >= first_message && t.first_message <= last_message)
        .collect();
    let stray: HashSet<i64> = app
        .store
        .unintended_ends(ch)?
        .into_iter()
        .map(|m| m.0)
        .collect();
    let engine = app.runtime().ok().map(|rt| rt.engine.clone());
    let mut messages = Vec::new();
    for m in msgs {
        let task_adv = subs
            .iter()
            .rev()
            .find(|t| (t.first_message..=t.last_message).contains(&m.id.0))
            .and_then(|t| t.advantage);
        let last_action = m.tokens.roles.iter().rposition(|r| *r == TokenRole::Action);
        let tokens = m
            .tokens
            .ids
            .iter()
            .zip(&m.tokens.roles)
            .enumerate()
            .map(|(i, (&id, &role))| {
                let mut advantage = (role == TokenRole::Action).then_some(task_adv).flatten();
                if stray.contains(&m.id.0) && Some(i) == last_action {
                    advantage = Some(advantage.unwrap_or(0.0) - 1.0);
                }
                TokenView {
                    piece: engine
                        .as_ref()
                        .map_or_else(|| format!("#{id} "), |e| e.detokenize(&[id], true)),
                    role: role.as_str(),
                    advantage,
                }
            })
            .collect();
        messages.push(EpisodeMessage {
            id: m.id.0,
            role: m.role.as_str(),
            text: m.text,
            created_ms: m.created_ms,
            tokens,
        });
    }
    Ok(EpisodeView {
        channel,
        messages,
        subtasks: subs,
        token_text: engine.is_some(),
    })
}

#[tauri::command]
pub async fn set_review_mark(
    app: State<'_, Arc<App>>,
    channel: i64,
    first_message: i64,
    last_message: i64,
    reward: Option<f32>,
    excluded: bool,
) -> Reply<()> {
    app.store.set_review_mark(
        ChannelId(channel),
        MessageId(first_message),
        MessageId(last_message),
        reward,
        excluded,
    )?;
    Ok(())
}

#[derive(Serialize)]
pub struct NightView {
    pub id: i64,
    pub started_ms: i64,
    pub finished_ms: Option<i64>,
    pub status: &'static str,
    pub stage: String,
    pub report: Value,
}

#[tauri::command]
pub async fn list_nights(app: State<'_, Arc<App>>) -> Reply<Vec<NightView>> {
    Ok(app
        .store
        .nights()?
        .into_iter()
        .map(|n| NightView {
            id: n.id,
            started_ms: n.started_ms,
            finished_ms: n.finished_ms,
            status: n.status.as_str(),
            stage: n.stage,
            report: n.report,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_days() {
        assert_eq!(super::civil(0), "1970-01-01");
        assert_eq!(super::civil(20_787), "2026-11-30");
        assert_eq!(super::civil(-1), "1969-12-31");
    }
}
