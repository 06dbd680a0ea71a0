//! A toolbox on a fresh data folder, and shorthands for calling it.
#![allow(dead_code)] // each test file uses a different part

use std::sync::Arc;

use reverie_core::Home;
use reverie_store::Store;
use reverie_tools::{Services, ToolOutput, Toolbox};
use serde_json::Value;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: Arc<Store>,
    pub services: Arc<Services>,
    pub tools: Toolbox,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::with_services(|s| s)
    }

    pub fn with_services(f: impl FnOnce(Services) -> Services) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("data"));
        let store = Arc::new(Store::open(&home).unwrap());
        let ch = store.ensure_channel("general").unwrap();
        let services = Arc::new(f(Services::new(&home)));
        let tools = Toolbox::open(store.clone(), ch, services.clone()).unwrap();
        Fixture {
            dir,
            store,
            services,
            tools,
        }
    }

    /// Reopens the toolbox as after a restart of the app.
    pub fn restart(self) -> Fixture {
        let home = Home::new(self.dir.path().join("data"));
        let store = Arc::new(Store::open(&home).unwrap());
        let ch = store.ensure_channel("general").unwrap();
        let services = Arc::new(Services::new(&home));
        let tools = Toolbox::open(store.clone(), ch, services.clone()).unwrap();
        Fixture {
            dir: self.dir,
            store,
            services,
            tools,
        }
    }

    pub fn ok(&self, name: &str, args: Value) -> ToolOutput {
        match self.tools.call(name, &args) {
            Ok(o) => o,
            Err(e) => panic!("{name} {args} failed: {e}"),
        }
    }

    pub fn ok_text(&self, name: &str, args: Value) -> String {
        self.ok(name, args).text
    }

    /// The error text of a call that must fail.
    pub fn err(&self, name: &str, args: Value) -> String {
        match self.tools.call(name, &args) {
            Ok(o) => panic!("{name} {args} should fail, gave: {}", o.text),
            Err(e) => e.to_string(),
        }
    }

    /// The data folder (database, blobs, models).
    pub fn data(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    pub fn path(&self, rel: &str) -> std::path::PathBuf {
        self.tools.workspace().root().join(rel)
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }
}

/// Asserts `haystack` contains `needle`, showing both when not.
#[track_caller]
pub fn assert_has(haystack: &str, needle: &str) {
    assert!(
        haystack.contains(needle),
        "expected {needle:?} in:\n{haystack}"
    );
}
