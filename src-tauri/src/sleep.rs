//! The night in the window: start (by button or schedule), progress to any
//! number of watchers, cancel, the morning summary, checkpoints.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use reverie_night::trigger::{Observed, Schedule};
use reverie_night::{CancelFlag, NightConfig, NightEvent, NightOutcome, NightReport};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::failure::{refuse, Reply};
use crate::state::App;

/// What a watcher of the night receives.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SleepEvent {
    /// A night began: watchers start a fresh progress view.
    Started,
    Progress {
        event: NightEvent,
    },
    /// The night ended: `deployed` is the new model, or `kept_reason` says
    /// why the old one stays.
    Finished {
        night: i64,
        deployed: Option<String>,
        kept_reason: Option<String>,
        report: Box<NightReport>,
    },
    Failed {
        message: String,
    },
}

#[derive(Default)]
struct Shared {
    running: bool,
    /// Everything the current (or last) night sent, for late watchers.
    events: Vec<SleepEvent>,
    watchers: Vec<Channel<SleepEvent>>,
}

#[derive(Default)]
pub struct NightState {
    shared: Arc<(Mutex<Shared>, Condvar)>,
    cancel: Mutex<Option<CancelFlag>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn broadcast(shared: &(Mutex<Shared>, Condvar), ev: SleepEvent) {
    let mut s = lock(&shared.0);
    s.watchers.retain(|w| w.send(ev.clone()).is_ok());
    s.events.push(ev);
}

impl NightState {
    pub fn running(&self) -> bool {
        lock(&self.shared.0).running
    }

    /// While a night runs: a function that blocks until it ends.
    pub fn waiter(&self) -> Option<Box<dyn FnOnce() + Send>> {
        if !self.running() {
            return None;
        }
        let shared = self.shared.clone();
        Some(Box::new(move || {
            let (m, cv) = &*shared;
            let mut s = lock(m);
            while s.running {
                s = cv.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        }))
    }

    pub fn cancel(&self) {
        if let Some(c) = lock(&self.cancel).as_ref() {
            c.cancel();
        }
    }

    pub fn join(&self) {
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }

    fn watch(&self, w: Channel<SleepEvent>) {
        let mut s = lock(&self.shared.0);
        for ev in &s.events {
            let _ = w.send(ev.clone());
        }
        s.watchers.push(w);
    }
}

/// Starts the night on its own thread. Chat messages sent meanwhile wait.
pub fn start(app: &Arc<App>) -> anyhow::Result<()> {
    let mut running = lock(&app.night.shared.0);
    if running.running {
        anyhow::bail!("a night is already running");
    }
    if let Some(pid) = reverie_night::lock::sleeping(&app.home) {
        anyhow::bail!("a night is already running in process {pid} (`reverie sleep`)");
    }
    let model = app
        .model_path()
        .ok_or_else(|| anyhow::anyhow!("there is no model to train; choose one first"))?;
    let cfg = NightConfig::load(&app.home, None, &app.night_overrides())?;
    let guard = reverie_night::lock::SleepGuard::acquire(&app.home)?;
    running.running = true;
    running.events.clear();
    drop(running);
    broadcast(&app.night.shared, SleepEvent::Started);
    let cancel = CancelFlag::default();
    *lock(&app.night.cancel) = Some(cancel.clone());
    let app2 = app.clone();
    let handle = std::thread::spawn(move || {
        let _guard = guard;
        let app = app2;
        let shared = app.night.shared.clone();
        let mut on = |ev: NightEvent| broadcast(&shared, SleepEvent::Progress { event: ev });
        let result = through_the_night(&app, || {
            reverie_night::run_night(&app.home, &app.store, &model, &cfg, &cancel, &mut on)
        });
        let end = match result {
            Ok(out) => SleepEvent::Finished {
                night: out.night,
                deployed: out.deployed.map(|p| p.display().to_string()),
                kept_reason: out.kept_reason,
                report: Box::new(out.report),
            },
            Err(e) => SleepEvent::Failed {
                message: e.to_string(),
            },
        };
        broadcast(&shared, end);
        let (m, cv) = &*shared;
        lock(m).running = false;
        cv.notify_all();
    });
    *lock(&app.night.thread) = Some(handle);
    Ok(())
}

/// Runs `night` with the day model parked: the trainer needs the memory
/// it holds (all of it on a GPU), so the day engine gives it back and loads
/// again in the morning, the deployed checkpoint where there is one, else
/// the model it had; chat sent meanwhile waits in the engine's queue.
fn through_the_night(
    app: &App,
    night: impl FnOnce() -> Result<NightOutcome, reverie_night::NightError>,
) -> Result<NightOutcome, reverie_night::NightError> {
    let day = app.loaded();
    if let Some(rt) = &day {
        if let Err(e) = rt.engine.park() {
            tracing::warn!("the day model stays loaded through the night: {e}");
        }
    }
    let result = night();
    if let Ok(Some(path)) = result.as_ref().map(|out| &out.deployed) {
        if let Err(e) = app.wake_up(path) {
            tracing::error!("could not load the new checkpoint: {e:#}");
        }
    }
    if let Some(rt) = &day {
        if let Err(e) = rt.engine.resume() {
            tracing::error!("could not load the day model again: {e:#}");
        }
    }
    result
}

#[derive(Serialize)]
pub struct SleepEstimate {
    #[serde(flatten)]
    pub estimate: reverie_night::Estimate,
    pub model: Option<String>,
    pub running: bool,
}

#[tauri::command]
pub async fn sleep_estimate(app: State<'_, Arc<App>>) -> Reply<SleepEstimate> {
    Ok(SleepEstimate {
        estimate: reverie_night::estimate(&app.store)?,
        model: app.model_path().map(|p| p.display().to_string()),
        running: app.night.running(),
    })
}

/// Starts the night now; its progress goes to the windows watching
/// (`watch_sleep`).
#[tauri::command]
pub async fn start_sleep(app: State<'_, Arc<App>>) -> Reply<()> {
    start(&app)?;
    Ok(())
}

/// Follows the running night (or replays the last one) from its start.
#[tauri::command]
pub async fn watch_sleep(app: State<'_, Arc<App>>, on_event: Channel<SleepEvent>) -> Reply<bool> {
    app.night.watch(on_event);
    Ok(app.night.running())
}

#[tauri::command]
pub async fn cancel_sleep(app: State<'_, Arc<App>>) -> Reply<()> {
    if !app.night.running() {
        return refuse("no night is running");
    }
    app.night.cancel();
    Ok(())
}

#[derive(Serialize)]
pub struct CheckpointView {
    pub id: i64,
    pub path: String,
    pub night: Option<i64>,
    pub created_ms: i64,
    pub active: bool,
    pub exists: bool,
}

#[tauri::command]
pub async fn list_checkpoints(app: State<'_, Arc<App>>) -> Reply<Vec<CheckpointView>> {
    Ok(app
        .store
        .checkpoints()?
        .into_iter()
        .map(|c| CheckpointView {
            exists: std::path::Path::new(&c.path).exists(),
            id: c.id,
            path: c.path,
            night: c.night,
            created_ms: c.created_ms,
            active: c.active,
        })
        .collect())
}

#[tauri::command]
pub async fn rollback_checkpoint(app: State<'_, Arc<App>>, id: i64) -> Reply<String> {
    if app.night.running() {
        return refuse("a night is running; cancel it or wait for the morning first");
    }
    let path = reverie_night::checkpoint::rollback(&app.home, &app.store, id)?;
    app.wake_up(&path)?;
    Ok(path.display().to_string())
}

/// Starts the night by itself when the settings' schedule says so
/// (`reverie_night::Schedule`); looks twice a minute.
pub fn spawn_scheduler(app: Arc<App>) {
    std::thread::spawn(move || {
        let mut schedule = Schedule::default();
        loop {
            std::thread::sleep(std::time::Duration::from_secs(30));
            let s = app.settings();
            // A changed setting starts a new schedule; an unchanged one
            // keeps its memory of the time of day passing.
            let wanted = Schedule::new(s.sleep_at.as_deref(), s.idle_minutes).unwrap_or_default();
            if (wanted.at, wanted.idle_minutes) != (schedule.at, schedule.idle_minutes) {
                schedule = wanted;
            }
            if app.night.running() || !schedule.is_set() {
                continue;
            }
            let seen = match Observed::now(&app.store, !s.practice.is_empty()) {
                Ok(seen) => seen,
                Err(e) => {
                    tracing::warn!("the schedule could not read the store: {e}");
                    continue;
                }
            };
            if schedule.due(&seen) {
                tracing::info!("starting the night by schedule");
                if let Err(e) = start(&app) {
                    tracing::warn!("the scheduled night did not start: {e:#}");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Launch;

    fn synth(dir: &std::path::Path, name: &str, seed: u64) -> std::path::PathBuf {
        let path = dir.join(name);
        let mut cfg = reverie_gguf::synth::SynthConfig::tiny(reverie_gguf::synth::Arch::Qwen2);
        cfg.seed = seed;
        reverie_gguf::synth::write(&path, &cfg).unwrap();
        path
    }

    fn outcome(deployed: Option<std::path::PathBuf>) -> NightOutcome {
        NightOutcome {
            night: 1,
            deployed,
            kept_reason: None,
            report: NightReport::default(),
        }
    }

    #[test]
    fn the_day_model_is_parked_for_the_night_and_back_in_the_morning() {
        let dir = tempfile::tempdir().unwrap();
        let day = synth(dir.path(), "day.gguf", 1);
        let launch = Launch {
            model: Some(day.clone()),
            ctx: 1024,
            threads: Some(1),
            gpu_layers: 0,
        };
        let app = App::open(reverie_core::Home::new(dir.path().join("home")), launch).unwrap();
        let engine = app.runtime().unwrap().engine.clone();
        let answers = |engine: &reverie_infer::Engine| {
            let ids = engine.tokenize("hello", false);
            let req = reverie_infer::GenerateRequest::new(
                reverie_core::ChannelId(1),
                ids,
                reverie_core::SamplingParams::greedy(3),
            );
            engine.generate(req).unwrap().complete().unwrap().ids
        };
        let before = answers(&engine);

        // A night that keeps the model: parked during it, the same after.
        let kept = through_the_night(&app, || {
            assert!(
                engine.parked(),
                "the day model is parked while the night runs"
            );
            Ok(outcome(None))
        });
        assert!(kept.is_ok());
        assert!(!engine.parked());
        assert_eq!(engine.model_path(), day);
        assert_eq!(answers(&engine), before);

        // A failed night gives the day model back too.
        let failed = through_the_night(&app, || {
            assert!(engine.parked());
            Err(reverie_night::NightError::Config("broken".into()))
        });
        assert!(failed.is_err());
        assert!(!engine.parked());

        // A deployed night wakes up on its checkpoint.
        let checkpoint = synth(dir.path(), "night-1.gguf", 2);
        through_the_night(&app, || Ok(outcome(Some(checkpoint.clone())))).unwrap();
        assert!(!engine.parked());
        assert_eq!(engine.model_path(), checkpoint);
        assert_eq!(answers(&engine).len(), 3);
        app.unload();
    }
}
