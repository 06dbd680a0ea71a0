//! Choosing which checkpoint runs: one rule for the CLI and the window;
//! and where a checkpoint came from.

use std::path::{Path, PathBuf};

use reverie_core::Home;
use reverie_store::{Store, StoreError};

use crate::error::NightError;

/// Makes checkpoint `id` the active model and returns its file.
pub fn rollback(home: &Home, store: &Store, id: i64) -> Result<PathBuf, NightError> {
    let cp = store
        .checkpoints()?
        .into_iter()
        .find(|c| c.id == id)
        .ok_or(StoreError::NotFound {
            what: "checkpoint",
            id,
        })?;
    let path = PathBuf::from(&cp.path);
    if !path.exists() {
        return Err(NightError::Io(format!(
            "checkpoint {id}'s file {} is gone; pick another checkpoint",
            path.display()
        )));
    }
    let sha = reverie_models::fetch::sha256_file(&path)?;
    if !cp.sha256.is_empty() && sha != cp.sha256 {
        return Err(NightError::Io(format!(
            "checkpoint {id}'s file {} has changed since it was made (its SHA-256 is {sha}, {} was recorded); it was not loaded. Pick another checkpoint",
            path.display(),
            cp.sha256
        )));
    }
    reverie_models::active::set_active(home, &path)?;
    store.activate_checkpoint(id)?;
    Ok(path)
}

/// The model as the user installed it, before any night: `model` when no
/// night made it, else the root of its checkpoint line (each checkpoint's
/// parent is the model its night trained on).
pub fn installed(store: &Store, model: &Path) -> Result<PathBuf, NightError> {
    let cps = store.checkpoints()?;
    let Some(mut cp) = cps.iter().rev().find(|c| same_file(&c.path, model)) else {
        return Ok(model.to_path_buf());
    };
    // A line is never longer than the list; the bound guards a cycle in a
    // hand-edited store.
    for _ in 0..cps.len() {
        if cp.night.is_none() {
            break;
        }
        match cp.parent.and_then(|id| cps.iter().find(|c| c.id == id)) {
            Some(parent) => cp = parent,
            None => break,
        }
    }
    Ok(PathBuf::from(&cp.path))
}

/// Records `base`, the model a night trained on, as the active checkpoint
/// (added first if no night made it), so that the night's own checkpoint
/// names it as its parent: also after the user switched to another model
/// or rolled back.
pub fn record_base(store: &Store, base: &Path) -> Result<(), NightError> {
    let found = store
        .checkpoints()?
        .into_iter()
        .rev()
        .find(|c| same_file(&c.path, base));
    match found {
        Some(c) if c.active => {}
        Some(c) => {
            store.activate_checkpoint(c.id)?;
        }
        None => {
            let sha = reverie_models::fetch::sha256_file(base)?;
            store.add_checkpoint(&base.display().to_string(), &sha, None, true)?;
        }
    }
    Ok(())
}

/// Whether the checkpoint recorded at `recorded` is the file at `path`.
pub(crate) fn same_file(recorded: &str, path: &Path) -> bool {
    let recorded = Path::new(recorded);
    recorded == path
        || std::fs::canonicalize(recorded)
            .is_ok_and(|r| std::fs::canonicalize(path).is_ok_and(|p| r == p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_gguf::synth::{Arch, SynthConfig};

    #[test]
    fn rollback_checks_the_recorded_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("home"));
        let store = Store::open(&home).unwrap();
        let file = dir.path().join("cp.gguf");
        reverie_gguf::synth::write(&file, &SynthConfig::tiny(Arch::Llama)).unwrap();
        let sha = reverie_models::fetch::sha256_file(&file).unwrap();
        let id = store
            .add_checkpoint(&file.display().to_string(), &sha, None, false)
            .unwrap();
        assert_eq!(rollback(&home, &store, id).unwrap(), file);
        // Same size, one byte changed: it still parses, but it is not the
        // checkpoint that was made.
        let mut bytes = std::fs::read(&file).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&file, bytes).unwrap();
        let e = rollback(&home, &store, id).unwrap_err().to_string();
        assert!(e.contains("has changed since it was made"), "{e}");
    }

    #[test]
    fn the_installed_model_is_the_root_of_a_checkpoint_line() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("home"));
        let store = Store::open(&home).unwrap();
        let file = |name: &str| {
            let p = dir.path().join(name);
            reverie_gguf::synth::write(&p, &SynthConfig::tiny(Arch::Llama)).unwrap();
            p
        };
        let (base, other) = (file("base.gguf"), file("other.gguf"));
        let (n1, n2, n3) = (file("n1.gguf"), file("n2.gguf"), file("n3.gguf"));
        let night = |base: &Path, made: &Path| {
            let id = store.start_night().unwrap();
            record_base(&store, base).unwrap();
            let sha = reverie_models::fetch::sha256_file(made).unwrap();
            store
                .add_checkpoint(&made.display().to_string(), &sha, Some(id), true)
                .unwrap();
        };
        assert_eq!(installed(&store, &base).unwrap(), base, "no night yet");
        night(&base, &n1);
        night(&n1, &n2);
        assert_eq!(installed(&store, &n2).unwrap(), base);
        assert_eq!(installed(&store, &n1).unwrap(), base);
        // The user switched to another model: a night on it starts a new
        // line, although the old line's checkpoint was the active one.
        assert_eq!(installed(&store, &other).unwrap(), other);
        night(&other, &n3);
        assert_eq!(installed(&store, &n3).unwrap(), other);
        // Back on night 2's model: its line is unchanged.
        assert_eq!(installed(&store, &n2).unwrap(), base);
    }
}
