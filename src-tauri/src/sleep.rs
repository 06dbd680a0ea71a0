//! The night in the window: start (by button or schedule), progress to any
//! number of watchers, cancel, the morning summary, checkpoints.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use reverie_night::{NightConfig, NightEvent};
use serde::Serialize;
use serde_json::Value;
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
        report: Value,
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
    cancel: Mutex<Option<Arc<AtomicBool>>>,
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
            c.store(true, Ordering::SeqCst);
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

fn night_config(app: &App) -> anyhow::Result<NightConfig> {
    let p = app.home.root().join("night.json");
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| anyhow::anyhow!("{}: {e}; fix or delete it", p.display())),
        Err(_) => Ok(NightConfig::default()),
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
    let mut cfg = night_config(app)?;
    let practice = app.settings().practice;
    if !practice.is_empty() {
        cfg.practice = practice;
    }
    let guard = reverie_night::lock::SleepGuard::acquire(&app.home)?;
    running.running = true;
    running.events.clear();
    drop(running);
    broadcast(&app.night.shared, SleepEvent::Started);
    let cancel = Arc::new(AtomicBool::new(false));
    *lock(&app.night.cancel) = Some(cancel.clone());
    let app2 = app.clone();
    let handle = std::thread::spawn(move || {
        let _guard = guard;
        let app = app2;
        let shared = app.night.shared.clone();
        let mut on = |ev: NightEvent| broadcast(&shared, SleepEvent::Progress { event: ev });
        let result =
            reverie_night::run_night(&app.home, &app.store, &model, &cfg, &cancel, &mut on);
        let end = match result {
            Ok(out) => {
                if let Some(path) = &out.deployed {
                    if let Err(e) = app.wake_up(path) {
                        tracing::error!("could not load the new checkpoint: {e:#}");
                    }
                }
                SleepEvent::Finished {
                    night: out.night,
                    deployed: out.deployed.map(|p| p.display().to_string()),
                    kept_reason: out.kept_reason,
                    report: out.report,
                }
            }
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

#[derive(Serialize)]
pub struct SleepEstimate {
    pub messages: usize,
    pub channels: usize,
    /// A rough guess from the last night's pace (or a default pace).
    pub seconds: f64,
    pub model: Option<String>,
    pub running: bool,
}

#[tauri::command]
pub async fn sleep_estimate(app: State<'_, Arc<App>>) -> Reply<SleepEstimate> {
    let nights = app.store.nights()?;
    let since = nights.last().map_or(0, |n| n.started_ms);
    let msgs = app.store.messages_since(since)?;
    let channels: std::collections::HashSet<i64> = msgs.iter().map(|m| m.channel.0).collect();
    // Seconds per message of the last finished night, else what a 0.5B model
    // takes on two CPU cores (about 12 s a message, 20 s to load and check).
    let pace = nights
        .iter()
        .rev()
        .find_map(|n| {
            let secs: f64 = n.report["seconds"]
                .as_object()?
                .values()
                .filter_map(Value::as_f64)
                .sum();
            let count = n.report["counts"]["messages"].as_f64()?;
            (count > 0.0).then(|| secs / count)
        })
        .unwrap_or(12.0);
    Ok(SleepEstimate {
        messages: msgs.len(),
        channels: channels.len(),
        seconds: 20.0 + pace * msgs.len() as f64,
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

/// Starts the night by itself at the set time, or after the set idle
/// minutes once something new was said; checks twice a minute.
pub fn spawn_scheduler(app: Arc<App>) {
    std::thread::spawn(move || {
        let mut last_fired_day: Option<i64> = None;
        loop {
            std::thread::sleep(std::time::Duration::from_secs(30));
            let s = app.settings();
            if app.night.running() || (s.sleep_at.is_none() && s.idle_minutes.is_none()) {
                continue;
            }
            let now_ms = reverie_night::trigger::now_ms();
            let day = now_ms / 86_400_000;
            let last_night = app
                .store
                .nights()
                .ok()
                .and_then(|n| n.last().map(|n| n.started_ms));
            let last_msg = app.store.last_message_ms().ok().flatten();
            let new_since_night = last_msg.is_some_and(|m| last_night.is_none_or(|n| m > n));
            let at_time = s.sleep_at.as_deref().is_some_and(|at| {
                reverie_night::trigger::parse_clock(at).is_ok_and(|(h, m)| {
                    reverie_night::trigger::seconds_until(
                        reverie_night::trigger::local_seconds_of_day(),
                        h,
                        m,
                    ) > 86_400 - 60
                })
            }) && last_fired_day != Some(day);
            let idle = s.idle_minutes.is_some_and(|min| {
                new_since_night
                    && reverie_night::trigger::is_idle(now_ms, last_msg, min as i64 * 60_000)
            });
            if (at_time && new_since_night) || idle {
                last_fired_day = Some(day);
                tracing::info!("starting the night by schedule");
                if let Err(e) = start(&app) {
                    tracing::warn!("the scheduled night did not start: {e:#}");
                }
            }
        }
    });
}
