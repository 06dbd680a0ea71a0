//! A channel's tools: which are offered, how the model writes calls, and
//! the limits of one turn.

use reverie_infer::Constraint;

use crate::toolcall::{Hermes, ToolCallFormat};

/// Calls in a row that repeat an earlier call of the turn to no effect
/// (same arguments, same result) that end the turn: the first is answered
/// with a reminder to use the result; a model that ignores it is looping, and would
/// otherwise spend the whole call budget on the same answer.
pub const DEFAULT_MAX_REPEATED_CALLS: usize = 2;

/// Tool calls one turn may make before it is stopped.
pub const DEFAULT_MAX_TOOL_CALLS: usize = 24;

/// Told to every agent with tools, after the base prompt.
pub(crate) const STANDING_INSTRUCTION: &str = "Answer directly when you can. Call a tool only when you need its result, and once you have it, answer.";

/// Tools every conversation is offered, when it has them.
pub const CORE_TOOLS: &[&str] = &[
    "calculator",
    "list_dir",
    "read_file",
    "write_file",
    "edit_file",
    "grep",
    "python",
];

/// Tools offered beyond the core set: those the conversation's first
/// message names, then those whose names and descriptions are closest to
/// it.
pub const DEFAULT_RELEVANT_TOOLS: usize = 3;

/// Which of its tools a conversation is told about. Every allowed tool
/// stays callable (the call grammar holds them all): one the model calls
/// without having been told of it is run and told of from then on.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOffer {
    /// Every allowed tool.
    All,
    /// The allowed ones of `core`, plus the `relevant` most related others.
    Selected { core: Vec<String>, relevant: usize },
}

impl Default for ToolOffer {
    fn default() -> Self {
        ToolOffer::Selected {
            core: CORE_TOOLS.iter().map(|s| s.to_string()).collect(),
            relevant: DEFAULT_RELEVANT_TOOLS,
        }
    }
}

/// Scores a question against each of some texts (`None`: cannot).
pub type Similarity<'a> = dyn Fn(&str, &[String]) -> Option<Vec<f32>> + 'a;

impl ToolOffer {
    /// Which of `all` (tool definitions) a conversation that opens with
    /// `question` is told about: the core ones in the core's order, then
    /// the chosen ones in `all`'s: those the question names first, then by
    /// `similarity`, which scores the question against each other tool's
    /// name and description (sentence embeddings); where it gives nothing,
    /// shared content words decide.
    pub fn select(
        &self,
        all: Vec<serde_json::Value>,
        question: &str,
        similarity: &Similarity<'_>,
    ) -> Vec<serde_json::Value> {
        let ToolOffer::Selected { core, relevant } = self else {
            return all;
        };
        let name = |d: &serde_json::Value| {
            d["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let others: Vec<(String, String)> = all
            .iter()
            .filter(|d| !core.contains(&name(d)))
            .map(|d| {
                let about = format!(
                    "{} {}",
                    name(d).replace('_', " "),
                    d["function"]["description"].as_str().unwrap_or_default()
                );
                (name(d), about)
            })
            .collect();
        let abouts: Vec<String> = others.iter().map(|o| o.1.clone()).collect();
        let mut scored: Vec<(f32, String)> = match similarity(question, &abouts) {
            Some(scores) if scores.len() == others.len() => others
                .iter()
                .zip(scores)
                .filter(|(_, s)| *s >= MIN_SIMILARITY)
                .map(|((n, _), s)| (s, n.clone()))
                .collect(),
            _ => others
                .iter()
                .map(|(n, about)| (shared_words(question, about) as f32, n.clone()))
                .filter(|(shared, _)| *shared > 0.0)
                .collect(),
        };
        // Most related first; ties keep the toolbox's order.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        // A tool the message names ("save this in your notes") comes before
        // any score: a long message can bury its one telling word.
        let asked = content_words(question);
        let named = others.iter().map(|(n, _)| n.clone()).filter(|n| {
            let words = content_words(&n.replace('_', " "));
            !words.is_empty() && words.is_subset(&asked)
        });
        let mut chosen: Vec<String> = named.collect();
        for (_, n) in scored {
            if !chosen.contains(&n) {
                chosen.push(n);
            }
        }
        chosen.truncate(*relevant);
        // The core in its own order (what a small model reaches for first
        // comes first), then the chosen ones.
        let mut offered: Vec<serde_json::Value> = core
            .iter()
            .filter_map(|c| all.iter().find(|d| &name(d) == c).cloned())
            .collect();
        offered.extend(all.into_iter().filter(|d| chosen.contains(&name(d))));
        offered
    }
}

/// The least cosine similarity between a question and a tool's name and
/// description for the tool to be offered (all-MiniLM-L6-v2: unrelated
/// sentences score about 0.1, related ones 0.3 and up).
const MIN_SIMILARITY: f32 = 0.25;

/// Words too common to say what a message is about.
const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "what", "about", "from", "your", "you", "are",
    "can", "how", "its", "all", "into", "then", "them", "when", "was", "has", "have", "not", "but",
    "one", "each", "per", "use",
];

/// Content words of `text`: lowercase, three letters or more, a plural's
/// `s` dropped.
fn content_words(text: &str) -> std::collections::HashSet<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2 && !STOP_WORDS.contains(w))
        .map(|w| match w.strip_suffix('s') {
            Some(stem) if stem.len() > 2 && !stem.ends_with('s') => stem.to_string(),
            _ => w.to_string(),
        })
        .collect()
}

/// How many content words `a` and `b` share.
fn shared_words(a: &str, b: &str) -> usize {
    content_words(a).intersection(&content_words(b)).count()
}

/// A channel's tools and how its model writes calls.
pub struct ToolSetup {
    pub toolbox: reverie_tools::Toolbox,
    pub format: Box<dyn ToolCallFormat>,
    pub max_calls: usize,
    /// Calls in a row repeating an earlier call to no effect that end the
    /// turn (`usize::MAX`: never).
    pub max_repeated_calls: usize,
    /// Only these tools are offered and run (all when `None`).
    pub allowed: Option<Vec<String>>,
    /// Which allowed tools a new conversation is told about.
    pub offer: ToolOffer,
    /// The constraint of the reply that follows a stopped turn (by default
    /// one that cannot hold a call); `None` ends the turn on the notice.
    pub wrap_up: Option<Constraint>,
}

impl ToolSetup {
    pub fn new(toolbox: reverie_tools::Toolbox) -> ToolSetup {
        ToolSetup {
            toolbox,
            format: Box::new(Hermes),
            max_calls: DEFAULT_MAX_TOOL_CALLS,
            max_repeated_calls: DEFAULT_MAX_REPEATED_CALLS,
            allowed: None,
            offer: ToolOffer::default(),
            wrap_up: Some(crate::wrap_up::no_tools()),
        }
    }

    pub(crate) fn allows(&self, name: &str) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|a| a.iter().any(|n| n == name))
    }

    /// Names of the tools this channel offers.
    pub(crate) fn offered(&self) -> Vec<String> {
        self.definitions()
            .iter()
            .filter_map(|d| d["function"]["name"].as_str().map(String::from))
            .collect()
    }

    /// Definitions of the tools a conversation that opens with `question`
    /// is told about, in the toolbox's order.
    pub fn select(&self, question: &str) -> Vec<serde_json::Value> {
        let toolbox = &self.toolbox;
        let similarity = |question: &str, abouts: &[String]| -> Option<Vec<f32>> {
            let mut texts = vec![question.to_string()];
            texts.extend_from_slice(abouts);
            match toolbox.embeddings(&texts) {
                Ok(Some(v)) => Some(
                    v[1..]
                        .iter()
                        .map(|t| reverie_embed::cosine(&v[0], t))
                        .collect(),
                ),
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!("choosing tools by shared words: {e}");
                    None
                }
            }
        };
        self.offer.select(self.definitions(), question, &similarity)
    }

    /// Definitions of the tools this channel offers.
    pub fn definitions(&self) -> Vec<serde_json::Value> {
        reverie_tools::definitions()
            .into_iter()
            .filter(|d| self.allows(d["function"]["name"].as_str().unwrap_or_default()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No similarity: the offer falls back on shared words.
    fn no_similarity(_: &str, _: &[String]) -> Option<Vec<f32>> {
        None
    }

    fn names(defs: &[serde_json::Value]) -> Vec<&str> {
        defs.iter()
            .map(|d| d["function"]["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn a_conversation_is_told_of_the_core_tools_and_those_its_question_is_about() {
        let all = reverie_tools::definitions();
        let offered = ToolOffer::default().select(
            all.clone(),
            "Read my notes about the garden",
            &no_similarity,
        );
        let got = names(&offered);
        for core in CORE_TOOLS {
            assert!(got.contains(core), "{core} missing from {got:?}");
        }
        assert!(got.contains(&"notes"), "{got:?}");
        assert!(
            got.len() <= CORE_TOOLS.len() + DEFAULT_RELEVANT_TOOLS,
            "{got:?}"
        );
        assert!(got.len() < all.len());
        // Nothing related: the core set alone.
        let plain =
            ToolOffer::default().select(all.clone(), "What is 17 multiplied by 3?", &no_similarity);
        assert_eq!(names(&plain).len(), CORE_TOOLS.len(), "{:?}", names(&plain));
        assert_eq!(
            ToolOffer::All
                .select(all.clone(), "x", &no_similarity)
                .len(),
            all.len()
        );
    }

    #[test]
    fn sentence_similarity_picks_the_tools_where_it_is_given() {
        let all = reverie_tools::definitions();
        let others: Vec<String> = all
            .iter()
            .map(|d| d["function"]["name"].as_str().unwrap().to_string())
            .filter(|n| !CORE_TOOLS.contains(&n.as_str()))
            .collect();
        // Scores that favour `git` and `health` (no word of the question is
        // in their descriptions) and leave the rest below the threshold.
        let scores = |_: &str, abouts: &[String]| -> Option<Vec<f32>> {
            assert_eq!(abouts.len(), others.len());
            Some(
                abouts
                    .iter()
                    .map(|a| match a.split(' ').next() {
                        Some("git") => 0.6,
                        Some("health") => 0.4,
                        _ => 0.1,
                    })
                    .collect(),
            )
        };
        let got = ToolOffer::default().select(all.clone(), "Keep a snapshot of my work", &scores);
        let got = names(&got);
        assert_eq!(&got[CORE_TOOLS.len()..], ["git", "health"], "{got:?}");
        // A tool the message names is offered whatever the scores.
        let long = "Please save this in your notes so you remember it: the room of Friday's \
                    meeting is thunder-3122; my locker code at the gym is velvet-7716.";
        let low = |_: &str, abouts: &[String]| Some(vec![0.1; abouts.len()]);
        let got = ToolOffer::default().select(all.clone(), long, &low);
        assert_eq!(&names(&got)[CORE_TOOLS.len()..], ["notes"]);
        // A scorer that cannot answer leaves the choice to shared words.
        let wrong = |_: &str, _: &[String]| Some(vec![1.0]);
        let words = ToolOffer::default().select(all, "Read my notes about the garden", &wrong);
        assert!(names(&words).contains(&"notes"));
    }
}
