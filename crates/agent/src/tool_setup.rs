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
pub(crate) const STANDING_INSTRUCTION: &str = "Keep scratch files in the `scratch/` folder of your workspace and delete them when you are done with them.";

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

/// Tools offered beyond the core set: the ones whose names and
/// descriptions share the most words with the conversation's first message.
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
        let all = self.definitions();
        let ToolOffer::Selected { core, relevant } = &self.offer else {
            return all;
        };
        if all.len() <= core.len() + relevant {
            return all;
        }
        let name = |d: &serde_json::Value| {
            d["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let mut others: Vec<(f64, String)> = all
            .iter()
            .filter(|d| !core.contains(&name(d)))
            .map(|d| {
                let about = format!(
                    "{} {}",
                    name(d).replace('_', " "),
                    d["function"]["description"].as_str().unwrap_or_default()
                );
                (reverie_embed::word_overlap(question, &about), name(d))
            })
            .filter(|(score, _)| *score > 0.0)
            .collect();
        // Most related first; ties keep the toolbox's order.
        others.sort_by(|a, b| b.0.total_cmp(&a.0));
        let chosen: Vec<String> = others.into_iter().take(*relevant).map(|(_, n)| n).collect();
        all.into_iter()
            .filter(|d| core.contains(&name(d)) || chosen.contains(&name(d)))
            .collect()
    }

    /// Definitions of the tools this channel offers.
    pub fn definitions(&self) -> Vec<serde_json::Value> {
        reverie_tools::definitions()
            .into_iter()
            .filter(|d| self.allows(d["function"]["name"].as_str().unwrap_or_default()))
            .collect()
    }
}
