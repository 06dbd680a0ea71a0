//! Reverie's domain types: channels, messages, token spans with roles,
//! sampling settings and the [`ChatEvent`] enum that is the only thing a chat
//! sends outward.
//!
//! This crate owns the vocabulary every other crate speaks. It must never do
//! I/O: no files, no database, no clock, no environment. Serialization derives
//! are here so the edges (store, IPC, files) can use them, but nothing in this
//! crate decides *where* data goes.
//!
//! ```
//! use reverie_core::{TokenRole, TokenSpan};
//!
//! let mut span = TokenSpan::default();
//! span.push(151644, TokenRole::Context, None);
//! span.push(9707, TokenRole::Action, Some(-0.25));
//! assert_eq!(span.len(), 2);
//! assert_eq!(span.count(TokenRole::Action), 1);
//! ```

mod chat;
mod home;
mod message;
mod sampling;
mod token;

pub use chat::{ChatEvent, StopReason};
pub use home::Home;
pub use message::{
    channel_name, live_start, BadChannelName, ChannelId, Message, MessageId, MessageRole,
    ParseRoleError, MAX_CHANNEL_NAME,
};
pub use sampling::SamplingParams;
pub use token::{has_images, image_number, image_token, TokenRole, TokenSpan};
