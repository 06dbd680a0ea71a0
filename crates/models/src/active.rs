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

/// Records `path` (checked to be a readable GGUF) as the model to use.
pub fn set_active(home: &Home, path: &Path) -> Result<PathBuf, ModelError> {
    let path = fs::canonicalize(path).map_err(io(path))?;
    reverie_gguf::GgufFile::open(&path)?;
    fs::create_dir_all(home.root()).map_err(io(home.root()))?;
    let file = home.active_model_file();
    let tmp = file.with_extension("partial");
    fs::write(&tmp, format!("{}\n", path.display())).map_err(io(&tmp))?;
    fs::rename(&tmp, &file).map_err(io(&file))?;
    Ok(path)
}
