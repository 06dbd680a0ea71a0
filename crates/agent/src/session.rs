//! One channel's conversation with the model.

use reverie_core::{
    live_start, ChannelId, ChatEvent, MessageId, MessageRole, SamplingParams, StopReason,
    TokenRole, TokenSpan,
};
use reverie_infer::{
    ChatMessage, Constraint, Engine, GenEvent, GenerateRequest, ImageRun, InferError, ToolCalling,
    ToolChoice, Transcript,
};
use reverie_store::{CallAttachment, Store};

use crate::cancel::CancelFlag;
use crate::error::AgentError;
use crate::guard::{
    result_hint, TurnGuard, ALREADY_DONE_HINT, FAILED_AGAIN_HINT, REPEATED_AGAIN_HINT, REPEAT_HINT,
};
use crate::tool_setup::{ToolSetup, STANDING_INSTRUCTION};
use crate::toolcall::ParsedCall;

/// The paths of files attached to a message: `[attached: PATH]`.
fn attached_paths(text: &str) -> impl Iterator<Item = &str> {
    text.split("[attached: ")
        .skip(1)
        .filter_map(|rest| rest.split_once(']').map(|(p, _)| p.trim()))
}

/// Whether a tool message is the result of a call that repeated an earlier
/// call of its turn to no effect (same arguments, same result or error),
/// or a change that changed nothing.
pub fn repeats_an_earlier_call(tool_message: &str) -> bool {
    [
        REPEAT_HINT,
        REPEATED_AGAIN_HINT,
        FAILED_AGAIN_HINT,
        ALREADY_DONE_HINT,
    ]
    .iter()
    .any(|hint| tool_message.ends_with(hint))
}

/// The tools a reply that must look before it answers may call.
const LOOKING_TOOLS: &[&str] = &["grep", "glob", "list_dir", "tree", "read_file"];

/// One call's outcome as the loop sees it.
struct CallResult {
    call_id: String,
    name: String,
    /// Name, arguments and result: equal for a call repeated to no effect.
    signature: String,
    ok: bool,
    /// A changing call that changed nothing ([`reverie_tools::UNCHANGED`]).
    unchanged: bool,
    text: String,
    /// Images the result shows the model (multimodal models only).
    images: Vec<ImageRun>,
}

/// What a finished turn produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub user_message: MessageId,
    pub reply_message: MessageId,
    pub reply: String,
    pub reason: StopReason,
    /// Sampled tokens over every reply of the turn.
    pub reply_tokens: usize,
    pub usage: reverie_infer::Usage,
    pub tool_calls: usize,
}

/// One recorded assistant message.
struct Reply {
    message: MessageId,
    text: String,
    /// How the model's own format reads its calls, where it has one.
    calling: Option<ToolCalling>,
    /// Why it ended.
    reason: StopReason,
    usage: reverie_infer::Usage,
    /// Tokens sampled for it.
    sampled: usize,
}

pub struct ChannelSession<'a> {
    detector: fn(&str) -> bool,
    engine: &'a Engine,
    store: &'a Store,
    channel: ChannelId,
    system_prompt: String,
    transcript: Transcript,
    tools: Option<ToolSetup>,
    /// Definitions of the tools this conversation was told about.
    offered: Vec<serde_json::Value>,
    constraint: Option<Constraint>,
    /// Constraints of the next replies, one each, before `constraint`.
    script: std::collections::VecDeque<Constraint>,
    /// Tools taken out of this turn's grammar: a call of each failed
    /// twice the same way.
    blocked: Vec<String>,
    /// The next reply must be a call: of a tool that looks
    /// ([`LOOKING_TOOLS`]) when the last answer named a file that is
    /// nowhere, of any tool offered when it repeated an earlier turn's
    /// tool output.
    must_call: Option<MustCall>,
}

/// The tools a reply that must call one may choose from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MustCall {
    Look,
    Any,
}

impl<'a> ChannelSession<'a> {
    /// Opens (creating if needed) the channel `name`, restoring its
    /// transcript. `default_system_prompt` applies when the channel has none.
    pub fn open(
        engine: &'a Engine,
        store: &'a Store,
        name: &str,
        default_system_prompt: &str,
    ) -> Result<Self, AgentError> {
        let channel = store.ensure_channel(name)?;
        let info = store.channel(channel)?;
        let stored = store.messages(channel)?;
        let (messages, tokens) =
            crate::reasoning::visible_history(engine, &stored[live_start(&stored)..]);
        let transcript = engine.restore_transcript(messages, tokens);
        let system_prompt = if info.system_prompt.trim().is_empty() {
            default_system_prompt.trim().to_string()
        } else {
            info.system_prompt
        };
        Ok(ChannelSession {
            detector: crate::stray::looks_unfinished,
            engine,
            store,
            channel,
            system_prompt,
            transcript,
            tools: None,
            offered: Vec::new(),
            blocked: Vec::new(),
            must_call: None,
            constraint: None,
            script: Default::default(),
        })
    }

    /// Gives the agent its tools: their definitions join the system prompt
    /// (of a new conversation) and calls in replies are run.
    pub fn with_tools(mut self, tools: ToolSetup) -> Self {
        // A conversation already under way was told of them all, as far as
        // anyone now knows.
        self.offered = tools.definitions();
        // The image tools tell the model whether it sees what they load.
        tools.toolbox.services().set_vision(self.engine.can_see());
        self.tools = Some(tools);
        self.give_transcript_its_tools();
        self
    }

    /// Where the model's own template describes tools, the transcript
    /// carries the offered definitions and the template renders them.
    fn give_transcript_its_tools(&mut self) {
        if self.tools.is_some() && self.engine.renders_tools() {
            self.transcript.tools = self.offered.clone();
        }
    }

    /// Tells the conversation of one more tool.
    fn offer(&mut self, name: &str) {
        let Some(tools) = &self.tools else { return };
        let known = |d: &serde_json::Value| d["function"]["name"] == name;
        if self.offered.iter().any(known) {
            return;
        }
        if let Some(d) = tools.definitions().into_iter().find(known) {
            self.offered.push(d);
            self.give_transcript_its_tools();
        }
    }

    pub fn tools(&self) -> Option<&ToolSetup> {
        self.tools.as_ref()
    }

    /// Constrains every reply (a grammar or JSON schema), e.g. to drive a
    /// tool-calling protocol deterministically.
    pub fn set_reply_constraint(&mut self, constraint: Option<Constraint>) {
        self.constraint = constraint;
    }

    /// Constrains the next replies one by one, in order, before the
    /// constraint of [`Self::set_reply_constraint`]: a call, then a given
    /// answer, to drive one path of a turn deterministically. A stopped
    /// turn's last reply keeps its own grammar.
    pub fn script_replies(&mut self, constraints: Vec<Constraint>) {
        self.script = constraints.into();
    }

    /// The system prompt a new conversation starts with: the base prompt,
    /// and with tools the standing instruction, the agent's own section and
    /// (where the template does not render them itself) the definitions of
    /// the offered tools.
    pub fn full_system_prompt(&self) -> Result<String, AgentError> {
        let stored = self.store.channel(self.channel)?.agent_section;
        let section = reverie_tools::agent_section_text(&stored);
        if self.tools.is_none() {
            // Without tools the section holds only a compacted channel's
            // summary.
            return Ok(if section.is_empty() {
                self.system_prompt.clone()
            } else {
                format!("{}\n\n{section}", self.system_prompt.trim())
                    .trim()
                    .to_string()
            });
        }
        let mut prompt = format!(
            "{}

{STANDING_INSTRUCTION}",
            self.system_prompt.trim()
        );
        if !section.is_empty() {
            prompt.push_str(&format!(
                "\n\n# Your own notes (edit them with update_sys)\n{section}"
            ));
        }
        if self.engine.renders_tools() {
            // The template adds the definitions itself.
            return Ok(prompt);
        }
        Ok(self.engine.system_prompt_with_tools(&prompt, &self.offered))
    }

    /// Replaces the unfinished-turn detector.
    pub fn set_detector(&mut self, detector: fn(&str) -> bool) {
        self.detector = detector;
    }

    pub fn channel(&self) -> ChannelId {
        self.channel
    }

    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    /// Sends `text`, streams the reply through `on_event`, records both.
    pub fn send(
        &mut self,
        text: &str,
        params: &SamplingParams,
        cancel: &CancelFlag,
        on_event: &mut dyn FnMut(ChatEvent),
    ) -> Result<TurnOutcome, AgentError> {
        if text.trim().is_empty() {
            return Err(AgentError::EmptyMessage);
        }
        let ch = self.channel;
        cancel.reset();
        let n_ctx = self.engine.config().n_ctx as usize;
        let new_tokens = self.engine.tokenize(text, false).len();
        if !self.transcript.messages.is_empty()
            && crate::compact::would_overflow(&self.transcript, new_tokens, n_ctx)
        {
            self.compact(on_event)?;
        }
        if self.transcript.messages.is_empty() {
            if let Some(tools) = &self.tools {
                self.offered = tools.select(text);
                self.give_transcript_its_tools();
            }
            let system = self.full_system_prompt()?;
            if !system.is_empty() {
                let sys = ChatMessage::new(MessageRole::System, system.clone());
                let mut t = self.transcript.clone();
                let span = self.engine.append_messages(&mut t, &[sys])?;
                self.store
                    .append_message(ch, MessageRole::System, &system, &span)?;
                self.transcript = t;
            }
        }
        // Earlier replies' reasoning is not carried into this turn.
        let reasoned = self.transcript.messages.iter().any(|m| {
            m.role == MessageRole::Assistant && crate::reasoning::strip_text(&m.content).is_some()
        });
        if reasoned {
            let stored = self.store.messages(ch)?;
            let (messages, tokens) =
                crate::reasoning::visible_history(self.engine, &stored[live_start(&stored)..]);
            self.transcript = self.engine.restore_transcript(messages, tokens);
            self.give_transcript_its_tools();
        }
        let mut t = self.transcript.clone();
        let mut user = ChatMessage::new(MessageRole::User, text);
        user.images = self.attached_images(text);
        let span = self.engine.extend_transcript(&mut t, &[user])?;
        let user_message = self
            .store
            .append_message(ch, MessageRole::User, text, &span)?;
        self.transcript = t;

        let mut prefix = TokenSpan::default();
        let mut calls_made = 0;
        let mut sampled = 0;
        let max_repeats = self.tools.as_ref().map_or(0, |t| t.max_repeated_calls);
        let mut guard = TurnGuard::new(max_repeats);
        self.blocked.clear();
        let mut last: Reply;
        // A turn checks once whether an answer should have looked first
        // (it copied an earlier output, or named a file that is nowhere).
        let mut looked_once = false;
        // This turn's tool results, as the model read them.
        let mut read: Vec<String> = Vec::new();
        loop {
            last = self.reply(params, cancel, on_event, std::mem::take(&mut prefix))?;
            self.must_call = None;
            sampled += last.sampled;
            let calls = match (&self.tools, &last.calling) {
                (Some(_), Some(calling)) => {
                    crate::toolcall::calls_in_reply(&calling.parser, &last.text)
                }
                (Some(t), None) => t.format.parse(&last.text),
                (None, _) => Vec::new(),
            };
            if calls.is_empty() {
                // An answer that repeats an earlier turn's tool output,
                // in a turn that has called nothing, gets one look.
                let repeated = !looked_once
                    && last.reason == StopReason::EndOfTurn
                    && calls_made == 0
                    && self.can_call()
                    && crate::copied::repeats_hint(&last.text, self.tool_messages());
                if repeated {
                    looked_once = true;
                    self.notify(crate::copied::LOOK_NOTICE.to_string(), on_event)?;
                    self.must_call = Some(MustCall::Any);
                    let mut t = self.transcript.clone();
                    prefix = self.engine.extend_transcript(&mut t, &[])?;
                    self.transcript = t;
                    continue;
                }
                // An answer naming a file that is nowhere gets one look.
                let missing = if looked_once || last.reason != StopReason::EndOfTurn {
                    Vec::new()
                } else {
                    self.missing_files(text, &last.text)
                };
                looked_once = true;
                if missing.is_empty() {
                    break;
                }
                let notice = self.unseen_files_notice(&missing);
                self.notify(notice, on_event)?;
                // Told only that the file was not there, the default
                // model gave the same answer again (4 of 4 simulated files
                // tasks), or copied the notice: the next reply looks.
                self.must_call = Some(MustCall::Look);
                let mut t = self.transcript.clone();
                prefix = self.engine.extend_transcript(&mut t, &[])?;
                self.transcript = t;
                continue;
            }
            let stopped =
                last.reason != StopReason::EndOfTurn && last.reason != StopReason::MaxTokens;
            let results = self.run_calls(
                last.message,
                calls,
                cancel,
                on_event,
                &mut calls_made,
                stopped,
            )?;
            let mut t = self.transcript.clone();
            for CallResult {
                call_id,
                name,
                mut text,
                ok,
                unchanged,
                signature,
                images,
            } in results
            {
                let hint = if unchanged {
                    Some(guard.record_unchanged())
                } else {
                    guard.record(&signature, ok)
                };
                if let Some(hint) = hint {
                    // Recorded as data for the night; the reminder is for the model.
                    self.store.mark_repeated_call(last.message, &call_id)?;
                    text = format!("{text}\n\n{hint}");
                    // The default model repeats a failing call, or a change
                    // already made, whatever it is told; its grammar no
                    // longer lets it this turn.
                    for tool in crate::guard::blocked_by(&name, hint) {
                        if !self.blocked.contains(&tool) {
                            self.blocked.push(tool);
                        }
                    }
                }
                let mut msg = ChatMessage::new(MessageRole::Tool, text.clone());
                msg.images = images;
                let span = self.engine.append_messages(&mut t, &[msg])?;
                self.store
                    .append_message(ch, MessageRole::Tool, &text, &span)?;
                read.push(text);
            }
            self.transcript = t;
            if cancel.is_cancelled() || stopped {
                if cancel.is_cancelled() {
                    last.reason = StopReason::Cancelled;
                }
                break;
            }
            let (max, wrap_up) = self
                .tools
                .as_ref()
                .map_or((0, None), |t| (t.max_calls, t.wrap_up.clone()));
            let then = if wrap_up.is_some() {
                crate::wrap_up::answer_now(text)
            } else {
                "Ask to continue if there is more to do.".to_string()
            };
            if let Some(cause) = guard.stop(calls_made, max) {
                let notice = cause.notice(&then);
                self.notify(notice, on_event)?;
                if let Some(constraint) = wrap_up {
                    last = self.wrap_up(constraint, params, cancel, on_event)?;
                    sampled += last.sampled;
                }
                last.reason = if cancel.is_cancelled() {
                    StopReason::Cancelled
                } else {
                    StopReason::ToolLimit
                };
                break;
            }
            // The next reply's scaffolding (the assistant prompt) is stored with it.
            let mut t = self.transcript.clone();
            prefix = self.engine.extend_transcript(&mut t, &[])?;
            self.transcript = t;
        }
        // A reply that hands back the tool's output gets one more, in words.
        let wrap_up = self.tools.as_ref().and_then(|t| t.wrap_up.clone());
        // So does the answer a stopped turn ends on (after a stop, the
        // default model answered a request to save two codes with the
        // notes listing it had asked for again and again).
        let stopped_by_guard = last.reason == StopReason::ToolLimit;
        let copied = (last.reason == StopReason::EndOfTurn || stopped_by_guard)
            && calls_made > 0
            && crate::copied::copies(&last.text, &read);
        if let Some(constraint) = wrap_up.filter(|_| copied) {
            let notice = format!(
                "{} {}",
                crate::copied::NOTICE,
                crate::wrap_up::answer_now(text)
            );
            self.notify(notice, on_event)?;
            last = self.wrap_up(constraint, params, cancel, on_event)?;
            sampled += last.sampled;
            if stopped_by_guard && last.reason == StopReason::EndOfTurn {
                last.reason = StopReason::ToolLimit;
            }
        }
        // A turn that ends looking unfinished gets the question; a "no"
        // marks the ended reply for the night and the model goes on.
        if last.reason == StopReason::EndOfTurn && calls_made == 0 && (self.detector)(&last.text) {
            let unintended = self.ask_if_done(last.message)?;
            on_event(ChatEvent::StrayEnd {
                channel: ch,
                message: last.message,
                unintended,
            });
            if unintended {
                let mut t = self.transcript.clone();
                // The resumed turn's scaffolding is stored with its reply.
                let scaffold = self.engine.extend_transcript(&mut t, &[])?;
                self.transcript = t;
                last = self.reply(params, cancel, on_event, scaffold)?;
                sampled += last.sampled;
            }
        }
        on_event(ChatEvent::TurnEnd {
            channel: ch,
            message: Some(last.message),
            reason: last.reason,
        });
        Ok(TurnOutcome {
            user_message,
            reply_message: last.message,
            reply: last.text,
            reason: last.reason,
            reply_tokens: sampled,
            usage: last.usage,
            tool_calls: calls_made,
        })
    }

    /// The images the person attached to `text` (`[attached: PATH]`, as
    /// the window writes it), for a model that can see. A file that is not
    /// an image is not shown; one that cannot be read is left to the
    /// model's own `load_image`.
    fn attached_images(&self, text: &str) -> Vec<ImageRun> {
        let Some(tools) = self.tools.as_ref().filter(|_| self.engine.can_see()) else {
            return Vec::new();
        };
        attached_paths(text)
            .filter_map(|p| {
                let hash = tools.toolbox.store_image(p).ok()?;
                self.image_run(&hash)
                    .map_err(|why| tracing::info!("attached image {p} not shown: {why}"))
                    .ok()
            })
            .collect()
    }

    /// The image stored as blob `hash`, numbered and measured for the model.
    fn image_run(&self, hash: &str) -> Result<ImageRun, String> {
        let hash = reverie_store::BlobHash(hash.to_string());
        let bytes = self.store.blob(&hash).map_err(|e| e.to_string())?;
        let positions = self
            .engine
            .image_positions(&bytes)
            .map_err(|e| e.to_string())?;
        let number = self.store.image_number(&hash).map_err(|e| e.to_string())?;
        Ok(ImageRun { number, positions })
    }

    /// Runs the calls of one reply, reporting each, and returns the result
    /// texts in order. Calls past the turn's limit, after a cancel, or in a
    /// reply that was cut off are answered without being run.
    fn run_calls(
        &mut self,
        reply_message: MessageId,
        calls: Vec<ParsedCall>,
        cancel: &CancelFlag,
        on_event: &mut dyn FnMut(ChatEvent),
        calls_made: &mut usize,
        stopped: bool,
    ) -> Result<Vec<CallResult>, AgentError> {
        let ch = self.channel;
        let tools = self
            .tools
            .as_ref()
            .expect("calls are parsed only with tools");
        let mut results = Vec::with_capacity(calls.len());
        let mut offer_later = Vec::new();
        for (i, call) in calls.into_iter().enumerate() {
            let call_id = format!("call_{}", i + 1);
            let mut images = Vec::new();
            // Whether the call changes something: its hint, and whether its
            // arguments make it another call (see `guard::signature`).
            let changing = match &call {
                ParsedCall::Call { name, arguments } => crate::guard::changes(name, arguments),
                _ => false,
            };
            let (name, arguments) = match &call {
                ParsedCall::Call { name, arguments } => (name.clone(), arguments.to_string()),
                ParsedCall::Malformed { raw, .. } => ("(unreadable)".to_string(), raw.clone()),
            };
            self.store
                .record_tool_call(reply_message, &call_id, &name, &arguments)?;
            on_event(ChatEvent::ToolCallStarted {
                channel: ch,
                call_id: call_id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
            });
            let (ok, text) = if cancel.is_cancelled() {
                (false, "not run: the user stopped the turn".to_string())
            } else if stopped {
                (
                    false,
                    "not run: the reply was cut off before the call was complete".to_string(),
                )
            } else if *calls_made >= tools.max_calls {
                (
                    false,
                    "not run: the turn reached its limit of tool calls".to_string(),
                )
            } else {
                *calls_made += 1;
                match call {
                    ParsedCall::Call { name, .. } if !tools.allows(&name) => (
                        false,
                        // The names it may use, so a misremembered one
                        // (`calculate` for `calculator`) can be corrected.
                        format!(
                            "error: the tool `{name}` is not available in this channel. Available tools: {}",
                            tools.offered().join(", ")
                        ),
                    ),
                    ParsedCall::Call { name, arguments } => {
                        offer_later.push(name.clone());
                        let stop = tools.toolbox.stop_handle();
                        cancel.arm(Box::new(move || {
                            stop.store(true, std::sync::atomic::Ordering::SeqCst)
                        }));
                        let result = tools.toolbox.call(&name, &arguments);
                        cancel.disarm();
                        match result {
                            Ok(out) => {
                                let mut text = out.text;
                                let shown: Vec<CallAttachment> = out
                                    .attachments
                                    .iter()
                                    .map(|a| CallAttachment {
                                        blob: a.blob.clone(),
                                        name: a.name.clone(),
                                        image: a.is_image,
                                    })
                                    .collect();
                                if !shown.is_empty() {
                                    self.store
                                        .set_call_attachments(reply_message, &call_id, &shown)?;
                                }
                                for a in out.attachments {
                                    if a.is_image && self.engine.can_see() {
                                        match self.image_run(&a.blob) {
                                            Ok(run) => images.push(run),
                                            Err(why) => text.push_str(&format!(
                                                " (The image could not be shown to you: {why}.)"
                                            )),
                                        }
                                    }
                                    on_event(ChatEvent::Attachment {
                                        channel: ch,
                                        blob: a.blob,
                                        name: a.name,
                                        image: a.is_image,
                                    });
                                }
                                match result_hint(&name, changing, &text) {
                                    Some(hint) => (true, format!("{text}\n\n{hint}")),
                                    None => (true, text),
                                }
                            }
                            Err(e) => (false, format!("error: {e}")),
                        }
                    }
                    ParsedCall::Malformed { error, .. } => (
                        false,
                        format!(
                            "error: your tool call could not be read: {error}. Write each call as <tool_call>{{\"name\": \"tool_name\", \"arguments\": {{...}}}}</tool_call>"
                        ),
                    ),
                }
            };
            self.store
                .finish_tool_call(reply_message, &call_id, ok, &text)?;
            on_event(ChatEvent::ToolCallFinished {
                channel: ch,
                call_id: call_id.clone(),
                ok,
                result: text.clone(),
            });
            results.push(CallResult {
                call_id,
                name: name.clone(),
                signature: crate::guard::signature(&name, &arguments, !changing && ok, &text),
                ok,
                unchanged: changing && ok && text.starts_with(reverie_tools::UNCHANGED),
                text,
                images,
            });
        }
        for name in offer_later {
            self.offer(&name);
        }
        Ok(results)
    }

    /// The last reply of a stopped turn, under `constraint` instead of the
    /// session's own.
    fn wrap_up(
        &mut self,
        constraint: Constraint,
        params: &SamplingParams,
        cancel: &CancelFlag,
        on_event: &mut dyn FnMut(ChatEvent),
    ) -> Result<Reply, AgentError> {
        let mut t = self.transcript.clone();
        let scaffold = self.engine.extend_transcript(&mut t, &[])?;
        self.transcript = t;
        let own = self.constraint.replace(constraint);
        let script = std::mem::take(&mut self.script);
        let out = self.reply(params, cancel, on_event, scaffold);
        (self.constraint, self.script) = (own, script);
        out
    }

    /// Summarizes the conversation into the agent's section and starts the
    /// live context again ([`crate::compact`]); the next message opens it
    /// with a new system prompt.
    fn compact(&mut self, on_event: &mut dyn FnMut(ChatEvent)) -> Result<(), AgentError> {
        let ch = self.channel;
        let summary = crate::compact::summarize(self.engine, ch, &self.transcript)
            .unwrap_or_else(|| crate::compact::plain_summary(&self.transcript));
        let budget = crate::compact::summary_budget(self.engine.config().n_ctx as usize);
        let summary = crate::compact::cut_to_tokens(self.engine, &summary, budget);
        let stored = self.store.channel(ch)?.agent_section;
        self.store
            .set_agent_section(ch, &reverie_tools::section_with_summary(&stored, &summary))?;
        self.transcript = crate::compact::fresh(self.engine);
        on_event(ChatEvent::Notice {
            channel: ch,
            text: "This channel neared the end of the model's context: a summary of it is now \
                   in the system prompt and older turns left the model's view (the record keeps them)."
                .into(),
        });
        Ok(())
    }

    /// Records a harness notice the model will see ([`Self::record_notice`])
    /// and tells the caller.
    fn notify(
        &mut self,
        text: String,
        on_event: &mut dyn FnMut(ChatEvent),
    ) -> Result<(), AgentError> {
        self.record_notice(&text)?;
        on_event(ChatEvent::Notice {
            channel: self.channel,
            text,
        });
        Ok(())
    }

    /// Records a harness notice the model will see, as `warning` tokens.
    fn record_notice(&mut self, text: &str) -> Result<(), AgentError> {
        let mut t = self.transcript.clone();
        let msg = ChatMessage::new(MessageRole::User, text);
        let mut span = self.engine.append_messages(&mut t, &[msg])?;
        for r in span.roles.iter_mut() {
            *r = TokenRole::Warning;
        }
        self.store
            .append_message(self.channel, MessageRole::User, text, &span)?;
        self.transcript = t;
        Ok(())
    }

    /// Asks "did you mean to end your turn?" (harness text: `warning`
    /// tokens) and records the grammar-constrained answer.
    fn ask_if_done(&mut self, ended: MessageId) -> Result<bool, AgentError> {
        let ch = self.channel;
        let mut t = self.transcript.clone();
        let question = ChatMessage::new(MessageRole::User, crate::stray::QUESTION);
        let mut span = self.engine.extend_transcript(&mut t, &[question])?;
        for r in span.roles.iter_mut() {
            *r = TokenRole::Warning;
        }
        self.store
            .append_message(ch, MessageRole::User, crate::stray::QUESTION, &span)?;
        self.transcript = t;
        let grammar = Constraint::Gbnf(crate::stray::ANSWER_GRAMMAR.into());
        let req = GenerateRequest::new(
            ch,
            self.transcript.tokens.ids.clone(),
            SamplingParams::greedy(4),
        )
        .with_constraint(grammar);
        let answer = self.engine.generate(req)?.complete()?;
        let span = self.engine.record_reply(&mut self.transcript, &answer);
        self.store
            .append_message(ch, MessageRole::Assistant, &answer.text, &span)?;
        let unintended = answer.text.trim() == "no";
        self.store.record_stray_end(ended, unintended)?;
        Ok(unintended)
    }

    /// Generates, streams and records one assistant message. `prefix` holds
    /// template tokens fed since the last recorded message; they are stored
    /// at the start of this one.
    fn reply(
        &mut self,
        params: &SamplingParams,
        cancel: &CancelFlag,
        on_event: &mut dyn FnMut(ChatEvent),
        prefix: TokenSpan,
    ) -> Result<Reply, AgentError> {
        let ch = self.channel;
        let mut req = GenerateRequest::new(ch, self.transcript.tokens.ids.clone(), params.clone());
        let calling = self.tool_calling();
        if let Some(c) = self.script.pop_front() {
            req = req.with_constraint(c);
        } else if let Some(c) = &self.constraint {
            req = req.with_constraint(c.clone());
        } else if let Some(c) = calling.as_ref().and_then(|c| c.constraint.clone()) {
            req = req.with_constraint(c);
        } else if self.every_tool_blocked() {
            // The reply is an answer in words.
            req = req.with_constraint(crate::wrap_up::no_tools());
        }
        if let Some(c) = &calling {
            req.stop.extend(c.stops.iter().cloned());
        }
        let mut generation = match self.engine.generate(req) {
            Ok(g) => g,
            Err(e) => {
                on_event(ChatEvent::Error {
                    channel: ch,
                    message: e.to_string(),
                });
                return Err(e.into());
            }
        };
        cancel.arm(Box::new(generation.canceller()));
        let mut ids = Vec::new();
        let mut logprobs = Vec::new();
        let mut reply = String::new();
        let mut finish = (StopReason::Cancelled, reverie_infer::Usage::default());
        let mut failure = None;
        for ev in generation.by_ref() {
            match ev {
                GenEvent::Token { id, piece, logprob } => {
                    ids.push(id);
                    logprobs.push(logprob);
                    reply.push_str(&piece);
                    on_event(ChatEvent::Token {
                        channel: ch,
                        id,
                        piece,
                        logprob,
                    });
                }
                GenEvent::Done { reason, usage } => finish = (reason, usage),
                GenEvent::Failed(msg) => failure = Some(msg),
            }
        }
        cancel.disarm();
        let reply = generation.strip_stop(&reply).to_string();
        // Whatever was generated is recorded, even when the turn failed.
        let completion = reverie_infer::Completion {
            ids,
            logprobs,
            text: reply.clone(),
            reason: finish.0,
            usage: finish.1.clone(),
        };
        let generated = self.engine.record_reply(&mut self.transcript, &completion);
        let mut span = prefix;
        span.append(&generated);
        let reply_message = self
            .store
            .append_message(ch, MessageRole::Assistant, &reply, &span)?;
        if let Some(msg) = failure {
            on_event(ChatEvent::Error {
                channel: ch,
                message: msg.clone(),
            });
            return Err(InferError::Generation(msg).into());
        }
        Ok(Reply {
            message: reply_message,
            text: reply,
            calling,
            reason: finish.0,
            usage: finish.1,
            sampled: completion.ids.len(),
        })
    }
}

impl ChannelSession<'_> {
    /// The model's own tool-call format for the next reply: `None` without
    /// tools, or where the template does not describe tools or llama.cpp
    /// cannot read it (then Hermes calls are read by hand, unconstrained).
    /// Tools the last turn took out of its grammar after a call of each
    /// failed twice the same way, or changed what was already so (offered
    /// again from the next message).
    pub fn blocked_tools(&self) -> &[String] {
        &self.blocked
    }

    /// The files `reply` names that the workspace holds nowhere, where the
    /// model could have looked (grep or glob allowed and not blocked).
    fn missing_files(&self, request: &str, reply: &str) -> Vec<String> {
        let Some(tools) = &self.tools else {
            return Vec::new();
        };
        let can_look = LOOKING_TOOLS
            .iter()
            .any(|t| tools.allows(t) && !self.blocked.iter().any(|b| b == t));
        if !can_look {
            return Vec::new();
        }
        crate::unseen_files::missing_files(tools.toolbox.workspace(), request, reply)
    }

    /// Whether the next reply may call a tool at all.
    fn can_call(&self) -> bool {
        self.tools.is_some() && !self.every_tool_blocked()
    }

    /// The tool results of the live context, as the model read them.
    fn tool_messages(&self) -> impl Iterator<Item = &str> + Clone {
        self.transcript
            .messages
            .iter()
            .filter(|m| m.role == MessageRole::Tool)
            .map(|m| m.content.as_str())
    }

    fn unseen_files_notice(&self, missing: &[String]) -> String {
        let tools = self
            .tools
            .as_ref()
            .expect("files are missed only with tools");
        crate::unseen_files::notice(tools.toolbox.workspace(), missing)
    }

    /// Whether this turn has taken every allowed tool out of the grammar.
    fn every_tool_blocked(&self) -> bool {
        !self.blocked.is_empty()
            && self.tools.as_ref().is_some_and(|t| {
                t.definitions().iter().all(|d| {
                    let name = d["function"]["name"].as_str().unwrap_or_default();
                    self.blocked.iter().any(|b| b == name)
                })
            })
    }

    fn tool_calling(&self) -> Option<ToolCalling> {
        let tools = self.tools.as_ref()?;
        if self.transcript.tools.is_empty() {
            return None;
        }
        let mut definitions = tools.definitions();
        definitions.retain(|d| {
            let name = d["function"]["name"].as_str().unwrap_or_default();
            !self.blocked.iter().any(|b| b == name)
                && (self.must_call != Some(MustCall::Look) || LOOKING_TOOLS.contains(&name))
        });
        if definitions.is_empty() {
            return None;
        }
        let calling = self
            .engine
            .tool_calling(&self.transcript, &definitions, ToolChoice::Auto)
            .map(|mut calling| {
                // Held to a call from the first token (read as a bare call).
                if self.must_call.is_some() {
                    calling.constraint = Some(Constraint::JsonSchema(reverie_infer::call_schema(
                        &definitions,
                    )));
                }
                calling
            });
        // A template that renders but cannot give a parser (rare) still
        // answers: its calls are read as Hermes, unconstrained.
        calling
            .inspect_err(|e| tracing::warn!("no tool-call grammar for this reply: {e}"))
            .ok()
    }
}

/// Regenerate: takes back the channel's last question and all that
/// followed it (the rows stay, retracted, for the night to learn from) and
/// returns the question, to be sent again. A session open on the channel
/// must be opened again afterwards.
pub fn take_back_last_question(store: &Store, channel: ChannelId) -> Result<String, AgentError> {
    let msgs = store.messages(channel)?;
    let last_user = msgs
        .iter()
        .rev()
        .find(|m| m.role == MessageRole::User)
        .ok_or(AgentError::NothingToAnswerAgain)?;
    store.retract_from(channel, last_user.id)?;
    Ok(last_user.text.clone())
}
