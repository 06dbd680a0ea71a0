//! A merged q8_0 export loads in llama.cpp and behaves like the trained model.

use reverie_core::TokenRole;
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_gguf::{GgmlType, GgufFile};
use reverie_infer::{Engine, EngineConfig};
use reverie_train::data::Sequence;
use reverie_train::export::{write_adapter, write_merged_q8_0};
use reverie_train::optim::OptimConfig;
use reverie_train::{LoraConfig, Model, TrainConfig, Trainer};

#[test]
fn merged_export_loads_in_llama_cpp_and_matches_the_trainer() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.gguf");
    let mut c = SynthConfig::tiny(Arch::Qwen2);
    c.init_scale = 0.2;
    synth::write(&base, &c).unwrap();
    let m = Model::load(&base).unwrap();
    let ids = vec![3, 300, 301, 302, 4, 3, 290, 291];
    let s = Sequence {
        roles: (0..ids.len())
            .map(|i| {
                if i >= 5 {
                    TokenRole::Action
                } else {
                    TokenRole::Context
                }
            })
            .collect(),
        ids: ids.clone(),
        advantage: 2.0,
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
        optim: OptimConfig {
            lr: 3e-2,
            warmup_steps: 1,
            min_lr_ratio: 1.0,
            ..OptimConfig::default()
        },
        loss: reverie_train::loss::LossConfig {
            beta2: 1.0,
            ..Default::default()
        },
        batch_size: 1,
        checkpoint_every: 0,
        ..TrainConfig::default()
    };
    let mut t = Trainer::new(&m, vec![s; 20], cfg).unwrap();
    t.run(None, &mut |_| {}).unwrap();

    let out = dir.path().join("night1.gguf");
    let report = write_merged_q8_0(&m, Some(&t.lora), &out).unwrap();
    assert_eq!(report.merged, 2 * 7);
    let file = GgufFile::open(&out).unwrap();
    let header = GgufFile::open(&base).unwrap();
    for (k, v) in &header.metadata {
        if k != "general.file_type" {
            assert_eq!(file.get(k), Some(v), "metadata {k} must be kept");
        }
    }
    assert_eq!(
        file.get("general.file_type").and_then(|v| v.as_u64()),
        Some(7)
    );
    assert_eq!(
        file.tensor("blk.0.attn_q.weight").unwrap().dtype,
        GgmlType::Q8_0
    );
    assert_eq!(
        file.tensor("blk.0.attn_norm.weight").unwrap().dtype,
        GgmlType::F32
    );

    let trained = m
        .token_logprobs(&ids, Some(&t.lora), 8)
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let untrained = m
        .token_logprobs(&ids, None, 8)
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let engine = Engine::load(
        &out,
        EngineConfig {
            slots: 1,
            n_ctx: 64,
            threads: 2,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let exported = engine.score(&ids).unwrap();
    let gap = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    let moved = gap(&trained, &untrained);
    let err = gap(&trained, &exported);
    println!("training moved log-probs by up to {moved:.3}; q8_0 export differs by up to {err:.4}");
    assert!(moved > 0.3, "training should have changed the model");
    assert!(
        err < 0.05 && err < moved / 5.0,
        "the export must carry the training: {err} vs {moved}"
    );

    let adapter = dir.path().join("adapter.gguf");
    write_adapter(&m, &t.lora, &adapter).unwrap();
    let a = GgufFile::open(&adapter).unwrap();
    assert_eq!(
        a.get("general.type").and_then(|v| v.as_str()),
        Some("adapter")
    );
    let la = a.tensor("blk.0.attn_q.weight.lora_a").unwrap();
    assert_eq!(la.dims, vec![64, 4]);

    // llama.cpp applies the adapter to the unquantized base: no q8_0 rounding.
    let cfg = EngineConfig {
        slots: 1,
        n_ctx: 64,
        threads: 2,
        adapter: Some(adapter.clone()),
        ..EngineConfig::default()
    };
    let with_adapter = Engine::load(&base, cfg).unwrap().score(&ids).unwrap();
    let adapter_err = gap(&trained, &with_adapter);
    println!("adapter applied by llama.cpp differs by up to {adapter_err:.5}");
    assert!(adapter_err < 1e-3, "adapter route: {adapter_err}");
    assert!(adapter_err < err, "the adapter route avoids q8_0 rounding");
}

#[test]
fn a_base_truncated_after_loading_is_refused_and_leaves_no_file_behind() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.gguf");
    synth::write(&base, &SynthConfig::tiny(Arch::Llama)).unwrap();
    let m = Model::load(&base).unwrap();
    // The file loses its last tensors after the model was read.
    let len = std::fs::metadata(&base).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&base).unwrap();
    f.set_len(len * 3 / 4).unwrap();
    drop(f);
    let out = dir.path().join("out.gguf");
    let err = write_merged_q8_0(&m, None, &out).unwrap_err().to_string();
    assert!(!err.is_empty());
    assert!(!out.exists(), "no export from a broken base");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left,
        vec!["base.gguf".to_string()],
        "no partial file: {left:?}"
    );
}
