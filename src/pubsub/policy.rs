//! Wake policies: what a message on a channel means for the local waiters on it.

/// How messages on one channel wake the client's waiters on it (docs/LAYOUT.md §3).
///
/// Every subscribed client receives every message; the policy says how many of *its own*
/// waiters a message wakes, as Redisson's pub/sub entries do in each JVM. A woken waiter
/// re-runs its attempt; a policy never grants anything by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WakePolicy {
    /// Lock channels (`LockPubSub`, §1.10): `0` wakes one waiter, `1` wakes them all; any
    /// other payload wakes nobody.
    Lock,
    /// Semaphore channels (`SemaphorePubSub`, §6.4): the payload is a number of permits, and
    /// wakes that many waiters (at most all of them).
    Permits,
    /// Count-down latch channels (`CountDownLatchPubSub`, §6.6): `0` opens the latch (wakes
    /// every waiter, and the latch stays open until a `1`), `1` closes it again.
    Latch,
    /// Channels that are only observed ([`PubSub::observe`](super::PubSub::observe)), never
    /// waited on: keyspace notifications. Wakes nobody.
    Observe,
}

/// What one message does to a channel's waiters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Wake one waiter.
    One,
    /// Wake every waiter.
    All,
    /// Wake up to this many waiters.
    Some(u64),
    /// Mark the channel open and wake every waiter.
    Open,
    /// Mark the channel closed; wake nobody.
    Close,
    /// Nothing: a payload the policy does not know.
    Nothing,
}

impl WakePolicy {
    /// The effect of a message with `payload` on a channel of this policy.
    pub(crate) fn wake(self, payload: &[u8]) -> Wake {
        match (self, payload) {
            (Self::Lock, b"0") => Wake::One,
            (Self::Lock, b"1") => Wake::All,
            (Self::Latch, b"0") => Wake::Open,
            (Self::Latch, b"1") => Wake::Close,
            (Self::Permits, digits) => match std::str::from_utf8(digits)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
            {
                Some(n) if n > 0 => Wake::Some(n.unsigned_abs()),
                _ => Wake::Nothing,
            },
            _ => Wake::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_messages_wake_one_or_all() {
        assert_eq!(WakePolicy::Lock.wake(b"0"), Wake::One);
        assert_eq!(WakePolicy::Lock.wake(b"1"), Wake::All);
        for junk in [&b"2"[..], b"", b"unlock", b"00"] {
            assert_eq!(WakePolicy::Lock.wake(junk), Wake::Nothing, "{junk:?}");
        }
    }

    #[test]
    fn permit_messages_wake_as_many_as_they_say() {
        assert_eq!(WakePolicy::Permits.wake(b"3"), Wake::Some(3));
        assert_eq!(WakePolicy::Permits.wake(b"1"), Wake::Some(1));
        for none in [&b"0"[..], b"-2", b"", b"x"] {
            assert_eq!(WakePolicy::Permits.wake(none), Wake::Nothing, "{none:?}");
        }
    }

    #[test]
    fn latch_messages_open_and_close() {
        assert_eq!(WakePolicy::Latch.wake(b"0"), Wake::Open);
        assert_eq!(WakePolicy::Latch.wake(b"1"), Wake::Close);
        assert_eq!(WakePolicy::Latch.wake(b"2"), Wake::Nothing);
    }
}
