//! Reasoning (`<think>…</think>`) is for the turn that produced it: later
//! turns see earlier replies without it, as reasoning models' own chat
//! templates render them. The store keeps every reply whole (its reasoning
//! tokens are trained on); the history the model is fed is the store's
//! tokens with earlier replies' reasoning cut out, by the one function
//! below, so a reopened channel continues exactly as a live one.

use reverie_core::{Message, MessageRole, TokenSpan};
use reverie_infer::{ChatMessage, Engine};

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// `text` without its reasoning block and the whitespace after it.
pub fn strip_text(text: &str) -> Option<String> {
    let start = text.find(OPEN)?;
    let end = text[start..].find(CLOSE)? + start + CLOSE.len();
    Some(format!("{}{}", &text[..start], text[end..].trim_start()))
}

/// The token range of a reply's reasoning block (with the whitespace after
/// it), found from each token's text.
fn reasoning_tokens(engine: &Engine, ids: &[i32]) -> Option<std::ops::Range<usize>> {
    let pieces: Vec<String> = ids.iter().map(|&i| engine.detokenize(&[i], true)).collect();
    let text: String = pieces.concat();
    let open = text.find(OPEN)?;
    let close = text[open..].find(CLOSE)? + open + CLOSE.len();
    let (mut start, mut end, mut offset) = (None, None, 0);
    for (i, p) in pieces.iter().enumerate() {
        let next = offset + p.len();
        if start.is_none() && next > open {
            start = Some(i);
        }
        if end.is_none() && next >= close {
            end = Some(i + 1);
        }
        offset = next;
    }
    let (start, mut end) = (start?, end?);
    while end < pieces.len() && !pieces[end].is_empty() && pieces[end].trim().is_empty() {
        end += 1;
    }
    Some(start..end)
}

/// The messages and tokens the model is fed for `stored`: every reply's
/// reasoning removed (a new user message always follows).
pub fn visible_history(engine: &Engine, stored: &[Message]) -> (Vec<ChatMessage>, TokenSpan) {
    let mut messages = Vec::with_capacity(stored.len());
    let mut tokens = TokenSpan::default();
    for m in stored {
        let cut = (m.role == MessageRole::Assistant)
            .then(|| {
                Some((
                    strip_text(&m.text)?,
                    reasoning_tokens(engine, &m.tokens.ids)?,
                ))
            })
            .flatten();
        match cut {
            Some((text, range)) => {
                let mut kept = TokenSpan::default();
                for i in (0..m.tokens.len()).filter(|i| !range.contains(i)) {
                    kept.push(m.tokens.ids[i], m.tokens.roles[i], m.tokens.logprobs[i]);
                }
                tokens.append(&kept);
                messages.push(ChatMessage::new(m.role, text));
            }
            None => {
                tokens.append(&m.tokens);
                messages.push(ChatMessage::new(m.role, m.text.clone()));
            }
        }
    }
    (messages, tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_the_block_and_following_space() {
        assert_eq!(
            strip_text("<think>plan it</think>\n\nAnswer.").unwrap(),
            "Answer."
        );
        assert_eq!(strip_text("Hi <think>x</think> there").unwrap(), "Hi there");
        assert!(strip_text("no reasoning").is_none());
        assert!(strip_text("<think>never closed").is_none());
    }
}
