//! The client's wall clock, as Redisson's scripts take it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Milliseconds since the Unix epoch by this host's clock: what Redisson passes to the scripts
/// that keep deadlines (a fair lock's queue, a permit's lease end), as `System.currentTimeMillis()`.
pub(crate) fn epoch_ms() -> i64 {
    millis(since_epoch())
}

/// [`epoch_ms`] for a script that starts a lease on it, and an instant no later than the one
/// those milliseconds denote: where the client's validity of that lease starts.
///
/// The script's deadline is the truncated milliseconds plus the lease, on the wall clock that
/// every other client compares with; an instant read after the wall clock (or not corrected
/// for the truncation) would vouch for the lease up to a millisecond past the moment another
/// client may take it.
pub(crate) fn epoch_ms_since() -> (i64, Instant) {
    let before = Instant::now();
    let wall = since_epoch();
    let truncated = Duration::from_nanos(u64::from(wall.subsec_nanos() % 1_000_000));
    (
        millis(wall),
        before.checked_sub(truncated).unwrap_or(before),
    )
}

/// This host's wall clock since the Unix epoch (zero before it).
fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Whole milliseconds of `d`, truncated, as the scripts take them.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    #[test]
    fn the_clock_is_epoch_milliseconds() {
        // 2020-01-01 .. 2100-01-01
        assert!((1_577_836_800_000..4_102_444_800_000).contains(&super::epoch_ms()));
    }

    #[test]
    fn a_stamped_instant_is_not_later_than_its_milliseconds() {
        for _ in 0..1_000 {
            let (ms, at) = super::epoch_ms_since();
            // The wall clock first, then the instant: `after - (wall - ms)` is no earlier than
            // the instant `ms` denotes, so a correct `at` is never later than it. Read after
            // the wall clock or without the truncation, `at` is later (by the sub-millisecond
            // part) nearly every time.
            let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            let after = tokio::time::Instant::now();
            let since_ms = wall - Duration::from_millis(u64::try_from(ms).unwrap());
            assert!(at <= after - since_ms, "{at:?} is later than {ms} ms");
        }
    }
}
