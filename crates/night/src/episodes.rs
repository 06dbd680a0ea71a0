//! The day as the reviewer shows it: each channel's messages of one local
//! day as an episode, the sub-tasks nights found in it, and the advantage
//! each token trained with — computed by the same functions the night
//! trains with (`dataset::message_marks`), so what is shown is what trained.

use std::collections::HashMap;

use reverie_core::{ChannelId, Message, TokenRole};
use reverie_store::{Store, StoreError};
use serde::Serialize;

use crate::config::NightConfig;
use crate::dataset::{message_marks, MessageFlags};
use crate::report::NightReport;

/// One sub-task as a night judged it, with message ids instead of indices.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubTaskView {
    pub night: i64,
    pub description: String,
    pub first_message: i64,
    pub last_message: i64,
    pub turns: u32,
    pub reward: f32,
    pub predicted_reward: Option<f32>,
    pub predicted_turns: Option<u32>,
    pub advantage: Option<f32>,
    pub understanding: Option<f32>,
    pub reason: String,
    /// The judge's grade where the person's rating set `reward`.
    pub judged_reward: Option<f32>,
    /// The person's 👍 (`true`) or 👎 (`false`) on the reply that ends it.
    pub feedback: Option<bool>,
    /// What the judge was shown beyond the messages and asked for.
    pub evidence: Vec<String>,
}

/// Every sub-task every night found, by channel id.
pub fn subtasks(store: &Store) -> Result<HashMap<i64, Vec<SubTaskView>>, StoreError> {
    let mut ids: HashMap<i64, Vec<i64>> = HashMap::new();
    let mut out: HashMap<i64, Vec<SubTaskView>> = HashMap::new();
    for n in store.nights()? {
        let r = NightReport::from_json_or_empty(&n.report);
        for (i, t) in r.tasks.iter().enumerate() {
            // A reply taken back is not in the transcript the reviewer shows.
            if !t.taken_back.is_empty() {
                continue;
            }
            let channel_ids = ids.entry(t.channel).or_insert_with(|| {
                store
                    .messages(ChannelId(t.channel))
                    .map(|ms| ms.iter().map(|m| m.id.0).collect())
                    .unwrap_or_default()
            });
            let (Some(&first), Some(&last)) = (channel_ids.get(t.first), channel_ids.get(t.last))
            else {
                continue;
            };
            let pred = r.predictions.get(i).and_then(Option::as_ref);
            out.entry(t.channel).or_default().push(SubTaskView {
                night: n.id,
                description: t.description.clone(),
                first_message: first,
                last_message: last,
                turns: t.turns,
                reward: t.reward,
                predicted_reward: pred.map(|p| p.reward),
                predicted_turns: pred.map(|p| p.turns),
                advantage: r.advantages.get(i).copied().flatten(),
                understanding: r.understanding.get(i).copied().flatten(),
                reason: t.reason.clone(),
                judged_reward: t.judged,
                feedback: t.feedback,
                evidence: t.evidence.clone(),
            });
        }
    }
    Ok(out)
}

/// One channel's messages of one local day.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Each channel's messages of each local day, newest day first;
/// `tz_offset_min` is minutes behind UTC (a browser's
/// `Date.getTimezoneOffset()`).
pub fn day_episodes(store: &Store, tz_offset_min: i64) -> Result<Vec<EpisodeSummary>, StoreError> {
    let tasks = subtasks(store)?;
    let marks = store.review_marks()?;
    let day = |ms: i64| (ms - tz_offset_min * 60_000).div_euclid(86_400_000);
    let mut out = Vec::new();
    for c in store.channels()? {
        let msgs = store.messages(c.id)?;
        for (start, end) in runs_of_days(&msgs, day) {
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
                day: civil(day(msgs[start].created_ms)),
                first_message: first,
                last_message: last,
                messages: end + 1 - start,
                subtasks: inside.len(),
                mean_reward: mean(inside.iter().map(|t| t.reward as f64)),
                mean_advantage: mean(inside.iter().filter_map(|t| t.advantage.map(f64::from))),
                reward_override: mark.and_then(|m| m.reward),
                excluded: mark.is_some_and(|m| m.excluded),
            });
        }
    }
    out.sort_by(|a, b| b.day.cmp(&a.day).then(a.channel_name.cmp(&b.channel_name)));
    Ok(out)
}

/// `(first, last)` indices of each run of messages on the same `day`.
fn runs_of_days(msgs: &[Message], day: impl Fn(i64) -> i64) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = 0;
    while start < msgs.len() {
        let d = day(msgs[start].created_ms);
        let mut end = start;
        while end + 1 < msgs.len() && day(msgs[end + 1].created_ms) == d {
            end += 1;
        }
        runs.push((start, end));
        start = end + 1;
    }
    runs
}

/// The advantage each token of a channel's messages trained with, by
/// message id: a sub-task's advantage on its action tokens plus the
/// night's per-token marks; `None` for tokens no night trained. The
/// sub-task of a message is the latest of `subtasks` that holds it.
pub fn token_advantages(
    store: &Store,
    channel: ChannelId,
    subtasks: &[SubTaskView],
    cfg: &NightConfig,
) -> Result<HashMap<i64, Vec<Option<f32>>>, StoreError> {
    let msgs = store.messages(channel)?;
    let flags = MessageFlags::of(store, channel)?;
    let mut out = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        let task_adv = subtasks
            .iter()
            .rev()
            .find(|t| (t.first_message..=t.last_message).contains(&m.id.0))
            .and_then(|t| t.advantage);
        let mut advs: Vec<Option<f32>> = m
            .tokens
            .roles
            .iter()
            .map(|&r| task_adv.filter(|_| r == TokenRole::Action))
            .collect();
        if task_adv.is_some() {
            for (k, mark) in message_marks(&msgs, i, &flags, cfg) {
                advs[k] = Some(advs[k].unwrap_or(0.0) + mark);
            }
        }
        out.insert(m.id.0, advs);
    }
    Ok(out)
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01).
/// The tools the agent was offered for the message `upto`: the ones
/// listed in the channel's last system prompt at or before it (the
/// definitions are rendered there one JSON object a line).
pub fn offered_tools(messages: &[Message], upto: reverie_core::MessageId) -> Vec<String> {
    let Some(system) = messages
        .iter()
        .rfind(|m| m.id <= upto && m.role == reverie_core::MessageRole::System)
    else {
        return Vec::new();
    };
    system
        .text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .filter_map(|v| {
            v["function"]["name"]
                .as_str()
                .or(v["name"].as_str())
                .map(String::from)
        })
        .collect()
}

pub fn civil(days: i64) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::{Home, MessageRole, TokenSpan};

    #[test]
    fn civil_days() {
        assert_eq!(civil(0), "1970-01-01");
        assert_eq!(civil(20_787), "2026-11-30");
        assert_eq!(civil(-1), "1969-12-31");
    }

    #[test]
    fn messages_split_into_runs_of_one_day() {
        let msg = |ms| Message {
            id: reverie_core::MessageId(0),
            channel: ChannelId(1),
            role: MessageRole::User,
            text: String::new(),
            created_ms: ms,
            tokens: TokenSpan::default(),
        };
        let day = |ms: i64| ms.div_euclid(86_400_000);
        let msgs = [msg(0), msg(1_000), msg(86_400_000), msg(3 * 86_400_000 + 5)];
        assert_eq!(runs_of_days(&msgs, day), [(0, 1), (2, 2), (3, 3)]);
        assert!(runs_of_days(&[], day).is_empty());
    }

    /// The reviewer shows the marks the night trains with: the repeated
    /// call's tokens share its mark and a stray end adds the configured
    /// advantage, both on top of the sub-task's advantage.
    #[test]
    fn the_token_view_shows_what_the_night_trains() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let ch = store.create_channel("c").unwrap();
        let add = |role, text: &str, roles: &[TokenRole]| {
            let mut s = TokenSpan::default();
            for (k, &r) in roles.iter().enumerate() {
                s.push(k as i32, r, (r == TokenRole::Action).then_some(-0.1));
            }
            store.append_message(ch, role, text, &s).unwrap()
        };
        let (a, c) = (TokenRole::Action, TokenRole::Context);
        let call = r#"{"name": "calculator", "arguments": {"expression": "2+2"}}"#;
        let hint = "2+2 = 4\n\n(Same call and result as earlier in this turn: use it and answer.)";
        let user = add(MessageRole::User, "2+2?", &[TokenRole::User]);
        let first = add(MessageRole::Assistant, call, &[c, a, a]);
        add(MessageRole::Tool, "2+2 = 4", &[TokenRole::Env]);
        let repeated = add(MessageRole::Assistant, call, &[c, a, a]);
        for reply in [first, repeated] {
            store
                .record_tool_call(reply, "call_1", "calculator", "{}")
                .unwrap();
            store
                .finish_tool_call(reply, "call_1", true, "2+2 = 4")
                .unwrap();
        }
        store.mark_repeated_call(repeated, "call_1").unwrap();
        add(MessageRole::Tool, hint, &[TokenRole::Env]);
        let early = add(MessageRole::Assistant, "Here:", &[c, a, a]);
        store.record_stray_end(early, true).unwrap();
        let view = SubTaskView {
            night: 1,
            description: "add".into(),
            first_message: user.0,
            last_message: early.0,
            turns: 1,
            reward: 1.0,
            predicted_reward: None,
            predicted_turns: None,
            advantage: Some(0.5),
            understanding: None,
            reason: String::new(),
            judged_reward: None,
            feedback: None,
            evidence: Vec::new(),
        };
        let cfg = NightConfig {
            repeated_call_advantage: -0.5,
            stray_end_advantage: -1.0,
            ..NightConfig::default()
        };
        let advs = token_advantages(&store, ch, std::slice::from_ref(&view), &cfg).unwrap();
        assert_eq!(advs[&repeated.0], [None, Some(0.25), Some(0.25)]);
        assert_eq!(advs[&early.0], [None, Some(0.5), Some(-0.5)]);
        assert_eq!(advs[&user.0], [None]);
        // Outside any trained sub-task nothing trained, marks included.
        let untrained = SubTaskView {
            advantage: None,
            ..view
        };
        let advs = token_advantages(&store, ch, &[untrained], &cfg).unwrap();
        assert!(advs.values().flatten().all(Option::is_none));
    }

    #[test]
    fn the_offered_tools_are_read_from_the_system_prompt_in_force() {
        use reverie_core::{ChannelId, MessageId, MessageRole, TokenSpan};
        let defs = |names: &[&str]| -> Vec<serde_json::Value> {
            names
                .iter()
                .map(|n| serde_json::json!({"type": "function", "function": {"name": n, "parameters": {}}}))
                .collect()
        };
        let msg = |id: i64, role, text: String| Message {
            id: MessageId(id),
            channel: ChannelId(1),
            role,
            text,
            created_ms: 0,
            tokens: TokenSpan::default(),
        };
        let first = reverie_infer::system_with_tools(
            None,
            "Be brief.",
            &defs(&["calculator", "read_file"]),
        );
        let later =
            reverie_infer::system_with_tools(Some("<tools>"), "Be brief.", &defs(&["notes"]));
        let messages = vec![
            msg(1, MessageRole::System, first),
            msg(2, MessageRole::User, "17 * 3?".into()),
            msg(3, MessageRole::System, later),
            msg(4, MessageRole::User, "note it".into()),
        ];
        assert_eq!(
            offered_tools(&messages, MessageId(2)),
            ["calculator", "read_file"]
        );
        assert_eq!(offered_tools(&messages, MessageId(4)), ["notes"]);
        assert!(offered_tools(&messages[1..2], MessageId(2)).is_empty());
    }
}
