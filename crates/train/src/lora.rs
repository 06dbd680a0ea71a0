//! Low-rank adapters: `W x + (α/r) · B (A x)` with `A [r, in]`, `B [out, r]`
//! and `B = 0` at the start, so a fresh adapter changes nothing.

use std::collections::BTreeMap;

use candle_core::{Device, Result, Tensor, Var};
use serde::{Deserialize, Serialize};

/// Which projections get an adapter, its rank and scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoraConfig {
    pub rank: usize,
    pub alpha: f32,
    /// GGUF tensor stems: `attn_q`, `attn_k`, `attn_v`, `attn_output`,
    /// `ffn_gate`, `ffn_up`, `ffn_down`.
    pub targets: Vec<String>,
    pub seed: u64,
}

impl Default for LoraConfig {
    fn default() -> Self {
        LoraConfig {
            rank: 16,
            alpha: 32.0,
            targets: [
                "attn_q",
                "attn_k",
                "attn_v",
                "attn_output",
                "ffn_gate",
                "ffn_up",
                "ffn_down",
            ]
            .map(String::from)
            .to_vec(),
            seed: 17,
        }
    }
}

/// One adapter pair.
pub struct Adapter {
    pub a: Var,
    pub b: Var,
}

/// All adapters of a model, keyed by the GGUF name of the adapted weight
/// (`blk.3.attn_q.weight`).
pub struct Lora {
    pub config: LoraConfig,
    pub adapters: BTreeMap<String, Adapter>,
}

impl Lora {
    /// Adapters for every target weight; `shapes` maps a weight name to its
    /// `(out, in)`.
    pub fn new(
        config: LoraConfig,
        shapes: &[(String, usize, usize)],
        device: &Device,
    ) -> Result<Lora> {
        let mut state = config.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            // xorshift64*: reproducible initial A without a global RNG.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32
        };
        let mut adapters = BTreeMap::new();
        for (name, out, inp) in shapes {
            let bound = 1.0 / (*inp as f32).sqrt();
            let a: Vec<f32> = (0..config.rank * inp)
                .map(|_| (next() * 2.0 - 1.0) * bound)
                .collect();
            let a = Var::from_tensor(&Tensor::from_vec(a, (config.rank, *inp), device)?)?;
            let b = Var::zeros((*out, config.rank), candle_core::DType::F32, device)?;
            adapters.insert(name.clone(), Adapter { a, b });
        }
        Ok(Lora { config, adapters })
    }

    pub fn scale(&self) -> f64 {
        self.config.alpha as f64 / self.config.rank as f64
    }

    pub fn wants(&self, stem: &str) -> bool {
        self.config.targets.iter().any(|t| t == stem)
    }

    /// Every trainable variable with a stable name, in a stable order.
    pub fn named_vars(&self) -> Vec<(String, &Var)> {
        self.adapters
            .iter()
            .flat_map(|(n, ad)| {
                [
                    (format!("{n}.lora_a"), &ad.a),
                    (format!("{n}.lora_b"), &ad.b),
                ]
            })
            .collect()
    }

    /// `x · Aᵀ · Bᵀ · (α/r)` for the weight `name`, if it has an adapter.
    pub fn delta(&self, name: &str, x: &Tensor) -> Result<Option<Tensor>> {
        match self.adapters.get(name) {
            None => Ok(None),
            Some(ad) => {
                // Scaled at rank width: `[t, r]` values, not `[t, out]`.
                let h = (x.matmul(&ad.a.as_tensor().t()?)? * self.scale())?;
                Ok(Some(h.matmul(&ad.b.as_tensor().t()?)?))
            }
        }
    }
}
