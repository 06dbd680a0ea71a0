//! A night in progress: its record, persisted after every stage, and the
//! loop over the stages that resumes after the last finished one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use reverie_agent::CancelFlag;
use reverie_core::Home;
use reverie_infer::Engine;
use reverie_store::{NightStatus, Store};

use crate::config::NightConfig;
use crate::error::NightError;
use crate::event::{NightEvent, Stage};
use crate::report::{Deployment, NightReport, Note};
use crate::stages::{self, Next};

/// How a night ended.
#[derive(Debug, Clone)]
pub struct NightOutcome {
    pub night: i64,
    /// The new checkpoint, when one was deployed.
    pub deployed: Option<PathBuf>,
    /// Why the current model was kept, when it was.
    pub kept_reason: Option<String>,
    pub report: NightReport,
}

/// What every stage works with: the night's record and its surroundings.
pub struct NightRun<'a> {
    pub id: i64,
    pub home: &'a Home,
    pub store: &'a Store,
    pub cfg: &'a NightConfig,
    pub report: NightReport,
    /// `checkpoints/night-N`: training state, data and the exported model.
    pub dir: PathBuf,
    pub cancel: &'a CancelFlag,
    on: &'a mut dyn FnMut(NightEvent),
    /// The judge and value model, loaded on first use and released before
    /// training.
    engine: Option<Engine>,
    /// Trained tonight and not exported yet (absent when resumed).
    pub trained: Option<stages::train::Trained>,
}

impl NightRun<'_> {
    /// The model the day ran on.
    pub fn base(&self) -> &Path {
        &self.report.base
    }

    /// The exported model's path.
    pub fn merged(&self) -> PathBuf {
        self.dir.join("model-q8_0.gguf")
    }

    pub fn engine(&mut self) -> Result<&Engine, NightError> {
        if self.engine.is_none() {
            self.engine = Some(self.cfg.engine(self.report.judge_model())?);
        }
        Ok(self.engine.as_ref().expect("loaded above"))
    }

    pub fn emit(&mut self, ev: NightEvent) {
        (self.on)(ev);
    }

    /// Reports item `index` (0-based) of `count`, after checking for a cancel.
    pub fn item(
        &mut self,
        stage: Stage,
        index: usize,
        count: usize,
        label: String,
    ) -> Result<(), NightError> {
        self.check_cancel()?;
        self.emit(NightEvent::Item {
            stage,
            index: index + 1,
            count,
            label,
        });
        Ok(())
    }

    pub fn check_cancel(&self) -> Result<(), NightError> {
        if self.cancel.is_cancelled() {
            return Err(NightError::Cancelled);
        }
        Ok(())
    }

    pub fn note(&mut self, stage: Stage, message: String) {
        tracing::info!(stage = stage.as_str(), "{message}");
        self.report.notes.push(Note {
            stage: Some(stage),
            message: message.clone(),
        });
        self.emit(NightEvent::Note { stage, message });
    }

    /// Ends the night keeping the current model, saying why.
    pub fn keep(&mut self, stage: Stage, why: String) -> Next {
        self.note(stage, format!("kept the current model: {why}"));
        self.report.deploy = Some(Deployment {
            kept: Some(why),
            ..Deployment::default()
        });
        Next::Kept
    }

    fn save(&self, status: NightStatus, stage: &str) -> Result<(), NightError> {
        self.store
            .update_night(self.id, status, stage, &self.report.to_json())?;
        Ok(())
    }

    /// Records a finished stage durably before the next one starts.
    fn finish(&mut self, stage: Stage, started: Instant) -> Result<(), NightError> {
        let seconds = started.elapsed().as_secs_f64();
        self.report
            .seconds
            .insert(stage.as_str().to_string(), seconds);
        self.report.done.push(stage);
        self.save(NightStatus::Running, stage.as_str())?;
        self.emit(NightEvent::StageFinished { stage, seconds });
        Ok(())
    }

    fn outcome(&self, deployed: Option<PathBuf>) -> NightOutcome {
        NightOutcome {
            night: self.id,
            kept_reason: self
                .report
                .deploy
                .as_ref()
                .and_then(|d| d.kept.clone())
                .filter(|_| deployed.is_none()),
            deployed,
            report: self.report.clone(),
        }
    }
}

/// Runs (or resumes) a night on the model at `model`, the one deployed today.
pub fn run_night(
    home: &Home,
    store: &Store,
    model: &Path,
    cfg: &NightConfig,
    cancel: &CancelFlag,
    on: &mut dyn FnMut(NightEvent),
) -> Result<NightOutcome, NightError> {
    let nights = store.nights()?;
    let mut unreadable = None;
    let resumed = match nights.last() {
        Some(n) if n.status == NightStatus::Running => match NightReport::from_json(&n.report) {
            Ok(report) => {
                tracing::info!(night = n.id, stage = %n.stage, "resuming an interrupted night");
                Some((n.id, report))
            }
            Err(e) => {
                // Kept as it is, marked failed, so a new night can start.
                store.update_night(n.id, NightStatus::Failed, "unreadable", &n.report)?;
                unreadable = Some(format!(
                    "night {} could not be resumed, its record is unreadable ({e}); it is kept, marked failed",
                    n.id
                ));
                None
            }
        },
        _ => None,
    };
    let (id, report) = match resumed {
        Some(r) => r,
        None => {
            let since = nights
                .iter()
                .rev()
                .find(|n| n.status == NightStatus::Done)
                .map_or(0, |n| n.started_ms);
            let judge = cfg.judge.resolve(store, model)?;
            let id = store.start_night()?;
            let mut report = NightReport::new(since, model.to_path_buf());
            report.judge = judge;
            (id, report)
        }
    };
    let dir = home.checkpoints().join(format!("night-{id}"));
    std::fs::create_dir_all(&dir).map_err(|e| NightError::Io(format!("{}: {e}", dir.display())))?;
    let mut run = NightRun {
        id,
        home,
        store,
        cfg,
        report,
        dir,
        cancel,
        on,
        engine: None,
        trained: None,
    };
    if let Some(why) = unreadable {
        run.note(Stage::Collect, why);
    }
    match stages_in_order(&mut run) {
        Ok(outcome) => {
            run.save(NightStatus::Done, "deploy")?;
            Ok(outcome)
        }
        Err(NightError::Cancelled) => {
            run.report.cancelled = true;
            run.save(NightStatus::Cancelled, "cancelled")?;
            Err(NightError::Cancelled)
        }
        Err(e) => {
            run.report.error = Some(e.to_string());
            // Left `running` so the next `sleep` resumes after the last stage.
            run.save(NightStatus::Running, "interrupted")?;
            Err(e)
        }
    }
}

fn stages_in_order(run: &mut NightRun<'_>) -> Result<NightOutcome, NightError> {
    for stage in Stage::ALL {
        if !stage.uses_engine() {
            // Judging is over: its memory goes back before training.
            run.engine = None;
        }
        if run.report.is_done(stage) {
            continue;
        }
        let started = Instant::now();
        run.emit(NightEvent::StageStarted { stage });
        match stages::run(stage, run)? {
            Next::Continue => run.finish(stage, started)?,
            Next::Kept => return Ok(run.outcome(None)),
            Next::Deployed(path) => {
                run.finish(stage, started)?;
                return Ok(run.outcome(Some(path)));
            }
        }
    }
    Err(NightError::Config(
        "the night finished every stage without deploying or keeping a model".into(),
    ))
}
