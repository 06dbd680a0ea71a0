//! A channel that nears the end of its context goes on instead of failing:
//! the model summarizes what is done and what is left, the summary goes into
//! the agent's own section of the system prompt, and the live context starts
//! again from a fresh system message. The store keeps every earlier message
//! and token; the channel's live context is what follows its last system
//! message ([`reverie_core::live_start`]), which is also what the night
//! trains on.

use reverie_core::{ChannelId, MessageRole, SamplingParams, TokenSpan};
use reverie_infer::{ChatMessage, Engine, GenerateRequest, Transcript};

/// What the model is asked to write when its context fills.
pub const REQUEST: &str = "This conversation is about to leave your view. \
Summarize it for yourself in a few short lines: what the user asked, what \
is done (with any results you will need), and what is left to do.";

/// Longest summary: an eighth of the context, at most this many tokens.
const SUMMARY_TOKENS: usize = 256;

/// The longest summary a context of `n_ctx` tokens keeps.
pub fn summary_budget(n_ctx: usize) -> usize {
    SUMMARY_TOKENS.min(n_ctx / 8)
}

/// `text` cut to at most `max` tokens of `engine`'s model.
pub fn cut_to_tokens(engine: &Engine, text: &str, max: usize) -> String {
    let ids = engine.tokenize(text, false);
    if ids.len() <= max {
        return text.to_string();
    }
    engine.detokenize(&ids[..max], false)
}

/// Whether a turn that adds a message of `new_tokens` to `transcript`
/// might not fit in `n_ctx` tokens: a quarter of the context stays free for
/// the turn's replies, tool results and notices.
pub fn would_overflow(transcript: &Transcript, new_tokens: usize, n_ctx: usize) -> bool {
    transcript.tokens.len() + new_tokens + n_ctx / 4 > n_ctx
}

/// The model's own summary of `transcript`, greedy; `None` when the
/// request would not fit or generation fails.
pub fn summarize(engine: &Engine, channel: ChannelId, transcript: &Transcript) -> Option<String> {
    let mut t = transcript.clone();
    engine
        .extend_transcript(&mut t, &[ChatMessage::new(MessageRole::User, REQUEST)])
        .ok()?;
    let budget = summary_budget(engine.config().n_ctx as usize);
    if t.tokens.len() + budget >= engine.config().n_ctx as usize {
        return None;
    }
    let req = GenerateRequest::new(channel, t.tokens.ids, SamplingParams::greedy(budget));
    let done = engine.generate(req).ok()?.complete().ok()?;
    let text = done.text.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// A summary without the model (its own did not fit or failed): the user's
/// latest requests, each cut short.
pub fn plain_summary(transcript: &Transcript) -> String {
    let asked: Vec<String> = transcript
        .messages
        .iter()
        .filter(|m| m.role == MessageRole::User)
        .rev()
        .take(5)
        .map(|m| {
            let one_line = m.content.split_whitespace().collect::<Vec<_>>().join(" ");
            let cut: String = one_line.chars().take(200).collect();
            format!("- the user asked: {cut}")
        })
        .collect();
    if asked.is_empty() {
        return "- (nothing the user asked is left in view)".into();
    }
    asked.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// An empty transcript for the fresh start.
pub fn fresh(engine: &Engine) -> Transcript {
    engine.restore_transcript(Vec::new(), TokenSpan::default())
}
