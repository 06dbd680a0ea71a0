//! `POST /v1/chat/completions`: an OpenAI request becomes llama.cpp's chat
//! parameters (the model's own template, tools, the call grammar or a JSON
//! schema), a generation on the shared engine, and the reply read back by
//! the format's parser into `content` and `tool_calls`.

use reverie_core::{ChannelId, SamplingParams, StopReason};
use reverie_infer::{
    call_constraint, ChatRequest, Constraint, Engine, GenerateRequest, ReplyParser, ToolChoice,
};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;

/// The fields Reverie reads; others (`frequency_penalty`, `logit_bias`, …)
/// are accepted and ignored, as llama.cpp's server does.
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<Value>,
    #[serde(default)]
    pub tools: Vec<Value>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub max_tokens: Option<usize>,
    #[serde(default)]
    pub max_completion_tokens: Option<usize>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub stop: Option<Value>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub user: Option<String>,
}

/// A request made ready for the engine.
pub struct Prepared {
    pub generate: GenerateRequest,
    pub reading: Reading,
    pub prompt_tokens: usize,
    /// What to record once the reply is in.
    pub exchange: crate::record::Exchange,
}

/// How a reply is read back.
pub enum Reading {
    /// By the format's parser: content, and calls when tools were given
    /// (also the bare `{"name": …, "arguments": …}` small models write).
    Format { parser: ReplyParser, tools: bool },
    /// A call was required: the reply was held to `{"name": …,
    /// "arguments": …}` and is read as that.
    JsonCall,
    /// `response_format` asked for JSON: the reply is the JSON.
    Json,
}

fn bad(param: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::BadParam {
        param,
        message: message.into(),
    }
}

/// `tool_choice` as llama.cpp takes it, and the tools it leaves callable.
fn tool_choice(
    choice: Option<&Value>,
    tools: Vec<Value>,
) -> Result<(ToolChoice, Vec<Value>), ApiError> {
    let name_of = |t: &Value| {
        t["function"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    match choice {
        None => Ok((ToolChoice::Auto, tools)),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok((ToolChoice::Auto, tools)),
            "none" => Ok((ToolChoice::None, tools)),
            "required" if tools.is_empty() => {
                Err(bad("tool_choice", "tool_choice `required` needs `tools`"))
            }
            "required" => Ok((ToolChoice::Required, tools)),
            other => Err(bad(
                "tool_choice",
                format!("tool_choice {other:?} is not one of auto, none, required or {{\"type\": \"function\", \"function\": {{\"name\": …}}}}"),
            )),
        },
        Some(v) => {
            let name = v["function"]["name"]
                .as_str()
                .ok_or_else(|| bad("tool_choice", "tool_choice needs function.name"))?;
            let chosen: Vec<Value> = tools.into_iter().filter(|t| name_of(t) == name).collect();
            if chosen.is_empty() {
                return Err(bad(
                    "tool_choice",
                    format!("tool_choice names `{name}`, which is not in `tools`"),
                ));
            }
            Ok((ToolChoice::Required, chosen))
        }
    }
}

/// The JSON schema `response_format` asks for, if any.
fn response_schema(format: Option<&Value>) -> Result<Option<Value>, ApiError> {
    let Some(f) = format else { return Ok(None) };
    match f["type"].as_str() {
        None | Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "object"}))),
        Some("json_schema") => f["json_schema"]["schema"]
            .as_object()
            .map(|s| Some(Value::Object(s.clone())))
            .ok_or_else(|| bad("response_format", "json_schema needs a `schema` object")),
        Some(other) => Err(bad(
            "response_format",
            format!("response_format type {other:?} is not text, json_object or json_schema"),
        )),
    }
}

fn stops(stop: Option<&Value>) -> Result<Vec<String>, ApiError> {
    match stop {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) if a.len() <= 4 => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad("stop", "stop must hold strings"))
            })
            .collect(),
        Some(_) => Err(bad("stop", "stop must be a string or up to 4 strings")),
    }
}

/// A slot key per client, so a client's next request reuses its KV cache.
fn client_channel(user: Option<&str>) -> ChannelId {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    user.unwrap_or("api").hash(&mut h);
    // Far from the app's own channel ids.
    ChannelId(-1 - (h.finish() >> 2) as i64)
}

/// Checks `req` and builds what the engine runs.
pub fn prepare(
    engine: &Engine,
    served: &str,
    req: CompletionRequest,
) -> Result<Prepared, ApiError> {
    if let Some(m) = req.model.as_deref() {
        if m != served && m != "default" {
            return Err(ApiError::UnknownModel {
                asked: m.to_string(),
                served: served.to_string(),
            });
        }
    }
    if req.n.is_some_and(|n| n != 1) {
        return Err(bad("n", "only n = 1 is supported"));
    }
    if req.messages.is_empty() {
        return Err(bad("messages", "messages must not be empty"));
    }
    if let Some(t) = req.temperature.filter(|t| !(0.0..=2.0).contains(t)) {
        return Err(bad(
            "temperature",
            format!("temperature {t} is not between 0 and 2"),
        ));
    }
    if let Some(p) = req.top_p.filter(|p| !(0.0..=1.0).contains(p) || *p == 0.0) {
        return Err(bad("top_p", format!("top_p {p} is not in (0, 1]")));
    }
    let has_tools = !req.tools.is_empty();
    let (choice, tools) = tool_choice(req.tool_choice.as_ref(), req.tools)?;
    let required = choice == ToolChoice::Required;
    let forced = required.then(|| reverie_infer::call_schema(&tools));
    let chat = ChatRequest {
        messages: req.messages.clone(),
        tools,
        tool_choice: choice,
        parallel_tool_calls: req.parallel_tool_calls.unwrap_or(true),
        json_schema: response_schema(req.response_format.as_ref())?,
        add_generation_prompt: true,
        enable_thinking: true,
    };
    let params = engine.chat_params(&chat)?;
    tracing::debug!(
        format = %params.format_name,
        lazy = params.grammar_lazy,
        grammar_bytes = params.grammar.len(),
        triggers = ?params.grammar_triggers,
        "chat parameters"
    );
    let prompt = engine.tokenize_rendered(&params.prompt);
    let defaults = SamplingParams::default();
    let sampling = SamplingParams {
        temperature: req.temperature.unwrap_or(defaults.temperature),
        top_p: req.top_p.unwrap_or(defaults.top_p),
        top_k: if req.temperature == Some(0.0) {
            1
        } else {
            defaults.top_k
        },
        seed: req.seed.map_or(rand::random(), |s| s as u32),
        max_tokens: req
            .max_completion_tokens
            .or(req.max_tokens)
            .unwrap_or(defaults.max_tokens)
            .max(1),
    };
    let mut stop = stops(req.stop.as_ref())?;
    stop.extend(params.additional_stops.iter().cloned());
    // A required call and a JSON reply are held by a JSON-schema grammar
    // from the first token, which every model follows; free replies that
    // may call get the format's lazy call grammar.
    let (constraint, reading) = match (forced, &chat.json_schema) {
        (Some(call), _) => (Some(Constraint::JsonSchema(call)), Reading::JsonCall),
        (None, Some(schema)) => (Some(Constraint::JsonSchema(schema.clone())), Reading::Json),
        (None, None) if choice == ToolChoice::None => (
            None,
            Reading::Format {
                parser: params.reply_parser(),
                tools: false,
            },
        ),
        (None, None) => (
            call_constraint(&params),
            Reading::Format {
                parser: params.reply_parser(),
                tools: has_tools,
            },
        ),
    };
    let prompt_tokens = prompt.len();
    let exchange = crate::record::Exchange {
        messages: crate::record::messages_of(&req.messages),
        prompt: prompt.clone(),
    };
    let mut generate = GenerateRequest::new(client_channel(req.user.as_deref()), prompt, sampling);
    generate.constraint = constraint;
    generate.stop = stop;
    Ok(Prepared {
        generate,
        reading,
        prompt_tokens,
        exchange,
    })
}

/// OpenAI's `finish_reason` for how a generation ended.
pub fn finish_reason(reason: StopReason, calls: bool) -> &'static str {
    match reason {
        _ if calls => "tool_calls",
        StopReason::MaxTokens | StopReason::ContextFull => "length",
        _ => "stop",
    }
}

fn call(i: usize, name: &str, arguments: String) -> Value {
    json!({
        "id": format!("call_{:08x}_{i}", rand::random::<u32>()),
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    })
}

/// The call `text` ends in without its format's tags, and the words before
/// it (see [`reverie_infer::bare_call`]).
fn bare_call(text: &str) -> Option<(Option<String>, Value)> {
    let (words, body) = reverie_infer::bare_call(text)?;
    let v: Value = serde_json::from_str(&body).ok()?;
    // Some models write the arguments as a JSON string.
    let arguments = match &v["arguments"] {
        Value::String(s) => s.clone(),
        a => a.to_string(),
    };
    let content = (!words.is_empty()).then(|| words.to_string());
    Some((
        content,
        call(0, v["name"].as_str().unwrap_or_default(), arguments),
    ))
}

/// The assistant message of a finished reply: content and tool calls.
pub fn message(reading: &Reading, text: &str) -> Value {
    match reading {
        Reading::JsonCall => match bare_call(text) {
            Some((content, c)) => {
                json!({"role": "assistant", "content": content, "tool_calls": [c]})
            }
            None => json!({"role": "assistant", "content": text}),
        },
        Reading::Json => json!({"role": "assistant", "content": text.trim()}),
        Reading::Format { parser, tools } => match parser.parse(text, false) {
            Ok(p) if *tools && p.tool_calls.is_empty() => match bare_call(&p.content) {
                Some((content, c)) => {
                    json!({"role": "assistant", "content": content, "tool_calls": [c]})
                }
                None => json!({"role": "assistant", "content": p.content}),
            },
            Ok(p) if *tools && !p.tool_calls.is_empty() => {
                let calls: Vec<Value> = p
                    .tool_calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| call(i, &c.name, c.arguments))
                    .collect();
                let content = (!p.content.trim().is_empty()).then_some(p.content);
                json!({"role": "assistant", "content": content, "tool_calls": calls})
            }
            Ok(p) => json!({"role": "assistant", "content": p.content}),
            Err(_) => json!({"role": "assistant", "content": text}),
        },
    }
}

/// The content of a reply still being written, as the format's parser
/// reads it so far.
pub fn partial_content(reading: &Reading, text: &str) -> String {
    match reading {
        Reading::Format { parser, .. } => parser
            .parse(text, true)
            .map(|p| p.content)
            .unwrap_or_default(),
        Reading::JsonCall | Reading::Json => String::new(),
    }
}
