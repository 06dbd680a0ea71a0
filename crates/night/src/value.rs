//! The deployed model as value model: what it expected of a sub-task, from
//! the description and similar sub-tasks of earlier nights only.

use reverie_core::TokenSpan;
pub use reverie_embed::word_overlap;
use serde::{Deserialize, Serialize};

use crate::judge::ask_json;
use reverie_infer::Engine;

const PROMPT: &str = include_str!("../../../assets/prompts/value.md");

/// A past sub-task and how it went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub description: String,
    pub reward: f32,
    pub turns: u32,
    pub age_days: f64,
    /// The night that judged it.
    #[serde(default)]
    pub night: i64,
}

/// Sub-tasks of earlier nights. The current night's sub-tasks are added only
/// after it ends, so no judgement of tonight leaks into tonight's predictions.
#[derive(Debug, Clone, Default)]
pub struct ValueMemory {
    pub entries: Vec<MemoryEntry>,
}

impl ValueMemory {
    /// Sub-tasks of every *finished* night, aged relative to `now_ms`. A
    /// running night's own judgements are never included.
    pub fn from_finished_nights(
        store: &reverie_store::Store,
        now_ms: i64,
    ) -> Result<ValueMemory, reverie_store::StoreError> {
        let mut m = ValueMemory::default();
        for n in store
            .nights()?
            .into_iter()
            .filter(|n| n.status == reverie_store::NightStatus::Done)
        {
            let age = (now_ms - n.started_ms).max(0) as f64 / 86_400_000.0;
            let report = crate::NightReport::from_json_or_empty(&n.report);
            for t in report.tasks {
                m.entries.push(MemoryEntry {
                    description: t.description,
                    reward: t.reward,
                    turns: t.turns,
                    age_days: age,
                    night: n.id,
                });
            }
        }
        Ok(m)
    }

    /// The `k` entries most relevant to `task` by word overlap (Jaccard)
    /// weighted by `decay^age_days`.
    pub fn nearest(&self, task: &str, k: usize, decay: f64) -> Vec<&MemoryEntry> {
        self.nearest_by(task, k, decay, &word_overlap)
    }

    /// The `k` entries most relevant to `task` under `similarity`, weighted
    /// by `decay^age_days`.
    pub fn nearest_by(
        &self,
        task: &str,
        k: usize,
        decay: f64,
        similarity: &dyn Fn(&str, &str) -> f64,
    ) -> Vec<&MemoryEntry> {
        let mut scored: Vec<(f64, &MemoryEntry)> = self
            .entries
            .iter()
            .map(|e| (similarity(task, &e.description) * decay.powf(e.age_days), e))
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.into_iter().take(k).map(|(_, e)| e).collect()
    }

    /// The value model's prediction for `task`, shown the entries most
    /// relevant to it (`cfg.memory_k`, recency-weighted).
    pub fn predict(
        &self,
        engine: &Engine,
        task: &str,
        cfg: &crate::config::NightConfig,
        similarity: &Similarity,
    ) -> Result<Prediction, String> {
        let near = self.nearest_by(task, cfg.memory_k, cfg.memory_decay_per_day, &|a, b| {
            similarity.score(a, b)
        });
        predict(engine, &near, task, cfg.retries)
    }
}

/// Sentence embeddings when the embedding model is installed, else word
/// overlap.
pub struct Similarity<'s> {
    embedder: Option<reverie_embed::Embedder>,
    /// Embeddings persist in the store across nights.
    store: &'s reverie_store::Store,
}

impl<'s> Similarity<'s> {
    pub fn new(home: &reverie_core::Home, store: &'s reverie_store::Store) -> Similarity<'s> {
        let dir = reverie_embed::model_dir(home);
        let embedder = dir
            .join("model.safetensors")
            .exists()
            .then(|| reverie_embed::Embedder::load(&dir))
            .and_then(|r| {
                r.map_err(|e| tracing::warn!("embedding model unusable, using word overlap: {e}"))
                    .ok()
            });
        Similarity { embedder, store }
    }

    pub fn kind(&self) -> &'static str {
        if self.embedder.is_some() {
            reverie_embed::MODEL_KEY
        } else {
            "word-overlap"
        }
    }

    fn vector(&self, e: &reverie_embed::Embedder, text: &str) -> Option<Vec<f32>> {
        reverie_embed::embed_cached(e, self.store, &[text])
            .map_err(|err| tracing::warn!("{err}"))
            .ok()?
            .pop()
    }

    pub fn score(&self, a: &str, b: &str) -> f64 {
        match &self.embedder {
            Some(e) => match (self.vector(e, a), self.vector(e, b)) {
                (Some(x), Some(y)) => reverie_embed::cosine(&x, &y).max(0.0) as f64,
                _ => word_overlap(a, b),
            },
            None => word_overlap(a, b),
        }
    }
}

/// The value model's prediction and the exact tokens that produced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Prediction {
    /// The expected reward under the model's distribution over grades (the
    /// baseline of the task's advantage), or the answered grade where that
    /// distribution could not be read.
    pub reward: f32,
    pub turns: u32,
    pub tokens: TokenSpan,
    /// The grade the answer wrote, ÷ 10: its tokens are the training
    /// sequence, so its accuracy is what they are rewarded for.
    #[serde(default)]
    pub answered: Option<f32>,
}

impl Prediction {
    /// The grade the answer wrote (older records hold only `reward`).
    pub fn answered(&self) -> f32 {
        self.answered.unwrap_or(self.reward)
    }
}

#[derive(Deserialize)]
struct Answer {
    reward: u32,
    turns: u32,
}

/// Predicts reward and turns of `task`, shown the most relevant past tasks.
pub fn predict(
    engine: &Engine,
    near: &[&MemoryEntry],
    task: &str,
    retries: usize,
) -> Result<Prediction, String> {
    let mem = if near.is_empty() {
        "(none yet)".to_string()
    } else {
        near.iter()
            .map(|e| {
                format!(
                    "- {} → reward {}/10 in {} turns",
                    e.description,
                    (e.reward * 10.0).round(),
                    e.turns
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let prompt = PROMPT.replace("{{memory}}", &mem).replace("{{task}}", task);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "reward": {"type": "integer", "minimum": 0, "maximum": 10},
            "turns": {"type": "integer", "minimum": 1, "maximum": 20}
        },
        "required": ["reward", "turns"],
        "additionalProperties": false
    });
    let mut why = String::new();
    for attempt in 0..=retries {
        match ask_json(engine, &prompt, schema.clone(), attempt, 64) {
            Ok((text, tokens)) => match serde_json::from_str::<Answer>(text.trim()) {
                Ok(a) => {
                    let answered = a.reward.min(10) as f32 / 10.0;
                    return Ok(Prediction {
                        reward: crate::grade::expected_grades(engine, &tokens)
                            .first()
                            .copied()
                            .flatten()
                            .unwrap_or(answered),
                        turns: a.turns.max(1),
                        tokens,
                        answered: Some(answered),
                    });
                }
                Err(e) => why = format!("not the expected JSON ({e})"),
            },
            Err(e) => why = e,
        }
    }
    Err(why)
}
