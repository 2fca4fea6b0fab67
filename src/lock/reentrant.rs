//! The reentrant lock, compatible with Redisson's `RLock` (docs/LAYOUT.md §2): its scripts
//! (`lua/lock/`), its channel and the renewal every hash-based lock shares.

use std::sync::{Arc, LazyLock};

use super::single::{LockCore, Locks};
use super::surface::{hold_queries, lock_surface};
use crate::conn::{Call, Script, ScriptInvocation, Synced};
use crate::error::Result;
use crate::future::BoxFuture;
use crate::hold::{
    AcquireReply, AcquireRequest, Fields, HoldKind, HoldSpec, ReleaseReply, ReleaseRequest,
    acquire_reply, on_unlock_messages, release_reply, send_acquire,
};
use crate::layout;
use crate::object::object_methods;
use crate::owner::Owner;
use crate::pubsub::UNLOCK_MESSAGE;
use crate::reply::deleted_reply;
use crate::shared::Shared;
use crate::wait::Strategy;
use crate::watchdog::Renewal;

/// `lua/lock/acquire.lua`: RedissonLock.tryLockInnerAsync.
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/lock/acquire.lua")));

/// `lua/lock/unlock.lua`: RedissonLock.unlockInnerAsync.
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/lock/unlock.lua")));

/// `lua/lock/force_unlock.lua`: RedissonLock.forceUnlockAsync.
static FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/lock/force_unlock.lua")));

/// `lua/lock/renew.lua`: the watchdog's batched renewal (Redisson's `LockTask`).
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/lock/renew.lua")));

/// Renews a hold of a hash-based lock: `PEXPIRE key` while `HEXISTS key field` (Redisson's
/// `LockTask`, docs/LAYOUT.md §1.9). Used by the reentrant lock, the fair lock and the write
/// half of the read-write lock.
#[derive(Debug)]
pub(crate) struct HashRenewal;

impl Renewal for HashRenewal {
    fn kind(&self) -> &'static str {
        "hash"
    }

    fn script(&self) -> &'static Script {
        &RENEW
    }

    fn add(&self, batch: &mut ScriptInvocation<'static>, key: &str, field: &str) {
        batch.key(key).arg(field);
    }
}

/// The hash renewal, shared.
pub(crate) static HASH_RENEWAL: LazyLock<Arc<dyn Renewal>> =
    LazyLock::new(|| Arc::new(HashRenewal));

/// A reentrant distributed lock: Redisson's `RLock`.
///
/// The lock is the Redis hash `name` with one field `<client id>:<owner id>` whose value is the
/// hold count; its TTL is the lease. Waiters subscribe to `redisson_lock__channel:{name}` and are
/// woken by the `0` published on full release. Java services using Redisson's
/// `getLock(name)` on the same Redis share the lock with this one in both directions.
///
/// Reentrancy is per [`Owner`](crate::Owner): by default the current Tokio task. Every
/// successful acquisition returns a [`LockGuard`](crate::LockGuard); each guard releases one
/// hold.
///
/// # Fairness
///
/// None: waiters woken by an unlock race for the lock, like Redisson's `RLock`, and a client
/// that re-acquires quickly can keep others waiting (a fast Rust client can nearly starve Java
/// clients on a busy lock). Use a [`FairLock`](crate::FairLock) when every waiter must get its
/// turn.
///
/// A `Lock` is a cheap handle (client clone + name): create one per use or keep it.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.lock("order:42");
/// let guard = lock.lock().await?;
/// // ... critical section ...
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Lock {
    pub(super) core: LockCore,
}

lock_surface!(
    Lock,
    setup: "# ",
    make: "client.lock(\"order:42\")",
    errors: "",
    cancel: "",
    force_unlock: "Deletes the lock whoever holds it and wakes a waiter of each client \
        (Redisson's `forceUnlock()`).",
    is_locked: "`true` when anyone holds the lock (Redisson's `isLocked()`: `EXISTS`).",
);
hold_queries!(Lock, make: "client.lock(\"order:42\")");
object_methods!(
    Lock,
    field: core,
    make: "client.lock(\"order:42\")",
    keys: "It acts on the lock's hash `name`.",
    delete: "Deletes the lock as Redisson's `delete()` does: a force unlock (the hash deleted \
        whoever holds it, a waiter of each client woken).",
    watchdog: "On a lock held under the watchdog, an expiry set here lasts until the next \
        renewal (at most a third of the watchdog timeout), which sets the lease again, as \
        Redisson's watchdog does; a hold with an explicit lease keeps it (a cleared expiry \
        makes the key persistent until the lock is released). Keys beyond the name are not \
        renewed and keep it.",
);

impl Lock {
    pub(crate) fn new(locks: &Locks, name: String) -> Self {
        let kind = reentrant_kind(&name);
        Self {
            core: LockCore::new(locks, kind, name.into()),
        }
    }
}

/// The reentrant lock's kind for `name` (also under the fenced, spin and non-reentrant locks).
pub(super) fn reentrant_kind(name: &str) -> Arc<dyn HoldKind> {
    Arc::new(Reentrant {
        channel: layout::lock_channel(name).into(),
        fields: Fields::default(),
    })
}

/// The reentrant lock's scripts (`lua/lock/`).
#[derive(Debug)]
struct Reentrant {
    /// `redisson_lock__channel:{N}`.
    channel: Arc<str>,
    fields: Fields,
}

impl HoldKind for Reentrant {
    fn label(&self) -> &'static str {
        "Lock"
    }

    fn metric_kind(&self) -> &'static str {
        "lock"
    }

    fn field(&self, client_id: &str, owner: Owner) -> Arc<str> {
        self.fields.holder(client_id, owner)
    }

    fn acquire<'a>(
        &'a self,
        req: &'a AcquireRequest<'a>,
    ) -> BoxFuture<'a, Result<(AcquireReply, Synced)>> {
        Box::pin(async move {
            let hold = req.hold;
            let mut invocation = ACQUIRE.prepare_invoke();
            invocation
                .key(&*hold.id.name)
                .arg(hold.lease_ms)
                .arg(&*hold.id.field)
                .arg(req.expected);
            let call = Call::write("acquire", &hold.id.name, &invocation)
                .limit(req.limit)
                .tracked(&req.sent);
            send_acquire(req, call, |v| acquire_reply("lock/acquire.lua", v)).await
        })
    }

    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>> {
        Box::pin(async move {
            let hold = req.hold;
            let verb = hold.shared.conn.publish_command().await?;
            let mut invocation = UNLOCK.prepare_invoke();
            invocation
                .key(&*hold.id.name)
                .key(&*self.channel)
                .arg(UNLOCK_MESSAGE)
                .arg(hold.lease_ms)
                .arg(&*hold.id.field)
                .arg(verb);
            let call = Call::write("unlock", &hold.id.name, &invocation)
                .tracked(&req.sent)
                .synced();
            // nil: not held; 0: one hold released, others remain; 1: last hold released.
            release_reply("lock/unlock.lua", hold.shared.conn.call(call).await?)
        })
    }

    fn strategy(&self, _hold: &HoldSpec) -> Strategy {
        on_unlock_messages(&*self.channel)
    }

    fn yields_to_parked(&self) -> bool {
        true
    }

    fn renewal(&self) -> Arc<dyn Renewal> {
        HASH_RENEWAL.clone()
    }

    fn force_unlock<'a>(
        &'a self,
        shared: &'a Shared,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let verb = shared.conn.publish_command().await?;
            let mut invocation = FORCE_UNLOCK.prepare_invoke();
            invocation
                .key(name)
                .key(&*self.channel)
                .arg(UNLOCK_MESSAGE)
                .arg(verb);
            let call = Call::write("force_unlock", name, &invocation)
                .idempotent()
                .synced();
            deleted_reply("lock/force_unlock.lua", shared.conn.call(call).await?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::future::SMALL_BLOCK;

    /// An acquisition boxes its first attempts' future once (`wait::observed`).
    #[tokio::test]
    async fn an_acquisitions_future_fits_in_a_small_block() {
        let locks = Locks {
            shared: Shared::offline(),
            record: crate::hold::Record::default(),
        };
        // Every lock kind acquires through `HoldAcquire`; the options do not change its type.
        let lock = Lock::new(&locks, "sizes".into());
        let size = lock.core.boxed_acquisition_size();
        assert!(
            size <= SMALL_BLOCK,
            "an acquisition's future is {size} bytes, more than glibc's per-thread cache serves ({SMALL_BLOCK})"
        );
    }
}
