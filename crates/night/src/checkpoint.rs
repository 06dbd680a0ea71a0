//! Choosing which checkpoint runs: one rule for the CLI and the window.

use std::path::PathBuf;

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
}
