//! What makes one lock primitive differ from another, as the shared machinery sees it.
//!
//! The acquire loop ([`crate::acquire`]), the guards ([`crate::guard`]), the generic handle
//! ([`crate::handle`]) and the watchdog work for every primitive through [`LockKind`]: each
//! primitive (reentrant lock, fair lock, the halves of a read-write lock) implements it once,
//! in its own file, with its own scripts and key names.

use std::fmt;
use std::time::Duration;

use redis::Value;

use crate::client::Client;
use crate::detach::BoxFuture;
use crate::error::{Error, Result};
use crate::guard::Release;
use crate::naming;

/// Reply of one acquire script call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// Granted (first hold or re-entry).
    Acquired,
    /// Held by someone else; the waiter's sleep hint in ms (-1 = no expiry, -2 = no hint).
    Held(i64),
}

/// How the watchdog renews a hold taken without an explicit lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Renewal {
    /// `PEXPIRE key` while `HEXISTS key field` (Redisson's `LockTask`, §1.9).
    Hash,
    /// A read hold of a read-write lock: the hash and this holder's own `rwlock_timeout`
    /// marker keys, `<prefix>:1 ..= <prefix>:<count>` (Redisson's `ReadLockTask`, §5.8).
    Read {
        /// `timeoutPrefix(F)` of REDISSON_LAYOUT.md §5.1.
        marker_prefix: String,
    },
}

/// One lock primitive: its scripts, its channel, its holder fields.
///
/// Futures are boxed so the trait can be used as `Arc<dyn LockKind>`; every future is awaited
/// (or detached) by the shared machinery, never by a user.
pub(crate) trait LockKind: fmt::Debug + Send + Sync + 'static {
    /// The public type's name, for `Debug` output (`"Lock"`, `"FairLock"`, ...).
    fn label(&self) -> &'static str;

    /// The hash field of `owner` of the client `client_id`: `<client id>:<owner id>` unless the
    /// kind marks its fields (the write lock's `:write`).
    fn field(&self, client_id: &str, owner: u64) -> String {
        naming::holder_field(client_id, owner)
    }

    /// Runs the acquire script once for `hold`, waiting up to `limit` for the reply (see
    /// [`acquire_script`]). `wait` is the caller's whole wait: `Some(ZERO)` for a single
    /// attempt (`try_lock`), `None` for no deadline.
    fn acquire<'a>(
        &'a self,
        hold: &'a Release,
        wait: Option<Duration>,
        limit: Duration,
    ) -> BoxFuture<'a, Result<AcquireReply>>;

    /// Releases one hold; [`Error::NotHeld`] when the holder no longer holds the lock.
    fn release<'a>(&'a self, hold: &'a Release) -> BoxFuture<'a, Result<()>>;

    /// The channel a waiter for `hold` subscribes to before waiting.
    fn wake_channel(&self, hold: &Release) -> String;

    /// `true` when a waiting acquire leaves a trace in Redis (a queue entry) that
    /// [`give_up`](Self::give_up) must clean up.
    fn queues_waiters(&self) -> bool {
        false
    }

    /// Cleanup when a waiter stops waiting without the lock (its wait ran out, its future was
    /// dropped, its client shut down, an error). `None`: nothing to clean up.
    fn give_up<'a>(
        &'a self,
        _hold: &'a Release,
        _wait: Option<Duration>,
    ) -> Option<BoxFuture<'a, Result<()>>> {
        None
    }

    /// How the watchdog renews a hold of this kind.
    fn renewal(&self, _hold: &Release) -> Renewal {
        Renewal::Hash
    }

    /// Deletes the lock whoever holds it and wakes waiters; `true` if something was deleted.
    fn force_unlock<'a>(&'a self, client: &'a Client, name: &'a str)
    -> BoxFuture<'a, Result<bool>>;

    /// `true` when this kind of lock is held by anyone: by default `EXISTS name` (Redisson's
    /// `isLocked`), which the halves of the read-write lock refine.
    fn is_locked<'a>(&'a self, client: &'a Client, name: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let reply = client
                .inner()
                .connections
                .query("is_locked", name, redis::cmd("EXISTS").arg(name))
                .await?;
            Ok(matches!(reply, Value::Int(n) if n > 0))
        })
    }
}

/// A lease in whole milliseconds, as the scripts take it.
pub(crate) fn lease_millis(lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if ms == 0 {
        return Err(Error::InvalidArgument(format!(
            "a lease must be at least 1 ms, got {lease:?}"
        )));
    }
    if ms > crate::config::MAX_LEASE_MS as u128 {
        return Err(Error::InvalidArgument(format!(
            "a lease must be at most 2^62 ms (Redis rejects later expiry times), got {lease:?}"
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

/// The reply of an acquire script: nil when acquired, else an integer sleep hint.
fn acquire_reply(script: &'static str, value: Value) -> Result<AcquireReply> {
    match value {
        Value::Nil => Ok(AcquireReply::Acquired),
        Value::Int(ttl) => Ok(AcquireReply::Held(ttl)),
        other => Err(unexpected(script, &other)),
    }
}

/// The reply of an unlock script: nil when `hold`'s holder does not hold the lock
/// ([`Error::NotHeld`]), 0 (holds remain) or 1 (released) otherwise.
pub(crate) fn release_reply(script: &'static str, hold: &Release, value: Value) -> Result<()> {
    match value {
        Value::Nil => Err(Error::NotHeld {
            name: hold.name.to_string(),
            holder: hold.field.clone(),
        }),
        Value::Int(0 | 1) => Ok(()),
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

/// Runs a script on the client's connections, for a kind's own scripts. It does not check
/// for shutdown: releases and give-up cleanups scheduled before a shutdown still run during it
/// (the public entry points check).
pub(crate) async fn run_script(
    client: &Client,
    op: &'static str,
    key: &str,
    invocation: &redis::ScriptInvocation<'_>,
) -> Result<Value> {
    client.inner().connections.script(op, key, invocation).await
}

/// Runs an acquire script for `hold`, waiting up to `limit` for its reply: longer than the
/// command timeout, because an acquire sent to a stalled Redis still runs when Redis resumes and
/// its grant must then be known (and undone by the caller's detached attempt).
pub(crate) async fn acquire_script(
    hold: &Release,
    script: &'static str,
    invocation: &redis::ScriptInvocation<'_>,
    limit: Duration,
) -> Result<AcquireReply> {
    let reply = hold
        .client
        .inner()
        .connections
        .script_with_limit("acquire", &hold.name, invocation, limit)
        .await?;
    acquire_reply(script, reply)
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
}
