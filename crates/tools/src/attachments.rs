//! Files the person attaches in the window: saved into the channel's
//! workspace under `attachments/`, through the workspace sandbox, under
//! their own name (never over an existing file).

use crate::error::ToolError;
use crate::workspace::Workspace;

/// The folder attachments go to, inside the workspace.
pub const ATTACHMENTS: &str = "attachments";

/// The name an attachment is saved under: its own base name, with folders
/// and control characters taken out.
pub fn attachment_name(file_name: &str) -> Result<String, ToolError> {
    let safe: String = std::path::Path::new(file_name)
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
        .chars()
        .map(|ch| if ch.is_control() { '_' } else { ch })
        .collect();
    if safe.is_empty() || safe.starts_with('.') {
        return Err(ToolError::Refused(format!(
            "{file_name:?} is not a usable file name; rename the file"
        )));
    }
    Ok(safe)
}

/// Saves `bytes` as `attachments/NAME` in `workspace` (numbered `NAME-2`,
/// `NAME-3`, … when the name is taken) and returns the path the agent
/// finds it under. The folder is opened beneath the workspace root (a
/// symlink planted in the workspace cannot lead the write out), the bytes
/// go to a fresh temporary file in it and are fsynced, and the rename
/// never replaces an existing file.
pub fn save_attachment(
    workspace: &Workspace,
    file_name: &str,
    bytes: &[u8],
) -> Result<String, ToolError> {
    let name = attachment_name(file_name)?;
    let dir = workspace.resolve_for_change(ATTACHMENTS)?;
    workspace
        .make_dirs(&dir)
        .map_err(|e| ToolError::io(ATTACHMENTS, e))?;
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s.to_string(), format!(".{e}")),
        _ => (name.clone(), String::new()),
    };
    let candidates = (1..10_000).map(|n| {
        if n == 1 {
            name.clone()
        } else {
            format!("{stem}-{n}{ext}")
        }
    });
    let saved = workspace
        .save_new(&dir, bytes, candidates)
        .map_err(|e| ToolError::io(&name, e))?;
    Ok(format!("{ATTACHMENTS}/{saved}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachments_keep_their_name_inside_the_workspace_and_never_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        let first = save_attachment(&ws, "../../etc/report.pdf", b"one").unwrap();
        assert_eq!(first, "attachments/report.pdf");
        let second = save_attachment(&ws, "report.pdf", b"two").unwrap();
        assert_eq!(second, "attachments/report-2.pdf");
        let root = ws.root();
        assert_eq!(std::fs::read(root.join(&first)).unwrap(), b"one");
        assert_eq!(std::fs::read(root.join(&second)).unwrap(), b"two");
        let odd = save_attachment(&ws, "a\nb.txt", b"").unwrap();
        assert_eq!(odd, "attachments/a_b.txt");
        let left: Vec<_> = std::fs::read_dir(root.join(ATTACHMENTS))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "no temporary files left: {left:?}");
    }

    #[test]
    fn unusable_names_are_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        for bad in ["", "..", ".hidden", "/"] {
            let e = save_attachment(&ws, bad, b"x").unwrap_err().to_string();
            assert!(e.contains("rename the file"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_planted_symlink_cannot_lead_an_attachment_out() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.root().join(ATTACHMENTS)).unwrap();
        let e = save_attachment(&ws, "x.txt", b"x").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
