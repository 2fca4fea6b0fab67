//! The non-reentrant locks, compatible with Redisson 4.4's `RNonReentrantLock` and
//! `RNonReentrantFairLock` (docs/LAYOUT.md §2.7, §4.11): the reentrant and fair locks' keys,
//! fields, channels, scripts and renewal, with re-entry refused.
//!
//! Redisson's acquire scripts reply the error `NON_REENTRANT_REACQUIRE` when the holder asks
//! again. Here the owner's acquire always expects 0 holds (docs/LAYOUT.md §12 (a)), so Redis
//! never re-enters it, and an owner the client knows to hold the lock is refused before
//! anything is sent.

use std::sync::Arc;
use std::time::Duration;

use super::fair::fair_kind;
use super::hold::HoldSpec;
use super::kind::{AcquireReply, AcquireRequest, LockKind, ReleaseReply, ReleaseRequest};
use super::reentrant::reentrant_kind;
use super::{LockCore, lock_api};
use crate::error::Result;
use crate::shared::Shared;
use crate::wait::{BoxFuture, Strategy};
use crate::watchdog::Renewal;

/// A lock an owner cannot take twice: Redisson's `RNonReentrantLock` (4.4+).
///
/// The same hash, fields, channel and messages as [`Lock`](crate::Lock) (holders and waiters
/// of both kinds on one name exclude and wake each other), but an owner that holds it and asks
/// again gets [`Error::NotReentrant`](crate::Error::NotReentrant) at once: never a deadlock,
/// and its hold is left as it was. Java services using Redisson's `getNonReentrantLock(name)`
/// share the lock.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.non_reentrant_lock("import");
/// let guard = lock.lock().await?;
/// assert!(lock.try_lock().await.is_err()); // the same owner again: NotReentrant
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct NonReentrantLock {
    pub(super) core: LockCore,
}

lock_api!(
    NonReentrantLock,
    make: "client.non_reentrant_lock(\"import\")",
    errors: "[`Error::NotReentrant`](crate::Error::NotReentrant) when the owner already holds \
        it.",
    cancel: "",
    force_unlock: "Deletes the lock whoever holds it and wakes a waiter of each client.",
    is_locked: "`true` when anyone holds the lock (`EXISTS`).",
);

impl NonReentrantLock {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        let kind = NonReentrant {
            inner: reentrant_kind(&name),
            label: "NonReentrantLock",
            metric_kind: "nonreentrant",
        };
        Self {
            core: LockCore::new(shared, Arc::new(kind), name.into()),
        }
    }
}

/// A fair lock an owner cannot take twice: Redisson's `RNonReentrantFairLock` (4.4+).
///
/// The [`FairLock`](crate::FairLock)'s hash, queue, deadlines and per-waiter channels, with
/// re-entry refused as [`NonReentrantLock`] refuses it. Java services using Redisson's
/// `getNonReentrantFairLock(name)` share the lock and its queue.
#[derive(Clone)]
pub struct NonReentrantFairLock {
    pub(super) core: LockCore,
}

lock_api!(
    NonReentrantFairLock,
    make: "client.non_reentrant_fair_lock(\"jobs\")",
    errors: "[`Error::NotReentrant`](crate::Error::NotReentrant) when the owner already holds \
        it.",
    cancel: "A waiter that leaves without the lock removes itself from the queue, as the fair \
        lock's do.",
    force_unlock: "Deletes the lock whoever holds it and wakes the queue's head; the queue stays.",
    is_locked: "`true` when anyone holds the lock (`EXISTS`); waiters do not count.",
);

impl NonReentrantFairLock {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        let kind = NonReentrant {
            inner: fair_kind(&name),
            label: "NonReentrantFairLock",
            metric_kind: "nonreentrant_fair",
        };
        Self {
            core: LockCore::new(shared, Arc::new(kind), name.into()),
        }
    }
}

/// A lock kind with re-entry refused; everything else is the wrapped kind's.
#[derive(Debug)]
struct NonReentrant {
    inner: Arc<dyn LockKind>,
    label: &'static str,
    metric_kind: &'static str,
}

impl LockKind for NonReentrant {
    fn label(&self) -> &'static str {
        self.label
    }

    fn metric_kind(&self) -> &'static str {
        self.metric_kind
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'a>) -> BoxFuture<'a, Result<AcquireReply>> {
        self.inner.acquire(req)
    }

    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>> {
        self.inner.release(req)
    }

    fn strategy(&self, hold: &HoldSpec) -> Strategy {
        self.inner.strategy(hold)
    }

    fn queues_waiters(&self) -> bool {
        self.inner.queues_waiters()
    }

    fn give_up<'a>(
        &'a self,
        hold: &'a HoldSpec,
        wait: Option<Duration>,
    ) -> Option<BoxFuture<'a, Result<()>>> {
        self.inner.give_up(hold, wait)
    }

    fn renewal(&self) -> Arc<dyn Renewal> {
        self.inner.renewal()
    }

    fn reentrant(&self) -> bool {
        false
    }

    fn force_unlock<'a>(
        &'a self,
        shared: &'a Shared,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        self.inner.force_unlock(shared, name)
    }

    fn is_locked<'a>(&'a self, shared: &'a Shared, name: &'a str) -> BoxFuture<'a, Result<bool>> {
        self.inner.is_locked(shared, name)
    }
}
