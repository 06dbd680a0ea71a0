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
    reverie_models::active::set_active(home, &path)?;
    store.activate_checkpoint(id)?;
    Ok(path)
}
