//! Matrix products in bf16 with f32 sums, for the frozen projections and
//! the LM head, which are most of a training step's work: on Intel AMX
//! tiles (Sapphire Rapids and later, [`amx`]) or with AVX-512 BF16's
//! `vdpbf16ps` (AMD Zen 4 and later, Intel Cooper Lake; [`dpbf16`]), both
//! of which multiply-add pairs of bf16 values at twice f32 FMA's rate or
//! more.
//!
//! `C [m, n] = A [m, k] · B [k, n]`: `A` (activations) arrives in f32 and is
//! rounded to bf16 per call ([`Rounded`]); `B` (a frozen weight) is rounded
//! and laid out once, in [`Packed`]: for 16 columns, pairs of consecutive
//! `k` side by side, the layout both instructions read. Each kernel call
//! computes a 32 × 32 block of `C`, walking `k` 32 values at a time.
//!
//! The products run only where the CPU has one of the two ([`available`]);
//! everything else keeps f32.

use std::sync::OnceLock;

use rayon::prelude::*;

use crate::{amx, dpbf16};

/// Rows and columns of `C` one kernel call computes.
const BLOCK: usize = 32;
/// `k` values one tile step consumes (16 rows × 64 bytes of bf16 pairs).
const K_STEP: usize = 32;
/// bf16 values in one packed `B` tile: 16 pairs of `k` × 16 columns.
const TILE: usize = 512;

/// A kernel's `C [32, 32] (+)= A · B` (see [`amx::block`]).
type Block = unsafe fn(*const u16, usize, *const u16, *const u16, usize, *mut f32, usize, bool);

/// The instructions that multiply bf16 pairs on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// AMX tiles (`tdpbf16ps`).
    Amx,
    /// AVX-512 BF16 (`vdpbf16ps`).
    Avx512,
}

impl Kernel {
    pub fn as_str(self) -> &'static str {
        match self {
            Kernel::Amx => "amx",
            Kernel::Avx512 => "avx512-bf16",
        }
    }
}

/// The fastest bf16 kernel this process may run, if any: AMX where the CPU
/// has it and Linux grants the tile state, else AVX-512 BF16.
pub fn kernel() -> Option<Kernel> {
    static K: OnceLock<Option<Kernel>> = OnceLock::new();
    *K.get_or_init(|| {
        if amx::available() {
            Some(Kernel::Amx)
        } else if dpbf16::available() {
            Some(Kernel::Avx512)
        } else {
            None
        }
    })
}

/// Whether products can run in bf16 on this machine.
pub fn available() -> bool {
    kernel().is_some()
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
    /// rows is one column of `B`.
    pub fn transposed(w: &[f32], n: usize, k: usize) -> Packed {
        assert_eq!(w.len(), n * k, "weight of {n} × {k}");
        Packed::filled(k, n, |group, c0, width| {
            // The group's rows rounded front to back (a loop that
            // vectorizes), then laid out pair by pair.
            let mut rows = vec![0u16; width * k];
            for (dst, src) in rows
                .chunks_exact_mut(k.max(1))
                .zip(w[c0 * k..].chunks(k.max(1)))
            {
                round_into(dst, src);
            }
            fill_pairs(group, k, width, |j, kk| rows[j * k + kk]);
        })
    }

    /// `B = W` for `W [k, n]` row-major: the backward pass of the same
    /// projection (`dy · W`). A group of 16 columns reads 16 values of each
    /// of `W`'s rows.
    pub fn plain(w: &[f32], k: usize, n: usize) -> Packed {
        assert_eq!(w.len(), k * n, "weight of {k} × {n}");
        Packed::filled(k, n, |group, c0, width| {
            plain_group(group, w, k, n, c0, width)
        })
    }

    /// `B [k, n]` padded to whole tiles, each group of 16 columns filled by
    /// `fill(group, first column, columns)` on the thread pool.
    fn filled(k: usize, n: usize, fill: impl Fn(&mut [u16], usize, usize) + Sync) -> Packed {
        let kp = padded(k);
        let np = n.div_ceil(BLOCK) * BLOCK;
        let steps = kp / K_STEP;
        let mut data = vec![0u16; kp * np];
        data.par_chunks_mut(steps * TILE)
            .enumerate()
            .for_each(|(g, group)| {
                let c0 = g * 16;
                if c0 < n {
                    fill(group, c0, 16.min(n - c0));
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

    /// The packed values: the group of 16 columns `g` starts at
    /// `g · group_len()`, and its `k` pair `p` 32 values after that per pair.
    pub(crate) fn data(&self) -> &[u16] {
        &self.data
    }

    /// Values one group of 16 columns holds.
    pub(crate) fn group_len(&self) -> usize {
        self.kp * 16
    }
}

/// `W [k, n]` row-major packed into `dst` as [`Packed::plain`] lays it out,
/// on the calling thread, for operands rebuilt many times over (attention's
/// probabilities): `k` a multiple of 32 and `n` of 16, so no padding is
/// left to clear.
pub(crate) fn plain_into(dst: &mut [u16], w: &[f32], k: usize, n: usize) {
    assert!(
        k.is_multiple_of(K_STEP) && n.is_multiple_of(16) && w.len() >= k * n && dst.len() >= k * n,
        "packing {k} × {n}"
    );
    for (g, group) in dst.chunks_exact_mut(k * 16).take(n / 16).enumerate() {
        plain_group(group, w, k, n, g * 16, 16);
    }
}

/// One group of 16 columns of `B = W` for `W [k, n]` row-major, from column
/// `c0` (`width` of them), in [`Packed`]'s order.
fn plain_group(group: &mut [u16], w: &[f32], k: usize, n: usize, c0: usize, width: usize) {
    if width < 16 {
        let value = |j: usize, kk: usize| bf16(w[kk * n + c0 + j]);
        return fill_pairs(group, k, width, value);
    }
    // A whole group: two rows' 16 values rounded and interleaved at
    // a time, in loops of known length that vectorize.
    let row = |kk: usize| -> &[f32; 16] { w[kk * n + c0..][..16].try_into().expect("16 values") };
    for (p, out) in group.chunks_exact_mut(32).take(k / 2).enumerate() {
        let (even, odd) = (row(2 * p), row(2 * p + 1));
        for j in 0..16 {
            out[2 * j] = bf16(even[j]);
            out[2 * j + 1] = bf16(odd[j]);
        }
    }
    if k % 2 == 1 {
        let last = row(k - 1);
        let out = &mut group[(k / 2) * 32..];
        for j in 0..16 {
            out[2 * j] = bf16(last[j]);
        }
    }
}

/// Values kept for a later pass, in f32 or rounded to bf16 (half the
/// bytes; the later pass sees the rounded values).
pub(crate) enum Kept {
    F32(Vec<f32>),
    Bf16(Vec<u16>),
}

impl Kept {
    /// `v`, rounded to bf16 with `in_bf16` (on the thread pool).
    pub(crate) fn new(v: Vec<f32>, in_bf16: bool) -> Kept {
        if in_bf16 {
            Kept::Bf16(v.par_iter().map(|&x| bf16(x)).collect())
        } else {
            Kept::F32(v)
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        match self {
            Kept::F32(v) => v.len() * 4,
            Kept::Bf16(v) => v.len() * 2,
        }
    }

    /// The values in f32 again.
    pub(crate) fn into_f32(self) -> Vec<f32> {
        match self {
            Kept::F32(v) => v,
            Kept::Bf16(v) => v
                .par_iter()
                .map(|&b| f32::from_bits((b as u32) << 16))
                .collect(),
        }
    }
}

/// `src` rounded to bf16 into `dst`.
#[inline(always)]
pub(crate) fn round_into(dst: &mut [u16], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = bf16(*s);
    }
}

/// Writes one group of 16 columns of `B`, already rounded (`value(j, kk)`
/// is `B[kk][c0 + j]` for the group's first column `c0`, `j < width`), in
/// its packed order: the pair `kk = 2p, 2p + 1` of column `j` at
/// `32 p + 2 j`, so the output is written front to back, one 64-byte row
/// of a tile per pair (within a tile of 32 `k` values, row `(kk % 32) / 2`;
/// tiles follow one another). Padding stays as it is (zero).
#[inline(always)]
fn fill_pairs(group: &mut [u16], k: usize, width: usize, value: impl Fn(usize, usize) -> u16) {
    let full = k / 2;
    for (p, out) in group.chunks_exact_mut(32).take(full).enumerate() {
        for j in 0..width {
            out[2 * j] = value(j, 2 * p);
            out[2 * j + 1] = value(j, 2 * p + 1);
        }
    }
    if k % 2 == 1 {
        let out = &mut group[full * 32..];
        for j in 0..width {
            out[2 * j] = value(j, k - 1);
        }
    }
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
    let kernel = kernel().expect("no bf16 dot products on this machine");
    matmul_on(kernel, dst, ldc, a, b, add);
}

/// [`matmul_rounded`] with a chosen kernel, which the CPU must have.
fn matmul_on(kernel: Kernel, dst: &mut [f32], ldc: usize, a: &Rounded, b: &Packed, add: bool) {
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
    let block: Block = match kernel {
        Kernel::Amx => amx::block,
        Kernel::Avx512 => dpbf16::block,
    };
    (0..pairs.div_ceil(per_task)).into_par_iter().for_each(|t| {
        // SAFETY: the CPU has AMX and the process holds the tile state
        // (checked by `kernel`); released below on the same thread.
        let _tiles = (kernel == Kernel::Amx).then(|| unsafe { amx::Tiles::load() });
        let mut scratch = [0f32; BLOCK * BLOCK];
        for mb in 0..mp / BLOCK {
            for pair in t * per_task..((t + 1) * per_task).min(pairs) {
                let a0 = ab[mb * BLOCK * kp..].as_ptr();
                let b0 = b.data[(2 * pair) * steps * TILE..].as_ptr();
                let b1 = b.data[(2 * pair + 1) * steps * TILE..].as_ptr();
                let (r0, c0) = (mb * BLOCK, pair * BLOCK);
                let whole = r0 + BLOCK <= m && c0 + BLOCK <= n;
                let (rows, w) = (BLOCK.min(m - r0), BLOCK.min(n - c0));
                // SAFETY: the kernel runs on this CPU (checked by
                // `kernel`); `a0` has 32 rows of `kp` bf16, `b0`/`b1`
                // `steps` tiles each, and the destination 32 rows of 32
                // floats at its stride: inside `dst` when whole, `scratch`
                // otherwise (filled from and copied back to `dst`'s part).
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
    });
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

    /// Every kernel this CPU has, not only the one [`kernel`] picks.
    fn kernels() -> Vec<Kernel> {
        let mut k = Vec::new();
        if amx::available() {
            k.push(Kernel::Amx);
        }
        if dpbf16::available() {
            k.push(Kernel::Avx512);
        }
        k
    }

    #[test]
    fn every_kernel_matches_a_bf16_reference_in_both_layouts_ragged_sizes_and_sums() {
        let kernels = kernels();
        assert_eq!(
            kernel(),
            kernels.first().copied(),
            "AMX first, then AVX-512"
        );
        if kernels.is_empty() {
            eprintln!("no bf16 dot products on this CPU: the kernels are not exercised here");
            return;
        }
        for kernel in kernels {
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
                    let rounded = Rounded::new(&a, m, k, k);
                    let mut got = vec![f32::NAN; m * n];
                    matmul_on(kernel, &mut got, n, &rounded, &packed, false);
                    let err = max_diff(&got, &want);
                    assert!(
                        err < 1e-3 * k as f32,
                        "{kernel:?} {m}×{n}×{k} {layout}: error {err}"
                    );
                    // Added to what the destination holds.
                    let mut sum = vec![1.5f32; m * n];
                    matmul_on(kernel, &mut sum, n, &rounded, &packed, true);
                    let want_sum: Vec<f32> = want.iter().map(|w| w + 1.5).collect();
                    let err = max_diff(&sum, &want_sum);
                    assert!(
                        err < 1e-3 * k as f32,
                        "{kernel:?} {m}×{n}×{k} {layout} added: {err}"
                    );
                };
                check(Packed::transposed(&w, n, k), "transposed");
                // The same product through the plain layout of Wᵀ [k, n].
                let wt: Vec<f32> = (0..k * n).map(|i| w[(i % n) * k + i / n]).collect();
                check(Packed::plain(&wt, k, n), "plain");
            }
        }
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    }
}
