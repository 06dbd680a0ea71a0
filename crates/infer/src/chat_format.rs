//! The model's own chat format, from llama.cpp's chat layer (through the
//! small C++ shim in `native/chat_shim.cpp`): its Jinja template rendered
//! with tool definitions, the grammar that holds a tool call to the tools
//! offered (with the triggers that switch it on), and the parser that reads
//! calls back out of a reply. Templates llama.cpp cannot read leave the
//! model on the built-in renderer and Reverie's Hermes prompt.

use std::ffi::{c_char, CStr, CString};
use std::ptr::NonNull;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::InferError;

#[repr(C)]
struct RawChat {
    _private: [u8; 0],
}

extern "C" {
    fn reverie_chat_init(
        src: *const c_char,
        bos: *const c_char,
        eos: *const c_char,
        err: *mut *mut c_char,
    ) -> *mut RawChat;
    fn reverie_chat_free(chat: *mut RawChat);
    fn reverie_chat_describe(chat: *const RawChat, err: *mut *mut c_char) -> *mut c_char;
    fn reverie_chat_apply(
        chat: *const RawChat,
        request: *const c_char,
        err: *mut *mut c_char,
    ) -> *mut c_char;
    fn reverie_chat_parse(
        params: *const c_char,
        text: *const c_char,
        partial: bool,
        err: *mut *mut c_char,
    ) -> *mut c_char;
    fn reverie_chat_string_free(s: *mut c_char);
}

/// Takes ownership of a string the shim returned.
fn take(ptr: *mut c_char) -> Option<String> {
    let p = NonNull::new(ptr)?;
    // SAFETY: the shim returns NUL-terminated strings from malloc, freed here once.
    let s = unsafe { CStr::from_ptr(p.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    unsafe { reverie_chat_string_free(p.as_ptr()) };
    Some(s)
}

fn c_string(what: &str, s: &str) -> Result<CString, InferError> {
    CString::new(s).map_err(|_| InferError::Template(format!("{what} contains a NUL byte")))
}

/// Calls a shim function that returns JSON or sets `err`.
fn call_json<T: serde::de::DeserializeOwned>(
    what: &str,
    f: impl FnOnce(*mut *mut c_char) -> *mut c_char,
) -> Result<T, InferError> {
    let mut err = std::ptr::null_mut();
    let out = take(f(&mut err));
    let err = take(err);
    let text = out.ok_or_else(|| {
        InferError::Template(format!(
            "{what}: {}",
            err.unwrap_or_else(|| "llama.cpp gave no answer".into())
        ))
    })?;
    serde_json::from_str(&text)
        .map_err(|e| InferError::Template(format!("{what}: unreadable answer from llama.cpp: {e}")))
}

/// A parsed chat template, ready to render requests.
pub struct ChatTemplates {
    raw: Mutex<NonNull<RawChat>>,
}

// SAFETY: the templates are read-only after parsing and every use goes
// through the mutex.
unsafe impl Send for ChatTemplates {}
unsafe impl Sync for ChatTemplates {}

impl Drop for ChatTemplates {
    fn drop(&mut self) {
        let raw = self.raw.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: created by reverie_chat_init, freed once.
        unsafe { reverie_chat_free(raw.as_ptr()) };
    }
}

/// What a template can do, as llama.cpp's analysis of it found.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct TemplateCaps {
    #[serde(default)]
    pub supports_tools: bool,
    #[serde(default)]
    pub supports_tool_calls: bool,
    #[serde(default)]
    pub supports_parallel_tool_calls: bool,
    #[serde(default)]
    pub supports_system_role: bool,
}

#[derive(Deserialize)]
struct Described {
    caps: TemplateCaps,
}

/// Whether the model answers with content, may call a tool, or must.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    #[default]
    Auto,
    Required,
    None,
}

/// One render: messages and tools in OpenAI's shape.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChatRequest {
    pub messages: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    pub tool_choice: ToolChoice,
    pub parallel_tool_calls: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json_schema: Option<Value>,
    pub add_generation_prompt: bool,
    pub enable_thinking: bool,
}

/// A grammar trigger as llama.cpp reports it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Trigger {
    /// 0 token, 1 word, 2 pattern, 3 pattern matching the whole output.
    #[serde(rename = "type")]
    pub kind: i32,
    pub value: String,
    pub token: i32,
}

/// The prompt of a request and how its reply is to be sampled and read.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ChatParams {
    pub format: i32,
    pub format_name: String,
    pub prompt: String,
    pub grammar: String,
    pub grammar_lazy: bool,
    pub generation_prompt: String,
    pub parser: String,
    pub supports_thinking: bool,
    pub grammar_triggers: Vec<Trigger>,
    pub preserved_tokens: Vec<String>,
    pub additional_stops: Vec<String>,
}

impl ChatParams {
    /// The parser for this request's reply.
    pub fn reply_parser(&self) -> ReplyParser {
        ReplyParser {
            format: self.format,
            parser: self.parser.clone(),
            generation_prompt: self.generation_prompt.clone(),
        }
    }

    /// The trigger patterns (regular expressions) and tokens of a lazy
    /// grammar, the way llama.cpp's own sampler builds them.
    pub fn trigger_patterns(&self) -> (Vec<String>, Vec<i32>) {
        let mut patterns = Vec::new();
        let mut tokens = Vec::new();
        for t in &self.grammar_triggers {
            match t.kind {
                0 => tokens.push(t.token),
                1 => patterns.push(regex_escape(&t.value)),
                2 => patterns.push(t.value.clone()),
                _ => patterns.push(anchored(&t.value)),
            }
        }
        (patterns, tokens)
    }
}

/// `s` with regular-expression metacharacters escaped.
pub fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if ".^$|()*+?[]{}\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn anchored(p: &str) -> String {
    if p.is_empty() {
        return "^$".into();
    }
    let start = if p.starts_with('^') { "" } else { "^" };
    let end = if p.ends_with('$') { "" } else { "$" };
    format!("{start}{p}{end}")
}

/// Reads one format's replies.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReplyParser {
    format: i32,
    parser: String,
    generation_prompt: String,
}

/// A tool call read from a reply; `arguments` is JSON text.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
struct RawToolCall {
    function: FunctionCall,
}

#[derive(Debug, Deserialize)]
struct RawMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<RawToolCall>,
}

/// A reply read by its format's parser.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedReply {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<FunctionCall>,
}

impl ReplyParser {
    /// Reads `text` (the sampled reply, without the generation prompt).
    /// `partial` reads a reply still being streamed.
    pub fn parse(&self, text: &str, partial: bool) -> Result<ParsedReply, InferError> {
        let params = c_string(
            "parser",
            &serde_json::to_string(self).expect("serializable"),
        )?;
        let text = c_string("reply", text)?;
        let raw: RawMessage = call_json("reading the reply", |err| unsafe {
            reverie_chat_parse(params.as_ptr(), text.as_ptr(), partial, err)
        })?;
        Ok(ParsedReply {
            content: raw.content.unwrap_or_default(),
            reasoning: raw.reasoning_content.unwrap_or_default(),
            tool_calls: raw.tool_calls.into_iter().map(|c| c.function).collect(),
        })
    }
}

impl ChatTemplates {
    /// Parses `src` with the model's BOS and EOS texts.
    pub fn new(src: &str, bos: &str, eos: &str) -> Result<ChatTemplates, InferError> {
        let (src, bos, eos) = (
            c_string("template", src)?,
            c_string("BOS", bos)?,
            c_string("EOS", eos)?,
        );
        let mut err = std::ptr::null_mut();
        // SAFETY: valid C strings; the shim copies them.
        let raw = unsafe { reverie_chat_init(src.as_ptr(), bos.as_ptr(), eos.as_ptr(), &mut err) };
        let err = take(err);
        let raw = NonNull::new(raw).ok_or_else(|| {
            InferError::Template(format!(
                "llama.cpp cannot read this chat template: {}",
                err.unwrap_or_else(|| "no reason given".into())
            ))
        })?;
        Ok(ChatTemplates {
            raw: Mutex::new(raw),
        })
    }

    fn with_raw<T>(&self, f: impl FnOnce(*const RawChat) -> T) -> T {
        let raw = self.raw.lock().unwrap_or_else(|e| e.into_inner());
        f(raw.as_ptr())
    }

    pub fn caps(&self) -> Result<TemplateCaps, InferError> {
        let d: Described = self.with_raw(|raw| {
            call_json("describing the template", |err| unsafe {
                reverie_chat_describe(raw, err)
            })
        })?;
        Ok(d.caps)
    }

    /// Renders `req` through the template.
    pub fn apply(&self, req: &ChatRequest) -> Result<ChatParams, InferError> {
        let json = c_string(
            "request",
            &serde_json::to_string(req).expect("serializable"),
        )?;
        self.with_raw(|raw| {
            call_json("rendering the chat template", |err| unsafe {
                reverie_chat_apply(raw, json.as_ptr(), err)
            })
        })
    }
}
