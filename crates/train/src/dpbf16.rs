//! The AVX-512 BF16 kernel of [`crate::bf16_matmul`], for CPUs without AMX (AMD
//! Zen 4 and later, Intel Cooper Lake): `vdpbf16ps` adds to each of 16 f32
//! lanes the products of one pair of bf16 values, so one instruction does
//! the work of two f32 FMAs.
//!
//! A 32 × 32 block of `C` is computed 8 rows at a time: 16 accumulators (8
//! rows × 2 vectors of 16 columns), and per pair of `k` two vectors of `B`
//! (a row of the packed tile, which holds the pair for 16 columns side by
//! side) and each row's pair of `A` broadcast to every lane.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of `C` a full pass of [`block`] (one call of [`rows`]) holds in
/// registers.
pub(crate) const ROWS: usize = 8;

/// Whether the CPU has AVX-512 BF16.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `C [32, 32] (+)= A [32, 32·steps] · B`, with the arguments of
/// [`crate::amx::block`]: `a` points at 32 rows of bf16, `lda` values
/// apart; `b0` and `b1` at the `steps` packed tiles of two groups of 16
/// columns; `c` at 32 rows of 32 floats, `ldc` floats apart.
///
/// # Safety
/// Only where [`available`], with every pointer valid for the extent above.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
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
    // 16 accumulators: 24 (12 rows) measured no faster.
    let b = (b0, b1, steps * 16);
    for r0 in (0..32).step_by(ROWS) {
        rows(a.add(r0 * lda), lda, b, c.add(r0 * ldc), ldc, add);
    }
}

/// `C [8, 32] (+)= A [8, 2·pairs] · B` ([`ROWS`] rows of [`block`]): `b`
/// is the two column groups' tiles and the number of `k` pairs they hold.
/// A packed tile is 16 rows of one `k` pair for 16 columns, so the pairs of
/// a group follow one another, 32 bf16 (one vector) apart.
///
/// # Safety
/// Only where [`available`], with `a` valid for 8 rows of `2 · pairs` bf16
/// `lda` apart, each group for `pairs` vectors, `c` for 8 rows of 32 floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
pub(crate) unsafe fn rows(
    a: *const u16,
    lda: usize,
    (b0, b1, pairs): (*const u16, *const u16, usize),
    c: *mut f32,
    ldc: usize,
    add: bool,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; ROWS];
    if add {
        for (r, acc) in acc.iter_mut().enumerate() {
            acc[0] = _mm512_loadu_ps(c.add(r * ldc));
            acc[1] = _mm512_loadu_ps(c.add(r * ldc + 16));
        }
    }
    for p in 0..pairs {
        let v0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b0.add(p * 32).cast()));
        let v1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b1.add(p * 32).cast()));
        for (r, acc) in acc.iter_mut().enumerate() {
            let pair = a.add(r * lda + 2 * p).cast::<i32>().read_unaligned();
            let x: __m512bh = std::mem::transmute(_mm512_set1_epi32(pair));
            acc[0] = _mm512_dpbf16_ps(acc[0], x, v0);
            acc[1] = _mm512_dpbf16_ps(acc[1], x, v1);
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        _mm512_storeu_ps(c.add(r * ldc), acc[0]);
        _mm512_storeu_ps(c.add(r * ldc + 16), acc[1]);
    }
}

/// Never called: [`available`] is false off x86-64.
///
/// # Safety
/// None needed; it panics.
#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn block(
    _: *const u16,
    _: usize,
    _: *const u16,
    _: *const u16,
    _: usize,
    _: *mut f32,
    _: usize,
    _: bool,
) {
    unreachable!("AVX-512 BF16 exists only on x86-64")
}

/// [`rows`] in plain Rust on any CPU: each pair's two products of bf16
/// values added to the f32 sum, as `vdpbf16ps` does. For tests of the
/// layouts the kernel reads.
///
/// # Safety
/// The pointers as for [`rows`].
#[cfg(test)]
pub(crate) unsafe fn rows_reference(
    a: *const u16,
    lda: usize,
    (b0, b1, pairs): (*const u16, *const u16, usize),
    c: *mut f32,
    ldc: usize,
    add: bool,
) {
    let f = |x: u16| f32::from_bits((x as u32) << 16);
    for r in 0..ROWS {
        for (g, b) in [b0, b1].into_iter().enumerate() {
            for j in 0..16 {
                let out = c.add(r * ldc + 16 * g + j);
                let mut sum = if add { *out } else { 0.0 };
                for p in 0..pairs {
                    let (x0, x1) = (*a.add(r * lda + 2 * p), *a.add(r * lda + 2 * p + 1));
                    let (y0, y1) = (*b.add(p * 32 + 2 * j), *b.add(p * 32 + 2 * j + 1));
                    sum += f(x0) * f(y0) + f(x1) * f(y1);
                }
                *out = sum;
            }
        }
    }
}

/// Never called: [`available`] is false off x86-64.
///
/// # Safety
/// None needed; it panics.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn rows(
    _: *const u16,
    _: usize,
    _: (*const u16, *const u16, usize),
    _: *mut f32,
    _: usize,
    _: bool,
) {
    unreachable!("AVX-512 BF16 exists only on x86-64")
}
