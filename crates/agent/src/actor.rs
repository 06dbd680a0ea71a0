//! One actor per channel: its own thread, queue, session and tools, so many
//! channels run at once on one model and a tool result can only ever reach
//! the call that asked for it.
//!
//! Actors are threads rather than async tasks because every step of a turn
//! blocks (llama.cpp decoding, tool processes); an async front end awaits a
//! [`PendingTurn`] on its blocking pool.

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use reverie_core::{ChatEvent, MessageId, MessageRole, SamplingParams};
use reverie_infer::{Constraint, Engine};
use reverie_store::Store;
use reverie_tools::{Services, Toolbox};

use crate::cancel::CancelFlag;
use crate::error::AgentError;
use crate::session::{ChannelSession, TurnOutcome};
use crate::tool_setup::{ToolSetup, DEFAULT_MAX_REPEATED_CALLS, DEFAULT_MAX_TOOL_CALLS};

/// How every channel's agent is set up.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The base system prompt of a channel without its own.
    pub system_prompt: String,
    /// Whether the agent has its tools.
    pub tools: bool,
    pub max_tool_calls: usize,
    /// Calls in a row that repeat an earlier call of the turn to no effect
    /// (same arguments, same result) and so end it as a loop
    /// (`usize::MAX`: never).
    pub max_repeated_calls: usize,
    /// Only these tools (all when `None`).
    pub allowed_tools: Option<Vec<String>>,
    /// A constraint on every reply (tests drive tool calls with it).
    pub reply_constraint: Option<Constraint>,
    /// Whether a turn stopped by the harness (tool-call limit, failing
    /// calls) ends on one more reply, without tools, that answers.
    pub answer_when_stopped: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            system_prompt: crate::DEFAULT_SYSTEM_PROMPT.trim().to_string(),
            tools: true,
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
            max_repeated_calls: DEFAULT_MAX_REPEATED_CALLS,
            allowed_tools: None,
            reply_constraint: None,
            answer_when_stopped: true,
        }
    }
}

type EventSink = Box<dyn FnMut(ChatEvent) + Send>;

struct Request {
    text: String,
    params: SamplingParams,
    on_event: EventSink,
    done: Sender<Result<TurnOutcome, AgentError>>,
}

struct Actor {
    queue: Sender<Request>,
    cancel: CancelFlag,
    thread: JoinHandle<()>,
}

/// A turn queued on a channel's actor.
pub struct PendingTurn {
    done: Receiver<Result<TurnOutcome, AgentError>>,
}

impl PendingTurn {
    /// Waits for the turn to end.
    pub fn wait(self) -> Result<TurnOutcome, AgentError> {
        self.done.recv().unwrap_or(Err(AgentError::ActorGone))
    }
}

/// The agents of all channels, on one engine and one store.
pub struct Agent {
    engine: Arc<Engine>,
    store: Arc<Store>,
    services: Arc<Services>,
    config: AgentConfig,
    actors: Mutex<HashMap<String, Actor>>,
}

impl Agent {
    pub fn new(
        engine: Arc<Engine>,
        store: Arc<Store>,
        services: Arc<Services>,
        config: AgentConfig,
    ) -> Agent {
        services.set_model_name(&engine.info().name);
        crate::show_images(&engine, &store);
        Agent {
            engine,
            store,
            services,
            config,
            actors: Mutex::new(HashMap::new()),
        }
    }

    /// Queues `text` on the channel `channel` (created if new); events of
    /// the turn go to `on_event` on the actor's thread.
    pub fn send(
        &self,
        channel: &str,
        text: &str,
        params: &SamplingParams,
        on_event: impl FnMut(ChatEvent) + Send + 'static,
    ) -> Result<PendingTurn, AgentError> {
        if text.trim().is_empty() {
            return Err(AgentError::EmptyMessage);
        }
        let (done, rx) = mpsc::channel();
        let req = Request {
            text: text.to_string(),
            params: params.clone(),
            on_event: Box::new(on_event),
            done,
        };
        let mut actors = self.actors.lock().unwrap_or_else(|e| e.into_inner());
        if !actors.contains_key(channel) {
            actors.insert(channel.to_string(), self.spawn(channel)?);
        }
        actors[channel]
            .queue
            .send(req)
            .map_err(|_| AgentError::ActorGone)?;
        Ok(PendingTurn { done: rx })
    }

    /// Stops the channel's current generation and tool calls.
    pub fn cancel(&self, channel: &str) {
        if let Some(a) = self
            .actors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(channel)
        {
            a.cancel.cancel();
        }
    }

    /// Stops the channel's actor (cancelling its turn) so that the next
    /// message reopens the channel from the store: for after the store's
    /// transcript was changed underneath it (a retracted tail).
    pub fn reopen(&self, channel: &str) {
        let actor = self
            .actors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(channel);
        if let Some(a) = actor {
            a.cancel.cancel();
            drop(a.queue);
            let _ = a.thread.join();
        }
    }

    /// Regenerate: takes back the channel's last question and all that
    /// followed it (the rows stay, retracted) and returns the question, to
    /// be sent again.
    pub fn take_back_last_question(&self, channel: &str) -> Result<String, AgentError> {
        let c = self.named(channel)?;
        self.reopen(channel);
        crate::session::take_back_last_question(&self.store, c.id)
    }

    /// Edit: takes back the person's `message` and all that followed it
    /// (the rows stay, retracted), so `new_text` can be sent in its place.
    pub fn take_back_for_edit(
        &self,
        channel: &str,
        message: MessageId,
        new_text: &str,
    ) -> Result<(), AgentError> {
        let c = self.named(channel)?;
        let msgs = self.store.messages(c.id)?;
        match msgs.iter().find(|m| m.id == message) {
            Some(m) if m.role == MessageRole::User => {}
            Some(_) => return Err(AgentError::NotYourMessage),
            None => {
                return Err(AgentError::NoSuchMessage {
                    message: message.0,
                    channel: channel.to_string(),
                })
            }
        }
        if new_text.trim().is_empty() {
            return Err(AgentError::EmptyMessage);
        }
        self.reopen(channel);
        self.store.retract_from(c.id, message)?;
        Ok(())
    }

    fn named(&self, channel: &str) -> Result<reverie_store::Channel, AgentError> {
        self.store
            .channel_by_name(channel)?
            .ok_or_else(|| reverie_store::StoreError::NoSuchChannel(channel.to_string()).into())
    }

    /// Stops every actor after its current turn is cancelled, and waits.
    pub fn shutdown(&self) {
        let actors: Vec<Actor> = self
            .actors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, a)| a)
            .collect();
        for a in &actors {
            a.cancel.cancel();
        }
        for a in actors {
            drop(a.queue);
            let _ = a.thread.join();
        }
        self.services.jobs().stop_all();
    }

    fn spawn(&self, channel: &str) -> Result<Actor, AgentError> {
        let channel_id = self.store.ensure_channel(channel)?;
        let toolbox = if self.config.tools {
            Some(Toolbox::open(
                self.store.clone(),
                channel_id,
                self.services.clone(),
            )?)
        } else {
            None
        };
        let (queue, requests) = mpsc::channel::<Request>();
        let cancel = CancelFlag::default();
        let (engine, store, config) =
            (self.engine.clone(), self.store.clone(), self.config.clone());
        let flag = cancel.clone();
        let name = channel.to_string();
        let thread = std::thread::Builder::new()
            .name(format!("agent-{name}"))
            .spawn(move || {
                let session = ChannelSession::open(&engine, &store, &name, &config.system_prompt);
                let mut session = match session {
                    Ok(s) => s,
                    Err(e) => {
                        let msg = e.to_string();
                        for r in requests {
                            let _ = r.done.send(Err(AgentError::Actor(msg.clone())));
                        }
                        return;
                    }
                };
                if let Some(toolbox) = toolbox {
                    let mut setup = ToolSetup::new(toolbox);
                    setup.max_calls = config.max_tool_calls;
                    setup.max_repeated_calls = config.max_repeated_calls;
                    setup.allowed = config.allowed_tools.clone();
                    if !config.answer_when_stopped {
                        setup.wrap_up = None;
                    }
                    session = session.with_tools(setup);
                }
                session.set_reply_constraint(config.reply_constraint.clone());
                for mut r in requests {
                    let out = session.send(&r.text, &r.params, &flag, &mut r.on_event);
                    let _ = r.done.send(out);
                }
            })
            .map_err(|e| AgentError::Actor(e.to_string()))?;
        Ok(Actor {
            queue,
            cancel,
            thread,
        })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shutdown();
    }
}
