//! Token ids exactly as the model saw or produced them, each with a role.

use serde::{Deserialize, Serialize};

use crate::message::ParseRoleError;

/// What a token is, for training: which loss (if any) applies to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum TokenRole {
    /// System prompt and chat-template scaffolding: conditioning only.
    Context,
    /// Tokens the model sampled: the policy loss applies.
    Action,
    /// Tool and environment output: the world-model (ECHO) loss applies.
    Env,
    /// The user's own text: a small imitation loss at most.
    User,
    /// Harness boilerplate the model should neither imitate nor predict.
    Warning,
}

impl TokenRole {
    pub const ALL: [TokenRole; 5] = [
        TokenRole::Context,
        TokenRole::Action,
        TokenRole::Env,
        TokenRole::User,
        TokenRole::Warning,
    ];

    /// Stable one-byte code used by the store and export formats.
    pub fn code(self) -> u8 {
        match self {
            TokenRole::Context => 0,
            TokenRole::Action => 1,
            TokenRole::Env => 2,
            TokenRole::User => 3,
            TokenRole::Warning => 4,
        }
    }

    pub fn from_code(code: u8) -> Option<TokenRole> {
        TokenRole::ALL.get(code as usize).copied()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TokenRole::Context => "context",
            TokenRole::Action => "action",
            TokenRole::Env => "env",
            TokenRole::User => "user",
            TokenRole::Warning => "warning",
        }
    }
}

impl std::str::FromStr for TokenRole {
    type Err = ParseRoleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TokenRole::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| ParseRoleError::new("token role", s))
    }
}

/// The id every position of one image carries in a token sequence: the
/// negative of the image's number in the store (from 1). Text token ids are
/// never negative, so a sequence says where its images are, and which.
pub fn image_token(number: u32) -> i32 {
    assert!(
        number >= 1 && number <= i32::MAX as u32,
        "image numbers run from 1"
    );
    -(number as i32)
}

/// The store's number of the image at a position, or `None` for text.
pub fn image_number(id: i32) -> Option<u32> {
    (id < 0).then(|| id.unsigned_abs())
}

/// Whether any position of `ids` is an image.
pub fn has_images(ids: &[i32]) -> bool {
    ids.iter().any(|&id| id < 0)
}

/// A run of tokens with one role and one optional sampler log-prob per token.
///
/// The three vectors always have the same length. Log-probs exist only for
/// tokens the model sampled (`Action`); other roles carry `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct TokenSpan {
    pub ids: Vec<i32>,
    pub roles: Vec<TokenRole>,
    pub logprobs: Vec<Option<f32>>,
}

impl TokenSpan {
    pub fn push(&mut self, id: i32, role: TokenRole, logprob: Option<f32>) {
        self.ids.push(id);
        self.roles.push(role);
        self.logprobs.push(logprob);
    }

    /// Appends `ids`, all with the same role and no log-prob.
    pub fn extend_role(&mut self, ids: &[i32], role: TokenRole) {
        for &id in ids {
            self.push(id, role, None);
        }
    }

    pub fn append(&mut self, other: &TokenSpan) {
        self.ids.extend_from_slice(&other.ids);
        self.roles.extend_from_slice(&other.roles);
        self.logprobs.extend_from_slice(&other.logprobs);
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn count(&self, role: TokenRole) -> usize {
        self.roles.iter().filter(|r| **r == role).count()
    }

    /// True when the three columns have equal length (the store checks this
    /// before writing).
    pub fn is_consistent(&self) -> bool {
        self.ids.len() == self.roles.len() && self.ids.len() == self.logprobs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_codes_round_trip() {
        for role in TokenRole::ALL {
            assert_eq!(TokenRole::from_code(role.code()), Some(role));
            assert_eq!(role.as_str().parse::<TokenRole>().unwrap(), role);
        }
        assert_eq!(TokenRole::from_code(9), None);
        let err = "actor".parse::<TokenRole>().unwrap_err().to_string();
        assert!(err.contains("actor") && err.contains("action"), "{err}");
    }

    #[test]
    fn image_positions_name_their_image() {
        assert_eq!(image_number(image_token(7)), Some(7));
        assert_eq!(image_number(12), None);
        assert!(has_images(&[5, image_token(1), 6]));
        assert!(!has_images(&[0, 5, 6]));
    }

    #[test]
    fn span_columns_stay_aligned() {
        let mut a = TokenSpan::default();
        a.extend_role(&[1, 2, 3], TokenRole::User);
        let mut b = TokenSpan::default();
        b.push(7, TokenRole::Action, Some(-1.5));
        a.append(&b);
        assert!(a.is_consistent());
        assert_eq!(a.ids, vec![1, 2, 3, 7]);
        assert_eq!(a.count(TokenRole::User), 3);
        assert_eq!(a.logprobs[3], Some(-1.5));
    }
}
