//! Content-addressed files: `blobs/ab/cdef…` named by SHA-256, written once,
//! read-only afterwards.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};

/// Hex SHA-256 of a blob's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BlobHash(pub String);

impl BlobHash {
    pub fn of(bytes: &[u8]) -> BlobHash {
        BlobHash(format!("{:x}", Sha256::digest(bytes)))
    }
}

pub(crate) fn path_of(root: &Path, hash: &BlobHash) -> PathBuf {
    root.join(&hash.0[..2]).join(&hash.0[2..])
}

/// Whether the blob at `dest` is whole: the right size and hash. A blob
/// cut short by a crash or a full disk is written again.
fn is_whole(dest: &Path, bytes: &[u8], hash: &BlobHash) -> bool {
    match fs::metadata(dest) {
        Ok(m) if m.len() == bytes.len() as u64 => {
            fs::read(dest).is_ok_and(|b| BlobHash::of(&b) == *hash)
        }
        _ => false,
    }
}

/// Writes `bytes` under `root` unless a whole copy is already there.
/// Each writer has its own temporary file (two writers of the same bytes
/// never share one); the file is synced, renamed into place, and the
/// folder synced so the rename survives a crash.
pub(crate) fn write(root: &Path, bytes: &[u8]) -> Result<BlobHash> {
    let hash = BlobHash::of(bytes);
    let dest = path_of(root, &hash);
    if is_whole(&dest, bytes, &hash) {
        return Ok(hash);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Blob { path, source }
    };
    let dir = dest.parent().expect("blob path has a parent");
    fs::create_dir_all(dir).map_err(io(dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", &hash.0[2..10]))
        .suffix(".partial")
        .tempfile_in(dir)
        .map_err(io(dir))?;
    tmp.write_all(bytes).map_err(io(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io(tmp.path()))?;
    let mut perms = tmp
        .as_file()
        .metadata()
        .map_err(io(tmp.path()))?
        .permissions();
    perms.set_readonly(true);
    fs::set_permissions(tmp.path(), perms).map_err(io(tmp.path()))?;
    tmp.persist(&dest).map_err(|e| StoreError::Blob {
        path: dest.clone(),
        source: e.error,
    })?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))?;
    Ok(hash)
}

pub(crate) fn read(root: &Path, hash: &BlobHash) -> Result<Vec<u8>> {
    let path = path_of(root, hash);
    let bytes = fs::read(&path).map_err(|source| StoreError::Blob { path, source })?;
    if BlobHash::of(&bytes) != *hash {
        return Err(StoreError::BlobMismatch(hash.0.clone()));
    }
    Ok(bytes)
}
