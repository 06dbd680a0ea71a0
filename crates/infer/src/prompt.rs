//! Chat messages rendered through the model's template into tokens that carry
//! roles, kept as a token-exact transcript per channel.

use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use reverie_core::{MessageRole, TokenRole, TokenSpan};
use serde::{Deserialize, Serialize};

use crate::error::InferError;

/// A message as the chat template sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: MessageRole,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: MessageRole, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
        }
    }
}

/// One channel's conversation exactly as the model saw it: the messages, the
/// tokens fed and produced (with roles and log-probs), and the template text
/// those tokens stand for. Extending it only ever appends tokens, so the KV
/// cache of a previous turn stays valid.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    pub messages: Vec<ChatMessage>,
    pub tokens: TokenSpan,
    rendered: String,
}

impl Transcript {
    /// The template text the tokens stand for.
    pub fn rendered(&self) -> &str {
        &self.rendered
    }

    /// Rebuilds a transcript from stored messages and their tokens.
    pub fn restore(messages: Vec<ChatMessage>, tokens: TokenSpan, rendered: String) -> Self {
        Transcript {
            messages,
            tokens,
            rendered,
        }
    }

    pub(crate) fn push_reply(&mut self, text: &str, span: &TokenSpan, rendered_piece: &str) {
        self.messages
            .push(ChatMessage::new(MessageRole::Assistant, text));
        self.tokens.append(span);
        self.rendered.push_str(rendered_piece);
    }
}

/// The role a message's own text gets for training.
pub fn token_role(role: MessageRole) -> TokenRole {
    match role {
        MessageRole::User => TokenRole::User,
        MessageRole::Tool => TokenRole::Env,
        // Assistant text given as input was not sampled here: conditioning only.
        MessageRole::System | MessageRole::Assistant => TokenRole::Context,
    }
}

/// The model's own template, or ChatML for models without one (base models).
fn template(model: &LlamaModel) -> Result<LlamaChatTemplate, InferError> {
    match model.chat_template(None) {
        Ok(t) => Ok(t),
        Err(_) => LlamaChatTemplate::new("chatml").map_err(|e| InferError::Template(e.to_string())),
    }
}

/// How a message reaches llama.cpp's template: Hermes/Qwen templates wrap a
/// tool result in `<tool_response>` inside a user turn (llama.cpp's built-in
/// ChatML would write a `tool` turn the model never saw in training).
fn as_template_message(m: &ChatMessage, wrap_tool_results: bool) -> (String, String) {
    if m.role == MessageRole::Tool && wrap_tool_results {
        let wrapped = format!("<tool_response>\n{}\n</tool_response>", m.content);
        return ("user".to_string(), wrapped);
    }
    (m.role.as_str().to_string(), m.content.clone())
}

fn wraps_tool_results(model: &LlamaModel) -> bool {
    model
        .meta_val_str("tokenizer.chat_template")
        .is_ok_and(|t| t.contains("<tool_response>"))
}

/// The template text of `messages`, as llama.cpp renders it for this model.
pub fn render_chat(
    model: &LlamaModel,
    messages: &[ChatMessage],
    add_generation_prompt: bool,
) -> Result<String, InferError> {
    render(model, &template(model)?, messages, add_generation_prompt)
}

fn render(
    model: &LlamaModel,
    tmpl: &LlamaChatTemplate,
    messages: &[ChatMessage],
    add_generation_prompt: bool,
) -> Result<String, InferError> {
    let wrap = wraps_tool_results(model);
    let chat = messages
        .iter()
        .map(|m| {
            let (role, content) = as_template_message(m, wrap);
            LlamaChatMessage::new(role, content)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| InferError::Template(format!("message contains a NUL byte: {e}")))?;
    model
        .apply_chat_template(tmpl, &chat, add_generation_prompt)
        .map_err(|e| InferError::Template(e.to_string()))
}

/// Token ids of `text`; `add_special` adds BOS where the model wants it,
/// `special` lets control-token text become control tokens.
pub fn tokenize(model: &LlamaModel, text: &str, add_special: bool, special: bool) -> Vec<i32> {
    model
        .vocab()
        .tokenize(text.as_bytes(), add_special, special)
        .into_iter()
        .map(|t| t.0)
        .collect()
}

fn push_text(model: &LlamaModel, span: &mut TokenSpan, text: &str, role: TokenRole, special: bool) {
    if !text.is_empty() {
        span.extend_role(&tokenize(model, text, false, special), role);
    }
}

/// Appends `new` messages (and, if asked, the assistant prompt) to `t`,
/// returning the tokens added. Template scaffolding is tokenized with special
/// tokens allowed and tagged `context`; message text is tokenized as plain
/// text (a user cannot inject control tokens) and tagged by its role.
pub fn extend(
    model: &LlamaModel,
    t: &mut Transcript,
    new: &[ChatMessage],
    add_generation_prompt: bool,
) -> Result<TokenSpan, InferError> {
    let tmpl = template(model)?;
    let mut all = t.messages.clone();
    all.extend_from_slice(new);
    let full = render(model, &tmpl, &all, add_generation_prompt)?;
    let (delta, rendered) = match full.strip_prefix(t.rendered.as_str()) {
        Some(rest) => (rest.to_string(), full.clone()),
        None => {
            // The template rewrote earlier text (e.g. trimmed a reply); the
            // tokens already fed stay as they are and only the new messages
            // are rendered.
            tracing::info!(
                "chat template re-rendered history differently; appending new messages only"
            );
            let delta = render(model, &tmpl, new, add_generation_prompt)?;
            (delta.clone(), format!("{}{}", t.rendered, delta))
        }
    };
    let mut span = TokenSpan::default();
    let vocab = model.vocab();
    if t.tokens.is_empty() && vocab.should_add_bos() {
        span.push(vocab.bos().0, TokenRole::Context, None);
    }
    let mut cursor = 0;
    for m in new.iter().filter(|m| !m.content.is_empty()) {
        if let Some(off) = delta[cursor..].find(&m.content) {
            let start = cursor + off;
            push_text(
                model,
                &mut span,
                &delta[cursor..start],
                TokenRole::Context,
                true,
            );
            push_text(model, &mut span, &m.content, token_role(m.role), false);
            cursor = start + m.content.len();
        }
    }
    push_text(model, &mut span, &delta[cursor..], TokenRole::Context, true);
    t.messages.extend_from_slice(new);
    t.tokens.append(&span);
    t.rendered = rendered;
    Ok(span)
}
