//! One slot: a thread that owns a llama.cpp context and serves jobs.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use reverie_core::{ChannelId, StopReason};

use crate::backend;
use crate::engine::{GenEvent, Shared, Usage};
use crate::error::InferError;
use crate::model::LoadedModel;
use crate::sampler::TokenPicker;
use crate::scheduler::{Job, JobControl};
use crate::utf8::Utf8Stream;

/// A worker slot as the engine and the watchdog see it.
pub struct Slot {
    pub id: usize,
    pub retired: AtomicBool,
    pub abandoned: AtomicBool,
    /// Milliseconds since the engine started, at the last sign of progress.
    pub progress_ms: AtomicU64,
    pub current: Mutex<Option<(ChannelId, Arc<JobControl>)>>,
    pub handle: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Slot {
    pub fn new(id: usize) -> Slot {
        Slot {
            id,
            retired: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            progress_ms: AtomicU64::new(0),
            current: Mutex::new(None),
            handle: Mutex::new(None),
        }
    }

    fn beat(&self, epoch: Instant) {
        self.progress_ms
            .store(epoch.elapsed().as_millis() as u64, Ordering::SeqCst);
    }

    pub fn should_exit(&self, shared: &Shared) -> bool {
        shared.shutdown.load(Ordering::SeqCst)
            || self.retired.load(Ordering::SeqCst)
            || self.abandoned.load(Ordering::SeqCst)
    }
}

/// Starts a worker thread for `slot` on `model`; `ready` receives the
/// outcome of creating its context.
pub fn spawn(
    shared: Arc<Shared>,
    model: Arc<LoadedModel>,
    slot: Arc<Slot>,
    ready: Sender<Result<(), InferError>>,
) {
    let handle_slot = slot.clone();
    let handle = std::thread::Builder::new()
        .name(format!("reverie-slot-{}", slot.id))
        .spawn(move || run(shared, model, slot, ready))
        .expect("spawn worker thread");
    *handle_slot.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
}

fn run(
    shared: Arc<Shared>,
    model: Arc<LoadedModel>,
    slot: Arc<Slot>,
    ready: Sender<Result<(), InferError>>,
) {
    let cfg = &shared.config;
    let threads = cfg.threads as i32;
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(cfg.n_ctx))
        .with_n_batch(cfg.n_batch)
        .with_n_ubatch(cfg.n_batch.min(512))
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let backend = match backend::get() {
        Ok(b) => b,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let mut ctx = match model.llama.new_context(backend, params) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(InferError::Context(e.to_string())));
            return;
        }
    };
    if let Err(e) = model.attach_adapter(&mut ctx) {
        let _ = ready.send(Err(e));
        return;
    }
    let _ = ready.send(Ok(()));
    let mut cache: Vec<i32> = Vec::new();
    let mut finished: Option<ChannelId> = None;
    loop {
        let job = {
            let mut q = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            // Releasing the channel and looking for work under one lock lets
            // this slot, which holds the channel's cache, take its next turn.
            if let Some(ch) = finished.take() {
                q.finish(ch);
                shared.cv.notify_all();
            }
            loop {
                if slot.should_exit(&shared) {
                    q.set_idle(slot.id, false);
                    return;
                }
                if let Some(job) = q.pop(slot.id, cfg.slots) {
                    break job;
                }
                q.set_idle(slot.id, true);
                q = shared.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        slot.beat(shared.epoch);
        *slot.current.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((job.channel, job.control.clone()));
        let result = serve(&shared, &model, &slot, &mut ctx, &mut cache, &job);
        if slot.abandoned.load(Ordering::SeqCst) {
            // The watchdog already answered this job and started a replacement.
            return;
        }
        match result {
            Ok((reason, usage)) => job.control.finish(GenEvent::Done { reason, usage }),
            Err(e) => {
                job.control.finish(GenEvent::Failed(e.to_string()));
                cache.clear();
                ctx.clear_kv_cache();
            }
        }
        *slot.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        finished = Some(job.channel);
    }
}

fn common_prefix(a: &[i32], b: &[i32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn decode(ctx: &mut LlamaContext<'_>, batch: &mut LlamaBatch<'_>) -> Result<(), InferError> {
    ctx.decode(batch)
        .map_err(|e| InferError::Decode(e.to_string()))
}

/// Decodes the image whose run starts `rest` at position `n_past`;
/// returns how many positions it took.
fn prefill_image(
    shared: &Shared,
    model: &LoadedModel,
    ctx: &mut LlamaContext<'_>,
    n_past: usize,
    rest: &[i32],
) -> Result<usize, InferError> {
    let id = rest[0];
    let number = reverie_core::image_number(id).expect("an image position");
    let vision = model
        .vision
        .as_ref()
        .ok_or_else(|| InferError::Vision("no multimodal projector is loaded".into()))?;
    let bytes = shared.image(number)?;
    let run = rest.iter().take_while(|&&x| x == id).count();
    vision.decode(&bytes, ctx, n_past, run, shared.config.n_batch)
}

/// Prefills what the cache lacks, then samples until a stop.
fn serve(
    shared: &Shared,
    model: &LoadedModel,
    slot: &Slot,
    ctx: &mut LlamaContext<'_>,
    cache: &mut Vec<i32>,
    job: &Job,
) -> Result<(StopReason, Usage), InferError> {
    let n_ctx = ctx.n_ctx();
    let prompt = &job.prompt;
    if prompt.len() as u32 >= n_ctx {
        return Err(InferError::ContextFull {
            tokens: prompt.len(),
            n_ctx,
        });
    }
    let mut picker = TokenPicker::new(&model.llama, &job.sampling, job.constraint.as_ref())?;
    let n_batch = shared.config.n_batch as usize;
    let mut batch = LlamaBatch::new(n_batch, 1);

    // Keep the longest cached prefix; at least one prompt token must be
    // decoded to get fresh logits, and an image is decoded whole or not at
    // all.
    let mut keep = common_prefix(cache, prompt);
    if keep == prompt.len() {
        keep -= 1;
    }
    while keep > 0 && prompt[keep] < 0 && prompt[keep - 1] == prompt[keep] {
        keep -= 1;
    }
    if keep < cache.len() {
        ctx.clear_kv_cache_seq(Some(0), Some(keep as u32), None)
            .map_err(|e| InferError::Decode(e.to_string()))?;
        cache.truncate(keep);
    }
    let started = Instant::now();
    let todo = &prompt[keep..];
    let mut rest = todo;
    while !rest.is_empty() {
        if let Some(reason) = job.control.stop_reason() {
            return Ok((reason, Usage::default()));
        }
        if rest[0] < 0 {
            // Prompts end in text, so an image never needs the logits.
            let len = prefill_image(shared, model, ctx, cache.len(), rest)?;
            cache.extend_from_slice(&rest[..len]);
            rest = &rest[len..];
        } else {
            let text = rest.iter().take_while(|&&id| id >= 0).count();
            let chunk = &rest[..text.min(n_batch)];
            let logits_here = chunk.len() == rest.len();
            batch.clear();
            for (j, &tok) in chunk.iter().enumerate() {
                let logits = logits_here && j + 1 == chunk.len();
                batch
                    .add(LlamaToken(tok), (cache.len() + j) as i32, &[0], logits)
                    .map_err(|e| InferError::Decode(e.to_string()))?;
            }
            decode(ctx, &mut batch)?;
            cache.extend_from_slice(chunk);
            rest = &rest[chunk.len()..];
        }
        slot.beat(shared.epoch);
    }
    let prefill = started.elapsed();
    let mut usage = Usage {
        prompt_tokens: prompt.len(),
        reused_tokens: keep,
        prefilled_tokens: todo.len(),
        prefill_ms: prefill.as_secs_f64() * 1e3,
        ..Usage::default()
    };
    let mut logits_at = batch.n_tokens() - 1;
    let mut text = Utf8Stream::default();
    // The end of the generated text, to spot stop strings.
    let mut tail = String::new();
    let vocab = model.llama.vocab();
    let decode_started = Instant::now();
    let mut reason = StopReason::MaxTokens;
    for i in 0..job.sampling.max_tokens {
        if let Some(r) = job.control.stop_reason() {
            reason = r;
            break;
        }
        if shared.config.fault_hang_after_tokens == Some(i)
            && shared.fault_armed.swap(false, Ordering::SeqCst)
        {
            // Simulated hang inside the backend: ignores cancellation and
            // only ends once the watchdog has given up on this slot.
            while !slot.abandoned.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
            return Err(InferError::Generation("abandoned by the watchdog".into()));
        }
        let (tok, logprob) = picker.pick(ctx, logits_at)?;
        picker.accept(tok);
        usage.generated_tokens += 1;
        let eog = vocab.is_eog(tok) && !job.ignore_eog;
        let piece = if eog {
            text.finish()
        } else {
            text.push(&vocab.token_to_piece(tok, false, None))
        };
        tail.push_str(&piece);
        let stopped = job
            .stop
            .iter()
            .any(|s| !s.is_empty() && tail.ends_with(s.as_str()));
        if tail.len() > 256 {
            let cut = tail.len() - 128;
            let cut = (cut..tail.len())
                .find(|&i| tail.is_char_boundary(i))
                .unwrap_or(0);
            tail.drain(..cut);
        }
        if !job.control.send(GenEvent::Token {
            id: tok.0,
            piece,
            logprob,
        }) {
            reason = StopReason::Cancelled;
            break;
        }
        slot.beat(shared.epoch);
        if eog || stopped {
            reason = StopReason::EndOfTurn;
            break;
        }
        if cache.len() + 1 >= n_ctx as usize {
            reason = StopReason::ContextFull;
            break;
        }
        batch.clear();
        batch
            .add(tok, cache.len() as i32, &[0], true)
            .map_err(|e| InferError::Decode(e.to_string()))?;
        decode(ctx, &mut batch)?;
        cache.push(tok.0);
        logits_at = 0;
    }
    // Bytes of a character cut off by a stop stay out of the text; the ids
    // already sent are the record.
    usage.decode_ms = decode_started.elapsed().as_secs_f64() * 1e3;
    Ok((reason, usage))
}
