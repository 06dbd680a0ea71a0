//! Sampler settings for one generation.

use serde::{Deserialize, Serialize};

/// How to pick each next token. `temperature == 0` means greedy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplingParams {
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: i32,
    pub seed: u32,
    pub max_tokens: usize,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.7,
            top_p: 0.9,
            top_k: 40,
            seed: 0x5EED,
            max_tokens: 1024,
        }
    }
}

impl SamplingParams {
    pub fn greedy(max_tokens: usize) -> Self {
        SamplingParams {
            temperature: 0.0,
            max_tokens,
            ..SamplingParams::default()
        }
    }
}
