//! `reverie bench tools`: tool calling on the Berkeley Function Calling
//! Leaderboard's AST-checked categories, through `reverie serve` and,
//! side by side on the same GGUF with the same threads and greedy
//! sampling, through the OpenAI-compatible server of `llama-cpp-python`
//! (built from source by pip, the GGUF's own chat template). Cases, tool
//! conversion and grading are `bfcl-eval`'s own (`scripts/bench/bfcl.py`);
//! both are installed into a virtual environment in the data folder on
//! first use.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use reverie_core::Home;

use crate::output;

const DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/bench/bfcl.py");

/// `bfcl-eval` is installed without its dependencies (they include the
/// SDKs of every hosted model and PyTorch); these are what its checker and
/// tool converter import, pinned where it pins them.
const BFCL_DEPS: &[&str] = &[
    "openai",
    "anthropic",
    "mistralai==1.7.0",
    "cohere==5.18.0",
    "google-genai",
    "boto3",
    "qwen-agent",
    "writer-sdk",
    "numpy==1.26.4",
    "filelock==3.20.0",
    "tree_sitter==0.21.3",
    "tree-sitter-java==0.21.0",
    "tree-sitter-javascript==0.21.4",
    "datamodel-code-generator==0.25.7",
    "tenacity",
    "overrides",
    "soundfile",
    "python-dotenv",
    "pydantic",
    "requests",
    "tqdm",
];
const BFCL_VERSION: &str = "bfcl-eval==2026.3.23";

#[derive(Args)]
pub struct ToolsArgs {
    /// The GGUF to test (default: the active model).
    #[arg(long)]
    model: Option<PathBuf>,
    /// BFCL categories, comma-separated.
    #[arg(long, default_value = "live_simple,live_multiple")]
    categories: String,
    /// Cases per category (the first N of each).
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// CPU threads for both servers (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Context of both servers.
    #[arg(long, default_value_t = 4096)]
    ctx: u32,
    /// Run only Reverie's server (no reference).
    #[arg(long)]
    no_reference: bool,
    /// The reference server's `--chat_format` (e.g.
    /// `chatml-function-calling`, its own parser of calls for ChatML
    /// models); by default it renders the GGUF's own template and returns
    /// calls as text.
    #[arg(long)]
    reference_chat_format: Option<String>,
    /// Python that makes the virtual environment.
    #[arg(long, default_value = "python3")]
    python: String,
    #[arg(long)]
    json: bool,
}

/// A server process, stopped when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn tools(home: &Home, a: ToolsArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(a.limit > 0, "ask for at least one case (--limit 1 or more)");
    let model = reverie_models::active::resolve(home, a.model.as_deref())?;
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let py = bench_python(home, &a.python, !a.no_reference)?;
    let bench = crate::bench::fresh_home(home, "tools", Some(&model))?;

    eprintln!("reverie serve on {}", model.display());
    let port = free_port()?;
    let ours = {
        let _server = start_reverie(&bench, &model, port, threads, a.ctx)?;
        let token = reverie_serve::api_token(bench.root())?;
        run_driver(
            &py,
            port,
            &token,
            &a,
            &bench.root().join("reverie-cases.jsonl"),
        )?
    };
    let mut reference_error = None;
    let reference = if a.no_reference {
        None
    } else {
        eprintln!("llama-cpp-python's server on the same file");
        let port = free_port()?;
        let log = bench.root().join("reference.log");
        let mut server = start_reference(
            &py,
            &model,
            port,
            threads,
            a.ctx,
            a.reference_chat_format.as_deref(),
            &log,
        )?;
        let cases = bench.root().join("reference-cases.jsonl");
        let measured = run_driver(&py, port, "none", &a, &cases)?;
        // A server that died mid-run turns every later case into a
        // connection error: say so instead of scoring them.
        match server.0.try_wait()? {
            Some(status) => {
                let why = format!(
                    "the reference server exited ({status}) during the run; its log is {}",
                    log.display()
                );
                eprintln!("{why}");
                reference_error = Some(why);
                None
            }
            None => Some(measured),
        }
    };
    let categories: Vec<&str> = a.categories.split(',').filter(|c| !c.is_empty()).collect();
    let per_category: serde_json::Map<String, serde_json::Value> = categories
        .iter()
        .map(|c| {
            let o = &ours[*c];
            let r = reference.as_ref().map(|r| r[*c].clone());
            let ratio = |key: &str| {
                r.as_ref().and_then(|r| {
                    let (x, y) = (o[key].as_f64()?, r[key].as_f64()?);
                    (y > 0.0).then_some(x / y)
                })
            };
            (
                c.to_string(),
                serde_json::json!({
                    "reverie": o,
                    "reference": r,
                    "accuracy_ratio": ratio("accuracy"),
                    "text_accuracy_ratio": ratio("text_accuracy"),
                }),
            )
        })
        .collect();
    let report = serde_json::json!({
        "model": model,
        "threads": threads,
        "limit": a.limit,
        "bfcl": BFCL_VERSION,
        "categories": per_category,
        "reference_chat_format": a.reference_chat_format,
        "reference_error": reference_error,
        "cases": bench.root(),
    });
    if a.json {
        output::json(&report)?;
    } else {
        if let Some(why) = report["reference_error"].as_str() {
            println!("no reference figures: {why}");
        }
        println!(
            "case by case: {}/{{reverie,reference}}-cases.jsonl",
            bench.root().display()
        );
        for (c, v) in &per_category {
            let line = |s: &serde_json::Value| {
                format!(
                    "{:5.1}% right ({:5.1}% reading calls from the text too), {:4.1}% calls unparsed, {:4.1}% no call, {:5.1} s a case",
                    s["accuracy"].as_f64().unwrap_or(0.0) * 100.0,
                    s["text_accuracy"].as_f64().unwrap_or(0.0) * 100.0,
                    s["unparsed_share"].as_f64().unwrap_or(0.0) * 100.0,
                    s["no_call_share"].as_f64().unwrap_or(0.0) * 100.0,
                    s["seconds_per_case"].as_f64().unwrap_or(0.0)
                )
            };
            println!("{c}: reverie {}", line(&v["reverie"]));
            if !v["reference"].is_null() {
                println!("{c}: llama-cpp-python {}", line(&v["reference"]));
                for (key, what) in [
                    ("accuracy_ratio", "accuracy ratio"),
                    ("text_accuracy_ratio", "ratio reading calls from the text"),
                ] {
                    match v[key].as_f64() {
                        Some(r) => println!("{c}: {what} {r:.2}"),
                        None => println!("{c}: {what}: none (the reference got none right)"),
                    }
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The reference server, built from source on this machine.
const REFERENCE: &str = "llama-cpp-python[server]==0.3.36";

/// Its llama.cpp is built for the instruction set Reverie's own is built for
/// (x86-64-v3: AVX2, FMA, F16C, BMI2; `.cargo/config.toml`), not for the
/// build machine's, so that both servers run the same kernels. (Its default
/// native build crashed on every batched decode on an AVX-512 machine.)
const REFERENCE_CMAKE_ARGS: &str = if cfg!(target_arch = "x86_64") {
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
} else {
    ""
};

/// The virtual environment with `bfcl-eval` (and, for the reference,
/// `llama-cpp-python[server]`), made on first use.
fn bench_python(home: &Home, python: &str, reference: bool) -> anyhow::Result<PathBuf> {
    let venv = home.root().join("bench").join("bfcl-venv");
    let py = venv.join("bin").join("python");
    let imports = |what: &str| {
        Command::new(&py)
            .args(["-c", what])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let pip = |args: &[&str]| -> anyhow::Result<()> {
        let ok = Command::new(&py)
            .args(["-m", "pip", "install", "-q"])
            .args(args)
            .env("CMAKE_ARGS", REFERENCE_CMAKE_ARGS)
            .status()
            .with_context(|| format!("running pip in {}", venv.display()))?
            .success();
        if !ok {
            bail!("pip could not install {args:?} into {}", venv.display());
        }
        Ok(())
    };
    if !py.exists() {
        let ok = Command::new(python)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .with_context(|| format!("running {python} -m venv"))?
            .success();
        if !ok {
            bail!("could not make a virtual environment at {}", venv.display());
        }
    }
    if !imports("from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker") {
        eprintln!("installing {BFCL_VERSION} into {}", venv.display());
        pip(&["--no-deps", BFCL_VERSION])?;
        pip(BFCL_DEPS)?;
    }
    if reference {
        // A build made with other settings (an earlier native one) is
        // replaced, so that both servers run the same kernels.
        let marker = venv.join("reference-build");
        let wanted = format!("{REFERENCE} {REFERENCE_CMAKE_ARGS}");
        let built = std::fs::read_to_string(&marker).unwrap_or_default();
        let present = imports("import llama_cpp.server");
        if !present || built.trim() != wanted {
            eprintln!(
                "building {REFERENCE} from source into {} (minutes)",
                venv.display()
            );
            let again: &[&str] = if present {
                &["--force-reinstall", "--no-deps"]
            } else {
                &[]
            };
            pip(&[again, &["--no-cache-dir", REFERENCE]].concat())?;
            std::fs::write(&marker, wanted)?;
        }
    }
    Ok(py)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `reverie serve` on `model`, not recording, one slot; returns once it
/// listens.
fn start_reverie(
    bench: &Home,
    model: &Path,
    port: u16,
    threads: usize,
    ctx: u32,
) -> anyhow::Result<Server> {
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--home"])
        .arg(bench.root())
        .args(["serve", "--no-record", "--slots", "1", "--port"])
        .arg(port.to_string())
        .arg("--model")
        .arg(model)
        .args(["--threads", &threads.to_string(), "--ctx", &ctx.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting reverie serve")?;
    let stdout = child.stdout.take().context("reverie serve's output")?;
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    if !line.starts_with("serving") {
        bail!("reverie serve did not start: {line:?}");
    }
    Ok(server)
}

/// llama-cpp-python's server on `model`; returns once `/v1/models`
/// answers.
fn start_reference(
    py: &Path,
    model: &Path,
    port: u16,
    threads: usize,
    ctx: u32,
    chat_format: Option<&str>,
    log: &Path,
) -> anyhow::Result<Server> {
    let log = std::fs::File::create(log)?;
    let mut command = Command::new(py);
    command.args(["-m", "llama_cpp.server"]);
    if let Some(format) = chat_format {
        command.args(["--chat_format", format]);
    }
    let server = Server(
        command
            .args(["--host", "127.0.0.1", "--model"])
            .arg(model)
            .args([
                "--port",
                &port.to_string(),
                "--n_ctx",
                &ctx.to_string(),
                "--n_threads",
                &threads.to_string(),
                "--n_threads_batch",
                &threads.to_string(),
            ])
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting llama-cpp-python's server")?,
    );
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(300) {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    bail!("llama-cpp-python's server did not listen on port {port} within 5 minutes")
}

/// Runs the BFCL driver against the server on `port`; each case's question,
/// reply and verdict go to `cases` (JSON lines).
fn run_driver(
    py: &Path,
    port: u16,
    key: &str,
    a: &ToolsArgs,
    cases: &Path,
) -> anyhow::Result<serde_json::Value> {
    let out = Command::new(py)
        .arg(DRIVER)
        .arg("--cases")
        .arg(cases)
        .args(["--base-url", &format!("http://127.0.0.1:{port}/v1")])
        .args(["--api-key", key, "--categories", &a.categories])
        .args(["--limit", &a.limit.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .context("running the BFCL driver")?;
    if !out.status.success() {
        bail!("the BFCL driver failed ({})", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).with_context(|| format!("reading the driver's report {last:?}"))
}
