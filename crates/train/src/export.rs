//! Merge the adapter into the base weights and write a q8_0 GGUF that keeps
//! every metadata key of the base; or write the adapter alone as a llama.cpp
//! LoRA GGUF. Both stream tensor by tensor into a file that is renamed into
//! place only when complete.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use candle_core::quantized::{gguf_file, GgmlDType};
use candle_core::{DType, Device, Tensor};
use half::f16;
use rayon::prelude::*;
use reverie_gguf::{GgmlType, GgufFile, GgufWriter, Value};

use crate::cpu::{gemm, Stored};
use crate::error::TrainError;
use crate::lora::Lora;
use crate::model::Model;
use crate::quant::{row_bytes, rows_to_f32, Quantized};

/// llama.cpp's `LLAMA_FTYPE_MOSTLY_Q8_0`.
const FTYPE_Q8_0: u32 = 7;

/// Quantizes rows of 32-element blocks to q8_0: one f16 scale, 32 int8.
/// Ties round to even, as ggml's SIMD quantizer does; large inputs are split
/// across the available cores.
pub fn quantize_q8_0(values: &[f32]) -> Vec<u8> {
    let blocks = values.len().div_ceil(32);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = blocks.div_ceil(threads).max(1 << 14);
    let mut out = vec![0u8; blocks * 34];
    std::thread::scope(|scope| {
        for (src, dst) in values.chunks(per * 32).zip(out.chunks_mut(per * 34)) {
            scope.spawn(move || quantize_blocks(src, dst));
        }
    });
    out
}

fn quantize_blocks(values: &[f32], out: &mut [u8]) {
    for (block, dst) in values.chunks(32).zip(out.chunks_mut(34)) {
        let amax = block.iter().fold(0f32, |m, x| m.max(x.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        dst[..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
        for (q, x) in dst[2..].iter_mut().zip(block) {
            *q = (x * id).round_ties_even() as i8 as u8;
        }
    }
}

/// Inverse of [`quantize_q8_0`].
pub fn dequantize_q8_0(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(34)
        .flat_map(|b| {
            let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
            b[2..].iter().map(move |&q| q as i8 as f32 * d)
        })
        .collect()
}

fn tensor_f32(t: &Tensor) -> candle_core::Result<Vec<f32>> {
    t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()
}

/// What an export did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct ExportReport {
    pub tensors: usize,
    pub merged: usize,
    pub quantized: usize,
    pub kept: usize,
    #[ts(type = "number")]
    pub bytes: u64,
}

/// Writes `W + (α/r)·B·A` for every adapted weight, every 2-D tensor as
/// q8_0 (rows not a multiple of 32 keep their type), 1-D tensors as they
/// were, and all of the base file's metadata with the q8_0 file type.
pub fn write_merged_q8_0(
    model: &Model,
    lora: Option<&Lora>,
    out: &Path,
) -> Result<ExportReport, TrainError> {
    let base = GgufFile::open(&model.path).map_err(|e| TrainError::Model {
        path: model.path.clone(),
        reason: e.to_string(),
    })?;
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| TrainError::Io { path: p, source }
    };
    let mut metadata = base.metadata.clone();
    match metadata.iter_mut().find(|(k, _)| k == "general.file_type") {
        Some((_, v)) => *v = Value::U32(FTYPE_Q8_0),
        None => metadata.push(("general.file_type".into(), Value::U32(FTYPE_Q8_0))),
    }
    let adapted = |name: &str| lora.is_some_and(|l| l.adapters.contains_key(name));
    let plan: Vec<(String, Vec<u64>, GgmlType)> = base
        .tensors
        .iter()
        .map(|t| {
            let target = if t.dims.len() == 2 && t.dims[0] % 32 == 0 {
                GgmlType::Q8_0
            } else if adapted(&t.name) {
                // A merged weight whose rows do not fit q8_0 blocks stays exact.
                GgmlType::F32
            } else {
                t.dtype
            };
            (t.name.clone(), t.dims.clone(), target)
        })
        .collect();
    let mut writer = GgufWriter::create(out, &metadata, &plan).map_err(io(out))?;
    let mut src = File::open(&model.path).map_err(io(&model.path))?;
    let content = gguf_file::Content::read(&mut src).map_err(|e| TrainError::Model {
        path: model.path.clone(),
        reason: e.to_string(),
    })?;
    let mut report = ExportReport {
        tensors: plan.len(),
        merged: 0,
        quantized: 0,
        kept: 0,
        bytes: 0,
    };
    // One thread reads, merges and quantizes the next tensor while this one
    // writes the last: the disk and the cores work at the same time. Written
    // buffers come back to be filled again, so that the pages of a fresh
    // allocation are not cleared for every tensor.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Vec<u8>, TrainError>>(1);
    let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| -> Result<(), TrainError> {
        let report = &mut report;
        let (tensors, plan) = (&base.tensors, &plan);
        let producer = scope.spawn(move || {
            let mut raw = Vec::new();
            for (info, (name, dims, target)) in tensors.iter().zip(plan) {
                let at = base.data_offset + info.offset;
                let len = info.byte_len().expect("validated by GgufFile::open") as usize;
                let mut buf = back_rx.try_recv().unwrap_or_default();
                let bytes = if *target == info.dtype && !adapted(name) {
                    // 1-D, odd rows, or already q8_0 and not adapted: as is.
                    read_at(&mut src, at, len, &mut buf)
                        .map(|_| buf)
                        .map_err(io(&model.path))
                } else if let Some(dtype) = banded(&content, name, dims, *target) {
                    read_at(&mut src, at, len, &mut raw)
                        .map_err(io(&model.path))
                        .and_then(|_| {
                            let (inp, rows) = (dims[0] as usize, dims[1] as usize);
                            let update = update_of(model, lora, name, (rows, inp))?;
                            buf.clear();
                            buf.resize(rows * inp / 32 * 34, 0);
                            requantize(dtype, &raw, inp, update.as_ref(), &mut buf)?;
                            Ok(buf)
                        })
                } else {
                    merged(model, lora, name, &content, &mut src).map(|values| match target {
                        GgmlType::Q8_0 => quantize_q8_0(&values),
                        _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                    })
                };
                let failed = bytes.is_err();
                if tx.send(bytes).is_err() || failed {
                    return;
                }
            }
        });
        // `rx` moves into the writing loop, so that an early return (a
        // full disk) drops it and a reader waiting to send ends.
        let writer = &mut writer;
        let written = move || -> Result<(), TrainError> {
            for (info, (name, _, target)) in tensors.iter().zip(plan) {
                let bytes = rx.recv().map_err(|_| TrainError::Model {
                    path: model.path.clone(),
                    reason: "the export's reader stopped".into(),
                })??;
                if *target == info.dtype && !adapted(name) {
                    report.kept += 1;
                } else {
                    report.merged += usize::from(adapted(name));
                    report.quantized += usize::from(*target == GgmlType::Q8_0);
                }
                report.bytes += bytes.len() as u64;
                writer.write_tensor(name, &bytes).map_err(io(out))?;
                let _ = back_tx.send(bytes);
            }
            Ok(())
        }();
        producer.join().expect("the export's reader panicked");
        written
    })?;
    writer.finish().map_err(io(out))?;
    Ok(report)
}

/// Reads `len` bytes at `at` into `buf`, whose allocation is kept.
fn read_at(file: &mut File, at: u64, len: usize, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.clear();
    buf.resize(len, 0);
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(buf)
}

/// Values of one band of rows expanded at a time by [`requantize`]: the
/// whole f32 tensor is never held (the default model's embedding alone
/// would take half a gigabyte) and a band stays in the caches while it is
/// merged and quantized.
const BAND_VALUES: usize = 1 << 16;

/// The block format of `name` where it goes to q8_0 band by band: a 2-D
/// weight in a format whose rows [`rows_to_f32`] expands.
fn banded(
    content: &gguf_file::Content,
    name: &str,
    dims: &[u64],
    target: GgmlType,
) -> Option<GgmlDType> {
    let dtype = content.tensor_infos.get(name)?.ggml_dtype;
    let whole_rows = dims
        .first()
        .is_some_and(|&inp| (inp as usize).is_multiple_of(dtype.block_size()));
    (target == GgmlType::Q8_0 && dims.len() == 2 && Quantized::keeps(dtype) && whole_rows)
        .then_some(dtype)
}

/// An adapter's update of one weight on the CPU: `scale·B [out, r]` and
/// `A [r, in]`.
struct Update {
    b: Vec<f32>,
    a: Vec<f32>,
    r: usize,
}

/// The update of weight `name` (`[out, in]`), if it is adapted.
fn update_of(
    model: &Model,
    lora: Option<&Lora>,
    name: &str,
    (out, inp): (usize, usize),
) -> Result<Option<Update>, TrainError> {
    let Some((scale, ad)) = lora.and_then(|l| l.adapters.get(name).map(|a| (l.scale(), a))) else {
        return Ok(None);
    };
    let on_cpu = |t: &Tensor| tensor_f32(&t.to_device(&Device::Cpu)?);
    let (r, a_inp) = ad.a.as_tensor().dims2()?;
    let b_out = ad.b.as_tensor().dim(0)?;
    if (b_out, a_inp) != (out, inp) {
        return Err(TrainError::Model {
            path: model.path.clone(),
            reason: format!("{name} is [{out}, {inp}], its adapter [{b_out}, {a_inp}]"),
        });
    }
    let b = on_cpu(ad.b.as_tensor())?;
    Ok(Some(Update {
        b: b.iter().map(|v| v * scale as f32).collect(),
        a: on_cpu(ad.a.as_tensor())?,
        r,
    }))
}

/// `W + scale·B·A` of a weight held in `dtype` blocks (`raw`, rows of `inp`
/// values) straight to q8_0 in `dst`, band by band on every core.
fn requantize(
    dtype: GgmlDType,
    raw: &[u8],
    inp: usize,
    update: Option<&Update>,
    dst: &mut [u8],
) -> candle_core::Result<()> {
    let (src_row, dst_row) = (row_bytes(dtype, inp), inp / 32 * 34);
    if raw.len() / src_row * dst_row != dst.len() || !raw.len().is_multiple_of(src_row) {
        candle_core::bail!("{dtype:?} rows of {inp} do not fill {} bytes", raw.len());
    }
    let rows = (BAND_VALUES / inp).max(1);
    dst.par_chunks_mut(rows * dst_row)
        .zip(raw.par_chunks(rows * src_row))
        .enumerate()
        .try_for_each_init(Vec::new, |w, (band, (q, src))| {
            let n = q.len() / dst_row;
            w.resize(n * inp, 0.0);
            rows_to_f32(dtype, src, w, inp)?;
            if let Some(u) = update {
                let b = &u.b[band * rows * u.r..][..n * u.r];
                gemm(
                    w,
                    (n, inp, u.r),
                    (b, Stored::AsIs),
                    (&u.a, Stored::AsIs),
                    true,
                );
            }
            quantize_blocks(w, q);
            Ok(())
        })
}

/// The f32 values of tensor `name`, exactly as the file holds them, with
/// its adapter merged in: `W += (α/r)·B·A`, one gemm into the values. For
/// the formats [`requantize`] does not take.
fn merged(
    model: &Model,
    lora: Option<&Lora>,
    name: &str,
    content: &gguf_file::Content,
    file: &mut File,
) -> Result<Vec<f32>, TrainError> {
    let q = content
        .tensor(file, name, &Device::Cpu)
        .map_err(|e| TrainError::Model {
            path: model.path.clone(),
            reason: format!("{name}: {e}"),
        })?;
    let mut w = crate::quant::dequantize(&q)?;
    let out = q.shape().dims().first().copied().unwrap_or(1);
    let inp = w.len() / out.max(1);
    if let Some(u) = update_of(model, lora, name, (out, inp))? {
        gemm(
            &mut w,
            (out, inp, u.r),
            (&u.b, Stored::AsIs),
            (&u.a, Stored::AsIs),
            true,
        );
    }
    Ok(w)
}

/// Writes the adapter alone as a llama.cpp LoRA GGUF (`general.type =
/// adapter`, tensors `<weight>.lora_a [r, in]` and `<weight>.lora_b [out, r]`).
pub fn write_adapter(model: &Model, lora: &Lora, out: &Path) -> Result<u64, TrainError> {
    let arch = match model.hp.architecture {
        crate::hparams::Architecture::Llama => "llama",
        crate::hparams::Architecture::Qwen2 => "qwen2",
        crate::hparams::Architecture::Qwen3 => "qwen3",
        crate::hparams::Architecture::Gemma3 => "gemma3",
    };
    let metadata = vec![
        (
            "general.architecture".to_string(),
            Value::String(arch.into()),
        ),
        ("general.type".into(), Value::String("adapter".into())),
        ("adapter.type".into(), Value::String("lora".into())),
        ("adapter.lora.alpha".into(), Value::F32(lora.config.alpha)),
    ];
    let mut plan = Vec::new();
    let mut data = Vec::new();
    for (name, ad) in &lora.adapters {
        let (r, inp) = ad.a.as_tensor().dims2()?;
        let (out_dim, _) = ad.b.as_tensor().dims2()?;
        plan.push((
            format!("{name}.lora_a"),
            vec![inp as u64, r as u64],
            GgmlType::F32,
        ));
        plan.push((
            format!("{name}.lora_b"),
            vec![r as u64, out_dim as u64],
            GgmlType::F32,
        ));
        data.push(tensor_f32(ad.a.as_tensor())?);
        data.push(tensor_f32(ad.b.as_tensor())?);
    }
    let io = |source| TrainError::Io {
        path: out.to_path_buf(),
        source,
    };
    let mut w = GgufWriter::create(out, &metadata, &plan).map_err(io)?;
    let mut bytes = 0u64;
    for ((name, _, _), values) in plan.iter().zip(&data) {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        bytes += raw.len() as u64;
        w.write_tensor(name, &raw).map_err(io)?;
    }
    w.finish().map_err(io)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q8_0_round_trips_within_half_a_step() {
        let v: Vec<f32> = (0..64).map(|i| ((i as f32) * 0.37).sin() * 3.0).collect();
        let q = quantize_q8_0(&v);
        assert_eq!(q.len(), 68);
        let back = dequantize_q8_0(&q);
        for (chunk, bchunk) in v.chunks(32).zip(back.chunks(32)) {
            let step = chunk.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0;
            for (a, b) in chunk.iter().zip(bchunk) {
                assert!((a - b).abs() <= step * 0.5 + 1e-3, "{a} vs {b}");
            }
        }
        assert!(quantize_q8_0(&[0.0; 32]).iter().all(|b| *b == 0));
    }

    #[test]
    fn band_by_band_equals_the_whole_tensor_merged_then_quantized() {
        use candle_core::quantized::QTensor;
        // Rows that are not a whole number of bands, an update of rank 3.
        let (out, inp, r) = (301, 512, 3);
        let values: Vec<f32> = (0..out * inp).map(|i| ((i as f32) * 0.013).sin()).collect();
        let w = Tensor::from_vec(values, (out, inp), &Device::Cpu).unwrap();
        let update = Update {
            b: (0..out * r)
                .map(|i| ((i as f32) * 0.7).cos() * 0.01)
                .collect(),
            a: (0..r * inp).map(|i| ((i as f32) * 0.3).sin()).collect(),
            r,
        };
        for dtype in [
            GgmlDType::Q4K,
            GgmlDType::Q5_0,
            GgmlDType::Q6K,
            GgmlDType::Q8_0,
            GgmlDType::F16,
        ] {
            let q = QTensor::quantize(&w, dtype).unwrap();
            let raw = q.data().unwrap();
            for with in [None, Some(&update)] {
                let mut whole = crate::quant::dequantize(&q).unwrap();
                if let Some(u) = with {
                    let shape = (out, inp, u.r);
                    gemm(
                        &mut whole,
                        shape,
                        (&u.b, Stored::AsIs),
                        (&u.a, Stored::AsIs),
                        true,
                    );
                }
                let mut banded = vec![0u8; out * inp / 32 * 34];
                requantize(dtype, &raw, inp, with, &mut banded).unwrap();
                assert!(
                    banded == quantize_q8_0(&whole),
                    "{dtype:?}, update {}",
                    with.is_some()
                );
            }
        }
        let mut short = vec![0u8; 34];
        let q = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
        let err = requantize(GgmlDType::Q8_0, &q.data().unwrap(), inp, None, &mut short);
        assert!(err.unwrap_err().to_string().contains("do not fill"));
    }
}
