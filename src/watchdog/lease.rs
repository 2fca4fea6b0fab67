//! What the client can vouch for about one hold: until when it is valid, and whether it is
//! known to be lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::observe::Tag;

/// Why a hold stopped being vouched for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loss {
    /// Redis said so: the holder field is gone (expired, force-unlocked, taken over), or the
    /// local hold count disagreed with Redis. Nothing of this hold is left to release.
    Gone,
    /// No acquire or renewal was confirmed within the lease (a partition, a stalled Redis, an
    /// explicit lease that ran out): the hold may have expired, and another holder may have it.
    Expired,
}

const VALID: u8 = 0;
const GONE: u8 = 1;
const EXPIRED: u8 = 2;

/// The validity of one hold (or of every hold sharing one watchdog renewal).
///
/// `valid_until` is the send time of the last confirmed acquire or renewal plus the lease:
/// Redis cannot have let the key expire before it (its clock starts when the request arrives,
/// after it was sent). The hold counts as lost from `valid_until - margin` on, whatever the
/// transport does, so a partition is reported even when no reply ever comes back.
#[derive(Debug)]
pub(crate) struct Lease {
    base: Instant,
    /// Nanoseconds after `base`.
    valid_until: AtomicU64,
    margin: Duration,
    state: AtomicU8,
    /// Wakes [`lost`](Self::lost) futures when the state changes (inline: no allocation per
    /// hold).
    signal: Notify,
    /// The metric labels of the hold, for the lost-leases counter.
    tag: Tag,
}

/// The margin kept before `valid_until` for clock drift between the client and Redis
/// (Redlock's drift factor: 1 % of the lease plus 2 ms), at most a quarter of the lease (so
/// that a 1 ms lease can still be used on a fast link) and at most a minute.
pub(crate) fn margin(lease: Duration) -> Duration {
    (lease / 100 + Duration::from_millis(2))
        .min(lease / 4)
        .min(Duration::from_secs(60))
}

impl Lease {
    /// A hold (of the primitive `tag` labels) granted by a request sent at `sent`, leased for
    /// `lease`.
    pub(crate) fn new(sent: Instant, lease: Duration, tag: Tag) -> Arc<Self> {
        Arc::new(Self {
            base: sent,
            valid_until: AtomicU64::new(nanos(lease)),
            margin: margin(lease),
            state: AtomicU8::new(VALID),
            signal: Notify::new(),
            tag,
        })
    }

    /// A later acquire or renewal, sent at `sent`, was confirmed: the hold is valid until
    /// `sent + lease` (never moves back). Not once the hold is lost: a confirmation that comes
    /// after the loss was reported (a renewal whose reply was held up past the deadline by a
    /// slow link or a starved runtime) must not make `valid_until` vouch again for a hold that
    /// `is_lost` gave up; the loss sticks, and so does the validity it had.
    pub(crate) fn confirm(&self, sent: Instant, lease: Duration) {
        if self.state.load(Ordering::Acquire) != VALID {
            return;
        }
        let until = sent.saturating_duration_since(self.base) + lease;
        self.valid_until.fetch_max(nanos(until), Ordering::AcqRel);
    }

    /// Send time of the last confirmed acquire or renewal, plus the lease.
    pub(crate) fn valid_until(&self) -> Instant {
        let nanos = self.valid_until.load(Ordering::Acquire);
        self.base
            .checked_add(Duration::from_nanos(nanos))
            .unwrap_or_else(far_future)
    }

    /// The instant from which the hold counts as lost unless confirmed again.
    pub(crate) fn deadline(&self) -> Instant {
        let nanos = self.valid_until.load(Ordering::Acquire);
        let margin = u64::try_from(self.margin.as_nanos()).unwrap_or(u64::MAX);
        self.base
            .checked_add(Duration::from_nanos(nanos.saturating_sub(margin)))
            .unwrap_or_else(far_future)
    }

    /// Marks the hold lost; the first time counts a lost lease and fires the signal. The
    /// first reason sticks, except that [`Loss::Gone`] overrides [`Loss::Expired`]: once
    /// Redis showed the hold gone, its release must never be sent (the same owner may hold
    /// the lock again, and the release would free that newer hold). [`Loss::Gone`] also ends
    /// [`valid_until`](Self::valid_until) now: the key may have gone before its TTL (evicted,
    /// deleted), and the client vouches for the hold no longer.
    pub(crate) fn raise(&self, loss: Loss) {
        let state = match loss {
            Loss::Gone => {
                let now = Instant::now().saturating_duration_since(self.base);
                self.valid_until.fetch_min(nanos(now), Ordering::AcqRel);
                GONE
            }
            Loss::Expired => EXPIRED,
        };
        match self
            .state
            .compare_exchange(VALID, state, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                self.tag.lease_lost();
                self.signal.notify_waiters();
            }
            Err(EXPIRED) if state == GONE => {
                // Already counted and signalled as lost.
                let _ =
                    self.state
                        .compare_exchange(EXPIRED, GONE, Ordering::AcqRel, Ordering::Acquire);
            }
            Err(_) => {}
        }
    }

    /// Why the hold is lost, if it is: raised, or past its deadline.
    pub(crate) fn loss(&self) -> Option<Loss> {
        match self.state.load(Ordering::Acquire) {
            GONE => Some(Loss::Gone),
            EXPIRED => Some(Loss::Expired),
            _ if Instant::now() >= self.deadline() => {
                self.raise(Loss::Expired);
                self.loss()
            }
            _ => None,
        }
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.loss().is_some()
    }

    /// Resolves once the hold is lost: raised, or its deadline passed without a confirmation.
    pub(crate) async fn lost(&self) {
        loop {
            // Registered before the state is read, so a loss raised in between still wakes it.
            let raised = self.signal.notified();
            let mut raised = std::pin::pin!(raised);
            raised.as_mut().enable();
            if self.is_lost() {
                return;
            }
            let deadline = self.deadline();
            tokio::select! {
                () = raised => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// `d` in nanoseconds, saturating.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// An instant no hold reaches (about 30 years from now).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_lost_at_its_deadline_unless_confirmed() {
        let lease = Duration::from_millis(1000);
        let start = Instant::now();
        let l = Lease::new(start, lease, Tag::kind_only("lock"));
        assert_eq!(l.valid_until(), start + lease);
        assert_eq!(l.deadline(), start + lease - margin(lease));
        assert!(!l.is_lost());
        tokio::time::advance(Duration::from_millis(500)).await;
        l.confirm(start + Duration::from_millis(400), lease);
        assert_eq!(l.valid_until(), start + Duration::from_millis(1400));
        // an older confirmation never moves it back
        l.confirm(start, lease);
        assert_eq!(l.valid_until(), start + Duration::from_millis(1400));
        l.lost().await;
        assert_eq!(
            Instant::now(),
            start + Duration::from_millis(1400) - margin(lease)
        );
        assert_eq!(l.loss(), Some(Loss::Expired));
    }

    #[tokio::test(start_paused = true)]
    async fn a_confirmation_after_the_loss_moves_nothing() {
        let lease = Duration::from_millis(1000);
        let start = Instant::now();
        let l = Lease::new(start, lease, Tag::kind_only("lock"));
        // A renewal sent at 400 ms, its reply held up past the deadline.
        tokio::time::advance(lease).await;
        assert_eq!(l.loss(), Some(Loss::Expired));
        l.confirm(start + Duration::from_millis(400), lease);
        assert_eq!(l.valid_until(), start + lease);
        assert_eq!(l.loss(), Some(Loss::Expired));
        // Nor after Redis showed it gone.
        let gone = Lease::new(start, lease, Tag::kind_only("lock"));
        gone.raise(Loss::Gone);
        gone.confirm(Instant::now(), lease);
        assert_eq!(gone.valid_until(), start + lease);
    }

    #[tokio::test]
    async fn a_raised_loss_sticks_with_its_first_reason() {
        let l = Lease::new(
            Instant::now(),
            Duration::from_secs(60),
            Tag::kind_only("lock"),
        );
        l.raise(Loss::Gone);
        l.raise(Loss::Expired);
        assert_eq!(l.loss(), Some(Loss::Gone));
        tokio::time::timeout(Duration::from_millis(100), l.lost())
            .await
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_redis_showed_gone_is_vouched_for_no_longer() {
        let lease = Duration::from_secs(30);
        let start = Instant::now();
        let l = Lease::new(start, lease, Tag::kind_only("lock"));
        tokio::time::advance(Duration::from_secs(1)).await;
        // A renewal found the key gone (evicted) 29 s before its TTL would have ended.
        l.raise(Loss::Gone);
        assert_eq!(l.valid_until(), start + Duration::from_secs(1));
        assert!(l.deadline() <= Instant::now());
        // A late confirmation cannot bring it back.
        l.confirm(start, lease);
        assert_eq!(l.loss(), Some(Loss::Gone));
        assert_eq!(l.valid_until(), start + Duration::from_secs(1));
        // Expired keeps the instant the client vouched for.
        let e = Lease::new(start, lease, Tag::kind_only("lock"));
        e.raise(Loss::Expired);
        assert_eq!(e.valid_until(), start + lease);
    }

    #[tokio::test]
    async fn gone_overrides_expired_so_a_stale_release_is_never_sent() {
        let l = Lease::new(
            Instant::now(),
            Duration::from_secs(60),
            Tag::kind_only("lock"),
        );
        fn signalled(l: &Lease) -> std::pin::Pin<Box<tokio::sync::futures::Notified<'_>>> {
            let mut raised = Box::pin(l.signal.notified());
            raised.as_mut().enable();
            raised
        }
        let first = signalled(&l);
        l.raise(Loss::Expired);
        assert_eq!(l.loss(), Some(Loss::Expired));
        assert!(futures_util::FutureExt::now_or_never(first).is_some());
        let second = signalled(&l);
        l.raise(Loss::Gone);
        assert_eq!(l.loss(), Some(Loss::Gone));
        // Signalled once: the upgrade is not a second loss.
        assert!(futures_util::FutureExt::now_or_never(second).is_none());
        l.raise(Loss::Expired);
        assert_eq!(l.loss(), Some(Loss::Gone));
    }
}
