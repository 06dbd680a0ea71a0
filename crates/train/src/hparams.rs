//! Architecture hyper-parameters read from GGUF metadata.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;

/// The model architectures the trainer implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
}

#[derive(Debug, Clone)]
pub struct Hparams {
    pub architecture: Architecture,
    pub n_vocab: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub eps: f64,
    pub rope_base: f32,
    pub rope_base_swa: f32,
    /// Gemma 3: a key more than this many positions back is masked on
    /// sliding-window layers.
    pub sliding_window: Option<usize>,
    /// Every `swa_pattern`-th layer (the last of each group) is global.
    pub swa_pattern: usize,
}

impl Hparams {
    pub fn from_metadata(md: &HashMap<String, Value>, n_vocab: usize) -> Result<Hparams, String> {
        let arch = md
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .ok_or("no general.architecture")?;
        let architecture = match arch.as_str() {
            "llama" => Architecture::Llama,
            "qwen2" => Architecture::Qwen2,
            "qwen3" => Architecture::Qwen3,
            "gemma3" => Architecture::Gemma3,
            other => return Err(format!("architecture {other:?} is not supported by the trainer (llama, qwen2, qwen3, gemma3 are)")),
        };
        let u = |k: &str| -> Option<usize> {
            md.get(&format!("{arch}.{k}"))
                .and_then(|v| {
                    v.to_u32()
                        .ok()
                        .or_else(|| v.to_u64().ok().map(|x| x as u32))
                })
                .map(|x| x as usize)
        };
        let f = |k: &str| md.get(&format!("{arch}.{k}")).and_then(|v| v.to_f32().ok());
        let need = |k: &str| u(k).ok_or_else(|| format!("metadata {arch}.{k} is missing"));
        let n_embd = need("embedding_length")?;
        let n_head = need("attention.head_count")?;
        let head_dim = u("attention.key_length").unwrap_or(n_embd / n_head);
        Ok(Hparams {
            architecture,
            n_vocab,
            n_embd,
            n_layer: need("block_count")?,
            n_head,
            n_head_kv: u("attention.head_count_kv").unwrap_or(n_head),
            head_dim,
            n_ff: need("feed_forward_length")?,
            eps: f("attention.layer_norm_rms_epsilon").unwrap_or(1e-6) as f64,
            rope_base: f("rope.freq_base").unwrap_or(10_000.0),
            rope_base_swa: f("rope.freq_base_swa").unwrap_or(10_000.0),
            sliding_window: if architecture == Architecture::Gemma3 {
                u("attention.sliding_window").filter(|w| *w > 0)
            } else {
                None
            },
            swa_pattern: u("attention.sliding_window_pattern").unwrap_or(6),
        })
    }

    /// Whether layer `il` attends only within the sliding window.
    pub fn is_swa(&self, il: usize) -> bool {
        self.sliding_window.is_some() && il % self.swa_pattern < self.swa_pattern - 1
    }

    /// Interleaved-pair RoPE (llama.cpp's "normal") vs. split-half (NeoX).
    pub fn interleaved_rope(&self) -> bool {
        self.architecture == Architecture::Llama
    }
}
