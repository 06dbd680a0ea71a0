//! File operations that cannot be led out of the workspace, even by a
//! folder swapped for a symlink between a check and a use: every path is
//! opened from a handle on the workspace root with
//! `openat2(RESOLVE_BENEATH)`, so the kernel itself refuses any step that
//! would leave it, and changes are made relative to the handle of the
//! folder that holds them (`mkdirat`, `unlinkat`, `renameat`).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};

use crate::workspace::Workspace;

fn resolve_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
}

impl Workspace {
    fn root_fd(&self) -> io::Result<OwnedFd> {
        Ok(rustix::fs::open(
            self.root(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// `abs` relative to the root (`.` for the root itself).
    fn relative<'a>(&self, abs: &'a Path) -> io::Result<&'a Path> {
        let rel = abs.strip_prefix(self.root()).map_err(|_| {
            io::Error::new(io::ErrorKind::PermissionDenied, "outside the workspace")
        })?;
        Ok(if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        })
    }

    /// Opens `abs` (inside the root) with `flags`, refusing any path that
    /// resolves outside the root at the moment of opening.
    pub(crate) fn open_beneath(&self, abs: &Path, flags: OFlags, mode: u32) -> io::Result<OwnedFd> {
        let root = self.root_fd()?;
        let rel = self.relative(abs)?;
        match rustix::fs::openat2(
            &root,
            rel,
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            resolve_flags(),
        ) {
            Err(rustix::io::Errno::XDEV) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "it leads out of the workspace through a symbolic link",
            )),
            // Kernels before 5.6: the path was checked by `resolve`.
            Err(rustix::io::Errno::NOSYS) => Ok(rustix::fs::openat(
                &root,
                rel,
                flags | OFlags::CLOEXEC,
                Mode::from_raw_mode(mode),
            )?),
            other => Ok(other?),
        }
    }

    /// A file opened for reading, beneath the root.
    pub(crate) fn open_read(&self, abs: &Path, extra: OFlags) -> io::Result<File> {
        Ok(File::from(self.open_beneath(
            abs,
            OFlags::RDONLY | extra,
            0,
        )?))
    }

    /// The folder that holds `abs`, opened beneath the root, and the last
    /// component's name.
    fn parent_of(&self, abs: &Path) -> io::Result<(OwnedFd, OsString)> {
        let name = abs
            .file_name()
            .filter(|_| abs != self.root())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the workspace root"))?
            .to_os_string();
        let parent = abs.parent().unwrap_or(self.root());
        let dir = self.open_beneath(parent, OFlags::RDONLY | OFlags::DIRECTORY, 0)?;
        Ok((dir, name))
    }

    /// Creates `abs` and any missing folders above it, one at a time from
    /// the root.
    pub(crate) fn make_dirs(&self, abs: &Path) -> io::Result<()> {
        let rel = self.relative(abs)?.to_path_buf();
        let mut done = self.root().to_path_buf();
        for c in rel.components() {
            let Component::Normal(part) = c else {
                continue;
            };
            let dir = self.open_beneath(&done, OFlags::RDONLY | OFlags::DIRECTORY, 0)?;
            match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            done.push(part);
        }
        // What is there now must be a folder beneath the root.
        self.open_beneath(abs, OFlags::RDONLY | OFlags::DIRECTORY, 0)
            .map(drop)
    }

    /// Replaces (or creates) the file `abs` with `bytes` through a
    /// temporary file in the same folder, synced, renamed over, and the
    /// folder synced: a crash leaves the old file or the new one. The old
    /// file's permissions are kept.
    pub(crate) fn write_atomic(&self, abs: &Path, bytes: &[u8]) -> io::Result<()> {
        let (dir, name) = self.parent_of(abs)?;
        let mode = match rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                st.st_mode & 0o7777
            }
            _ => 0o644,
        };
        let (tmp_name, fd) = create_temp(&dir, &name, mode)?;
        let result = (|| {
            let mut f = File::from(fd);
            f.write_all(bytes)?;
            // The mode given at creation was masked by the umask.
            rustix::fs::fchmod(&f, Mode::from_raw_mode(mode))?;
            f.sync_all()?;
            rustix::fs::renameat(&dir, &tmp_name, &dir, &name)?;
            rustix::fs::fsync(&dir)?;
            Ok(())
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, &tmp_name, AtFlags::empty());
        }
        result
    }

    /// Saves `bytes` in the folder `dir_abs` under the first of `names`
    /// that is free (never replacing a file); returns the name used.
    pub(crate) fn save_new(
        &self,
        dir_abs: &Path,
        bytes: &[u8],
        names: impl Iterator<Item = String>,
    ) -> io::Result<String> {
        let dir = self.open_beneath(dir_abs, OFlags::RDONLY | OFlags::DIRECTORY, 0)?;
        let (tmp_name, fd) = create_temp(&dir, OsStr::new("attachment"), 0o644)?;
        let mut f = File::from(fd);
        let written = f.write_all(bytes).and_then(|_| f.sync_all());
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir, &tmp_name, AtFlags::empty());
            return Err(e);
        }
        for name in names {
            match rustix::fs::renameat_with(&dir, &tmp_name, &dir, &name, RenameFlags::NOREPLACE) {
                Ok(()) => {
                    rustix::fs::fsync(&dir)?;
                    return Ok(name);
                }
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => {
                    let _ = rustix::fs::unlinkat(&dir, &tmp_name, AtFlags::empty());
                    return Err(e.into());
                }
            }
        }
        let _ = rustix::fs::unlinkat(&dir, &tmp_name, AtFlags::empty());
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "every name is taken",
        ))
    }

    /// The entries of the folder `abs`, opened beneath the root: name,
    /// whether it is a folder (links are not followed out), size.
    pub(crate) fn list(&self, abs: &Path) -> io::Result<Vec<(String, bool, u64)>> {
        let dir = self.open_beneath(abs, OFlags::RDONLY | OFlags::DIRECTORY, 0)?;
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(&dir)? {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            // A link counts as what it leads to, when that is beneath the root.
            let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
            let st = match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink => self
                    .open_beneath(&abs.join(name), OFlags::PATH, 0)
                    .and_then(|fd| Ok(rustix::fs::fstat(&fd)?))
                    .unwrap_or(st),
                _ => st,
            };
            let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
            out.push((
                name.to_string_lossy().into_owned(),
                is_dir,
                st.st_size as u64,
            ));
        }
        Ok(out)
    }

    /// Removes the file, link or folder tree `abs`. Links are removed, not
    /// followed; the walk goes from folder handle to folder handle.
    pub(crate) fn remove(&self, abs: &Path) -> io::Result<()> {
        let (dir, name) = self.parent_of(abs)?;
        remove_at(&dir, &name)
    }
}

/// Creates `.NAME.XXXXXX.partial` in `dir` exclusively.
fn create_temp(dir: &OwnedFd, name: &OsStr, mode: u32) -> io::Result<(OsString, OwnedFd)> {
    for _ in 0..100 {
        let mut tmp = OsString::from(".");
        tmp.push(name);
        tmp.push(format!(".{:08x}.partial", rand_u32()));
        match rustix::fs::openat(
            dir,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        ) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary name",
    ))
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish() as u32
}

fn remove_at(dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?);
    }
    let child = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&child)? {
        let entry = entry?;
        let n = entry.file_name().to_bytes();
        if n != b"." && n != b".." {
            names.push(OsStr::from_bytes(n).to_os_string());
        }
    }
    for n in names {
        remove_at(&child, &n)?;
    }
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}
