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
            for t in n.report["tasks"].as_array().into_iter().flatten() {
                if let Ok(t) = serde_json::from_value::<crate::judge::JudgedTask>(t.clone()) {
                    m.entries.push(MemoryEntry {
                        description: t.description,
                        reward: t.reward,
                        turns: t.turns,
                        age_days: age,
                    });
                }
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
}

/// The value model's prediction and the exact tokens that produced it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prediction {
    pub reward: f32,
    pub turns: u32,
    pub tokens: TokenSpan,
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
                    return Ok(Prediction {
                        reward: a.reward.min(10) as f32 / 10.0,
                        turns: a.turns.max(1),
                        tokens,
                    })
                }
                Err(e) => why = format!("not the expected JSON ({e})"),
            },
            Err(e) => why = e,
        }
    }
    Err(why)
}
