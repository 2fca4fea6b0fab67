//! The fenced lock, compatible with Redisson's `RFencedLock` (docs/LAYOUT.md §6.2): the
//! reentrant lock's hash, channel, unlock and renewal, plus a token counter every grant
//! increments (`lua/fenced/acquire.lua`).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Cmd, Script, Value};

use super::hold::HoldSpec;
use super::kind::{
    AcquireReply, AcquireRequest, LockKind, ReleaseReply, ReleaseRequest, status, synced_acquire,
};
use super::reentrant::reentrant_kind;
use super::{LockCore, LockGuard, lock_api, unexpected};
use crate::conn::Call;
use crate::error::Result;
use crate::layout;
use crate::options::LockOptions;
use crate::shared::Shared;
use crate::wait::{BoxFuture, Strategy};
use crate::watchdog::Renewal;

/// `lua/fenced/acquire.lua`: RedissonFencedLock's token-returning acquire.
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/fenced/acquire.lua")));

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

lock_api!(
    FencedLock,
    make: "client.fenced_lock(\"ledger\")",
    errors: "",
    cancel: "",
    force_unlock: "Deletes the lock whoever holds it and wakes a waiter of each client \
        (Redisson's `forceUnlock()`); the token counter stays.",
    is_locked: "`true` when anyone holds the lock (`EXISTS`).",
);

impl FencedLock {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        let token_key: Arc<str> = layout::fenced_token(&name).into();
        let kind = Fenced {
            inner: reentrant_kind(&name),
            token_key: token_key.clone(),
        };
        Self {
            core: LockCore::new(shared, Arc::new(kind), name.into()),
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
    pub async fn get_token(&self) -> Result<u64> {
        let shared = self.core.shared();
        shared.ensure_open()?;
        let cmd = Cmd::get(&*self.token_key);
        let reply = shared
            .conn
            .call(Call::read("get_token", &self.token_key, &cmd))
            .await?;
        token_value(reply)
    }
}

/// The token a fenced guard carries.
fn tokened(guard: &LockGuard) -> Result<u64> {
    guard.token().ok_or_else(|| crate::Error::UnexpectedReply {
        script: "fenced/acquire.lua",
        detail: "a grant without a token".into(),
    })
}

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
    inner: Arc<dyn LockKind>,
    token_key: Arc<str>,
}

impl LockKind for Fenced {
    fn label(&self) -> &'static str {
        "FencedLock"
    }

    fn metric_kind(&self) -> &'static str {
        "fenced"
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'a>) -> BoxFuture<'a, Result<AcquireReply>> {
        Box::pin(async move {
            let hold = req.hold;
            let mut invocation = ACQUIRE.prepare_invoke();
            invocation
                .key(&*hold.name)
                .key(&*self.token_key)
                .arg(hold.lease_ms)
                .arg(&*hold.field)
                .arg(req.expected);
            let call = Call::write("acquire", &hold.name, &invocation)
                .limit(req.limit)
                .tracked(&req.sent);
            synced_acquire(self, req, call, fenced_reply).await
        })
    }

    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>> {
        self.inner.release(req)
    }

    fn strategy(&self, hold: &HoldSpec) -> Strategy {
        self.inner.strategy(hold)
    }

    fn renewal(&self) -> Arc<dyn Renewal> {
        self.inner.renewal()
    }

    fn granted_token<'a>(&'a self, hold: &'a HoldSpec) -> BoxFuture<'a, Result<Option<u64>>> {
        Box::pin(async move {
            let cmd = Cmd::get(&*self.token_key);
            let reply = hold
                .shared
                .conn
                .call(Call::read("resolve", &hold.name, &cmd))
                .await?;
            token_value(reply).map(Some)
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
            [Value::Int(-1), Value::Int(token)] if *token > 0 => {
                Ok(AcquireReply::Fenced(token.unsigned_abs()))
            }
            [Value::Int(ttl), Value::Int(-1)] => Ok(AcquireReply::Held(*ttl)),
            _ => Err(unexpected(SCRIPT, &value)),
        },
        other => match status(other) {
            Some(s) if s.starts_with(b"held:") => std::str::from_utf8(&s[5..])
                .ok()
                .and_then(|n| n.parse::<u32>().ok())
                .map(AcquireReply::Count)
                .ok_or_else(|| unexpected(SCRIPT, &value)),
            _ => Err(unexpected(SCRIPT, &value)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_decode_by_contract() {
        let arr = |a: i64, b: i64| Value::Array(vec![Value::Int(a), Value::Int(b)]);
        assert_eq!(fenced_reply(arr(-1, 7)).unwrap(), AcquireReply::Fenced(7));
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
