//! While a night runs, chat waits: a lock file in the data folder names the
//! process and the night. A lock left by a process that no longer exists is
//! ignored (a killed night must not block the morning).

use std::path::PathBuf;

use reverie_core::Home;

fn path(home: &Home) -> PathBuf {
    home.root().join("sleeping")
}

/// Held for as long as a night runs; removes the lock file when dropped.
pub struct SleepGuard {
    path: PathBuf,
}

impl SleepGuard {
    pub fn acquire(home: &Home) -> std::io::Result<SleepGuard> {
        std::fs::create_dir_all(home.root())?;
        let path = path(home);
        std::fs::write(&path, std::process::id().to_string())?;
        Ok(SleepGuard { path })
    }
}

impl Drop for SleepGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The pid of a running night, if one is running.
pub fn sleeping(home: &Home) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(path(home))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    std::path::Path::new(&format!("/proc/{pid}"))
        .exists()
        .then_some(pid)
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
        drop(g);
        assert_eq!(sleeping(&home), None);
        std::fs::write(dir.path().join("sleeping"), "4000000000").unwrap();
        assert_eq!(
            sleeping(&home),
            None,
            "a dead process does not hold the lock"
        );
    }
}
