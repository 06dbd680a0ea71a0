//! While a night runs, chat waits. The night holds an OS lock (`flock`) on
//! `sleeping` in the data folder for as long as it runs; the file also
//! names the process, for messages. The kernel drops the lock when the
//! process ends in any way, so a killed night never blocks the morning,
//! and two nights can never both take it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use reverie_core::Home;

fn path(home: &Home) -> PathBuf {
    home.root().join("sleeping")
}

fn open(home: &Home) -> std::io::Result<File> {
    std::fs::create_dir_all(home.root())?;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path(home))
}

/// Held for as long as a night runs; the lock goes with it.
pub struct SleepGuard {
    file: File,
}

impl SleepGuard {
    /// Takes the lock, or says which process holds it.
    pub fn acquire(home: &Home) -> std::io::Result<SleepGuard> {
        let mut file = open(home)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder =
                    holder(&mut file).map_or("another process".into(), |p| format!("process {p}"));
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    format!("a night is already running ({holder}); wait for it or stop it"),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        file.set_len(0)?;
        file.write_all(std::process::id().to_string().as_bytes())?;
        file.sync_all()?;
        Ok(SleepGuard { file })
    }
}

impl Drop for SleepGuard {
    fn drop(&mut self) {
        // The file stays (removing it would let a second night lock a
        // different inode); only the lock goes.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

fn holder(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// The pid of a running night, if one is running (0 when the holder did
/// not write its pid yet).
pub fn sleeping(home: &Home) -> Option<u32> {
    let mut file = std::fs::File::open(path(home)).ok()?;
    match file.try_lock_shared() {
        Ok(()) => None,
        Err(_) => Some(holder(&mut file).unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_lives_with_its_guard_and_ignores_dead_processes() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        assert_eq!(sleeping(&home), None);
        let g = SleepGuard::acquire(&home).unwrap();
        assert_eq!(sleeping(&home), Some(std::process::id()));
        let second = SleepGuard::acquire(&home)
            .err()
            .expect("one night at a time");
        assert!(second.to_string().contains("already running"), "{second}");
        drop(g);
        assert_eq!(sleeping(&home), None);
        std::fs::write(dir.path().join("sleeping"), "4000000000").unwrap();
        assert_eq!(
            sleeping(&home),
            None,
            "a pid left in the file does not hold the lock"
        );
        drop(SleepGuard::acquire(&home).unwrap());
    }
}
