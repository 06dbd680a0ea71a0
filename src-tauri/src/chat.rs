//! Chat commands: channels, history, sending with a streamed reply, stop,
//! regenerate, edit and re-run, attachments, the system prompt.

use std::sync::Arc;

use base64::Engine as _;
use reverie_core::{ChatEvent, MessageId, MessageRole};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::failure::{refuse, Reply};
use crate::state::App;

#[derive(Serialize)]
pub struct ChannelView {
    pub id: i64,
    pub name: String,
    pub created_ms: i64,
    pub workspace: String,
}

#[derive(Serialize)]
pub struct ToolCallView {
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    pub result: Option<String>,
    pub ok: Option<bool>,
}

#[derive(Serialize)]
pub struct MessageView {
    pub id: i64,
    pub role: &'static str,
    pub text: String,
    pub created_ms: i64,
    pub tool_calls: Vec<ToolCallView>,
    /// The reply ended looking unfinished and the model said it was not done.
    pub stray_end: bool,
}

fn channel_view(c: reverie_store::Channel) -> ChannelView {
    ChannelView {
        id: c.id.0,
        name: c.name,
        created_ms: c.created_ms,
        workspace: c.workspace,
    }
}

fn channel_named(app: &App, name: &str) -> Reply<reverie_store::Channel> {
    match app.store.channel_by_name(name)? {
        Some(c) => Ok(c),
        None => refuse(format!("there is no channel named {name:?}")),
    }
}

fn check_name(name: &str) -> Reply<String> {
    let name = name.trim();
    if name.is_empty() || name.len() > 80 {
        return refuse("a channel name is 1 to 80 characters");
    }
    Ok(name.to_string())
}

#[tauri::command]
pub async fn list_channels(app: State<'_, Arc<App>>) -> Reply<Vec<ChannelView>> {
    Ok(app
        .store
        .channels()?
        .into_iter()
        .map(channel_view)
        .collect())
}

#[tauri::command]
pub async fn create_channel(app: State<'_, Arc<App>>, name: String) -> Reply<ChannelView> {
    let name = check_name(&name)?;
    let id = app.store.create_channel(&name)?;
    Ok(channel_view(app.store.channel(id)?))
}

#[tauri::command]
pub async fn rename_channel(app: State<'_, Arc<App>>, name: String, new_name: String) -> Reply<()> {
    let new_name = check_name(&new_name)?;
    let c = channel_named(&app, &name)?;
    if let Some(rt) = app.loaded() {
        rt.agent.reopen(&name);
    }
    app.store.rename_channel(c.id, &new_name)?;
    Ok(())
}

#[tauri::command]
pub async fn delete_channel(app: State<'_, Arc<App>>, name: String) -> Reply<()> {
    let c = channel_named(&app, &name)?;
    if let Some(rt) = app.loaded() {
        rt.agent.reopen(&name);
    }
    app.store.delete_channel(c.id)?;
    Ok(())
}

#[tauri::command]
pub async fn channel_history(app: State<'_, Arc<App>>, name: String) -> Reply<Vec<MessageView>> {
    let c = channel_named(&app, &name)?;
    let stray: std::collections::HashSet<i64> = app
        .store
        .unintended_ends(c.id)?
        .into_iter()
        .map(|m| m.0)
        .collect();
    let mut out = Vec::new();
    for m in app.store.messages(c.id)? {
        let tool_calls = app
            .store
            .tool_calls(m.id)?
            .into_iter()
            .map(|t| ToolCallView {
                call_id: t.call_id,
                name: t.name,
                arguments: t.arguments,
                result: t.result,
                ok: t.ok,
            })
            .collect();
        out.push(MessageView {
            id: m.id.0,
            role: m.role.as_str(),
            text: m.text,
            created_ms: m.created_ms,
            tool_calls,
            stray_end: stray.contains(&m.id.0),
        });
    }
    Ok(out)
}

#[derive(Serialize)]
pub struct SystemPromptView {
    /// The channel's own prompt; empty means the default.
    pub prompt: String,
    pub default_prompt: &'static str,
    /// The part the agent writes itself with `update_sys`.
    pub agent_section: String,
}

#[tauri::command]
pub async fn get_system_prompt(app: State<'_, Arc<App>>, name: String) -> Reply<SystemPromptView> {
    let c = channel_named(&app, &name)?;
    Ok(SystemPromptView {
        prompt: c.system_prompt,
        default_prompt: reverie_agent::DEFAULT_SYSTEM_PROMPT,
        agent_section: c.agent_section,
    })
}

#[tauri::command]
pub async fn set_system_prompt(
    app: State<'_, Arc<App>>,
    name: String,
    prompt: String,
    agent_section: String,
) -> Reply<()> {
    let c = channel_named(&app, &name)?;
    app.store.set_system_prompt(c.id, &prompt)?;
    app.store.set_agent_section(c.id, &agent_section)?;
    if let Some(rt) = app.loaded() {
        rt.agent.reopen(&name);
    }
    Ok(())
}

/// Queues `text` on the channel's agent; the reply streams to `on_event`.
/// While a night runs the message waits for the morning, and says so.
fn start_turn(app: &App, name: &str, text: String, on_event: Channel<ChatEvent>) -> Reply<()> {
    if text.trim().is_empty() {
        return refuse("the message is empty");
    }
    let id = app.store.ensure_channel(name)?;
    let rt = app.runtime()?;
    let params = app.settings().sampling;
    let waiting = app.night.waiter();
    let name = name.to_string();
    std::thread::spawn(move || {
        if let Some(wait) = waiting {
            let _ = on_event.send(ChatEvent::Notice {
                channel: id,
                text: "Reverie is asleep and training; your message is queued until it wakes up"
                    .into(),
            });
            wait();
        }
        let events = on_event.clone();
        let turn = rt.agent.send(&name, &text, &params, move |ev| {
            let _ = events.send(ev);
        });
        let result = turn.and_then(|t| t.wait());
        if let Err(e) = result {
            let _ = on_event.send(ChatEvent::Error {
                channel: id,
                message: e.to_string(),
            });
        }
    });
    Ok(())
}

#[tauri::command]
pub async fn send_message(
    app: State<'_, Arc<App>>,
    name: String,
    text: String,
    on_event: Channel<ChatEvent>,
) -> Reply<()> {
    start_turn(&app, &name, text, on_event)
}

#[tauri::command]
pub async fn stop_generation(app: State<'_, Arc<App>>, name: String) -> Reply<()> {
    if let Some(rt) = app.loaded() {
        rt.agent.cancel(&name);
    }
    Ok(())
}

/// Retracts the channel from `from` on and reopens its agent on what is left.
fn retract(app: &App, channel: &reverie_store::Channel, from: MessageId) -> Reply<()> {
    if let Some(rt) = app.loaded() {
        rt.agent.reopen(&channel.name);
    }
    app.store.retract_from(channel.id, from)?;
    Ok(())
}

/// Takes back the last reply and asks the same question again.
#[tauri::command]
pub async fn regenerate(
    app: State<'_, Arc<App>>,
    name: String,
    on_event: Channel<ChatEvent>,
) -> Reply<()> {
    let c = channel_named(&app, &name)?;
    let msgs = app.store.messages(c.id)?;
    let Some(last_user) = msgs.iter().rev().find(|m| m.role == MessageRole::User) else {
        return refuse("there is no message to answer again in this channel");
    };
    let text = last_user.text.clone();
    retract(&app, &c, last_user.id)?;
    start_turn(&app, &name, text, on_event)
}

/// Replaces one of the person's messages (and everything after it) and runs
/// the conversation again from there. The old messages stay in the
/// database, retracted.
#[tauri::command]
pub async fn edit_message(
    app: State<'_, Arc<App>>,
    name: String,
    message: i64,
    text: String,
    on_event: Channel<ChatEvent>,
) -> Reply<()> {
    let c = channel_named(&app, &name)?;
    let msgs = app.store.messages(c.id)?;
    match msgs.iter().find(|m| m.id.0 == message) {
        Some(m) if m.role == MessageRole::User => {}
        Some(_) => return refuse("only your own messages can be edited"),
        None => return refuse(format!("message {message} is not in channel {name:?}")),
    }
    if text.trim().is_empty() {
        return refuse("the message is empty");
    }
    retract(&app, &c, MessageId(message))?;
    start_turn(&app, &name, text, on_event)
}

#[derive(Serialize)]
pub struct SavedAttachment {
    /// Where the agent finds it, relative to the channel's workspace.
    pub path: String,
    pub bytes: usize,
}

/// Where an attached file goes: `attachments/` in the workspace, under its
/// own name (folders and control characters taken out), numbered when the
/// name is taken.
fn attachment_path(workspace: &std::path::Path, file_name: &str) -> Reply<std::path::PathBuf> {
    let safe: String = std::path::Path::new(file_name)
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
        .chars()
        .map(|ch| if ch.is_control() { '_' } else { ch })
        .collect();
    if safe.is_empty() || safe.starts_with('.') {
        return refuse(format!(
            "{file_name:?} is not a usable file name; rename the file"
        ));
    }
    let dir = workspace.join("attachments");
    std::fs::create_dir_all(&dir)?;
    let (stem, ext) = match safe.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s.to_string(), format!(".{e}")),
        _ => (safe.clone(), String::new()),
    };
    let mut target = dir.join(&safe);
    let mut n = 1;
    while target.exists() {
        n += 1;
        target = dir.join(format!("{stem}-{n}{ext}"));
    }
    Ok(target)
}

/// Saves a file the person attached into the channel's workspace under
/// `attachments/`, where the agent's tools can read it.
#[tauri::command]
pub async fn save_attachment(
    app: State<'_, Arc<App>>,
    name: String,
    file_name: String,
    data_base64: String,
) -> Reply<SavedAttachment> {
    let c = channel_named(&app, &name)?;
    let bytes = match base64::engine::general_purpose::STANDARD.decode(data_base64.as_bytes()) {
        Ok(b) => b,
        Err(e) => return refuse(format!("the attachment is not valid base64: {e}")),
    };
    let workspace = if c.workspace.is_empty() {
        app.services.default_workspace(c.id)
    } else {
        std::path::PathBuf::from(&c.workspace)
    };
    let target = attachment_path(&workspace, &file_name)?;
    let dir = target.parent().expect("inside attachments/").to_path_buf();
    let tmp = dir.join(format!(
        ".{}.partial",
        target.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, &bytes)?;
    std::fs::rename(&tmp, &target)?;
    Ok(SavedAttachment {
        path: format!(
            "attachments/{}",
            target.file_name().unwrap().to_string_lossy()
        ),
        bytes: bytes.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachments_keep_their_name_inside_the_workspace_and_never_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let first = attachment_path(dir.path(), "../../etc/report.pdf").unwrap();
        assert_eq!(first, dir.path().join("attachments/report.pdf"));
        std::fs::write(&first, b"x").unwrap();
        let second = attachment_path(dir.path(), "report.pdf").unwrap();
        assert_eq!(second, dir.path().join("attachments/report-2.pdf"));
        let odd = attachment_path(dir.path(), "a\nb.txt").unwrap();
        assert_eq!(odd.file_name().unwrap(), "a_b.txt");
    }

    #[test]
    fn unusable_names_are_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["", "..", ".hidden", "/"] {
            let e = attachment_path(dir.path(), bad).unwrap_err();
            assert!(e.0.contains("rename the file"), "{bad:?}: {}", e.0);
        }
        assert!(check_name("  ").is_err());
        assert!(check_name(&"x".repeat(81)).is_err());
        assert_eq!(check_name(" ideas ").unwrap(), "ideas");
    }
}
