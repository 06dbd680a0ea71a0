//! Matrix products in bf16 on Intel AMX tiles (Sapphire Rapids and later),
//! accumulated in f32: an order of magnitude more multiply-adds per cycle
//! than f32 AVX-512, for the frozen projections and the LM head, which are
//! most of a training step's work.
//!
//! `C [m, n] = A [m, k] · B [k, n]`: `A` (activations) arrives in f32 and is
//! rounded to bf16 per call; `B` (a frozen weight) is rounded and laid out
//! once, in [`Packed`], as the tiles `tdpbf16ps` reads. Each call computes
//! 32 × 32 blocks of `C` in four accumulator tiles, walking `k` 32 values at
//! a time.
//!
//! The kernel runs only where the CPU has AMX-BF16 and Linux grants the
//! process the tile state ([`available`]); everything else keeps f32.

use std::sync::OnceLock;

use rayon::prelude::*;

/// Rows and columns of `C` one kernel call computes.
const BLOCK: usize = 32;
/// `k` values one tile step consumes (16 rows × 64 bytes of bf16 pairs).
const K_STEP: usize = 32;
/// bf16 values in one packed `B` tile: 16 pairs of `k` × 16 columns.
const TILE: usize = 512;

/// Whether this process may run the AMX kernel: the CPU reports AMX-TILE
/// and AMX-BF16, and the kernel granted the tile data state (Linux ≥ 5.16).
pub fn available() -> bool {
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

/// f32 → bf16, rounding to nearest even (NaN stays NaN). Branch-free, so
/// loops over slices vectorize.
#[inline(always)]
pub fn bf16(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16;
    let quiet_nan = (b >> 16) | 0x40;
    let nan = (b & 0x7FFF_FFFF) > 0x7F80_0000;
    (if nan { quiet_nan } else { rounded }) as u16
}

/// The `B` operand of `A · B`, rounded to bf16 and laid out as AMX tiles:
/// for each group of 16 columns, the `k` steps one after another, each a
/// tile of 16 rows (pairs of consecutive `k`) × 16 columns × 2.
pub struct Packed {
    data: Vec<u16>,
    k: usize,
    n: usize,
    /// `k` rounded up to [`K_STEP`], `n` up to [`BLOCK`].
    kp: usize,
    np: usize,
}

impl Packed {
    /// `B = Wᵀ` for `W [n, k]` row-major: the forward pass of a projection
    /// whose weight is stored as GGUF stores it (`x · Wᵀ`). Each of `W`'s
    /// rows is one column of `B`, read once, front to back.
    pub fn transposed(w: &[f32], n: usize, k: usize) -> Packed {
        assert_eq!(w.len(), n * k, "weight of {n} × {k}");
        Packed::filled(k, n, |group, c0, width, steps| {
            for j in 0..width {
                for (kk, &v) in w[(c0 + j) * k..(c0 + j + 1) * k].iter().enumerate() {
                    group[at(kk, j, steps)] = bf16(v);
                }
            }
        })
    }

    /// `B = W` for `W [k, n]` row-major: the backward pass of the same
    /// projection (`dy · W`). A group of 16 columns reads 16 values of each
    /// of `W`'s rows.
    pub fn plain(w: &[f32], k: usize, n: usize) -> Packed {
        assert_eq!(w.len(), k * n, "weight of {k} × {n}");
        Packed::filled(k, n, |group, c0, width, steps| {
            for kk in 0..k {
                for (j, &v) in w[kk * n + c0..kk * n + c0 + width].iter().enumerate() {
                    group[at(kk, j, steps)] = bf16(v);
                }
            }
        })
    }

    /// `B [k, n]` padded to whole tiles, each group of 16 columns filled by
    /// `fill(group, first column, columns, steps)` on the thread pool.
    fn filled(k: usize, n: usize, fill: impl Fn(&mut [u16], usize, usize, usize) + Sync) -> Packed {
        let kp = padded(k);
        let np = n.div_ceil(BLOCK) * BLOCK;
        let steps = kp / K_STEP;
        let mut data = vec![0u16; kp * np];
        data.par_chunks_mut(steps * TILE)
            .enumerate()
            .for_each(|(g, group)| {
                let c0 = g * 16;
                if c0 < n {
                    fill(group, c0, 16.min(n - c0), steps);
                }
            });
        Packed { data, k, n, kp, np }
    }

    /// `(k, n)`.
    pub fn dims(&self) -> (usize, usize) {
        (self.k, self.n)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * 2
    }
}

/// Where `B[kk][column j of a group]` lies in the group's packed tiles:
/// tile `kk / 32`, row `(kk % 32) / 2` of 16 pairs, pair `j`, half `kk % 2`.
#[inline(always)]
fn at(kk: usize, j: usize, steps: usize) -> usize {
    debug_assert!(kk < steps * K_STEP && j < 16);
    let q = kk % K_STEP;
    (kk / K_STEP) * TILE + (q / 2) * 32 + 2 * j + (q % 2)
}

/// A pointer handed to the worker threads, each of which writes only its
/// own columns.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: workers write disjoint column ranges of one buffer.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

impl Out {
    /// The element `i` places in; a method, so closures capture the whole
    /// (`Send`) wrapper rather than its raw pointer.
    fn at(self, i: usize) -> *mut f32 {
        self.0.wrapping_add(i)
    }
}

/// `dst [m, n] = a [m, k] · B`, all row-major; `a` is rounded to bf16.
/// Panics unless [`available`] (callers check once and keep f32 otherwise).
pub fn matmul(dst: &mut [f32], a: &[f32], m: usize, b: &Packed) {
    matmul_rounded(dst, b.n, &Rounded::new(a, m, b.k, b.k), b, false);
}

/// `k` padded to whole tile steps, as [`Packed`] and [`Rounded`] hold it.
fn padded(k: usize) -> usize {
    k.div_ceil(K_STEP) * K_STEP
}

/// A left operand `A [m, k]` rounded to bf16 and padded to whole blocks,
/// so several products can share one rounding.
pub(crate) struct Rounded {
    data: Vec<u16>,
    m: usize,
    kp: usize,
}

impl Rounded {
    /// Rows of `k` values `lda` apart in `a` (a column range of a wider
    /// matrix when `lda > k`).
    pub(crate) fn new(a: &[f32], m: usize, k: usize, lda: usize) -> Rounded {
        let kp = padded(k);
        assert!(
            m == 0 || a.len() >= (m - 1) * lda + k,
            "matmul operand sizes"
        );
        let mp = m.div_ceil(BLOCK) * BLOCK;
        let mut data = vec![0u16; mp * kp];
        data.par_chunks_mut(kp)
            .take(m)
            .enumerate()
            .for_each(|(i, row)| {
                for (d, s) in row.iter_mut().zip(&a[i * lda..i * lda + k]) {
                    *d = bf16(*s);
                }
            });
        Rounded { data, m, kp }
    }
}

/// `dst [m, n] (+)= A · B` with `dst` rows `ldc` floats apart (a column
/// range of a wider matrix when `ldc > n`); with `add` the product is added
/// to what `dst` holds. Panics unless [`available`].
pub(crate) fn matmul_rounded(dst: &mut [f32], ldc: usize, a: &Rounded, b: &Packed, add: bool) {
    assert!(available(), "AMX is not available on this machine");
    let (m, n) = (a.m, b.n);
    assert!(a.kp == b.kp && ldc >= n, "matmul operand shapes");
    if m == 0 || n == 0 {
        return;
    }
    assert!(dst.len() >= (m - 1) * ldc + n, "matmul operand sizes");
    let mp = m.div_ceil(BLOCK) * BLOCK;
    let (kp, ab) = (a.kp, &a.data);
    let np = b.np;
    let steps = kp / K_STEP;
    // Whole blocks are written straight into `dst`; ragged edges go
    // through a scratch block.
    let out = Out(dst.as_mut_ptr());
    let pairs = np / BLOCK;
    // Two column blocks per task keep a task's `B` panel and one row block
    // of `A` in L2 together; a narrow `B` takes one, so that every thread
    // gets a fair share of the tasks (7 tasks on 2 threads idle one an
    // eighth of the time).
    let per_task = if pairs >= 16 * rayon::current_num_threads() {
        2
    } else {
        1
    };
    (0..pairs.div_ceil(per_task)).into_par_iter().for_each(|t| {
        let cfg = TileConfig::new();
        // SAFETY: the CPU has AMX and the process holds the tile state
        // (checked above); the config sets every tile this code uses.
        unsafe { cfg.load() };
        let mut scratch = [0f32; BLOCK * BLOCK];
        for mb in 0..mp / BLOCK {
            for pair in t * per_task..((t + 1) * per_task).min(pairs) {
                let a0 = ab[mb * BLOCK * kp..].as_ptr();
                let b0 = b.data[(2 * pair) * steps * TILE..].as_ptr();
                let b1 = b.data[(2 * pair + 1) * steps * TILE..].as_ptr();
                let (r0, c0) = (mb * BLOCK, pair * BLOCK);
                let whole = r0 + BLOCK <= m && c0 + BLOCK <= n;
                let (rows, w) = (BLOCK.min(m - r0), BLOCK.min(n - c0));
                // SAFETY: `a0` has 32 rows of `kp` bf16, `b0`/`b1` `steps`
                // tiles each, and the destination 32 rows of 32 floats at
                // its stride: inside `dst` when whole, `scratch` otherwise
                // (filled from and copied back to `dst`'s part).
                unsafe {
                    if whole {
                        block(a0, kp, b0, b1, steps, out.at(r0 * ldc + c0), ldc, add);
                    } else {
                        if add {
                            for r in 0..rows {
                                std::ptr::copy_nonoverlapping(
                                    out.at((r0 + r) * ldc + c0),
                                    scratch[r * BLOCK..].as_mut_ptr(),
                                    w,
                                );
                            }
                        }
                        block(a0, kp, b0, b1, steps, scratch.as_mut_ptr(), BLOCK, add);
                        for r in 0..rows {
                            std::ptr::copy_nonoverlapping(
                                scratch[r * BLOCK..].as_ptr(),
                                out.at((r0 + r) * ldc + c0),
                                w,
                            );
                        }
                    }
                }
            }
        }
        // SAFETY: releases the tile state loaded above.
        unsafe { TileConfig::release() };
    });
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

    unsafe fn load(&self) {
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
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn block(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(a: &[f32], w: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
        // a [m, k] · w [n, k]ᵀ, with both rounded to bf16 first.
        let r = |x: f32| f32::from_bits((bf16(x) as u32) << 16);
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|t| r(a[i * k + t]) as f64 * r(w[j * k + t]) as f64)
                    .sum::<f64>() as f32;
            }
        }
        c
    }

    fn values(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn rounding_to_bf16_is_to_nearest_even() {
        assert_eq!(bf16(1.0), 0x3F80);
        assert_eq!(bf16(-2.5), 0xC020);
        // 1 + 2⁻⁸ lies halfway between 1 and 1 + 2⁻⁷: ties go to even (1).
        assert_eq!(bf16(1.0 + 1.0 / 256.0), 0x3F80);
        assert_eq!(bf16(1.0 + 3.0 / 256.0), 0x3F82);
        assert!(f32::from_bits((bf16(f32::NAN) as u32) << 16).is_nan());
    }

    #[test]
    fn products_match_a_bf16_reference_in_both_layouts_and_ragged_sizes() {
        if !available() {
            eprintln!("no AMX on this CPU: the kernel is not exercised here");
            return;
        }
        for &(m, n, k) in &[
            (32, 32, 32),
            (1, 1, 1),
            (45, 70, 100),
            (64, 96, 896),
            (33, 129, 65),
        ] {
            let a = values(m * k, 1 + m as u32);
            let w = values(n * k, 7 + n as u32);
            let want = reference(&a, &w, m, n, k);
            let check = |packed: Packed, layout: &str| {
                let mut got = vec![f32::NAN; m * n];
                matmul(&mut got, &a, m, &packed);
                let err = got
                    .iter()
                    .zip(&want)
                    .map(|(g, w)| (g - w).abs())
                    .fold(0f32, f32::max);
                assert!(err < 1e-3 * k as f32, "{m}×{n}×{k} {layout}: error {err}");
            };
            check(Packed::transposed(&w, n, k), "transposed");
            // The same product through the plain layout of Wᵀ [k, n].
            let wt: Vec<f32> = (0..k * n).map(|i| w[(i % n) * k + i / n]).collect();
            check(Packed::plain(&wt, k, n), "plain");
        }
    }
}
