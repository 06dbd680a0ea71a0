//! Frozen weights kept in their GGUF block formats (Q4_K, Q6_K, Q8_0, F16,
//! …) and dequantized one tile of rows at a time inside each product, so a
//! model's frozen part costs what its file costs rather than four bytes per
//! parameter. The values are exactly those of dequantize-then-multiply: each
//! tile is expanded to f32 (candle's block decoders, the same arithmetic as
//! llama.cpp's) and multiplied by gemm.
//!
//! The weight is held as consecutive row tiles, each its own [`QTensor`] on
//! the model's device: the CPU kernels read a tile's blocks in place, and the
//! portable path dequantizes a tile with candle's own kernels wherever it
//! runs.

use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8_0, GgmlType,
};
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{DType, Device, Result, Tensor};
use half::{bf16, f16};
use rayon::prelude::*;

use crate::bf16_matmul::{self, Packed, Rounded};
use crate::cpu::{gemm_views, View};

/// About this many bytes of f32 per dequantized tile: big enough for gemm to
/// run at full speed, small enough to stay in the caches' reach.
const TILE_BYTES: usize = 4 << 20;

/// A frozen `W [out, in]` in a GGUF block format.
pub(crate) struct Quantized {
    dims: (usize, usize),
    dtype: GgmlDType,
    tile_rows: usize,
    tiles: Vec<QTensor>,
    /// Multiply each expanded tile in bf16 (f32 sums, [`bf16_matmul`]), as a GPU
    /// would, instead of f32 gemm.
    bf16: bool,
}

/// Runs `$f::<Block>($args)` for the block type of `$dtype`.
macro_rules! by_block {
    ($dtype:expr, $f:ident($($arg:expr),*)) => {
        match $dtype {
            GgmlDType::Q4_0 => $f::<BlockQ4_0>($($arg),*),
            GgmlDType::Q4_1 => $f::<BlockQ4_1>($($arg),*),
            GgmlDType::Q5_0 => $f::<BlockQ5_0>($($arg),*),
            GgmlDType::Q5_1 => $f::<BlockQ5_1>($($arg),*),
            GgmlDType::Q8_0 => $f::<BlockQ8_0>($($arg),*),
            GgmlDType::Q2K => $f::<BlockQ2K>($($arg),*),
            GgmlDType::Q3K => $f::<BlockQ3K>($($arg),*),
            GgmlDType::Q4K => $f::<BlockQ4K>($($arg),*),
            GgmlDType::Q5K => $f::<BlockQ5K>($($arg),*),
            GgmlDType::Q6K => $f::<BlockQ6K>($($arg),*),
            GgmlDType::F16 => $f::<f16>($($arg),*),
            GgmlDType::BF16 => $f::<bf16>($($arg),*),
            other => candle_core::bail!("frozen weights in {other:?} are not kept quantized"),
        }
    };
}

/// Expands whole rows of `T` blocks (`bytes`, rows of `inp` values) into
/// `dst`, rows in parallel.
fn expand<T: GgmlType>(bytes: &[u8], dst: &mut [f32], inp: usize) -> Result<()> {
    decode::<T>(bytes, dst, inp, true)
}

/// [`expand`] on the calling thread, for callers that split the rows
/// among threads themselves.
fn expand_here<T: GgmlType>(bytes: &[u8], dst: &mut [f32], inp: usize) -> Result<()> {
    decode::<T>(bytes, dst, inp, false)
}

/// Rows of `inp` values held in `dtype` blocks (`bytes`) expanded into
/// `dst` on the calling thread.
pub(crate) fn rows_to_f32(
    dtype: GgmlDType,
    bytes: &[u8],
    dst: &mut [f32],
    inp: usize,
) -> Result<()> {
    by_block!(dtype, expand_here(bytes, dst, inp))
}

fn decode<T: GgmlType>(bytes: &[u8], dst: &mut [f32], inp: usize, parallel: bool) -> Result<()> {
    let size = std::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size) || !inp.is_multiple_of(T::BLCK_SIZE) {
        candle_core::bail!("{:?} blocks do not tile a row of {inp}", T::DTYPE);
    }
    let n = bytes.len() / size;
    let copied: Vec<T>;
    let blocks: &[T] = if bytes.as_ptr().align_offset(std::mem::align_of::<T>()) == 0 {
        // SAFETY: aligned, `n` whole blocks, and every GGUF block type is
        // plain data (integers and floats) valid for any bit pattern.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), n) }
    } else {
        let mut v = vec![T::zeros(); n];
        // SAFETY: `v` holds exactly `bytes.len()` bytes of plain data.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), bytes.len())
        };
        copied = v;
        &copied
    };
    let per_row = inp / T::BLCK_SIZE;
    if blocks.len() * T::BLCK_SIZE != dst.len() {
        candle_core::bail!(
            "{} {:?} blocks for {} values",
            blocks.len(),
            T::DTYPE,
            dst.len()
        );
    }
    if parallel {
        dst.par_chunks_mut(inp)
            .zip(blocks.par_chunks(per_row))
            .for_each(|(d, b)| T::to_float(b, d));
    } else {
        for (d, b) in dst.chunks_mut(inp).zip(blocks.chunks(per_row)) {
            T::to_float(b, d);
        }
    }
    Ok(())
}

/// Every value of `q` as f32, row-major: rows expanded in parallel for the
/// block formats kept quantized, candle's own dequantization otherwise.
pub(crate) fn dequantize(q: &QTensor) -> Result<Vec<f32>> {
    let dtype = q.dtype();
    let dims = q.shape().dims();
    let n = q.shape().elem_count();
    let row = dims.last().copied().unwrap_or(1);
    if !Quantized::keeps(dtype) || !row.is_multiple_of(dtype.block_size()) {
        return q.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1::<f32>();
    }
    let mut out = vec![0f32; n];
    let data = q.data()?;
    by_block!(dtype, expand(&data, &mut out, row))?;
    Ok(out)
}

/// Bytes of one row of `inp` values in `dtype`.
pub(crate) fn row_bytes(dtype: GgmlDType, inp: usize) -> usize {
    inp / dtype.block_size() * dtype.type_size()
}

impl Quantized {
    /// Whether a weight in `dtype` is kept quantized (f32 weights stay
    /// dense: nothing to save).
    pub(crate) fn keeps(dtype: GgmlDType) -> bool {
        !matches!(dtype, GgmlDType::F32 | GgmlDType::Q8_1 | GgmlDType::Q8K)
    }

    /// `q [out, in]` split into row tiles on `device`.
    pub(crate) fn new(q: &QTensor, device: &Device) -> Result<Quantized> {
        let dtype = q.dtype();
        if !Quantized::keeps(dtype) {
            candle_core::bail!("frozen weights in {dtype:?} are not kept quantized");
        }
        let (out, inp) = q.shape().dims2()?;
        if !inp.is_multiple_of(dtype.block_size()) {
            candle_core::bail!("rows of {inp} are not whole {dtype:?} blocks");
        }
        let tile_rows = (TILE_BYTES / (4 * inp.max(1))).clamp(16, out.max(16));
        let data = q.data()?;
        let rb = row_bytes(dtype, inp);
        if data.len() != out * rb {
            candle_core::bail!("{dtype:?} weight [{out}, {inp}] holds {} bytes", data.len());
        }
        let tiles = (0..out)
            .step_by(tile_rows)
            .map(|r0| {
                let n = tile_rows.min(out - r0);
                let bytes = std::borrow::Cow::Borrowed(&data[r0 * rb..(r0 + n) * rb]);
                QTensor::new(QStorage::from_data(bytes, device, dtype)?, (n, inp))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Quantized {
            dims: (out, inp),
            dtype,
            tile_rows,
            tiles,
            bf16: false,
        })
    }

    /// The same weight multiplied in bf16. Only where
    /// [`bf16_matmul::available`].
    pub(crate) fn in_bf16(mut self) -> Result<Quantized> {
        if !bf16_matmul::available() {
            candle_core::bail!("bf16 products need a CPU with AMX or AVX-512 BF16");
        }
        self.bf16 = true;
        Ok(self)
    }

    /// `(out, in)`.
    pub(crate) fn dims(&self) -> (usize, usize) {
        self.dims
    }

    /// Bytes the weight occupies.
    pub(crate) fn bytes(&self) -> usize {
        self.tiles.iter().map(QTensor::storage_size_in_bytes).sum()
    }

    /// The first row and the row count of tile `i`.
    fn span(&self, i: usize) -> (usize, usize) {
        let r0 = i * self.tile_rows;
        (r0, self.tile_rows.min(self.dims.0 - r0))
    }

    /// Tile `i` as f32 values in `dst` (`rows × in`), on the CPU.
    fn expand_tile(&self, i: usize, dst: &mut [f32]) -> Result<()> {
        let data = self.tiles[i].data()?;
        by_block!(self.dtype, expand(&data, dst, self.dims.1))
    }

    /// `y [rows, out] = x [rows, in] · Wᵀ`, on the CPU.
    pub(crate) fn project(&self, y: &mut [f32], x: &[f32], rows: usize) -> Result<()> {
        let (out, inp) = self.dims;
        assert!(y.len() >= rows * out && x.len() >= rows * inp);
        let mut w = vec![0f32; self.tile_rows * inp];
        let rounded = self.bf16.then(|| Rounded::new(x, rows, inp, inp));
        for i in 0..self.tiles.len() {
            let (r0, n) = self.span(i);
            let w = &mut w[..n * inp];
            {
                let _t = crate::timing::span("quant.expand");
                self.expand_tile(i, w)?;
            }
            if let Some(a) = &rounded {
                let b = {
                    let _t = crate::timing::span("quant.pack");
                    Packed::transposed(w, n, inp)
                };
                let _t = crate::timing::span("quant.kernel");
                bf16_matmul::matmul_rounded(&mut y[r0..], out, a, &b, false);
                continue;
            }
            // `y[:, r0..r0 + n] = x · wᵀ`, `w` `[n, in]` read as `[in, n]`.
            gemm_views(
                &mut y[r0..],
                out,
                (rows, n, inp),
                View {
                    data: x,
                    rs: inp,
                    cs: 1,
                },
                View {
                    data: w,
                    rs: 1,
                    cs: inp,
                },
                false,
            );
        }
        Ok(())
    }

    /// `dx [rows, in] = g [rows, out] · W`, on the CPU (overwrites `dx`).
    pub(crate) fn project_back_into(&self, dx: &mut [f32], g: &[f32], rows: usize) -> Result<()> {
        let (out, inp) = self.dims;
        assert!(dx.len() >= rows * inp && g.len() >= rows * out);
        let mut w = vec![0f32; self.tile_rows * inp];
        for i in 0..self.tiles.len() {
            let (r0, n) = self.span(i);
            let w = &mut w[..n * inp];
            {
                let _t = crate::timing::span("quant.expand");
                self.expand_tile(i, w)?;
            }
            let add = i > 0;
            if self.bf16 {
                let (a, b) = {
                    let _t = crate::timing::span("quant.pack");
                    (
                        Rounded::new(&g[r0..], rows, n, out),
                        Packed::plain(w, n, inp),
                    )
                };
                let _t = crate::timing::span("quant.kernel");
                bf16_matmul::matmul_rounded(dx, inp, &a, &b, add);
                continue;
            }
            // `dx (+)= g[:, r0..r0 + n] · w`.
            gemm_views(
                dx,
                inp,
                (rows, inp, n),
                View {
                    data: &g[r0..],
                    rs: out,
                    cs: 1,
                },
                View {
                    data: w,
                    rs: inp,
                    cs: 1,
                },
                add,
            );
        }
        Ok(())
    }

    /// Rows `ids` of `W` as f32 values `[ids, in]` (an embedding lookup), on
    /// the CPU.
    pub(crate) fn rows(&self, ids: &[u32]) -> Result<Vec<f32>> {
        let (out, inp) = self.dims;
        let rb = row_bytes(self.dtype, inp);
        let mut dst = vec![0f32; ids.len() * inp];
        for (&id, d) in ids.iter().zip(dst.chunks_mut(inp.max(1))) {
            let id = id as usize;
            if id >= out {
                candle_core::bail!("token {id} is outside the vocabulary of {out}");
            }
            let (t, r) = (id / self.tile_rows, id % self.tile_rows);
            let data = self.tiles[t].data()?;
            by_block!(self.dtype, expand(&data[r * rb..(r + 1) * rb], d, inp))?;
        }
        Ok(dst)
    }

    /// `x [m, in] · Wᵀ` from tensor ops, tile by tile on `x`'s device, in
    /// `dtype`, result f32.
    pub(crate) fn project_tensor(&self, x: &Tensor, dtype: DType) -> Result<Tensor> {
        let x = x.to_dtype(dtype)?;
        let parts = self
            .tiles
            .iter()
            .map(|t| x.matmul(&t.dequantize(x.device())?.to_dtype(dtype)?.t()?))
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&parts, 1)?.to_dtype(DType::F32)
    }

    /// `g [m, out] · W` from tensor ops, tile by tile, in `dtype`, result f32.
    pub(crate) fn project_back_tensor(&self, g: &Tensor, dtype: DType) -> Result<Tensor> {
        let g = g.to_dtype(dtype)?;
        let mut dx: Option<Tensor> = None;
        for (i, t) in self.tiles.iter().enumerate() {
            let (r0, n) = self.span(i);
            let part = g
                .narrow(1, r0, n)?
                .matmul(&t.dequantize(g.device())?.to_dtype(dtype)?)?
                .to_dtype(DType::F32)?;
            dx = Some(match dx {
                Some(acc) => (acc + part)?,
                None => part,
            });
        }
        dx.ok_or_else(|| candle_core::Error::Msg("an empty frozen weight".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::max_abs_diff;

    /// Every block format a GGUF model's frozen weights come in, with the
    /// row width each needs.
    const FORMATS: [GgmlDType; 11] = [
        GgmlDType::Q4_0,
        GgmlDType::Q4_1,
        GgmlDType::Q5_0,
        GgmlDType::Q5_1,
        GgmlDType::Q8_0,
        GgmlDType::Q2K,
        GgmlDType::Q3K,
        GgmlDType::Q4K,
        GgmlDType::Q5K,
        GgmlDType::Q6K,
        GgmlDType::F16,
    ];

    #[test]
    fn tiles_multiply_exactly_as_the_dequantized_weight_in_both_directions() {
        let dev = Device::Cpu;
        let (rows, inp) = (7, 512);
        for dtype in FORMATS.into_iter().chain([GgmlDType::BF16]) {
            // More rows than one tile holds, and a last tile cut short.
            let out = TILE_BYTES / (4 * inp) + 37;
            let w = Tensor::randn(0f32, 1.0, (out, inp), &dev).unwrap();
            let q = QTensor::quantize(&w, dtype).unwrap();
            let dense = q.dequantize(&dev).unwrap();
            let held = Quantized::new(&q, &dev).unwrap();
            assert!(
                held.tiles.len() >= 2,
                "{dtype:?}: {} tiles",
                held.tiles.len()
            );
            assert_eq!(held.bytes(), q.storage_size_in_bytes());

            let x = Tensor::randn(0f32, 1.0, (rows, inp), &dev).unwrap();
            let mut y = vec![0f32; rows * out];
            held.project(&mut y, &x.flatten_all().unwrap().to_vec1().unwrap(), rows)
                .unwrap();
            let y = Tensor::from_vec(y, (rows, out), &dev).unwrap();
            let expect = x.matmul(&dense.t().unwrap()).unwrap();
            let d = max_abs_diff(&y, &expect);
            assert!(d < 1e-3, "{dtype:?}: forward differs by {d}");

            let g = Tensor::randn(0f32, 1.0, (rows, out), &dev).unwrap();
            let mut dx = vec![f32::NAN; rows * inp];
            held.project_back_into(&mut dx, &g.flatten_all().unwrap().to_vec1().unwrap(), rows)
                .unwrap();
            let dx = Tensor::from_vec(dx, (rows, inp), &dev).unwrap();
            let expect = g.matmul(&dense).unwrap();
            let d = max_abs_diff(&dx, &expect);
            assert!(d < 1e-2, "{dtype:?}: input gradient differs by {d}");

            // The portable path, tile by tile with tensor ops.
            let d = max_abs_diff(&held.project_tensor(&x, DType::F32).unwrap(), &y);
            assert!(d < 1e-3, "{dtype:?}: portable forward differs by {d}");
            let d = max_abs_diff(&held.project_back_tensor(&g, DType::F32).unwrap(), &dx);
            assert!(d < 1e-2, "{dtype:?}: portable gradient differs by {d}");

            let whole = Tensor::from_vec(dequantize(&q).unwrap(), (out, inp), &dev).unwrap();
            assert_eq!(max_abs_diff(&whole, &dense), 0.0, "{dtype:?}: dequantize");

            let ids = [0u32, (out - 1) as u32, 5];
            let got = Tensor::from_vec(held.rows(&ids).unwrap(), (3, inp), &dev).unwrap();
            let idx = Tensor::new(&ids, &dev).unwrap();
            let d = max_abs_diff(&got, &dense.index_select(&idx, 0).unwrap());
            assert_eq!(d, 0.0, "{dtype:?}: looked-up rows differ");
        }
    }

    #[test]
    fn bf16_products_agree_with_f32_within_bf16_rounding() {
        let dev = Device::Cpu;
        let (rows, inp) = (45, 512);
        let out = TILE_BYTES / (4 * inp) + 37;
        let w = Tensor::randn(0f32, 1.0, (out, inp), &dev).unwrap();
        let q = QTensor::quantize(&w, GgmlDType::Q4K).unwrap();
        if !bf16_matmul::available() {
            let err = Quantized::new(&q, &dev).unwrap().in_bf16().err().unwrap();
            assert!(err.to_string().contains("AVX-512 BF16"), "{err}");
            eprintln!("no bf16 dot products on this CPU: only the refusal is checked here");
            return;
        }
        let (exact, tiled) = (
            Quantized::new(&q, &dev).unwrap(),
            Quantized::new(&q, &dev).unwrap().in_bf16().unwrap(),
        );
        let x: Vec<f32> = Tensor::randn(0f32, 1.0, rows * inp, &dev)
            .unwrap()
            .to_vec1()
            .unwrap();
        let g: Vec<f32> = Tensor::randn(0f32, 1.0, rows * out, &dev)
            .unwrap()
            .to_vec1()
            .unwrap();
        let worst = |a: &[f32], b: &[f32]| {
            let scale = a.iter().fold(0f32, |m, v| m.max(v.abs()));
            a.iter().zip(b).fold(0f32, |m, (p, q)| m.max((p - q).abs())) / scale
        };
        let (mut y1, mut y2) = (vec![0f32; rows * out], vec![0f32; rows * out]);
        exact.project(&mut y1, &x, rows).unwrap();
        tiled.project(&mut y2, &x, rows).unwrap();
        let d = worst(&y1, &y2);
        assert!(d > 0.0 && d < 2e-2, "forward differs by {d} of its range");
        let (mut d1, mut d2) = (vec![0f32; rows * inp], vec![f32::NAN; rows * inp]);
        exact.project_back_into(&mut d1, &g, rows).unwrap();
        tiled.project_back_into(&mut d2, &g, rows).unwrap();
        let d = worst(&d1, &d2);
        assert!(
            d > 0.0 && d < 2e-2,
            "input gradient differs by {d} of its range"
        );
    }

    #[test]
    fn unsupported_and_unknown_rows_are_refused() {
        let dev = Device::Cpu;
        let w = Tensor::zeros((4, 256), DType::F32, &dev).unwrap();
        let f32_held = QTensor::quantize(&w, GgmlDType::F32).unwrap();
        let err = Quantized::new(&f32_held, &dev).err().unwrap().to_string();
        assert!(err.contains("not kept quantized"), "{err}");
        let held = Quantized::new(&QTensor::quantize(&w, GgmlDType::Q8_0).unwrap(), &dev).unwrap();
        let err = held.rows(&[4]).unwrap_err().to_string();
        assert!(err.contains("outside the vocabulary"), "{err}");
    }
}
