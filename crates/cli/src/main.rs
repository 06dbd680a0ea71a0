//! `reverie`: Reverie without a window. Chat, inspect, export, fetch models
//! and benchmark from a terminal or cron.
//!
//! This binary only translates between a person (or a script) and the
//! library crates: it parses arguments, prints, and draws progress bars. Every
//! decision lives in `crates/*`. Commands that report take `--json` and then
//! print exactly one JSON object on stdout.

mod bench;
mod bench_days;
mod bench_judge;
mod bench_nights;
mod bench_tools;
mod bench_train;
mod bench_value;
mod channel_cmd;
mod chat;
mod doctor;
mod export;
mod model_cmd;
mod night_cmd;
mod notes_cmd;
mod output;
mod practice_cmd;
mod serve_cmd;
mod tool_cmd;
mod train_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "reverie",
    version,
    about = "A local agent that learns from its day while you sleep"
)]
struct Cli {
    /// Data folder (database, blobs, models, checkpoints).
    #[arg(long, env = "REVERIE_HOME", global = true)]
    home: Option<PathBuf>,
    /// More log output (-v info, -vv debug); logs go to stderr.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Chat with the agent (interactive, or one shot with --prompt).
    Chat(chat::ChatArgs),
    /// Rate a reply 👍 or 👎: the next night takes it as the reward of its sub-task.
    Rate(chat::RateArgs),
    /// Check the model, data folder, disk and build, and say what to fix.
    Doctor(doctor::DoctorArgs),
    /// Export trajectories (messages with token ids and roles).
    Export(export::ExportArgs),
    /// Fetch, list, choose or synthesize models.
    #[command(subcommand)]
    Model(model_cmd::ModelCommand),
    /// List, rename or delete channels.
    #[command(subcommand)]
    Channel(channel_cmd::ChannelCommand),
    /// Run the night: judge the day, train, verify and deploy a new checkpoint.
    Sleep(night_cmd::SleepArgs),
    /// Night records.
    #[command(subcommand)]
    Night(night_cmd::NightCommand),
    /// Checkpoints and rollback.
    #[command(subcommand)]
    Checkpoint(night_cmd::CheckpointCommand),
    /// Train a LoRA on sequences with roles and advantages; export q8_0 GGUF.
    Train(train_cmd::TrainArgs),
    /// Per-token log-probs of a text under the trainer or llama.cpp.
    Logprobs(train_cmd::LogprobsArgs),
    /// Run one of the agent's tools by hand, as the agent would.
    Tool(tool_cmd::ToolArgs),
    /// Undo the last file change the agent's tools made in a channel's workspace.
    Undo(tool_cmd::HistoryArgs),
    /// Redo the file change undone last.
    Redo(tool_cmd::HistoryArgs),
    /// The agent's notes: list, clean (as each night does) and undo.
    #[command(subcommand)]
    Notes(notes_cmd::NotesCommand),
    /// Practise a task family whose answers a program checks (trained on by the next night).
    Practice(practice_cmd::PracticeArgs),
    /// Success rate of the active model on fresh tasks of a family (fixed seed, never trained on).
    Eval(practice_cmd::EvalArgs),
    /// An OpenAI-compatible API on 127.0.0.1 (chat completions, tools, JSON schemas).
    Serve(serve_cmd::ServeArgs),
    /// Benchmarks against reference implementations.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    // Before any thread starts: a night's large buffers must be reusable on
    // whichever thread trains.
    reverie_train::heap::share_main_arena();
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("REVERIE_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(format!("{level},llama-cpp-2=error"))
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let home = reverie_core::Home::resolve(cli.home.as_deref());
    let result = match cli.command {
        Command::Chat(a) => chat::run(&home, a),
        Command::Rate(a) => chat::rate(&home, a),
        Command::Doctor(a) => doctor::run(&home, a),
        Command::Export(a) => export::run(&home, a),
        Command::Model(c) => model_cmd::run(&home, c),
        Command::Channel(c) => channel_cmd::run(&home, c),
        Command::Bench(c) => bench::run(&home, c),
        Command::Train(a) => train_cmd::train(&home, a),
        Command::Sleep(a) => night_cmd::sleep(&home, a),
        Command::Night(c) => night_cmd::night(&home, c),
        Command::Checkpoint(c) => night_cmd::checkpoint(&home, c),
        Command::Logprobs(a) => train_cmd::logprobs(&home, a),
        Command::Tool(a) => tool_cmd::tool(&home, a),
        Command::Undo(a) => tool_cmd::undo(&home, a),
        Command::Redo(a) => tool_cmd::redo(&home, a),
        Command::Notes(c) => notes_cmd::run(&home, c),
        Command::Practice(a) => practice_cmd::practice(&home, a),
        Command::Eval(a) => practice_cmd::eval(&home, a),
        Command::Serve(a) => serve_cmd::run(&home, a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
