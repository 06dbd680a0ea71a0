//! The real app in a real window: `reverie-desktop` under Xvfb with a tiny
//! synthetic model, driven through WebKitWebDriver (the WebDriver server of
//! the WebKitGTK engine Tauri uses on Linux). It sends a message, waits for
//! the streamed reply, takes a screenshot, closes the window and checks the
//! app exited and left a sound database with both messages in it.
//!
//! Needs `Xvfb` and `WebKitWebDriver` (Debian: xvfb, webkit2gtk-driver);
//! `scripts/setup` installs them.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reverie_core::{Home, MessageRole};
use serde_json::{json, Value};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn need(tool: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{tool} is missing: run ./scripts/setup (Debian: xvfb, webkit2gtk-driver)")
        })
}

struct Driver {
    base: String,
    session: String,
}

impl Driver {
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{}", self.base, self.session, path);
        let req = ureq::request(method, &url).timeout(Duration::from_secs(60));
        let resp = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match resp {
            Ok(r) => r.into_json::<Value>().unwrap()["value"].clone(),
            Err(ureq::Error::Status(code, r)) => {
                panic!(
                    "{method} {path}: HTTP {code}: {}",
                    r.into_string().unwrap_or_default()
                )
            }
            Err(e) => panic!("{method} {path}: {e}"),
        }
    }

    /// Every element matching `css`, as WebDriver element ids.
    fn find_all(&self, css: &str) -> Vec<String> {
        let v = self.call(
            "POST",
            "/elements",
            Some(json!({"using": "css selector", "value": css})),
        );
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| e[ELEMENT].as_str().unwrap().to_string())
            .collect()
    }

    fn wait_for(&self, what: &str, secs: u64, mut ok: impl FnMut(&Driver) -> bool) {
        let until = Instant::now() + Duration::from_secs(secs);
        while !ok(self) {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn one(&self, css: &str) -> String {
        let mut found = Vec::new();
        self.wait_for(css, 30, |d| {
            found = d.find_all(css);
            !found.is_empty()
        });
        found.remove(0)
    }

    fn text(&self, el: &str) -> String {
        self.call("GET", &format!("/element/{el}/text"), None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

fn app_is_running(home: &Path) -> bool {
    let needle = home.display().to_string();
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c);
            c.contains("reverie-desktop") && c.contains(&needle)
        })
    })
}

#[test]
fn the_real_window_chats_with_a_tiny_model_and_exits_cleanly() {
    let xvfb = need("Xvfb");
    let driver_bin = need("WebKitWebDriver");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let model = dir.path().join("tiny-qwen2.gguf");
    reverie_gguf::synth::write(
        &model,
        &reverie_gguf::synth::SynthConfig::tiny(reverie_gguf::synth::Arch::Qwen2),
    )
    .unwrap();
    // Short replies and no tools: this checks the window, not the model.
    std::fs::write(
        home.join("settings.json"),
        serde_json::to_vec(&json!({"tools": false, "sampling": {"temperature": 0.0, "top_p": 1.0, "top_k": 1, "seed": 1, "max_tokens": 24}}))
            .unwrap(),
    )
    .unwrap();

    let display = format!(":{}", 90 + std::process::id() % 400);
    let _x = Killed(
        Command::new(xvfb)
            .args([
                display.as_str(),
                "-screen",
                "0",
                "1280x800x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(800));
    let port = free_port();
    let _wd = Killed(
        Command::new(driver_bin)
            .arg(format!("--port={port}"))
            .env("DISPLAY", &display)
            .env("TAURI_WEBVIEW_AUTOMATION", "true")
            .env("WEBKIT_DISABLE_COMPOSITING_MODE", "1")
            .env("LIBGL_ALWAYS_SOFTWARE", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let until = Instant::now() + Duration::from_secs(20);
    while ureq::get(&format!("{base}/status")).call().is_err() {
        assert!(Instant::now() < until, "WebKitWebDriver did not start");
        std::thread::sleep(Duration::from_millis(200));
    }
    let app = env!("CARGO_BIN_EXE_reverie-desktop");
    let caps = json!({"capabilities": {"alwaysMatch": {"webkitgtk:browserOptions": {
        "binary": app,
        "args": ["--home", home.display().to_string(), "--model", model.display().to_string(), "--ctx", "1024", "--threads", "2"],
    }}}});
    let resp: Value = ureq::post(&format!("{base}/session"))
        .timeout(Duration::from_secs(120))
        .send_json(caps)
        .unwrap_or_else(|e| panic!("starting the app through WebKitWebDriver: {e}"))
        .into_json()
        .unwrap();
    let d = Driver {
        base,
        session: resp["value"]["sessionId"].as_str().unwrap().to_string(),
    };

    // No channel yet: start one, then talk.
    let start = d.one(".empty-chat button");
    d.call("POST", &format!("/element/{start}/click"), Some(json!({})));
    let box_ = d.one("textarea[aria-label=Message]");
    d.call(
        "POST",
        &format!("/element/{box_}/value"),
        Some(json!({"text": "hello from the window\u{E007}"})),
    );
    d.wait_for("the user's message", 30, |d| {
        d.find_all("[data-testid=user-message]")
            .first()
            .is_some_and(|m| d.text(m).contains("hello from the window"))
    });
    d.wait_for("the reply to finish", 120, |d| {
        !d.find_all("[data-testid=assistant-message]").is_empty()
            && d.find_all(".cursor").is_empty()
            && !d
                .find_all(".composer button")
                .iter()
                .any(|b| d.text(b) == "Stop")
    });
    let shot = d.call("GET", "/screenshot", None);
    let png = base64_decode(shot.as_str().unwrap());
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/tests/screenshots");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("desktop-smoke.png"), &png).unwrap();

    // 👎 on the reply: stored for the night, shown as chosen. (After the
    // screenshot: WebKitWebDriver's screenshot hangs after a click.)
    let bad = d.one("[data-testid=rating] button[aria-label='Bad reply']");
    d.call("POST", &format!("/element/{bad}/click"), Some(json!({})));
    d.wait_for("the rating to show as chosen", 30, |d| {
        !d.find_all("[data-testid=rating] button[aria-pressed=true]")
            .is_empty()
    });

    // Close the window: the app must exit by itself.
    d.call("DELETE", "", None);
    let until = Instant::now() + Duration::from_secs(30);
    while app_is_running(&home) {
        assert!(
            Instant::now() < until,
            "the app did not exit after its window closed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let store = reverie_store::Store::open(&Home::new(&home)).unwrap();
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
    let ch = store
        .channel_by_name("general")
        .unwrap()
        .expect("the channel the window made");
    let msgs = store.messages(ch.id).unwrap();
    assert!(msgs
        .iter()
        .any(|m| m.role == MessageRole::User && m.text == "hello from the window"));
    let reply = msgs
        .iter()
        .find(|m| m.role == MessageRole::Assistant)
        .expect("a stored reply");
    assert!(
        !reply.tokens.ids.is_empty(),
        "the reply's tokens are recorded"
    );
    let rated = store.feedback(ch.id).unwrap();
    assert_eq!(rated.len(), 1, "the window's 👎 is stored: {rated:?}");
    assert_eq!((rated[0].message, rated[0].good), (reply.id, false));
    assert_eq!(
        reverie_night::lock::sleeping(&Home::new(&home)),
        None,
        "no night holds the lock"
    );
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}
