//! The trainer's log-probs against llama.cpp's on the same GGUF and tokens.

use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{Engine, EngineConfig};
use reverie_train::Model;

fn tokens(n: usize, vocab: usize, seed: usize) -> Vec<i32> {
    (0..n)
        .map(|i| (5 + (i * 7919 + seed * 31) % (vocab - 5)) as i32)
        .collect()
}

#[test]
fn synthetic_models_match_llama_cpp_within_a_thousandth_of_a_nat() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for arch in Arch::ALL {
        let path = dir.path().join(format!("{}.gguf", arch.as_str()));
        let mut cfg = SynthConfig::tiny(arch);
        cfg.init_scale = 0.2; // peaked distributions make disagreements visible
        synth::write(&path, &cfg).unwrap();
        let engine = Engine::load(
            &path,
            EngineConfig {
                slots: 1,
                n_ctx: 256,
                threads: 2,
                ..EngineConfig::default()
            },
        )
        .unwrap();
        let model = Model::load(&path).unwrap();
        // Longer than gemma3's sliding window (8) so the window matters.
        let ids = tokens(48, model.hp.n_vocab, arch as usize);
        let reference = engine.score(&ids).unwrap();
        let ours = model
            .token_logprobs(&ids, None, 16)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(ours.len(), reference.len());
        let worst = ours
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        let spread = reference.iter().fold(0f32, |m, x| m.max(-x));
        println!(
            "{}: max |Δ| = {worst:.2e} nats (log-probs down to {:.2})",
            arch.as_str(),
            -spread
        );
        if std::env::var("REVERIE_PARITY_DEBUG").is_ok() {
            let d: Vec<String> = ours
                .iter()
                .zip(&reference)
                .map(|(a, b)| format!("{:.4}", a - b))
                .collect();
            println!("{}", d.join(" "));
        }
        if worst >= 1e-3 {
            failures.push(format!(
                "{}: trainer and llama.cpp differ by {worst} nats",
                arch.as_str()
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}
