//! How much a night would have to do now, and roughly how long it takes.

use std::collections::HashSet;

use reverie_store::{Night, Store, StoreError};

use crate::report::NightReport;

/// Seconds per message when no finished night has measured one: what the
/// default 0.5B model takes on two CPU cores.
const DEFAULT_SECONDS_PER_MESSAGE: f64 = 12.0;
/// Loading the model and checking the result, whatever the day held.
const FIXED_SECONDS: f64 = 20.0;

/// The day a night would learn from now, and a rough duration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Estimate {
    pub messages: usize,
    pub channels: usize,
    /// From the last measured night's pace (or a default pace).
    pub seconds: f64,
}

/// Messages since the last night began, and how long a night on them
/// would take at the pace of the latest night that measured one.
pub fn estimate(store: &Store) -> Result<Estimate, StoreError> {
    let nights = store.nights()?;
    let since = nights.last().map_or(0, |n| n.started_ms);
    let msgs = store.messages_since(since)?;
    let channels: HashSet<i64> = msgs.iter().map(|m| m.channel.0).collect();
    let pace = nights
        .iter()
        .rev()
        .find_map(seconds_per_message)
        .unwrap_or(DEFAULT_SECONDS_PER_MESSAGE);
    Ok(Estimate {
        messages: msgs.len(),
        channels: channels.len(),
        seconds: FIXED_SECONDS + pace * msgs.len() as f64,
    })
}

fn seconds_per_message(night: &Night) -> Option<f64> {
    let report = NightReport::from_json(&night.report).ok()?;
    let messages = report.counts?.messages;
    (messages > 0).then(|| report.total_seconds() / messages as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::{Home, MessageRole, TokenSpan};
    use reverie_store::NightStatus;

    #[test]
    fn the_estimate_uses_the_last_measured_nights_pace() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let ch = store.create_channel("c").unwrap();
        let say = |text| {
            store
                .append_message(ch, MessageRole::User, text, &TokenSpan::default())
                .unwrap()
        };
        say("a");
        say("b");
        let fresh = estimate(&store).unwrap();
        assert_eq!((fresh.messages, fresh.channels), (2, 1));
        assert_eq!(
            fresh.seconds,
            FIXED_SECONDS + 2.0 * DEFAULT_SECONDS_PER_MESSAGE
        );

        std::thread::sleep(std::time::Duration::from_millis(5));
        let id = store.start_night().unwrap();
        let mut report = NightReport::default();
        report.counts = Some(crate::report::Counts {
            messages: 4,
            channels: 1,
        });
        report.seconds.insert("judge".into(), 30.0);
        report.seconds.insert("train".into(), 10.0);
        store
            .update_night(id, NightStatus::Done, "deploy", &report.to_json())
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        say("c");
        let later = estimate(&store).unwrap();
        assert_eq!(later.messages, 1, "only what was said since the night");
        assert_eq!(later.seconds, FIXED_SECONDS + 10.0, "40 s for 4 messages");
    }
}
