//! `reverie-desktop`: Reverie in a window. A thin Tauri 2 shell over the
//! crates: each command translates between the web front end (`ui/`) and
//! the library crates, which decide everything. Replies stream over Tauri
//! Channels as `ChatEvent`s, a night's progress as `NightEvent`s.
//!
//! `reverie-desktop [--home DIR] [--model FILE]` takes the same data folder
//! and model options as the `reverie` command line.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

mod chat;
mod failure;
mod notes;
mod review;
mod settings;
mod setup;
mod sleep;
mod state;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use tauri::Manager;

#[derive(Parser)]
#[command(name = "reverie-desktop", version, about = "Reverie in a window")]
struct Args {
    /// Data folder (database, blobs, models, checkpoints).
    #[arg(long, env = "REVERIE_HOME")]
    home: Option<PathBuf>,
    /// A GGUF file to run instead of the active model.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Context window in tokens (0: the model's own, up to 32K, as the
    /// memory available allows).
    #[arg(long, default_value_t = 0)]
    ctx: u32,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Layers to offload to the GPU (CUDA builds).
    #[arg(long, default_value_t = 0)]
    gpu_layers: u32,
    /// Passed by WebDriver servers when they start the app; nothing to do.
    #[arg(long, hide = true)]
    automation: bool,
}

fn main() -> ExitCode {
    // Before any thread starts: a night's large buffers must be reusable on
    // whichever thread trains.
    reverie_train::heap::share_main_arena();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("REVERIE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let home = reverie_core::Home::resolve(args.home.as_deref());
    let launch = state::Launch {
        model: args.model,
        ctx: args.ctx,
        threads: args.threads,
        gpu_layers: args.gpu_layers,
    };
    let app = match state::App::open(home, launch) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("reverie-desktop: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    sleep::spawn_scheduler(app.clone());
    // Load the model while the window opens, so the first reply does not wait.
    let preload = app.clone();
    std::thread::spawn(move || {
        if preload.model_path().is_some() {
            if let Err(e) = preload.runtime() {
                tracing::warn!("the model did not load: {e:#}");
            }
            // The API, when the settings turn it on.
            if let Err(e) = preload.apply_api(preload.settings().api_port) {
                tracing::warn!("the API did not start: {e:#}");
            }
        }
    });
    let built = tauri::Builder::default()
        .manage(app)
        .invoke_handler(tauri::generate_handler![
            setup::app_status,
            setup::fetch_default_model,
            setup::list_models,
            setup::choose_model,
            setup::projector_status,
            setup::choose_projector,
            setup::get_settings,
            setup::set_settings,
            setup::api_status,
            setup::health,
            chat::list_channels,
            chat::create_channel,
            chat::rename_channel,
            chat::delete_channel,
            chat::channel_history,
            chat::context_usage,
            chat::get_system_prompt,
            chat::set_system_prompt,
            chat::send_message,
            chat::stop_generation,
            chat::rate_reply,
            chat::regenerate,
            chat::edit_message,
            chat::save_attachment,
            chat::image_data,
            chat::open_link,
            review::list_episodes,
            review::episode,
            review::set_review_mark,
            review::list_nights,
            sleep::sleep_estimate,
            sleep::start_sleep,
            sleep::watch_sleep,
            sleep::cancel_sleep,
            sleep::list_checkpoints,
            sleep::rollback_checkpoint,
            notes::clean_notes,
            notes::note_changes,
            notes::undo_note_change,
        ])
        .build(tauri::generate_context!());
    let built = match built {
        Ok(b) => b,
        Err(e) => {
            eprintln!("reverie-desktop: cannot open the window: {e}");
            return ExitCode::FAILURE;
        }
    };
    built.run(|handle, event| {
        if let tauri::RunEvent::Exit = event {
            handle.state::<Arc<state::App>>().shutdown();
        }
    });
    ExitCode::SUCCESS
}
