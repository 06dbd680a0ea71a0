//! An export that runs out of room mid-file: the writer fails while the
//! reader is ahead of it; the export returns the error (no hang) and leaves
//! no file behind. Its own process, since the file-size limit that stands
//! in for a full disk is process-wide; the limit is lifted before anything
//! is printed, since it holds for a log file the output may go to as well.

use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_train::export::write_merged_q8_0;
use reverie_train::Model;

#[test]
fn a_full_disk_mid_export_is_an_error_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.gguf");
    synth::write(&base, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
    let m = Model::load(&base).unwrap();
    let limit = std::fs::metadata(&base).unwrap().len() / 8;
    let out = dir.path().join("out.gguf");
    let err = with_file_size_limit(limit, || write_merged_q8_0(&m, None, &out))
        .unwrap_err()
        .to_string();
    assert!(err.contains("out.gguf"), "the error names the file: {err}");
    assert!(!out.exists(), "no export after a failed write");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left,
        vec!["base.gguf".to_string()],
        "no partial file: {left:?}"
    );
}

/// Runs `f` with writes past `limit` bytes of any file failing with EFBIG
/// (instead of raising SIGXFSZ), then lifts the limit again.
fn with_file_size_limit<T>(limit: u64, f: impl FnOnce() -> T) -> T {
    let set = |cur: u64| {
        let lim = libc::rlimit {
            rlim_cur: cur,
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: plain libc calls with valid arguments.
        unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &lim) }
    };
    // SAFETY: as above.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    assert_eq!(set(limit), 0);
    let out = f();
    assert_eq!(set(libc::RLIM_INFINITY), 0);
    out
}
