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

const LLAMA_SYS_VERSION: &str = env!("REVERIE_LLAMA_SYS_VERSION");

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
        /// An existing llama-bench binary (otherwise it is built).
        #[arg(long)]
        reference: Option<PathBuf>,
        /// The llama.cpp source to build llama-bench from.
        #[arg(long)]
        llama_src: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// LoRA step tokens/s and peak memory: ours vs PyTorch + PEFT.
    Train {
        #[arg(long)]
        model: Option<PathBuf>,
        /// Sequence lengths to measure.
        #[arg(long, value_delimiter = ',', default_value = "512,2048")]
        lengths: Vec<usize>,
        #[arg(long)]
        threads: Option<usize>,
        /// Python used for the reference (a venv with torch, transformers,
        /// peft and gguf is made under the home folder if needed).
        #[arg(long, default_value = "python3")]
        python: String,
        #[arg(long)]
        json: bool,
    },
    /// One measured LoRA step in this process (used by `bench train`).
    #[command(hide = true)]
    TrainStep {
        #[arg(long)]
        model: PathBuf,
        #[arg(long)]
        len: usize,
    },
    /// Merge + q8_0 export time: ours vs llama.cpp's quantize tool.
    Export {
        #[arg(long)]
        model: Option<PathBuf>,
        #[arg(long)]
        llama_src: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Serialize, Default)]
struct Speeds {
    prompt_tokens_per_s: f64,
    decode_tokens_per_s: f64,
}

pub fn run(home: &Home, cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Decode {
            engine,
            prompt_tokens,
            gen_tokens,
            reps,
            reference,
            llama_src,
            json,
        } => decode(
            home,
            engine,
            prompt_tokens,
            gen_tokens,
            reps,
            reference,
            llama_src,
            json,
        ),
        BenchCommand::Train {
            model,
            lengths,
            threads,
            python,
            json,
        } => crate::bench_train::train(home, model, lengths, threads, &python, json),
        BenchCommand::TrainStep { model, len } => crate::bench_train::train_step(&model, len),
        BenchCommand::Export {
            model,
            llama_src,
            json,
        } => crate::bench_train::export(home, model, llama_src, json),
    }
}

#[allow(clippy::too_many_arguments)]
fn decode(
    home: &Home,
    engine: EngineArgs,
    prompt_tokens: usize,
    gen_tokens: usize,
    reps: usize,
    reference: Option<PathBuf>,
    llama_src: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let model = reverie_models::active::resolve(home, engine.model.as_deref())?;
    let threads = engine
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let reps = reps.max(1);
    let reference = match reference {
        Some(r) => r,
        None => build_llama_tool(home, llama_src.as_deref(), "llama-bench", json)?,
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

/// The vendored llama.cpp that llama-cpp-sys-2 compiled into this binary.
fn vendored_source() -> Option<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".cargo")))?;
    let registry = cargo_home.join("registry").join("src");
    std::fs::read_dir(registry)
        .ok()?
        .filter_map(|e| e.ok())
        .find_map(|e| {
            let p = e
                .path()
                .join(format!("llama-cpp-sys-2-{LLAMA_SYS_VERSION}"))
                .join("llama.cpp");
            p.join("CMakeLists.txt").exists().then_some(p)
        })
}

/// Builds one of llama.cpp's own tools (`llama-bench`, `llama-quantize`)
/// from the vendored source, once, with the flags Reverie's library uses.
pub fn build_llama_tool(
    home: &Home,
    src: Option<&Path>,
    tool: &str,
    quiet: bool,
) -> anyhow::Result<PathBuf> {
    let src = match src {
        Some(s) => s.to_path_buf(),
        None => vendored_source().with_context(|| {
            format!("cannot find the vendored llama.cpp (llama-cpp-sys-2 {LLAMA_SYS_VERSION}) under $CARGO_HOME/registry/src; pass --llama-src or --reference")
        })?,
    };
    let build = home
        .root()
        .join("bench")
        .join(format!("llama-bench-{LLAMA_SYS_VERSION}"));
    let bin = build.join("bin").join(tool);
    if bin.exists() {
        return Ok(bin);
    }
    if !quiet {
        eprintln!(
            "building llama-bench from {} (a few minutes, once)",
            src.display()
        );
    }
    let jobs = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .to_string();
    // The same instruction set and build type as the library Reverie links.
    let status = Command::new("cmake")
        .arg("-S")
        .arg(&src)
        .arg("-B")
        .arg(&build)
        .args([
            "-DCMAKE_BUILD_TYPE=Release",
            "-DGGML_NATIVE=OFF",
            "-DGGML_AVX=ON",
            "-DGGML_AVX2=ON",
            "-DGGML_FMA=ON",
            "-DGGML_F16C=ON",
            "-DGGML_BMI2=ON",
            "-DGGML_SSE42=ON",
            "-DGGML_OPENMP=ON",
            "-DCMAKE_C_FLAGS=-march=x86-64-v3",
            "-DCMAKE_CXX_FLAGS=-march=x86-64-v3",
            "-DLLAMA_CURL=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_SERVER=OFF",
            "-DLLAMA_BUILD_TOOLS=ON",
            "-DBUILD_SHARED_LIBS=OFF",
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running cmake (install it: apt-get install cmake)")?;
    if !status.success() {
        bail!("cmake configure of {tool} failed");
    }
    let status = Command::new("cmake")
        .arg("--build")
        .arg(&build)
        .args(["--target", tool, "-j", &jobs])
        .stdout(std::process::Stdio::null())
        .status()?;
    if !status.success() || !bin.exists() {
        bail!("building {tool} failed");
    }
    Ok(bin)
}
