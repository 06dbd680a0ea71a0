//! The engine: model, worker pool, fair queue, hot swap and watchdog.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Condvar, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use reverie_core::{ChannelId, SamplingParams, StopReason, TokenRole, TokenSpan};
use serde::Serialize;

use crate::chat_format::{ChatParams, ChatRequest, TemplateCaps};
use crate::config::EngineConfig;
use crate::error::InferError;
use crate::model::{LoadedModel, ModelInfo};
use crate::prompt::{self, ChatMessage, Transcript};
use crate::sampler::Constraint;
use crate::scheduler::{Job, JobControl, Queue};
use crate::vision::ImageSource;
use crate::worker::{self, Slot};

/// Counters of one generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    /// Prompt tokens found already in the slot's KV cache.
    pub reused_tokens: usize,
    pub prefilled_tokens: usize,
    pub generated_tokens: usize,
    pub prefill_ms: f64,
    pub decode_ms: f64,
}

/// What a generation streams.
#[derive(Debug, Clone, PartialEq)]
pub enum GenEvent {
    Token {
        id: i32,
        piece: String,
        logprob: f32,
    },
    Done {
        reason: StopReason,
        usage: Usage,
    },
    Failed(String),
}

/// A request to continue `prompt` (the channel's whole token history).
#[derive(Debug, Clone)]
pub struct GenerateRequest {
    pub channel: ChannelId,
    pub prompt: Vec<i32>,
    pub sampling: SamplingParams,
    pub constraint: Option<Constraint>,
    /// Keep going past end-of-generation tokens (benchmarks).
    pub ignore_eog: bool,
    /// End the turn when the generated text ends with one of these.
    pub stop: Vec<String>,
}

impl GenerateRequest {
    pub fn new(channel: ChannelId, prompt: Vec<i32>, sampling: SamplingParams) -> Self {
        GenerateRequest {
            channel,
            prompt,
            sampling,
            constraint: None,
            ignore_eog: false,
            stop: Vec::new(),
        }
    }

    pub fn with_constraint(mut self, constraint: Constraint) -> Self {
        self.constraint = Some(constraint);
        self
    }
}

/// The finished result of a generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub ids: Vec<i32>,
    pub logprobs: Vec<f32>,
    pub text: String,
    pub reason: StopReason,
    pub usage: Usage,
}

impl Completion {
    /// The generated tokens as `action` tokens with their log-probs.
    pub fn span(&self) -> TokenSpan {
        let mut span = TokenSpan::default();
        for (&id, &lp) in self.ids.iter().zip(&self.logprobs) {
            span.push(id, TokenRole::Action, Some(lp));
        }
        span
    }
}

const CHATML_END: &str = "<|im_end|>";

/// A running generation: iterate its events, cancel it, or wait for it.
pub struct Generation {
    rx: Receiver<GenEvent>,
    control: Arc<JobControl>,
    done: bool,
}

impl Generation {
    /// `text` without a stop string it ends with.
    pub fn strip_stop<'t>(&self, text: &'t str) -> &'t str {
        self.control.strip_stop(text)
    }

    /// Asks the generation to stop; it ends with `StopReason::Cancelled`.
    pub fn cancel(&self) {
        self.control.request_stop(StopReason::Cancelled);
    }

    /// A handle that can cancel from another thread.
    pub fn canceller(&self) -> impl Fn() + Send + Sync + 'static {
        let c = self.control.clone();
        move || c.request_stop(StopReason::Cancelled)
    }

    /// Waits for every event, calling `on_event` for each.
    pub fn complete_with(
        mut self,
        mut on_event: impl FnMut(&GenEvent),
    ) -> Result<Completion, InferError> {
        let mut out = Completion {
            ids: Vec::new(),
            logprobs: Vec::new(),
            text: String::new(),
            reason: StopReason::Cancelled,
            usage: Usage::default(),
        };
        for ev in self.by_ref() {
            on_event(&ev);
            match ev {
                GenEvent::Token { id, piece, logprob } => {
                    out.ids.push(id);
                    out.logprobs.push(logprob);
                    out.text.push_str(&piece);
                }
                GenEvent::Done { reason, usage } => {
                    out.reason = reason;
                    out.usage = usage;
                    out.text = self.control.strip_stop(&out.text).to_string();
                    return Ok(out);
                }
                GenEvent::Failed(msg) => return Err(InferError::Generation(msg)),
            }
        }
        Err(InferError::Generation(
            "the worker stopped without an answer".into(),
        ))
    }

    pub fn complete(self) -> Result<Completion, InferError> {
        self.complete_with(|_| {})
    }
}

impl Iterator for Generation {
    type Item = GenEvent;
    fn next(&mut self) -> Option<GenEvent> {
        if self.done {
            return None;
        }
        let ev = self.rx.recv().ok();
        if !matches!(ev, Some(GenEvent::Token { .. })) {
            self.done = true;
        }
        ev
    }
}

/// State shared by the engine handle, its workers and its watchdog.
pub struct Shared {
    pub config: EngineConfig,
    pub queue: Mutex<Queue>,
    pub cv: Condvar,
    pub shutdown: AtomicBool,
    pub epoch: Instant,
    /// The injected fault fires once.
    pub fault_armed: AtomicBool,
    model: RwLock<Arc<LoadedModel>>,
    image_source: RwLock<Option<ImageSource>>,
    slots: Mutex<Vec<Arc<Slot>>>,
    next_slot: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn model(&self) -> Arc<LoadedModel> {
        self.model.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The bytes of image number `n`, from the source the owner set.
    pub(crate) fn image(&self, n: u32) -> Result<Vec<u8>, InferError> {
        let source = self
            .image_source
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| {
                InferError::Vision(format!(
                    "the prompt holds image {n} but the engine has no image source"
                ))
            })?;
        source(n).map_err(|e| InferError::Vision(format!("image {n}: {e}")))
    }

    /// Starts `n` workers on `model` and waits until each has its context.
    fn start_slots(
        self: &Arc<Self>,
        model: &Arc<LoadedModel>,
        n: usize,
    ) -> Result<Vec<Arc<Slot>>, InferError> {
        let mut started: Vec<Arc<Slot>> = Vec::new();
        for _ in 0..n {
            let slot = Arc::new(Slot::new(self.next_slot.fetch_add(1, Ordering::SeqCst)));
            let (tx, rx) = mpsc::channel();
            worker::spawn(self.clone(), model.clone(), slot.clone(), tx);
            let outcome = rx
                .recv()
                .unwrap_or_else(|_| Err(InferError::Context("worker thread died".into())));
            if let Err(e) = outcome {
                for s in &started {
                    retire(s);
                }
                self.cv.notify_all();
                return Err(e);
            }
            started.push(slot);
        }
        Ok(started)
    }
}

fn retire(slot: &Slot) {
    slot.retired.store(true, Ordering::SeqCst);
}

/// A loaded model serving many channels. Dropping it stops every worker.
pub struct Engine {
    shared: Arc<Shared>,
}

impl Engine {
    /// Loads `path` (with the config's projector, which must load) and
    /// starts the worker slots.
    pub fn load(path: impl AsRef<Path>, config: EngineConfig) -> Result<Engine, InferError> {
        Engine::start(path.as_ref(), config, false)
    }

    /// As [`Engine::load`], but a projector that does not load (made for
    /// another model, damaged) is set aside rather than keeping the model
    /// from chatting: the engine then runs without images, and the reason
    /// comes back with it.
    pub fn load_or_without_projector(
        path: impl AsRef<Path>,
        config: EngineConfig,
    ) -> Result<(Engine, Option<String>), InferError> {
        let engine = Engine::start(path.as_ref(), config, true)?;
        let set_aside = engine.shared.model().vision_set_aside.clone();
        Ok((engine, set_aside))
    }

    fn start(path: &Path, mut config: EngineConfig, lenient: bool) -> Result<Engine, InferError> {
        let model = Arc::new(LoadedModel::load(
            path,
            config.gpu_layers,
            config.adapter.as_deref(),
            config.mmproj.as_deref().map(|p| (p, config.threads)),
            lenient,
        )?);
        let slots = config.slots.max(1);
        if config.n_ctx == 0 {
            let m = &model.llama;
            // f16 keys and values of every layer.
            let kv_width =
                (m.n_embd().max(0) as u64 / m.n_head().max(1) as u64) * m.n_head_kv() as u64;
            let per_token = 2 * 2 * m.n_layer() as u64 * kv_width;
            config.n_ctx = crate::config::auto_ctx(
                model.info.n_ctx_train,
                per_token,
                slots,
                crate::config::available_memory(),
            );
        }
        let shared = Arc::new(Shared {
            config,
            queue: Mutex::new(Queue::default()),
            cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
            epoch: Instant::now(),
            fault_armed: AtomicBool::new(true),
            model: RwLock::new(model.clone()),
            image_source: RwLock::new(None),
            slots: Mutex::new(Vec::new()),
            next_slot: AtomicUsize::new(0),
        });
        let started = shared.start_slots(&model, slots)?;
        *lock(&shared.slots) = started;
        spawn_watchdog(Arc::downgrade(&shared));
        Ok(Engine { shared })
    }

    pub fn info(&self) -> ModelInfo {
        self.shared.model().info.clone()
    }

    pub fn model_path(&self) -> PathBuf {
        self.shared.model().info.path.clone()
    }

    pub fn config(&self) -> &EngineConfig {
        &self.shared.config
    }

    /// Whether a multimodal projector is loaded: images reach the model.
    pub fn can_see(&self) -> bool {
        self.shared.model().vision.is_some()
    }

    /// How many positions an image takes in a sequence for this model.
    pub fn image_positions(&self, bytes: &[u8]) -> Result<usize, InferError> {
        let model = self.shared.model();
        let vision = model
            .vision
            .as_ref()
            .ok_or_else(|| InferError::Vision("no multimodal projector is loaded".into()))?;
        vision.positions(bytes)
    }

    /// Where the slots get the bytes of the images a prompt holds
    /// ([`reverie_core::image_token`]).
    pub fn set_image_source(&self, source: ImageSource) {
        *self
            .shared
            .image_source
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(source);
    }

    /// Tokens of `text`; `special` lets control-token text become control tokens.
    pub fn tokenize(&self, text: &str, special: bool) -> Vec<i32> {
        prompt::tokenize(&self.shared.model().llama, text, false, special)
    }

    /// Tokens of a whole document: the model's BOS first when it wants one,
    /// control-token text parsed.
    pub fn tokenize_document(&self, text: &str) -> Vec<i32> {
        prompt::tokenize(&self.shared.model().llama, text, true, true)
    }

    /// Tokens of a prompt the chat layer rendered ([`Engine::chat_params`]):
    /// the model's BOS once (the template may have written it as text),
    /// control-token text parsed.
    pub fn tokenize_rendered(&self, prompt: &str) -> Vec<i32> {
        let model = self.shared.model();
        let vocab = model.llama.vocab();
        let mut text = prompt;
        if vocab.should_add_bos() {
            let bos = String::from_utf8_lossy(&vocab.detokenize(&[vocab.bos()], false, true))
                .into_owned();
            if !bos.is_empty() {
                text = text.strip_prefix(bos.as_str()).unwrap_or(text);
            }
        }
        prompt::tokenize(&model.llama, text, true, true)
    }

    /// Text of `ids`; `special` renders control tokens as their text.
    /// Image positions have none.
    pub fn detokenize(&self, ids: &[i32], special: bool) -> String {
        let model = self.shared.model();
        let vocab = model.llama.vocab();
        // Image positions stand for embeddings and have no text.
        let toks: Vec<_> = ids
            .iter()
            .filter(|&&i| i >= 0)
            .map(|&i| llama_cpp_2::token::LlamaToken(i))
            .collect();
        String::from_utf8_lossy(&vocab.detokenize(&toks, false, special)).into_owned()
    }

    /// llama.cpp's log-probability of each `tokens[i]` given `tokens[..i]`,
    /// for `i` in `1..len` (teacher forcing, in a context of its own).
    pub fn score(&self, tokens: &[i32]) -> Result<Vec<f32>, InferError> {
        let mut out = Vec::with_capacity(tokens.len().saturating_sub(1));
        self.visit_logits(tokens, &mut |i, logits| {
            if let Some(&next) = tokens.get(i + 1) {
                out.push(crate::score::log_prob(logits, next));
            }
        })?;
        Ok(out)
    }

    /// Calls `visit(i, logits)` with the logits after `tokens[..=i]`.
    pub fn visit_logits(
        &self,
        tokens: &[i32],
        visit: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<(), InferError> {
        let model = self.shared.model();
        if !model.weights {
            return Err(InferError::Parked);
        }
        crate::score::logits_at_every_position(&model, tokens, self.shared.config.threads, visit)
    }

    /// Calls `visit(i, logits)` with the logits after `tokens[..=i]` for
    /// each `i` in `at` only (much cheaper than every position).
    pub fn visit_logits_at(
        &self,
        tokens: &[i32],
        at: &[usize],
        visit: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<(), InferError> {
        let model = self.shared.model();
        if !model.weights {
            return Err(InferError::Parked);
        }
        crate::score::logits_at(&model, tokens, at, self.shared.config.threads, visit)
    }

    /// Appends messages to a transcript through the chat template, ending
    /// with the assistant prompt; returns the tokens added.
    pub fn extend_transcript(
        &self,
        transcript: &mut Transcript,
        messages: &[ChatMessage],
    ) -> Result<TokenSpan, InferError> {
        let model = self.shared.model();
        prompt::extend(&model, transcript, messages, true)
    }

    /// Rebuilds a transcript from stored messages and the exact tokens they
    /// were fed or produced with (concatenated in order).
    pub fn restore_transcript(&self, messages: Vec<ChatMessage>, tokens: TokenSpan) -> Transcript {
        let model = self.shared.model();
        let vocab = model.llama.vocab();
        // The template text never contains the BOS token's text.
        let skip =
            usize::from(vocab.should_add_bos() && tokens.ids.first() == Some(&vocab.bos().0));
        let rendered = self.detokenize(&tokens.ids[skip..], true);
        Transcript::restore(messages, tokens, rendered)
    }

    /// Renders `req` through the model's own Jinja template with llama.cpp's
    /// chat layer: the prompt, the tool-call grammar and its triggers, and
    /// the reply's parser. Fails when llama.cpp cannot read the template.
    pub fn chat_params(&self, req: &ChatRequest) -> Result<ChatParams, InferError> {
        let model = self.shared.model();
        let chat = model
            .chat
            .as_ref()
            .map_err(|why| InferError::Template(why.clone()))?;
        chat.apply(req)
    }

    /// What the model's template supports, or why llama.cpp cannot read it.
    pub fn chat_caps(&self) -> Result<TemplateCaps, InferError> {
        let model = self.shared.model();
        let chat = model
            .chat
            .as_ref()
            .map_err(|why| InferError::Template(why.clone()))?;
        chat.caps()
    }

    /// Whether the model's own template describes tools (llama.cpp's chat
    /// layer reads it and it renders a `tools` list): then a transcript
    /// carries its tools and calls are constrained and parsed in the model's
    /// own format. Otherwise tools go in the system prompt, Hermes style.
    pub fn renders_tools(&self) -> bool {
        self.chat_caps().is_ok_and(|c| c.supports_tools)
    }

    /// `system` with the tool definitions appended in the form the model's
    /// own chat template uses (Qwen/Hermes `<tools>` block when it has one).
    pub fn system_prompt_with_tools(&self, system: &str, tools: &[serde_json::Value]) -> String {
        let model = self.shared.model();
        let template = model.llama.meta_val_str("tokenizer.chat_template").ok();
        crate::tools::system_with_tools(template.as_deref(), system, tools)
    }

    /// The chat template's text for `messages` (what a transcript of them
    /// stands for), with the assistant prompt at the end if asked.
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, InferError> {
        let model = self.shared.model();
        prompt::render_chat(&model, messages, &[], add_generation_prompt)
    }

    /// Appends messages without asking for a reply (e.g. a system prompt).
    pub fn append_messages(
        &self,
        transcript: &mut Transcript,
        messages: &[ChatMessage],
    ) -> Result<TokenSpan, InferError> {
        let model = self.shared.model();
        prompt::extend(&model, transcript, messages, false)
    }

    /// Appends a finished reply (its exact tokens) to a transcript.
    pub fn record_reply(&self, transcript: &mut Transcript, reply: &Completion) -> TokenSpan {
        let span = reply.span();
        let rendered = self.detokenize(&reply.ids, true);
        transcript.push_reply(&reply.text, &span, &rendered);
        span
    }

    /// Queues a generation; events stream through the returned handle.
    pub fn generate(&self, req: GenerateRequest) -> Result<Generation, InferError> {
        if self.shared.shutdown.load(Ordering::SeqCst) {
            return Err(InferError::ShutDown);
        }
        if req.prompt.is_empty() {
            return Err(InferError::EmptyPrompt);
        }
        let n_ctx = self.shared.config.n_ctx;
        if req.prompt.len() as u32 >= n_ctx {
            return Err(InferError::ContextFull {
                tokens: req.prompt.len(),
                n_ctx,
            });
        }
        if reverie_core::has_images(&req.prompt) {
            if !self.can_see() {
                return Err(InferError::Vision(
                    "the prompt holds an image but no multimodal projector is loaded; load the model with its mmproj file".into(),
                ));
            }
            if req.prompt.last().is_some_and(|&id| id < 0) {
                return Err(InferError::Vision(
                    "a prompt must end in text, not in an image".into(),
                ));
            }
        }
        let constraint = match req.constraint {
            Some(Constraint::JsonSchema(s)) => {
                Some(Constraint::Gbnf(crate::json_schema_to_gbnf(&s)?))
            }
            other => other,
        };
        let mut stop = req.stop;
        if !self.shared.model().info.has_chat_template {
            // ChatML stands in for the missing template, but this vocabulary
            // has no `<|im_end|>` token: the model can only write it as text.
            stop.push(CHATML_END.to_string());
        }
        let (tx, rx) = mpsc::channel();
        let control = Arc::new(JobControl::new(tx, stop.clone()));
        {
            let mut q = lock(&self.shared.queue);
            if q.len() >= self.shared.config.max_queued {
                return Err(InferError::Busy { queued: q.len() });
            }
            q.push(Job {
                channel: req.channel,
                prompt: req.prompt,
                sampling: req.sampling,
                constraint,
                ignore_eog: req.ignore_eog,
                stop,
                control: control.clone(),
            });
        }
        self.shared.cv.notify_all();
        Ok(Generation {
            rx,
            control,
            done: false,
        })
    }

    /// Loads `path` and moves serving onto it. Generations already running
    /// finish on the old model; queued and later ones use the new one. If
    /// the new file fails to load, the old model keeps serving.
    pub fn swap_model(&self, path: impl AsRef<Path>) -> Result<ModelInfo, InferError> {
        // A swapped-in checkpoint is a full model: the adapter does not carry over.
        // The projector follows the model; one that does not fit the new
        // model is set aside rather than failing the swap.
        let config = &self.shared.config;
        let model = Arc::new(LoadedModel::load(
            path.as_ref(),
            config.gpu_layers,
            None,
            config.mmproj.as_deref().map(|p| (p, config.threads)),
            true,
        )?);
        let fresh = self
            .shared
            .start_slots(&model, self.shared.config.slots.max(1))?;
        *self.shared.model.write().unwrap_or_else(|e| e.into_inner()) = model.clone();
        {
            let mut slots = lock(&self.shared.slots);
            for s in slots.iter() {
                retire(s);
            }
            let mut q = lock(&self.shared.queue);
            for s in slots.iter() {
                q.forget_slot(s.id);
            }
            *slots = fresh;
        }
        self.shared.cv.notify_all();
        tracing::info!(path = %model.info.path.display(), "model swapped");
        Ok(model.info.clone())
    }

    /// Gives back the memory the model holds until the next
    /// [`Engine::swap_model`] or [`Engine::resume`]: every worker finishes
    /// its generation and stops (its context and KV cache freed), and the
    /// weights, on the GPU and the CPU, are replaced by the vocabulary
    /// alone. Meanwhile tokenizing and rendering work, requests wait in the
    /// queue and are served after the resume, and scoring fails with
    /// [`InferError::Parked`]. For the night, whose trainer needs the
    /// memory the day engine holds.
    pub fn park(&self) -> Result<(), InferError> {
        let vocabulary = Arc::new(self.shared.model().vocabulary()?);
        let retired: Vec<Arc<Slot>> = {
            let mut slots = lock(&self.shared.slots);
            let mut q = lock(&self.shared.queue);
            for s in slots.iter() {
                retire(s);
                q.forget_slot(s.id);
            }
            slots.drain(..).collect()
        };
        *self.shared.model.write().unwrap_or_else(|e| e.into_inner()) = vocabulary;
        self.shared.cv.notify_all();
        // Each worker holds the model: the memory is free once they end.
        for s in &retired {
            if let Some(h) = lock(&s.handle).take() {
                let _ = h.join();
            }
        }
        tracing::info!("model parked");
        Ok(())
    }

    /// Whether the engine is parked ([`Engine::park`]).
    pub fn parked(&self) -> bool {
        !self.shared.model().weights
    }

    /// Loads the parked model again and serves what waited; a no-op when
    /// the engine is not parked.
    pub fn resume(&self) -> Result<(), InferError> {
        if self.parked() {
            self.swap_model(self.model_path())?;
        }
        Ok(())
    }

    /// Stops every generation and worker; queued requests fail.
    pub fn shutdown(&self) {
        let shared = &self.shared;
        if shared.shutdown.swap(true, Ordering::SeqCst) {
            return;
        }
        for job in lock(&shared.queue).drain() {
            job.control
                .finish(GenEvent::Failed("the engine is shutting down".into()));
        }
        let slots: Vec<_> = lock(&shared.slots).drain(..).collect();
        for s in &slots {
            if let Some((_, c)) = lock(&s.current).as_ref() {
                c.request_stop(StopReason::Cancelled);
            }
        }
        shared.cv.notify_all();
        for s in &slots {
            if s.abandoned.load(Ordering::SeqCst) {
                continue;
            }
            if let Some(h) = lock(&s.handle).take() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn_watchdog(shared: Weak<Shared>) {
    std::thread::Builder::new()
        .name("reverie-watchdog".into())
        .spawn(move || loop {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            if shared.shutdown.load(Ordering::SeqCst) {
                return;
            }
            let timeout = shared.config.stall_timeout;
            watch(&shared, timeout);
            drop(shared);
            std::thread::sleep((timeout / 4).min(Duration::from_millis(250)));
        })
        .expect("spawn watchdog");
}

/// One watchdog pass: ask stalled generations to stop; give up on workers
/// that ignore the request and start replacements.
fn watch(shared: &Arc<Shared>, timeout: Duration) {
    let now = shared.epoch.elapsed().as_millis() as u64;
    let slots: Vec<_> = lock(&shared.slots).clone();
    for slot in slots {
        let current = lock(&slot.current).clone();
        let Some((channel, control)) = current else {
            continue;
        };
        if control.is_finished() {
            continue;
        }
        let idle = now.saturating_sub(slot.progress_ms.load(Ordering::SeqCst));
        if idle > timeout.as_millis() as u64 {
            control.request_stop(StopReason::Stalled);
        }
        if idle > 2 * timeout.as_millis() as u64 {
            tracing::warn!(
                slot = slot.id,
                channel = channel.0,
                "worker stalled; replacing it"
            );
            slot.abandoned.store(true, Ordering::SeqCst);
            lock(&shared.slots).retain(|s| s.id != slot.id);
            control.finish(GenEvent::Done {
                reason: StopReason::Stalled,
                usage: Usage::default(),
            });
            {
                let mut q = lock(&shared.queue);
                q.finish(channel);
                q.forget_slot(slot.id);
            }
            if !slot.retired.load(Ordering::SeqCst) {
                match shared.start_slots(&shared.model(), 1) {
                    Ok(fresh) => lock(&shared.slots).extend(fresh),
                    Err(e) => tracing::error!("could not replace a stalled worker: {e}"),
                }
            }
            shared.cv.notify_all();
        }
    }
}
