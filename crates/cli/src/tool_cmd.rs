//! `reverie tool`, `reverie undo` and `reverie redo`: the agent's tools run
//! by hand, in the channel's workspace, exactly as the agent runs them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use reverie_core::Home;
use reverie_store::Store;
use serde_json::Value;

use crate::output;

#[derive(Args)]
pub struct ToolArgs {
    /// Tool name (`reverie tool --list` shows them).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// Arguments as a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Channel whose workspace and history to use.
    #[arg(long, default_value = "general")]
    channel: String,
    /// Set the channel's workspace folder first.
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// List the tools with their parameter schemas.
    #[arg(long)]
    list: bool,
    /// Print one JSON object (ok, text, attachments).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct HistoryArgs {
    /// Channel whose workspace to undo or redo in.
    #[arg(long, default_value = "general")]
    channel: String,
}

fn toolbox(
    home: &Home,
    channel: &str,
    workspace: Option<&std::path::Path>,
) -> anyhow::Result<reverie_tools::Toolbox> {
    let store = Arc::new(Store::open(home)?);
    crate::chat::open_toolbox(home, &store, channel, workspace)
}

/// Prints a tool's result; a tool error exits non-zero.
fn report(
    result: Result<reverie_tools::ToolOutput, reverie_tools::ToolError>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let (ok, text, attachments) = match result {
        Ok(out) => (true, out.text, out.attachments),
        Err(e) => (false, e.to_string(), Vec::new()),
    };
    if json {
        let atts: Vec<Value> = attachments
            .iter()
            .map(|a| serde_json::json!({"blob": a.blob, "name": a.name, "image": a.is_image}))
            .collect();
        output::json(&serde_json::json!({"ok": ok, "text": text, "attachments": atts}))?;
    } else if ok {
        println!("{text}");
        for a in attachments {
            println!("attachment: {} ({})", a.name, a.blob);
        }
    } else {
        eprintln!("tool error: {text}");
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub fn tool(home: &Home, args: ToolArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        for def in reverie_tools::definitions() {
            let f = &def["function"];
            println!(
                "{}: {}",
                f["name"].as_str().unwrap_or(""),
                f["description"].as_str().unwrap_or("")
            );
            println!("    {}", f["parameters"]);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let parsed: Value = serde_json::from_str(&args.args).map_err(|e| {
        anyhow::anyhow!(
            "--args is not valid JSON ({e}); pass an object, e.g. --args '{{\"path\": \"a.txt\"}}'"
        )
    })?;
    if !parsed.is_object() {
        anyhow::bail!("--args must be a JSON object, e.g. --args '{{\"path\": \"a.txt\"}}'");
    }
    let tb = toolbox(home, &args.channel, args.workspace.as_deref())?;
    let name = args.name.unwrap_or_default();
    report(tb.call(&name, &parsed), args.json)
}

pub fn undo(home: &Home, args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let tb = toolbox(home, &args.channel, None)?;
    report(tb.call("undo", &Value::Null), false)
}

pub fn redo(home: &Home, args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let tb = toolbox(home, &args.channel, None)?;
    report(tb.call("redo", &Value::Null), false)
}
