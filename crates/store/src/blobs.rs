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

/// Writes `bytes` under `root` unless the blob already exists.
pub(crate) fn write(root: &Path, bytes: &[u8]) -> Result<BlobHash> {
    let hash = BlobHash::of(bytes);
    let dest = path_of(root, &hash);
    if dest.exists() {
        return Ok(hash);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Blob { path, source }
    };
    let dir = dest.parent().expect("blob path has a parent");
    fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = dir.join(format!(".{}.partial", &hash.0[2..]));
    let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    let mut perms = f.metadata().map_err(io(&tmp))?.permissions();
    perms.set_readonly(true);
    fs::set_permissions(&tmp, perms).map_err(io(&tmp))?;
    fs::rename(&tmp, &dest).map_err(io(&dest))?;
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
