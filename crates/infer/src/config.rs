//! How an engine is sized and placed: slots, context, threads, GPU layers.

use std::path::PathBuf;
use std::time::Duration;

/// How the engine runs. `Default` suits a laptop CPU.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Worker slots: how many channels generate at the same time.
    pub slots: usize,
    /// Context window per slot, in tokens; 0 sizes it at load
    /// ([`auto_ctx`]).
    pub n_ctx: u32,
    /// Prompt tokens decoded per llama.cpp call.
    pub n_batch: u32,
    /// CPU threads per slot.
    pub threads: usize,
    /// Layers offloaded to the GPU (needs the `cuda` feature).
    pub gpu_layers: u32,
    /// A llama.cpp LoRA adapter GGUF applied on top of the model.
    pub adapter: Option<PathBuf>,
    /// A multimodal projector GGUF (`mmproj`) that lets the model see images.
    pub mmproj: Option<PathBuf>,
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
            mmproj: None,
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

/// The context a slot gets when none was asked for: the model's trained
/// context up to 32K tokens (at least 16K where the model has that much),
/// shrunk so that the slots' KV caches take at most a quarter of the memory
/// available, and never under 4K.
pub fn auto_ctx(
    trained: u32,
    kv_bytes_per_token: u64,
    slots: usize,
    available: Option<u64>,
) -> u32 {
    let trained = if trained == 0 { 8192 } else { trained };
    let want = trained.min(32_768);
    let fits = available.map_or(u64::MAX, |free| {
        free / 4 / (kv_bytes_per_token.max(1) * slots.max(1) as u64)
    });
    let floor = want.min(4096);
    (want.min(fits.min(u32::MAX as u64) as u32) / 256 * 256).max(floor)
}

/// Bytes of memory available now (`MemAvailable`), where Linux says.
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::auto_ctx;

    #[test]
    fn the_context_follows_the_model_and_the_memory() {
        let gib = 1u64 << 30;
        // The default model: 32K trained, 12 KiB of KV per token.
        assert_eq!(auto_ctx(32_768, 12_288, 4, Some(16 * gib)), 32_768);
        // A model trained on 8K keeps 8K.
        assert_eq!(auto_ctx(8192, 12_288, 4, Some(16 * gib)), 8192);
        // 128K trained: capped at 32K.
        assert_eq!(auto_ctx(131_072, 12_288, 1, None), 32_768);
        // A 7B's 56 KiB per token on 4 slots with 4 GiB free: 4,608.
        assert_eq!(auto_ctx(32_768, 57_344, 4, Some(4 * gib)), 4608);
        // Never under 4K, and a model that says nothing gets 8K.
        assert_eq!(auto_ctx(32_768, 57_344, 4, Some(gib / 4)), 4096);
        assert_eq!(auto_ctx(0, 12_288, 1, None), 8192);
    }
}
