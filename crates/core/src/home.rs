//! The layout of Reverie's data folder. Paths only; nothing here touches disk.

use std::path::{Path, PathBuf};

/// `REVERIE_HOME`: database, blobs, models and checkpoints under one root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Home { root: root.into() }
    }

    /// `explicit` (`--home`), else `$XDG_DATA_HOME/reverie` (usually
    /// `~/.local/share/reverie`). Callers read `REVERIE_HOME` into `explicit`.
    pub fn resolve(explicit: Option<&Path>) -> Self {
        match explicit {
            Some(p) => Home::new(p),
            None => Home::new(
                dirs::data_dir()
                    .unwrap_or_else(|| std::env::temp_dir().join("reverie-data"))
                    .join("reverie"),
            ),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn database(&self) -> PathBuf {
        self.root.join("reverie.sqlite3")
    }

    pub fn blobs(&self) -> PathBuf {
        self.root.join("blobs")
    }

    pub fn models(&self) -> PathBuf {
        self.root.join("models")
    }

    pub fn checkpoints(&self) -> PathBuf {
        self.root.join("checkpoints")
    }

    /// Scratch space for downloads and partial files; same filesystem as the
    /// destinations so renames are atomic.
    pub fn partial(&self) -> PathBuf {
        self.root.join("partial")
    }

    /// Default workspaces of channels, one folder per channel id.
    pub fn workspaces(&self) -> PathBuf {
        self.root.join("workspaces")
    }

    /// Output logs of the agent's background jobs.
    pub fn jobs(&self) -> PathBuf {
        self.root.join("jobs")
    }

    /// The file naming the model in use (one line: a path).
    pub fn active_model_file(&self) -> PathBuf {
        self.root.join("active-model")
    }
}
