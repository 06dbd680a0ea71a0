//! `reverie export --format jsonl`: one line per channel, OpenAI-style chat
//! messages, each with the exact token ids, roles and log-probs recorded.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use reverie_core::{Home, Message};
use reverie_store::{Store, StoreError};
use serde_json::{json, Value};

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Jsonl,
}

#[derive(Args)]
pub struct ExportArgs {
    #[arg(long, value_enum, default_value = "jsonl")]
    format: Format,
    /// Only this channel.
    #[arg(long)]
    channel: Option<String>,
    /// Write here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn message_json(m: &Message) -> Value {
    json!({
        "role": m.role.as_str(),
        "content": m.text,
        "created_ms": m.created_ms,
        "tokens": {
            "ids": m.tokens.ids,
            "roles": m.tokens.roles.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
            "logprobs": m.tokens.logprobs,
        },
    })
}

pub fn run(home: &Home, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let Format::Jsonl = args.format;
    let store = Store::open(home)?;
    let channels = match &args.channel {
        Some(name) => vec![store
            .channel_by_name(name)?
            .ok_or_else(|| StoreError::NoSuchChannel(name.clone()))?],
        None => store.channels()?,
    };
    let mut out: Box<dyn Write> = match &args.out {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    for c in channels {
        let messages: Vec<Value> = store.messages(c.id)?.iter().map(message_json).collect();
        let line = json!({ "channel": c.name, "channel_id": c.id.0, "messages": messages });
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
