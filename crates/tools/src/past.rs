//! A workspace as it was at an earlier moment, for reading only: the files
//! now, with every path the file tools changed since then taken back to its
//! state before the first such change (from the revision history and the
//! content-addressed blobs). Changes made outside the tools since then
//! cannot be seen.

use std::collections::BTreeMap;
use std::path::Path;

use reverie_store::{BlobHash, Store};

use crate::error::ToolError;
use crate::history::{Change, PathState};
use crate::sandbox::{Cage, Limits};
use crate::services::Services;
use crate::workspace::Workspace;

/// The most of one file kept or read.
const MAX_FILE_BYTES: usize = 64 << 10;
/// The most files listed.
const MAX_FILES: usize = 200;

/// What a changed path held at the moment.
#[derive(Debug, Clone, PartialEq)]
enum Then {
    Absent,
    Dir,
    File(Vec<u8>),
    Link,
}

#[derive(Debug, Clone)]
pub struct PastWorkspace {
    workspace: Workspace,
    /// Paths changed by the tools after the moment, as they were at it.
    changed: BTreeMap<String, Then>,
}

impl PastWorkspace {
    /// The workspace at `root` as it was at `at_ms`.
    pub fn at(store: &Store, root: &Path, at_ms: i64) -> Result<PastWorkspace, ToolError> {
        let workspace = Workspace::open(root)?;
        let mut changed = BTreeMap::new();
        for rev in store.revisions(&workspace.key())? {
            if rev.created_ms <= at_ms {
                continue;
            }
            let changes: Vec<Change> = serde_json::from_str(&rev.changes).unwrap_or_default();
            for c in changes {
                if changed.contains_key(&c.path) {
                    continue;
                }
                let then = match c.before {
                    PathState::Absent => Then::Absent,
                    PathState::Dir => Then::Dir,
                    PathState::Link { .. } => Then::Link,
                    PathState::File { blob } => {
                        let mut bytes = store.blob(&BlobHash(blob))?;
                        bytes.truncate(MAX_FILE_BYTES);
                        Then::File(bytes)
                    }
                };
                changed.insert(c.path, then);
            }
        }
        Ok(PastWorkspace { workspace, changed })
    }

    /// The files at the moment, relative to the root, sorted (at most 200).
    pub fn files(&self) -> Vec<String> {
        let (mut out, _) = self.scan();
        out.truncate(MAX_FILES);
        out
    }

    /// Every file at the moment, relative to the root, sorted; `None` for
    /// a workspace too large to list whole.
    pub fn every_file(&self) -> Option<Vec<String>> {
        match self.scan() {
            (out, true) => Some(out),
            _ => None,
        }
    }

    /// The files at the moment, sorted, and whether the scan saw them all.
    fn scan(&self) -> (Vec<String>, bool) {
        let mut now = Vec::new();
        let mut whole = true;
        let mut stack = vec![self.workspace.root().to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                whole = false;
                continue;
            };
            for e in entries.flatten() {
                let Ok(ft) = e.file_type() else { continue };
                let path = e.path();
                if ft.is_dir() {
                    stack.push(path);
                } else if ft.is_file() && now.len() < MAX_FILES * 4 {
                    now.push(self.workspace.display(&path));
                } else if ft.is_file() {
                    whole = false;
                }
            }
        }
        let mut out: Vec<String> = now
            .into_iter()
            .filter(|p| !self.changed.contains_key(p) && !self.under_removed(p))
            .chain(
                self.changed
                    .iter()
                    .filter(|(_, t)| matches!(t, Then::File(_)))
                    .map(|(p, _)| p.clone()),
            )
            .collect();
        out.sort();
        out.dedup();
        (out, whole)
    }

    /// Whether a folder above `rel` did not exist at the moment.
    fn under_removed(&self, rel: &str) -> bool {
        Path::new(rel)
            .ancestors()
            .skip(1)
            .any(|a| self.changed.get(&a.display().to_string()) == Some(&Then::Absent))
    }

    /// The text of `rel` at the moment (cut at 64 KiB), or why it cannot
    /// be read.
    pub fn read(&self, rel: &str) -> Result<String, String> {
        let rel = rel.trim().trim_start_matches("./");
        let text = |bytes: &[u8]| {
            String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_FILE_BYTES)]).into_owned()
        };
        match self.changed.get(rel) {
            Some(Then::File(bytes)) => return Ok(text(bytes)),
            Some(Then::Absent) => return Err(format!("{rel} did not exist then")),
            Some(Then::Dir) => return Err(format!("{rel} was a folder then")),
            Some(Then::Link) => return Err(format!("{rel} was a link then")),
            None if self.under_removed(rel) => return Err(format!("{rel} did not exist then")),
            None => {}
        }
        let abs = self.workspace.resolve(rel).map_err(|e| e.to_string())?;
        let bytes = self
            .workspace
            .read_regular(
                &abs,
                rel,
                MAX_FILE_BYTES as u64 * 16,
                "It is too large to show.",
            )
            .map_err(|e| e.to_string())?;
        Ok(text(&bytes))
    }
}

/// Time one judge's script may take.
const PYTHON_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);
/// Output one judge's script may print.
const PYTHON_OUTPUT: usize = 4 << 10;

impl PastWorkspace {
    /// Runs the Python source `code` in a copy of the files as they were,
    /// read-only, in the sandbox; its output, or why it failed.
    pub fn python(&self, services: &Services, code: &str) -> Result<String, String> {
        let copy =
            tempfile::tempdir().map_err(|e| format!("no room for a copy of the files: {e}"))?;
        for rel in self.files() {
            let Ok(text) = self.read(&rel) else { continue };
            let to = copy.path().join(&rel);
            if let Some(dir) = to.parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("copying {rel}: {e}"))?;
            }
            std::fs::write(&to, text).map_err(|e| format!("copying {rel}: {e}"))?;
        }
        let (python, prefix) = crate::python::python().map_err(|e| e.to_string())?;
        let mut cmd = std::process::Command::new(python);
        cmd.current_dir(copy.path()).arg("-u").arg("-c").arg(code);
        let cage = Cage {
            mode: services.sandbox(),
            writable: Vec::new(),
            readable: vec![copy.path().to_path_buf(), prefix],
            limits: Limits {
                memory_bytes: 1 << 30,
                cpu_seconds: PYTHON_TIMEOUT.as_secs(),
                ..Limits::default()
            },
        };
        let stop = std::sync::atomic::AtomicBool::new(false);
        let res = services
            .jobs
            .run_blocking(cmd, &cage, PYTHON_TIMEOUT, PYTHON_OUTPUT, &stop)
            .map_err(|e| e.to_string())?;
        if res.timed_out {
            return Err(format!("stopped after {} s", PYTHON_TIMEOUT.as_secs()));
        }
        match res.status.and_then(|s| s.code()) {
            Some(0) => Ok(res.output),
            Some(code) => Err(format!("exit status {code}\n{}", res.output)),
            None => Err(format!("killed\n{}", res.output)),
        }
    }
}
