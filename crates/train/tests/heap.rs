//! While a trainer holds the heap, a large buffer that is freed and asked
//! for again comes from memory the process already has: no fresh pages for
//! the kernel to zero, on the main thread and on a thread started after
//! `share_main_arena`. Without a hold, and after it, glibc's defaults apply.
//! Runs without the test harness: the harness starts threads of its own
//! before any test could share the main arena.

use std::hint::black_box;

use reverie_train::heap::{share_main_arena, HeapHold};

/// Far above the 64 MiB that a per-thread arena can hold, like an LM-head
/// chunk on a real vocabulary.
const LEN: usize = 256 << 20;
const PAGES: i64 = (LEN / 4096) as i64;

fn minor_faults() -> i64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a properly sized out-param for getrusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_minflt
}

/// Page faults taken by filling a buffer of `LEN` bytes right after an
/// equal one was filled and freed.
fn faults_for_a_second_buffer() -> i64 {
    drop(black_box(vec![1u8; LEN]));
    let before = minor_faults();
    let again = black_box(vec![1u8; LEN]);
    let faults = minor_faults() - before;
    drop(again);
    faults
}

fn check(place: &str) {
    let without = faults_for_a_second_buffer();
    assert!(
        without > PAGES / 2,
        "{place}: without a hold glibc maps fresh pages ({without} faults for {PAGES} pages)"
    );
    let hold = HeapHold::new();
    faults_for_a_second_buffer(); // the heap grows once
    let held = faults_for_a_second_buffer();
    assert!(
        held < PAGES / 20,
        "{place}: with a hold a freed buffer must be reused, but {held} of {PAGES} pages faulted"
    );
    drop(hold);
    let after = faults_for_a_second_buffer();
    assert!(
        after > PAGES / 2,
        "{place}: after the hold the defaults must come back ({after} faults for {PAGES} pages)"
    );
    eprintln!("{place}: {without} → {held} → {after} page faults for {PAGES} pages");
}

fn main() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        share_main_arena();
        check("main thread");
        std::thread::spawn(|| check("a later thread"))
            .join()
            .expect("the check on a later thread passes");
        println!("heap: ok");
    }
}
