//! Images the model can see, through llama.cpp's `mtmd`: a multimodal
//! projector turns an image into embeddings that are decoded into the KV
//! cache in place of tokens.
//!
//! In a token sequence every position of one image carries the same negative
//! id ([`reverie_core::image_token`]); the engine asks its [`ImageSource`]
//! for the image's bytes when a prompt reaches that run, so a recorded
//! conversation replays exactly from the store, whatever became of the file.

use std::path::Path;
use std::sync::{Arc, Mutex};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::mtmd::{
    mtmd_default_marker, MtmdBitmap, MtmdContext, MtmdContextParams, MtmdInputChunks, MtmdInputText,
};

use crate::error::InferError;

/// Where the engine gets the bytes of image number `n` (as stored).
pub type ImageSource = Arc<dyn Fn(u32) -> Result<Vec<u8>, String> + Send + Sync>;

/// A loaded projector. Encoding is not thread-safe in llama.cpp, so the
/// slots take turns.
pub(crate) struct Vision {
    ctx: Mutex<MtmdContext>,
}

fn vision_error(what: impl Into<String>) -> InferError {
    InferError::Vision(what.into())
}

impl Vision {
    /// Loads the projector at `path` for `model`.
    pub(crate) fn load(
        path: &Path,
        model: &LlamaModel,
        threads: usize,
        gpu: bool,
    ) -> Result<Vision, InferError> {
        reverie_gguf::GgufFile::open(path)?;
        let params = MtmdContextParams {
            use_gpu: gpu,
            print_timings: false,
            n_threads: threads as i32,
            ..MtmdContextParams::default()
        };
        let utf8 = path.to_str().ok_or_else(|| {
            vision_error(format!("{}: the path is not valid UTF-8", path.display()))
        })?;
        let ctx = MtmdContext::init_from_file(utf8, model, &params).map_err(|e| InferError::Load {
            path: path.to_path_buf(),
            reason: format!(
                "{e}: not a multimodal projector for this model (llama.cpp's log says why; a projector must be made for the same model, with the same embedding width)"
            ),
        })?;
        if !ctx.support_vision() {
            return Err(InferError::Load {
                path: path.to_path_buf(),
                reason: "the projector has no vision encoder (audio-only projectors are not used)"
                    .into(),
            });
        }
        if ctx.decode_use_mrope() {
            // Positions of text after an image then differ from token
            // indices, which the slots' cache bookkeeping relies on.
            return Err(InferError::Load {
                path: path.to_path_buf(),
                reason: "models with M-RoPE image positions (Qwen2-VL and later) are not supported yet; use a LLaVA-, Gemma 3- or SmolVLM-style model".into(),
            });
        }
        Ok(Vision {
            ctx: Mutex::new(ctx),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MtmdContext> {
        self.ctx.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The image's chunks: its embeddings and any marker tokens the model
    /// puts around an image.
    fn chunks(ctx: &MtmdContext, bytes: &[u8]) -> Result<MtmdInputChunks, InferError> {
        let bitmap = MtmdBitmap::from_buffer(ctx, bytes, false).map_err(|e| {
            vision_error(format!(
                "the image could not be decoded ({e}); use PNG, JPEG, GIF or BMP"
            ))
        })?;
        let text = MtmdInputText {
            text: mtmd_default_marker().to_string(),
            add_special: false,
            parse_special: true,
        };
        ctx.tokenize(text, &[&bitmap])
            .map_err(|e| vision_error(format!("preparing the image: {e}")))
    }

    /// How many positions `bytes` takes in a sequence.
    pub(crate) fn positions(&self, bytes: &[u8]) -> Result<usize, InferError> {
        let ctx = self.lock();
        Ok(Self::chunks(&ctx, bytes)?.total_tokens())
    }

    /// Encodes the image and decodes it into `llama` from position
    /// `n_past`, returning how many positions it took. `run` is how many
    /// positions in a row the sequence gave this image (the same image twice
    /// in a row is two runs); a projector that makes a count that does not
    /// fit is refused rather than shifting every later position.
    pub(crate) fn decode(
        &self,
        bytes: &[u8],
        llama: &mut LlamaContext<'_>,
        n_past: usize,
        run: usize,
        n_batch: u32,
    ) -> Result<usize, InferError> {
        let mut ctx = self.lock();
        let chunks = Self::chunks(&ctx, bytes)?;
        let len = chunks.total_tokens();
        if len == 0 || !run.is_multiple_of(len) {
            return Err(vision_error(format!(
                "the image takes {len} positions with this projector but {run} were recorded; it was seen with another projector"
            )));
        }
        chunks
            .eval_chunks(&mut ctx, llama, n_past as i32, 0, n_batch as i32, false)
            .map_err(|e| vision_error(format!("encoding the image: {e}")))?;
        Ok(len)
    }
}
