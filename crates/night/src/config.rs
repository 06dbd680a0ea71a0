use reverie_practice::days::DayFamily;
use serde::{Deserialize, Serialize};

/// A practice batch the night starts with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PracticeBatch {
    /// `arithmetic`, `strings` or `ledger`.
    pub family: String,
    pub tasks: usize,
}

/// Which model judges the day, predicts what was expected and scores the
/// understanding pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeModel {
    /// The model as installed, before any night (the root of the deployed
    /// checkpoint's line): a night's training cannot move the rewards of
    /// the nights after it. With the deployed model as judge, three nights
    /// on simulated days moved its agreement with the hidden checks from
    /// κ 0.75 to 0.57 to −0.20, and its mean reward for passed requests
    /// from 0.86 to 0.42.
    #[default]
    Installed,
    /// The model the day ran on.
    Deployed,
    /// Another GGUF, such as a larger model of the same family.
    File(std::path::PathBuf),
}

impl JudgeModel {
    /// `installed`, `deployed` or the path of a GGUF file.
    pub fn parse(text: &str) -> Result<JudgeModel, crate::NightError> {
        match text {
            "installed" => Ok(JudgeModel::Installed),
            "deployed" => Ok(JudgeModel::Deployed),
            path if std::path::Path::new(path).is_file() => Ok(JudgeModel::File(path.into())),
            other => Err(crate::NightError::Config(format!(
                "the judge model {other:?} is neither `installed`, `deployed` nor a GGUF file that exists"
            ))),
        }
    }

    /// The file that judges a night whose day ran on `day_model`.
    pub fn resolve(
        &self,
        store: &reverie_store::Store,
        day_model: &std::path::Path,
    ) -> Result<std::path::PathBuf, crate::NightError> {
        match self {
            JudgeModel::Installed => crate::checkpoint::installed(store, day_model),
            JudgeModel::Deployed => Ok(day_model.to_path_buf()),
            JudgeModel::File(p) if p.is_file() => Ok(p.clone()),
            JudgeModel::File(p) => Err(crate::NightError::Config(format!(
                "the judge model {} is not a file; set `judge` in night.json to `installed`, `deployed` or an existing GGUF",
                p.display()
            ))),
        }
    }
}

/// How a night runs; every field has a documented default.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct NightConfig {
    /// Practice batches the night starts with (none by default): the model
    /// writes tasks of each family at the level where about half the
    /// attempts pass, attempts each one `practice_samples` times, and the
    /// night trains on the verdicts.
    pub practice: Vec<PracticeBatch>,
    pub practice_samples: usize,
    /// Scale of the negative advantage of a checked attempt that did worse
    /// than its group (a failed practice attempt, a tasker's task that was
    /// too easy or too hard). At 1 it counts like a pass: on the default
    /// model, pushing whole failed attempts down moved mass onto other
    /// non-answers (calls in code fences, copies of the calculator's
    /// output or of a tool error), and nights that broke the answer format
    /// were refused at verify. At 0 a night learns from what worked only;
    /// the token marks on repeated calls and stray ends still apply.
    /// Measured on the default model, arithmetic, 30 greedy eval tasks,
    /// three nights of 12 practice tasks × 6 attempts at a learning rate of
    /// 2e-4: at 0, every night deployed and 15/30 → 23/30 (8 gained, none
    /// lost); at 1 (and 1e-4), the first night was refused and three
    /// nights gave 17/30.
    pub failed_attempt_weight: f32,
    /// Scale of the negative advantage of a sub-task of the day that the
    /// judge rewarded below what the value model expected (the user's own
    /// 👍/👎 and ↻ are not scaled). At 0 a day night learns from what went
    /// better than expected only, as practice does at
    /// `failed_attempt_weight` 0 — and on days it does worse: one simulated
    /// day (24 arithmetic and files requests, the default model, the same
    /// day and judge as at 1) took the verify gate's arithmetic from 14 of
    /// 16 to 3 (11 lost, none gained), where at 1 it went to 15 of 16.
    pub failed_day_weight: f32,
    /// The judge and value model.
    pub judge: JudgeModel,
    /// Messages per judge window.
    pub window: usize,
    /// Extra judge or value attempts (new seed) after an invalid answer.
    pub retries: usize,
    /// Past sub-tasks shown to the value model.
    pub memory_k: usize,
    /// Per day of age, a past sub-task's relevance is multiplied by this.
    pub memory_decay_per_day: f64,
    /// A sub-task at or above this reward counts as solved; only solved
    /// sub-tasks get the turn bonus.
    pub success_threshold: f32,
    /// Weight of `(predicted turns − turns) / predicted turns` in the reward.
    pub turn_weight: f32,
    /// Reward of a practice attempt that passed only in the answer the
    /// harness asked for after stopping its turn (tool-call limit, failing
    /// calls, a loop); an attempt that stopped and answered by itself
    /// earns 1. Full marks by default: at 0.5, a right answer worked out
    /// without the tool was worth twice one found with it (a small model
    /// loops on nearly every call), and after one night most attempts no
    /// longer called the tool. Loops are taught by the repeated-call mark
    /// and cut short by the harness instead.
    pub stopped_pass_reward: f32,
    /// Train the world model (ECHO) on practice episodes' tool results and
    /// prompts too; off by default, so practice trains the policy only (day
    /// trajectories keep ECHO). Measured on the default model, arithmetic,
    /// 20 greedy eval tasks, three nights each at a learning rate of 1e-4:
    /// with ECHO on practice and 4 attempts per task, 45 % → 50 %; without
    /// it and with 6 attempts, 45 % → 55 %, then 65 % after two more nights,
    /// every night deployed. With ECHO on, its loss on the calculator's
    /// replies fell from 0.69 to 0.02 in a night: it memorised them, and at
    /// 2e-4 the model wrote tool output in place of its calls.
    pub practice_echo: bool,
    /// The night keeps the old model if the new one's perplexity on the
    /// sanity text is more than this fraction worse.
    pub max_perplexity_regression: f64,
    /// Per-token advantage of the last token of a reply whose end of turn
    /// the model called unintended.
    pub stray_end_advantage: f32,
    /// Advantage of a tool call that repeated the call just before it to no
    /// effect (same arguments, same result), shared evenly by the call's
    /// tokens: the choice to call again instead of using the result, in
    /// whatever form the call is written.
    pub repeated_call_advantage: f32,
    /// Tasks per family in the verify stage's success check (0: off): each
    /// family ever practised and the held-out ones are measured on the old
    /// and the new model, and a family that loses more of them than it
    /// gains keeps the old model. Sixteen, so that one task is not the
    /// whole margin.
    pub verify_tasks: usize,
    /// Desk-work families the verify stage checks as well, `verify_tasks`
    /// each, as simulated requests in a scratch data folder: a night on
    /// ordinary days once took `files` from 21 to 12 of 30 fresh tasks
    /// while every practice family held, and was deployed. `files` and
    /// `notes` by default (the default model passes about half of each);
    /// `edit` can be added, `[]` turns the desk checks off.
    pub verify_desk: Vec<DayFamily>,
    /// Share of the judge's sub-tasks that get the understanding pass
    /// (practice and tasker rewards are measured, so they never do).
    pub understanding_fraction: f64,
    /// The night takes at least this many optimizer steps: when it has
    /// fewer than `train.batch_size × min_train_steps` sequences, its
    /// batches shrink (down to one sequence) rather than the whole night
    /// becoming one step.
    pub min_train_steps: usize,
    pub train: reverie_train::TrainConfig,
    /// Clean the agent's notes each night: merge notes that say the same
    /// thing, put away finished to-dos and notes untouched for half a year
    /// (every change undoable, listed in the morning summary).
    pub clean_notes: bool,
    /// Longest training sequence: a sub-task longer than this keeps its
    /// first user message and its end ([`crate::dataset::cut`]).
    pub max_train_tokens: usize,
    /// Context size of the judge and value model.
    pub n_ctx: u32,
    /// Layers of the judge/value model offloaded to the GPU (CUDA builds).
    pub gpu_layers: u32,
}

impl Default for NightConfig {
    fn default() -> Self {
        // A night learns from a few dozen sequences in eight steps: twice
        // the trainer's own learning rate (measured in `bench nights`).
        let train = reverie_train::TrainConfig {
            checkpoint_every: 1,
            optim: reverie_train::optim::OptimConfig {
                lr: 2e-4,
                ..Default::default()
            },
            ..reverie_train::TrainConfig::default()
        };
        NightConfig {
            practice: Vec::new(),
            practice_samples: 6,
            failed_attempt_weight: 0.0,
            failed_day_weight: 1.0,
            judge: JudgeModel::Installed,
            window: 10,
            retries: 2,
            memory_k: 5,
            memory_decay_per_day: 0.9,
            success_threshold: 0.5,
            turn_weight: 0.1,
            stopped_pass_reward: 1.0,
            practice_echo: false,
            max_perplexity_regression: 0.10,
            verify_tasks: 16,
            verify_desk: vec![DayFamily::Files, DayFamily::Notes],
            understanding_fraction: 0.3,
            min_train_steps: 8,
            stray_end_advantage: -1.0,
            repeated_call_advantage: -1.0,
            train,
            clean_notes: true,
            max_train_tokens: 24_576,
            n_ctx: 8192,
            gpu_layers: 0,
        }
    }
}

/// What a shell's own options change in the night's configuration: the
/// same for the window (launch flags and settings) and `reverie sleep`.
#[derive(Debug, Clone, Default)]
pub struct NightOverrides {
    /// Layers of the judge and value model offloaded to the GPU.
    pub gpu_layers: Option<u32>,
    /// Practice batches (replace the file's when not empty).
    pub practice: Vec<PracticeBatch>,
    pub practice_samples: Option<usize>,
    pub judge: Option<JudgeModel>,
}

impl NightConfig {
    /// The night's configuration: `file` when given, else `night.json` in
    /// the data folder when present, else the defaults; then `overrides`.
    /// A file that does not parse is an error that names it, never
    /// silently the defaults.
    pub fn load(
        home: &reverie_core::Home,
        file: Option<&std::path::Path>,
        overrides: &NightOverrides,
    ) -> Result<NightConfig, crate::NightError> {
        let default_file = home.root().join("night.json");
        let path = file.unwrap_or(&default_file);
        let mut cfg = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                crate::NightError::Config(format!("{}: {e}; fix or delete it", path.display()))
            })?,
            Err(e) if file.is_none() && e.kind() == std::io::ErrorKind::NotFound => {
                NightConfig::default()
            }
            Err(e) => {
                return Err(crate::NightError::Config(format!(
                    "cannot read {}: {e}",
                    path.display()
                )))
            }
        };
        if let Some(n) = overrides.gpu_layers {
            cfg.gpu_layers = n;
        }
        if !overrides.practice.is_empty() {
            crate::check_batches(&overrides.practice)?;
            cfg.practice = overrides.practice.clone();
        }
        if let Some(n) = overrides.practice_samples {
            cfg.practice_samples = n;
        }
        if let Some(j) = &overrides.judge {
            cfg.judge = j.clone();
        }
        Ok(cfg)
    }

    /// The trainer's configuration for a night of `sequences` sequences.
    pub fn train_for(&self, sequences: usize) -> reverie_train::TrainConfig {
        // Rounded down, so that there are at least `min_train_steps` steps
        // (17 sequences made 6 batches of 3 when rounded up).
        let per_step = sequences / self.min_train_steps.max(1);
        reverie_train::TrainConfig {
            batch_size: self.train.batch_size.min(per_step).max(1),
            ..self.train.clone()
        }
    }

    /// The model at `model` as the night's judge, value model or practice
    /// partner: one slot, the night's context and GPU layers.
    pub fn engine(
        &self,
        model: &std::path::Path,
    ) -> Result<reverie_infer::Engine, reverie_infer::InferError> {
        let config = reverie_infer::EngineConfig::sized(1, self.n_ctx, self.gpu_layers, None);
        reverie_infer::Engine::load(model, config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn night_json_then_the_shells_options_make_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let home = reverie_core::Home::new(dir.path());
        let none = NightOverrides::default();
        let cfg = NightConfig::load(&home, None, &none).unwrap();
        assert_eq!(
            cfg.window,
            NightConfig::default().window,
            "no file: defaults"
        );
        std::fs::write(
            home.root().join("night.json"),
            r#"{"window": 4, "gpu_layers": 3}"#,
        )
        .unwrap();
        let cfg = NightConfig::load(&home, None, &none).unwrap();
        assert_eq!((cfg.window, cfg.gpu_layers), (4, 3));
        assert_eq!(cfg.judge, JudgeModel::Installed, "the default judge");
        std::fs::write(
            home.root().join("night.json"),
            r#"{"window": 4, "gpu_layers": 3, "judge": "deployed"}"#,
        )
        .unwrap();
        let cfg = NightConfig::load(&home, None, &none).unwrap();
        assert_eq!(cfg.judge, JudgeModel::Deployed);
        let flags = NightOverrides {
            gpu_layers: Some(99),
            practice: vec![PracticeBatch {
                family: "ledger".into(),
                tasks: 2,
            }],
            practice_samples: Some(3),
            judge: Some(JudgeModel::Installed),
        };
        let cfg = NightConfig::load(&home, None, &flags).unwrap();
        assert_eq!(
            (cfg.window, cfg.gpu_layers, cfg.practice_samples),
            (4, 99, 3)
        );
        assert_eq!(cfg.judge, JudgeModel::Installed, "the flag wins");
        assert_eq!(cfg.practice, flags.practice);
        let held_out = NightOverrides {
            practice: vec![PracticeBatch {
                family: "units".into(),
                tasks: 2,
            }],
            ..NightOverrides::default()
        };
        assert!(NightConfig::load(&home, None, &held_out).is_err());
        let e = JudgeModel::parse("/no/such/judge.gguf")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("neither `installed`, `deployed` nor a GGUF file"),
            "{e}"
        );
        let gone = JudgeModel::File(dir.path().join("gone.gguf"));
        let store = reverie_store::Store::open(&home).unwrap();
        let e = gone
            .resolve(&store, Path::new("day.gguf"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is not a file") && e.contains("night.json"),
            "{e}"
        );
        std::fs::write(home.root().join("night.json"), "{window: 4").unwrap();
        let e = NightConfig::load(&home, None, &none)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("night.json") && e.contains("fix or delete it"),
            "{e}"
        );
        let missing = dir.path().join("elsewhere.json");
        let e = NightConfig::load(&home, Some(&missing), &none)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot read") && e.contains("elsewhere.json"),
            "{e}"
        );
    }

    #[test]
    fn small_nights_shrink_their_batches_to_keep_enough_steps() {
        let cfg = NightConfig::default();
        let batch = |n| cfg.train_for(n).batch_size;
        assert_eq!(batch(1), 1);
        assert_eq!(batch(8), 1);
        assert_eq!(batch(40), 5);
        // At least eight steps, however the sequences divide.
        assert_eq!(batch(17), 2);
        let steps = |n: usize| n.div_ceil(batch(n));
        assert!((1..600).all(|n| steps(n) >= 8.min(n)));
        assert_eq!(batch(512), 64);
        assert_eq!(batch(5000), 64);
        let one_step = NightConfig {
            min_train_steps: 0,
            ..NightConfig::default()
        };
        assert_eq!(one_step.train_for(40).batch_size, 40);
    }
}
