use std::path::PathBuf;

/// What went wrong loading a model or generating with it.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error(transparent)]
    Gguf(#[from] reverie_gguf::GgufError),
    #[error("{path}: architecture {arch:?} is not supported by this llama.cpp build")]
    UnsupportedArch { path: PathBuf, arch: String },
    #[error("llama.cpp could not load {path}: {reason}")]
    Load { path: PathBuf, reason: String },
    #[error("llama.cpp backend failed to start: {0}")]
    Backend(String),
    #[error(
        "could not create a llama.cpp context ({0}); lower the context size or the number of slots"
    )]
    Context(String),
    #[error("chat template: {0}")]
    Template(String),
    #[error("grammar rejected: {0}")]
    Grammar(String),
    #[error("the prompt has {tokens} tokens but the context holds {n_ctx}; start a new channel or raise --ctx")]
    ContextFull { tokens: usize, n_ctx: u32 },
    #[error("llama.cpp decode failed: {0}")]
    Decode(String),
    #[error("{queued} requests are already waiting; try again when one finishes")]
    Busy { queued: usize },
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("generation failed: {0}")]
    Generation(String),
    #[error("image: {0}")]
    Vision(String),
    #[error("the engine is shut down")]
    ShutDown,
    #[error(
        "the model is parked while the night trains; it computes again once the night is over"
    )]
    Parked,
}
