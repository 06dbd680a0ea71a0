//! The AMX kernel of [`crate::bf16_matmul`]: a 32 × 32 block of `C` in four
//! accumulator tiles (`tdpbf16ps`), on Sapphire Rapids and later, where
//! Linux grants the process the tile state.

use std::sync::OnceLock;

/// Whether this process may run the AMX kernel: the CPU reports AMX-TILE
/// and AMX-BF16, and the kernel granted the tile data state (Linux ≥ 5.16).
pub(crate) fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> bool {
    // CPUID.(EAX=7, ECX=0):EDX bit 22 = AMX-BF16, bit 24 = AMX-TILE.
    // SAFETY: CPUID leaf 7 exists on every x86-64 CPU this builds for.
    #[allow(unused_unsafe)]
    let edx = unsafe { std::arch::x86_64::__cpuid_count(7, 0) }.edx;
    if edx & (1 << 22) == 0 || edx & (1 << 24) == 0 {
        return false;
    }
    const ARCH_REQ_XCOMP_PERM: libc::c_ulong = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_ulong = 18;
    // SAFETY: a plain system call with integer arguments.
    unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> bool {
    false
}

/// The 64-byte tile configuration `ldtilecfg` reads (palette 1).
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

impl TileConfig {
    /// Tiles 0–7, each 16 rows of 64 bytes: 0–3 accumulate `C` (16 × 16
    /// f32), 4–5 hold `A` (16 × 32 bf16), 6–7 hold `B` (16 × 16 pairs).
    fn new() -> TileConfig {
        let mut c = TileConfig {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        for t in 0..8 {
            c.colsb[t] = 64;
            c.rows[t] = 16;
        }
        c
    }

    unsafe fn load_config(&self) {
        std::arch::asm!("ldtilecfg [{}]", in(reg) self as *const TileConfig, options(nostack));
    }

    unsafe fn release() {
        std::arch::asm!("tilerelease", options(nostack, nomem));
    }
}

/// `C [32, 32] (+)= A [32, 32·steps] · B`: `a` points at 32 rows of bf16,
/// `lda` values apart; `b0` and `b1` at the `steps` tiles of two groups of
/// 16 columns; `c` at 32 rows of 32 floats, `ldc` floats apart, which the
/// product replaces or, with `add`, is added to.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn block(
    a: *const u16,
    lda: usize,
    b0: *const u16,
    b1: *const u16,
    steps: usize,
    c: *mut f32,
    ldc: usize,
    add: bool,
) {
    let lda_bytes = lda * 2;
    let a1 = a.add(16 * lda);
    let ldc_bytes = ldc * 4;
    let c1 = c.add(16 * ldc);
    if add {
        std::arch::asm!(
            "tileloadd tmm0, [{c0} + {ldc}*1]",
            "tileloadd tmm1, [{c0} + {ldc}*1 + 64]",
            "tileloadd tmm2, [{c1} + {ldc}*1]",
            "tileloadd tmm3, [{c1} + {ldc}*1 + 64]",
            c0 = in(reg) c,
            c1 = in(reg) c1,
            ldc = in(reg) ldc_bytes,
            options(nostack, readonly),
        );
    } else {
        std::arch::asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack, nomem),
        );
    }
    // The accumulators stay in tmm0–3 between the two blocks: tile
    // registers are not Rust's, so nothing in between touches them.
    std::arch::asm!(
        "2:",
        "tileloadd tmm4, [{a0} + {lda}*1]",
        "tileloadd tmm5, [{a1} + {lda}*1]",
        "tileloadd tmm6, [{b0} + {s64}*1]",
        "tileloadd tmm7, [{b1} + {s64}*1]",
        "tdpbf16ps tmm0, tmm4, tmm6",
        "tdpbf16ps tmm1, tmm4, tmm7",
        "tdpbf16ps tmm2, tmm5, tmm6",
        "tdpbf16ps tmm3, tmm5, tmm7",
        "add {a0}, 64",
        "add {a1}, 64",
        "add {b0}, 1024",
        "add {b1}, 1024",
        "dec {n}",
        "jnz 2b",
        "tilestored [{c0} + {ldc}*1], tmm0",
        "tilestored [{c0} + {ldc}*1 + 64], tmm1",
        "tilestored [{c1} + {ldc}*1], tmm2",
        "tilestored [{c1} + {ldc}*1 + 64], tmm3",
        a0 = inout(reg) a => _,
        a1 = inout(reg) a1 => _,
        b0 = inout(reg) b0 => _,
        b1 = inout(reg) b1 => _,
        n = inout(reg) steps => _,
        lda = in(reg) lda_bytes,
        s64 = in(reg) 64usize,
        c0 = in(reg) c,
        c1 = in(reg) c1,
        ldc = in(reg) ldc_bytes,
        options(nostack),
    );
}

/// The tile state, configured for [`block`] on this thread until dropped.
pub(crate) struct Tiles(());

impl Tiles {
    /// # Safety
    /// Only where [`available`], and dropped on the thread that loaded it.
    pub(crate) unsafe fn load() -> Tiles {
        TileConfig::new().load_config();
        Tiles(())
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: releases the tile state `load` configured on this thread.
        unsafe { TileConfig::release() };
    }
}
