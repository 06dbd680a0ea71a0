//! The held-out check: perplexity of a fixed text under llama.cpp.

use std::path::Path;

use reverie_infer::{Engine, EngineConfig};

pub const SANITY_TEXT: &str = include_str!("../../../assets/prompts/sanity.txt");

/// Perplexity of the sanity text under the model at `path`.
pub fn perplexity(path: &Path, gpu_layers: u32) -> Result<f64, reverie_infer::InferError> {
    let engine = Engine::load(
        path,
        EngineConfig {
            slots: 1,
            n_ctx: 512,
            gpu_layers,
            ..EngineConfig::default()
        },
    )?;
    let ids = engine.tokenize_document(SANITY_TEXT);
    let lps = engine.score(&ids)?;
    let mean = lps.iter().map(|&x| x as f64).sum::<f64>() / lps.len().max(1) as f64;
    Ok((-mean).exp())
}
