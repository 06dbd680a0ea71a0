//! GGUF files: a header reader that validates before llama.cpp sees a file,
//! a streaming writer, and a generator of tiny synthetic models.
//!
//! The reader parses the header, metadata and tensor table and checks that
//! every tensor's bytes lie inside the file, so a truncated or corrupt model
//! gets an error that names the file and the reason instead of a crash deep in
//! C++. The writer streams tensors to disk one at a time (a multi-GB model is
//! never held in memory) into a temporary file that is fsynced and renamed.
//! [`synth`] writes small random-weight models of the architectures Reverie
//! supports, with a real tokenizer block and chat template, so tests and new
//! users can run the whole app in seconds; [`projector`] writes a tiny
//! vision projector (llama.cpp's `mtmd`) to pair with one.
//!
//! This crate must never depend on llama.cpp or candle: it is plain bytes.
//!
//! ```
//! use reverie_gguf::{synth, GgufFile};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("tiny.gguf");
//! synth::write(&path, &synth::SynthConfig::tiny(synth::Arch::Llama)).unwrap();
//! let file = GgufFile::open(&path).unwrap();
//! assert_eq!(file.architecture(), Some("llama"));
//! ```

pub mod projector;
mod read;
pub mod synth;
mod types;
mod write;

pub use read::{GgufError, GgufFile};
pub use types::{GgmlType, TensorInfo, Value};
pub use write::GgufWriter;

/// `general.alignment` when a file does not set it.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Every GGUF file starts with these four bytes.
pub const MAGIC: [u8; 4] = *b"GGUF";
