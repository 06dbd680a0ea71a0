//! What the window holds: the data folder, the store, the model (loaded on
//! first use, so the window opens even before a model exists), the agents
//! of all channels, the settings and the night.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;
use reverie_agent::{Agent, AgentConfig, DEFAULT_SYSTEM_PROMPT};
use reverie_core::Home;
use reverie_infer::{Engine, EngineConfig};
use reverie_store::Store;
use reverie_tools::Services;

use crate::settings::Settings;
use crate::sleep::NightState;

/// How the app was started: `--model`, `--ctx`, `--threads`, `--gpu-layers`.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    pub model: Option<PathBuf>,
    pub ctx: u32,
    pub threads: Option<usize>,
    pub gpu_layers: u32,
}

/// A loaded model and the agents that use it.
pub struct Runtime {
    pub engine: Arc<Engine>,
    pub agent: Agent,
}

/// The running API server: its port and task.
struct ApiServer {
    port: u16,
    task: tauri::async_runtime::JoinHandle<()>,
}

pub struct App {
    api: Mutex<Option<ApiServer>>,
    pub home: Home,
    pub store: Arc<Store>,
    pub services: Arc<Services>,
    pub night: NightState,
    launch: Mutex<Launch>,
    runtime: Mutex<Option<Arc<Runtime>>>,
    settings: Mutex<Settings>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl App {
    pub fn open(home: Home, launch: Launch) -> anyhow::Result<App> {
        std::fs::create_dir_all(home.root())
            .with_context(|| format!("creating the data folder {}", home.root().display()))?;
        let store = Arc::new(Store::open(&home)?);
        let settings = Settings::load(&home);
        let services = Arc::new(Services::new(&home));
        if !settings.sandbox {
            services.set_sandbox(reverie_tools::SandboxMode::Off);
        }
        Ok(App {
            api: Mutex::new(None),
            night: NightState::default(),
            launch: Mutex::new(launch),
            runtime: Mutex::new(None),
            settings: Mutex::new(settings),
            home,
            store,
            services,
        })
    }

    /// The context (tokens per conversation) the model runs with: as the
    /// loaded engine sized it, else as launched (0 until sized).
    pub fn context_size(&self) -> u32 {
        match self.loaded() {
            Some(rt) => rt.engine.config().n_ctx,
            None => lock(&self.launch).ctx,
        }
    }

    pub fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    /// Saves new settings; the agents pick up tool settings on their next
    /// message.
    pub fn set_settings(&self, s: Settings) -> anyhow::Result<()> {
        s.validate().map_err(anyhow::Error::msg)?;
        self.apply_api(s.api_port)?;
        s.save(&self.home).context("saving settings")?;
        self.services.set_sandbox(if s.sandbox {
            reverie_tools::SandboxMode::On
        } else {
            reverie_tools::SandboxMode::Off
        });
        let tools_changed = {
            let mut cur = lock(&self.settings);
            let changed = cur.tools != s.tools || cur.max_tool_calls != s.max_tool_calls;
            *cur = s;
            changed
        };
        if tools_changed {
            self.unload();
        }
        Ok(())
    }

    /// Starts, moves or stops the API server so that it serves on `port`.
    pub fn apply_api(&self, port: Option<u16>) -> anyhow::Result<()> {
        let mut api = lock(&self.api);
        if api.as_ref().map(|a| a.port) == port {
            return Ok(());
        }
        if let Some(old) = api.take() {
            old.task.abort();
        }
        let Some(port) = port else {
            return Ok(());
        };
        let token = reverie_serve::api_token(self.home.root()).context("the API token")?;
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))
            .with_context(|| format!("port {port} on 127.0.0.1 is taken; choose another"))?;
        listener.set_nonblocking(true)?;
        let engine = self.runtime()?.engine.clone();
        let model_id = engine
            .model_path()
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "default".into());
        // The API's exchanges become `api-N` channels the nights learn from.
        let recorder = Arc::new(reverie_serve::record::Recorder::new(self.store.clone()));
        let task = tauri::async_runtime::spawn(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => return tracing::warn!("the API could not listen: {e}"),
            };
            let server = reverie_serve::Server {
                engine,
                model_id,
                token,
                recorder: Some(recorder),
            };
            if let Err(e) = reverie_serve::serve(listener, server).await {
                tracing::warn!("the API stopped: {e}");
            }
        });
        *api = Some(ApiServer { port, task });
        Ok(())
    }

    /// The API's address and token while it runs.
    pub fn api_status(&self) -> Option<(u16, String)> {
        let port = lock(&self.api).as_ref().map(|a| a.port)?;
        reverie_serve::api_token(self.home.root())
            .ok()
            .map(|t| (port, t))
    }

    /// What the window's options change in the night: the launch's GPU
    /// layers and the settings' practice batches (the judge model is
    /// `night.json`'s).
    pub fn night_overrides(&self) -> reverie_night::NightOverrides {
        let gpu_layers = lock(&self.launch).gpu_layers;
        reverie_night::NightOverrides {
            gpu_layers: (gpu_layers > 0).then_some(gpu_layers),
            practice: self.settings().practice,
            practice_samples: None,
            judge: None,
        }
    }

    /// The model file the app runs (or would run), if one exists.
    pub fn model_path(&self) -> Option<PathBuf> {
        let explicit = lock(&self.launch).model.clone();
        reverie_models::active::resolve(&self.home, explicit.as_deref()).ok()
    }

    /// The loaded model, if it is loaded.
    pub fn loaded(&self) -> Option<Arc<Runtime>> {
        lock(&self.runtime).clone()
    }

    /// The model and agents, loading the model on first use.
    pub fn runtime(&self) -> anyhow::Result<Arc<Runtime>> {
        let mut slot = lock(&self.runtime);
        if let Some(rt) = slot.as_ref() {
            return Ok(rt.clone());
        }
        let launch = lock(&self.launch).clone();
        let path = reverie_models::active::resolve(&self.home, launch.model.as_deref())?;
        let mut config = EngineConfig::sized(4, launch.ctx, launch.gpu_layers, launch.threads);
        config.mmproj = match reverie_models::projector::find(&self.home, &path) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("running without images: {e}");
                None
            }
        };
        // A projector set aside is logged where it is loaded; the window's
        // Settings show why (`projector_status`).
        let (engine, _) = Engine::load_or_without_projector(&path, config)
            .with_context(|| format!("loading {}", path.display()))?;
        let engine = Arc::new(engine);
        let s = self.settings();
        let agent = Agent::new(
            engine.clone(),
            self.store.clone(),
            self.services.clone(),
            AgentConfig {
                system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
                tools: s.tools,
                max_tool_calls: s.max_tool_calls,
                ..AgentConfig::default()
            },
        );
        let rt = Arc::new(Runtime { engine, agent });
        *slot = Some(rt.clone());
        Ok(rt)
    }

    /// Switches to `path`: remembered as the active model (unless the app
    /// was started with `--model`, which then follows the choice), and
    /// swapped in without losing any channel.
    pub fn choose_model(&self, path: &std::path::Path) -> anyhow::Result<PathBuf> {
        let path = reverie_models::active::set_active(&self.home, path)?;
        // A model that brings another projector loads afresh with it (a
        // swap keeps the engine's projector).
        let projector = reverie_models::projector::find(&self.home, &path).unwrap_or(None);
        if let Some(rt) = self.loaded() {
            if rt.engine.config().mmproj != projector {
                lock(&self.launch).model = Some(path.clone());
                self.unload();
                return Ok(path);
            }
        }
        self.wake_up(&path)?;
        Ok(path)
    }

    /// Runs `path` from now on (after a night, a rollback or a choice),
    /// swapped in without losing any channel.
    pub fn wake_up(&self, deployed: &std::path::Path) -> anyhow::Result<()> {
        lock(&self.launch).model = Some(deployed.to_path_buf());
        if let Some(rt) = self.loaded() {
            rt.engine.swap_model(deployed)?;
            self.services.set_model_name(&rt.engine.info().name);
            self.services.set_vision(rt.engine.can_see());
        }
        Ok(())
    }

    /// Stops every agent and forgets the model (it reloads on next use).
    pub fn unload(&self) {
        if let Some(rt) = lock(&self.runtime).take() {
            rt.agent.shutdown();
        }
    }

    /// Clean exit: the night is cancelled (the model it would replace is
    /// kept), generation and jobs stop, and the database closes when the
    /// last reference goes.
    pub fn shutdown(&self) {
        self.night.cancel();
        self.night.join();
        self.unload();
        self.services.jobs().stop_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(port: u16, token: Option<&str>) -> Result<u16, String> {
        let mut req = ureq::get(&format!("http://127.0.0.1:{port}/v1/models"));
        if let Some(t) = token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        match req.call() {
            Ok(r) => Ok(r.status()),
            Err(ureq::Error::Status(code, _)) => Ok(code),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn the_settings_start_move_and_stop_the_api() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        reverie_gguf::synth::write(
            &model,
            &reverie_gguf::synth::SynthConfig::tiny(reverie_gguf::synth::Arch::Qwen2),
        )
        .unwrap();
        let launch = Launch {
            model: Some(model),
            ctx: 1024,
            threads: Some(1),
            gpu_layers: 0,
        };
        let app = App::open(Home::new(dir.path().join("home")), launch).unwrap();
        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let (a, b) = (free(), free());
        app.apply_api(Some(a)).unwrap();
        let (port, token) = app.api_status().unwrap();
        assert_eq!(port, a);
        assert_eq!(get(a, Some(&token)), Ok(200));
        assert_eq!(get(a, None), Ok(401));
        app.apply_api(Some(b)).unwrap();
        assert_eq!(get(b, Some(&token)), Ok(200));
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(get(a, Some(&token)).is_err(), "the old port is closed");
        app.apply_api(None).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(get(b, Some(&token)).is_err(), "off means off");
        assert!(app.api_status().is_none());
        // A taken port is refused with a clear error and nothing starts.
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = taken.local_addr().unwrap().port();
        let e = app.apply_api(Some(p)).unwrap_err().to_string();
        assert!(e.contains("is taken"), "{e}");
        app.unload();
    }
}
