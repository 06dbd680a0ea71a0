//! What every channel's tools share: background jobs, the embedding model,
//! the camera, and where things live.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use reverie_core::{ChannelId, Home};
use reverie_embed::Embedder;

use crate::camera::FrameSource;
#[cfg(not(feature = "webcam"))]
use crate::camera::NoCamera;
use crate::jobs::JobTable;
use crate::sandbox::SandboxMode;

pub struct Services {
    workspaces: PathBuf,
    old_workspaces: PathBuf,
    embedder_dir: PathBuf,
    embedder: OnceLock<Option<Embedder>>,
    pub(crate) jobs: JobTable,
    pub(crate) camera: Box<dyn FrameSource>,
    model: Mutex<String>,
    vision: std::sync::atomic::AtomicBool,
    /// Set when the user turned the sandbox off.
    unsandboxed: std::sync::atomic::AtomicBool,
}

#[cfg(feature = "webcam")]
fn default_camera() -> Box<dyn FrameSource> {
    Box::new(crate::camera::DeviceCamera)
}

#[cfg(not(feature = "webcam"))]
fn default_camera() -> Box<dyn FrameSource> {
    Box::new(NoCamera)
}

impl Services {
    pub fn new(home: &Home) -> Services {
        Services {
            workspaces: home.workspaces(),
            old_workspaces: home.old_workspaces(),
            embedder_dir: reverie_embed::model_dir(home),
            embedder: OnceLock::new(),
            jobs: JobTable::new(home.jobs()),
            camera: default_camera(),
            model: Mutex::new(String::new()),
            vision: Default::default(),
            unsandboxed: (SandboxMode::from_env() == SandboxMode::Off).into(),
        }
    }

    /// Whether the processes tools start are confined (`Off` only by the
    /// user's explicit choice).
    pub fn with_sandbox(self, mode: SandboxMode) -> Services {
        self.set_sandbox(mode);
        self
    }

    /// Changes whether processes started from now on are confined.
    pub fn set_sandbox(&self, mode: SandboxMode) {
        if mode == SandboxMode::Off {
            tracing::warn!(
                "the sandbox is off: Python, jobs and git run with all the user's rights"
            );
        }
        self.unsandboxed.store(
            mode == SandboxMode::Off,
            std::sync::atomic::Ordering::SeqCst,
        );
    }

    pub fn sandbox(&self) -> SandboxMode {
        if self.unsandboxed.load(std::sync::atomic::Ordering::SeqCst) {
            SandboxMode::Off
        } else {
            SandboxMode::On
        }
    }

    /// Uses `camera` for `capture_webcam` (a real device, or a synthetic
    /// source in tests).
    pub fn with_camera(mut self, camera: Box<dyn FrameSource>) -> Services {
        self.camera = camera;
        self
    }

    /// Names the model in use, for `health`.
    pub fn set_model_name(&self, name: &str) {
        *self.model.lock().unwrap_or_else(|e| e.into_inner()) = name.to_string();
    }

    /// Says whether the model in use can see images (has a projector).
    pub fn set_vision(&self, can_see: bool) {
        self.vision
            .store(can_see, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn vision(&self) -> bool {
        self.vision.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn model_name(&self) -> String {
        self.model.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The channel's default workspace, outside the data folder. One left
    /// inside it by an older version is moved out on first use (or, if it
    /// cannot be moved, used where it is).
    pub fn default_workspace(&self, channel: ChannelId) -> PathBuf {
        let new = self.workspaces.join(channel.0.to_string());
        let old = self.old_workspaces.join(channel.0.to_string());
        if old.is_dir() && !new.exists() {
            let moved =
                std::fs::create_dir_all(&self.workspaces).and_then(|_| std::fs::rename(&old, &new));
            if let Err(e) = moved {
                tracing::warn!(
                    "workspace {} stays inside the data folder: moving it to {} failed ({e})",
                    old.display(),
                    new.display()
                );
                return old;
            }
        }
        new
    }

    pub fn jobs(&self) -> &JobTable {
        &self.jobs
    }

    /// The sentence-embedding model, loaded on first use; `None` when it is
    /// not installed (`reverie model fetch all-minilm-l6-v2`).
    pub(crate) fn embedder(&self) -> Option<&Embedder> {
        self.embedder
            .get_or_init(|| {
                if !self.embedder_dir.join("model.safetensors").exists() {
                    return None;
                }
                Embedder::load(&self.embedder_dir)
                    .map_err(|e| tracing::warn!("embedding model unusable: {e}"))
                    .ok()
            })
            .as_ref()
    }
}
