//! What a training step needs in memory, from a GGUF's header alone: the
//! frozen weights as a run holds them and the activations of one step, so
//! `reverie doctor` can say whether a night fits before it starts, and the
//! trainer can choose between keeping the graph and recomputing layers.

use std::fs::File;
use std::path::Path;

use candle_core::quantized::{gguf_file, GgmlDType};
use serde::Serialize;

use crate::error::TrainError;
use crate::hparams::{Architecture, Hparams};
use crate::quant::Quantized;
use crate::TrainConfig;

/// Bytes one step is expected to hold at its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StepMemory {
    /// Frozen projections, LM head, embeddings and norms.
    pub frozen: u64,
    /// The step's activations, gradients and the LM head's logits block.
    pub activations: u64,
    /// Whether the step keeps its whole graph (else it recomputes layers).
    pub keeps_graph: bool,
}

impl StepMemory {
    pub fn total(&self) -> u64 {
        self.frozen + self.activations
    }
}

/// Bytes of the whole graph of a step on `tokens` tokens: about
/// `4·(8·n_embd + k·n_ff)` per token and layer, where `k` counts the
/// feed-forward-wide tensors the step keeps: 4 when the block is composed
/// of separate ops, 3 when it is one op that keeps its gate and up
/// projections in f32 ([`crate::feed_forward`]), 2 when it keeps them in
/// bf16. Measured peaks of a 2,048-token step of the default model with
/// quantized weights: 5.77, 4.84 and 3.96 GB.
pub fn graph_bytes(hp: &Hparams, cfg: &TrainConfig, tokens: usize) -> u64 {
    let adapted = |t: &str| cfg.lora.targets.iter().any(|x| x == t);
    let one_op = hp.architecture != Architecture::Gemma3
        && ["ffn_gate", "ffn_up", "ffn_down"].into_iter().all(adapted);
    let k = match (one_op, cfg.bf16_saved) {
        (false, _) => 4,
        (true, false) => 3,
        (true, true) => 2,
    };
    (tokens * hp.n_layer * 4 * (8 * hp.n_embd + k * hp.n_ff)) as u64
}

/// Whether a step on `tokens` tokens keeps the whole graph rather than
/// recomputing each layer: yes when recomputation is off; else only for
/// sequences of at most `recompute_above` tokens whose graph takes less
/// than half of the memory available now.
pub fn keeps_graph(cfg: &TrainConfig, hp: &Hparams, tokens: usize) -> bool {
    !cfg.recompute
        || (tokens <= cfg.recompute_above
            && available().is_none_or(|free| graph_bytes(hp, cfg, tokens) < free / 2))
}

/// Bytes of memory available now (`MemAvailable`), where Linux says.
pub fn available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The expected peak of one step on `tokens` tokens of the model at `path`
/// under `cfg`, on the CPU.
pub fn step_memory(
    path: &Path,
    tokens: usize,
    cfg: &TrainConfig,
) -> Result<StepMemory, TrainError> {
    let bad = |reason: String| TrainError::Model {
        path: path.to_path_buf(),
        reason,
    };
    let mut file = File::open(path).map_err(|source| TrainError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let content = gguf_file::Content::read(&mut file).map_err(|e| bad(e.to_string()))?;
    let n_vocab = content
        .tensor_infos
        .get("token_embd.weight")
        .and_then(|t| t.shape.dims().first().copied())
        .ok_or_else(|| bad("no token_embd.weight".into()))?;
    let hp = Hparams::from_metadata(&content.metadata, n_vocab).map_err(bad)?;
    let frozen: u64 = content
        .tensor_infos
        .values()
        .map(|t| {
            let n = t.shape.elem_count();
            let held = if cfg.quantized && Quantized::keeps(t.ggml_dtype) {
                n / t.ggml_dtype.block_size() * t.ggml_dtype.type_size()
            } else {
                // Dense: f32 (bf16 tiles hold two copies of two bytes).
                n * GgmlDType::F32.type_size()
            };
            held as u64
        })
        .sum();
    let keeps = keeps_graph(cfg, &hp, tokens);
    let t = tokens as u64;
    let width = |n: usize| n as u64 * 4;
    // The LM head's logits block and its gradient.
    let head = 2 * cfg.chunk.min(tokens) as u64 * width(hp.n_vocab);
    let activations = if keeps {
        graph_bytes(&hp, cfg, tokens) + head
    } else {
        // Each layer's input and its attention output, kept for the second
        // pass ([`crate::attention::Memo`], in bf16 with `bf16_saved`), then
        // one layer's graph and its gradients at a time: about one and a
        // half times the graph, since the feed-forward block's temporaries
        // are one block of rows (measured on the default model: 1.87 GB at
        // 4,096 tokens, 2.86 GB at 8,192).
        let kept = if cfg.bf16_saved { 2 } else { 4 };
        let memo = t * hp.n_layer as u64 * (hp.n_head * hp.head_dim) as u64 * kept;
        t * hp.n_layer as u64 * width(hp.n_embd)
            + memo
            + 3 * graph_bytes(&hp, cfg, tokens) / (2 * hp.n_layer as u64)
            + head
    };
    Ok(StepMemory {
        frozen,
        activations,
        keeps_graph: keeps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_gguf::synth::{self, Arch, SynthConfig, SynthQuant};

    #[test]
    fn the_estimate_follows_the_weights_format_and_the_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.gguf");
        let c = SynthConfig {
            n_embd: 256,
            head_dim: 64,
            n_ff: 512,
            quant: SynthQuant::Q4KM,
            ..SynthConfig::tiny(Arch::Qwen2)
        };
        synth::write(&path, &c).unwrap();
        let quantized = TrainConfig::default();
        let dense = TrainConfig {
            quantized: false,
            ..TrainConfig::default()
        };
        let (q, d) = (
            step_memory(&path, 1024, &quantized).unwrap(),
            step_memory(&path, 1024, &dense).unwrap(),
        );
        assert!(q.frozen * 5 < d.frozen, "{q:?} vs {d:?}");
        assert_eq!(q.activations, d.activations);
        // Longer than `recompute_above`: recomputed layer by layer, so one
        // layer's graph (and its gradients) at a time.
        let long = step_memory(&path, 8192, &quantized).unwrap();
        assert!(q.keeps_graph && !long.keeps_graph);
        let per_layer = graph_bytes_of(&path, 8192) / c.n_layer;
        assert!(long.activations > per_layer && long.activations > q.activations);
        // In f32, the attention outputs kept for the second pass double, and
        // so does what the feed-forward blocks keep.
        let f32_saved = TrainConfig {
            bf16_saved: false,
            ..TrainConfig::default()
        };
        let wide = step_memory(&path, 8192, &f32_saved).unwrap();
        let outputs = 8192 * c.n_layer * c.n_head * c.head_dim;
        let layer =
            |cfg: &TrainConfig| 3 * graph_bytes(&hparams_of(&path), cfg, 8192) / (2 * c.n_layer);
        let kept_more = layer(&f32_saved) - layer(&quantized);
        assert!(kept_more > 0);
        assert_eq!(wide.activations - long.activations, outputs * 2 + kept_more);
        let err = step_memory(&dir.path().join("missing.gguf"), 8, &quantized).unwrap_err();
        assert!(err.to_string().contains("missing.gguf"), "{err}");
    }

    #[test]
    fn the_graph_shrinks_with_the_feed_forward_op_and_bf16_saved_projections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.gguf");
        synth::write(&path, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
        let hp = hparams_of(&path);
        let bf16 = TrainConfig::default();
        let f32_saved = TrainConfig {
            bf16_saved: false,
            ..TrainConfig::default()
        };
        let mut composed = f32_saved.clone();
        composed.lora.targets.retain(|t| t != "ffn_down");
        let [b, f, c] = [&bf16, &f32_saved, &composed].map(|cfg| graph_bytes(&hp, cfg, 100));
        let per_ff = 100 * hp.n_layer as u64 * 4 * hp.n_ff as u64;
        assert_eq!((f - b, c - f), (per_ff, per_ff));
        // Gemma's block is always composed.
        let gemma = dir.path().join("g.gguf");
        synth::write(&gemma, &SynthConfig::tiny(Arch::Gemma3)).unwrap();
        let hp = hparams_of(&gemma);
        assert_eq!(
            graph_bytes(&hp, &bf16, 100),
            graph_bytes(&hp, &composed, 100)
        );
    }

    fn hparams_of(path: &Path) -> Hparams {
        let mut f = File::open(path).unwrap();
        let content = gguf_file::Content::read(&mut f).unwrap();
        let vocab = content.tensor_infos["token_embd.weight"].shape.dims()[0];
        Hparams::from_metadata(&content.metadata, vocab).unwrap()
    }

    fn graph_bytes_of(path: &Path, tokens: usize) -> u64 {
        graph_bytes(&hparams_of(path), &TrainConfig::default(), tokens)
    }
}
