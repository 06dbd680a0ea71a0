//! The Debian package's declaration, checked without building it (a release
//! build of the window takes longer than the rest of the tests; `sudo
//! scripts/package --check` builds and installs the real package): the
//! installed program has the name the desktop entry and the scripts use,
//! every icon exists, and the dependencies the app calls at run time are
//! declared.

use std::path::Path;

use serde_json::Value;

fn config() -> Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(dir.join("tauri.conf.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_package_installs_reverie_desktop_with_its_icons() {
    let c = config();
    assert_eq!(
        c["mainBinaryName"], "reverie-desktop",
        "the desktop entry and README start `reverie-desktop`"
    );
    assert_eq!(c["bundle"]["targets"], serde_json::json!(["deb"]));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let icons = c["bundle"]["icon"].as_array().unwrap();
    assert!(!icons.is_empty());
    for icon in icons {
        let path = dir.join(icon.as_str().unwrap());
        assert!(path.is_file(), "icon {} is missing", path.display());
    }
}

#[test]
fn the_package_declares_what_the_app_runs() {
    let c = config();
    let deb = &c["bundle"]["linux"]["deb"];
    let depends: Vec<&str> = deb["depends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    // python3: the python tool; python3-pip: the model fetch (`pip
    // download`); git: the git tools; xdg-utils: links open in the browser.
    for needed in ["python3", "python3-pip", "git", "xdg-utils"] {
        assert!(
            depends.contains(&needed),
            "{needed} is not declared: {depends:?}"
        );
    }
    // The command line is added by scripts/package, which knows where it was
    // built: the checked-in file must not point at one machine's folder.
    assert!(
        deb["files"].as_object().is_none_or(|f| f.is_empty()),
        "files are added by scripts/package: {}",
        deb["files"]
    );
    let script =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/package"))
            .unwrap();
    assert!(script.contains(r#""/usr/bin/reverie":"#));
}
