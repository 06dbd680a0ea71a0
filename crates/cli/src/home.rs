//! Where the data folder is: `--home`, else `REVERIE_HOME`, else
//! `$XDG_DATA_HOME/reverie` (usually `~/.local/share/reverie`).

use std::path::Path;

use reverie_core::Home;

pub fn resolve(explicit: Option<&Path>) -> Home {
    match explicit {
        Some(p) => Home::new(p),
        None => Home::new(
            dirs::data_dir()
                .unwrap_or_else(|| std::env::temp_dir().join("reverie-data"))
                .join("reverie"),
        ),
    }
}
