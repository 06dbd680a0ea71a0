//! What a training step needs in memory, from a GGUF's header alone: the
//! frozen weights as a run holds them and the activations of one step, so
//! `reverie doctor` can say whether a night fits before it starts, and the
//! trainer can choose between keeping the graph and recomputing layers.

use std::fs::File;
use std::path::Path;

use candle_core::quantized::{gguf_file, GgmlDType};
use serde::Serialize;

use crate::error::TrainError;
use crate::hparams::Hparams;
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
/// `4·(8·n_embd + 4·n_ff)` per token and layer (measured on the default
/// model: 5.2 GB at 2,048 tokens).
pub fn graph_bytes(hp: &Hparams, tokens: usize) -> u64 {
    (tokens * hp.n_layer * 4 * (8 * hp.n_embd + 4 * hp.n_ff)) as u64
}

/// Whether a step on `tokens` tokens keeps the whole graph rather than
/// recomputing each layer: yes when recomputation is off; else only for
/// sequences of at most `recompute_above` tokens whose graph takes less
/// than half of the memory available now.
pub fn keeps_graph(cfg: &TrainConfig, hp: &Hparams, tokens: usize) -> bool {
    !cfg.recompute
        || (tokens <= cfg.recompute_above
            && available().is_none_or(|free| graph_bytes(hp, tokens) < free / 2))
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
        graph_bytes(&hp, tokens) + head
    } else {
        // Each layer's input, then one layer's graph at a time.
        t * hp.n_layer as u64 * width(hp.n_embd)
            + graph_bytes(&hp, tokens) / hp.n_layer as u64
            + head
    };
    Ok(StepMemory {
        frozen,
        activations,
        keeps_graph: keeps,
    })
}
