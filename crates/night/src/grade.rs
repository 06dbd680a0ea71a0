//! Grades read from the model's own distribution instead of its greedy
//! digit: a small model asked for a 0–10 grade answers only its likeliest
//! digit, so its grades come out all 0 or all 10; the mean under its logits
//! at the grade token keeps its uncertainty. The judge's rewards and the
//! value model's predictions are both read this way.

use reverie_core::{TokenRole, TokenSpan};
use reverie_infer::Engine;

/// Below this probability of a first "1", whether it would have gone on to
/// "10" hardly moves the mean, so it is not measured.
const ONE_WORTH_PROBING: f64 = 0.05;

/// The expected grade ÷ 10 at each `"reward":` value of a JSON answer, in
/// the order they appear. `answer` holds the prompt (context) and the
/// answer (action) tokens as [`crate::judge::ask_json`] returns them. An
/// entry is `None` where no digit token can be read there (tokenizers
/// without single-digit tokens). One pass over the answer reads every
/// grade; a grade whose digit was not "1" but might have been costs one
/// more pass, to learn whether that "1" would have been a "10".
pub fn expected_grades(engine: &Engine, answer: &TokenSpan) -> Vec<Option<f32>> {
    let Some(digits) = digit_tokens(engine) else {
        return Vec::new();
    };
    let at = reward_digits(engine, answer);
    let Some(&last) = at.last() else {
        return Vec::new();
    };
    // Logits after ids[..=i] give the distribution of ids[i + 1].
    let ids = &answer.ids[..=(last + 1).min(answer.ids.len() - 1)];
    let mut first: Vec<Option<Vec<f64>>> = vec![None; at.len()];
    let mut after_one: Vec<Option<Vec<f64>>> = vec![None; at.len()];
    let probs = |logits: &[f32]| -> Vec<f64> {
        digits
            .iter()
            .map(|&t| f64::from(reverie_infer::log_prob(logits, t)).exp())
            .collect()
    };
    let mut wanted: Vec<usize> = at.iter().map(|&k| k - 1).collect();
    wanted.extend(at.iter().filter(|&&k| ids[k] == digits[1]));
    let read = engine.visit_logits_at(ids, &wanted, &mut |i, logits| {
        for (j, &k) in at.iter().enumerate() {
            if i + 1 == k {
                first[j] = Some(probs(logits));
            } else if i == k && ids[k] == digits[1] {
                after_one[j] = Some(probs(logits));
            }
        }
    });
    if read.is_err() {
        return vec![None; at.len()];
    }
    at.iter()
        .enumerate()
        .map(|(j, &k)| {
            let first = first[j].as_ref()?;
            let after = match &after_one[j] {
                Some(a) => a.clone(),
                None if first[1] < ONE_WORTH_PROBING => vec![0.0; 10],
                None => after_one_probe(engine, &answer.ids[..k], digits[1], &probs)?,
            };
            grade_mean(first, &after)
        })
        .collect()
}

/// The digits' distribution after `prefix` and a "1".
fn after_one_probe(
    engine: &Engine,
    prefix: &[i32],
    one: i32,
    probs: &dyn Fn(&[f32]) -> Vec<f64>,
) -> Option<Vec<f64>> {
    let mut probe = prefix.to_vec();
    probe.push(one);
    let mut out = None;
    engine
        .visit_logits_at(&probe, &[probe.len() - 1], &mut |_, logits| {
            out = Some(probs(logits))
        })
        .ok()?;
    out
}

/// The tokens of "0" to "9", where each is one token.
fn digit_tokens(engine: &Engine) -> Option<Vec<i32>> {
    (0..10)
        .map(|d| match engine.tokenize(&d.to_string(), false)[..] {
            [t] => Some(t),
            _ => None,
        })
        .collect()
}

/// Indices of the first digit of every `"reward"` value among the answer's
/// tokens (the prompt's tokens are context, the answer's action).
fn reward_digits(engine: &Engine, answer: &TokenSpan) -> Vec<usize> {
    let Some(start) = answer.roles.iter().position(|r| *r == TokenRole::Action) else {
        return Vec::new();
    };
    (start + 1..answer.ids.len())
        .filter(|&k| {
            let before = engine.detokenize(&answer.ids[start..k], false);
            follows_reward_key(&before)
                && engine
                    .detokenize(&answer.ids[k..=k], false)
                    .starts_with(|c: char| c.is_ascii_digit())
        })
        .collect()
}

/// Whether `text` ends just after a `"reward":` key.
fn follows_reward_key(text: &str) -> bool {
    text.rsplit_once("\"reward\"").is_some_and(|(_, rest)| {
        rest.trim_start()
            .strip_prefix(':')
            .is_some_and(|v| v.trim().is_empty())
    })
}

/// Mean grade ÷ 10 from the probabilities of the first digit `first[d]`
/// and, after a "1", of each next digit `after_one[d]`: a "1" is a 10 when
/// a "0" follows (11 and above are out of range, so any other digit is
/// read as the end of the number).
pub fn grade_mean(first: &[f64], after_one: &[f64]) -> Option<f32> {
    let total: f64 = first.iter().sum();
    if total.is_nan() || total <= 0.0 || first.len() != 10 || after_one.len() != 10 {
        return None;
    }
    let ended: f64 = 1.0 - after_one[1..].iter().sum::<f64>();
    let ten = if ended > 0.0 {
        (after_one[0] / ended).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mean: f64 = first
        .iter()
        .enumerate()
        .map(|(d, p)| {
            if d == 1 {
                p * (10.0 * ten + (1.0 - ten))
            } else {
                p * d as f64
            }
        })
        .sum::<f64>()
        / total;
    Some((mean / 10.0) as f32)
}

#[cfg(test)]
mod tests {
    use super::{follows_reward_key, grade_mean};

    fn one_hot(d: usize) -> Vec<f64> {
        (0..10).map(|i| if i == d { 1.0 } else { 0.0 }).collect()
    }

    #[test]
    fn a_certain_grade_is_its_own_mean() {
        assert_eq!(grade_mean(&one_hot(7), &one_hot(3)), Some(0.7));
        assert_eq!(grade_mean(&one_hot(0), &one_hot(0)), Some(0.0));
    }

    #[test]
    fn a_one_is_a_ten_as_often_as_a_zero_follows_it() {
        // "1" then "0" for sure: 10.
        assert_eq!(grade_mean(&one_hot(1), &one_hot(0)), Some(1.0));
        // "1" then the number ends for sure: 1.
        let end = vec![0.0; 10];
        assert_eq!(grade_mean(&one_hot(1), &end), Some(0.1));
        // Half and half: 5.5.
        let mut half = vec![0.0; 10];
        half[0] = 0.5;
        assert!((grade_mean(&one_hot(1), &half).unwrap() - 0.55).abs() < 1e-6);
    }

    #[test]
    fn the_mean_weighs_each_grade_by_its_probability() {
        // Unnormalized mass on 2 and 8 only, as after other tokens took the rest.
        let mut first = vec![0.0; 10];
        first[2] = 0.1;
        first[8] = 0.3;
        assert!((grade_mean(&first, &one_hot(0)).unwrap() - 0.65).abs() < 1e-6);
        assert_eq!(grade_mean(&[0.0; 10], &one_hot(0)), None);
    }

    #[test]
    fn every_reward_key_is_found_whatever_its_spacing() {
        assert!(follows_reward_key(r#"{"subtasks": [{"reward": "#));
        assert!(follows_reward_key(r#"{"x": 1, "reward":"#));
        assert!(!follows_reward_key(r#"{"reward": 7, "reason": "#));
        assert!(!follows_reward_key(r#"{"rewarded": "#));
    }
}
