//! `reverie train` and `reverie logprobs`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use reverie_core::Home;
use reverie_infer::{Engine, EngineConfig};
use reverie_train::{data, export, DeviceChoice, Model, TrainConfig, Trainer};

use crate::output;

#[derive(Args)]
pub struct TrainArgs {
    /// JSONL: sequences (`ids`, `roles`, `advantage`, …) or `reverie export` lines.
    #[arg(long)]
    data: PathBuf,
    /// The GGUF to train on (the model the data was generated with).
    #[arg(long)]
    base: PathBuf,
    /// Output folder: checkpoints, the merged q8_0 GGUF and the adapter.
    #[arg(long)]
    out: PathBuf,
    /// A JSON file with a `TrainConfig` (any subset of fields).
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    lr: Option<f64>,
    #[arg(long)]
    batch_size: Option<usize>,
    #[arg(long)]
    epochs: Option<usize>,
    #[arg(long)]
    rank: Option<usize>,
    /// auto (a GPU in a CUDA build, else the CPU), cpu, cuda or cuda:N.
    #[arg(long)]
    device: Option<DeviceChoice>,
    /// Append one JSON line per optimizer step to this file.
    #[arg(long)]
    steps_log: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn train(_home: &Home, a: TrainArgs) -> anyhow::Result<ExitCode> {
    let mut cfg: TrainConfig = match &a.config {
        Some(p) => serde_json::from_slice(
            &std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
        )
        .with_context(|| format!("{} is not a valid training config", p.display()))?,
        None => TrainConfig::default(),
    };
    if let Some(v) = a.lr {
        cfg.optim.lr = v;
    }
    if let Some(v) = a.batch_size {
        cfg.batch_size = v.max(1);
    }
    if let Some(v) = a.epochs {
        cfg.epochs = v.max(1);
    }
    if let Some(v) = a.rank {
        cfg.lora.rank = v.max(1);
    }
    if let Some(v) = a.device {
        cfg.device = v;
    }
    let started = Instant::now();
    let seqs = data::read_jsonl(&a.data)?;
    let model = Model::load_for_training(&a.base, &cfg)?;
    let mut trainer = Trainer::new(&model, seqs.clone(), cfg.clone())?;
    let bar = if a.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(trainer.total_steps() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("train [{bar:30}] {pos}/{len} {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    let mut log = match &a.steps_log {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("opening {}", p.display()))?,
        ),
        None => None,
    };
    let mut log_err = None;
    let reports = trainer.run(Some(&a.out), &mut |r| {
        bar.set_position(r.step as u64);
        bar.set_message(format!(
            "loss {:.4} (oapl {:.4} env {:.4} user {:.4}) {:.0} tok/s eta {:.0}s",
            r.loss.total, r.loss.oapl, r.loss.env, r.loss.user, r.tokens_per_s, r.eta_s
        ));
        if let Some(f) = log.as_mut() {
            if let Err(e) = writeln!(f, "{}", serde_json::to_string(r).unwrap_or_default())
                .and_then(|_| f.flush())
            {
                log_err = Some(e);
            }
        }
    })?;
    bar.finish_and_clear();
    if let Some(e) = log_err {
        bail!("writing the steps log: {e}");
    }
    let merged_path = a.out.join("model-q8_0.gguf");
    let adapter_path = a.out.join("adapter.gguf");
    let export = export::write_merged_q8_0(&model, Some(&trainer.lora), &merged_path)?;
    let adapter_bytes = export::write_adapter(&model, &trainer.lora, &adapter_path)?;
    // The KL between the trainer's merged model and llama.cpp running the
    // exported file, over the first sequence (up to 512 tokens).
    let ids: Vec<i32> = seqs[0].ids.iter().copied().take(512).collect();
    let kl = kl_trainer_vs_llama(&model, &trainer, &merged_path, &ids)?;
    let first = reports.first().map(|r| r.loss);
    let last = reports.last().map(|r| r.loss);
    let summary = serde_json::json!({
        "steps": trainer.step_index(),
        "sequences": seqs.len(),
        "first_loss": first,
        "last_loss": last,
        "losses": reports.iter().map(|r| r.loss).collect::<Vec<_>>(),
        "kl_merged_vs_exported": kl,
        "merged": merged_path,
        "adapter": adapter_path,
        "adapter_bytes": adapter_bytes,
        "export": export,
        "seconds": started.elapsed().as_secs_f64(),
    });
    if a.json {
        output::json(&summary)?;
    } else {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// Mean over positions of KL(trainer ‖ llama.cpp on the exported file).
fn kl_trainer_vs_llama(
    model: &Model,
    trainer: &Trainer,
    exported: &std::path::Path,
    ids: &[i32],
) -> anyhow::Result<f64> {
    let ours = model.logits(ids, Some(&trainer.lora))?;
    let ours = reverie_train::ops::log_softmax(&ours)?.to_vec2::<f32>()?;
    let engine = Engine::load(
        exported,
        EngineConfig {
            slots: 1,
            n_ctx: (ids.len() + 8) as u32,
            ..EngineConfig::default()
        },
    )?;
    let mut total = 0f64;
    engine.visit_logits(ids, &mut |i, logits| {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let lse = max as f64
            + logits
                .iter()
                .map(|&l| ((l - max) as f64).exp())
                .sum::<f64>()
                .ln();
        let mut kl = 0f64;
        for (lp, &l) in ours[i].iter().zip(logits) {
            let p = (*lp as f64).exp();
            kl += p * (*lp as f64 - (l as f64 - lse));
        }
        total += kl;
    })?;
    Ok(total / ids.len() as f64)
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum ScoreEngine {
    Train,
    Infer,
}

#[derive(Args)]
pub struct LogprobsArgs {
    #[arg(long)]
    model: PathBuf,
    /// A text file; llama.cpp tokenizes it (BOS added when the model wants
    /// one, special-token text parsed).
    #[arg(long)]
    text: PathBuf,
    #[arg(long, value_enum, default_value = "infer")]
    engine: ScoreEngine,
    /// The trainer's device (with `--engine train`): auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: DeviceChoice,
    /// With `--engine train`: the frozen weights as bf16 tiles, as a
    /// training run multiplies them on a CPU with AMX or AVX-512 BF16 (f32
    /// otherwise).
    #[arg(long)]
    bf16: bool,
    #[arg(long)]
    json: bool,
}

pub fn logprobs(_home: &Home, a: LogprobsArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&a.text)
        .with_context(|| format!("reading {}", a.text.display()))?;
    let engine = Engine::load(
        &a.model,
        EngineConfig {
            slots: 1,
            n_ctx: 64,
            ..EngineConfig::default()
        },
    )?;
    let ids = engine.tokenize_document(&text);
    if ids.len() < 2 {
        bail!("{} has fewer than two tokens", a.text.display());
    }
    let lps = match a.engine {
        ScoreEngine::Infer => {
            drop(engine);
            let e = Engine::load(
                &a.model,
                EngineConfig {
                    slots: 1,
                    n_ctx: (ids.len() + 8) as u32,
                    ..EngineConfig::default()
                },
            )?;
            e.score(&ids)?
        }
        ScoreEngine::Train => {
            let cfg = TrainConfig {
                device: a.device,
                cpu_bf16: a.bf16,
                ..TrainConfig::default()
            };
            Model::load_for_training(&a.model, &cfg)?
                .token_logprobs(&ids, None, 512)?
                .to_vec1::<f32>()?
        }
    };
    let total: f32 = lps.iter().sum();
    if a.json {
        output::json(&serde_json::json!({
            "engine": if a.engine == ScoreEngine::Train { "train" } else { "infer" },
            "tokens": ids,
            "logprobs": lps,
            "total": total,
            "mean": total / lps.len() as f32,
        }))?;
    } else {
        for (id, lp) in ids[1..].iter().zip(&lps) {
            println!("{id:>8} {lp:>10.5}");
        }
        println!(
            "mean {:.5} over {} tokens",
            total / lps.len() as f32,
            lps.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
