//! The client's wall clock, as Redisson's scripts take it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch by this host's clock: what Redisson passes to the scripts
/// that keep deadlines (a fair lock's queue, a permit's lease end), as `System.currentTimeMillis()`.
pub(crate) fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_is_epoch_milliseconds() {
        // 2020-01-01 .. 2100-01-01
        assert!((1_577_836_800_000..4_102_444_800_000).contains(&super::epoch_ms()));
    }
}
