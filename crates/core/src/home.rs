//! The layout of Reverie's data folder. Paths only; nothing here touches disk.

use std::path::{Path, PathBuf};

/// `REVERIE_HOME`: database, blobs, models and checkpoints under one root.
/// The channels' default workspaces live outside it, so nothing a tool
/// does in a workspace is near the database, models or settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
    workspaces: PathBuf,
}

impl Home {
    /// A data folder at `root`; default workspaces go next to it, in
    /// `<root>-workspaces`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root: PathBuf = root.into();
        let mut name = root.file_name().unwrap_or_default().to_os_string();
        name.push("-workspaces");
        let workspaces = root.with_file_name(name);
        Home { root, workspaces }
    }

    /// A data folder at `root` with default workspaces under `workspaces`.
    pub fn with_workspaces(root: impl Into<PathBuf>, workspaces: impl Into<PathBuf>) -> Self {
        Home {
            root: root.into(),
            workspaces: workspaces.into(),
        }
    }

    /// `explicit` (`--home`), else `$XDG_DATA_HOME/reverie` (usually
    /// `~/.local/share/reverie`) with workspaces in `~/Reverie`. Callers
    /// read `REVERIE_HOME` into `explicit`.
    pub fn resolve(explicit: Option<&Path>) -> Self {
        match explicit {
            Some(p) => Home::new(p),
            None => {
                let data = dirs::data_dir()
                    .unwrap_or_else(|| std::env::temp_dir().join("reverie-data"))
                    .join("reverie");
                match dirs::home_dir() {
                    Some(home) => Home::with_workspaces(data, home.join("Reverie")),
                    None => Home::new(data),
                }
            }
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

    /// Default workspaces of channels, one folder per channel id, outside
    /// the data folder.
    pub fn workspaces(&self) -> PathBuf {
        self.workspaces.clone()
    }

    /// Where default workspaces were kept before they moved out of the
    /// data folder (moved on first use).
    pub fn old_workspaces(&self) -> PathBuf {
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

    /// The file naming the multimodal projector chosen (one line: a path).
    pub fn active_projector_file(&self) -> PathBuf {
        self.root.join("active-projector")
    }
}
