//! Chat messages rendered through the model's template into tokens that carry
//! roles, kept as a token-exact transcript per channel.

use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use reverie_core::{MessageRole, TokenRole, TokenSpan};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat_format::ChatRequest;
use crate::error::InferError;
use crate::model::LoadedModel;

/// A message as the chat template sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: MessageRole,
    pub content: String,
    /// Images the model sees after the message's text (multimodal models).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRun>,
}

/// One image in a message: its number in the store and how many positions
/// the projector gives it ([`crate::Engine::image_positions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRun {
    pub number: u32,
    pub positions: usize,
}

impl ChatMessage {
    pub fn new(role: MessageRole, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            images: Vec::new(),
        }
    }

    /// The message with `image` after its text.
    pub fn with_image(mut self, image: ImageRun) -> Self {
        self.images.push(image);
        self
    }

    /// The message in OpenAI's shape, as llama.cpp's chat layer reads it.
    /// A reply keeps its own text (calls included) so that the template
    /// renders exactly what was sampled.
    pub fn to_openai(&self) -> Value {
        serde_json::json!({"role": self.role.as_str(), "content": self.content})
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
    /// Tool definitions (OpenAI's shape) the template renders with the
    /// messages, where the model's own template describes tools.
    pub tools: Vec<Value>,
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
            tools: Vec::new(),
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

/// The template text of `messages` (with `tools`, where the template
/// renders them), as llama.cpp renders it for this model.
pub fn render_chat(
    model: &LoadedModel,
    messages: &[ChatMessage],
    tools: &[Value],
    add_generation_prompt: bool,
) -> Result<String, InferError> {
    let Ok(chat) = &model.chat else {
        return render_builtin(&model.llama, messages, add_generation_prompt);
    };
    let req = ChatRequest {
        messages: messages.iter().map(ChatMessage::to_openai).collect(),
        tools: tools.to_vec(),
        add_generation_prompt,
        enable_thinking: true,
        ..Default::default()
    };
    let prompt = chat.apply(&req)?.prompt;
    // The tokenizer adds BOS itself where the model wants it.
    let vocab = model.llama.vocab();
    if vocab.should_add_bos() {
        let bos =
            String::from_utf8_lossy(&vocab.detokenize(&[vocab.bos()], false, true)).into_owned();
        if let Some(rest) = prompt.strip_prefix(bos.as_str()) {
            return Ok(rest.to_string());
        }
    }
    Ok(prompt)
}

/// llama.cpp's built-in renderer, for templates its chat layer cannot read.
fn render_builtin(
    model: &LlamaModel,
    messages: &[ChatMessage],
    add_generation_prompt: bool,
) -> Result<String, InferError> {
    let tmpl = template(model)?;
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
        .apply_chat_template(&tmpl, &chat, add_generation_prompt)
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
    model: &LoadedModel,
    t: &mut Transcript,
    new: &[ChatMessage],
    add_generation_prompt: bool,
) -> Result<TokenSpan, InferError> {
    let mut all = t.messages.clone();
    all.extend_from_slice(new);
    let full = render_chat(model, &all, &t.tools, add_generation_prompt)?;
    let (delta, rendered) = match full.strip_prefix(t.rendered.as_str()) {
        Some(rest) => (rest.to_string(), full.clone()),
        None => {
            // The template renders earlier text differently from what was
            // fed (a reply trimmed, reasoning dropped, tools changed): the
            // tokens already fed stay as they are, and what is added is what
            // the new messages add to the template's own rendering.
            tracing::info!(
                "chat template re-rendered history differently; appending new messages only"
            );
            let before = render_chat(model, &t.messages, &t.tools, false)?;
            let delta = match full.strip_prefix(before.as_str()) {
                Some(rest) => rest.to_string(),
                None => full[common_prefix(&before, &full)..].to_string(),
            };
            (delta.clone(), format!("{}{}", t.rendered, delta))
        }
    };
    let llama = &model.llama;
    let mut span = TokenSpan::default();
    let vocab = llama.vocab();
    if t.tokens.is_empty() && vocab.should_add_bos() {
        span.push(vocab.bos().0, TokenRole::Context, None);
    }
    let mut cursor = 0;
    for m in new.iter().filter(|m| !m.content.is_empty()) {
        if let Some(off) = delta[cursor..].find(&m.content) {
            let start = cursor + off;
            push_text(
                llama,
                &mut span,
                &delta[cursor..start],
                TokenRole::Context,
                true,
            );
            let role = token_role(m.role);
            push_text(llama, &mut span, &m.content, role, false);
            // An image's positions stand for embeddings, not text: they
            // belong in no rendered text and carry the message's role.
            for image in &m.images {
                let id = reverie_core::image_token(image.number);
                span.extend_role(&vec![id; image.positions], role);
            }
            cursor = start + m.content.len();
        }
    }
    push_text(llama, &mut span, &delta[cursor..], TokenRole::Context, true);
    t.messages.extend_from_slice(new);
    t.tokens.append(&span);
    t.rendered = rendered;
    Ok(span)
}

/// Length of the longest common prefix of `a` and `b`, on a char boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i)
}
