//! `reverie bench decode`: Reverie's engine against llama.cpp's own
//! `llama-bench`, built from the same vendored llama.cpp source, on the same
//! model and thread count.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Subcommand;
use reverie_core::{ChannelId, Home, SamplingParams};
use reverie_infer::{Engine, EngineConfig, GenerateRequest};
use serde::Serialize;

use crate::chat::EngineArgs;
use crate::output;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Prompt and decode tokens/s: ours vs llama-bench.
    Decode {
        #[command(flatten)]
        engine: EngineArgs,
        #[arg(long, default_value_t = 512)]
        prompt_tokens: usize,
        #[arg(long, default_value_t = 128)]
        gen_tokens: usize,
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// An existing llama-bench binary (otherwise a C API reference is
        /// compiled against the same llama.cpp libraries).
        #[arg(long)]
        reference: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Does a night help: eval, nights of practice + sleep, eval again.
    Nights(crate::bench_nights::NightsArgs),
    /// The judge against hidden checks on simulated day tasks.
    Judge(crate::bench_judge::JudgeArgs),
    /// Do nights on ordinary days help: eval, simulated days + sleep, eval.
    Days(crate::bench_days::DaysArgs),
    /// Tool calling on BFCL, against llama-cpp-python's server.
    Tools(crate::bench_tools::ToolsArgs),
    /// Value-model baselines against what happened: grade written vs mean grade.
    Value(crate::bench_value::ValueArgs),
    /// LoRA step tokens/s and peak memory: ours vs PyTorch + PEFT.
    Train {
        #[arg(long)]
        model: Option<PathBuf>,
        /// Sequence lengths to measure.
        #[arg(long, value_delimiter = ',', default_value = "512,2048")]
        lengths: Vec<usize>,
        #[arg(long)]
        threads: Option<usize>,
        /// Measured steps of each, after one warm-up; the medians are
        /// compared.
        #[arg(long, default_value_t = 3)]
        steps: usize,
        /// Python used for the reference (a venv with torch, transformers,
        /// peft and gguf is made under the home folder if needed).
        #[arg(long, default_value = "python3")]
        python: String,
        #[arg(long)]
        json: bool,
    },
    /// Measured LoRA steps in this process: tokens/s of the median step,
    /// peak RSS and the frozen weights' bytes, as JSON (also used by `bench
    /// train`).
    TrainStep {
        #[arg(long)]
        model: PathBuf,
        #[arg(long)]
        len: usize,
        /// Unmeasured steps first (0 for a peak-memory run on a long
        /// sequence).
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// Measured steps; the median step is reported (one step on a
        /// shared machine can take twice another's time).
        #[arg(long, default_value_t = 1)]
        steps: usize,
        /// How the frozen weights are held: quantized (the night's default:
        /// block formats, products in bf16 where the CPU has AMX or AVX-512
        /// BF16), quantized-f32 (products in f32), f32, or bf16 (bf16 tiles).
        #[arg(long, default_value = "quantized")]
        weights: String,
        /// Whether the step keeps its whole graph for the backward pass or
        /// recomputes each layer from its input: auto (as a night chooses),
        /// keep or recompute.
        #[arg(long, default_value = "auto")]
        graph: String,
        /// How each feed-forward block keeps its gate and up projections
        /// for the backward pass: bf16 (the night's default) or f32.
        #[arg(long, default_value = "bf16")]
        saved: String,
        /// Where the step runs: auto, cpu, cuda or cuda:N.
        #[arg(long, default_value = "auto")]
        device: reverie_train::DeviceChoice,
    },
    /// Merge + q8_0 export time: ours vs llama.cpp's quantize tool.
    Export {
        #[arg(long)]
        model: Option<PathBuf>,
        /// Runs of each, taken in turn; the medians are compared (one run
        /// of either varies by half its time with the disk's write-back).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        #[arg(long)]
        json: bool,
    },
}

/// The user's embedding model, shared with a bench's data folder.
pub fn share_embedder(home: &Home, bench: &Home) -> anyhow::Result<()> {
    reverie_embed::share_model(home, bench).context("sharing the embedding model with the bench")
}

/// One night on the bench's data folder, with the bench's model.
pub fn sleep(
    bench: &Home,
    model: &Path,
    cfg: &reverie_night::NightConfig,
) -> anyhow::Result<reverie_night::NightOutcome> {
    use reverie_night::NightEvent;
    let store = reverie_store::Store::open(bench)?;
    // A night of a bench lasts minutes to hours: its log says where it is.
    Ok(reverie_night::run_night(
        bench,
        &store,
        model,
        cfg,
        &reverie_night::CancelFlag::default(),
        &mut |ev| {
            match ev {
            NightEvent::TrainStep {
                step,
                total,
                loss,
                tokens_per_s,
                eta_s,
                ..
            } => eprintln!(
                "  night: step {step}/{total}, loss {loss:.4}, {tokens_per_s:.0} tokens/s, {eta_s:.0} s left"
            ),
            NightEvent::Note { stage, message } => {
                eprintln!("  night, {}: {message}", stage.as_str())
            }
            NightEvent::StageFinished { stage, seconds } => {
                eprintln!("  night: {} done in {seconds:.0} s", stage.as_str())
            }
            NightEvent::StageStarted { .. } | NightEvent::Item { .. } => {}
        }
        },
    )?)
}

/// What a night did with its model, in a few words.
pub fn deployed_or_kept(out: &reverie_night::NightOutcome) -> String {
    match &out.deployed {
        Some(p) => format!("deployed {}", p.display()),
        None => format!(
            "kept the model: {}",
            out.kept_reason.clone().unwrap_or_default()
        ),
    }
}

/// A fresh data folder `bench/KIND-SECONDS` under `home` whose active
/// model is `base` (the model given, or `home`'s active one), so a
/// benchmark never touches the person's own days.
pub fn fresh_home(home: &Home, kind: &str, base: Option<&Path>) -> anyhow::Result<Home> {
    let base = reverie_models::active::resolve(home, base)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let bench = Home::new(home.root().join("bench").join(format!("{kind}-{stamp}")));
    std::fs::create_dir_all(bench.root())?;
    reverie_models::active::set_active(&bench, &base)?;
    Ok(bench)
}

#[derive(Serialize, Default)]
struct Speeds {
    prompt_tokens_per_s: f64,
    decode_tokens_per_s: f64,
}

pub fn run(home: &Home, cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Nights(a) => crate::bench_nights::nights(home, a),
        BenchCommand::Value(a) => crate::bench_value::value(home, a),
        BenchCommand::Judge(a) => crate::bench_judge::judge(home, a),
        BenchCommand::Days(a) => crate::bench_days::days(home, a),
        BenchCommand::Tools(a) => crate::bench_tools::tools(home, a),
        BenchCommand::Decode {
            engine,
            prompt_tokens,
            gen_tokens,
            reps,
            reference,
            json,
        } => decode(
            home,
            engine,
            prompt_tokens,
            gen_tokens,
            reps,
            reference,
            json,
        ),
        BenchCommand::Train {
            model,
            lengths,
            threads,
            steps,
            python,
            json,
        } => crate::bench_train::train(home, model, lengths, (threads, steps), &python, json),
        BenchCommand::TrainStep {
            model,
            len,
            warmup,
            steps,
            weights,
            graph,
            saved,
            device,
        } => crate::bench_train::train_step(
            &model,
            len,
            (warmup, steps),
            &weights,
            &graph,
            &saved,
            device,
        ),
        BenchCommand::Export { model, runs, json } => {
            crate::bench_train::export(home, model, runs, json)
        }
    }
}

fn decode(
    home: &Home,
    engine: EngineArgs,
    prompt_tokens: usize,
    gen_tokens: usize,
    reps: usize,
    reference: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let model = reverie_models::active::resolve(home, engine.model.as_deref())?;
    let threads = engine
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let reps = reps.max(1);
    let reference = match reference {
        Some(r) => r,
        None => build_reference_bench(home, json)?,
    };
    if !json {
        eprintln!(
            "model {} · {threads} threads · pp{prompt_tokens} tg{gen_tokens} · {reps} reps",
            model.display()
        );
    }
    let ours = measure_ours(&model, threads, prompt_tokens, gen_tokens, reps)?;
    let theirs = measure_reference(&reference, &model, threads, prompt_tokens, gen_tokens, reps)?;
    let report = serde_json::json!({
        "model": model,
        "threads": threads,
        "prompt_tokens": prompt_tokens,
        "gen_tokens": gen_tokens,
        "reps": reps,
        "ours": ours,
        "reference": theirs,
        "reference_binary": reference,
        "prompt_ratio": ours.prompt_tokens_per_s / theirs.prompt_tokens_per_s,
        "decode_ratio": ours.decode_tokens_per_s / theirs.decode_tokens_per_s,
    });
    if json {
        output::json(&report)?;
    } else {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn measure_ours(
    model: &Path,
    threads: usize,
    pp: usize,
    tg: usize,
    reps: usize,
) -> anyhow::Result<Speeds> {
    let cfg = EngineConfig {
        slots: 1,
        n_ctx: (pp.max(1) + tg + 16) as u32,
        n_batch: pp.clamp(32, 2048) as u32,
        threads,
        ..EngineConfig::default()
    };
    let engine = Engine::load(model, cfg)?;
    let n_vocab = engine.info().n_vocab.max(16) as usize;
    // Distinct first tokens per run so no run reuses another's KV cache.
    let prompt = |rep: usize, len: usize| -> Vec<i32> {
        (0..len)
            .map(|i| (5 + (i * 7919 + rep * 104_729) % (n_vocab - 10)) as i32)
            .collect()
    };
    let run = |rep: usize, len: usize, gen: usize| -> anyhow::Result<reverie_infer::Usage> {
        let mut req = GenerateRequest::new(
            ChannelId(rep as i64),
            prompt(rep, len),
            SamplingParams::greedy(gen),
        );
        req.ignore_eog = true;
        Ok(engine.generate(req)?.complete()?.usage)
    };
    run(0, pp.min(32), 4)?; // warm-up
    let (mut pp_tps, mut tg_tps) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        let started = Instant::now();
        let u = run(1 + rep, pp, 0)?;
        let ms = if u.prefill_ms > 0.0 {
            u.prefill_ms
        } else {
            started.elapsed().as_secs_f64() * 1e3
        };
        pp_tps.push(pp as f64 / (ms / 1e3));
        let u = run(1000 + rep, 1, tg)?;
        tg_tps.push(u.generated_tokens as f64 / (u.decode_ms / 1e3));
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    Ok(Speeds {
        prompt_tokens_per_s: mean(&pp_tps),
        decode_tokens_per_s: mean(&tg_tps),
    })
}

fn measure_reference(
    bin: &Path,
    model: &Path,
    threads: usize,
    pp: usize,
    tg: usize,
    reps: usize,
) -> anyhow::Result<Speeds> {
    if bin.file_name().is_some_and(|n| n == REF_BENCH) {
        let out = Command::new(bin)
            .arg(model)
            .args([pp, tg, threads, reps].map(|n| n.to_string()))
            .output()
            .with_context(|| format!("running {}", bin.display()))?;
        if !out.status.success() {
            bail!(
                "{} failed: {}",
                bin.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("parsing the reference's JSON")?;
        return Ok(Speeds {
            prompt_tokens_per_s: v["prompt_tokens_per_s"].as_f64().unwrap_or(0.0),
            decode_tokens_per_s: v["decode_tokens_per_s"].as_f64().unwrap_or(0.0),
        });
    }
    // An existing llama-bench binary given with --reference.
    let out = Command::new(bin)
        .arg("-m")
        .arg(model)
        .args([
            "-p",
            &pp.to_string(),
            "-n",
            &tg.to_string(),
            "-t",
            &threads.to_string(),
        ])
        .args([
            "-r",
            &reps.to_string(),
            "-b",
            &pp.clamp(32, 2048).to_string(),
            "-o",
            "json",
        ])
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "llama-bench failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&out.stdout).context("parsing llama-bench JSON")?;
    let mut s = Speeds::default();
    for r in rows {
        let ts = r["avg_ts"].as_f64().unwrap_or(0.0);
        if r["n_gen"].as_u64().unwrap_or(0) > 0 {
            s.decode_tokens_per_s = ts;
        } else {
            s.prompt_tokens_per_s = ts;
        }
    }
    Ok(s)
}

const REF_BENCH: &str = "llama-ref-bench";
const REF_SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scripts/bench/llama_ref_bench.cpp"
);

/// The install folder (headers + static libraries) of the llama.cpp that
/// llama-cpp-sys-2 built for this binary's profile: the newest one next to
/// this executable.
fn linked_llama() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let build = exe.parent()?.join("build");
    std::fs::read_dir(build)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("llama-cpp-sys-2-")
        })
        .map(|e| e.path().join("out"))
        .filter(|o| o.join("lib").join("libllama.a").exists())
        .max_by_key(|o| {
            std::fs::metadata(o.join("lib").join("libllama.a"))
                .and_then(|m| m.modified())
                .ok()
        })
}

/// Compiles the C++ decode reference (llama.cpp's crate ships no
/// llama-bench sources, so the reference is written against the C API).
fn build_reference_bench(home: &Home, quiet: bool) -> anyhow::Result<PathBuf> {
    build_reference(home, REF_SOURCE, REF_BENCH, quiet)
}

/// Compiles `source` against the same static llama.cpp libraries Reverie
/// links, into `home/bench/<name>`.
pub fn build_reference(
    home: &Home,
    source: &str,
    name: &str,
    quiet: bool,
) -> anyhow::Result<PathBuf> {
    let out = linked_llama().context("cannot find the llama.cpp libraries this binary was built with; run it from its cargo target folder or pass --reference")?;
    let dir = home.root().join("bench");
    std::fs::create_dir_all(&dir)?;
    let bin = dir.join(name);
    if !quiet {
        eprintln!(
            "compiling the llama.cpp C API reference against {}",
            out.display()
        );
    }
    let lib = out.join("lib");
    let status = Command::new("g++")
        .args([
            "-O3",
            "-march=x86-64-v3",
            "-std=c++17",
            "-fopenmp",
            source,
            "-o",
        ])
        .arg(&bin)
        .arg(format!("-I{}", out.join("include").display()))
        .arg(format!("-L{}", lib.display()))
        .args([
            "-lllama",
            "-lggml",
            "-lggml-cpu",
            "-lggml-base",
            "-lpthread",
            "-ldl",
            "-lm",
        ])
        .status()
        .context("running g++ (install it: apt-get install g++)")?;
    if !status.success() {
        bail!("compiling the reference benchmark failed");
    }
    Ok(bin)
}
