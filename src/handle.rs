//! The lock API every primitive shares: options, TTL replies, the generic [`Handle`] and the
//! [`lock_api!`] macro that gives each public lock type the same documented methods.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::kind::{LockKind, unexpected};
use crate::owner::Owner;

/// Options for one acquisition: an explicit lease and/or an explicit owner.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redisson_sync::{LockOptions, Owner};
///
/// let opts = LockOptions::new().lease(Duration::from_secs(10)).owner(Owner::new(7));
/// assert_eq!(opts.lease_time(), Some(Duration::from_secs(10)));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockOptions {
    lease: Option<Duration>,
    owner: Option<Owner>,
}

impl LockOptions {
    /// No lease (the watchdog renews the lock while its guard lives) and the current owner.
    pub fn new() -> Self {
        Self::default()
    }

    /// An explicit lease: the lock expires this long after it is granted, and is never renewed
    /// (Redisson's `lock(leaseTime, unit)`). Must be at least 1 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Acquire for this owner instead of [`Owner::current`] (Redisson's `threadId` overloads).
    pub fn owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The explicit lease, if any.
    pub fn lease_time(&self) -> Option<Duration> {
        self.lease
    }

    /// The explicit owner, if any.
    pub fn explicit_owner(&self) -> Option<Owner> {
        self.owner
    }
}

/// What `PTTL` says about a lock key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// The key does not exist (`PTTL` = -2): the lock is free.
    Absent,
    /// The key exists without expiry (`PTTL` = -1).
    Persistent,
    /// The key expires after this long.
    Remaining(Duration),
}

impl Ttl {
    fn from_pttl(ms: i64) -> Self {
        match ms {
            -1 => Self::Persistent,
            ms if ms < 0 => Self::Absent,
            ms => Self::Remaining(Duration::from_millis(ms.unsigned_abs())),
        }
    }

    /// The value as Redis and Redisson's `remainTimeToLive()` report it: -2, -1 or milliseconds.
    pub fn as_redis_millis(self) -> i64 {
        match self {
            Self::Absent => -2,
            Self::Persistent => -1,
            Self::Remaining(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        }
    }
}

/// A lock of some kind on one name: what every public lock type wraps.
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) client: Client,
    pub(crate) kind: Arc<dyn LockKind>,
    pub(crate) name: Arc<str>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.kind.label())
            .field("name", &self.name)
            .field("client_id", &self.client.id())
            .finish()
    }
}

impl Handle {
    pub(crate) fn new(client: Client, kind: Arc<dyn LockKind>, name: Arc<str>) -> Self {
        Self { client, kind, name }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The lease of a hold taken without an explicit one.
    pub(crate) fn watchdog_ms(&self) -> u64 {
        u64::try_from(self.client.config().watchdog_timeout.as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) async fn lock(&self, options: &LockOptions) -> Result<LockGuard> {
        match crate::acquire::acquire(self, None, options).await? {
            Some(guard) => Ok(guard),
            // Without a deadline the loop only returns a guard or an error.
            None => Err(Error::UnexpectedReply {
                script: "acquire",
                detail: "gave up without a deadline".into(),
            }),
        }
    }

    pub(crate) async fn try_lock(
        &self,
        wait: Duration,
        options: &LockOptions,
    ) -> Result<Option<LockGuard>> {
        crate::acquire::acquire(self, Some(wait), options).await
    }

    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        self.client.ensure_open()?;
        self.kind.force_unlock(&self.client, &self.name).await
    }

    pub(crate) async fn is_locked(&self) -> Result<bool> {
        self.client.ensure_open()?;
        self.kind.is_locked(&self.client, &self.name).await
    }

    pub(crate) async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        let field = self.kind.field(self.client.id(), owner.id());
        let v = self
            .query(
                "is_held_by",
                redis::cmd("HEXISTS").arg(&*self.name).arg(&field),
            )
            .await?;
        Ok(matches!(v, Value::Int(1)))
    }

    pub(crate) async fn hold_count(&self, owner: Owner) -> Result<u64> {
        let field = self.kind.field(self.client.id(), owner.id());
        let v = self
            .query(
                "hold_count",
                redis::cmd("HGET").arg(&*self.name).arg(&field),
            )
            .await?;
        match v {
            Value::Nil => Ok(0),
            other => redis::from_redis_value::<u64>(other.clone())
                .map_err(|_| unexpected("HGET", &other)),
        }
    }

    pub(crate) async fn remaining_ttl(&self) -> Result<Ttl> {
        match self
            .query("remaining_ttl", redis::cmd("PTTL").arg(&*self.name))
            .await?
        {
            Value::Int(ms) => Ok(Ttl::from_pttl(ms)),
            other => Err(unexpected("PTTL", &other)),
        }
    }

    /// A read-only command on the lock's key (retried once on a dropped connection).
    pub(crate) async fn query(&self, op: &'static str, cmd: &redis::Cmd) -> Result<Value> {
        self.client.ensure_open()?;
        self.client
            .inner()
            .connections
            .query(op, &self.name, cmd)
            .await
    }
}

/// Gives a public lock type (a struct with a `handle: Handle` field) the shared lock API, with
/// its documentation. `$make` is the expression that makes such a lock in the examples, from a
/// `client`.
macro_rules! lock_api {
    ($ty:ident, $make:literal) => {
        impl $ty {
            /// The lock's name: its Redis key.
            pub fn name(&self) -> &str {
                self.handle.name()
            }

            /// Acquires the lock, waiting as long as it takes; the lease is the watchdog
            /// timeout, renewed while the guard lives (Redisson's `lock()`).
            ///
            /// # Errors
            ///
            /// [`Error::WrongType`](crate::Error::WrongType) when a key holds another Redis
            /// type; [`Error::Redis`](crate::Error::Redis) or
            /// [`Error::Timeout`](crate::Error::Timeout) when Redis fails or does not answer
            /// within the command timeout; [`Error::Shutdown`](crate::Error::Shutdown) after
            /// [`Client::shutdown`](crate::Client::shutdown).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: dropping the future at any point leaves the lock as it was. An
            /// acquire script that is in flight when the future is dropped runs to completion
            /// in a task of the client; if it granted the lock, that task releases the hold
            /// again at once, and whatever the waiter left in Redis (a fair lock's queue entry)
            /// is cleaned up.
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            #[doc = concat!("let guard = ", $make, ".lock().await?;")]
            /// // ... critical section ...
            /// guard.unlock().await?;
            /// # Ok(())
            /// # }
            /// ```
            pub async fn lock(&self) -> $crate::Result<$crate::LockGuard> {
                self.handle.lock(&$crate::LockOptions::new()).await
            }

            /// Acquires the lock with the given lease and owner, waiting as long as it takes
            /// (Redisson's `lock(leaseTime, unit)`).
            ///
            /// # Errors
            ///
            /// As [`lock`](Self::lock), plus
            /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a lease under
            /// 1 ms.
            ///
            /// # Cancel safety
            ///
            /// As [`lock`](Self::lock).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use std::time::Duration;
            /// use redisson_sync::LockOptions;
            ///
            /// let opts = LockOptions::new().lease(Duration::from_secs(10));
            #[doc = concat!("let guard = ", $make, ".lock_with_options(&opts).await?;")]
            /// guard.unlock().await?;
            /// # Ok(())
            /// # }
            /// ```
            pub async fn lock_with_options(
                &self,
                options: &$crate::LockOptions,
            ) -> $crate::Result<$crate::LockGuard> {
                self.handle.lock(options).await
            }

            /// Makes one attempt: `Some(guard)` if the lock was free or already held by this
            /// owner, `None` if it is not available (Redisson's `tryLock()`). One round trip,
            /// bounded by the command timeout; it never queues.
            ///
            /// # Errors
            ///
            /// As [`lock`](Self::lock).
            ///
            /// # Cancel safety
            ///
            /// As [`lock`](Self::lock).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            #[doc = concat!("match ", $make, ".try_lock().await? {")]
            ///     Some(guard) => guard.unlock().await?,
            ///     None => println!("busy"),
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn try_lock(&self) -> $crate::Result<Option<$crate::LockGuard>> {
                self.handle
                    .try_lock(std::time::Duration::ZERO, &$crate::LockOptions::new())
                    .await
            }

            /// Tries to acquire the lock for at most `wait` (Redisson's
            /// `tryLock(waitTime, unit)`). `None` means the lock was not available for the
            /// whole wait.
            ///
            /// Returns within `wait` plus at most 100 ms even when Redis is stalled or down: an
            /// attempt still in flight at the deadline gets that long to answer.
            ///
            /// # Errors
            ///
            /// As [`lock`](Self::lock); [`Error::Timeout`](crate::Error::Timeout) when Redis
            /// never answered within the wait.
            ///
            /// # Cancel safety
            ///
            /// As [`lock`](Self::lock).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use std::time::Duration;
            ///
            #[doc = concat!("if let Some(guard) = ", $make, ".try_lock_for(Duration::from_secs(3)).await? {")]
            ///     guard.unlock().await?;
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn try_lock_for(
                &self,
                wait: std::time::Duration,
            ) -> $crate::Result<Option<$crate::LockGuard>> {
                self.handle
                    .try_lock(wait, &$crate::LockOptions::new())
                    .await
            }

            /// Tries to acquire the lock for at most `wait` with the given lease and owner
            /// (Redisson's `tryLock(waitTime, leaseTime, unit)`). A zero `wait` makes one
            /// attempt.
            ///
            /// # Errors
            ///
            /// As [`try_lock_for`](Self::try_lock_for), plus
            /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a lease under
            /// 1 ms.
            ///
            /// # Cancel safety
            ///
            /// As [`lock`](Self::lock).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use std::time::Duration;
            /// use redisson_sync::{LockOptions, Owner};
            ///
            /// let opts = LockOptions::new().lease(Duration::from_secs(5)).owner(Owner::new(1));
            #[doc = concat!("let lock = ", $make, ";")]
            /// if let Some(guard) = lock.try_lock_with_options(Duration::from_secs(1), &opts).await? {
            ///     guard.unlock().await?;
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn try_lock_with_options(
                &self,
                wait: std::time::Duration,
                options: &$crate::LockOptions,
            ) -> $crate::Result<Option<$crate::LockGuard>> {
                self.handle.try_lock(wait, options).await
            }

            /// Deletes the lock whoever holds it and wakes waiters (Redisson's
            /// `forceUnlock()`). Returns `true` if the lock existed. Holders find out at their
            /// next renewal or release.
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// Not cancel safe in the sense that a dropped call may or may not have deleted the
            /// lock.
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            #[doc = concat!("if ", $make, ".force_unlock().await? {")]
            ///     println!("it was locked");
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn force_unlock(&self) -> $crate::Result<bool> {
                self.handle.force_unlock().await
            }

            /// `true` when anyone holds the lock (Redisson's `isLocked()`).
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe (read only).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            #[doc = concat!("let locked = ", $make, ".is_locked().await?;")]
            /// println!("locked: {locked}");
            /// # Ok(())
            /// # }
            /// ```
            pub async fn is_locked(&self) -> $crate::Result<bool> {
                self.handle.is_locked().await
            }

            /// `true` when `owner` of this client holds the lock (`HEXISTS`, Redisson's
            /// `isHeldByThread`). Use `Owner::current()` for "held by me".
            ///
            /// # Errors
            ///
            /// [`Error::WrongType`](crate::Error::WrongType),
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe (read only).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use redisson_sync::Owner;
            #[doc = concat!("let mine = ", $make, ".is_held_by(Owner::current()).await?;")]
            /// println!("held by this task: {mine}");
            /// # Ok(())
            /// # }
            /// ```
            pub async fn is_held_by(&self, owner: $crate::Owner) -> $crate::Result<bool> {
                self.handle.is_held_by(owner).await
            }

            /// How many times `owner` of this client holds the lock; 0 when it does not
            /// (`HGET`, Redisson's `getHoldCount()`).
            ///
            /// # Errors
            ///
            /// [`Error::WrongType`](crate::Error::WrongType),
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe (read only).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use redisson_sync::Owner;
            #[doc = concat!("let holds = ", $make, ".hold_count(Owner::current()).await?;")]
            /// println!("{holds} holds");
            /// # Ok(())
            /// # }
            /// ```
            pub async fn hold_count(&self, owner: $crate::Owner) -> $crate::Result<u64> {
                self.handle.hold_count(owner).await
            }

            /// The lock's remaining lease (`PTTL` of its key, Redisson's `remainTimeToLive()`).
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe (read only).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use redisson_sync::Ttl;
            #[doc = concat!("if let Ttl::Remaining(left) = ", $make, ".remaining_ttl().await? {")]
            ///     println!("{left:?} left");
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn remaining_ttl(&self) -> $crate::Result<$crate::Ttl> {
                self.handle.remaining_ttl().await
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.handle.fmt(f)
            }
        }
    };
}
pub(crate) use lock_api;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_maps_pttl_replies() {
        assert_eq!(Ttl::from_pttl(-2), Ttl::Absent);
        assert_eq!(Ttl::from_pttl(-1), Ttl::Persistent);
        assert_eq!(Ttl::from_pttl(0), Ttl::Remaining(Duration::ZERO));
        assert_eq!(
            Ttl::from_pttl(1500),
            Ttl::Remaining(Duration::from_millis(1500))
        );
        for ms in [-2, -1, 0, 1500] {
            assert_eq!(Ttl::from_pttl(ms).as_redis_millis(), ms);
        }
    }
}
