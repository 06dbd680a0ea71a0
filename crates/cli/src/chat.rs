//! `reverie chat`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use reverie_agent::{CancelFlag, ChannelSession, ChatEvent, ToolSetup, DEFAULT_SYSTEM_PROMPT};
use reverie_core::{Home, SamplingParams};
use reverie_infer::{Engine, EngineConfig};
use reverie_store::Store;

use crate::output;

/// How to load the model; shared by every command that runs one.
#[derive(Args, Clone)]
pub struct EngineArgs {
    /// A GGUF file to use instead of the active model.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Context window in tokens (0: the model's own, up to 32K, as the
    /// memory available allows).
    #[arg(long, default_value_t = 0)]
    pub ctx: u32,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Layers to offload to the GPU (CUDA builds).
    #[arg(long, default_value_t = 0)]
    pub gpu_layers: u32,
    /// The multimodal projector (mmproj GGUF) that lets the model see
    /// images (default: the one chosen with `reverie model projector`, or
    /// one beside the model).
    #[arg(long)]
    pub mmproj: Option<PathBuf>,
}

impl EngineArgs {
    pub fn load(&self, home: &Home, slots: usize) -> anyhow::Result<Engine> {
        let path = reverie_models::active::resolve(home, self.model.as_deref())?;
        self.load_file(home, &path, slots)
    }

    /// Loads `path` whatever `--model` said, with these loading options:
    /// for a checkpoint a run made after the model it was started on.
    pub fn load_file(&self, home: &Home, path: &Path, slots: usize) -> anyhow::Result<Engine> {
        let mut config = EngineConfig::sized(slots, self.ctx, self.gpu_layers, self.threads);
        if let Some(p) = &self.mmproj {
            // Asked for by name: a projector that does not load is an error.
            config.mmproj = Some(p.clone());
            return Engine::load(path, config)
                .with_context(|| format!("loading {} with {}", path.display(), p.display()));
        }
        config.mmproj = reverie_models::projector::find(home, path)?;
        let (engine, set_aside) = Engine::load_or_without_projector(path, config)
            .with_context(|| format!("loading {}", path.display()))?;
        if let Some(why) = set_aside {
            eprintln!("reverie: the model cannot see images this time: {why}");
        }
        Ok(engine)
    }
}

#[derive(Args)]
pub struct ChatArgs {
    /// Channel to talk in (created if new).
    #[arg(long, default_value = "general")]
    channel: String,
    /// Send one message, print the reply and exit.
    #[arg(long)]
    prompt: Option<String>,
    /// Take back the channel's last question and its answer and ask it
    /// again (the window's ↻); the night ranks the new answer above the
    /// one taken back.
    #[arg(long, conflicts_with = "prompt")]
    again: bool,
    /// With --prompt: print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
    #[arg(long, default_value_t = 0.7)]
    temperature: f32,
    #[arg(long, default_value_t = 0.9)]
    top_p: f32,
    #[arg(long, default_value_t = 40)]
    top_k: i32,
    #[arg(long, default_value_t = 0x5EED)]
    seed: u32,
    #[arg(long, default_value_t = 1024)]
    max_tokens: usize,
    /// Chat without tools.
    #[arg(long)]
    no_tools: bool,
    /// Folder the channel's file tools work in (remembered for the channel).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Tool calls one turn may make.
    #[arg(long, default_value_t = reverie_agent::DEFAULT_MAX_TOOL_CALLS)]
    max_tool_calls: usize,
}

/// A person's verdict on a reply.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Verdict {
    /// 👍
    Good,
    /// 👎
    Bad,
    /// Take a rating back.
    None,
}

impl Verdict {
    fn good(self) -> Option<bool> {
        match self {
            Verdict::Good => Some(true),
            Verdict::Bad => Some(false),
            Verdict::None => None,
        }
    }
}

#[derive(Args)]
pub struct RateArgs {
    verdict: Verdict,
    /// The reply's channel.
    #[arg(long, default_value = "general")]
    channel: String,
    /// The reply's message id (default: the channel's last reply).
    #[arg(long)]
    message: Option<i64>,
    #[arg(long)]
    json: bool,
}

/// Rates `message` (default: the last reply) of `channel`; returns the
/// message rated.
fn rate_reply(
    store: &Store,
    channel: &str,
    message: Option<i64>,
    verdict: Verdict,
) -> anyhow::Result<reverie_core::MessageId> {
    let c = store
        .channel_by_name(channel)?
        .with_context(|| format!("there is no channel named {channel:?}"))?;
    let id = match message {
        Some(m) => reverie_core::MessageId(m),
        None => store
            .last_reply(c.id)?
            .with_context(|| format!("channel {channel:?} has no reply to rate yet"))?,
    };
    store.set_feedback(c.id, id, verdict.good())?;
    Ok(id)
}

pub fn rate(home: &Home, args: RateArgs) -> anyhow::Result<ExitCode> {
    let store = Store::open(home)?;
    let id = rate_reply(&store, &args.channel, args.message, args.verdict)?;
    if args.json {
        output::json(&serde_json::json!({
            "channel": args.channel,
            "message": id.0,
            "good": args.verdict.good(),
        }))?;
    } else {
        eprintln!("{}", rated_line(args.verdict, id));
    }
    Ok(ExitCode::SUCCESS)
}

fn rated_line(verdict: Verdict, id: reverie_core::MessageId) -> String {
    match verdict {
        Verdict::Good => format!("👍 reply {} (the next night rewards it)", id.0),
        Verdict::Bad => format!("👎 reply {} (the next night learns it went wrong)", id.0),
        Verdict::None => format!("rating of reply {} taken back", id.0),
    }
}

/// The channel's toolbox, after applying `--workspace`.
pub fn open_toolbox(
    home: &Home,
    store: &std::sync::Arc<Store>,
    channel: &str,
    workspace: Option<&std::path::Path>,
) -> anyhow::Result<reverie_tools::Toolbox> {
    let id = store.ensure_channel(channel)?;
    if let Some(dir) = workspace {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir.canonicalize()?;
        store.set_workspace(id, &dir.display().to_string())?;
    }
    let services = std::sync::Arc::new(reverie_tools::Services::new(home));
    Ok(reverie_tools::Toolbox::open(store.clone(), id, services)?)
}

/// Chat waits while a night trains: the model is about to change.
/// Returns whether it waited.
fn wait_for_morning(home: &Home) -> bool {
    let Some(pid) = reverie_night::lock::sleeping(home) else {
        return false;
    };
    eprintln!(
        "Reverie is sleeping (night in process {pid}); your message is queued until it wakes up"
    );
    while reverie_night::lock::sleeping(home).is_some() {
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    true
}

pub fn run(home: &Home, args: ChatArgs) -> anyhow::Result<ExitCode> {
    wait_for_morning(home);
    let store = std::sync::Arc::new(Store::open(home)?);
    let engine = args.engine.load(home, 1)?;
    reverie_agent::show_images(&engine, &store);
    let mut args = args;
    if args.again {
        let c = store
            .channel_by_name(&args.channel)?
            .with_context(|| format!("there is no channel named {:?}", args.channel))?;
        args.prompt = Some(reverie_agent::take_back_last_question(&store, c.id)?);
    }
    let params = SamplingParams {
        temperature: args.temperature,
        top_p: args.top_p,
        top_k: args.top_k,
        seed: args.seed,
        max_tokens: args.max_tokens,
    };
    let mut session = ChannelSession::open(&engine, &store, &args.channel, DEFAULT_SYSTEM_PROMPT)?;
    if !args.no_tools {
        let toolbox = open_toolbox(home, &store, &args.channel, args.workspace.as_deref())?;
        let mut setup = ToolSetup::new(toolbox);
        setup.max_calls = args.max_tool_calls;
        session = session.with_tools(setup);
    }
    let cancel = CancelFlag::default();
    {
        let cancel = cancel.clone();
        ctrlc::set_handler(move || cancel.cancel()).context("installing the Ctrl-C handler")?;
    }
    if let Some(prompt) = args.prompt {
        let quiet = args.json;
        let outcome = session.send(&prompt, &params, &cancel, &mut |ev| print_event(&ev, quiet))?;
        if args.json {
            output::json(&serde_json::json!({
                "channel": args.channel,
                "reply": outcome.reply,
                "reason": outcome.reason,
                "reply_tokens": outcome.reply_tokens,
                "tool_calls": outcome.tool_calls,
                "user_message": outcome.user_message.0,
                "reply_message": outcome.reply_message.0,
                "usage": outcome.usage,
            }))?;
        } else {
            println!();
        }
        return Ok(ExitCode::SUCCESS);
    }
    let info = engine.info();
    eprintln!(
        "Reverie · {} · channel {:?} · Enter sends, Ctrl-C stops a reply, /good or /bad rates it, Ctrl-D quits",
        info.name, args.channel
    );
    let home_for_wait = home.clone();
    let stdin = std::io::stdin();
    loop {
        eprint!("\nyou> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            eprintln!();
            break;
        }
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text == "/quit" {
            break;
        }
        let verdict = match text {
            "/good" => Some(Verdict::Good),
            "/bad" => Some(Verdict::Bad),
            "/unrate" => Some(Verdict::None),
            _ => None,
        };
        if let Some(v) = verdict {
            match rate_reply(&store, &args.channel, None, v) {
                Ok(id) => eprintln!("{}", rated_line(v, id)),
                Err(e) => eprintln!("error: {e}"),
            }
            continue;
        }
        if wait_for_morning(&home_for_wait) && args.engine.model.is_none() {
            // The night may have deployed a new checkpoint: wake up on it.
            let active = reverie_models::active::resolve(&home_for_wait, None)?;
            if active != engine.model_path() {
                let info = engine.swap_model(&active)?;
                eprintln!("good morning: now running {}", info.path.display());
            }
        }
        match session.send(text, &params, &cancel, &mut |ev| print_event(&ev, false)) {
            Ok(_) => println!(),
            Err(e) => eprintln!("\nerror: {e}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_event(ev: &ChatEvent, quiet: bool) {
    match ev {
        ChatEvent::Token { piece, .. } if !quiet => {
            print!("{piece}");
            let _ = std::io::stdout().flush();
        }
        ChatEvent::TurnEnd { reason, .. } if !quiet => match reason {
            reverie_core::StopReason::Cancelled => eprint!(" [stopped]"),
            reverie_core::StopReason::MaxTokens => eprint!(" [max tokens reached]"),
            reverie_core::StopReason::Stalled => eprint!(" [generation stalled and was ended]"),
            reverie_core::StopReason::ContextFull => {
                eprint!(" [context full: start a new channel]")
            }
            reverie_core::StopReason::ToolLimit => eprint!(" [tool calls stopped]"),
            reverie_core::StopReason::EndOfTurn => {}
        },
        ChatEvent::ToolCallStarted {
            name, arguments, ..
        } if !quiet => {
            eprint!("\n  ⚙ {name} {}", crate::output::shorten(arguments, 200));
        }
        ChatEvent::ToolCallFinished { ok, result, .. } if !quiet => {
            let mark = if *ok { "✓" } else { "✗" };
            let first = result.lines().next().unwrap_or_default();
            let more = result.lines().count().saturating_sub(1);
            let tail = if more > 0 {
                format!(" (+{more} lines)")
            } else {
                String::new()
            };
            eprintln!("\n  {mark} {}{tail}", crate::output::shorten(first, 200));
        }
        ChatEvent::Attachment { name, blob, .. } if !quiet => {
            eprintln!("  📎 {name} ({blob})");
        }
        ChatEvent::Notice { text, .. } if !quiet => eprintln!("\n[{text}]"),
        ChatEvent::StrayEnd { unintended, .. } if !quiet => {
            if *unintended {
                eprint!("\n[asked whether it meant to stop: no; it goes on]\n");
            } else {
                eprint!(" [asked whether it meant to stop: yes]");
            }
        }
        ChatEvent::Error { message, .. } => eprintln!("\nerror: {message}"),
        _ => {}
    }
}
