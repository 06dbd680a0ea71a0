//! `reverie bench train` and `reverie bench export`: the trainer against
//! PyTorch + PEFT, and the q8_0 export against llama.cpp's quantize tool.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{bail, Context};
use reverie_core::{Home, TokenRole};
use reverie_train::data::Sequence;
use reverie_train::{export, Model, TrainConfig, Trainer};

use crate::output;

const QUANTIZE_SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scripts/bench/llama_ref_quantize.cpp"
);
const PEFT_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scripts/bench/peft_step.py"
);

fn peak_rss() -> u64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a properly sized out-param for getrusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as u64 * 1024
}

/// `warmup` unmeasured and `steps` measured LoRA steps on `len` tokens, with
/// the frozen weights held as `weights` says; prints JSON for the median
/// step (each op's time is the mean over the measured steps).
pub fn train_step(
    model: &Path,
    len: usize,
    (warmup, steps): (usize, usize),
    weights: &str,
    graph: &str,
    saved: &str,
    device: reverie_train::DeviceChoice,
) -> anyhow::Result<ExitCode> {
    let (quantized, cpu_bf16) = match weights {
        "quantized" => (true, true),
        "quantized-f32" => (true, false),
        "f32" => (false, false),
        "bf16" => (false, true),
        other => {
            bail!("unknown weight format {other:?}; choose quantized, quantized-f32, f32 or bf16")
        }
    };
    let defaults = TrainConfig::default();
    let (recompute, recompute_above) = match graph {
        "auto" => (defaults.recompute, defaults.recompute_above),
        "keep" => (false, defaults.recompute_above),
        "recompute" => (true, 0),
        other => bail!("unknown graph choice {other:?}; choose auto, keep or recompute"),
    };
    let bf16_saved = match saved {
        "bf16" => true,
        "f32" => false,
        other => bail!("unknown saved format {other:?}; choose bf16 or f32"),
    };
    if steps == 0 {
        bail!("--steps must be at least 1");
    }
    let cfg = TrainConfig {
        batch_size: 1,
        epochs: warmup + steps,
        checkpoint_every: 0,
        cpu_bf16,
        quantized,
        device,
        recompute,
        recompute_above,
        bf16_saved,
        ..defaults
    };
    let m = Model::load_for_training(model, &cfg)?;
    let ids: Vec<i32> = (0..len)
        .map(|i| (5 + (i * 7919) % (m.hp.n_vocab - 10)) as i32)
        .collect();
    let roles = (0..len)
        .map(|i| {
            if i >= len / 2 {
                TokenRole::Action
            } else {
                TokenRole::Env
            }
        })
        .collect();
    let seq = Sequence {
        ids,
        roles,
        advantage: 0.5,
        reward: None,
        group: None,
        token_advantages: vec![],
        earlier: vec![],
    };
    let keeps_graph = reverie_train::memory::keeps_graph(&cfg, &m.hp, len);
    let mut t = Trainer::new(&m, vec![seq], cfg)?;
    for _ in 0..warmup {
        t.train_step()?;
    }
    reverie_train::timing::take();
    let (mut times, mut losses) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
    for _ in 0..steps {
        let t0 = Instant::now();
        let report = t.train_step()?;
        times.push(t0.elapsed().as_secs_f64());
        losses.push(report.loss.total);
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let dt = sorted[steps / 2];
    // Where a measured step went, with REVERIE_OP_TIMES set.
    let ops: serde_json::Map<String, serde_json::Value> = reverie_train::timing::take()
        .into_iter()
        .map(|(name, calls, s)| {
            (
                name.to_string(),
                serde_json::json!({"calls": calls as f64 / steps as f64, "seconds": s / steps as f64}),
            )
        })
        .collect();
    output::json(&serde_json::json!({
        "tokens_per_s": len as f64 / dt, "seconds": dt, "step_seconds": times, "losses": losses, "peak_rss": peak_rss(), "bf16_tiles": m.tiled(),
        "bf16_kernel": reverie_train::bf16_matmul::kernel().filter(|_| m.tiled()).map(|k| k.as_str()),
        "weights": m.held().as_str(), "frozen_bytes": m.frozen_bytes(), "tokens": len,
        "keeps_graph": keeps_graph,
        "bf16_saved": bf16_saved,
        "device": format!("{:?}", m.device.location()),
        "op_seconds": ops,
    }))?;
    Ok(ExitCode::SUCCESS)
}

fn reference_python(home: &Home, python: &str) -> anyhow::Result<PathBuf> {
    let venv = home.root().join("bench").join("peft-venv");
    let py = venv.join("bin").join("python");
    let ready = Command::new(&py)
        .args(["-c", "import torch, transformers, peft, gguf"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ready {
        return Ok(py);
    }
    eprintln!(
        "installing the reference (torch, transformers, peft, gguf) into {}",
        venv.display()
    );
    let ok = Command::new(python)
        .args(["-m", "venv"])
        .arg(&venv)
        .status()?
        .success()
        && Command::new(&py)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "torch",
                "transformers",
                "peft",
                "gguf",
                "accelerate",
            ])
            .status()?
            .success();
    if !ok {
        bail!(
            "could not install the PyTorch + PEFT reference into {}",
            venv.display()
        );
    }
    Ok(py)
}

fn run_json(cmd: &mut Command) -> anyhow::Result<serde_json::Value> {
    let out = cmd.output()?;
    if !out.status.success() {
        bail!("{:?} failed: {}", cmd, String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).with_context(|| format!("parsing {line:?}"))
}

pub fn train(
    home: &Home,
    model: Option<PathBuf>,
    lengths: Vec<usize>,
    (threads, steps): (Option<usize>, usize),
    python: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let model = reverie_models::active::resolve(home, model.as_deref())?;
    let threads =
        threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let py = reference_python(home, python)?;
    let me = std::env::current_exe()?;
    let mut rows = Vec::new();
    for &len in &lengths {
        // Ours as a training run loads the model (quantized frozen weights)
        // and in f32; the reference in f32 (what PEFT on a CPU does by
        // default) and with its weights in bf16.
        let ours_step = |extra: &[&str]| {
            run_json(
                Command::new(&me)
                    .args(["bench", "train-step", "--len", &len.to_string()])
                    .args(["--steps", &steps.to_string(), "--model"])
                    .arg(&model)
                    .args(extra)
                    .env("RAYON_NUM_THREADS", threads.to_string()),
            )
        };
        let reference_step = |dtype: &str| {
            run_json(
                Command::new(&py)
                    .arg(PEFT_SCRIPT)
                    .args(["--len", &len.to_string(), "--threads", &threads.to_string()])
                    .args(["--steps", &steps.to_string()])
                    .args(["--dtype", dtype, "--gguf"])
                    .arg(&model),
            )
        };
        let (ours, ours_f32) = (ours_step(&[])?, ours_step(&["--weights", "f32"])?);
        let (theirs, theirs_bf16) = (reference_step("float32")?, reference_step("bfloat16")?);
        let ratio = |a: &serde_json::Value, b: &serde_json::Value, k: &str| {
            a[k].as_f64().unwrap_or(0.0) / b[k].as_f64().unwrap_or(f64::NAN)
        };
        rows.push(serde_json::json!({
            "tokens": len, "ours": ours, "ours_f32": ours_f32,
            "reference": theirs, "reference_bf16": theirs_bf16,
            "tokens_per_s_ratio": ratio(&ours, &theirs, "tokens_per_s"),
            "peak_rss_ratio": ratio(&ours, &theirs, "peak_rss"),
            "f32_tokens_per_s_ratio": ratio(&ours_f32, &theirs, "tokens_per_s"),
            "tokens_per_s_ratio_vs_bf16_reference": ratio(&ours, &theirs_bf16, "tokens_per_s"),
        }));
        if !json {
            eprintln!("{len} tokens: {}", rows.last().expect("pushed"));
        }
    }
    let mean = |k: &str| {
        rows.iter()
            .map(|r| r[k].as_f64().unwrap_or(0.0))
            .sum::<f64>()
            / rows.len().max(1) as f64
    };
    let report = serde_json::json!({
        "model": model, "threads": threads, "lengths": rows,
        "tokens_per_s_ratio": mean("tokens_per_s_ratio"), "peak_rss_ratio": mean("peak_rss_ratio"),
        "f32_tokens_per_s_ratio": mean("f32_tokens_per_s_ratio"),
        "tokens_per_s_ratio_vs_bf16_reference": mean("tokens_per_s_ratio_vs_bf16_reference"),
    });
    output::json(&report)?;
    Ok(ExitCode::SUCCESS)
}

pub fn export(
    home: &Home,
    model: Option<PathBuf>,
    runs: usize,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let model = reverie_models::active::resolve(home, model.as_deref())?;
    let quantize =
        crate::bench::build_reference(home, QUANTIZE_SOURCE, "llama-ref-quantize", json)?;
    let dir = home.root().join("bench").join("export");
    std::fs::create_dir_all(&dir)?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (ours_out, theirs_out) = (
        dir.join("ours-q8_0.gguf"),
        dir.join("llama-quantize-q8_0.gguf"),
    );
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let (mut ours, mut loads, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_bytes, mut theirs_bytes) = (0, 0);
    for run in 0..runs {
        let t0 = Instant::now();
        // As a night holds the model it exports.
        let m = Model::load_for_training(&model, &TrainConfig::default())?;
        let lora = reverie_train::Lora::new(
            reverie_train::LoraConfig::default(),
            &m.adaptable(&reverie_train::LoraConfig::default().targets),
            &m.device,
        )?;
        loads.push(t0.elapsed().as_secs_f64());
        export::write_merged_q8_0(&m, Some(&lora), &ours_out)?;
        ours.push(t0.elapsed().as_secs_f64());
        drop((m, lora));

        let out = Command::new(&quantize)
            .arg(&model)
            .arg(&theirs_out)
            .arg(threads.to_string())
            .output()?;
        if !out.status.success() {
            bail!(
                "llama.cpp's quantizer failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        theirs.push(
            serde_json::from_slice::<serde_json::Value>(&out.stdout)?["seconds"]
                .as_f64()
                .unwrap_or(f64::NAN),
        );
        (ours_bytes, theirs_bytes) = (size(&ours_out), size(&theirs_out));
        let _ = std::fs::remove_file(&ours_out);
        let _ = std::fs::remove_file(&theirs_out);
        if !json {
            eprintln!(
                "run {}/{runs}: ours {:.2} s, llama.cpp {:.2} s",
                run + 1,
                ours[run],
                theirs[run]
            );
        }
    }
    let (ours_s, theirs_s) = (median(&ours), median(&theirs));
    output::json(&serde_json::json!({
        "model": model, "runs": runs,
        "ours_seconds": ours_s, "ours_load_seconds": median(&loads),
        "reference_seconds": theirs_s, "time_ratio": ours_s / theirs_s,
        "ours_runs": ours, "reference_runs": theirs,
        "ours_bytes": ours_bytes, "reference_bytes": theirs_bytes,
        "note": "medians of runs taken in turn; ours = load + dequantize + merge LoRA + quantize + write + fsync; reference = llama_model_quantize (llama-quantize) to Q8_0 with requantize",
    }))?;
    Ok(ExitCode::SUCCESS)
}

/// The middle value (the mean of the two middle ones for an even count).
fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
