//! The trainer: a LoRA on a GGUF model, in candle, with exact log-probs.
//!
//! [`Model`] reads a GGUF (any tensor type candle can dequantize) and runs the
//! forward pass of `llama`, `qwen2`, `qwen3` and `gemma3` in GGUF tensor names
//! and layouts, matching llama.cpp's numerics (interleaved RoPE for `llama`,
//! NeoX RoPE for the others, QK-norm, gemma's scaled embeddings, sandwich norms,
//! sliding-window layers and GELU-tanh). Element-wise work is composed from
//! candle ops that have a backward pass; candle's fused ones that silently
//! drop gradients (`softmax_last_dim`, `rms_norm`, `rope`) are never used.
//! The three heavy ops are written here with their own backward passes:
//! [`frozen::FrozenMatmul`] (frozen base weights: only the input gradient is
//! ever computed), [`attention::attention`] (causal, grouped-query, sliding
//! window, memory linear in the sequence length) and
//! [`lm_head::target_logprobs`] (the vocabulary projection and log-softmax,
//! one block of logits at a time). A training run holds the frozen weights in
//! the GGUF's own block formats and expands one tile of rows at a time inside
//! each product (`quant`), so a model costs its file's size in memory; f32,
//! remains an option; on CPUs with AMX or AVX-512 BF16 the products run in
//! bf16 with f32 sums ([`bf16_matmul`]).
//!
//! This crate must never touch the store or llama.cpp: it takes token ids with
//! roles and returns numbers and files.

mod amx;
pub mod attention;
pub mod bf16_matmul;
mod cpu;
pub mod data;
pub mod device;
mod dpbf16;
pub mod export;
pub mod feed_forward;
pub mod frozen;
pub mod fused;
pub mod glu;
pub mod heap;
pub mod hparams;
pub mod lm_head;
pub mod lora;
pub mod loss;
pub mod memory;
pub mod model;
pub mod ops;
pub mod optim;
pub mod portable;
mod quant;
pub mod timing;
pub mod trainer;

mod error;

pub use device::DeviceChoice;
pub use error::TrainError;
pub use hparams::Hparams;
pub use lora::{Lora, LoraConfig};
pub use model::{Held, Model};
pub use trainer::{StepReport, TrainConfig, Trainer};
