//! The forward pass of the supported architectures, in GGUF names and
//! layouts, with optional LoRA.

use std::fs::File;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use candle_core::quantized::{gguf_file, QTensor};
use candle_core::{DType, Device, Tensor};

use crate::attention::{attention_remembered, Memo};
use crate::error::TrainError;
use crate::feed_forward::{feed_forward, Saved};
use crate::frozen::FrozenMatmul;
use crate::fused;
use crate::glu::{self, silu_mul};
use crate::hparams::{Architecture, Hparams};
use crate::lm_head::frozen_target_logprobs;
use crate::lora::Lora;
use crate::ops;
use crate::quant::Quantized;

struct Layer {
    attn_norm: Tensor,
    q: FrozenMatmul,
    k: FrozenMatmul,
    v: FrozenMatmul,
    q_bias: Option<Tensor>,
    k_bias: Option<Tensor>,
    v_bias: Option<Tensor>,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    o: FrozenMatmul,
    post_attn_norm: Option<Tensor>,
    ffn_norm: Tensor,
    gate: FrozenMatmul,
    up: FrozenMatmul,
    down: FrozenMatmul,
    post_ffn_norm: Option<Tensor>,
}

/// How a model's frozen projections, LM head and embeddings are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// f32 (bf16 projections on a GPU): four bytes per parameter.
    Dense,
    /// bf16 tiles on a CPU with bf16 dot products ([`FrozenMatmul::tiled`]).
    Bf16Tiles,
    /// In the GGUF's own block formats, expanded a tile at a time inside
    /// each product: the file's size in memory.
    Quantized,
    /// Quantized, each expanded tile multiplied in bf16 ([`crate::bf16_matmul`]).
    QuantizedBf16,
}

impl Held {
    pub fn as_str(self) -> &'static str {
        match self {
            Held::Dense => "f32",
            Held::Bf16Tiles => "bf16 tiles",
            Held::Quantized => "quantized",
            Held::QuantizedBf16 => "quantized, bf16 products",
        }
    }

    fn quantized(self) -> bool {
        matches!(self, Held::Quantized | Held::QuantizedBf16)
    }
}

/// The token embeddings: a dense table, or the GGUF's blocks on the CPU
/// with rows expanded as they are looked up.
enum Embedding {
    Dense(Tensor),
    Quant(Arc<Quantized>),
}

/// A GGUF model held for training and scoring: the frozen part as [`Held`]
/// says, norms, biases and activations in f32.
pub struct Model {
    pub hp: Hparams,
    pub path: PathBuf,
    pub device: Device,
    held: Held,
    /// How each adapted feed-forward block keeps its gate and up
    /// projections for the backward pass.
    pub saved: Saved,
    embed: Embedding,
    output: FrozenMatmul,
    output_norm: Tensor,
    layers: Vec<Layer>,
}

/// Reads the tensors of one GGUF file.
struct Loader<'p> {
    path: &'p Path,
    content: gguf_file::Content,
    file: File,
    device: Device,
    held: Held,
}

impl Loader<'_> {
    fn bad(&self, reason: String) -> TrainError {
        TrainError::Model {
            path: self.path.to_path_buf(),
            reason,
        }
    }

    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// The tensor as the file stores it, on the CPU.
    fn raw(&mut self, name: &str) -> Result<QTensor, TrainError> {
        self.content
            .tensor(&mut self.file, name, &Device::Cpu)
            .map_err(|e| self.bad(format!("tensor {name}: {e}")))
    }

    /// Dequantized exactly (for every GGUF type candle reads) to f32 on the
    /// model's device.
    fn dense(&self, q: &QTensor) -> Result<Tensor, TrainError> {
        Ok(q.dequantize(&Device::Cpu)?
            .to_dtype(DType::F32)?
            .to_device(&self.device)?)
    }

    fn get(&mut self, name: &str) -> Result<Tensor, TrainError> {
        let q = self.raw(name)?;
        self.dense(&q)
    }

    fn opt(&mut self, name: &str) -> Result<Option<Tensor>, TrainError> {
        if self.has(name) {
            self.get(name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Whether `q` stays in its block format.
    fn keeps(&self, q: &QTensor) -> bool {
        self.held.quantized() && Quantized::keeps(q.dtype())
    }

    fn frozen(&self, q: &QTensor) -> Result<FrozenMatmul, TrainError> {
        if self.keeps(q) {
            let mut w = Quantized::new(q, &self.device)?;
            if self.held == Held::QuantizedBf16 {
                w = w.in_bf16()?;
            }
            return Ok(FrozenMatmul::quantized(Arc::new(w)));
        }
        let w = self.dense(q)?;
        self.frozen_dense(&w)
    }

    /// A weight that is not kept quantized (an f32 tensor, or every weight
    /// of a dense load): bf16 tiles where the CPU multiplies bf16.
    fn frozen_dense(&self, w: &Tensor) -> Result<FrozenMatmul, TrainError> {
        Ok(match self.held {
            Held::Bf16Tiles | Held::QuantizedBf16 => FrozenMatmul::tiled(w)?,
            Held::Dense | Held::Quantized => FrozenMatmul::new(w)?,
        })
    }

    fn frozen_named(&mut self, name: &str) -> Result<FrozenMatmul, TrainError> {
        let q = self.raw(name)?;
        self.frozen(&q)
    }
}

impl Model {
    /// Reads and dequantizes every tensor of `path`, on the CPU.
    pub fn load(path: &Path) -> Result<Model, TrainError> {
        Model::load_on(path, &Device::Cpu)
    }

    /// Reads every tensor of `path`, dequantizes it on the CPU (exactly, for
    /// every GGUF type candle reads) and moves it to `device`.
    pub fn load_on(path: &Path, device: &Device) -> Result<Model, TrainError> {
        Model::load_held(path, device, Held::Dense)
    }

    /// The model as a training run wants it on `cfg.device`: quantized
    /// with `cfg.quantized`, else dense; with `cfg.cpu_bf16` on a CPU that
    /// has AMX or AVX-512 BF16, multiplied in bf16 there.
    pub fn load_for_training(path: &Path, cfg: &crate::TrainConfig) -> Result<Model, TrainError> {
        let device = cfg.device.open()?;
        let bf16 = cfg.cpu_bf16 && device.is_cpu() && crate::bf16_matmul::available();
        let held = match (cfg.quantized, bf16) {
            (true, true) => Held::QuantizedBf16,
            (true, false) => Held::Quantized,
            (false, true) => Held::Bf16Tiles,
            (false, false) => Held::Dense,
        };
        let mut model = Model::load_held(path, &device, held)?;
        if cfg.bf16_saved {
            model.saved = Saved::Bf16;
        }
        Ok(model)
    }

    /// Whether the frozen weights are multiplied in bf16.
    pub fn tiled(&self) -> bool {
        matches!(self.held, Held::Bf16Tiles | Held::QuantizedBf16)
    }

    /// How the frozen weights are held.
    pub fn held(&self) -> Held {
        self.held
    }

    /// Bytes the frozen projections, the LM head and the embeddings occupy
    /// (a tied head counted once).
    pub fn frozen_bytes(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .flat_map(|l| [&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down])
            .map(FrozenMatmul::bytes)
            .sum();
        let embed = match &self.embed {
            Embedding::Dense(t) => t.elem_count() * t.dtype().size_in_bytes(),
            Embedding::Quant(q) => q.bytes(),
        };
        layers + embed + self.output.bytes()
    }

    /// Reads `path` with its frozen weights held as `held` says, on
    /// `device`.
    pub fn load_held(path: &Path, device: &Device, held: Held) -> Result<Model, TrainError> {
        let file = File::open(path).map_err(|source| TrainError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut ld = Loader {
            path,
            content: gguf_file::Content::read(&mut &file).map_err(|e| TrainError::Model {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?,
            file,
            device: device.clone(),
            held,
        };
        let embed_q = ld.raw("token_embd.weight")?;
        let n_vocab = embed_q.shape().dims2()?.0;
        let hp = Hparams::from_metadata(&ld.content.metadata, n_vocab).map_err(|e| ld.bad(e))?;
        let tied = !ld.has("output.weight");
        let (embed, output) = if ld.keeps(&embed_q) {
            // Looked up on the CPU; a tied head on another device gets its
            // own copy there.
            let table = Arc::new(Quantized::new(&embed_q, &Device::Cpu)?);
            let output = match (tied, device.is_cpu()) {
                (true, true) => FrozenMatmul::quantized(table.clone()),
                (true, false) => ld.frozen(&embed_q)?,
                (false, _) => ld.frozen_named("output.weight")?,
            };
            (Embedding::Quant(table), output)
        } else {
            let table = ld.dense(&embed_q)?;
            let output = if tied {
                ld.frozen_dense(&table)?
            } else {
                ld.frozen_named("output.weight")?
            };
            (Embedding::Dense(table), output)
        };
        drop(embed_q);
        let output_norm = ld.get("output_norm.weight")?;
        let mut layers = Vec::with_capacity(hp.n_layer);
        for i in 0..hp.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            layers.push(Layer {
                attn_norm: ld.get(&n("attn_norm.weight"))?,
                q: ld.frozen_named(&n("attn_q.weight"))?,
                k: ld.frozen_named(&n("attn_k.weight"))?,
                v: ld.frozen_named(&n("attn_v.weight"))?,
                q_bias: ld.opt(&n("attn_q.bias"))?,
                k_bias: ld.opt(&n("attn_k.bias"))?,
                v_bias: ld.opt(&n("attn_v.bias"))?,
                q_norm: ld.opt(&n("attn_q_norm.weight"))?,
                k_norm: ld.opt(&n("attn_k_norm.weight"))?,
                o: ld.frozen_named(&n("attn_output.weight"))?,
                post_attn_norm: ld.opt(&n("post_attention_norm.weight"))?,
                ffn_norm: ld.get(&n("ffn_norm.weight"))?,
                gate: ld.frozen_named(&n("ffn_gate.weight"))?,
                up: ld.frozen_named(&n("ffn_up.weight"))?,
                down: ld.frozen_named(&n("ffn_down.weight"))?,
                post_ffn_norm: ld.opt(&n("post_ffw_norm.weight"))?,
            });
        }
        Ok(Model {
            hp,
            path: path.to_path_buf(),
            device: device.clone(),
            held,
            saved: Saved::F32,
            embed,
            output,
            output_norm,
            layers,
        })
    }

    /// `(name, out, in)` of every weight LoRA may adapt.
    pub fn adaptable(&self, stems: &[String]) -> Vec<(String, usize, usize)> {
        let mut out = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            for (stem, w) in [
                ("attn_q", &l.q),
                ("attn_k", &l.k),
                ("attn_v", &l.v),
                ("attn_output", &l.o),
                ("ffn_gate", &l.gate),
                ("ffn_up", &l.up),
                ("ffn_down", &l.down),
            ] {
                if stems.iter().any(|s| s == stem) {
                    let (o, n) = w.dims();
                    out.push((format!("blk.{i}.{stem}.weight"), o, n));
                }
            }
        }
        out
    }

    /// The frozen weight called `name` (`blk.i.attn_q.weight`, …).
    pub fn weight(&self, name: &str) -> Option<&Tensor> {
        let rest = name.strip_prefix("blk.")?;
        let (i, stem) = rest.split_once('.')?;
        let l = self.layers.get(i.parse::<usize>().ok()?)?;
        let w = match stem {
            "attn_q.weight" => &l.q,
            "attn_k.weight" => &l.k,
            "attn_v.weight" => &l.v,
            "attn_output.weight" => &l.o,
            "ffn_gate.weight" => &l.gate,
            "ffn_up.weight" => &l.up,
            "ffn_down.weight" => &l.down,
            _ => return None,
        };
        w.weight()
    }

    fn linear(
        &self,
        x: &Tensor,
        w: &FrozenMatmul,
        bias: Option<&Tensor>,
        name: &str,
        lora: Option<&Lora>,
    ) -> candle_core::Result<Tensor> {
        let adapter = lora.and_then(|l| l.adapters.get(name).map(|ad| (l.scale(), ad)));
        let y = match adapter {
            Some((scale, ad)) => w.forward_adapted(x, ad.a.as_tensor(), ad.b.as_tensor(), scale)?,
            None => w.forward(x)?,
        };
        match bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }

    /// Token embeddings `[t, n_embd]` (scaled for gemma).
    pub fn embed(&self, ids: &[i32]) -> candle_core::Result<Tensor> {
        let ids: Vec<u32> = ids.iter().map(|&i| i as u32).collect();
        let h = match &self.embed {
            Embedding::Dense(table) => {
                table.index_select(&Tensor::from_slice(&ids, ids.len(), &self.device)?, 0)?
            }
            Embedding::Quant(table) => {
                Tensor::from_vec(table.rows(&ids)?, (ids.len(), table.dims().1), &Device::Cpu)?
                    .to_device(&self.device)?
            }
        };
        if self.hp.architecture == Architecture::Gemma3 {
            h * (self.hp.n_embd as f64).sqrt()
        } else {
            Ok(h)
        }
    }

    pub fn n_layer(&self) -> usize {
        self.layers.len()
    }

    /// Position tables for sequences of length `t`.
    pub fn positions(&self, t: usize) -> candle_core::Result<Positions> {
        let hp = &self.hp;
        let (cos, sin) = ops::rope_tables(t, hp.head_dim, hp.rope_base, &self.device)?;
        let (cos_swa, sin_swa) = ops::rope_tables(t, hp.head_dim, hp.rope_base_swa, &self.device)?;
        Ok(Positions {
            t,
            cos,
            sin,
            cos_swa,
            sin_swa,
        })
    }

    /// One transformer block: `h -> h'`.
    pub fn layer(
        &self,
        il: usize,
        h: &Tensor,
        pos: &Positions,
        lora: Option<&Lora>,
    ) -> candle_core::Result<Tensor> {
        self.layer_remembering(il, h, pos, lora, None)
    }

    /// [`Model::layer`], with attention remembering its result in `memo`
    /// for a second pass over the same input.
    pub fn layer_remembering(
        &self,
        il: usize,
        h: &Tensor,
        pos: &Positions,
        lora: Option<&Lora>,
        memo: Option<&Arc<Memo>>,
    ) -> candle_core::Result<Tensor> {
        let hp = &self.hp;
        let l = &self.layers[il];
        let t = pos.t;
        let scale = 1.0 / (hp.head_dim as f64).sqrt();
        let name = |s: &str| format!("blk.{il}.{s}.weight");
        let swa = hp.is_swa(il);
        let x = fused::rms_norm(h, &l.attn_norm, hp.eps)?;
        let q = self.linear(&x, &l.q, l.q_bias.as_ref(), &name("attn_q"), lora)?;
        let k = self.linear(&x, &l.k, l.k_bias.as_ref(), &name("attn_k"), lora)?;
        let v = self.linear(&x, &l.v, l.v_bias.as_ref(), &name("attn_v"), lora)?;
        let mut q = q.reshape((t, hp.n_head, hp.head_dim))?;
        let mut k = k.reshape((t, hp.n_head_kv, hp.head_dim))?;
        let v = v.reshape((t, hp.n_head_kv, hp.head_dim))?;
        if let Some(n) = &l.q_norm {
            q = fused::rms_norm(&q, n, hp.eps)?;
        }
        if let Some(n) = &l.k_norm {
            k = fused::rms_norm(&k, n, hp.eps)?;
        }
        let (c, s) = if swa {
            (&pos.cos_swa, &pos.sin_swa)
        } else {
            (&pos.cos, &pos.sin)
        };
        let q = fused::rope(&q, c, s, hp.interleaved_rope())?;
        let k = fused::rope(&k, c, s, hp.interleaved_rope())?;
        let window = if swa { hp.sliding_window } else { None };
        let memo = memo.map(|m| (m, il));
        let attn = attention_remembered(&q, &k, &v, (window, scale), self.tiled(), memo)?
            .reshape((t, hp.n_head * hp.head_dim))?;
        let mut o = self.linear(&attn, &l.o, None, &name("attn_output"), lora)?;
        if let Some(n) = &l.post_attn_norm {
            o = fused::rms_norm(&o, n, hp.eps)?;
        }
        let h = (h + o)?;
        let x = fused::rms_norm(&h, &l.ffn_norm, hp.eps)?;
        let adapters = lora.map(|lo| {
            let ad = |s: &str| lo.adapters.get(&name(s));
            (lo.scale(), ad("ffn_gate"), ad("ffn_up"), ad("ffn_down"))
        });
        let mut d = match adapters {
            // One op for the whole adapted block: no feed-forward-wide
            // tensor in the graph.
            Some((scale, Some(ag), Some(au), Some(ad)))
                if hp.architecture != Architecture::Gemma3 =>
            {
                feed_forward(
                    &x,
                    (&l.gate, &l.up, &l.down),
                    [ag, au, ad].map(|v| v.a.as_tensor()),
                    [ag, au, ad].map(|v| v.b.as_tensor()),
                    scale,
                    self.saved,
                )?
            }
            // One op for both adapted projections and the gate.
            Some((scale, Some(ag), Some(au), _)) if hp.architecture != Architecture::Gemma3 => {
                let a = Tensor::cat(&[ag.a.as_tensor(), au.a.as_tensor()], 0)?;
                let b = Tensor::cat(&[ag.b.as_tensor(), au.b.as_tensor()], 0)?;
                let gated = glu::gated(&x, (&l.gate, &l.up), &a, &b, scale)?;
                self.linear(&gated, &l.down, None, &name("ffn_down"), lora)?
            }
            _ => {
                let g = self.linear(&x, &l.gate, None, &name("ffn_gate"), lora)?;
                let u = self.linear(&x, &l.up, None, &name("ffn_up"), lora)?;
                let gated = if hp.architecture == Architecture::Gemma3 {
                    (ops::gelu_tanh(&g)? * u)?
                } else {
                    silu_mul(&g, &u)?
                };
                self.linear(&gated, &l.down, None, &name("ffn_down"), lora)?
            }
        };
        if let Some(n) = &l.post_ffn_norm {
            d = fused::rms_norm(&d, n, hp.eps)?;
        }
        h + d
    }

    /// Final hidden states `[t, n_embd]` of the token sequence.
    pub fn hidden(&self, ids: &[i32], lora: Option<&Lora>) -> candle_core::Result<Tensor> {
        let pos = self.positions(ids.len())?;
        let mut h = self.embed(ids)?;
        for il in 0..self.layers.len() {
            h = self.layer(il, &h, &pos, lora)?;
        }
        fused::rms_norm(&h, &self.output_norm, self.hp.eps)
    }

    /// Logits `[t, n_vocab]` after each position.
    pub fn logits(&self, ids: &[i32], lora: Option<&Lora>) -> candle_core::Result<Tensor> {
        self.output.forward(&self.hidden(ids, lora)?)
    }

    /// log p(`ids[i+1]` | `ids[..=i]`) for every `i`, shape `[t-1]`. The LM
    /// head and log-softmax run `chunk` positions at a time, so the full
    /// `[t, vocab]` matrix never exists.
    pub fn token_logprobs(
        &self,
        ids: &[i32],
        lora: Option<&Lora>,
        chunk: usize,
    ) -> candle_core::Result<Tensor> {
        self.scored_logprobs(ids, lora, chunk, None)
    }

    /// [`Model::token_logprobs`] where only the positions `i` with
    /// `scored[i]` go through the LM head (all when `None`); the others
    /// read 0 and pass no gradient. A training sequence's system prompt
    /// and tool definitions feed attention but no loss term, and the head
    /// is a quarter of a small model's work.
    pub fn scored_logprobs(
        &self,
        ids: &[i32],
        lora: Option<&Lora>,
        chunk: usize,
        scored: Option<&[bool]>,
    ) -> candle_core::Result<Tensor> {
        if ids.len() < 2 {
            return Tensor::zeros(0, DType::F32, &self.device);
        }
        let pos = self.positions(ids.len())?;
        let mut h = self.embed(ids)?;
        for il in 0..self.layers.len() {
            h = self.layer(il, &h, &pos, lora)?;
        }
        self.head_logprobs(&h, ids, chunk, scored)
    }

    /// The final norm, LM head and target log-probs from the last layer's
    /// output `h [t, n_embd]`, for the positions `scored` keeps (see
    /// [`Model::scored_logprobs`]).
    pub fn head_logprobs(
        &self,
        h: &Tensor,
        ids: &[i32],
        chunk: usize,
        scored: Option<&[bool]>,
    ) -> candle_core::Result<Tensor> {
        let t = ids.len();
        let targets: Vec<u32> = ids[1..].iter().map(|&i| i as u32).collect();
        let runs = match scored {
            Some(s) if s.len() != t - 1 => {
                candle_core::bail!("{} scored flags for {} predicted positions", s.len(), t - 1)
            }
            Some(s) if s.contains(&false) => runs(s),
            _ => {
                let h = fused::rms_norm(&h.narrow(0, 0, t - 1)?, &self.output_norm, self.hp.eps)?;
                return frozen_target_logprobs(&h, &self.output, &targets, chunk);
            }
        };
        if runs.is_empty() {
            return Tensor::zeros(t - 1, DType::F32, h.device());
        }
        // The kept rows side by side, through the head, then back in place
        // between zeros: narrow and cat carry the gradient both ways.
        let kept = runs
            .iter()
            .map(|&(a, n)| h.narrow(0, a, n))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let kept = fused::rms_norm(&Tensor::cat(&kept, 0)?, &self.output_norm, self.hp.eps)?;
        let kept_targets: Vec<u32> = runs
            .iter()
            .flat_map(|&(a, n)| targets[a..a + n].iter().copied())
            .collect();
        let lp = frozen_target_logprobs(&kept, &self.output, &kept_targets, chunk)?;
        let mut parts = Vec::with_capacity(2 * runs.len() + 1);
        let (mut at, mut k) = (0, 0);
        for &(a, n) in &runs {
            if a > at {
                parts.push(Tensor::zeros(a - at, DType::F32, h.device())?);
            }
            parts.push(lp.narrow(0, k, n)?);
            (at, k) = (a + n, k + n);
        }
        if at < t - 1 {
            parts.push(Tensor::zeros(t - 1 - at, DType::F32, h.device())?);
        }
        Tensor::cat(&parts, 0)
    }
}

/// The runs of `true` in `flags`, as (start, length).
fn runs(flags: &[bool]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, _) in flags.iter().enumerate().filter(|(_, f)| **f) {
        match out.last_mut() {
            Some((a, n)) if *a + *n == i => *n += 1,
            _ => out.push((i, 1)),
        }
    }
    out
}

/// RoPE tables shared by every layer of one sequence.
pub struct Positions {
    t: usize,
    cos: Tensor,
    sin: Tensor,
    cos_swa: Tensor,
    sin_swa: Tensor,
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_are_the_stretches_of_kept_positions() {
        let f = [false, true, true, false, true, false, false, true];
        assert_eq!(runs(&f), vec![(1, 2), (4, 1), (7, 1)]);
        assert_eq!(runs(&[false, false]), vec![]);
        assert_eq!(runs(&[true; 3]), vec![(0, 3)]);
    }
}
