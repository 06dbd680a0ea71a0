//! One channel's conversation with the model.

use reverie_core::{
    ChannelId, ChatEvent, MessageId, MessageRole, SamplingParams, StopReason, TokenRole, TokenSpan,
};
use reverie_infer::{
    ChatMessage, Constraint, Engine, GenEvent, GenerateRequest, InferError, Transcript,
};
use reverie_store::{Store, StoreError};

use crate::cancel::CancelFlag;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Infer(#[from] InferError),
    #[error("the message is empty; type something to send")]
    EmptyMessage,
}

/// What a finished turn produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub user_message: MessageId,
    pub reply_message: MessageId,
    pub reply: String,
    pub reason: StopReason,
    pub reply_tokens: usize,
    pub usage: reverie_infer::Usage,
}

pub struct ChannelSession<'a> {
    detector: fn(&str) -> bool,
    engine: &'a Engine,
    store: &'a Store,
    channel: ChannelId,
    system_prompt: String,
    transcript: Transcript,
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
        let mut messages = Vec::new();
        let mut tokens = TokenSpan::default();
        for m in store.messages(channel)? {
            tokens.append(&m.tokens);
            messages.push(ChatMessage::new(m.role, m.text));
        }
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
        })
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
        if self.transcript.messages.is_empty() && !self.system_prompt.is_empty() {
            let sys = ChatMessage::new(MessageRole::System, self.system_prompt.clone());
            let mut t = self.transcript.clone();
            let span = self.engine.append_messages(&mut t, &[sys])?;
            self.store
                .append_message(ch, MessageRole::System, &self.system_prompt, &span)?;
            self.transcript = t;
        }
        let mut t = self.transcript.clone();
        let span = self
            .engine
            .extend_transcript(&mut t, &[ChatMessage::new(MessageRole::User, text)])?;
        let user_message = self
            .store
            .append_message(ch, MessageRole::User, text, &span)?;
        self.transcript = t;

        let (mut reply_message, mut reply, mut finish, mut n) =
            self.reply(params, cancel, on_event, TokenSpan::default())?;
        // A turn that ends looking unfinished gets the question; a "no"
        // marks the ended reply for the night and the model goes on.
        if finish.0 == StopReason::EndOfTurn && (self.detector)(&reply) {
            let unintended = self.ask_if_done(reply_message)?;
            on_event(ChatEvent::StrayEnd {
                channel: ch,
                message: reply_message,
                unintended,
            });
            if unintended {
                let mut t = self.transcript.clone();
                // The resumed turn's scaffolding is stored with its reply.
                let scaffold = self.engine.extend_transcript(&mut t, &[])?;
                self.transcript = t;
                (reply_message, reply, finish, n) =
                    self.reply(params, cancel, on_event, scaffold)?;
            }
        }
        on_event(ChatEvent::TurnEnd {
            channel: ch,
            message: Some(reply_message),
            reason: finish.0,
        });
        Ok(TurnOutcome {
            user_message,
            reply_message,
            reply,
            reason: finish.0,
            reply_tokens: n,
            usage: finish.1,
        })
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
    ) -> Result<(MessageId, String, (StopReason, reverie_infer::Usage), usize), AgentError> {
        let ch = self.channel;
        let req = GenerateRequest::new(ch, self.transcript.tokens.ids.clone(), params.clone());
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
        cancel.reset();
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
        Ok((reply_message, reply, finish, completion.ids.len()))
    }
}
