//! Keeps freed buffers in the process heap while a trainer is alive.
//!
//! A training step allocates and frees hundreds of large tensors. glibc
//! serves big requests with fresh `mmap`s and returns them on free, so every
//! step pays for zeroing new pages and for TLB shootdowns across threads
//! (half of a warm step's time on the default model). Two things stand in
//! the way of simply raising the mmap threshold: glibc caps it at 32 MiB
//! (and ignores larger values), while one LM-head chunk is hundreds of MiB;
//! and every thread but the first gets its own arena, whose heaps cannot
//! hold a buffer over 64 MiB, so such buffers are mapped whatever the
//! settings. Hence:
//! - [`share_main_arena`], called first thing in `main`, puts every thread
//!   on glibc's main heap, which has no such limit;
//! - while any [`HeapHold`] lives, `mmap` is switched off for the allocator
//!   and freed memory is never trimmed, so every buffer comes from the heap
//!   and stays there for reuse. When the last hold is dropped the defaults
//!   come back and the heap is trimmed, so an app that trained at night does
//!   not keep the memory all day.

use std::sync::atomic::{AtomicUsize, Ordering};

static HOLDERS: AtomicUsize = AtomicUsize::new(0);

/// glibc's defaults for the trim threshold and for the number of mmaps.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const DEFAULT_TRIM_THRESHOLD: libc::c_int = 128 * 1024;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const DEFAULT_MMAP_MAX: libc::c_int = 65536;

/// Makes threads started from now on allocate from the main heap. Only
/// effective before the process starts its second thread.
pub fn share_main_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning parameters.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

pub struct HeapHold(());

impl HeapHold {
    pub fn new() -> HeapHold {
        if HOLDERS.fetch_add(1, Ordering::SeqCst) == 0 {
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: as above.
            unsafe {
                libc::mallopt(libc::M_MMAP_MAX, 0);
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
                libc::mallopt(libc::M_MMAP_MAX, DEFAULT_MMAP_MAX);
                libc::mallopt(libc::M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD);
                libc::malloc_trim(0);
            }
        }
    }
}
