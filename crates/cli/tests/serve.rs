//! `reverie serve` on the real default model, driven by the official
//! `openai` Python SDK (installed from PyPI into a virtual environment kept
//! between runs): models, chat, streaming, tools with every tool_choice,
//! JSON schemas, error statuses and concurrent streaming clients.

mod util;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const OPENAI: &str = "openai==1.109.1";

/// A Python with the openai SDK.
fn openai_python() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("openai-venv");
    let python = venv.join("bin/python");
    let ready = Command::new(&python)
        .args(["-c", "import openai"])
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        assert!(Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap()
            .success());
        let ok = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", OPENAI])
            .status()
            .unwrap()
            .success();
        assert!(ok, "pip could not install {OPENAI}");
    }
    python
}

fn default_model_home() -> PathBuf {
    std::env::var("REVERIE_TEST_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_TARGET_TMPDIR")).join("default-model-home"))
}

/// The listening sockets on `port`, as /proc/net/tcp writes their local address.
fn listeners(port: u16) -> Vec<String> {
    let port_hex = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 3 && f[1].ends_with(&port_hex) && f[3] == "0A").then(|| f[1].to_string())
        })
        .collect()
}

#[test]
fn the_openai_sdk_talks_to_reverie_serve() {
    let home = default_model_home();
    let fetched = util::reverie(&home, &["model", "fetch", "--json"]);
    let model = util::json(&fetched)["path"].as_str().unwrap().to_string();
    let python = openai_python();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = util::command(&home)
        .args([
            "serve",
            "--model",
            &model,
            "--port",
            &port.to_string(),
            "--ctx",
            "4096",
            "--slots",
            "4",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("serving "), "{first}");
    assert_eq!(
        listeners(port),
        vec![format!("0100007F:{port:04X}")],
        "it listens on 127.0.0.1 only"
    );
    let token = String::from_utf8(util::reverie(&home, &["serve", "--show-token"]).stdout).unwrap();
    let id = Path::new(&model)
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let out = Command::new(python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/client.py"))
        .args([
            &format!("http://127.0.0.1:{port}/v1"),
            token.trim(),
            &id,
            "5",
            "8",
        ])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("{}", serde_json::to_string_pretty(&v).unwrap());

    assert_eq!(v["models"], serde_json::json!([id]));
    assert!(!v["plain"]["content"].as_str().unwrap().trim().is_empty());
    let usage = v["plain"]["usage"].as_array().unwrap();
    assert_eq!(
        usage[0].as_u64().unwrap() + usage[1].as_u64().unwrap(),
        usage[2].as_u64().unwrap()
    );
    assert!(
        v["stream"]["text"].as_str().unwrap().contains('1'),
        "{}",
        v["stream"]
    );
    assert_eq!(v["stream"]["ids"], 1);
    assert!(v["stream"]["finish"].is_string());
    // The call grammar holds calls to the tools and their schemas.
    for case in ["auto", "required"] {
        let (calls, finish) = (&v[case][0], &v[case][1]);
        assert_eq!(finish, "tool_calls", "{case}: {}", v[case]);
        assert_eq!(calls[0][0], "get_weather", "{case}: {}", v[case]);
        assert!(
            calls[0][1]["city"].as_str().unwrap().contains("Paris"),
            "{case}: {}",
            v[case]
        );
    }
    assert_eq!(v["named"][0][0][0], "add", "{}", v["named"]);
    assert!(v["named"][0][0][1]["a"].is_number());
    assert_eq!(
        v["none"][0],
        serde_json::json!([]),
        "tool_choice none: {}",
        v["none"]
    );
    assert_eq!(v["stream_call"], serde_json::json!(["get_weather"]));
    let json: serde_json::Value = serde_json::from_str(v["json"].as_str().unwrap()).unwrap();
    assert!(
        json["city"].is_string() && json["population"].is_i64(),
        "{json}"
    );
    let errors = &v["errors"];
    assert_eq!(errors["key"][0], 401, "{errors}");
    assert_eq!(
        errors["model"],
        serde_json::json!([404, "NotFoundError", "model_not_found"])
    );
    assert_eq!(errors["temperature"][0], 400);
    assert_eq!(
        errors["overflow"],
        serde_json::json!([400, "BadRequestError", "context_length_exceeded"])
    );
    let concurrent = v["concurrent"].as_array().unwrap();
    assert_eq!(concurrent.len(), 40);
    for c in concurrent {
        assert_eq!(c["ids"], 1, "a stream mixed replies: {c}");
        assert_eq!(c["finished"], true, "a stream did not finish: {c}");
    }
}
