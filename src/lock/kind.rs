//! What makes one lock primitive differ from another, as the shared lock code sees it.
//!
//! Each lock primitive (the reentrant lock, the fair lock, the halves of the read-write lock)
//! implements [`LockKind`] once, in its own file, with its own scripts and key names; the
//! guard, the lock API, hold bookkeeping and waiting are written once for all of them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use super::hold::HoldSpec;
use crate::conn::{Call, Delivery, Synced};
use crate::error::{Error, Result};
use crate::layout;
use crate::pubsub::WakePolicy;
use crate::shared::Shared;
use crate::wait::{BoxFuture, Strategy};
use crate::watchdog::Renewal;

/// One acquire request: the hold asked for, and what makes it safe under faults.
#[derive(Debug)]
pub(crate) struct AcquireRequest<'a> {
    pub(crate) hold: &'a HoldSpec,
    /// The caller's whole wait: `Some(ZERO)` for a single attempt, `None` for no deadline.
    pub(crate) wait: Option<Duration>,
    /// How long to wait for the reply.
    pub(crate) limit: Duration,
    /// The holds the client counts for the holder field; the script grants only when Redis
    /// agrees (docs/LAYOUT.md §12).
    pub(crate) expected: u32,
    /// Where the request went (pass it to [`Call::tracked`]).
    pub(crate) sent: Delivery,
}

/// The reply of an acquire script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// Granted (first hold or re-entry).
    Acquired,
    /// Held by someone else; the sleep hint in ms (-1 = no expiry, -2 = no hint).
    Held(i64),
    /// Not granted: the holder field has this many holds, not the expected count.
    Count(u32),
    /// Granted, with this fencing token (the fenced lock).
    Fenced(u64),
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

/// One lock primitive: its scripts, its channel, its holder fields.
///
/// Futures are boxed so the trait can be used as `Arc<dyn LockKind>`.
pub(crate) trait LockKind: fmt::Debug + Send + Sync + 'static {
    /// The public type's name, for `Debug` output (`"Lock"`, `"FairLock"`, ...).
    fn label(&self) -> &'static str;

    /// The kind as metrics and spans name it (`"lock"`, `"fair"`, ...; see
    /// [`observe`](crate::observe)).
    fn metric_kind(&self) -> &'static str;

    /// The hash field of `owner` of the client `client_id`: `<client id>:<owner id>` unless the
    /// kind marks its fields (the write lock's `:write`).
    fn field(&self, client_id: &str, owner: u64) -> String {
        layout::holder_field(client_id, owner)
    }

    /// Runs the acquire script once.
    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'a>) -> BoxFuture<'a, Result<AcquireReply>>;

    /// Runs the release script once (one hold).
    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>>;

    /// How a waiter for `hold` waits: the channel it subscribes to and its wake policy.
    fn strategy(&self, hold: &HoldSpec) -> Strategy;

    /// `true` when a waiting acquire leaves a trace in Redis (a queue entry) that
    /// [`give_up`](Self::give_up) must clean up.
    fn queues_waiters(&self) -> bool {
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

    /// `false` for the non-reentrant locks: an owner that holds the lock and asks for it again
    /// gets `Error::NotReentrant` at once, before anything is sent (its acquire always expects
    /// 0 holds, so Redis never re-enters it either).
    fn reentrant(&self) -> bool {
        true
    }

    /// The fencing token of a grant found by resolving an acquire of unknown outcome (the
    /// fenced lock reads its counter: nobody else can have taken the lock since); `None` for
    /// kinds without tokens.
    fn granted_token<'a>(&'a self, _hold: &'a HoldSpec) -> BoxFuture<'a, Result<Option<u64>>> {
        Box::pin(async { Ok(None) })
    }

    /// Deletes the lock whoever holds it and wakes waiters; `true` if something was deleted.
    fn force_unlock<'a>(&'a self, shared: &'a Shared, name: &'a str)
    -> BoxFuture<'a, Result<bool>>;

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

/// How every lock kind waits: on the messages of `channel` (Redisson's unlock messages, `0`
/// waking one waiter and `1` all of them, docs/LAYOUT.md §3).
pub(crate) fn on_unlock_messages(channel: impl Into<String>) -> Strategy {
    Strategy::PubSub {
        channel: channel.into(),
        policy: WakePolicy::Lock,
    }
}

/// A lease in whole milliseconds, as the scripts take it.
pub(crate) fn lease_millis(lease: Duration) -> Result<u64> {
    millis("lease", lease)
}

/// A lease or time to live (`what`, for the error) in whole milliseconds, as Redis takes it:
/// at least 1 ms, at most 2^62 ms.
pub(crate) fn millis(what: &str, d: Duration) -> Result<u64> {
    let ms = d.as_millis();
    if ms == 0 {
        return Err(Error::InvalidArgument(format!(
            "a {what} must be at least 1 ms, got {d:?}"
        )));
    }
    if ms > crate::config::MAX_LEASE_MS as u128 {
        return Err(Error::InvalidArgument(format!(
            "a {what} must be at most 2^62 ms (Redis rejects later expiry times), got {d:?}"
        )));
    }
    Ok(ms as u64)
}

/// The error for a reply a script's contract does not allow.
pub(crate) fn unexpected(script: &'static str, value: &Value) -> Error {
    Error::UnexpectedReply {
        script,
        detail: format!("{value:?}"),
    }
}

/// The reply of an acquire script: nil when acquired, the PTTL (or a sleep hint) when held by
/// another, `held:<n>` when the holder's count is not the expected one.
/// Sends an acquire `call` (marked [`Call::synced`]) and decodes its reply with `decode`. With
/// replica sync on, a grant that no replica acknowledged is released again at once (one hold:
/// a re-entry keeps the holds it had) and the caller gets [`Error::ReplicasNotSynced`], as
/// Redisson's `handleNoSync` does; a refusal is returned as it is.
pub(crate) async fn synced_acquire(
    kind: &dyn LockKind,
    req: &AcquireRequest<'_>,
    call: Call<'_>,
    decode: impl FnOnce(Value) -> Result<AcquireReply>,
) -> Result<AcquireReply> {
    let hold = req.hold;
    let (value, synced) = hold.shared.conn.call_synced(call.synced()).await?;
    let reply = decode(value)?;
    let Synced::Unacked { replicas, after } = synced else {
        return Ok(reply);
    };
    if !matches!(reply, AcquireReply::Acquired | AcquireReply::Fenced(_)) {
        return Ok(reply);
    }
    let release = ReleaseRequest {
        hold,
        sent: Delivery::default(),
    };
    if let Err(e) = kind.release(&release).await {
        // Its lease ends it: a hold that nobody renews.
        tracing::warn!(name = %hold.name, error = %e, "could not release an acquire that no replica acknowledged; its lease will end it");
    }
    Err(Error::ReplicasNotSynced {
        operation: "acquire",
        name: hold.name.to_string(),
        replicas,
        after,
    })
}

pub(crate) fn acquire_reply(script: &'static str, value: Value) -> Result<AcquireReply> {
    match value {
        Value::Nil => Ok(AcquireReply::Acquired),
        Value::Int(ttl) => Ok(AcquireReply::Held(ttl)),
        ref other => match status(other) {
            Some(s) if s.starts_with(b"held:") => std::str::from_utf8(&s[5..])
                .ok()
                .and_then(|n| n.parse::<u32>().ok())
                .map(AcquireReply::Count)
                .ok_or_else(|| unexpected(script, other)),
            _ => Err(unexpected(script, other)),
        },
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

/// The reply of a force-unlock script: 1 when something was deleted, else 0.
pub(crate) fn released_reply(script: &'static str, value: Value) -> Result<bool> {
    match value {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        other => Err(unexpected(script, &other)),
    }
}

/// The text of a string or status reply (a Lua string comes back as a bulk string; `OK` as a
/// status).
pub(crate) fn status(value: &Value) -> Option<&[u8]> {
    match value {
        Value::BulkString(s) => Some(s),
        Value::SimpleString(s) => Some(s.as_bytes()),
        Value::VerbatimString { text, .. } => Some(text.as_bytes()),
        Value::Okay => Some(b"OK"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_whole_milliseconds_that_redis_accepts() {
        assert!(lease_millis(Duration::ZERO).is_err());
        assert!(lease_millis(Duration::from_micros(999)).is_err());
        assert_eq!(lease_millis(Duration::from_millis(1)).unwrap(), 1);
        assert_eq!(lease_millis(Duration::from_micros(1500)).unwrap(), 1);
        let max = Duration::from_millis(crate::config::MAX_LEASE_MS);
        assert_eq!(lease_millis(max).unwrap(), 1 << 62);
        let err = lease_millis(max + Duration::from_millis(1)).unwrap_err();
        assert!(err.to_string().contains("at most 2^62 ms"), "{err}");
        assert!(lease_millis(Duration::MAX).is_err());
    }

    #[test]
    fn replies_decode_by_contract() {
        let s = |t: &str| Value::BulkString(t.as_bytes().to_vec());
        assert_eq!(
            acquire_reply("a", Value::Nil).unwrap(),
            AcquireReply::Acquired
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
    }
}
