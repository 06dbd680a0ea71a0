//! Chat commands: channels, history, sending with a streamed reply, stop,
//! regenerate, edit and re-run, attachments, the system prompt.

use std::sync::Arc;

use base64::Engine as _;
use reverie_core::{ChatEvent, MessageId};
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
    /// Files the call showed in the chat.
    pub attachments: Vec<reverie_store::CallAttachment>,
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
    /// The person's 👍 (`true`) or 👎 (`false`) on this reply, if any.
    pub feedback: Option<bool>,
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
    let id = app.store.create_channel(&name)?;
    Ok(channel_view(app.store.channel(id)?))
}

#[tauri::command]
pub async fn rename_channel(app: State<'_, Arc<App>>, name: String, new_name: String) -> Reply<()> {
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
    let rated: std::collections::HashMap<i64, bool> = app
        .store
        .feedback(c.id)?
        .into_iter()
        .map(|f| (f.message.0, f.good))
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
                attachments: t.attachments,
            })
            .collect();
        out.push(MessageView {
            id: m.id.0,
            role: m.role.as_str(),
            text: m.text,
            created_ms: m.created_ms,
            tool_calls,
            stray_end: stray.contains(&m.id.0),
            feedback: rated.get(&m.id.0).copied(),
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

/// The person's 👍 (`good: true`), 👎 (`false`) or no rating (`null`) on
/// one of the agent's replies: the next night takes it as that sub-task's
/// reward.
#[tauri::command]
pub async fn rate_reply(
    app: State<'_, Arc<App>>,
    name: String,
    message: i64,
    good: Option<bool>,
) -> Reply<()> {
    let c = channel_named(&app, &name)?;
    app.store.set_feedback(c.id, MessageId(message), good)?;
    Ok(())
}

/// Opens a link from a reply in the system's browser (the window has
/// confirmed it with the person). Only web and mail links.
#[tauri::command]
pub async fn open_link(url: String) -> Reply<()> {
    if !openable(&url) {
        return refuse(format!(
            "{url:?} is not a web or mail link; only those are opened"
        ));
    }
    let mut child = std::process::Command::new("xdg-open")
        .arg(&url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| crate::failure::Failure(format!("opening the browser (xdg-open): {e}")))?;
    // Reaped in the background; xdg-open hands the link over and exits.
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// How full a channel's context is.
#[derive(Serialize)]
pub struct ContextView {
    /// Tokens of the conversation so far.
    pub used: u64,
    /// Tokens the model is run with.
    pub size: u32,
}

/// Tokens used and the context size, for the chat header's meter.
#[tauri::command]
pub async fn context_usage(app: State<'_, Arc<App>>, name: String) -> Reply<ContextView> {
    let c = channel_named(&app, &name)?;
    Ok(ContextView {
        used: app.store.context_tokens(c.id)?,
        size: app.context_size(),
    })
}

/// A web or mail link, with nothing a command line could misread.
fn openable(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["https://", "http://", "mailto:"]
        .iter()
        .any(|p| lower.starts_with(p))
        && !url.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// Takes back the last reply and asks the same question again.
#[tauri::command]
pub async fn regenerate(
    app: State<'_, Arc<App>>,
    name: String,
    on_event: Channel<ChatEvent>,
) -> Reply<()> {
    let text = app.runtime()?.agent.take_back_last_question(&name)?;
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
    app.runtime()?
        .agent
        .take_back_for_edit(&name, MessageId(message), &text)?;
    start_turn(&app, &name, text, on_event)
}

#[derive(Serialize)]
pub struct SavedAttachment {
    /// Where the agent finds it, relative to the channel's workspace.
    pub path: String,
    pub bytes: usize,
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
    let workspace = reverie_tools::Workspace::open(&workspace)?;
    let path = reverie_tools::attachments::save_attachment(&workspace, &file_name, &bytes)?;
    Ok(SavedAttachment {
        path,
        bytes: bytes.len(),
    })
}

/// The largest image the chat shows inline.
const MAX_INLINE_IMAGE: usize = 20 << 20;

/// A stored image as a `data:` URL the chat shows inline. Only images: any
/// other blob is refused, so the window cannot read arbitrary stored files.
#[tauri::command]
pub async fn image_data(app: State<'_, Arc<App>>, blob: String) -> Reply<String> {
    if blob.len() != 64 || !blob.bytes().all(|b| b.is_ascii_hexdigit()) {
        return refuse(format!("{blob:?} is not a blob hash"));
    }
    let bytes = app
        .store
        .blob(&reverie_store::BlobHash(blob.to_ascii_lowercase()))?;
    if bytes.len() > MAX_INLINE_IMAGE {
        return refuse("the image is too large to show inline");
    }
    let Some(kind) = reverie_tools::image_kind(&bytes) else {
        return refuse("the attachment is not an image");
    };
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(format!("data:image/{kind};base64,{data}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_web_and_mail_links_open() {
        for ok in [
            "https://example.org/a?b=c",
            "http://localhost:8080",
            "MAILTO:me@example.org",
        ] {
            assert!(super::openable(ok), "{ok}");
        }
        for bad in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "--help",
            "https://a b",
            "https://a\nb",
            "/tmp/x",
        ] {
            assert!(!super::openable(bad), "{bad}");
        }
    }
}
