//! A channel's workspace: the one folder its file tools may touch.
//!
//! Paths from the model are relative to the root. Absolute paths and `..`
//! are refused outright; symlinks are followed and refused when they lead
//! outside, so no spelling of a path reaches beyond the root.

use std::path::{Component, Path, PathBuf};

use crate::error::ToolError;

/// The folder where scratch files go; the system prompt tells the agent to
/// use it and to clear it.
pub const SCRATCHPAD: &str = "scratch";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// Opens (creating if needed) the workspace at `root`.
    pub fn open(root: &Path) -> Result<Workspace, ToolError> {
        std::fs::create_dir_all(root).map_err(|e| ToolError::Failed {
            what: format!("creating workspace {}", root.display()),
            detail: e.to_string(),
        })?;
        let root = root.canonicalize().map_err(|e| ToolError::Failed {
            what: format!("opening workspace {}", root.display()),
            detail: e.to_string(),
        })?;
        Ok(Workspace { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The key revisions are stored under.
    pub fn key(&self) -> String {
        self.root.display().to_string()
    }

    /// `rel` as a path inside the workspace, or why it may not be used.
    /// The path need not exist.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, ToolError> {
        let rel = rel.trim();
        let outside = |why| ToolError::OutsideWorkspace {
            path: rel.to_string(),
            why,
        };
        let p = Path::new(rel);
        if p.is_absolute() || rel.starts_with('~') {
            return Err(outside(
                "absolute paths are not allowed; give a path relative to the workspace root, e.g. `notes/todo.txt`",
            ));
        }
        let mut joined = self.root.clone();
        for c in p.components() {
            match c {
                Component::Normal(part) => joined.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(outside(
                        "`..` is not allowed; paths are relative to the workspace root and stay inside it",
                    ))
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(outside("absolute paths are not allowed"))
                }
            }
        }
        self.check_links(&joined, rel)?;
        Ok(joined)
    }

    /// Follows symlinks along `path`: the deepest existing ancestor (the
    /// path itself included) must resolve inside the root.
    fn check_links(&self, path: &Path, rel: &str) -> Result<(), ToolError> {
        let outside = ToolError::OutsideWorkspace {
            path: rel.to_string(),
            why: "it goes through a symbolic link that leads out of the workspace",
        };
        let mut probe = path.to_path_buf();
        loop {
            if let Ok(meta) = probe.symlink_metadata() {
                return match probe.canonicalize() {
                    Ok(real) if real.starts_with(&self.root) => Ok(()),
                    Ok(_) => Err(outside),
                    // A dangling link: refuse, it could be created outside.
                    Err(_) if meta.file_type().is_symlink() => Err(outside),
                    Err(e) => Err(ToolError::io(rel, e)),
                };
            }
            if !probe.pop() || !probe.starts_with(&self.root) {
                return Ok(());
            }
        }
    }

    /// Like [`Workspace::resolve`], for a path a tool will change: paths
    /// inside a `.git` folder are refused (a written `.git/config` could
    /// make git run programs).
    pub fn resolve_for_change(&self, rel: &str) -> Result<PathBuf, ToolError> {
        let abs = self.resolve(rel)?;
        let rel_path = abs.strip_prefix(&self.root).unwrap_or(&abs);
        if rel_path.components().any(|c| c.as_os_str() == ".git") {
            return Err(ToolError::refused(format!(
                "`{rel}` is inside a `.git` folder, which only git itself may change; use the git tool"
            )));
        }
        Ok(abs)
    }

    /// Up to three files elsewhere in the workspace named like the last
    /// part of `rel` (a model that dropped a folder from a path), relative
    /// to the root; the walk honours ignore files and stops after 5,000
    /// entries.
    pub fn same_names(&self, rel: &str) -> Vec<String> {
        let Some(name) = Path::new(rel.trim()).file_name() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let walk = self.walk();
        for entry in walk.flatten() {
            if entry.file_name() == name && entry.depth() > 0 {
                let shown = self.display(entry.path());
                if shown != rel.trim() {
                    out.push(shown);
                }
                if out.len() == 3 {
                    break;
                }
            }
        }
        out
    }

    /// The workspace's first 5,000 entries, in name order, honouring
    /// ignore files, at most 8 folders deep.
    fn walk(&self) -> std::iter::Take<ignore::Walk> {
        ignore::WalkBuilder::new(&self.root)
            .max_depth(Some(8))
            .sort_by_file_name(|a, b| a.cmp(b))
            .build()
            .take(5_000)
    }

    /// Up to `max` files of the workspace whose names end in `.ending`,
    /// relative to the root, in name order; the walk honours ignore files
    /// and stops after 5,000 entries.
    pub fn files_ending(&self, ending: &str, max: usize) -> Vec<String> {
        let walk = self.walk();
        walk.flatten()
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .filter(|e| {
                Path::new(e.file_name())
                    .extension()
                    .is_some_and(|x| x.eq_ignore_ascii_case(ending))
            })
            .take(max)
            .map(|e| self.display(e.path()))
            .collect()
    }

    /// `rel` as a folder to look in: where `rel` does not exist but names
    /// the workspace itself in words ("workspace root", "my workspace",
    /// "/"), the root, with a line that says so to put before the result. The default model
    /// listed `workspace root`, was told the path did not exist, listed it
    /// again and then wrote a file of that name (simulated files tasks).
    pub fn resolve_folder(&self, rel: &str) -> Result<(PathBuf, Option<String>), ToolError> {
        let resolved = self.resolve(rel);
        if resolved.as_ref().is_ok_and(|p| p.exists()) || !names_root(rel) {
            return resolved.map(|p| (p, None));
        }
        let said = format!(
            "There is no `{}`; the workspace root is `.`, used here.\n",
            rel.trim()
        );
        Ok((self.root.clone(), Some(said)))
    }

    /// `abs` relative to the root, for messages.
    pub fn display(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.root) {
            Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
            Ok(r) => r.display().to_string(),
            Err(_) => abs.display().to_string(),
        }
    }
}

/// What a path is, in words, when it is not a regular file or folder.
fn special_kind(ft: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        Some("a named pipe (FIFO)")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_char_device() || ft.is_block_device() {
        Some("a device")
    } else {
        None
    }
}

/// Refuses pipes, sockets and devices: reading one can block forever or
/// never end.
pub(crate) fn check_not_special(meta: &std::fs::Metadata, rel: &str) -> Result<(), ToolError> {
    match special_kind(&meta.file_type()) {
        Some(kind) => Err(ToolError::refused(format!(
            "`{rel}` is {kind}, not a regular file; only regular files are read"
        ))),
        None => Ok(()),
    }
}

impl Workspace {
    /// The bytes of the regular file `abs` (`rel` in messages), opened
    /// beneath the root. Pipes, sockets and devices are refused without
    /// blocking (the file is opened non-blocking and checked on the open
    /// handle), and a file over `max` bytes is refused before anything is
    /// read; `too_big` says what to do instead.
    pub(crate) fn read_regular(
        &self,
        abs: &Path,
        rel: &str,
        max: u64,
        too_big: &str,
    ) -> Result<Vec<u8>, ToolError> {
        use std::io::Read;
        let file = self
            .open_read(
                abs,
                rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY,
            )
            .map_err(|e| ToolError::io(rel, e))?;
        let meta = file.metadata().map_err(|e| ToolError::io(rel, e))?;
        if meta.is_dir() {
            return Err(ToolError::refused(format!(
                "`{rel}` is a folder, not a file; use list_dir to see what is in it"
            )));
        }
        check_not_special(&meta, rel)?;
        if meta.len() > max {
            return Err(ToolError::refused(format!(
                "`{rel}` is {}; the limit is {}. {too_big}",
                human_bytes(meta.len()),
                human_bytes(max)
            )));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        // A file that grows while read stops at the limit.
        file.take(max)
            .read_to_end(&mut bytes)
            .map_err(|e| ToolError::io(rel, e))?;
        Ok(bytes)
    }
}

/// `n` bytes in the largest unit that keeps it above 1.
pub(crate) fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// Whether `rel` is the workspace named in words rather than a path.
fn names_root(rel: &str) -> bool {
    let words = rel.trim().trim_end_matches('/').to_lowercase();
    let words = words
        .strip_prefix("my ")
        .or_else(|| words.strip_prefix("the "))
        .unwrap_or(&words);
    matches!(
        words,
        "" | "workspace" | "workspace root" | "workspace folder" | "root" | "root folder"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(&dir.path().join("ws")).unwrap();
        assert_eq!(ws.resolve("a/b.txt").unwrap(), ws.root().join("a/b.txt"));
        assert_eq!(ws.resolve("./a").unwrap(), ws.root().join("a"));
        assert_eq!(ws.resolve("").unwrap(), ws.root());
        for bad in ["../x", "a/../../x", "/etc/passwd", "~/x"] {
            let e = ws.resolve(bad).unwrap_err().to_string();
            assert!(e.contains("outside the workspace"), "{bad}: {e}");
        }
        std::os::unix::fs::symlink(dir.path(), ws.root().join("out")).unwrap();
        let e = ws.resolve("out/secret").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::os::unix::fs::symlink(ws.root().join("a"), ws.root().join("in")).unwrap();
        std::fs::create_dir(ws.root().join("a")).unwrap();
        assert!(ws.resolve("in/file").is_ok());
        std::os::unix::fs::symlink("/nonexistent/zz", ws.root().join("dangling")).unwrap();
        assert!(ws.resolve("dangling").is_err());
    }

    #[test]
    fn the_workspace_named_in_words_is_the_root_where_no_such_folder_exists() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(&dir.path().join("ws")).unwrap();
        for words in ["workspace root", "My workspace", "/", "root/"] {
            let (p, said) = ws.resolve_folder(words).unwrap();
            assert_eq!(p, ws.root(), "{words}");
            assert!(said.unwrap().contains("the workspace root is `.`"));
        }
        assert_eq!(
            ws.resolve_folder("").unwrap(),
            (ws.root().to_path_buf(), None)
        );
        // A real folder of that name wins; other missing paths stay missing.
        std::fs::create_dir(ws.root().join("root")).unwrap();
        assert_eq!(ws.resolve_folder("root").unwrap().0, ws.root().join("root"));
        assert_eq!(
            ws.resolve_folder("src").unwrap(),
            (ws.root().join("src"), None)
        );
        assert!(ws.resolve_folder("/etc").is_err());
    }
}
