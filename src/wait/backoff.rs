//! Back-off between attempts: for primitives that poll instead of subscribing (Redisson's
//! `RSpinLock`), and for retries after transient errors.

use std::time::Duration;

/// Pauses between the background tries of a cleanup that failed transiently (Redis
/// unreachable, the slot's master down during a failover): about a minute in all, which covers
/// a cluster or Sentinel failover. Used by the give-up cleanup of a waiter (one left at the
/// head of a fair queue would otherwise block the lock for its whole slot) and by a permit
/// release that must not leave permits without lease held for good.
pub(crate) const BACKGROUND_RETRIES: [Duration; 10] = [
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(12),
    Duration::from_secs(15),
    Duration::from_secs(15),
];

/// Exponential back-off with jitter, as Redisson's `LockOptions.ExponentialBackOff`: each delay
/// is `min(max, previous * multiplier + random[0, attempts) ms)`, starting at `initial`.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    multiplier: u32,
    next: Duration,
    attempts: u32,
}

impl Backoff {
    /// Starts at `initial`, multiplies by `multiplier`, never exceeds `max`.
    pub(crate) fn exponential(initial: Duration, max: Duration, multiplier: u32) -> Self {
        Self {
            initial,
            max,
            multiplier: multiplier.max(1),
            next: initial,
            attempts: 0,
        }
    }

    /// Retries after transient errors (a dropped connection, `BUSY`, `LOADING`): 10 ms,
    /// doubling, at most 500 ms.
    pub(crate) fn transient() -> Self {
        Self::exponential(Duration::from_millis(10), Duration::from_millis(500), 2)
    }

    /// The delay before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next.min(self.max);
        let jitter = if self.attempts == 0 {
            Duration::ZERO
        } else {
            Duration::from_millis(u64::from(jitter_below(self.attempts)))
        };
        self.attempts = self.attempts.saturating_add(1);
        self.next = (delay * self.multiplier + jitter).min(self.max);
        delay
    }

    /// Starts over from the initial delay.
    pub(crate) fn reset(&mut self) {
        self.next = self.initial;
        self.attempts = 0;
    }
}

/// A pseudo-random number in `[0, n)` (cheap, not for anything secret).
fn jitter_below(n: u32) -> u32 {
    use std::hash::{BuildHasher, RandomState};
    thread_local! {
        static STATE: RandomState = RandomState::new();
        static COUNTER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    let x = COUNTER.with(|c| {
        c.set(c.get().wrapping_add(1));
        c.get()
    });
    let h = STATE.with(|s| s.hash_one(x));
    u32::try_from(h % u64::from(n.max(1))).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_and_start_over_on_reset() {
        let ms = Duration::from_millis;
        let mut b = Backoff::exponential(ms(1), ms(128), 2);
        assert_eq!(b.next_delay(), ms(1));
        let mut last = ms(1);
        for _ in 0..20 {
            let d = b.next_delay();
            assert!(d >= last && d <= ms(128), "{d:?} after {last:?}");
            last = d;
        }
        assert_eq!(last, ms(128));
        b.reset();
        assert_eq!(b.next_delay(), ms(1));
        let second = b.next_delay();
        assert!((ms(2)..=ms(3)).contains(&second), "{second:?}");
    }

    #[test]
    fn transient_retries_start_at_10_ms_and_stay_under_half_a_second() {
        let ms = Duration::from_millis;
        let mut b = Backoff::transient();
        assert_eq!(b.next_delay(), ms(10));
        let delays: Vec<_> = (0..12).map(|_| b.next_delay()).collect();
        assert!((ms(20)..=ms(21)).contains(&delays[0]), "{delays:?}");
        assert_eq!(delays.last(), Some(&ms(500)), "{delays:?}");
    }
}
