//! `reverie serve`: the OpenAI-compatible API on 127.0.0.1.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use reverie_core::Home;

use crate::chat::EngineArgs;

#[derive(Args)]
pub struct ServeArgs {
    /// Port on 127.0.0.1 (never other interfaces).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Requests served at once (the engine's slots); more wait in its queue.
    #[arg(long, default_value_t = 4)]
    slots: usize,
    /// Print the bearer token clients must send, and exit.
    #[arg(long)]
    show_token: bool,
    /// Do not record the exchanges as `api-N` channels (which the nights
    /// judge and train on like any day channel).
    #[arg(long)]
    no_record: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

pub fn run(home: &Home, a: ServeArgs) -> anyhow::Result<ExitCode> {
    let token = reverie_serve::api_token(home.root()).with_context(|| {
        format!(
            "reading or creating {}",
            home.root().join(reverie_serve::TOKEN_FILE).display()
        )
    })?;
    if a.show_token {
        println!("{token}");
        return Ok(ExitCode::SUCCESS);
    }
    let engine = Arc::new(a.engine.load(home, a.slots.max(1))?);
    let recorder = if a.no_record {
        None
    } else {
        let store = reverie_store::Store::open(home).context("opening the data folder's store")?;
        Some(Arc::new(reverie_serve::record::Recorder::new(Arc::new(
            store,
        ))))
    };
    let model_id = engine
        .model_path()
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "default".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_io()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", a.port))
            .await
            .with_context(|| {
                format!(
                    "listening on 127.0.0.1:{} (is the port taken? pass --port)",
                    a.port
                )
            })?;
        let addr = listener.local_addr()?;
        // One line a script can wait for.
        println!(
            "serving {model_id} on http://{addr}/v1 (bearer token: `reverie serve --show-token`)"
        );
        use std::io::Write;
        std::io::stdout().flush()?;
        reverie_serve::serve(
            listener,
            reverie_serve::Server {
                engine,
                model_id,
                token,
                recorder,
            },
        )
        .await
        .context("serving")
    })?;
    Ok(ExitCode::SUCCESS)
}
