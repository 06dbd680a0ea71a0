//! A tiny random-weight vision projector of the LLaVA kind (a ViT encoder
//! and a two-layer MLP into the text model's embedding width), as
//! llama.cpp's `mtmd` loads it. No vision model ships in the package
//! registries, so the image path is tested with this and a synthetic text
//! model: the pictures mean nothing to it, but every step a real projector
//! takes (decoding, resizing, patching, encoding, decoding the embeddings
//! into the KV cache) runs.

use std::io;
use std::path::Path;

use crate::synth::Rng;
use crate::types::{GgmlType, Value, ValueType};
use crate::GgufWriter;

/// Side of the square image the encoder takes, in pixels.
pub const IMAGE_SIZE: u32 = 32;
/// Side of one patch, in pixels.
pub const PATCH_SIZE: u32 = 8;
/// Embeddings one image becomes: one per patch.
pub const IMAGE_TOKENS: usize = ((IMAGE_SIZE / PATCH_SIZE) * (IMAGE_SIZE / PATCH_SIZE)) as usize;

const WIDTH: u64 = 32;
const FFN: u64 = 64;
const HEADS: u32 = 2;
// The LLaVA graph reads the features of the second-to-last layer, so two
// layers make one run.
const LAYERS: u64 = 2;

/// Writes a projector for a text model whose embeddings are `text_width`
/// wide (`n_embd`; llama.cpp refuses a pair whose widths differ).
pub fn write(path: impl AsRef<Path>, text_width: u64, seed: u64) -> io::Result<()> {
    let side = (IMAGE_SIZE / PATCH_SIZE) as u64;
    let p = PATCH_SIZE as u64;
    let mut tensors: Vec<(String, Vec<u64>)> = vec![
        ("v.patch_embd.weight".into(), vec![p, p, 3, WIDTH]),
        ("v.patch_embd.bias".into(), vec![WIDTH]),
        ("v.position_embd.weight".into(), vec![WIDTH, side * side]),
    ];
    for il in 0..LAYERS {
        let t = |n: &str| format!("v.blk.{il}.{n}");
        for proj in ["attn_q", "attn_k", "attn_v", "attn_out"] {
            tensors.push((t(&format!("{proj}.weight")), vec![WIDTH, WIDTH]));
            tensors.push((t(&format!("{proj}.bias")), vec![WIDTH]));
        }
        for ln in ["ln1", "ln2"] {
            tensors.push((t(&format!("{ln}.weight")), vec![WIDTH]));
            tensors.push((t(&format!("{ln}.bias")), vec![WIDTH]));
        }
        tensors.push((t("ffn_up.weight"), vec![WIDTH, FFN]));
        tensors.push((t("ffn_up.bias"), vec![FFN]));
        tensors.push((t("ffn_down.weight"), vec![FFN, WIDTH]));
        tensors.push((t("ffn_down.bias"), vec![WIDTH]));
    }
    tensors.push(("mm.0.weight".into(), vec![WIDTH, text_width]));
    tensors.push(("mm.0.bias".into(), vec![text_width]));
    tensors.push(("mm.2.weight".into(), vec![text_width, text_width]));
    tensors.push(("mm.2.bias".into(), vec![text_width]));

    let f32s = |v: [f32; 3]| Value::Array(ValueType::F32, v.into_iter().map(Value::F32).collect());
    let metadata = vec![
        (
            "general.architecture".to_string(),
            Value::String("clip".into()),
        ),
        (
            "general.name".into(),
            Value::String("reverie-synth-projector".into()),
        ),
        ("clip.projector_type".into(), Value::String("mlp".into())),
        ("clip.has_vision_encoder".into(), Value::Bool(true)),
        ("clip.use_gelu".into(), Value::Bool(true)),
        ("clip.vision.image_size".into(), Value::U32(IMAGE_SIZE)),
        ("clip.vision.patch_size".into(), Value::U32(PATCH_SIZE)),
        (
            "clip.vision.embedding_length".into(),
            Value::U32(WIDTH as u32),
        ),
        (
            "clip.vision.feed_forward_length".into(),
            Value::U32(FFN as u32),
        ),
        ("clip.vision.block_count".into(), Value::U32(LAYERS as u32)),
        (
            "clip.vision.projection_dim".into(),
            Value::U32(text_width as u32),
        ),
        ("clip.vision.attention.head_count".into(), Value::U32(HEADS)),
        (
            "clip.vision.attention.layer_norm_epsilon".into(),
            Value::F32(1e-5),
        ),
        ("clip.vision.image_mean".into(), f32s([0.5, 0.5, 0.5])),
        ("clip.vision.image_std".into(), f32s([0.5, 0.5, 0.5])),
    ];
    let table: Vec<_> = tensors
        .iter()
        .map(|(n, d)| (n.clone(), d.clone(), GgmlType::F32))
        .collect();
    let mut w = GgufWriter::create(path, &metadata, &table)?;
    let mut rng = Rng(seed);
    for (name, dims) in &tensors {
        let n: u64 = dims.iter().product();
        // Norm weights near one, everything else small and random.
        let is_norm_weight = name.contains(".ln") && name.ends_with(".weight");
        let bytes: Vec<u8> = (0..n)
            .flat_map(|_| {
                let v = if is_norm_weight { 1.0 } else { 0.0 } + rng.normal(0.08);
                v.to_le_bytes()
            })
            .collect();
        w.write_tensor(name, &bytes)?;
    }
    w.finish()?;
    Ok(())
}

/// A `side`² picture (a 24-bit BMP, which llama.cpp's image decoder
/// reads) to show a projector: stripes whose width and colours follow
/// `seed`, so two seeds make two different pictures.
pub fn picture(side: u32, seed: u8) -> Vec<u8> {
    let row = (side * 3).div_ceil(4) * 4;
    let size = 54 + row * side;
    let mut b = Vec::with_capacity(size as usize);
    b.extend_from_slice(b"BM");
    b.extend_from_slice(&size.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&54u32.to_le_bytes());
    b.extend_from_slice(&40u32.to_le_bytes());
    b.extend_from_slice(&(side as i32).to_le_bytes());
    b.extend_from_slice(&(side as i32).to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&24u16.to_le_bytes());
    b.extend_from_slice(&[0; 24]);
    let width = 1 + u32::from(seed % 7);
    for y in 0..side {
        let start = b.len();
        for x in 0..side {
            let on = ((x + y) / width) % 2 == 0;
            let c = if on {
                seed.wrapping_mul(37)
            } else {
                255 - seed
            };
            b.extend_from_slice(&[c, c.wrapping_add(90), 255 - c]);
        }
        b.resize(start + row as usize, 0);
    }
    b
}

#[cfg(test)]
mod tests {
    use crate::GgufFile;

    #[test]
    fn the_projector_projects_into_the_text_width() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("mmproj.gguf");
        super::write(&p, 64, 3).unwrap();
        let f = GgufFile::open(&p).unwrap();
        assert_eq!(f.architecture(), Some("clip"));
        assert_eq!(f.tensor("mm.2.weight").unwrap().dims, vec![64, 64]);
        assert!(f.tensor("v.blk.1.ffn_down.weight").is_some());
    }
}
