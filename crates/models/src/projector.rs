//! Which multimodal projector (an `mmproj` GGUF) lets the model see images.
//!
//! A projector is chosen with [`choose`] (`reverie model projector FILE`),
//! or found beside the model: an `mmproj*.gguf`, or any GGUF whose
//! architecture is `clip`, in the model's folder. Choosing a model that has
//! one beside it records it, so the checkpoints nights make from that model
//! (which live elsewhere) keep seeing.

use std::fs;
use std::path::{Path, PathBuf};

use reverie_core::Home;

use crate::active::write_pointer;
use crate::error::{io, ModelError};

/// Whether `path` is a projector rather than a language model.
pub fn is_projector(path: &Path) -> bool {
    reverie_gguf::GgufFile::open(path).is_ok_and(|f| f.architecture() == Some("clip"))
}

/// The projector in the same folder as `model`: when several are there,
/// the one whose name shares the longest start with the model's.
pub fn beside(model: &Path) -> Option<PathBuf> {
    let dir = model.parent()?;
    let stem = model.file_stem()?.to_string_lossy().to_lowercase();
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "gguf") && p != model)
        .filter(|p| is_projector(p))
        .collect();
    found.sort();
    let shared = |p: &PathBuf| {
        let name = p
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_lowercase();
        let name = name.trim_start_matches("mmproj-").to_string();
        name.chars()
            .zip(stem.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    found.into_iter().max_by_key(|p| shared(p))
}

/// Records `path` (checked to be a projector) as the one to use, or forgets
/// the choice with `None`.
pub fn choose(home: &Home, path: Option<&Path>) -> Result<Option<PathBuf>, ModelError> {
    let file = home.active_projector_file();
    let Some(path) = path else {
        match fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&file)(e)),
        }
        return Ok(None);
    };
    let path = fs::canonicalize(path).map_err(io(path))?;
    let header = reverie_gguf::GgufFile::open(&path)?;
    if header.architecture() != Some("clip") {
        return Err(ModelError::NotAProjector(path));
    }
    fs::create_dir_all(home.root()).map_err(io(home.root()))?;
    write_pointer(&file, &format!("{}\n", path.display()))?;
    Ok(Some(path))
}

/// The projector for `model`: the one chosen, else one beside the model.
/// A chosen file that has gone is an error that says what to do.
pub fn find(home: &Home, model: &Path) -> Result<Option<PathBuf>, ModelError> {
    if let Ok(text) = fs::read_to_string(home.active_projector_file()) {
        let p = PathBuf::from(text.trim());
        if !text.trim().is_empty() {
            if !p.exists() {
                return Err(ModelError::ProjectorMissing(p));
            }
            return Ok(Some(p));
        }
    }
    Ok(beside(model))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projector_is_found_beside_its_model_or_as_chosen() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("home"));
        let models = dir.path().join("models");
        fs::create_dir_all(&models).unwrap();
        let model = models.join("smolvlm-q8.gguf");
        reverie_gguf::synth::write(
            &model,
            &reverie_gguf::synth::SynthConfig::tiny(reverie_gguf::synth::Arch::Llama),
        )
        .unwrap();
        assert_eq!(find(&home, &model).unwrap(), None);
        assert!(!is_projector(&model));

        let other = models.join("mmproj-llava-f16.gguf");
        let mine = models.join("mmproj-smolvlm-f16.gguf");
        reverie_gguf::projector::write(&other, 64, 1).unwrap();
        reverie_gguf::projector::write(&mine, 64, 2).unwrap();
        assert!(is_projector(&mine));
        assert_eq!(find(&home, &model).unwrap(), Some(mine.clone()));

        // A choice wins over what lies beside the model, and must exist.
        let chosen = choose(&home, Some(&other)).unwrap().unwrap();
        assert_eq!(find(&home, &model).unwrap(), Some(chosen.clone()));
        let err = choose(&home, Some(&model)).unwrap_err().to_string();
        assert!(err.contains("not a multimodal projector"), "{err}");
        fs::remove_file(&other).unwrap();
        let err = find(&home, &model).unwrap_err().to_string();
        assert!(err.contains("--clear"), "{err}");
        choose(&home, None).unwrap();
        assert_eq!(find(&home, &model).unwrap(), Some(mine));
    }
}
