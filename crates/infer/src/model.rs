//! A loaded model and what is known about it.

use std::path::{Path, PathBuf};

use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaLoraAdapter, LlamaModel};
use reverie_gguf::GgufFile;
use serde::Serialize;

use crate::backend;
use crate::chat_format::ChatTemplates;
use crate::error::InferError;
use crate::vision::Vision;

/// Architectures this llama.cpp build is known to run. Others may work, but
/// a clear refusal beats a crash inside the loader.
const KNOWN_ARCHS: &[&str] = &[
    "llama",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3",
    "mistral",
    "phi3",
    "qwen2moe",
    "qwen3moe",
    "granite",
    "olmo2",
    "smollm3",
    "exaone",
    "deepseek2",
    "command-r",
    "starcoder2",
];

/// Facts about a loaded model, for health displays and records.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelInfo {
    pub path: PathBuf,
    pub name: String,
    pub architecture: String,
    pub file_size: u64,
    pub n_params: u64,
    pub n_vocab: i32,
    pub n_ctx_train: u32,
    pub has_chat_template: bool,
}

pub struct LoadedModel {
    /// The multimodal projector, when one is loaded. Declared first so it is
    /// freed before the model it points into.
    pub(crate) vision: Option<Vision>,
    /// Why the projector asked for was set aside, where it was.
    pub(crate) vision_set_aside: Option<String>,
    pub llama: LlamaModel,
    pub info: ModelInfo,
    /// A LoRA adapter applied to every context of this model.
    pub adapter: Option<std::sync::Mutex<LlamaLoraAdapter>>,
    /// The model's Jinja chat template as llama.cpp's chat layer reads it,
    /// or why it cannot (the built-in renderer is used then).
    pub chat: Result<ChatTemplates, String>,
    /// False for a model parked with its vocabulary only
    /// ([`LoadedModel::vocabulary`]): it tokenizes and renders, but has no
    /// weights to compute with.
    pub weights: bool,
}

impl LoadedModel {
    /// Validates the file's header, then loads it with llama.cpp, with an
    /// optional LoRA adapter GGUF and an optional multimodal projector
    /// (path, threads). Where `lenient`, a projector that does not load is
    /// set aside (the model runs without images) and the reason kept.
    pub(crate) fn load(
        path: &Path,
        gpu_layers: u32,
        adapter: Option<&Path>,
        mmproj: Option<(&Path, usize)>,
        lenient: bool,
    ) -> Result<LoadedModel, InferError> {
        let header = GgufFile::open(path)?;
        let arch = header.architecture().unwrap_or_default().to_string();
        if !KNOWN_ARCHS.contains(&arch.as_str()) {
            return Err(InferError::UnsupportedArch {
                path: path.to_path_buf(),
                arch,
            });
        }
        let backend = backend::get()?;
        let params = LlamaModelParams::default().with_n_gpu_layers(gpu_layers);
        let mut llama =
            LlamaModel::load_from_file(backend, path, &params).map_err(|e| InferError::Load {
                path: path.to_path_buf(),
                reason: format!(
                    "{e} (the header is valid; the tensors may not match the architecture)"
                ),
            })?;
        let info = ModelInfo {
            path: path.to_path_buf(),
            name: header.name().map(str::to_string).unwrap_or_else(|| {
                path.file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into()
            }),
            architecture: arch,
            file_size: header.file_size,
            n_params: llama.n_params(),
            n_vocab: llama.n_vocab(),
            n_ctx_train: llama.n_ctx_train(),
            has_chat_template: llama.chat_template(None).is_ok(),
        };
        let adapter = match adapter {
            None => None,
            Some(a) => {
                reverie_gguf::GgufFile::open(a)?;
                let lora = llama.lora_adapter_init(a).map_err(|e| InferError::Load {
                    path: a.to_path_buf(),
                    reason: format!("{e}: not a LoRA adapter for this model"),
                })?;
                Some(std::sync::Mutex::new(lora))
            }
        };
        let (vision, vision_set_aside) = match mmproj {
            None => (None, None),
            Some((p, threads)) => match Vision::load(p, &llama, threads, gpu_layers > 0) {
                Ok(v) => (Some(v), None),
                Err(why) if lenient => {
                    tracing::warn!("running without images: {why}");
                    (None, Some(why.to_string()))
                }
                Err(e) => return Err(e),
            },
        };
        let chat = chat_templates(&llama);
        if let Err(why) = &chat {
            tracing::info!(
                "{}: {why}; using the built-in chat renderer",
                path.display()
            );
        }
        Ok(LoadedModel {
            vision,
            vision_set_aside,
            llama,
            info,
            adapter,
            chat,
            weights: true,
        })
    }

    /// The same file with its vocabulary and metadata only: what a parked
    /// engine keeps, a few megabytes, so that tokenizing and rendering go
    /// on while the weights' memory (on the GPU and the CPU) is given back.
    pub(crate) fn vocabulary(&self) -> Result<LoadedModel, InferError> {
        let path = &self.info.path;
        let params = LlamaModelParams::default().with_vocab_only(true);
        let llama = LlamaModel::load_from_file(backend::get()?, path, &params).map_err(|e| {
            InferError::Load {
                path: path.clone(),
                reason: format!("{e} (reading its vocabulary)"),
            }
        })?;
        let chat = chat_templates(&llama);
        Ok(LoadedModel {
            vision: None,
            vision_set_aside: None,
            llama,
            info: self.info.clone(),
            adapter: None,
            chat,
            weights: false,
        })
    }
}

impl LoadedModel {
    /// Applies the model's adapter (if any) to a new context.
    pub fn attach_adapter(
        &self,
        ctx: &mut llama_cpp_2::context::LlamaContext<'_>,
    ) -> Result<(), InferError> {
        if let Some(a) = &self.adapter {
            let mut a = a.lock().unwrap_or_else(|e| e.into_inner());
            ctx.lora_adapter_set(&mut a, 1.0)
                .map_err(|e| InferError::Context(format!("applying the LoRA adapter: {e}")))?;
        }
        Ok(())
    }
}

/// The model's chat template for llama.cpp's chat layer: the tool-use
/// variant when the model has one (it is the one that renders tools).
fn chat_templates(llama: &LlamaModel) -> Result<ChatTemplates, String> {
    let src = llama
        .meta_val_str("tokenizer.chat_template.tool_use")
        .or_else(|_| llama.meta_val_str("tokenizer.chat_template"))
        .map_err(|_| "the model has no chat template".to_string())?;
    let vocab = llama.vocab();
    let text = |t: llama_cpp_2::token::LlamaToken| {
        if t.0 < 0 {
            return String::new();
        }
        String::from_utf8_lossy(&vocab.detokenize(&[t], false, true)).into_owned()
    };
    ChatTemplates::new(&src, &text(vocab.bos()), &text(vocab.eos())).map_err(|e| e.to_string())
}
