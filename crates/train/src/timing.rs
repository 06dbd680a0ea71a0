//! Wall time per op, to find where a training step goes. Off unless
//! `REVERIE_OP_TIMES` is set; then `reverie bench train-step` prints the
//! table. Spans nest: `backward` includes the `bwd` spans of every op.

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

static ON: LazyLock<bool> = LazyLock::new(|| std::env::var_os("REVERIE_OP_TIMES").is_some());
static TIMES: Mutex<BTreeMap<&'static str, (u64, f64)>> = Mutex::new(BTreeMap::new());

/// Records the time from here to its drop under `name`.
pub struct Span(Option<(&'static str, Instant)>);

pub fn span(name: &'static str) -> Span {
    Span(ON.then(|| (name, Instant::now())))
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some((name, t)) = self.0.take() {
            let mut times = TIMES.lock().unwrap_or_else(|p| p.into_inner());
            let e = times.entry(name).or_default();
            e.0 += 1;
            e.1 += t.elapsed().as_secs_f64();
        }
    }
}

/// `(name, calls, seconds)` since the last call, and starts afresh.
pub fn take() -> Vec<(&'static str, u64, f64)> {
    let mut times = TIMES.lock().unwrap_or_else(|p| p.into_inner());
    std::mem::take(&mut *times)
        .into_iter()
        .map(|(k, (n, s))| (k, n, s))
        .collect()
}
