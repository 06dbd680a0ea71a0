//! The models a person can choose from: installed catalogue models, any
//! other GGUF in the models folder, and the checkpoints nights made.

use std::path::{Path, PathBuf};

use reverie_core::Home;

use crate::catalogue::CATALOGUE;
use crate::fetch::installed_path;

/// One model to choose from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelChoice {
    pub path: PathBuf,
    pub label: String,
    /// It is the model Reverie runs now.
    pub active: bool,
}

/// Whether two paths name the same file (links and `..` resolved).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
}

/// The installed catalogue models, then every other GGUF in the models
/// folder, then `checkpoints` (path and label) that still exist, each file
/// once; `active` is marked.
pub fn discover(
    home: &Home,
    checkpoints: Vec<(PathBuf, String)>,
    active: Option<&Path>,
) -> Vec<ModelChoice> {
    let mut found: Vec<(PathBuf, String)> = Vec::new();
    let mut add = |path: PathBuf, label: String| {
        if path.exists() && !found.iter().any(|(q, _)| same_file(q, &path)) {
            found.push((path, label));
        }
    };
    for spec in CATALOGUE {
        add(installed_path(home, spec), spec.display_name.to_string());
    }
    let mut others: Vec<PathBuf> = std::fs::read_dir(home.models())
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    others.sort();
    for p in others {
        if p.extension().is_some_and(|x| x == "gguf") && !crate::projector::is_projector(&p) {
            let label = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            add(p, label);
        }
    }
    for (p, label) in checkpoints {
        add(p, label);
    }
    found
        .into_iter()
        .map(|(path, label)| ModelChoice {
            active: active.is_some_and(|a| same_file(a, &path)),
            path,
            label,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_is_offered_once_and_the_active_one_is_found_by_any_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        std::fs::create_dir_all(home.models()).unwrap();
        let mine = home.models().join("mine.gguf");
        std::fs::write(&mine, b"GGUF").unwrap();
        std::fs::write(home.models().join("notes.txt"), b"x").unwrap();
        let night = dir.path().join("night-1.gguf");
        std::fs::write(&night, b"GGUF").unwrap();
        let gone = dir.path().join("gone.gguf");
        // The active model named through a `..` detour.
        let spelled = home.models().join("..").join("models").join("mine.gguf");
        let found = discover(
            &home,
            vec![
                (night.clone(), "checkpoint 2 (night 1)".into()),
                (mine.clone(), "checkpoint 1 (base)".into()),
                (gone, "checkpoint 3 (night 2)".into()),
            ],
            Some(&spelled),
        );
        let labels: Vec<&str> = found.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["mine.gguf", "checkpoint 2 (night 1)"]);
        assert!(found[0].active && !found[1].active);
    }
}
