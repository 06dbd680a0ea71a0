//! Random-weight models with real metadata: tiny ones for tests and first
//! tries, and ones with the shapes of real 0.5B–7B models (optionally in a
//! Q4_K_M-like mix of block formats) to measure memory and speed without
//! downloading them.
//!
//! Each file carries a SentencePiece-style vocabulary (control tokens for a
//! ChatML template, 256 byte-fallback tokens, printable characters and a few
//! common words, padded with placeholder tokens to a real model's size), the
//! architecture's hyper-parameters under its own key prefix, and tensors
//! named and shaped as llama.cpp expects.

use std::io;
use std::path::Path;

use crate::types::{GgmlType, Value, ValueType};
use crate::GgufWriter;

/// Architectures the generator (and Reverie's trainer) know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3];

    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
        }
    }
}

impl std::str::FromStr for Arch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Arch::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| {
                format!("unknown architecture {s:?}; choose llama, qwen2, qwen3 or gemma3")
            })
    }
}

/// Shape and seed of a synthetic model.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    pub arch: Arch,
    pub n_embd: u64,
    pub n_layer: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub head_dim: u64,
    pub n_ff: u64,
    pub n_ctx: u64,
    pub seed: u64,
    /// Standard deviation of the random projection weights.
    pub init_scale: f32,
    /// The Jinja chat template it carries (ChatML by default).
    pub chat_template: String,
    /// Vocabulary size: the synthetic vocabulary padded with placeholder
    /// tokens (`None`: the synthetic vocabulary alone).
    pub n_vocab: Option<u64>,
    /// The LM head is the embedding table (no `output.weight`), as in small
    /// Qwen models and gemma.
    pub tied: bool,
    pub quant: SynthQuant,
}

/// How a synthetic model's weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SynthQuant {
    F32,
    /// llama.cpp's Q4_K_M mix: Q4_K projections and embeddings, Q6_K for
    /// `attn_v`, `ffn_down` and the LM head, f32 norms and biases. Rows
    /// must be multiples of 256.
    Q4KM,
}

impl std::str::FromStr for SynthQuant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(SynthQuant::F32),
            "q4_k_m" => Ok(SynthQuant::Q4KM),
            _ => Err(format!("unknown weight format {s:?}; choose f32 or q4_k_m")),
        }
    }
}

/// The shapes of the Qwen2.5 family, for sizes by name.
pub const SIZES: [&str; 4] = ["0.5b", "1.5b", "3b", "7b"];

impl SynthConfig {
    /// Two layers, 64-wide, grouped-query attention: milliseconds per token.
    pub fn tiny(arch: Arch) -> SynthConfig {
        SynthConfig {
            arch,
            n_embd: 64,
            n_layer: 2,
            n_head: 4,
            n_head_kv: 2,
            head_dim: 16,
            n_ff: 128,
            n_ctx: 4096,
            seed: 7,
            init_scale: 0.08,
            chat_template: CHATML_TEMPLATE.to_string(),
            n_vocab: None,
            tied: arch == Arch::Gemma3,
            quant: SynthQuant::F32,
        }
    }

    /// A model of `arch` with the shapes of the Qwen2.5 model of `size`
    /// (one of [`SIZES`]): layer count, widths, heads and vocabulary.
    pub fn sized(arch: Arch, size: &str, quant: SynthQuant) -> Result<SynthConfig, String> {
        let (n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab) = match size {
            "0.5b" => (896, 24, 14, 2, 4864, 151_936),
            "1.5b" => (1536, 28, 12, 2, 8960, 151_936),
            "3b" => (2048, 36, 16, 2, 11_008, 151_936),
            "7b" => (3584, 28, 28, 4, 18_944, 152_064),
            _ => {
                return Err(format!(
                    "unknown size {size:?}; choose {}",
                    SIZES.join(", ")
                ))
            }
        };
        let c = SynthConfig {
            arch,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim: n_embd / n_head,
            n_ff,
            n_ctx: 32_768,
            seed: 7,
            init_scale: 0.02,
            chat_template: CHATML_TEMPLATE.to_string(),
            n_vocab: Some(n_vocab),
            tied: arch == Arch::Gemma3 || size != "7b",
            quant,
        };
        if quant == SynthQuant::Q4KM && [n_embd, n_ff].iter().any(|w| !w.is_multiple_of(256)) {
            return Err(format!(
                "{size} has rows of {n_embd} and {n_ff}: not whole 256-value blocks, so not Q4_K_M; use --quant f32"
            ));
        }
        Ok(c)
    }
}

/// ChatML, recognised by llama.cpp's built-in template detection.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const WORDS: &[&str] = &[
    "the", "and", "you", "that", "was", "for", "are", "with", "his", "they", "this", "have",
    "from", "one", "had", "word", "but", "not", "what", "all", "were", "when", "can", "said",
    "there", "use", "each", "which", "she", "how", "their", "will", "other", "about", "out",
    "many", "then", "them", "these", "some", "her", "would", "make", "like", "him", "into", "time",
    "has", "look", "two", "more", "write", "see", "number", "way", "could", "people", "than",
    "first", "water", "been", "call", "who", "its", "now", "find", "long", "down", "day", "did",
    "get", "come", "made", "may", "part", "hello", "file", "code", "true", "false", "null",
    "answer", "name", "user", "tool",
];

/// [`vocabulary`] padded with placeholder tokens to `n` entries.
fn padded_vocabulary(n: Option<u64>) -> (Vec<String>, Vec<f32>, Vec<i32>) {
    let (mut tokens, mut scores, mut types) = vocabulary();
    let n = n.unwrap_or(0) as usize;
    for i in tokens.len()..n {
        tokens.push(format!("<|extra_{i}|>"));
        scores.push(-10.0);
        types.push(1);
    }
    (tokens, scores, types)
}

/// Token texts, scores and ggml token types (1 normal, 2 unknown, 3 control,
/// 6 byte) of the synthetic vocabulary.
pub fn vocabulary() -> (Vec<String>, Vec<f32>, Vec<i32>) {
    let mut tokens = Vec::new();
    let mut scores = Vec::new();
    let mut types = Vec::new();
    let mut add = |t: String, score: f32, ty: i32| {
        tokens.push(t);
        scores.push(score);
        types.push(ty);
    };
    add("<unk>".into(), 0.0, 2);
    add("<s>".into(), 0.0, 3);
    add("</s>".into(), 0.0, 3);
    add("<|im_start|>".into(), 0.0, 3);
    add("<|im_end|>".into(), 0.0, 3);
    for b in 0..=255u8 {
        add(format!("<0x{b:02X}>"), 0.0, 6);
    }
    add("\u{2581}".into(), -1.0, 1);
    for c in (b'!'..=b'~').map(char::from) {
        add(c.to_string(), -2.0, 1);
    }
    for c in ['\n', '\t'] {
        add(c.to_string(), -2.0, 1);
    }
    for w in WORDS {
        add(format!("\u{2581}{w}"), -0.5, 1);
    }
    (tokens, scores, types)
}

/// Small deterministic generator (splitmix64) so files are reproducible.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Approximately normal (sum of four uniforms), mean 0, given std.
    pub(crate) fn normal(&mut self, std: f32) -> f32 {
        let s: f32 = (0..4).map(|_| self.uniform()).sum::<f32>() - 2.0;
        s * std * 3f32.sqrt()
    }
}

enum Init {
    Ones,
    Random,
}

fn tensor_plan(c: &SynthConfig, n_vocab: u64) -> Vec<(String, Vec<u64>, Init)> {
    let q = c.n_head * c.head_dim;
    let kv = c.n_head_kv * c.head_dim;
    let mut plan = vec![
        (
            "token_embd.weight".to_string(),
            vec![c.n_embd, n_vocab],
            Init::Random,
        ),
        ("output_norm.weight".to_string(), vec![c.n_embd], Init::Ones),
    ];
    if !c.tied {
        plan.push((
            "output.weight".into(),
            vec![c.n_embd, n_vocab],
            Init::Random,
        ));
    }
    for i in 0..c.n_layer {
        let b = |s: &str| format!("blk.{i}.{s}");
        plan.push((b("attn_norm.weight"), vec![c.n_embd], Init::Ones));
        plan.push((b("attn_q.weight"), vec![c.n_embd, q], Init::Random));
        plan.push((b("attn_k.weight"), vec![c.n_embd, kv], Init::Random));
        plan.push((b("attn_v.weight"), vec![c.n_embd, kv], Init::Random));
        if c.arch == Arch::Qwen2 {
            plan.push((b("attn_q.bias"), vec![q], Init::Random));
            plan.push((b("attn_k.bias"), vec![kv], Init::Random));
            plan.push((b("attn_v.bias"), vec![kv], Init::Random));
        }
        if matches!(c.arch, Arch::Qwen3 | Arch::Gemma3) {
            plan.push((b("attn_q_norm.weight"), vec![c.head_dim], Init::Ones));
            plan.push((b("attn_k_norm.weight"), vec![c.head_dim], Init::Ones));
        }
        plan.push((b("attn_output.weight"), vec![q, c.n_embd], Init::Random));
        if c.arch == Arch::Gemma3 {
            plan.push((b("post_attention_norm.weight"), vec![c.n_embd], Init::Ones));
        }
        plan.push((b("ffn_norm.weight"), vec![c.n_embd], Init::Ones));
        plan.push((b("ffn_gate.weight"), vec![c.n_embd, c.n_ff], Init::Random));
        plan.push((b("ffn_up.weight"), vec![c.n_embd, c.n_ff], Init::Random));
        plan.push((b("ffn_down.weight"), vec![c.n_ff, c.n_embd], Init::Random));
        if c.arch == Arch::Gemma3 {
            plan.push((b("post_ffw_norm.weight"), vec![c.n_embd], Init::Ones));
        }
    }
    plan
}

fn metadata(c: &SynthConfig, n_vocab: u64) -> Vec<(String, Value)> {
    let (tokens, scores, types) = padded_vocabulary(c.n_vocab);
    let a = c.arch.as_str();
    let k = |s: &str| format!("{a}.{s}");
    let mut m = vec![
        ("general.architecture".to_string(), Value::String(a.into())),
        (
            "general.name".into(),
            Value::String(format!("reverie-synth-{a}")),
        ),
        (
            "general.file_type".into(),
            // llama.cpp's ftype: 0 all f32, 15 mostly Q4_K_M.
            Value::U32(match c.quant {
                SynthQuant::F32 => 0,
                SynthQuant::Q4KM => 15,
            }),
        ),
        (k("context_length"), Value::U32(c.n_ctx as u32)),
        (k("embedding_length"), Value::U32(c.n_embd as u32)),
        (k("block_count"), Value::U32(c.n_layer as u32)),
        (k("feed_forward_length"), Value::U32(c.n_ff as u32)),
        (k("attention.head_count"), Value::U32(c.n_head as u32)),
        (k("attention.head_count_kv"), Value::U32(c.n_head_kv as u32)),
        (k("attention.key_length"), Value::U32(c.head_dim as u32)),
        (k("attention.value_length"), Value::U32(c.head_dim as u32)),
        (k("attention.layer_norm_rms_epsilon"), Value::F32(1e-6)),
        (k("rope.freq_base"), Value::F32(10_000.0)),
        (k("rope.dimension_count"), Value::U32(c.head_dim as u32)),
        (k("vocab_size"), Value::U32(n_vocab as u32)),
    ];
    if c.arch == Arch::Gemma3 {
        m.push((k("attention.sliding_window"), Value::U32(8)));
    }
    m.extend([
        (
            "tokenizer.ggml.model".to_string(),
            Value::String("llama".into()),
        ),
        ("tokenizer.ggml.tokens".into(), Value::strings(tokens)),
        (
            "tokenizer.ggml.scores".into(),
            Value::Array(ValueType::F32, scores.into_iter().map(Value::F32).collect()),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(ValueType::I32, types.into_iter().map(Value::I32).collect()),
        ),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(4)),
        ("tokenizer.ggml.unknown_token_id".into(), Value::U32(0)),
        ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
        ("tokenizer.ggml.add_space_prefix".into(), Value::Bool(false)),
        (
            "tokenizer.chat_template".into(),
            Value::String(c.chat_template.clone()),
        ),
    ]);
    m
}

/// The block format of tensor `name` under `quant`.
fn tensor_type(quant: SynthQuant, name: &str, init: &Init) -> GgmlType {
    match (quant, init) {
        (SynthQuant::F32, _) | (_, Init::Ones) => GgmlType::F32,
        _ if name.ends_with(".bias") => GgmlType::F32,
        _ if name == "output.weight"
            || name.ends_with("attn_v.weight")
            || name.ends_with("ffn_down.weight") =>
        {
            GgmlType::Q6K
        }
        _ => GgmlType::Q4K,
    }
}

/// `n` values of random blocks of `ty` whose values have about `std` as
/// standard deviation and mean 0: valid blocks (finite scales), not a
/// quantization of anything.
fn random_blocks(ty: GgmlType, n: u64, std: f32, rng: &mut Rng) -> Vec<u8> {
    let (per, size) = ty.block();
    let blocks = (n / per) as usize;
    let mut out = vec![0u8; blocks * size as usize];
    for chunk in out.chunks_mut(8) {
        let r = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    let f16 = |x: f32| half::f16::from_f32(x).to_le_bytes();
    for b in out.chunks_mut(size as usize) {
        match ty {
            // d, dmin, 12 bytes of 6-bit scales and mins, 4-bit values:
            // value = d·sc·q − dmin·m, about 255·d wide with dmin = 7.5·d.
            GgmlType::Q4K => {
                let d = std / 255.0;
                b[0..2].copy_from_slice(&f16(d));
                b[2..4].copy_from_slice(&f16(7.5 * d));
            }
            // 6-bit values, 16 signed scales kept within ±32, then d:
            // value = d·sc·(q − 32), about 340·d wide.
            GgmlType::Q6K => {
                for sc in &mut b[192..208] {
                    *sc = ((*sc as i8) / 4) as u8;
                }
                b[208..210].copy_from_slice(&f16(std / 340.0));
            }
            _ => unreachable!("synthetic models use Q4_K and Q6_K"),
        }
    }
    out
}

/// Writes a synthetic model of `config` to `path` (atomically), one tensor
/// at a time.
pub fn write(path: impl AsRef<Path>, config: &SynthConfig) -> io::Result<()> {
    let n_vocab = padded_vocabulary(config.n_vocab).0.len() as u64;
    let plan = tensor_plan(config, n_vocab);
    let table: Vec<_> = plan
        .iter()
        .map(|(n, d, init)| (n.clone(), d.clone(), tensor_type(config.quant, n, init)))
        .collect();
    if let Some((name, dims, ty)) = table
        .iter()
        .find(|(_, d, ty)| !d[0].is_multiple_of(ty.block().0))
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{name} has rows of {} values: not whole {ty:?} blocks",
                dims[0]
            ),
        ));
    }
    let mut w = GgufWriter::create(path, &metadata(config, n_vocab), &table)?;
    let mut rng = Rng(config.seed);
    for ((name, dims, init), (_, _, ty)) in plan.iter().zip(&table) {
        let n: u64 = dims.iter().product();
        if *ty != GgmlType::F32 {
            w.write_tensor(name, &random_blocks(*ty, n, config.init_scale, &mut rng))?;
            continue;
        }
        let mut bytes = Vec::with_capacity(n as usize * 4);
        for _ in 0..n {
            let v = match init {
                Init::Ones => 1.0 + rng.normal(0.02),
                Init::Random => rng.normal(config.init_scale),
            };
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        w.write_tensor(name, &bytes)?;
    }
    w.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GgufFile;

    #[test]
    fn every_arch_writes_a_valid_file() {
        let dir = tempfile::tempdir().unwrap();
        for arch in Arch::ALL {
            let p = dir.path().join(format!("{}.gguf", arch.as_str()));
            write(&p, &SynthConfig::tiny(arch)).unwrap();
            let f = GgufFile::open(&p).unwrap();
            assert_eq!(f.architecture(), Some(arch.as_str()));
            let has_norm = f.tensor("blk.1.attn_q_norm.weight").is_some();
            assert_eq!(has_norm, matches!(arch, Arch::Qwen3 | Arch::Gemma3));
        }
    }

    #[test]
    fn same_seed_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        write(&a, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
        write(&b, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
        assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    }

    #[test]
    fn sized_models_have_real_shapes_and_a_q4_k_m_mix() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.gguf");
        let c = SynthConfig::sized(Arch::Qwen2, "1.5b", SynthQuant::Q4KM).unwrap();
        // Two layers keep the test quick; the widths are the real ones.
        let c = SynthConfig { n_layer: 2, ..c };
        write(&p, &c).unwrap();
        let f = GgufFile::open(&p).unwrap();
        let t = |n: &str| f.tensor(n).unwrap().clone();
        assert_eq!(t("token_embd.weight").dims, vec![1536, 151_936]);
        assert_eq!(t("token_embd.weight").dtype, GgmlType::Q4K);
        assert!(f.tensor("output.weight").is_none(), "1.5b ties its head");
        assert_eq!(t("blk.1.ffn_down.weight").dtype, GgmlType::Q6K);
        assert_eq!(t("blk.1.ffn_down.weight").dims, vec![8960, 1536]);
        // 0.5b's rows of 896 are not whole K-quant blocks.
        let err = SynthConfig::sized(Arch::Qwen2, "0.5b", SynthQuant::Q4KM).unwrap_err();
        assert!(err.contains("896") && err.contains("f32"), "{err}");
        assert_eq!(t("blk.0.attn_q.bias").dtype, GgmlType::F32);
        assert_eq!(t("blk.0.attn_norm.weight").dtype, GgmlType::F32);
        let err = SynthConfig::sized(Arch::Llama, "70b", SynthQuant::F32).unwrap_err();
        assert!(err.contains("7b"), "{err}");
        let tiny = SynthConfig {
            quant: SynthQuant::Q4KM,
            ..SynthConfig::tiny(Arch::Llama)
        };
        let err = write(dir.path().join("t.gguf"), &tiny)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not whole"), "{err}");
    }

    #[test]
    fn unknown_arch_lists_the_choices() {
        let err = "mistral".parse::<Arch>().unwrap_err();
        assert!(err.contains("qwen2") && err.contains("mistral"));
    }
}
