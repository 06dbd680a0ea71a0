use serde::{Deserialize, Serialize};

/// The stages of a night, in order.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ts_rs::TS,
)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Practice,
    Collect,
    Judge,
    Predict,
    Understand,
    Advantage,
    Train,
    Export,
    Verify,
    Deploy,
}

impl Stage {
    pub const ALL: [Stage; 10] = [
        Stage::Practice,
        Stage::Collect,
        Stage::Judge,
        Stage::Predict,
        Stage::Understand,
        Stage::Advantage,
        Stage::Train,
        Stage::Export,
        Stage::Verify,
        Stage::Deploy,
    ];

    /// Whether the stage asks the deployed model (judge, value model,
    /// understanding pass): the night keeps it loaded through them only.
    pub fn uses_engine(self) -> bool {
        matches!(self, Stage::Judge | Stage::Predict | Stage::Understand)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Practice => "practice",
            Stage::Collect => "collect",
            Stage::Judge => "judge",
            Stage::Predict => "predict",
            Stage::Understand => "understand",
            Stage::Advantage => "advantage",
            Stage::Train => "train",
            Stage::Export => "export",
            Stage::Verify => "verify",
            Stage::Deploy => "deploy",
        }
    }
}

/// Everything a night reports while it runs; the only thing it sends out.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NightEvent {
    StageStarted {
        stage: Stage,
    },
    /// Item `index` (1-based) of `count` in the current stage.
    Item {
        stage: Stage,
        index: usize,
        count: usize,
        label: String,
    },
    TrainStep {
        step: usize,
        total: usize,
        loss: f32,
        oapl: f32,
        env: f32,
        user: f32,
        tokens_per_s: f64,
        eta_s: f64,
    },
    /// Something was skipped or kept, and why.
    Note {
        stage: Stage,
        message: String,
    },
    StageFinished {
        stage: Stage,
        seconds: f64,
    },
}
