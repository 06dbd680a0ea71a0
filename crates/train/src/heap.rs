//! Keeps freed buffers in the process heap while a trainer is alive.
//!
//! A training step allocates and frees hundreds of large tensors. glibc
//! serves big requests with fresh `mmap`s and returns them on free, so every
//! step pays for zeroing new pages and for TLB shootdowns across threads
//! (a third of a step's time on the default model). While any [`HeapHold`]
//! lives, big buffers come from the heap and stay there for reuse; when the
//! last one is dropped the defaults come back and the heap is trimmed, so an
//! app that trained at night does not keep the memory all day.

use std::sync::atomic::{AtomicUsize, Ordering};

static HOLDERS: AtomicUsize = AtomicUsize::new(0);

/// glibc's defaults for the two thresholds.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const DEFAULT_THRESHOLD: libc::c_int = 128 * 1024;

pub struct HeapHold(());

impl HeapHold {
    pub fn new() -> HeapHold {
        if HOLDERS.fetch_add(1, Ordering::SeqCst) == 0 {
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: mallopt only changes allocator tuning parameters.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
                libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
            }
        }
        HeapHold(())
    }
}

impl Default for HeapHold {
    fn default() -> Self {
        HeapHold::new()
    }
}

impl Drop for HeapHold {
    fn drop(&mut self) {
        if HOLDERS.fetch_sub(1, Ordering::SeqCst) == 1 {
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: as above; malloc_trim only returns free heap pages.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, DEFAULT_THRESHOLD);
                libc::mallopt(libc::M_TRIM_THRESHOLD, DEFAULT_THRESHOLD);
                libc::malloc_trim(0);
            }
        }
    }
}
