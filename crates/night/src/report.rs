//! The night's record: one typed section per stage, stored as JSON in the
//! night's row after every finished stage and read back to resume it, to
//! draw the morning summary and to seed later nights' value memory.
//!
//! Every field has a default, so reports written by earlier versions (which
//! lacked sections added since) still load; `tests/report_schema.rs` loads
//! one of each. The window's TypeScript copy (`ui/src/nightReport.ts`) is
//! generated from these types and checked by `tests/typescript.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use reverie_train::export::ExportReport;
use reverie_train::loss::LossTerms;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::event::Stage;
use crate::judge::JudgedTask;
use crate::value::Prediction;
use crate::verify::FamilyCheck;

/// Everything a night found and did, by stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct NightReport {
    /// Messages from this time on (ms since the epoch) are the night's day.
    #[ts(type = "number")]
    pub since_ms: i64,
    /// The model the day ran on: the base of training.
    #[ts(type = "string")]
    pub base: PathBuf,
    /// The judge and value model (empty in reports from before it was
    /// chosen apart from `base`: then `base`).
    #[ts(type = "string")]
    pub judge: PathBuf,
    /// Stages finished, in order; a resumed night starts after the last.
    pub done: Vec<Stage>,
    /// Wall time of each finished stage.
    pub seconds: BTreeMap<String, f64>,
    /// Something skipped or kept, and why.
    pub notes: Vec<Note>,
    /// One line per practice batch: family, level, attempts passed.
    pub practice: Vec<String>,
    pub channels: Vec<CollectedChannel>,
    pub counts: Option<Counts>,
    /// The judge's sub-tasks, then the practice episodes with their checks.
    pub tasks: Vec<JudgedTask>,
    /// The judge against the person's 👍/👎, where they rated replies.
    pub judge_agreement: Option<crate::feedback::JudgeAgreement>,
    pub memory: Option<MemoryReport>,
    /// The value model's prediction for each of `tasks`.
    pub predictions: Vec<Option<Prediction>>,
    /// The understanding score of each of `tasks` that was sampled.
    pub understanding: Vec<Option<f32>>,
    /// The advantage of each of `tasks` (none: not trained on).
    pub advantages: Vec<Option<f32>>,
    pub summary: Option<Summary>,
    pub train: Option<TrainReport>,
    pub export: Option<ExportSection>,
    pub verify: Option<Verdict>,
    pub deploy: Option<Deployment>,
    pub cancelled: bool,
    /// Why the night stopped, when it failed (it resumes on the next sleep).
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct Note {
    pub stage: Option<Stage>,
    pub message: String,
}

/// A channel with messages since the last night, from message `from` on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct CollectedChannel {
    #[ts(type = "number")]
    pub channel: i64,
    pub name: String,
    pub from: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct Counts {
    pub messages: usize,
    pub channels: usize,
}

/// The value model's memory as the night used it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct MemoryReport {
    /// Sub-tasks of finished nights it holds.
    pub entries: usize,
    /// How nearness was measured: an embedding model's name or word overlap.
    pub similarity: String,
    /// Distinct descriptions the value model was asked about.
    pub asked: Option<usize>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct Summary {
    pub tasks: usize,
    pub mean_reward: Option<f32>,
    pub mean_predicted: Option<f32>,
    pub mean_abs_prediction_error: Option<f32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct TrainReport {
    /// The night's training set (`reverie train --data` takes it).
    #[ts(type = "string | null")]
    pub data: Option<PathBuf>,
    pub sequences: usize,
    /// Sequences left out: no advantage, mark, reward or ECHO tokens.
    pub without_signal: usize,
    pub steps: usize,
    pub losses: Vec<LossTerms>,
    pub tokens: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct ExportSection {
    #[ts(type = "string")]
    pub path: PathBuf,
    pub report: ExportReport,
}

/// Whether the new model may replace the old one, and the measurements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct Verdict {
    pub ok: bool,
    /// Why not, when not.
    pub why: String,
    pub perplexity_before: Option<f64>,
    pub perplexity_after: Option<f64>,
    /// The earlier night whose measurement of the old model was reused.
    #[ts(type = "number | null")]
    pub perplexity_before_from_night: Option<i64>,
    /// Success on the same tasks with the old and the new model.
    pub tasks: Vec<FamilyCheck>,
}

/// The deploy stage's outcome: a checkpoint, or the reason none was made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct Deployment {
    #[ts(type = "number | null")]
    pub checkpoint: Option<i64>,
    #[ts(type = "string | null")]
    pub path: Option<PathBuf>,
    pub kept: Option<String>,
}

impl NightReport {
    /// A new night's report: its day starts at `since_ms`, it trains `base`.
    pub fn new(since_ms: i64, base: PathBuf) -> NightReport {
        NightReport {
            since_ms,
            base,
            ..NightReport::default()
        }
    }

    /// The judge and value model's file.
    pub fn judge_model(&self) -> &std::path::Path {
        if self.judge.as_os_str().is_empty() {
            &self.base
        } else {
            &self.judge
        }
    }

    /// A stored report. Sections this version does not know are ignored,
    /// those it knows but the report lacks are empty.
    pub fn from_json(v: &serde_json::Value) -> Result<NightReport, serde_json::Error> {
        if v.is_null() {
            return Ok(NightReport::default());
        }
        NightReport::deserialize(v)
    }

    /// A stored report for display: one this version cannot read is shown
    /// empty with its error (the row itself is never changed by reading).
    pub fn from_json_or_empty(v: &serde_json::Value) -> NightReport {
        NightReport::from_json(v).unwrap_or_else(|e| NightReport {
            error: Some(format!("this night's record could not be read: {e}")),
            ..NightReport::default()
        })
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a night report is plain data")
    }

    pub fn is_done(&self, stage: Stage) -> bool {
        self.done.contains(&stage)
    }

    /// Total wall time of the finished stages.
    pub fn total_seconds(&self) -> f64 {
        self.seconds.values().sum()
    }
}
