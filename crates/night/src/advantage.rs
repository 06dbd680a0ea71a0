//! Advantage = reward − predicted reward, with the turn delta folded into
//! the reward of solved sub-tasks only (fewer turns is better only when the
//! task succeeded).

pub fn advantage(
    reward: f32,
    turns: u32,
    predicted_reward: f32,
    predicted_turns: u32,
    success: f32,
    turn_weight: f32,
) -> f32 {
    let mut r = reward;
    if reward >= success {
        let pt = predicted_turns.max(1) as f32;
        r += turn_weight * (pt - turns as f32) / pt;
    }
    r - predicted_reward
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_count_only_for_solved_tasks() {
        // solved faster than expected: bonus
        assert!((advantage(0.9, 2, 0.5, 4, 0.5, 0.1) - (0.4 + 0.05)).abs() < 1e-6);
        // failed quickly: no bonus for speed
        assert!((advantage(0.2, 1, 0.5, 4, 0.5, 0.1) - (-0.3)).abs() < 1e-6);
        // solved but slower than expected: a small penalty
        assert!(advantage(0.9, 8, 0.9, 4, 0.5, 0.1) < 0.0);
    }
}
