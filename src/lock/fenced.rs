//! The fenced lock, compatible with Redisson's `RFencedLock` (docs/LAYOUT.md §6.2): the
//! reentrant lock's hash, channel, unlock and renewal, plus a token counter every grant
//! increments (`lua/fenced/acquire.lua`).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Cmd, Value};

use super::guard::LockGuard;
use super::reentrant::reentrant_kind;
use super::single::{LockCore, Locks};
use super::surface::{Core, hold_queries, lock_surface};
use crate::conn::{Call, Script, Synced};
use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::hold::{
    AcquireReply, AcquireRequest, Evidence, HoldKind, HoldSpec, ReleaseReply, ReleaseRequest,
    count_reply, send_acquire,
};
use crate::layout;
use crate::object::{delete_keys, object_methods};
use crate::options::LockOptions;
use crate::owner::Owner;
use crate::reply::unexpected;
use crate::shared::Shared;
use crate::wait::Strategy;
use crate::watchdog::Renewal;

/// `lua/fenced/acquire.lua`: RedissonFencedLock's token-returning acquire.
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/fenced/acquire.lua")));

/// `lua/fenced/read_holds.lua`: a holder's count and the counter, read together.
static READ_HOLDS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/fenced/read_holds.lua")));

/// A reentrant lock whose every acquisition gets a fencing token: Redisson's `RFencedLock`.
///
/// A lease-based lock cannot stop a holder that was paused past its lease (a GC pause,
/// SIGSTOP, a slow network) from acting after another holder took over. The fenced lock's
/// answer: each acquisition, re-entries included, increments the counter
/// `redisson_lock_token:{name}` (a Redis string without TTL) and the guard carries the new
/// value ([`LockGuard::token`]). Pass the token with every write to the protected resource,
/// and have the resource refuse a token lower than the highest it has seen: a paused holder's
/// late write then fails (see `examples/fencing.rs`).
///
/// Everything else is [`Lock`](crate::Lock)'s: the hash `name`, its fields and hold counts,
/// the channel and `0` message, the watchdog. Java services using Redisson's
/// `getFencedLock(name)` share the lock and the counter: the tokens increase whichever side
/// acquires.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.fenced_lock("ledger");
/// let (guard, token) = lock.lock_and_get_token().await?;
/// // write_to_storage(token, ...): the storage refuses tokens older than the newest it saw
/// # let _ = token;
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct FencedLock {
    pub(super) core: LockCore,
    /// `redisson_lock_token:{N}`.
    token_key: Arc<str>,
}

lock_surface!(
    FencedLock,
    setup: "# ",
    make: "client.fenced_lock(\"ledger\")",
    errors: "",
    cancel: "",
    force_unlock: "Deletes the lock whoever holds it and wakes a waiter of each client \
        (Redisson's `forceUnlock()`); the token counter stays.",
    is_locked: "`true` when anyone holds the lock (`EXISTS`).",
);
hold_queries!(FencedLock, make: "client.fenced_lock(\"ledger\")");
object_methods!(
    FencedLock,
    field: core,
    make: "client.fenced_lock(\"ledger\")",
    keys: "It acts on the lock's hash `name` and its token counter `redisson_lock_token:{name}`, \
        as Redisson's does: once the counter expires, the next acquisition draws token 1 \
        again.",
    delete: "Deletes the lock and its token counter (`DEL`), as Redisson's `delete()` does: nobody \
        is woken, and the next acquisition draws token 1.",
    watchdog: "On a lock held under the watchdog, an expiry set here lasts until the next \
        renewal (at most a third of the watchdog timeout), which sets the lease again, as \
        Redisson's watchdog does; a hold with an explicit lease keeps it (a cleared expiry \
        makes the key persistent until the lock is released). Keys beyond the name are not \
        renewed and keep it.",
);

impl FencedLock {
    pub(crate) fn new(locks: &Locks, name: String) -> Self {
        let token_key: Arc<str> = layout::fenced_token(&name).into();
        let kind = Fenced {
            inner: reentrant_kind(&name),
            token_key: token_key.clone(),
        };
        Self {
            core: LockCore::new(locks, Arc::new(kind), name.into()),
            token_key,
        }
    }

    /// [`lock`](Self::lock), returning the guard and its token (Redisson's
    /// `lockAndGetToken()`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub async fn lock_and_get_token(&self) -> Result<(LockGuard, u64)> {
        let guard = self.lock().await?;
        let token = tokened(&guard)?;
        Ok((guard, token))
    }

    /// [`try_lock`](Self::try_lock), returning the guard and its token when acquired
    /// (Redisson's `tryLockAndGetToken()`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock_and_get_token(&self) -> Result<Option<(LockGuard, u64)>> {
        self.try_lock_and_get_token_for(Duration::ZERO).await
    }

    /// [`try_lock_for`](Self::try_lock_for), returning the guard and its token when acquired
    /// (Redisson's `tryLockAndGetToken(waitTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for).
    pub async fn try_lock_and_get_token_for(
        &self,
        wait: Duration,
    ) -> Result<Option<(LockGuard, u64)>> {
        match self.core.try_lock(wait, &LockOptions::new()).await? {
            Some(guard) => {
                let token = tokened(&guard)?;
                Ok(Some((guard, token)))
            }
            None => Ok(None),
        }
    }

    /// The counter's current value: the token of the latest acquisition, by anyone (0 when no
    /// acquisition ever happened; Redisson's `getToken()`).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType), [`Error::Redis`](crate::Error::Redis),
    /// [`Error::Timeout`](crate::Error::Timeout), [`Error::Shutdown`](crate::Error::Shutdown).
    pub async fn token(&self) -> Result<u64> {
        let shared = self.core.shared();
        shared.ensure_open()?;
        let cmd = Cmd::get(&*self.token_key);
        let reply = shared
            .conn
            .call(Call::read("token", &self.token_key, &cmd))
            .await?;
        token_value(reply)
    }
}

/// The token a fenced guard carries.
fn tokened(guard: &LockGuard) -> Result<u64> {
    guard.token().ok_or_else(|| Error::UnexpectedReply {
        script: "fenced/acquire.lua",
        detail: "a grant without a token".into(),
    })
}

/// A counter (or count) as Redis returns it: nil is 0.
fn token_value(reply: Value) -> Result<u64> {
    match reply {
        Value::Nil => Ok(0),
        ref other => {
            redis::from_redis_value::<u64>(other.clone()).map_err(|_| unexpected("GET", other))
        }
    }
}

/// The fenced lock: the reentrant lock's kind, with the token-drawing acquire.
#[derive(Debug)]
struct Fenced {
    inner: Arc<dyn HoldKind>,
    token_key: Arc<str>,
}

impl HoldKind for Fenced {
    fn label(&self) -> &'static str {
        "FencedLock"
    }

    fn metric_kind(&self) -> &'static str {
        "fenced"
    }

    fn field(&self, client_id: &str, owner: Owner) -> Arc<str> {
        self.inner.field(client_id, owner)
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
                .key(&*self.token_key)
                .arg(hold.lease_ms)
                .arg(&*hold.id.field)
                .arg(req.expected);
            let call = Call::write("acquire", &hold.id.name, &invocation)
                .limit(req.limit)
                .tracked(&req.sent);
            send_acquire(req, call, fenced_reply).await
        })
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

    fn renewal(&self) -> Arc<dyn Renewal> {
        self.inner.renewal()
    }

    fn extra_keys(&self, _name: &str) -> Vec<Arc<str>> {
        vec![self.token_key.clone()]
    }

    /// `RedissonFencedLock.deleteAsync`: the lock and its counter, nothing published.
    fn delete<'a>(
        &'a self,
        shared: &'a Shared,
        keys: &'a [Arc<str>],
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(delete_keys(shared, keys))
    }

    fn read_holds<'a>(&'a self, hold: &'a HoldSpec) -> BoxFuture<'a, Result<Evidence>> {
        Box::pin(async move {
            let mut invocation = READ_HOLDS.prepare_invoke();
            invocation
                .key(&*hold.id.name)
                .key(&*self.token_key)
                .arg(&*hold.id.field);
            let call = Call::read_script("resolve", &hold.id.name, &invocation);
            match hold.shared.conn.call(call).await? {
                Value::Array(items) if items.len() == 2 => {
                    let mut items = items.into_iter();
                    let count = token_value(items.next().unwrap_or(Value::Nil))?;
                    let token = token_value(items.next().unwrap_or(Value::Nil))?;
                    Ok(Evidence {
                        count: u32::try_from(count)
                            .map_err(|_| unexpected("fenced/read_holds.lua", &Value::Int(0)))?,
                        token: (token > 0).then_some(token),
                    })
                }
                other => Err(unexpected("fenced/read_holds.lua", &other)),
            }
        })
    }

    fn force_unlock<'a>(
        &'a self,
        shared: &'a Shared,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        self.inner.force_unlock(shared, name)
    }
}

/// `{-1, token}`: acquired; `{pttl, -1}`: held by another; `held:<n>`: count mismatch.
fn fenced_reply(value: Value) -> Result<AcquireReply> {
    const SCRIPT: &str = "fenced/acquire.lua";
    match &value {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(-1), Value::Int(token)] if *token > 0 => Ok(AcquireReply::Granted {
                token: Some(token.unsigned_abs()),
            }),
            [Value::Int(ttl), Value::Int(-1)] => Ok(AcquireReply::Held(*ttl)),
            _ => Err(unexpected(SCRIPT, &value)),
        },
        other => count_reply(SCRIPT, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_decode_by_contract() {
        let arr = |a: i64, b: i64| Value::Array(vec![Value::Int(a), Value::Int(b)]);
        assert_eq!(
            fenced_reply(arr(-1, 7)).unwrap(),
            AcquireReply::Granted { token: Some(7) }
        );
        assert_eq!(
            fenced_reply(arr(1500, -1)).unwrap(),
            AcquireReply::Held(1500)
        );
        assert_eq!(fenced_reply(arr(-1, -1)).unwrap(), AcquireReply::Held(-1));
        assert_eq!(
            fenced_reply(Value::BulkString(b"held:2".to_vec())).unwrap(),
            AcquireReply::Count(2)
        );
        assert!(fenced_reply(Value::Nil).is_err());
        assert!(fenced_reply(arr(-1, 0)).is_err());
    }
}
