//! The llama.cpp engine: load a GGUF, render its chat template into exact
//! tokens with roles, and stream generations for many channels at once.
//!
//! One [`Engine`] holds one model and a bounded pool of worker slots, each
//! with its own llama.cpp context and KV cache. Requests queue fairly (round
//! robin across channels); a slot reuses whatever prefix of a prompt is
//! already in its cache, so a channel's next turn only prefills what is new.
//! Every generated token is reported with its id, its text and the sampler's
//! log-probability: the ids are what gets recorded, nothing is re-tokenized.
//! The model can be swapped while serving (a failed load keeps the old one),
//! and a watchdog ends a stalled generation and replaces its worker.
//!
//! This crate must never touch the database or decide what a conversation
//! means: it turns tokens into tokens.
//!
//! ```no_run
//! use reverie_core::{ChannelId, MessageRole, SamplingParams};
//! use reverie_infer::{ChatMessage, Engine, EngineConfig, GenerateRequest, Transcript};
//!
//! let engine = Engine::load("model.gguf", EngineConfig::default()).unwrap();
//! let mut transcript = Transcript::default();
//! engine
//!     .extend_transcript(&mut transcript, &[ChatMessage::new(MessageRole::User, "Hi!")])
//!     .unwrap();
//! let reply = engine
//!     .generate(GenerateRequest::new(ChannelId(1), transcript.tokens.ids.clone(), SamplingParams::default()))
//!     .unwrap()
//!     .complete()
//!     .unwrap();
//! println!("{}", reply.text);
//! ```

mod backend;
mod chat_format;
mod config;
mod engine;
mod error;
mod model;
mod prompt;
mod sampler;
mod scheduler;
mod score;
mod tool_calls;
mod tools;
mod utf8;
mod vision;
mod worker;

pub use chat_format::{
    ChatParams, ChatRequest, ChatTemplates, FunctionCall, ParsedReply, ReplyParser, TemplateCaps,
    ToolChoice,
};
pub use config::EngineConfig;
pub use engine::{Completion, Engine, GenEvent, GenerateRequest, Generation, Usage};
pub use error::InferError;
pub use model::ModelInfo;
pub use prompt::{ChatMessage, ImageRun, Transcript};
pub use sampler::Constraint;
pub use score::log_prob;
pub use tool_calls::{bare_call, call_constraint, call_schema, close_braces, ToolCalling};
pub use tools::{python_json, system_with_tools};
pub use vision::ImageSource;

/// Converts a JSON schema into the GBNF grammar llama.cpp enforces.
pub fn json_schema_to_gbnf(schema: &serde_json::Value) -> Result<String, InferError> {
    llama_cpp_2::json_schema_to_grammar(&schema.to_string())
        .map_err(|e| InferError::Grammar(format!("JSON schema not supported: {e}")))
}

/// True when this build offloads to a GPU (the `cuda` feature).
pub fn gpu_offload_supported() -> bool {
    backend::get()
        .map(|b| b.supports_gpu_offload())
        .unwrap_or(false)
}
