//! `reverie notes`: the agent's notes, their routine cleaning and its undo.

use std::process::ExitCode;

use clap::Subcommand;
use reverie_core::Home;
use reverie_store::Store;

use crate::output;

#[derive(Subcommand)]
pub enum NotesCommand {
    /// The notes, with when each was written and last recalled.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Clean now, as each night does: merge notes that say the same thing,
    /// put away finished to-dos and notes untouched for half a year.
    Clean {
        #[arg(long)]
        json: bool,
    },
    /// The cleaning's changes, newest last.
    Changes {
        #[arg(long)]
        json: bool,
    },
    /// Undo a cleaning change (default: the latest not yet undone).
    Undo { change: Option<i64> },
}

pub fn run(home: &Home, cmd: NotesCommand) -> anyhow::Result<ExitCode> {
    let store = Store::open(home)?;
    match cmd {
        NotesCommand::List { json } => {
            let notes = store.notes()?;
            if json {
                let rows: Vec<_> = notes
                    .iter()
                    .map(|n| serde_json::json!({"id": n.id, "title": n.title, "body": n.body, "created_ms": n.created_ms, "used_ms": n.used_ms}))
                    .collect();
                output::json(&rows)?;
            } else if notes.is_empty() {
                println!("no notes yet");
            } else {
                for n in notes {
                    println!("{}: {}", n.id, n.title);
                }
            }
        }
        NotesCommand::Clean { json } => {
            let now = reverie_night::trigger::now_ms();
            let said = reverie_tools::note_cleaning::clean(&store, now)?;
            if json {
                output::json(&said)?;
            } else if said.is_empty() {
                println!("nothing to clean");
            } else {
                for line in said {
                    println!("{line}");
                }
                println!("(`reverie notes undo` takes back the latest change)");
            }
        }
        NotesCommand::Changes { json } => {
            let changes = store.note_changes()?;
            if json {
                let rows: Vec<_> = changes
                    .iter()
                    .map(|c| serde_json::json!({"id": c.id, "at_ms": c.at_ms, "what": c.what, "removed": c.removed, "added": c.added, "undone_ms": c.undone_ms}))
                    .collect();
                output::json(&rows)?;
            } else {
                for c in changes {
                    let undone = if c.undone_ms.is_some() {
                        " (undone)"
                    } else {
                        ""
                    };
                    println!("{}: {}{undone}", c.id, c.what);
                }
            }
        }
        NotesCommand::Undo { change } => {
            let id = match change {
                Some(id) => id,
                None => store
                    .note_changes()?
                    .into_iter()
                    .rev()
                    .find(|c| c.undone_ms.is_none())
                    .map(|c| c.id)
                    .ok_or_else(|| anyhow::anyhow!("no cleaning change to undo"))?,
            };
            let c = store.undo_note_change(id)?;
            println!("undid change {}: {}", c.id, c.what);
        }
    }
    Ok(ExitCode::SUCCESS)
}
