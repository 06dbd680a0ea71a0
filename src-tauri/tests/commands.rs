//! The app's command list lives in five places that must agree: the list
//! itself (`src/command_names.rs`, which `build.rs` turns into permissions),
//! the handler in `src/main.rs`, the window's capability, and the typed
//! wrappers in `ui/src/ipc.ts` — the only UI file allowed to call `invoke`.

use std::collections::BTreeSet;
use std::path::Path;

include!("../src/command_names.rs");

fn read(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn listed() -> BTreeSet<String> {
    let set: BTreeSet<String> = COMMANDS.iter().map(|s| s.to_string()).collect();
    assert_eq!(set.len(), COMMANDS.len(), "a command is listed twice");
    set
}

#[test]
fn the_handler_registers_exactly_the_listed_commands() {
    let main = read("src/main.rs");
    let start = main
        .find("generate_handler![")
        .expect("generate_handler! in main.rs");
    let end = start + main[start..].find(']').unwrap();
    let handled: BTreeSet<String> = main[start + "generate_handler![".len()..end]
        .split(',')
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| s.rsplit("::").next().unwrap().to_string())
        .collect();
    assert_eq!(handled, listed());
}

#[test]
fn the_capability_grants_each_command_and_nothing_else() {
    let cap: serde_json::Value = serde_json::from_str(&read("capabilities/default.json")).unwrap();
    assert_eq!(cap["windows"], serde_json::json!(["main"]));
    let granted: BTreeSet<String> = cap["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().expect("plain permission names").to_string())
        .collect();
    let wanted: BTreeSet<String> = listed()
        .iter()
        .map(|c| format!("allow-{}", c.replace('_', "-")))
        .collect();
    assert_eq!(granted, wanted, "grant exactly the app's own commands");
}

#[test]
fn the_ui_wraps_every_command_and_calls_invoke_nowhere_else() {
    let ipc = read("../ui/src/ipc.ts");
    let mut wrapped = BTreeSet::new();
    for part in ipc.split("invoke<").skip(1) {
        let name = part.split('"').nth(1).expect("invoke<T>(\"name\"...)");
        wrapped.insert(name.to_string());
    }
    assert_eq!(wrapped, listed());
    let ui = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/src");
    let mut offenders = Vec::new();
    let mut stack = vec![ui];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().unwrap() != "ipc.ts" {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                if text.contains("@tauri-apps/api") || text.contains("__TAURI_INTERNALS__") {
                    offenders.push(p.display().to_string());
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "raw IPC outside ipc.ts: {offenders:?}"
    );
}

#[test]
fn the_window_loads_nothing_remote() {
    let conf: serde_json::Value = serde_json::from_str(&read("tauri.conf.json")).unwrap();
    let csp = &conf["app"]["security"]["csp"];
    assert_eq!(csp["default-src"], "'self'");
    assert_eq!(csp["script-src"], "'self'");
    let text = csp.to_string();
    assert!(!text.contains("http://") || text.contains("http://ipc.localhost"));
    assert!(!text.contains("https://"), "no remote origins: {text}");
    let dist = conf["build"]["frontendDist"].as_str().unwrap();
    assert!(!dist.starts_with("http"), "the UI ships inside the app");
}
