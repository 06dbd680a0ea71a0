//! When a night starts by itself: at a time of day, after the user has
//! been away for a while, or both, and only when there is something to
//! learn. One [`Schedule`] for the window's schedule thread and for
//! `reverie sleep --at/--when-idle`; arithmetic on a clock the caller
//! supplies, plus the two clocks callers use.

/// When a night starts by itself. With a time of day, the night waits for
/// it (once a day); with idle minutes, it waits until nobody has chatted
/// that long; with both, the time comes first and then the idle wait. In
/// every case something new must have been said since the last night (or
/// the night practises), so an idle evening does not start empty nights.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    /// `(hour, minute)` of the local time of day.
    pub at: Option<(u32, u32)>,
    pub idle_minutes: Option<u64>,
    /// The time of day has passed since the last night this schedule
    /// started (always true without a time of day).
    armed: bool,
    /// Local seconds of day at the previous look, to see the time pass.
    last_seen: Option<u32>,
}

/// What a schedule looks at: the clocks and the day so far.
#[derive(Debug, Clone, Copy)]
pub struct Observed {
    pub now_ms: i64,
    /// Seconds since local midnight.
    pub local_seconds: u32,
    pub last_message_ms: Option<i64>,
    /// Messages or practice since the last night: something to learn.
    pub something_new: bool,
}

impl Observed {
    /// The world now: the clocks, and from `store` the last message and
    /// whether anything was said since the last night began (a night that
    /// `practises` always has something to learn).
    pub fn now(
        store: &reverie_store::Store,
        practises: bool,
    ) -> Result<Observed, reverie_store::StoreError> {
        let last_night = store.last_night_started_ms()?;
        let last_message_ms = store.last_message_ms()?;
        let said = last_message_ms.is_some_and(|m| last_night.is_none_or(|n| m > n));
        Ok(Observed {
            now_ms: now_ms(),
            local_seconds: local_seconds_of_day(),
            last_message_ms,
            something_new: practises || said,
        })
    }
}

impl Schedule {
    /// A schedule from `HH:MM` and idle minutes, as the user wrote them.
    pub fn new(at: Option<&str>, idle_minutes: Option<u64>) -> Result<Schedule, BadClock> {
        let at = at.map(parse_clock).transpose()?;
        Ok(Schedule {
            at,
            idle_minutes,
            armed: at.is_none(),
            last_seen: None,
        })
    }

    /// Whether the night starts on its own at all.
    pub fn is_set(&self) -> bool {
        self.at.is_some() || self.idle_minutes.is_some()
    }

    /// Looks at the world once; true when the night should start now
    /// (the schedule then waits for its time of day again).
    pub fn due(&mut self, seen: &Observed) -> bool {
        if let Some((h, m)) = self.at {
            let target = h * 3600 + m * 60;
            if let Some(prev) = self.last_seen {
                let passed = (seen.local_seconds + 86_400 - prev) % 86_400;
                let ahead = (target + 86_400 - prev) % 86_400;
                if ahead > 0 && ahead <= passed {
                    self.armed = true;
                }
            }
            self.last_seen = Some(seen.local_seconds);
        }
        let idle = self
            .idle_minutes
            .is_none_or(|min| is_idle(seen.now_ms, seen.last_message_ms, min as i64 * 60_000));
        let due = self.is_set() && self.armed && idle && seen.something_new;
        if due && self.at.is_some() {
            self.armed = false;
        }
        due
    }
}

/// Seconds from `now` (seconds since local midnight) until the next
/// `hour:minute`; a time already past today means tomorrow.
pub fn seconds_until(now: u32, hour: u32, minute: u32) -> u32 {
    let target = (hour % 24) * 3600 + (minute % 60) * 60;
    let now = now % 86_400;
    if target > now {
        target - now
    } else {
        86_400 - now + target
    }
}

/// A time of day that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a time of day; write it as HH:MM, e.g. 02:30")]
pub struct BadClock(pub String);

/// Parses `HH:MM` (24-hour clock).
pub fn parse_clock(s: &str) -> Result<(u32, u32), BadClock> {
    let bad = || BadClock(s.to_string());
    let (h, m) = s.split_once(':').ok_or_else(bad)?;
    let (h, m): (u32, u32) = (
        h.trim().parse().map_err(|_| bad())?,
        m.trim().parse().map_err(|_| bad())?,
    );
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok((h, m))
}

/// Whether the user has been idle for at least `idle_ms`, given the newest
/// message time (none: idle).
pub fn is_idle(now_ms: i64, last_message_ms: Option<i64>, idle_ms: i64) -> bool {
    last_message_ms.is_none_or(|t| now_ms - t >= idle_ms)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Seconds since local midnight, by the system's time zone.
pub fn local_seconds_of_day() -> u32 {
    let now = (now_ms() / 1000) as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid out-parameter.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers to a time_t and a tm out-param.
    unsafe { libc::localtime_r(&now, &mut tm) };
    (tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(s: &mut Schedule, clock: u32, last_message_ms: Option<i64>, new: bool) -> bool {
        s.due(&Observed {
            now_ms: clock as i64 * 1000,
            local_seconds: clock % 86_400,
            last_message_ms,
            something_new: new,
        })
    }

    #[test]
    fn a_time_of_day_fires_once_when_it_passes_and_only_with_something_new() {
        let mut s = Schedule::new(Some("02:00"), None).unwrap();
        let two = 2 * 3600;
        assert!(!look(&mut s, two - 60, None, true), "before the time");
        assert!(look(&mut s, two + 30, None, true), "the time passed");
        assert!(!look(&mut s, two + 60, None, true), "once a day");
        assert!(!look(&mut s, 86_400 + two - 30, None, true));
        assert!(
            !look(&mut s, 86_400 + two + 30, None, false),
            "nothing new said"
        );
        assert!(
            look(&mut s, 86_400 + two + 60, None, true),
            "armed until something new"
        );
        let mut late = Schedule::new(Some("02:00"), None).unwrap();
        assert!(
            !look(&mut late, 3 * 3600, None, true),
            "started after the time: tomorrow"
        );
    }

    #[test]
    fn idle_minutes_wait_for_quiet_and_with_a_time_come_after_it() {
        let mut idle = Schedule::new(None, Some(10)).unwrap();
        let last = Some(1_000_000);
        assert!(!look(&mut idle, 1_000 + 300, last, true), "5 minutes quiet");
        assert!(look(&mut idle, 1_000 + 600, last, true), "10 minutes quiet");
        assert!(
            !look(&mut idle, 1_000 + 900, last, false),
            "nothing new since"
        );
        let mut both = Schedule::new(Some("02:00"), Some(10)).unwrap();
        let two = 2 * 3600;
        let chatting = Some((two as i64 + 100) * 1000);
        assert!(!look(&mut both, two - 10, None, true));
        assert!(
            !look(&mut both, two + 200, chatting, true),
            "the time passed, still chatting"
        );
        assert!(
            look(&mut both, two + 800, chatting, true),
            "then quiet for 10 minutes"
        );
        assert!(!Schedule::default().is_set());
        assert!(
            !look(&mut Schedule::default(), two, None, true),
            "no schedule never fires"
        );
        assert!(Schedule::new(Some("25:00"), None).is_err());
    }

    #[test]
    fn clock_arithmetic() {
        assert_eq!(seconds_until(3600, 2, 0), 3600);
        assert_eq!(
            seconds_until(3 * 3600, 2, 0),
            23 * 3600,
            "past today: tomorrow"
        );
        assert_eq!(
            seconds_until(2 * 3600, 2, 0),
            86_400,
            "exactly now: the next one"
        );
        assert_eq!(parse_clock("02:30"), Ok((2, 30)));
        assert!(parse_clock("25:00")
            .unwrap_err()
            .to_string()
            .contains("HH:MM"));
        assert!(parse_clock("soon").is_err());
        assert!(is_idle(10_000, None, 5_000));
        assert!(is_idle(10_000, Some(4_000), 5_000));
        assert!(!is_idle(10_000, Some(6_000), 5_000));
    }
}
