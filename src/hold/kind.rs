//! What makes one lock kind differ from another, as the hold layer sees it: [`HoldKind`], the
//! hold it is asked for ([`HoldSpec`]), and what its scripts answer.
//!
//! Each lock kind (the reentrant lock, the fair lock, the halves of the read-write lock, the
//! fenced, spin, non-reentrant and token locks) implements [`HoldKind`] once, in its own file
//! under `src/lock/`, with its own scripts and key names. Two of its methods say how it counts
//! and settles its holds: [`max_holds`](HoldKind::max_holds) (many per holder, or one) and
//! [`read_holds`](HoldKind::read_holds) (the evidence read back after a request of unknown
//! outcome was cut off: a hash field's hold count, a key compared with a value, a fenced
//! lock's count and counter). Everything else, the hold bookkeeping, resolution, release,
//! renewal and waiting, is written once for all of them.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::Value;

use super::record::Record;
use crate::conn::{Call, Delivery, Synced};
use crate::error::Result;
use crate::fasthash::NameField;
use crate::future::BoxFuture;
use crate::layout;
use crate::owner::Owner;
use crate::pubsub::WakePolicy;
use crate::reply::{status, unexpected};
use crate::shared::Shared;
use crate::wait::{self, Strategy};
use crate::watchdog::Renewal;

/// Everything needed to acquire or release one hold; runs on its own, detached from callers.
#[derive(Debug)]
pub(crate) struct HoldSpec {
    pub(crate) shared: Arc<Shared>,
    /// The client's record of its holds.
    pub(crate) record: Record,
    /// The kind the hold belongs to: its scripts and names.
    pub(crate) kind: Arc<dyn HoldKind>,
    /// The lock's name and the holder as Redis stores it (a hash field, or a token lock's
    /// value), hashed once for the record and the watchdog.
    pub(crate) id: NameField,
    /// The lease of the hold: explicit, or the watchdog timeout.
    pub(crate) lease_ms: u64,
}

impl HoldSpec {
    pub(crate) fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// How long an unknown outcome is retried before it is given up (the hold then expires
    /// with its lease if it was granted).
    fn resolve_limit(&self) -> Duration {
        (self.lease() + self.shared.config.command_timeout) * 2
    }

    /// Cuts off the connection a request of unknown outcome went out on, then reads what Redis
    /// shows of the holder ([`HoldKind::read_holds`]), retrying transient errors (bounded; at
    /// most once more after a shutdown). What it reads after the cut-off is final: the request
    /// ran before it, or never will. A key of another type holds nothing of this holder.
    pub(crate) async fn cut_off_and_read(&self, delivery: &Delivery) -> Result<Evidence> {
        let read = || self.kind.read_holds(self);
        match wait::settle_with(
            &self.shared,
            delivery,
            &self.id.name,
            self.resolve_limit(),
            read,
        )
        .await
        {
            Err(e) if e.is_wrong_type() => Ok(Evidence {
                count: 0,
                token: None,
            }),
            other => other,
        }
    }
}

/// One acquire request: the hold asked for, and what makes it safe under faults.
#[derive(Debug)]
pub(crate) struct AcquireRequest<'a> {
    pub(crate) hold: &'a HoldSpec,
    /// The caller's whole wait: `Some(ZERO)` for a single attempt, `None` for no deadline.
    pub(crate) wait: Option<Duration>,
    /// How long to wait for the reply.
    pub(crate) limit: Duration,
    /// An earlier attempt of this wait found the lock busy.
    pub(crate) contended: bool,
    /// The holds the client counts for the holder; the script grants only when Redis agrees
    /// (docs/LAYOUT.md §12).
    pub(crate) expected: u32,
    /// Where the request went (pass it to [`Call::tracked`]).
    pub(crate) sent: Delivery,
}

/// The reply of an acquire script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// Granted (a first hold or a re-entry), with the fencing token the grant drew, for the
    /// kinds that draw one.
    Granted { token: Option<u64> },
    /// Held by someone else; the sleep hint in ms (-1 = no expiry, -2 = no hint).
    Held(i64),
    /// Not granted: the holder has this many holds, not the expected count.
    Count(u32),
}

/// One release request.
#[derive(Debug)]
pub(crate) struct ReleaseRequest<'a> {
    pub(crate) hold: &'a HoldSpec,
    /// Where the request went (pass it to [`Call::tracked`]).
    pub(crate) sent: Delivery,
}

/// The reply of a release script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReleaseReply {
    /// One hold released (the last one, or one of several).
    Released,
    /// The holder holds nothing here (expired, force-unlocked, taken over).
    NotHeld,
}

/// What Redis shows of one holder's holds, read after a request of unknown outcome was cut
/// off: how many there are, and the fencing token of the latest grant (for the kinds that
/// draw tokens).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Evidence {
    pub(crate) count: u32,
    pub(crate) token: Option<u64>,
}

/// One lock kind: its scripts, its channel, its holder ids, how it counts its holds.
///
/// Futures are boxed so the trait can be used as `Arc<dyn HoldKind>`.
pub(crate) trait HoldKind: fmt::Debug + Send + Sync + 'static {
    /// The public type's name, for `Debug` output (`"Lock"`, `"FairLock"`, ...).
    fn label(&self) -> &'static str;

    /// The kind as metrics and spans name it (`"lock"`, `"fair"`, ...; see
    /// [`observe`](crate::observe)).
    fn metric_kind(&self) -> &'static str;

    /// The holder id of `owner` of the client `client_id` for one acquisition: the hash field
    /// `<client id>:<owner id>` (a [`Fields`] cache makes it once per owner), marked for some
    /// kinds (the write lock's `:write`), or a token lock's value.
    fn field(&self, client_id: &str, owner: Owner) -> Arc<str>;

    /// Runs the acquire script once; says whether the replicas acknowledged it (replica sync).
    fn acquire<'a>(
        &'a self,
        req: &'a AcquireRequest<'a>,
    ) -> BoxFuture<'a, Result<(AcquireReply, Synced)>>;

    /// Runs the release script once (one hold).
    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>>;

    /// How many holds one holder may have: `u32::MAX` for a reentrant kind, 1 for the
    /// non-reentrant ones (an owner that holds the lock and asks again is refused with
    /// `Error::NotReentrant` before anything is sent, and its acquire always expects 0 holds,
    /// so Redis never re-enters it either).
    fn max_holds(&self) -> u32 {
        u32::MAX
    }

    /// Reads what Redis shows of `hold`'s holder (the evidence that settles a request of
    /// unknown outcome, once it was cut off): by default `HGET name field`, the hash field's
    /// hold count.
    fn read_holds<'a>(&'a self, hold: &'a HoldSpec) -> BoxFuture<'a, Result<Evidence>> {
        Box::pin(async move {
            let mut cmd = redis::cmd("HGET");
            cmd.arg(&*hold.id.name).arg(&*hold.id.field);
            let reply = hold
                .shared
                .conn
                .call(Call::read("resolve", &hold.id.name, &cmd))
                .await?;
            Ok(Evidence {
                count: hold_count_reply(reply)?,
                token: None,
            })
        })
    }

    /// How a waiter for `hold` waits: the channel it subscribes to and its wake policy.
    fn strategy(&self, hold: &HoldSpec) -> Strategy;

    /// `true` when a waiting acquire leaves a trace in Redis (a queue entry) that
    /// [`give_up`](Self::give_up) must clean up.
    fn queues_waiters(&self) -> bool {
        false
    }

    /// `true` when a waiting acquire of this kind lets the client's own waiters already parked
    /// on the lock's channel go first (see [`Acquire::yields_to_parked`]): an exclusive,
    /// unfair kind, whose releaser would otherwise take the lock back before the waiter its
    /// unlock message woke. Never a queueing kind (its queue orders the waiters), nor one
    /// several holders share.
    ///
    /// [`Acquire::yields_to_parked`]: crate::wait::Acquire::yields_to_parked
    fn yields_to_parked(&self) -> bool {
        false
    }

    /// Cleanup when a waiter stops waiting without the lock. `None`: nothing to clean up.
    fn give_up<'a>(
        &'a self,
        _hold: &'a HoldSpec,
        _wait: Option<Duration>,
    ) -> Option<BoxFuture<'a, Result<()>>> {
        None
    }

    /// How the watchdog renews a hold of this kind.
    fn renewal(&self) -> Arc<dyn Renewal>;

    /// Deletes the lock whoever holds it and wakes waiters; `true` if something was deleted.
    fn force_unlock<'a>(&'a self, shared: &'a Shared, name: &'a str)
    -> BoxFuture<'a, Result<bool>>;

    /// The keys that expire and are deleted with the lock, after its name `name` (a fair
    /// lock's queue and deadlines, a fenced lock's token counter): by default none.
    fn extra_keys(&self, _name: &str) -> Vec<Arc<str>> {
        Vec::new()
    }

    /// Deletes the lock as Redisson's `delete()` does (`keys`: its name and
    /// [`extra_keys`](Self::extra_keys)): by default [`force_unlock`](Self::force_unlock),
    /// as `RedissonBaseLock.deleteAsync`.
    fn delete<'a>(
        &'a self,
        shared: &'a Shared,
        keys: &'a [Arc<str>],
    ) -> BoxFuture<'a, Result<bool>> {
        self.force_unlock(shared, &keys[0])
    }

    /// `true` when this kind of lock is held by anyone: by default `EXISTS name` (Redisson's
    /// `isLocked`), which the halves of the read-write lock refine.
    fn is_locked<'a>(&'a self, shared: &'a Shared, name: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let cmd = redis::cmd("EXISTS").arg(name).clone();
            let reply = shared
                .conn
                .call(Call::read("is_locked", name, &cmd))
                .await?;
            Ok(matches!(reply, Value::Int(n) if n > 0))
        })
    }
}

/// The holder fields of one lock handle, made once per owner (a handle is usually used by one
/// owner again and again): saves formatting one on every acquire.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    last: Mutex<Option<(u64, Arc<str>)>>,
}

impl Fields {
    /// The field `make` formats for `owner`, from the cache when it was the last one asked.
    pub(crate) fn get(&self, owner: Owner, make: impl FnOnce() -> String) -> Arc<str> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match &*last {
            Some((id, field)) if *id == owner.id() => field.clone(),
            _ => {
                let field: Arc<str> = make().into();
                *last = Some((owner.id(), field.clone()));
                field
            }
        }
    }

    /// The plain holder field `<client id>:<owner id>` of `owner`.
    pub(crate) fn holder(&self, client_id: &str, owner: Owner) -> Arc<str> {
        self.get(owner, || layout::holder_field(client_id, owner.id()))
    }
}

/// Sends an acquire `call` (marked [`Call::synced`]: with replica sync on it goes with `WAIT`)
/// and decodes its reply with `decode`; the hold layer gives back a grant that no replica
/// acknowledged.
pub(crate) async fn send_acquire(
    req: &AcquireRequest<'_>,
    call: Call<'_>,
    decode: impl FnOnce(Value) -> Result<AcquireReply>,
) -> Result<(AcquireReply, Synced)> {
    let (value, synced) = req.hold.shared.conn.call_synced(call.synced()).await?;
    Ok((decode(value)?, synced))
}

/// How every lock kind waits on Redisson's unlock messages on `channel` (`0` waking one
/// waiter and `1` all of them, docs/LAYOUT.md §3).
pub(crate) fn on_unlock_messages(channel: impl Into<String>) -> Strategy {
    Strategy::PubSub {
        channel: channel.into(),
        policy: WakePolicy::Lock,
    }
}

/// A hold count as `HGET` returns it: nil is 0.
pub(crate) fn hold_count_reply(reply: Value) -> Result<u32> {
    match reply {
        Value::Nil => Ok(0),
        value => {
            redis::from_redis_value::<u32>(value.clone()).map_err(|_| unexpected("HGET", &value))
        }
    }
}

/// The reply of an acquire script: nil when acquired, the PTTL (or a sleep hint) when held by
/// another, `held:<n>` when the holder's count is not the expected one.
pub(crate) fn acquire_reply(script: &'static str, value: Value) -> Result<AcquireReply> {
    match value {
        Value::Nil => Ok(AcquireReply::Granted { token: None }),
        Value::Int(ttl) => Ok(AcquireReply::Held(ttl)),
        ref other => count_reply(script, other),
    }
}

/// `held:<n>`: the holder has `n` holds, not the expected count.
pub(crate) fn count_reply(script: &'static str, value: &Value) -> Result<AcquireReply> {
    match status(value) {
        Some(s) if s.starts_with(b"held:") => std::str::from_utf8(&s[5..])
            .ok()
            .and_then(|n| n.parse::<u32>().ok())
            .map(AcquireReply::Count)
            .ok_or_else(|| unexpected(script, value)),
        _ => Err(unexpected(script, value)),
    }
}

/// The reply of a release script: nil when the holder does not hold the lock, 0 (holds
/// remain) or 1 (released) otherwise.
pub(crate) fn release_reply(script: &'static str, value: Value) -> Result<ReleaseReply> {
    match value {
        Value::Nil => Ok(ReleaseReply::NotHeld),
        Value::Int(0 | 1) => Ok(ReleaseReply::Released),
        other => Err(unexpected(script, &other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_decode_by_contract() {
        let s = |t: &str| Value::BulkString(t.as_bytes().to_vec());
        assert_eq!(
            acquire_reply("a", Value::Nil).unwrap(),
            AcquireReply::Granted { token: None }
        );
        assert_eq!(
            acquire_reply("a", Value::Int(42)).unwrap(),
            AcquireReply::Held(42)
        );
        assert_eq!(
            acquire_reply("a", s("held:3")).unwrap(),
            AcquireReply::Count(3)
        );
        assert!(acquire_reply("a", s("fenced")).is_err());
        assert!(acquire_reply("a", s("held:x")).is_err());
        assert!(acquire_reply("a", s("upgrade")).is_err());
        assert_eq!(
            release_reply("r", Value::Nil).unwrap(),
            ReleaseReply::NotHeld
        );
        assert_eq!(
            release_reply("r", Value::Int(0)).unwrap(),
            ReleaseReply::Released
        );
        assert_eq!(
            release_reply("r", Value::Int(1)).unwrap(),
            ReleaseReply::Released
        );
        assert!(release_reply("r", s("fenced")).is_err());
        assert!(release_reply("r", Value::Int(2)).is_err());
        assert_eq!(hold_count_reply(Value::Nil).unwrap(), 0);
        assert_eq!(hold_count_reply(s("2")).unwrap(), 2);
        assert!(hold_count_reply(s("x")).is_err());
    }
}
