//! The spin lock, compatible with Redisson's `RSpinLock` (docs/LAYOUT.md §6.1): the reentrant
//! lock's hash and acquire, an unlock that publishes nothing (`lua/spin/unlock.lua`), and
//! waiters that poll with back-off instead of subscribing.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use super::reentrant::reentrant_kind;
use super::single::{LockCore, Locks};
use super::surface::{Core, hold_queries, lock_surface};
use crate::conn::{Call, Script, Synced};
use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::hold::{
    AcquireReply, AcquireRequest, HoldKind, HoldSpec, ReleaseReply, ReleaseRequest, release_reply,
};
use crate::object::object_methods;
use crate::owner::Owner;
use crate::reply::deleted_reply;
use crate::shared::Shared;
use crate::wait::{Backoff, Strategy};
use crate::watchdog::Renewal;

/// `lua/spin/unlock.lua`: RedissonSpinLock.unlockInnerAsync (no publish).
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/spin/unlock.lua")));

/// How a [`SpinLock`] waiter sleeps between attempts (Redisson's `LockOptions.BackOff`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpinBackoff {
    initial: Duration,
    max: Duration,
    multiplier: u32,
}

impl SpinBackoff {
    /// Exponential back-off: the first sleep is `initial`, each next one `previous ×
    /// multiplier` plus a random jitter of up to as many milliseconds as attempts so far,
    /// never more than `max` (Redisson's `ExponentialBackOff`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero `initial`, a `max` below `initial`, or a
    /// multiplier below 1.
    pub fn exponential(initial: Duration, max: Duration, multiplier: u32) -> Result<Self> {
        if initial.is_zero() {
            return Err(Error::InvalidArgument(
                "a spin back-off must start above zero".into(),
            ));
        }
        if max < initial {
            return Err(Error::InvalidArgument(format!(
                "a spin back-off's maximum ({max:?}) is below its start ({initial:?})"
            )));
        }
        if multiplier == 0 {
            return Err(Error::InvalidArgument(
                "a spin back-off's multiplier must be at least 1".into(),
            ));
        }
        Ok(Self {
            initial,
            max,
            multiplier,
        })
    }

    /// A constant sleep between attempts (Redisson's `ConstantBackOff`, 64 ms by default).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero delay.
    pub fn constant(delay: Duration) -> Result<Self> {
        if delay.is_zero() {
            return Err(Error::InvalidArgument(
                "a spin back-off must be above zero".into(),
            ));
        }
        Ok(Self {
            initial: delay,
            max: delay,
            multiplier: 1,
        })
    }

    fn backoff(self) -> Backoff {
        Backoff::exponential(self.initial, self.max, self.multiplier)
    }
}

impl Default for SpinBackoff {
    /// Redisson's default: exponential, 1 ms doubling up to 128 ms.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
            multiplier: 2,
        }
    }
}

/// A reentrant lock whose waiters poll instead of subscribing: Redisson's `RSpinLock`.
///
/// The hash, fields, hold counts, TTL and watchdog are [`Lock`](crate::Lock)'s, so a spin lock
/// and a `Lock` of the same name exclude each other. Unlock publishes nothing: waiters poll
/// with a [`SpinBackoff`] (by default 1 ms doubling up to 128 ms, plus jitter), so no pub/sub
/// connection or subscription is used. For servers where pub/sub is unavailable or too costly;
/// a `Lock` waiter on the same name is not woken by a spin unlock (it waits out the lock's TTL
/// or its re-check). Java services using Redisson's `getSpinLock(name)` share the lock.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use redisson_sync::SpinBackoff;
///
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client
///     .spin_lock("cache:rebuild")
///     .with_backoff(SpinBackoff::constant(Duration::from_millis(64))?);
/// let guard = lock.lock().await?;
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SpinLock {
    pub(super) core: LockCore,
}

lock_surface!(
    SpinLock,
    setup: "# ",
    make: "client.spin_lock(\"cache:rebuild\")",
    errors: "",
    cancel: "",
    force_unlock: "Deletes the lock whoever holds it (Redisson's `forceUnlock()`); nothing is \
        published, waiters find it free at their next poll.",
    is_locked: "`true` when anyone holds the lock (`EXISTS`).",
);
hold_queries!(SpinLock, make: "client.spin_lock(\"cache:rebuild\")");
object_methods!(
    SpinLock,
    field: core,
    make: "client.spin_lock(\"cache:rebuild\")",
    keys: "It acts on the lock's hash `name`.",
    delete: "Deletes the lock as Redisson's `delete()` does: a force unlock (`DEL`; nothing is \
        published, waiters find it free at their next poll).",
    watchdog: "On a lock held under the watchdog, an expiry set here lasts until the next \
        renewal (at most a third of the watchdog timeout), which sets the lease again, as \
        Redisson's watchdog does; a hold with an explicit lease keeps it (a cleared expiry \
        makes the key persistent until the lock is released). Keys beyond the name are not \
        renewed and keep it.",
);

impl SpinLock {
    pub(crate) fn new(locks: &Locks, name: String) -> Self {
        Self::with(locks, name, SpinBackoff::default())
    }

    fn with(locks: &Locks, name: String, backoff: SpinBackoff) -> Self {
        let kind = Spin {
            inner: reentrant_kind(&name),
            backoff,
        };
        Self {
            core: LockCore::new(locks, Arc::new(kind), name.into()),
        }
    }

    /// This lock with waiters sleeping by `backoff` between attempts.
    #[must_use]
    pub fn with_backoff(self, backoff: SpinBackoff) -> Self {
        Self::with(self.core.locks(), self.core.name().to_owned(), backoff)
    }
}

/// The spin lock's kind: the reentrant lock's acquire and renewal, its own unlock, polling.
#[derive(Debug)]
struct Spin {
    inner: Arc<dyn HoldKind>,
    backoff: SpinBackoff,
}

impl HoldKind for Spin {
    fn label(&self) -> &'static str {
        "SpinLock"
    }

    fn metric_kind(&self) -> &'static str {
        "spin"
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
        Box::pin(async move {
            let hold = req.hold;
            let mut invocation = UNLOCK.prepare_invoke();
            invocation
                .key(&*hold.id.name)
                .arg(hold.lease_ms)
                .arg(&*hold.id.field);
            let call = Call::write("unlock", &hold.id.name, &invocation)
                .tracked(&req.sent)
                .synced();
            release_reply("spin/unlock.lua", hold.shared.conn.call(call).await?)
        })
    }

    fn strategy(&self, _hold: &HoldSpec) -> Strategy {
        Strategy::Backoff(self.backoff.backoff())
    }

    fn renewal(&self) -> Arc<dyn Renewal> {
        self.inner.renewal()
    }

    fn force_unlock<'a>(
        &'a self,
        shared: &'a Shared,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut cmd = redis::cmd("DEL");
            cmd.arg(name);
            let call = Call::write_command("force_unlock", name, &cmd)
                .idempotent()
                .synced();
            deleted_reply("DEL", shared.conn.call(call).await?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoffs_refuse_zero_and_inverted_bounds() {
        let ms = Duration::from_millis;
        assert!(SpinBackoff::exponential(ms(0), ms(10), 2).is_err());
        assert!(SpinBackoff::exponential(ms(10), ms(5), 2).is_err());
        assert!(SpinBackoff::exponential(ms(1), ms(5), 0).is_err());
        assert!(SpinBackoff::constant(Duration::ZERO).is_err());
        assert_eq!(
            SpinBackoff::default(),
            SpinBackoff::exponential(ms(1), ms(128), 2).unwrap()
        );
        let mut constant = SpinBackoff::constant(ms(64)).unwrap().backoff();
        for _ in 0..5 {
            assert_eq!(constant.next_delay(), ms(64));
        }
    }
}
