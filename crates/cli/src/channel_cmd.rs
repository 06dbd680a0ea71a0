//! `reverie channel`.

use std::process::ExitCode;

use clap::Subcommand;
use reverie_core::Home;
use reverie_store::{Store, StoreError};

use crate::output;

#[derive(Subcommand)]
pub enum ChannelCommand {
    /// List channels with their message counts.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Rename a channel.
    Rename { from: String, to: String },
    /// Delete a channel and everything recorded in it.
    Delete { name: String },
}

pub fn run(home: &Home, cmd: ChannelCommand) -> anyhow::Result<ExitCode> {
    let store = Store::open(home)?;
    let find = |name: &str| -> anyhow::Result<_> {
        Ok(store
            .channel_by_name(name)?
            .ok_or_else(|| StoreError::NoSuchChannel(name.to_string()))?)
    };
    match cmd {
        ChannelCommand::List { json } => {
            let mut rows = Vec::new();
            for c in store.channels()? {
                let n = store.messages(c.id)?.len();
                rows.push(serde_json::json!({"id": c.id.0, "name": c.name, "messages": n, "created_ms": c.created_ms}));
            }
            if json {
                output::json(&serde_json::json!({ "channels": rows }))?;
            } else {
                for r in &rows {
                    println!(
                        "{:>4}  {:<24} {} messages",
                        r["id"],
                        r["name"].as_str().unwrap_or(""),
                        r["messages"]
                    );
                }
            }
        }
        ChannelCommand::Rename { from, to } => store.rename_channel(find(&from)?.id, &to)?,
        ChannelCommand::Delete { name } => store.delete_channel(find(&name)?.id)?,
    }
    Ok(ExitCode::SUCCESS)
}
