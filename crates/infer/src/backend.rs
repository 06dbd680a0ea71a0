//! The process-wide llama.cpp backend, initialised once.

use std::sync::OnceLock;

use llama_cpp_2::llama_backend::LlamaBackend;

use crate::error::InferError;

static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

/// The backend, started on first use. llama.cpp's own log lines go to
/// `tracing` (target `llama-cpp-2`) instead of stderr.
pub fn get() -> Result<&'static LlamaBackend, InferError> {
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| InferError::Backend(e.clone()))
}
