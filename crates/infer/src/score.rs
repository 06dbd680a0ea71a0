//! Teacher-forced scoring: llama.cpp's logits at every position of a token
//! sequence, the reference the trainer's own forward pass is checked against.

use std::num::NonZeroU32;

use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;

use crate::backend;
use crate::error::InferError;
use crate::model::LoadedModel;

/// llama.cpp's `LLAMA_FLASH_ATTN_TYPE_DISABLED`.
const FLASH_ATTN_DISABLED: i32 = 0;

/// Calls `visit(i, logits)` with the logits after `tokens[..=i]`, for every
/// position `i`.
pub fn logits_at_every_position(
    model: &LoadedModel,
    tokens: &[i32],
    threads: usize,
    visit: &mut dyn FnMut(usize, &[f32]),
) -> Result<(), InferError> {
    logits_where(model, tokens, threads, &|_| true, visit)
}

/// As [`logits_at_every_position`], for the positions in `at` only: the
/// output layer runs on those alone, which for a long prompt and a large
/// vocabulary is most of the cost saved.
pub fn logits_at(
    model: &LoadedModel,
    tokens: &[i32],
    at: &[usize],
    threads: usize,
    visit: &mut dyn FnMut(usize, &[f32]),
) -> Result<(), InferError> {
    if let Some(&bad) = at.iter().find(|&&i| i >= tokens.len()) {
        return Err(InferError::Decode(format!(
            "position {bad} is past the {} tokens scored",
            tokens.len()
        )));
    }
    logits_where(model, tokens, threads, &|i| at.contains(&i), visit)
}

fn logits_where(
    model: &LoadedModel,
    tokens: &[i32],
    threads: usize,
    wanted: &dyn Fn(usize) -> bool,
    visit: &mut dyn FnMut(usize, &[f32]),
) -> Result<(), InferError> {
    if tokens.is_empty() {
        return Err(InferError::EmptyPrompt);
    }
    if reverie_core::has_images(tokens) {
        return Err(InferError::Vision(
            "scoring covers text only; this sequence holds an image".into(),
        ));
    }
    let n = tokens.len() as u32;
    let chunk = n.min(512);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n + 1))
        .with_n_batch(chunk)
        .with_n_ubatch(chunk)
        .with_n_threads(threads as i32)
        .with_n_threads_batch(threads as i32)
        // An f16 cache rounds keys and values; scoring is a reference, so
        // it keeps them exact.
        .with_type_k(KvCacheType::F32)
        .with_type_v(KvCacheType::F32)
        // CPU flash attention rounds through f16 as well.
        .with_flash_attention_policy(FLASH_ATTN_DISABLED);
    let mut ctx = model
        .llama
        .new_context(backend::get()?, params)
        .map_err(|e| InferError::Context(e.to_string()))?;
    model.attach_adapter(&mut ctx)?;
    let mut batch = LlamaBatch::new(chunk as usize, 1);
    for (c, part) in tokens.chunks(chunk as usize).enumerate() {
        batch.clear();
        let base = c * chunk as usize;
        for (j, &t) in part.iter().enumerate() {
            batch
                .add(LlamaToken(t), (base + j) as i32, &[0], wanted(base + j))
                .map_err(|e| InferError::Decode(e.to_string()))?;
        }
        ctx.decode(&mut batch)
            .map_err(|e| InferError::Decode(e.to_string()))?;
        for j in (0..part.len()).filter(|&j| wanted(base + j)) {
            visit(base + j, ctx.get_logits_ith(j as i32));
        }
    }
    Ok(())
}

/// log p(x) of `token` under `logits` (a numerically stable log-softmax).
pub fn log_prob(logits: &[f32], token: i32) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| ((l - max) as f64).exp()).sum();
    logits[token as usize] - max - sum.ln() as f32
}
