//! The trainer: a LoRA on a GGUF model, in candle, with exact log-probs.
//!
//! [`Model`] reads a GGUF (any tensor type candle can dequantize) and runs the
//! forward pass of `llama`, `qwen2`, `qwen3` and `gemma3` in GGUF tensor names
//! and layouts, matching llama.cpp's numerics (interleaved RoPE for `llama`,
//! NeoX RoPE for the others, QK-norm, gemma's scaled embeddings, sandwich norms,
//! sliding-window layers and GELU-tanh). Every op is composed from candle ops
//! that have a backward pass; the fused ones that silently drop gradients
//! (`softmax_last_dim`, `rms_norm`, `rope`) are never used. Frozen base weights
//! sit behind [`frozen::FrozenMatmul`], whose backward returns only the input
//! gradient, so no gradient is ever computed or stored for them.
//!
//! This crate must never touch the store or llama.cpp: it takes token ids with
//! roles and returns numbers and files.

pub mod data;
pub mod export;
pub mod frozen;
pub mod hparams;
pub mod lora;
pub mod loss;
pub mod model;
pub mod ops;
pub mod optim;
pub mod trainer;

mod error;

pub use error::TrainError;
pub use hparams::Hparams;
pub use lora::{Lora, LoraConfig};
pub use model::Model;
pub use trainer::{StepReport, TrainConfig, Trainer};
