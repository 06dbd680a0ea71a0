//! The API's traffic as channels the nights learn from: each conversation a
//! client holds becomes a channel named `api-N`, with the tokens the model
//! was fed (as context) and the reply it sampled (as actions, with their
//! log-probs), so the night judges and trains on it like any day channel.
//!
//! A request continues a channel when its user messages extend the
//! channel's and it carries back every reply the channel recorded; its new
//! messages are appended, the first holding the prompt tokens beyond what
//! the channel already holds. Where the client's rendering of the history
//! does not extend the recorded tokens, the channel's live context starts
//! again with a system message holding the whole prompt, so what the night
//! trains on is always exactly what the model saw.

use std::sync::Mutex;

use reverie_core::{live_start, ChannelId, Message, MessageRole, TokenRole, TokenSpan};
use reverie_infer::{ChatMessage, Completion};
use reverie_store::{Store, StoreError};

/// Where the API records, one exchange at a time.
pub struct Recorder {
    store: std::sync::Arc<Store>,
    /// Two requests of one conversation must not both start a channel.
    one_at_a_time: Mutex<()>,
}

/// What a request sent and what the model was fed.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub messages: Vec<ChatMessage>,
    pub prompt: Vec<i32>,
}

/// A request's messages in OpenAI's shape as role and text: text parts
/// joined, a reply's calls as their JSON (what the judge reads), the
/// `developer` role as `system`; anything else is left out.
pub fn messages_of(openai: &[serde_json::Value]) -> Vec<ChatMessage> {
    openai
        .iter()
        .filter_map(|m| {
            let role = match m.get("role")?.as_str()? {
                "developer" => MessageRole::System,
                r => r.parse().ok()?,
            };
            let content = match m.get("content") {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            let content = match m.get("tool_calls") {
                Some(calls) if content.is_empty() => calls.to_string(),
                _ => content,
            };
            Some(ChatMessage::new(role, content))
        })
        .collect()
}

/// The prefix of every API channel's name.
pub const PREFIX: &str = "api-";

fn span(ids: &[i32], role: TokenRole) -> TokenSpan {
    let mut s = TokenSpan::default();
    s.extend_role(ids, role);
    s
}

fn user_texts<'a>(roles_texts: impl Iterator<Item = (MessageRole, &'a str)>) -> Vec<&'a str> {
    roles_texts
        .filter(|(r, _)| *r == MessageRole::User)
        .map(|(_, t)| t)
        .collect()
}

impl Recorder {
    pub fn new(store: std::sync::Arc<Store>) -> Recorder {
        Recorder {
            store,
            one_at_a_time: Mutex::new(()),
        }
    }

    /// Records `ex` and its `reply`; returns the channel.
    pub fn record(&self, ex: &Exchange, reply: &Completion) -> Result<ChannelId, StoreError> {
        let _one = self.one_at_a_time.lock().unwrap_or_else(|p| p.into_inner());
        let asked = user_texts(ex.messages.iter().map(|m| (m.role, m.content.as_str())));
        let replies_sent = ex
            .messages
            .iter()
            .filter(|m| m.role == MessageRole::Assistant)
            .count();
        let mut best: Option<(ChannelId, Vec<Message>, usize)> = None;
        for ch in self.store.channels()? {
            if !ch.name.starts_with(PREFIX) {
                continue;
            }
            let stored = self.store.messages(ch.id)?;
            let had = user_texts(stored.iter().map(|m| (m.role, m.text.as_str())));
            let replies = stored
                .iter()
                .filter(|m| m.role == MessageRole::Assistant)
                .count();
            let continues = !had.is_empty()
                && asked.starts_with(&had)
                && replies == replies_sent
                && best.as_ref().is_none_or(|b| had.len() > b.2);
            if continues {
                let n = had.len();
                best = Some((ch.id, stored, n));
            }
        }
        let ch = match best {
            Some((ch, stored, _)) => {
                self.append(ch, &stored, ex)?;
                ch
            }
            None => {
                let ch = self.new_channel()?;
                self.restart(ch, ex, &ex.messages)?;
                ch
            }
        };
        let mut actions = TokenSpan::default();
        for (&id, &lp) in reply.ids.iter().zip(&reply.logprobs) {
            actions.push(id, TokenRole::Action, Some(lp));
        }
        self.store
            .append_message(ch, MessageRole::Assistant, &reply.text, &actions)?;
        Ok(ch)
    }

    fn new_channel(&self) -> Result<ChannelId, StoreError> {
        let taken: Vec<String> = self.store.channels()?.into_iter().map(|c| c.name).collect();
        let n = (1..)
            .find(|n| !taken.contains(&format!("{PREFIX}{n}")))
            .expect("a free name");
        self.store.create_channel(&format!("{PREFIX}{n}"))
    }

    /// Appends the messages of `ex` after those `stored` holds.
    fn append(&self, ch: ChannelId, stored: &[Message], ex: &Exchange) -> Result<(), StoreError> {
        // The request's messages after the last reply it carried back.
        let after = ex
            .messages
            .iter()
            .rposition(|m| m.role == MessageRole::Assistant)
            .map_or(0, |i| i + 1);
        let new = &ex.messages[after..];
        let live = &stored[live_start(stored)..];
        let held: Vec<i32> = live.iter().flat_map(|m| m.tokens.ids.clone()).collect();
        if held.is_empty() || !ex.prompt.starts_with(&held) {
            return self.restart(ch, ex, new);
        }
        let delta = span(&ex.prompt[held.len()..], TokenRole::Context);
        for (i, m) in new.iter().enumerate() {
            let tokens = if i == 0 {
                delta.clone()
            } else {
                TokenSpan::default()
            };
            self.store.append_message(ch, m.role, &m.content, &tokens)?;
        }
        if new.is_empty() {
            self.store
                .append_message(ch, MessageRole::User, "(the client asked again)", &delta)?;
        }
        Ok(())
    }

    /// Starts the live context again: a system message holding the whole
    /// prompt as context, then `messages` (their tokens are in it).
    fn restart(
        &self,
        ch: ChannelId,
        ex: &Exchange,
        messages: &[ChatMessage],
    ) -> Result<(), StoreError> {
        let system = ex
            .messages
            .iter()
            .find(|m| m.role == MessageRole::System)
            .map_or("(the conversation as the client sent it)", |m| {
                m.content.as_str()
            });
        self.store.append_message(
            ch,
            MessageRole::System,
            system,
            &span(&ex.prompt, TokenRole::Context),
        )?;
        for m in messages.iter().filter(|m| m.role != MessageRole::System) {
            self.store
                .append_message(ch, m.role, &m.content, &TokenSpan::default())?;
        }
        Ok(())
    }
}
