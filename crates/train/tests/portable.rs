//! The code path a GPU takes, run on the CPU: the whole model's log-probs
//! and every LoRA gradient agree with the CPU kernels, on every
//! architecture. One test per process, since the switch is process-wide.

use candle_core::Tensor;
use reverie_core::TokenRole;
use reverie_gguf::synth::{self, Arch, SynthConfig, SynthQuant};
use reverie_train::data::Sequence;
use reverie_train::{portable, Held, LoraConfig, Model, TrainConfig, Trainer};

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

#[test]
fn the_portable_ops_train_like_the_cpu_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<i32> = (0..40).map(|i| 3 + (i * 37 % 200)).collect();
    let seq = Sequence {
        roles: (0..ids.len())
            .map(|i| match i {
                0..=9 => TokenRole::Context,
                10..=14 => TokenRole::Env,
                _ => TokenRole::Action,
            })
            .collect(),
        ids,
        advantage: 0.8,
        reward: None,
        group: None,
        token_advantages: vec![],
        earlier: vec![],
    };
    let cfg = TrainConfig {
        lora: LoraConfig {
            rank: 4,
            alpha: 8.0,
            ..LoraConfig::default()
        },
        batch_size: 1,
        chunk: 9,
        recompute_above: 16,
        // The CPU path keeps attention's output for the recomputed layers;
        // in f32, so that both paths see the same values.
        bf16_saved: false,
        ..TrainConfig::default()
    };
    // Every architecture in f32, and one whose frozen weights stay in
    // their Q4_K_M blocks (the portable path expands them tile by tile).
    let cases = Arch::ALL
        .into_iter()
        .map(|a| (a, Held::Dense))
        .chain([(Arch::Qwen2, Held::Quantized)]);
    for (arch, held) in cases {
        let name = format!("{} ({})", arch.as_str(), held.as_str());
        let path = dir
            .path()
            .join(format!("{}-{:?}.gguf", arch.as_str(), held));
        let mut c = SynthConfig::tiny(arch);
        c.init_scale = 0.2;
        if held == Held::Quantized {
            c = SynthConfig {
                n_embd: 256,
                head_dim: 64,
                n_ff: 512,
                quant: SynthQuant::Q4KM,
                init_scale: 0.05,
                ..c
            };
        }
        synth::write(&path, &c).unwrap();
        let model = Model::load_held(&path, &candle_core::Device::Cpu, held).unwrap();
        assert_eq!(model.held(), held);
        let trainer = Trainer::new(&model, vec![seq.clone()], cfg.clone()).unwrap();
        // B starts at zero; give it values so every A gets a gradient too.
        for (i, (_, ad)) in trainer.lora.adapters.iter().enumerate() {
            let b = ad.b.as_tensor();
            let t = (Tensor::randn(0f32, 1.0, b.shape(), b.device()).unwrap()
                * (0.05 + i as f64 * 1e-4))
                .unwrap();
            ad.b.set(&t).unwrap();
        }
        let lag = model
            .token_logprobs(&seq.ids, None, 9)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let run = |forced: bool| {
            portable::force_on_cpu(forced);
            let lp = model
                .token_logprobs(&seq.ids, Some(&trainer.lora), 9)
                .unwrap();
            let (terms, grads) = trainer.sequence_gradients(&seq, &lag, 1.0).unwrap();
            portable::force_on_cpu(false);
            (lp, terms, grads)
        };
        let (lp_k, terms_k, grads_k) = run(false);
        let (lp_p, terms_p, grads_p) = run(true);
        // The two paths sum in different orders; on random adapters gemma's
        // scaled embeddings put that at up to a few 1e-4 nats. The budget is
        // the trainer's own against llama.cpp.
        let d = max_diff(&lp_k, &lp_p);
        assert!(d < 1e-3, "{name}: log-probs differ by {d}");
        assert!(
            (terms_k.oapl - terms_p.oapl).abs() < 1e-4 * terms_k.oapl.abs().max(1.0),
            "{name}: OAPL {} vs {}",
            terms_k.oapl,
            terms_p.oapl
        );
        for ((var, a), b) in trainer.lora.named_vars().iter().zip(&grads_k).zip(&grads_p) {
            let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
            let scale = a
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            let d = max_diff(a, b);
            assert!(scale > 0.0, "{name}: {} has no gradient", var.0);
            assert!(
                d <= 1e-3 * scale,
                "{name}: {} differs by {d} (scale {scale})",
                var.0
            );
        }
    }
}
