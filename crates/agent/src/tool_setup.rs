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

    /// Definitions of the tools this channel offers.
    pub fn definitions(&self) -> Vec<serde_json::Value> {
        reverie_tools::definitions()
            .into_iter()
            .filter(|d| self.allows(d["function"]["name"].as_str().unwrap_or_default()))
            .collect()
    }
}
