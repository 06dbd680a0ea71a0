//! How an engine is sized and placed: slots, context, threads, GPU layers.

use std::path::PathBuf;
use std::time::Duration;

/// How the engine runs. `Default` suits a laptop CPU.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Worker slots: how many channels generate at the same time.
    pub slots: usize,
    /// Context window per slot, in tokens.
    pub n_ctx: u32,
    /// Prompt tokens decoded per llama.cpp call.
    pub n_batch: u32,
    /// CPU threads per slot.
    pub threads: usize,
    /// Layers offloaded to the GPU (needs the `cuda` feature).
    pub gpu_layers: u32,
    /// A llama.cpp LoRA adapter GGUF applied on top of the model.
    pub adapter: Option<PathBuf>,
    /// Requests allowed to wait before `generate` answers `Busy`.
    pub max_queued: usize,
    /// No token for this long ends a generation as stalled; twice as long
    /// and the worker is replaced.
    pub stall_timeout: Duration,
    /// Fault injection for tests: hang (ignoring cancel) before this token.
    #[doc(hidden)]
    pub fault_hang_after_tokens: Option<usize>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            slots: 2,
            n_ctx: 8192,
            n_batch: 512,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            gpu_layers: 0,
            adapter: None,
            max_queued: 64,
            stall_timeout: Duration::from_secs(60),
            fault_hang_after_tokens: None,
        }
    }
}

impl EngineConfig {
    /// The one way Reverie sizes an engine: `slots` channels at once,
    /// `n_ctx` tokens each, `gpu_layers` offloaded, `threads` per slot
    /// (all cores when `None`); the rest as by default.
    pub fn sized(slots: usize, n_ctx: u32, gpu_layers: u32, threads: Option<usize>) -> Self {
        let default = EngineConfig::default();
        EngineConfig {
            slots,
            n_ctx,
            gpu_layers,
            threads: threads.map_or(default.threads, |t| t.max(1)),
            ..default
        }
    }
}
