//! The chat loop of one channel: a user message in, a streamed reply out,
//! and every token of both recorded in the store with its role.
//!
//! A [`ChannelSession`] restores a channel's token-exact transcript from the
//! store, renders new messages through the model's chat template, streams the
//! reply as [`ChatEvent`]s and appends each message with its tokens (user
//! text as `user`, scaffolding as `context`, sampled tokens as `action` with
//! their log-probs). A cancelled or failed turn still records what was
//! generated: the trajectory is the product.
//!
//! This crate decides what a turn is; it must never render anything for a
//! person (that is the CLI's and the desktop app's job) or talk SQL.
//!
//! ```no_run
//! use reverie_agent::{CancelFlag, ChannelSession};
//! # fn demo(engine: &reverie_infer::Engine, store: &reverie_store::Store) {
//! let mut session = ChannelSession::open(engine, store, "general", "Be brief.").unwrap();
//! let params = reverie_core::SamplingParams::default();
//! session
//!     .send("Hello!", &params, &CancelFlag::default(), &mut |ev| println!("{ev:?}"))
//!     .unwrap();
//! # }
//! ```

mod actor;
mod cancel;
pub mod compact;
pub mod copied;
mod error;
mod guard;
pub mod reasoning;
mod session;
pub mod stray;
mod tool_setup;
pub mod toolcall;
pub mod unseen_files;
pub mod wrap_up;

pub use actor::{Agent, AgentConfig, PendingTurn};

/// Lets `engine` read the images conversations show it from `store`: a
/// recorded conversation replays from its blobs, whatever became of the
/// files the images came from.
pub fn show_images(engine: &reverie_infer::Engine, store: &std::sync::Arc<reverie_store::Store>) {
    let store = store.clone();
    engine.set_image_source(std::sync::Arc::new(move |n| {
        store.image(n).map_err(|e| e.to_string())
    }));
}
pub use cancel::CancelFlag;
pub use error::AgentError;
pub use guard::{StopCause, TurnGuard};
pub use reverie_core::ChatEvent;
pub use session::{repeats_an_earlier_call, take_back_last_question, ChannelSession, TurnOutcome};
pub use tool_setup::{ToolSetup, DEFAULT_MAX_TOOL_CALLS};

/// The default system prompt shipped with Reverie.
pub const DEFAULT_SYSTEM_PROMPT: &str = include_str!("../../../assets/prompts/system.md");
