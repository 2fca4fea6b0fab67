//! The fair lock, compatible with Redisson's `RFairLock` (docs/LAYOUT.md §4): its scripts
//! (`lua/fair/`, each but the give-up cleanup prefixed with the stale-waiter purge), its queue
//! and deadline keys, and its per-waiter channels.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Value;

use super::reentrant::HASH_RENEWAL;
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
use crate::object::{delete_keys, object_methods};
use crate::owner::Owner;
use crate::pubsub::UNLOCK_MESSAGE;
use crate::reply::{deleted_reply, unexpected};
use crate::shared::Shared;
use crate::wait::Strategy;
use crate::watchdog::Renewal;

/// A fair-lock script that starts with the stale-waiter purge (`lua/fair/purge.lua`, §4.3),
/// as every Redisson fair-lock script but `acquireFailed` does.
macro_rules! purging {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../../lua/fair/purge.lua"),
                include_str!(concat!("../../lua/fair/", $file))
            ))
        })
    };
}

/// `purge.lua` + `acquire.lua`: RedissonFairLock.tryLockInnerAsync, waiting form.
static ACQUIRE: LazyLock<Script> = purging!("acquire.lua");

/// `purge.lua` + `try_acquire.lua`: RedissonFairLock.tryLockInnerAsync, non-waiting form
/// (never enqueues).
static TRY_ACQUIRE: LazyLock<Script> = purging!("try_acquire.lua");

/// `purge.lua` + `unlock.lua`: RedissonFairLock.unlockInnerAsync.
static UNLOCK: LazyLock<Script> = purging!("unlock.lua");

/// `purge.lua` + `force_unlock.lua`: RedissonFairLock.forceUnlockAsync.
static FORCE_UNLOCK: LazyLock<Script> = purging!("force_unlock.lua");

/// `acquire_failed.lua`: RedissonFairLock.acquireFailedAsync, a waiter leaving the queue.
static ACQUIRE_FAILED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/fair/acquire_failed.lua")));

/// Slots and deadlines stay below 2^53 ms, where Lua's doubles still count whole milliseconds.
const MAX_SLOT_MS: u64 = 1 << 53;

/// A reentrant distributed lock that serves its waiters in arrival order: Redisson's
/// `RFairLock`.
///
/// The lock itself is the same hash as [`Lock`](crate::Lock)'s: `name`, one field
/// `<client id>:<owner id>` whose value is the hold count, TTL = the lease. Waiters queue in
/// two more keys, exactly as Redisson's do, so Java services using `getFairLock(name)` on the
/// same Redis share the queue with this lock in both directions:
///
/// - `redisson_lock_queue:{name}`, a list of the waiters' fields in arrival order;
/// - `redisson_lock_timeout:{name}`, a sorted set scoring each waiter with its *deadline*: the
///   epoch millisecond by which it must have taken the lock, or be dropped from the queue;
/// - each waiter subscribes to its own channel `redisson_lock__channel:{name}:<its field>`, and
///   a release publishes `0` only there, to the queue's head: no herd, one waiter wakes.
///
/// (Names that already contain `{` are used without the added braces, as Redisson does.)
///
/// # Fairness
///
/// A waiter joins the tail of the queue on its first attempt; the lock goes to the queue's
/// head, and to nobody else while the head is within its slot, even when the lock is free.
/// [`try_lock`](Self::try_lock) never joins the queue: it succeeds only when the lock is free
/// and the queue empty (or this owner is its head), or on re-entry. Reentrancy is per
/// [`Owner`](crate::Owner), as with [`Lock`](crate::Lock), and a re-entry does not queue.
///
/// # The slot
///
/// Each waiter is given a *slot*: its deadline is the previous waiter's deadline (or the lock's
/// expiry, for the first) plus the slot. The slot is the wait of
/// [`try_lock_for`](Self::try_lock_for) / [`try_lock_with_options`](Self::try_lock_with_options),
/// and [`Config::fair_wait_timeout`](crate::Config::fair_wait_timeout) (Redisson's
/// `fairLockWaitTimeout`, 5 min) for [`lock`](Self::lock) and [`try_lock`](Self::try_lock).
/// When the head takes the lock, or a waiter leaves, the deadlines behind it move one slot
/// earlier. A waiter that is still at the head when its deadline passes is dropped from the
/// queue by the next script that runs: this is how a crashed waiter stops blocking the queue,
/// after at most one slot. A live waiter dropped that way (the lock was held for longer than
/// the slots of everyone before it) re-joins at the tail on its next attempt, as in Redisson.
/// A waiter of this crate that stops waiting (its wait ran out, its future was dropped, its
/// client shut down, an error) leaves the queue at once; when it was the head and the lock is
/// free, it wakes the next waiter (Redisson's own cleanup does not, so the next waiter would
/// sleep until its hint runs out).
///
/// # Clocks
///
/// Like Redisson, the scripts run on the *client's* wall clock (`SystemTime::now()` in epoch
/// milliseconds, passed to every script), not Redis's: a deadline is written with the clock of
/// the waiter's host, and compared, when the head is checked, with the clock of whichever
/// client runs the next script (an acquire, an unlock, a force unlock). With skew between
/// hosts, a waiter whose host runs *ahead* gets deadlines that end late as others see them
/// (its dead entry blocks the queue longer), and one whose host runs *behind* gets deadlines
/// that end early: a client whose clock is ahead by more than a slot drops a live head from
/// the queue (it re-joins at the tail). Keep hosts synchronized (NTP) well within the slot;
/// the default slot of 5 min leaves a wide margin, short `try_lock_for` waits a narrow one.
/// Waits themselves (`try_lock_for`) are measured on the monotonic clock.
///
/// # Differences from Redisson
///
/// Redis is written exactly as Redisson writes it. Two replies differ: an unlock when the lock
/// no longer exists (its lease ran out, or it was force-unlocked) wakes the head as Redisson
/// does, but returns [`Error::NotHeld`](crate::Error::NotHeld) where Redisson reports success,
/// as [`Lock`](crate::Lock) does; and the sleep hint a queued waiter gets when it re-checks is
/// the earlier of the lock's remaining TTL and the head's deadline, where Redisson's is the
/// TTL, or 0 (re-poll at once) while the lock is free or has no expiry. So a waiter behind a
/// crashed head (whose wake-up message is lost) re-checks when that head's slot ends, not a
/// whole re-check interval later, and never spins.
///
/// A `FairLock` is a cheap handle (client clone + name): create one per use or keep it.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.fair_lock("jobs"); // Redisson: redisson.getFairLock("jobs")
/// let guard = lock.lock().await?; // served in arrival order
/// // ... take the next job ...
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct FairLock {
    pub(super) core: LockCore,
}

lock_surface!(
    FairLock,
    setup: "# ",
    make: "client.fair_lock(\"jobs\")",
    errors: "",
    cancel: "A waiter that leaves without the lock (its future dropped, its wait over, an \
        error, a shutdown) also leaves the queue (Redisson's `acquireFailed`), moving the \
        deadlines behind it up one slot; when it was the head and the lock is free, the next \
        waiter is woken at once.",
    force_unlock: "Deletes the lock whoever holds it and wakes the queue's head (Redisson's \
        `forceUnlock()`); the queue stays.",
    is_locked: "`true` when anyone holds the lock (Redisson's `isLocked()`: `EXISTS`); waiters \
        in the queue do not count.",
);
hold_queries!(FairLock, make: "client.fair_lock(\"jobs\")");
object_methods!(
    FairLock,
    field: core,
    make: "client.fair_lock(\"jobs\")",
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

impl FairLock {
    pub(crate) fn new(locks: &Locks, name: String) -> Self {
        let kind = fair_kind(&name);
        Self {
            core: LockCore::new(locks, kind, name.into()),
        }
    }
}

/// The fair lock's kind for `name` (also under the non-reentrant fair lock).
pub(super) fn fair_kind(name: &str) -> Arc<dyn HoldKind> {
    Arc::new(Fair {
        channel: layout::lock_channel(name).into(),
        queue: layout::fair_queue(name).into(),
        timeouts: layout::fair_timeouts(name).into(),
        fields: Fields::default(),
    })
}

/// The fair lock's scripts (`lua/fair/`).
#[derive(Debug)]
struct Fair {
    /// `redisson_lock__channel:{N}`, the prefix of every waiter's channel.
    channel: Arc<str>,
    /// `redisson_lock_queue:{N}`.
    queue: Arc<str>,
    /// `redisson_lock_timeout:{N}`.
    timeouts: Arc<str>,
    fields: Fields,
}

/// The client's wall clock in epoch milliseconds: Redisson's `System.currentTimeMillis()`.
fn now_ms() -> u64 {
    crate::clock::epoch_ms().unsigned_abs()
}

/// The slot of a waiter whose whole wait is `wait`: the wait in ms when positive, else the
/// client's `fair_wait_timeout` (Redisson: `waitTime > 0 ? waitTime : fairLockWaitTimeout`).
fn slot_ms(shared: &Shared, wait: Option<Duration>) -> u64 {
    let slot = match wait {
        Some(wait) if !wait.is_zero() => wait,
        _ => shared.config.fair_wait_timeout,
    };
    u64::try_from(slot.as_millis()).map_or(MAX_SLOT_MS, |ms| ms.min(MAX_SLOT_MS))
}

impl Fair {
    /// The invocation of a script that starts with the purge: KEYS N, queue, timeouts; ARGV now.
    fn purging(&self, script: &'static Script, name: &str) -> ScriptInvocation<'static> {
        let mut invocation = script.prepare_invoke();
        invocation
            .key(name)
            .key(&*self.queue)
            .key(&*self.timeouts)
            .arg(now_ms());
        invocation
    }
}

impl HoldKind for Fair {
    fn label(&self) -> &'static str {
        "FairLock"
    }

    fn metric_kind(&self) -> &'static str {
        "fair"
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
            let slot = slot_ms(&hold.shared, req.wait);
            let single = req.wait == Some(Duration::ZERO);
            let (script, file) = if single {
                (&*TRY_ACQUIRE, "fair/try_acquire.lua")
            } else {
                (&*ACQUIRE, "fair/acquire.lua")
            };
            let mut invocation = self.purging(script, &hold.id.name);
            invocation
                .arg(hold.lease_ms)
                .arg(&*hold.id.field)
                .arg(slot)
                .arg(req.expected);
            let call = Call::write("acquire", &hold.id.name, &invocation)
                .limit(req.limit)
                .tracked(&req.sent);
            let (reply, synced) = send_acquire(req, call, |v| acquire_reply(file, v)).await?;
            let reply = match reply {
                // 1 is Redisson's "false": not acquired, and no sleep hint.
                AcquireReply::Held(_) if single => AcquireReply::Held(-2),
                other => other,
            };
            Ok((reply, synced))
        })
    }

    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>> {
        Box::pin(async move {
            let hold = req.hold;
            let verb = hold.shared.conn.publish_command().await?;
            let mut invocation = self.purging(&UNLOCK, &hold.id.name);
            invocation
                .key(&*self.channel)
                .arg(hold.lease_ms)
                .arg(&*hold.id.field)
                .arg(UNLOCK_MESSAGE)
                .arg(verb);
            let call = Call::write("unlock", &hold.id.name, &invocation)
                .tracked(&req.sent)
                .synced();
            // nil: held by another; 0: one hold released, others remain; 1: last hold
            // released; 2: the lock was gone (the head was woken all the same), which Redisson
            // reports as success and this crate as not held, as for `Lock`.
            match hold.shared.conn.call(call).await? {
                Value::Int(2) => Ok(ReleaseReply::NotHeld),
                reply => release_reply("fair/unlock.lua", reply),
            }
        })
    }

    fn strategy(&self, hold: &HoldSpec) -> Strategy {
        on_unlock_messages(layout::fair_waiter_channel(&hold.id.name, &hold.id.field))
    }

    fn queues_waiters(&self) -> bool {
        true
    }

    fn give_up<'a>(
        &'a self,
        hold: &'a HoldSpec,
        wait: Option<Duration>,
    ) -> Option<BoxFuture<'a, Result<()>>> {
        Some(Box::pin(async move {
            let verb = hold.shared.conn.publish_command().await?;
            let mut invocation = ACQUIRE_FAILED.prepare_invoke();
            invocation
                .key(&*self.queue)
                .key(&*self.timeouts)
                .key(&*hold.id.name)
                .key(&*self.channel)
                .arg(&*hold.id.field)
                .arg(slot_ms(&hold.shared, wait))
                .arg(UNLOCK_MESSAGE)
                .arg(verb);
            let call = Call::write("give_up", &hold.id.name, &invocation)
                .idempotent()
                .synced();
            match hold.shared.conn.call(call).await? {
                Value::Int(0) => Ok(()),
                other => Err(unexpected("fair/acquire_failed.lua", &other)),
            }
        }))
    }

    fn renewal(&self) -> Arc<dyn Renewal> {
        HASH_RENEWAL.clone()
    }

    fn extra_keys(&self, _name: &str) -> Vec<Arc<str>> {
        vec![self.queue.clone(), self.timeouts.clone()]
    }

    /// `RedissonFairLock.deleteAsync`: the three keys, nothing published.
    fn delete<'a>(
        &'a self,
        shared: &'a Shared,
        keys: &'a [Arc<str>],
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(delete_keys(shared, keys))
    }

    fn force_unlock<'a>(
        &'a self,
        shared: &'a Shared,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let verb = shared.conn.publish_command().await?;
            let mut invocation = self.purging(&FORCE_UNLOCK, name);
            invocation.key(&*self.channel).arg(UNLOCK_MESSAGE).arg(verb);
            let call = Call::write("force_unlock", name, &invocation)
                .idempotent()
                .synced();
            deleted_reply("fair/force_unlock.lua", shared.conn.call(call).await?)
        })
    }
}
