//! Gradients are right and training moves the model the way the loss says.

use std::path::{Path, PathBuf};

use candle_core::{Tensor, Var};
use reverie_core::TokenRole;
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_train::data::Sequence;
use reverie_train::loss::{sequence_loss, LossConfig};
use reverie_train::optim::OptimConfig;
use reverie_train::{LoraConfig, Model, TrainConfig, Trainer};

fn model(dir: &Path, arch: Arch) -> PathBuf {
    let p = dir.join(format!("{}.gguf", arch.as_str()));
    let mut c = SynthConfig::tiny(arch);
    c.init_scale = 0.2;
    synth::write(&p, &c).unwrap();
    p
}

fn seq(ids: &[i32], action_from: usize, advantage: f32) -> Sequence {
    Sequence {
        ids: ids.to_vec(),
        roles: (0..ids.len())
            .map(|i| {
                if i >= action_from {
                    TokenRole::Action
                } else {
                    TokenRole::Context
                }
            })
            .collect(),
        advantage,
        reward: None,
        group: None,
        token_advantages: vec![],
        earlier: vec![],
    }
}

fn small_cfg(lr: f64, steps_per_batch: usize) -> TrainConfig {
    TrainConfig {
        lora: LoraConfig {
            rank: 4,
            alpha: 8.0,
            ..LoraConfig::default()
        },
        loss: LossConfig {
            beta2: 1.0,
            ..LossConfig::default()
        },
        optim: OptimConfig {
            lr,
            warmup_steps: 1,
            max_grad_norm: 10.0,
            min_lr_ratio: 1.0,
            ..OptimConfig::default()
        },
        batch_size: steps_per_batch,
        epochs: 1,
        checkpoint_every: 0,
        chunk: 7,
        seed: 3,
        recompute: true,
        recompute_above: 0,
        device: reverie_train::DeviceChoice::Cpu,
        cpu_bf16: false,
        quantized: false,
        bf16_saved: false,
    }
}

fn randomize_b(trainer: &Trainer) {
    for (i, (_, ad)) in trainer.lora.adapters.iter().enumerate() {
        let shape = ad.b.as_tensor().shape().clone();
        let t = (Tensor::randn(0f32, 1.0, shape, &candle_core::Device::Cpu).unwrap()
            * (0.05 + i as f64 * 1e-4))
            .unwrap();
        ad.b.set(&t).unwrap();
    }
}

/// The largest difference between two gradients of one variable, and the
/// largest magnitude of the first.
fn gradient_gap(a: &Tensor, b: &Tensor) -> (f32, f32) {
    let max_abs = |t: &Tensor| {
        t.abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    };
    (max_abs(&(a - b).unwrap()), max_abs(a))
}

#[test]
fn every_lora_parameter_gets_a_gradient_on_every_architecture() {
    let dir = tempfile::tempdir().unwrap();
    for arch in Arch::ALL {
        let m = Model::load(&model(dir.path(), arch)).unwrap();
        let mut s = seq(
            &[3, 300, 301, 302, 303, 4, 5, 306, 307, 308, 309, 310],
            6,
            1.0,
        );
        s.roles[3] = TokenRole::Env;
        let t = Trainer::new(&m, vec![s.clone()], small_cfg(1e-3, 1)).unwrap();
        randomize_b(&t);
        let lag = m
            .token_logprobs(&s.ids, None, 5)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let lp = m.token_logprobs(&s.ids, Some(&t.lora), 5).unwrap();
        let (loss, _) = sequence_loss(
            &s,
            &lp,
            &lag,
            &LossConfig {
                beta2: 1.0,
                ..LossConfig::default()
            },
        )
        .unwrap();
        let grads = loss.backward().unwrap();
        for (name, var) in t.lora.named_vars() {
            let g = grads
                .get(var.as_tensor())
                .unwrap_or_else(|| panic!("{}: {name} has no gradient", arch.as_str()));
            let n = g
                .abs()
                .unwrap()
                .sum_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(n > 0.0, "{}: {name} has a zero gradient", arch.as_str());
        }
    }
}

#[test]
fn gradients_match_finite_differences() {
    let dir = tempfile::tempdir().unwrap();
    let m = Model::load(&model(dir.path(), Arch::Qwen3)).unwrap();
    let mut s = seq(&[3, 300, 301, 302, 4, 305, 306, 307, 308], 5, 0.5);
    s.roles[2] = TokenRole::Env;
    let t = Trainer::new(&m, vec![s.clone()], small_cfg(1e-3, 1)).unwrap();
    randomize_b(&t);
    let cfg = LossConfig {
        beta2: 1.0,
        lambda_env: 0.5,
        ..LossConfig::default()
    };
    let lag = m
        .token_logprobs(&s.ids, None, 4)
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let loss_of = || -> f64 {
        let lp = m.token_logprobs(&s.ids, Some(&t.lora), 4).unwrap();
        sequence_loss(&s, &lp, &lag, &cfg)
            .unwrap()
            .0
            .to_scalar::<f32>()
            .unwrap() as f64
    };
    let lp = m.token_logprobs(&s.ids, Some(&t.lora), 4).unwrap();
    let grads = sequence_loss(&s, &lp, &lag, &cfg)
        .unwrap()
        .0
        .backward()
        .unwrap();
    let vars = t.lora.named_vars();
    let mut checked = 0;
    for (name, var) in vars
        .iter()
        .filter(|(n, _)| n.starts_with("blk.1.") || n.starts_with("blk.0.attn_q"))
    {
        let analytic = grads
            .get(var.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        // the coordinate with the largest gradient: best signal over f32 noise
        let (k, g) = analytic.iter().enumerate().fold((0, 0f32), |b, (i, &g)| {
            if g.abs() > b.1.abs() {
                (i, g)
            } else {
                b
            }
        });
        let orig = var
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let shape = var.as_tensor().shape().clone();
        let eps = 1e-2f32;
        let set = |v: &Var, delta: f32| {
            let mut w = orig.clone();
            w[k] += delta;
            v.set(&Tensor::from_vec(w, shape.clone(), &candle_core::Device::Cpu).unwrap())
                .unwrap();
        };
        set(var, eps);
        let up = loss_of();
        set(var, -eps);
        let down = loss_of();
        set(var, 0.0);
        let numeric = (up - down) / (2.0 * eps as f64);
        let rel = (numeric - g as f64).abs() / (g.abs() as f64).max(1e-3);
        assert!(rel < 0.05, "{name}[{k}]: analytic {g} vs numeric {numeric}");
        checked += 1;
    }
    assert!(checked >= 8);
}

#[test]
fn a_positive_advantage_lifts_the_action_and_a_negative_one_lowers_it() {
    let dir = tempfile::tempdir().unwrap();
    let m = Model::load(&model(dir.path(), Arch::Llama)).unwrap();
    let ids = [3, 300, 301, 302, 4, 3, 290];
    let action_lp = |t: &Trainer| -> f32 {
        *m.token_logprobs(&ids, Some(&t.lora), 8)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
            .last()
            .unwrap()
    };
    for (adv, up) in [(2.0f32, true), (-2.0, false)] {
        let data = vec![seq(&ids, 6, adv); 30];
        let mut t = Trainer::new(&m, data, small_cfg(2e-2, 1)).unwrap();
        let before = action_lp(&t);
        t.run(None, &mut |_| {}).unwrap();
        let after = action_lp(&t);
        if up {
            assert!(
                after > before + 0.5,
                "positive advantage: {before} -> {after}"
            );
        } else {
            assert!(
                after < before - 0.5,
                "negative advantage: {before} -> {after}"
            );
        }
    }
}

#[test]
fn echo_lowers_held_out_environment_cross_entropy() {
    let dir = tempfile::tempdir().unwrap();
    let m = Model::load(&model(dir.path(), Arch::Qwen2)).unwrap();
    // Tool output always repeats the argument: a learnable world model.
    let mk = |a: i32| {
        let ids = vec![3, a, a + 1, 4, 3, a, a + 1, a, a + 1, 4];
        let mut s = seq(&ids, 99, 0.0);
        for r in s.roles.iter_mut().skip(4) {
            *r = TokenRole::Env;
        }
        s
    };
    let train: Vec<_> = (300..330).map(mk).collect();
    let held_out: Vec<_> = (340..346).map(mk).collect();
    let mut cfg = small_cfg(1e-2, 5);
    cfg.loss = LossConfig {
        lambda_env: 1.0,
        lambda_user: 0.0,
        ..LossConfig::default()
    };
    cfg.epochs = 4;
    let mut t = Trainer::new(&m, train, cfg).unwrap();
    let before = t.evaluate(&held_out).unwrap().env;
    t.run(None, &mut |_| {}).unwrap();
    let after = t.evaluate(&held_out).unwrap().env;
    assert!(after < before * 0.9, "held-out env CE {before} -> {after}");
}

#[test]
fn an_interrupted_run_resumes_with_identical_losses() {
    let dir = tempfile::tempdir().unwrap();
    let m = Model::load(&model(dir.path(), Arch::Gemma3)).unwrap();
    let data: Vec<_> = (0..12)
        .map(|i| {
            seq(
                &[3, 300 + i, 301, 4, 3, 310 + i % 3],
                4,
                if i % 2 == 0 { 1.0 } else { -0.5 },
            )
        })
        .collect();
    let mut cfg = small_cfg(1e-2, 2);
    cfg.checkpoint_every = 2;
    cfg.epochs = 2;
    let full: Vec<f32> = Trainer::new(&m, data.clone(), cfg.clone())
        .unwrap()
        .run(None, &mut |_| {})
        .unwrap()
        .iter()
        .map(|r| r.loss.total)
        .collect();

    let ck = dir.path().join("run");
    let mut first = Trainer::new(&m, data.clone(), cfg.clone()).unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(first.train_step().unwrap().loss.total);
        if first.step_index().is_multiple_of(2) {
            first.save_checkpoint(&ck).unwrap();
        }
    }
    drop(first); // step 5 was never checkpointed: it is redone
    let mut second = Trainer::new(&m, data, cfg).unwrap();
    let rest: Vec<f32> = second
        .run(Some(&ck), &mut |_| {})
        .unwrap()
        .iter()
        .map(|r| r.loss.total)
        .collect();
    assert_eq!(rest.len(), full.len() - 4);
    assert_eq!(
        &full[4..],
        &rest[..],
        "resumed losses must equal the uninterrupted run"
    );
    assert_eq!(&full[..4], &seen[..4]);
}

#[test]
fn per_layer_recomputation_gives_the_same_gradients() {
    let dir = tempfile::tempdir().unwrap();
    for arch in [Arch::Qwen2, Arch::Gemma3] {
        let m = Model::load(&model(dir.path(), arch)).unwrap();
        let mut s = seq(
            &[3, 300, 301, 302, 303, 4, 5, 306, 307, 308, 309, 310, 311],
            6,
            0.7,
        );
        s.roles[2] = TokenRole::Env;
        s.roles[3] = TokenRole::User;
        let mut plain_cfg = small_cfg(1e-3, 1);
        plain_cfg.recompute = false;
        let plain = Trainer::new(&m, vec![s.clone()], plain_cfg).unwrap();
        randomize_b(&plain);
        let lag = m
            .token_logprobs(&s.ids, None, 5)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let (t1, g1) = plain.sequence_gradients(&s, &lag, 1.0).unwrap();
        // The recomputed layers take attention's output from the first
        // pass: exactly in f32, within rounding when it is kept in bf16.
        for (bf16_saved, tolerance) in [(false, 1e-4), (true, 2e-2)] {
            let cfg = TrainConfig {
                bf16_saved,
                ..small_cfg(1e-3, 1)
            };
            let recompute = Trainer::new(&m, vec![s.clone()], cfg).unwrap();
            for ((_, a), (_, b)) in plain
                .lora
                .named_vars()
                .iter()
                .zip(recompute.lora.named_vars())
            {
                b.set(a.as_tensor()).unwrap();
            }
            let (t2, g2) = recompute.sequence_gradients(&s, &lag, 1.0).unwrap();
            assert_eq!(t1, t2);
            for ((name, _), (a, b)) in plain.lora.named_vars().iter().zip(g1.iter().zip(&g2)) {
                let (diff, scale) = gradient_gap(a.as_ref().unwrap(), b.as_ref().unwrap());
                assert!(
                    diff <= tolerance * scale.max(1e-6),
                    "{}, bf16 {bf16_saved}: {name} differs by {diff} (scale {scale})",
                    arch.as_str()
                );
            }
        }
    }
}

#[test]
fn the_lm_head_skips_positions_no_loss_reads_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let m = Model::load(&model(dir.path(), Arch::Qwen2)).unwrap();
    let mut s = seq(
        &[
            3, 300, 301, 302, 303, 4, 5, 306, 307, 308, 309, 310, 311, 312,
        ],
        9,
        0.7,
    );
    s.roles[3] = TokenRole::User;
    s.roles[4] = TokenRole::Warning;
    s.roles[6] = TokenRole::Env;
    s.roles[7] = TokenRole::Env;
    s.token_advantages = vec![(5, -1.0), (11, -1.0)];
    let mut cfg = small_cfg(1e-3, 1);
    cfg.loss.lambda_user = 0.0;
    let scored = reverie_train::loss::scored_positions(&s, &cfg.loss);
    // Position j predicts token j+1: env 6-7, the marked context token 5,
    // action 9.. are read; context, the user (weight 0) and the warning
    // are not.
    let want: Vec<bool> = (1..s.ids.len())
        .map(|i| [5, 6, 7].contains(&i) || i >= 9)
        .collect();
    assert_eq!(scored, want);

    for recompute in [false, true] {
        let mut c = cfg.clone();
        c.recompute = recompute;
        let t = Trainer::new(&m, vec![s.clone()], c.clone()).unwrap();
        randomize_b(&t);
        let full = m.token_logprobs(&s.ids, Some(&t.lora), 5).unwrap();
        let part = m
            .scored_logprobs(&s.ids, Some(&t.lora), 5, Some(&scored))
            .unwrap();
        let (full_v, part_v) = (
            full.to_vec1::<f32>().unwrap(),
            part.to_vec1::<f32>().unwrap(),
        );
        for (j, (f, p)) in full_v.iter().zip(&part_v).enumerate() {
            let expect = if scored[j] { *f } else { 0.0 };
            assert!((p - expect).abs() < 1e-5, "position {j}: {p} vs {expect}");
        }
        let lag = m
            .token_logprobs(&s.ids, None, 5)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let (loss, want_terms) = sequence_loss(&s, &full, &lag, &c.loss).unwrap();
        let want_grads = loss.backward().unwrap();
        let (terms, grads) = t.sequence_gradients(&s, &lag, 1.0).unwrap();
        assert!((terms.total - want_terms.total).abs() < 1e-5 * want_terms.total.abs().max(1.0));
        for ((name, var), g) in t.lora.named_vars().iter().zip(&grads) {
            let (diff, scale) = gradient_gap(
                want_grads.get(var.as_tensor()).unwrap(),
                g.as_ref().unwrap(),
            );
            assert!(
                diff <= 1e-4 * scale.max(1e-6),
                "recompute {recompute}: {name} differs by {diff} (scale {scale})"
            );
        }
    }
}

#[test]
fn bf16_tiles_score_within_rounding_of_f32_and_still_learn() {
    let dir = tempfile::tempdir().unwrap();
    let path = model(dir.path(), Arch::Qwen2);
    let cfg = TrainConfig {
        cpu_bf16: true,
        ..small_cfg(2e-2, 1)
    };
    let tiled = Model::load_for_training(&path, &cfg).unwrap();
    let exact = Model::load(&path).unwrap();
    assert!(!exact.tiled(), "a plain load keeps f32");
    if !reverie_train::bf16_matmul::available() {
        assert!(
            !tiled.tiled(),
            "without bf16 dot products a training run keeps f32"
        );
        eprintln!("no bf16 dot products on this CPU: only the fallback is checked here");
        return;
    }
    assert!(tiled.tiled());
    let (gap, before, after) = scores_and_learns(&exact, &tiled, cfg);
    assert!(
        gap > 0.0 && gap < 0.05,
        "bf16 log-probs differ from f32 by {gap}"
    );
    assert!(
        after > before + 0.5,
        "positive advantage on bf16 tiles: {before} -> {after}"
    );
}

/// How far `model`'s log-probs of a short text are from `exact`'s (the
/// largest gap), and the rewarded last token's log-prob before and after a
/// run of `cfg` with a positive advantage.
fn scores_and_learns(exact: &Model, model: &Model, cfg: TrainConfig) -> (f32, f32, f32) {
    let ids = [3, 300, 301, 302, 4, 3, 290];
    let lp = |m: &Model, lora: Option<&reverie_train::Lora>| {
        m.token_logprobs(&ids, lora, 8)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
    };
    let (a, b) = (lp(exact, None), lp(model, None));
    let gap = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    let mut t = Trainer::new(model, vec![seq(&ids, 6, 2.0); 30], cfg).unwrap();
    let before = *lp(model, Some(&t.lora)).last().unwrap();
    t.run(None, &mut |_| {}).unwrap();
    let after = *lp(model, Some(&t.lora)).last().unwrap();
    (gap, before, after)
}

#[test]
fn quantized_weights_score_as_their_dequantized_values_and_learn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q4km.gguf");
    // Rows of 256: whole Q4_K blocks.
    let c = SynthConfig {
        n_embd: 256,
        head_dim: 64,
        n_ff: 512,
        init_scale: 0.05,
        quant: reverie_gguf::synth::SynthQuant::Q4KM,
        ..SynthConfig::tiny(Arch::Qwen2)
    };
    synth::write(&path, &c).unwrap();
    let cfg = TrainConfig {
        quantized: true,
        ..small_cfg(2e-2, 1)
    };
    let held = Model::load_for_training(&path, &cfg).unwrap();
    let dense = Model::load(&path).unwrap();
    assert_eq!(held.held(), reverie_train::Held::Quantized);
    assert!(
        held.frozen_bytes() * 5 < dense.frozen_bytes(),
        "quantized {} bytes vs f32 {}",
        held.frozen_bytes(),
        dense.frozen_bytes()
    );
    let (gap, before, after) = scores_and_learns(&dense, &held, cfg);
    assert!(gap < 1e-4, "quantized log-probs differ from f32 by {gap}");
    assert!(
        after > before + 0.1,
        "the rewarded token's log-prob went {before} -> {after}"
    );
}

#[test]
fn sub_tasks_trained_as_one_sequence_get_the_gradients_of_their_own_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let m = Model::load(&model(dir.path(), Arch::Qwen2)).unwrap();
    let ids = [3, 300, 301, 302, 303, 4, 5, 306, 307, 308, 309, 310];
    // The first sub-task: its question, then its actions at 3..6.
    let first = seq(&ids[..6], 3, 0.7);
    // The second: the first as context, then its own actions at 9..12.
    let mut second = seq(&ids, 9, -0.4);
    let mut together = second.clone();
    together.roles[..6].copy_from_slice(&first.roles);
    together.earlier = vec![reverie_train::data::Segment {
        end: 6,
        advantage: 0.7,
    }];
    second.roles[6] = TokenRole::Env;
    together.roles[6] = TokenRole::Env;
    // ECHO weighs each sub-task's context once, which separate sequences
    // only approach; the policy term is exact.
    let mut cfg = small_cfg(1e-3, 1);
    cfg.loss.lambda_env = 0.0;
    cfg.loss.lambda_user = 0.0;
    let t = Trainer::new(&m, vec![together.clone()], cfg).unwrap();
    randomize_b(&t);
    let lag = |s: &Sequence| {
        m.token_logprobs(&s.ids, None, 5)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
    };
    let (t1, g1) = t.sequence_gradients(&first, &lag(&first), 1.0).unwrap();
    let (t2, g2) = t.sequence_gradients(&second, &lag(&second), 1.0).unwrap();
    let (tt, gt) = t
        .sequence_gradients(&together, &lag(&together), 1.0)
        .unwrap();
    // f32 sums over 6 and 12 rows round differently: about 1e-5 of the
    // loss on one draw of `B` in thirty.
    assert!(
        (t1.oapl + t2.oapl - tt.oapl).abs() <= 5e-5 * tt.oapl.abs().max(1e-3),
        "{} + {} vs {}",
        t1.oapl,
        t2.oapl,
        tt.oapl
    );
    for ((name, _), ((a, b), c)) in t.lora.named_vars().iter().zip(g1.iter().zip(&g2).zip(&gt)) {
        let sum = (a.as_ref().unwrap() + b.as_ref().unwrap()).unwrap();
        let (diff, scale) = gradient_gap(&sum, c.as_ref().unwrap());
        assert!(
            diff <= 1e-4 * scale.max(1e-6),
            "{name} differs by {diff} (scale {scale})"
        );
    }
}
