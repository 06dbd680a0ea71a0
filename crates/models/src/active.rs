//! Which GGUF file a command loads.

use std::fs;
use std::path::{Path, PathBuf};

use reverie_core::Home;

use crate::catalogue;
use crate::error::{io, ModelError};
use crate::fetch::installed_path;

/// Chooses the model: `explicit` if given, else the one recorded by
/// [`set_active`], else the default model if installed.
pub fn resolve(home: &Home, explicit: Option<&Path>) -> Result<PathBuf, ModelError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Ok(text) = fs::read_to_string(home.active_model_file()) {
        let p = PathBuf::from(text.trim());
        if !text.trim().is_empty() {
            return Ok(p);
        }
    }
    let default = installed_path(home, catalogue::default_model());
    if default.exists() {
        return Ok(default);
    }
    Err(ModelError::NoModel)
}

/// Records `path` (checked to be a readable GGUF of a language model) as
/// the model to use, with the projector beside it, if any.
pub fn set_active(home: &Home, path: &Path) -> Result<PathBuf, ModelError> {
    let path = fs::canonicalize(path).map_err(io(path))?;
    let header = reverie_gguf::GgufFile::open(&path)?;
    if header.architecture() == Some("clip") {
        return Err(ModelError::ProjectorAsModel(path));
    }
    fs::create_dir_all(home.root()).map_err(io(home.root()))?;
    write_pointer(&home.active_model_file(), &format!("{}\n", path.display()))?;
    // A projector beside the model goes with it, also to the checkpoints
    // nights make from it.
    if let Some(p) = crate::projector::beside(&path) {
        crate::projector::choose(home, Some(&p))?;
    }
    Ok(path)
}

/// Replaces the small file `file` with `text` so that a crash at any point
/// leaves either the old or the new text: a temporary file named for this
/// process, synced, renamed over, and the folder synced. Temporary files
/// left by processes that died are removed.
pub fn write_pointer(file: &Path, text: &str) -> Result<(), ModelError> {
    use std::io::Write;
    static ONE_WRITER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_WRITER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = file.parent().unwrap_or(Path::new("."));
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    remove_dead_writers(dir, &name);
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(io(&tmp))?;
    fs::rename(&tmp, file).map_err(io(file))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// Removes `.NAME.PID.tmp` files whose process is gone.
fn remove_dead_writers(dir: &Path, name: &str) {
    let prefix = format!(".{name}.");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let pid = n
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(".tmp"))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}
