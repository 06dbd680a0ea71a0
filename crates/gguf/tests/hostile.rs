//! Hostile headers: crafted counts, shapes and offsets, and random
//! mutations of a real header. The reader must answer every one with a
//! value or an error, never a panic or an allocation the file cannot back.

use std::io::Cursor;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use reverie_gguf::synth::{Arch, SynthConfig};
use reverie_gguf::{GgufError, GgufFile};

fn open(bytes: &[u8]) -> Result<GgufFile, GgufError> {
    GgufFile::read_from("crafted.gguf", Cursor::new(bytes), bytes.len() as u64)
}

/// A header with one metadata entry and one tensor; the closures write
/// the parts an attacker controls.
fn header(kv: impl Fn(&mut Vec<u8>), tensor: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes()); // tensors
    b.extend(1u64.to_le_bytes()); // metadata
    kv(&mut b);
    tensor(&mut b);
    b.resize(b.len() + 4096, 0);
    b
}

fn key(b: &mut Vec<u8>, k: &str) {
    b.extend((k.len() as u64).to_le_bytes());
    b.extend(k.as_bytes());
}

fn plain_kv(b: &mut Vec<u8>) {
    key(b, "general.architecture");
    b.extend(8u32.to_le_bytes());
    b.extend(5u64.to_le_bytes());
    b.extend(b"llama");
}

fn plain_tensor(b: &mut Vec<u8>) {
    key(b, "t");
    b.extend(2u32.to_le_bytes());
    b.extend(4u64.to_le_bytes());
    b.extend(4u64.to_le_bytes());
    b.extend(0u32.to_le_bytes()); // f32
    b.extend(0u64.to_le_bytes());
}

#[test]
fn the_plain_header_reads() {
    let f = open(&header(plain_kv, plain_tensor)).unwrap();
    assert_eq!(f.architecture(), Some("llama"));
    assert_eq!(f.tensors[0].elements(), 16);
}

#[test]
fn an_array_count_the_file_cannot_hold_is_corrupt() {
    for n in [u64::MAX, u64::MAX / 4, 1 << 40, 5000] {
        let bytes = header(
            |b| {
                key(b, "tokenizer.ggml.scores");
                b.extend(9u32.to_le_bytes()); // array
                b.extend(6u32.to_le_bytes()); // of f32
                b.extend(n.to_le_bytes());
            },
            plain_tensor,
        );
        let e = open(&bytes).unwrap_err().to_string();
        assert!(
            e.contains("corrupt") && e.contains("bytes left"),
            "{n}: {e}"
        );
    }
}

#[test]
fn more_array_items_than_any_model_has_is_corrupt() {
    // A 300 MB file could otherwise hold 300 million one-byte items, each
    // a 32-byte value in memory.
    let n: u64 = 300_000_000;
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend(1u64.to_le_bytes());
    key(&mut bytes, "x");
    bytes.extend(9u32.to_le_bytes());
    bytes.extend(0u32.to_le_bytes()); // of u8
    bytes.extend(n.to_le_bytes());
    // The size is claimed, not written: the check comes before any read.
    let size = bytes.len() as u64 + n;
    let e = GgufFile::read_from("big.gguf", Cursor::new(&bytes), size)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no model has more than"), "{e}");
}

#[test]
fn huge_tensor_and_metadata_counts_are_corrupt() {
    for (tensors, kv) in [(u64::MAX, 0), (0, u64::MAX), (1 << 30, 0), (0, 1 << 30)] {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(tensors.to_le_bytes());
        b.extend(kv.to_le_bytes());
        b.resize(4096, 0);
        let e = open(&b).unwrap_err().to_string();
        assert!(e.contains("corrupt"), "{tensors} {kv}: {e}");
    }
}

#[test]
fn overflowing_dimensions_are_corrupt() {
    let bytes = header(plain_kv, |b| {
        key(b, "t");
        b.extend(4u32.to_le_bytes());
        for d in [u64::MAX / 2, 3, 5, 7] {
            b.extend(d.to_le_bytes());
        }
        b.extend(0u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
    });
    let e = open(&bytes).unwrap_err().to_string();
    assert!(e.contains("overflows"), "{e}");
}

#[test]
fn an_offset_past_the_end_is_truncation_not_overflow() {
    for offset in [u64::MAX, u64::MAX - 10, 1 << 62] {
        let bytes = header(plain_kv, |b| {
            key(b, "t");
            b.extend(1u32.to_le_bytes());
            b.extend(4u64.to_le_bytes());
            b.extend(0u32.to_le_bytes());
            b.extend(offset.to_le_bytes());
        });
        let e = open(&bytes).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{offset}: {e}");
    }
}

#[test]
fn a_huge_alignment_is_corrupt() {
    let bytes = header(
        |b| {
            key(b, "general.alignment");
            b.extend(10u32.to_le_bytes()); // u64
            b.extend((1u64 << 63).to_le_bytes());
        },
        plain_tensor,
    );
    let e = open(&bytes).unwrap_err().to_string();
    assert!(e.contains("general.alignment"), "{e}");
}

/// Random mutations of a real header for `REVERIE_FUZZ_SECS` seconds
/// (default 20; CI runs 120, `scripts/fuzz-gguf` an hour).
#[test]
fn random_mutations_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.gguf");
    reverie_gguf::synth::write(&path, &SynthConfig::tiny(Arch::Llama)).unwrap();
    let seed_bytes = std::fs::read(&path).unwrap();
    let header_len = GgufFile::open(&path).unwrap().data_offset as usize;
    let secs: u64 = std::env::var("REVERIE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("REVERIE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6775_6666);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let t0 = Instant::now();
    let (mut cases, mut accepted) = (0u64, 0u64);
    while t0.elapsed() < Duration::from_secs(secs) {
        let mut b = seed_bytes[..header_len.min(seed_bytes.len())].to_vec();
        for _ in 0..rng.random_range(1..8) {
            let at = rng.random_range(0..b.len());
            match rng.random_range(0..5) {
                0 => b[at] ^= 1 << rng.random_range(0..8),
                1 => b[at] = rng.random(),
                2 if at + 8 <= b.len() => {
                    let v: u64 = match rng.random_range(0..4) {
                        0 => u64::MAX,
                        1 => rng.random(),
                        2 => 1 << rng.random_range(0..64),
                        _ => rng.random_range(0..1 << 20),
                    };
                    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
                3 => b.truncate(at.max(4)),
                _ => {
                    let extra: Vec<u8> =
                        (0..rng.random_range(1..64)).map(|_| rng.random()).collect();
                    b.splice(at..at, extra);
                }
            }
        }
        // Pretend the data section is there, so tensor bounds get checked.
        let size = b.len() as u64 + (seed_bytes.len() - header_len) as u64;
        let result = std::panic::catch_unwind(|| {
            GgufFile::read_from("fuzz.gguf", Cursor::new(&b), size).map(|_| ())
        });
        match result {
            Ok(Ok(())) => accepted += 1,
            Ok(Err(_)) => {}
            Err(_) => {
                let kept = std::env::temp_dir().join(format!("gguf-fuzz-crash-{cases}.bin"));
                std::fs::write(&kept, &b).unwrap();
                panic!(
                    "case {cases} (seed {seed}) panicked; input kept in {}",
                    kept.display()
                );
            }
        }
        cases += 1;
    }
    eprintln!("fuzzed {cases} mutated headers in {secs} s ({accepted} still valid)");
    assert!(cases > 100, "only {cases} cases ran");
}
