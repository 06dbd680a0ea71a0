//! Undo and redo for file-changing tools.
//!
//! Each change is a revision: for every path it touched, the state before
//! (the inverse edit) and after (the forward edit). File contents live in
//! the content-addressed blob store, revisions in the database, so history
//! survives restarts. Undo refuses when a file changed since the revision
//! (by the user, say): it never overwrites work it did not make.

use std::path::{Path, PathBuf};

use reverie_store::{BlobHash, RevisionState};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::{ToolDef, ToolOutput, Toolbox};

/// Deleting more than this in one call is refused: undo must be able to
/// bring it back.
const MAX_SNAPSHOT_BYTES: u64 = 256 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum PathState {
    Absent,
    Dir,
    File { blob: String },
    Link { target: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Change {
    pub path: String,
    pub before: PathState,
    pub after: PathState,
}

/// The state of `abs` now; with `keep`, file contents go into the blob
/// store so the state can be restored later.
fn state_of(tb: &Toolbox, abs: &Path, keep: bool) -> Result<PathState, ToolError> {
    let shown = tb.workspace().display(abs);
    let meta = match abs.symlink_metadata() {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PathState::Absent),
        Err(e) => return Err(ToolError::io(&shown, e)),
    };
    let ft = meta.file_type();
    Ok(if ft.is_symlink() {
        let target = std::fs::read_link(abs).map_err(|e| ToolError::io(&shown, e))?;
        PathState::Link {
            target: target.display().to_string(),
        }
    } else if ft.is_dir() {
        PathState::Dir
    } else {
        let bytes = tb.workspace().read_regular(
            abs,
            &shown,
            MAX_SNAPSHOT_BYTES,
            "It is too large to keep for undo, so it is not changed.",
        )?;
        let hash = if keep {
            tb.store().put_blob(&shown, &bytes)?
        } else {
            BlobHash::of(&bytes)
        };
        PathState::File { blob: hash.0 }
    })
}

/// `abs` and, for a folder, everything under it, parents first.
fn tree_paths(abs: &Path) -> Result<Vec<PathBuf>, ToolError> {
    let mut out = vec![abs.to_path_buf()];
    let mut total = 0u64;
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        i += 1;
        let Ok(meta) = p.symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            let mut children: Vec<_> = std::fs::read_dir(&p)
                .map_err(|e| ToolError::io(&p.display().to_string(), e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            children.sort();
            out.extend(children);
        } else {
            total += meta.len();
            if total > MAX_SNAPSHOT_BYTES {
                return Err(ToolError::refused(format!(
                    "that is more than {} MiB of files, too much to keep for undo; delete smaller parts",
                    MAX_SNAPSHOT_BYTES >> 20
                )));
            }
        }
    }
    Ok(out)
}

/// Captures the states of some paths before a change and records the
/// revision once the change is made.
pub(crate) struct Recorder {
    before: Vec<(PathBuf, PathState)>,
}

impl Recorder {
    /// Before changing the single path `abs`.
    pub fn path(tb: &Toolbox, abs: &Path) -> Result<Recorder, ToolError> {
        Ok(Recorder {
            before: vec![(abs.to_path_buf(), state_of(tb, abs, true)?)],
        })
    }

    /// Before changing `abs` and everything under it.
    pub fn tree(tb: &Toolbox, abs: &Path) -> Result<Recorder, ToolError> {
        Recorder::trees(tb, std::slice::from_ref(&abs.to_path_buf()))
    }

    /// Before changing each of `roots` and everything under them.
    pub fn trees(tb: &Toolbox, roots: &[PathBuf]) -> Result<Recorder, ToolError> {
        let mut before = Vec::new();
        for root in roots {
            for p in tree_paths(root)? {
                let s = state_of(tb, &p, true)?;
                before.push((p, s));
            }
        }
        Ok(Recorder { before })
    }

    /// Before creating `abs` and any missing parent folders.
    pub fn creating(tb: &Toolbox, abs: &Path) -> Result<Recorder, ToolError> {
        let mut before = Vec::new();
        let mut p = abs.to_path_buf();
        while p.starts_with(tb.workspace().root()) && p != tb.workspace().root() {
            before.push((p.clone(), state_of(tb, &p, true)?));
            if p.exists() || !p.pop() {
                break;
            }
        }
        before.reverse();
        Ok(Recorder { before })
    }

    /// Records the revision after the change was made.
    pub fn commit(self, tb: &Toolbox, tool: &str, summary: &str) -> Result<(), ToolError> {
        let mut changes = Vec::new();
        for (abs, before) in self.before {
            let after = state_of(tb, &abs, true)?;
            if after != before {
                changes.push(Change {
                    path: tb.workspace().display(&abs),
                    before,
                    after,
                });
            }
        }
        if changes.is_empty() {
            return Ok(());
        }
        let encoded = serde_json::to_string(&changes).expect("changes serialize");
        if let Err(e) = tb
            .store()
            .push_revision(&tb.workspace().key(), tool, summary, &encoded)
        {
            // A change that cannot be undone is not kept: put things back.
            let back = apply(tb, &changes, false);
            return Err(ToolError::Failed {
                what: format!("recording the undo step for {summary}"),
                detail: match back {
                    Ok(()) => format!("{e}; the change was taken back, nothing changed"),
                    Err(b) => format!("{e}; taking the change back failed too: {b}"),
                },
            });
        }
        Ok(())
    }
}

/// Writes `bytes` to `abs` through a temporary file and a rename, so a
/// crash or a full disk leaves the old file whole; opened beneath the
/// workspace root, so a swapped symlink cannot redirect it.
pub(crate) fn write_atomic(tb: &Toolbox, abs: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    tb.workspace()
        .write_atomic(abs, bytes)
        .map_err(|e| ToolError::io(&tb.workspace().display(abs), e))
}

/// Puts `abs` into `state`.
fn restore(tb: &Toolbox, abs: &Path, state: &PathState) -> Result<(), ToolError> {
    let shown = tb.workspace().display(abs);
    let io = |e| ToolError::io(&shown, e);
    let clear = |abs: &Path| -> Result<(), ToolError> {
        match abs.symlink_metadata() {
            Ok(_) => tb.workspace().remove(abs).map_err(io),
            Err(_) => Ok(()),
        }
    };
    match state {
        PathState::Absent => clear(abs),
        PathState::Dir => {
            if !abs.is_dir() {
                clear(abs)?;
            }
            tb.workspace().make_dirs(abs).map_err(io)
        }
        PathState::File { blob } => {
            let bytes = tb.store().blob(&BlobHash(blob.clone()))?;
            if abs.is_dir() {
                clear(abs)?;
            }
            write_atomic(tb, abs, &bytes)
        }
        PathState::Link { target } => {
            clear(abs)?;
            std::os::unix::fs::symlink(target, abs).map_err(io)
        }
    }
}

/// Moves the workspace from each change's `from` state to its `to` state,
/// refusing if any path is no longer in its `from` state.
fn apply(tb: &Toolbox, changes: &[Change], forward: bool) -> Result<(), ToolError> {
    fn pick(c: &Change, forward: bool) -> (&PathState, &PathState) {
        if forward {
            (&c.before, &c.after)
        } else {
            (&c.after, &c.before)
        }
    }
    let mut targets = Vec::new();
    for c in changes {
        let abs = tb.workspace().resolve_for_change(&c.path)?;
        let (from, to) = pick(c, forward);
        let now = state_of(tb, &abs, false)?;
        if &now != from && &now != to {
            return Err(ToolError::refused(format!(
                "`{}` was changed since then by something else; {} would overwrite that. Read it and edit it instead",
                c.path,
                if forward { "redo" } else { "undo" }
            )));
        }
        targets.push((abs, to));
    }
    // Parents are created before their children and removed after them.
    for (abs, to) in &targets {
        if **to != PathState::Absent {
            restore(tb, abs, to)?;
        }
    }
    for (abs, to) in targets.iter().rev() {
        if **to == PathState::Absent {
            restore(tb, abs, to)?;
        }
    }
    Ok(())
}

fn decode(changes: &str) -> Result<Vec<Change>, ToolError> {
    serde_json::from_str(changes).map_err(|e| ToolError::Failed {
        what: "reading the revision history".into(),
        detail: e.to_string(),
    })
}

/// Reverts the newest revision of the workspace.
pub fn undo(tb: &Toolbox) -> Result<ToolOutput, ToolError> {
    let Some(rev) = tb.store().undo_candidate(&tb.workspace().key())? else {
        return Err(ToolError::refused("nothing to undo in this workspace"));
    };
    apply(tb, &decode(&rev.changes)?, false)?;
    tb.store()
        .set_revision_state(rev.id, RevisionState::Undone)?;
    Ok(format!("undid {}: {}", rev.tool, rev.summary).into())
}

/// Re-applies the revision undone last.
pub fn redo(tb: &Toolbox) -> Result<ToolOutput, ToolError> {
    let Some(rev) = tb.store().redo_candidate(&tb.workspace().key())? else {
        return Err(ToolError::refused("nothing to redo in this workspace"));
    };
    apply(tb, &decode(&rev.changes)?, true)?;
    tb.store().set_revision_state(rev.id, RevisionState::Done)?;
    Ok(format!("redid {}: {}", rev.tool, rev.summary).into())
}

fn no_params() -> Value {
    json!({"type": "object", "properties": {}})
}

pub(crate) const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "undo",
        description: "Undo the last file change made with the file tools in this workspace.",
        parameters: no_params,
        run: |tb, _| undo(tb),
    },
    ToolDef {
        name: "redo",
        description: "Redo the file change undone last.",
        parameters: no_params,
        run: |tb, _| redo(tb),
    },
];
