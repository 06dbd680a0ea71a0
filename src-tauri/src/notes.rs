//! The agent's notes from the window: their routine cleaning on demand (as
//! a night does it), its changes, and their undo.

use std::sync::Arc;

use reverie_store::NoteChange;
use serde::Serialize;
use tauri::State;

use crate::failure::Reply;
use crate::state::App;

#[derive(Serialize)]
pub struct NoteChangeView {
    pub id: i64,
    pub at_ms: i64,
    pub what: String,
    pub undone: bool,
}

impl From<NoteChange> for NoteChangeView {
    fn from(c: NoteChange) -> Self {
        NoteChangeView {
            id: c.id,
            at_ms: c.at_ms,
            what: c.what,
            undone: c.undone_ms.is_some(),
        }
    }
}

/// Cleans the notes now; returns every cleaning change, newest first.
#[tauri::command]
pub async fn clean_notes(app: State<'_, Arc<App>>) -> Reply<Vec<NoteChangeView>> {
    reverie_tools::note_cleaning::clean(&app.store, reverie_night::trigger::now_ms())?;
    note_changes(app).await
}

/// Every cleaning change, by a night or from here, newest first.
#[tauri::command]
pub async fn note_changes(app: State<'_, Arc<App>>) -> Reply<Vec<NoteChangeView>> {
    let mut changes: Vec<NoteChangeView> = app
        .store
        .note_changes()?
        .into_iter()
        .map(NoteChangeView::from)
        .collect();
    changes.reverse();
    Ok(changes)
}

/// Takes back cleaning change `id`: merged notes come back, hidden ones
/// show again.
#[tauri::command]
pub async fn undo_note_change(app: State<'_, Arc<App>>, id: i64) -> Reply<NoteChangeView> {
    Ok(app.store.undo_note_change(id)?.into())
}
