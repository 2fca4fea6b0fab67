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
use super::reentrant::reentrant_kind;
use super::single::{LockCore, Locks};
use super::surface::{hold_queries, lock_surface};
use crate::conn::Synced;
use crate::error::Result;
use crate::future::BoxFuture;
use crate::hold::{
    AcquireReply, AcquireRequest, Evidence, HoldKind, HoldSpec, ReleaseReply, ReleaseRequest,
};
use crate::object::object_methods;
use crate::owner::Owner;
use crate::shared::Shared;
use crate::wait::Strategy;
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

lock_surface!(
    NonReentrantLock,
    setup: "# ",
    make: "client.non_reentrant_lock(\"import\")",
    errors: "[`Error::NotReentrant`](crate::Error::NotReentrant) when the owner already holds \
        it.",
    cancel: "",
    force_unlock: "Deletes the lock whoever holds it and wakes a waiter of each client.",
    is_locked: "`true` when anyone holds the lock (`EXISTS`).",
);
hold_queries!(NonReentrantLock, make: "client.non_reentrant_lock(\"import\")");
object_methods!(
    NonReentrantLock,
    field: core,
    make: "client.non_reentrant_lock(\"import\")",
    keys: "It acts on the lock's hash `name`.",
    delete: "Deletes the lock as Redisson's `delete()` does: a force unlock (the hash deleted \
        whoever holds it, a waiter of each client woken).",
    watchdog: "On a lock held under the watchdog, an expiry set here lasts until the next \
        renewal (at most a third of the watchdog timeout), which sets the lease again, as \
        Redisson's watchdog does; a hold with an explicit lease keeps it (a cleared expiry \
        makes the key persistent until the lock is released). Keys beyond the name are not \
        renewed and keep it.",
);

impl NonReentrantLock {
    pub(crate) fn new(locks: &Locks, name: String) -> Self {
        let kind = NonReentrant {
            inner: reentrant_kind(&name),
            label: "NonReentrantLock",
            metric_kind: "nonreentrant",
        };
        Self {
            core: LockCore::new(locks, Arc::new(kind), name.into()),
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

lock_surface!(
    NonReentrantFairLock,
    setup: "# ",
    make: "client.non_reentrant_fair_lock(\"jobs\")",
    errors: "[`Error::NotReentrant`](crate::Error::NotReentrant) when the owner already holds \
        it.",
    cancel: "A waiter that leaves without the lock removes itself from the queue, as the fair \
        lock's do.",
    force_unlock: "Deletes the lock whoever holds it and wakes the queue's head; the queue stays.",
    is_locked: "`true` when anyone holds the lock (`EXISTS`); waiters do not count.",
);
hold_queries!(NonReentrantFairLock, make: "client.non_reentrant_fair_lock(\"jobs\")");
object_methods!(
    NonReentrantFairLock,
    field: core,
    make: "client.non_reentrant_fair_lock(\"jobs\")",
    keys: "It acts on the lock's hash `name`, its queue `redisson_lock_queue:{name}` and its \
        deadlines `redisson_lock_timeout:{name}`, as Redisson's does.",
    delete: "Deletes the lock, its queue and its deadlines (`DEL`), as Redisson's `delete()` does: \
        nobody is woken (a waiter notices at its next re-check, or when its sleep hint ends).",
    watchdog: "On a lock held under the watchdog, an expiry set here lasts until the next \
        renewal (at most a third of the watchdog timeout), which sets the lease again, as \
        Redisson's watchdog does; a hold with an explicit lease keeps it (a cleared expiry \
        makes the key persistent until the lock is released). Keys beyond the name are not \
        renewed and keep it.",
);

impl NonReentrantFairLock {
    pub(crate) fn new(locks: &Locks, name: String) -> Self {
        let kind = NonReentrant {
            inner: fair_kind(&name),
            label: "NonReentrantFairLock",
            metric_kind: "nonreentrant_fair",
        };
        Self {
            core: LockCore::new(locks, Arc::new(kind), name.into()),
        }
    }
}

/// A lock kind with re-entry refused; everything else is the wrapped kind's.
#[derive(Debug)]
struct NonReentrant {
    inner: Arc<dyn HoldKind>,
    label: &'static str,
    metric_kind: &'static str,
}

impl HoldKind for NonReentrant {
    fn label(&self) -> &'static str {
        self.label
    }

    fn metric_kind(&self) -> &'static str {
        self.metric_kind
    }

    fn field(&self, client_id: &str, owner: Owner) -> Arc<str> {
        self.inner.field(client_id, owner)
    }

    fn acquire<'a>(
        &'a self,
        req: &'a AcquireRequest<'a>,
    ) -> BoxFuture<'a, Result<(AcquireReply, Synced)>> {
        self.inner.acquire(req)
    }

    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>> {
        self.inner.release(req)
    }

    fn strategy(&self, hold: &HoldSpec) -> Strategy {
        self.inner.strategy(hold)
    }

    fn yields_to_parked(&self) -> bool {
        self.inner.yields_to_parked()
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

    fn max_holds(&self) -> u32 {
        1
    }

    fn read_holds<'a>(&'a self, hold: &'a HoldSpec) -> BoxFuture<'a, Result<Evidence>> {
        self.inner.read_holds(hold)
    }

    fn force_unlock<'a>(
        &'a self,
        shared: &'a Shared,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        self.inner.force_unlock(shared, name)
    }

    fn extra_keys(&self, name: &str) -> Vec<Arc<str>> {
        self.inner.extra_keys(name)
    }

    fn delete<'a>(
        &'a self,
        shared: &'a Shared,
        keys: &'a [Arc<str>],
    ) -> BoxFuture<'a, Result<bool>> {
        self.inner.delete(shared, keys)
    }

    fn is_locked<'a>(&'a self, shared: &'a Shared, name: &'a str) -> BoxFuture<'a, Result<bool>> {
        self.inner.is_locked(shared, name)
    }
}
