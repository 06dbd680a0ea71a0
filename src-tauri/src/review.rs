//! The reviewer: days of each channel as episodes, an episode with the
//! night's judgement of it and its tokens by role, marks for the next
//! night, and the night records.

use std::sync::Arc;

use reverie_core::{ChannelId, MessageId};
use reverie_night::episodes::{self, EpisodeSummary, SubTaskView};
use reverie_night::{NightConfig, NightReport};
use serde::Serialize;
use tauri::State;

use crate::failure::{refuse, Reply};
use crate::state::App;

/// Each channel's messages of each local day; `tz_offset_min` is the
/// browser's `Date.getTimezoneOffset()`.
#[tauri::command]
pub async fn list_episodes(
    app: State<'_, Arc<App>>,
    tz_offset_min: i64,
) -> Reply<Vec<EpisodeSummary>> {
    Ok(episodes::day_episodes(&app.store, tz_offset_min)?)
}

#[derive(Serialize)]
pub struct TokenView {
    pub piece: String,
    pub role: &'static str,
    /// The advantage training gives this token (`episodes::token_advantages`).
    pub advantage: Option<f32>,
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
    /// The tools the agent was told of in this episode.
    pub offered_tools: Vec<String>,
}

#[tauri::command]
pub async fn episode(
    app: State<'_, Arc<App>>,
    channel: i64,
    first_message: i64,
    last_message: i64,
) -> Reply<EpisodeView> {
    let ch = ChannelId(channel);
    let all = app.store.messages(ch)?;
    let offered_tools = episodes::offered_tools(&all, MessageId(last_message));
    let msgs: Vec<_> = all
        .into_iter()
        .filter(|m| (first_message..=last_message).contains(&m.id.0))
        .collect();
    if msgs.is_empty() {
        return refuse(format!(
            "channel {channel} has no messages {first_message}..{last_message}"
        ));
    }
    let subs: Vec<SubTaskView> = episodes::subtasks(&app.store)?
        .remove(&channel)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.last_message >= first_message && t.first_message <= last_message)
        .collect();
    let cfg = NightConfig::load(&app.home, None, &app.night_overrides())?;
    let mut advantages = episodes::token_advantages(&app.store, ch, &subs, &cfg)?;
    let engine = app.runtime().ok().map(|rt| rt.engine.clone());
    let mut messages = Vec::new();
    for m in msgs {
        let advs = advantages.remove(&m.id.0).unwrap_or_default();
        let tokens = m
            .tokens
            .ids
            .iter()
            .zip(&m.tokens.roles)
            .enumerate()
            .map(|(i, (&id, &role))| TokenView {
                piece: match (reverie_core::image_number(id), &engine) {
                    // An image's positions are embeddings, not text: the
                    // first names it, the rest are blank.
                    (Some(_), _) if i > 0 && m.tokens.ids[i - 1] == id => String::new(),
                    (Some(n), _) => format!("[image {n}]"),
                    (None, Some(e)) => e.detokenize(&[id], true),
                    (None, None) => format!("#{id} "),
                },
                role: role.as_str(),
                advantage: advs.get(i).copied().flatten(),
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
        offered_tools,
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
    pub report: NightReport,
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
            report: NightReport::from_json_or_empty(&n.report),
        })
        .collect())
}
