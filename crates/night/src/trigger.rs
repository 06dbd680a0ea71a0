//! When a night starts by itself: at a time of day, or after the user has
//! been away for a while. Arithmetic on a clock the caller supplies, plus
//! the two clocks callers use.

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

/// Parses `HH:MM` (24-hour clock).
pub fn parse_clock(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("{s:?} is not a time of day; write it as HH:MM, e.g. 02:30");
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
        assert!(parse_clock("25:00").unwrap_err().contains("HH:MM"));
        assert!(parse_clock("soon").is_err());
        assert!(is_idle(10_000, None, 5_000));
        assert!(is_idle(10_000, Some(4_000), 5_000));
        assert!(!is_idle(10_000, Some(6_000), 5_000));
    }
}
