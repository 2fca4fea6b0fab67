//! The lock primitives: one [`LockKind`] per primitive, in its own file with its own scripts
//! and key names ([`reentrant`], [`fair`], [`rwlock`]), and what they share: the hold
//! bookkeeping ([`hold`]), the guard ([`guard`]), the per-name core every public lock type
//! wraps ([`LockCore`]), the [`lock_api!`] macro that gives each of them the same documented
//! methods, and [`AnyLock`].

mod any;
mod fair;
mod fenced;
mod guard;
mod hold;
mod kind;
mod nonreentrant;
mod reentrant;
mod rwlock;
mod spin;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Value;

use crate::conn::Call;
use crate::error::{Error, Result};
use crate::options::{LockOptions, Ttl};
use crate::owner::Owner;
use crate::shared::Shared;

pub use any::AnyLock;
pub use fair::FairLock;
pub use fenced::FencedLock;
pub use guard::LockGuard;
pub use nonreentrant::{NonReentrantFairLock, NonReentrantLock};
pub use reentrant::Lock;
pub use rwlock::{ReadLock, RwLock, WriteLock};
pub use spin::{SpinBackoff, SpinLock};

use hold::{HoldSpec, LockAcquire};
use kind::{LockKind, lease_millis};
pub(crate) use kind::{status, unexpected};

/// A lock of some kind on one name: what every public lock type wraps.
#[derive(Clone)]
pub(crate) struct LockCore {
    shared: Arc<Shared>,
    kind: Arc<dyn LockKind>,
    name: Arc<str>,
    /// The holder field last used through this handle (a handle is usually used by one owner
    /// again and again): saves formatting it on every acquire.
    last_field: Arc<Mutex<Option<OwnerField>>>,
}

/// An owner id and its holder field.
type OwnerField = (u64, Arc<str>);

impl fmt::Debug for LockCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.kind.label())
            .field("name", &self.name)
            .field("client_id", &self.shared.id)
            .finish()
    }
}

impl LockCore {
    pub(crate) fn new(shared: Arc<Shared>, kind: Arc<dyn LockKind>, name: Arc<str>) -> Self {
        Self {
            shared,
            kind,
            name,
            last_field: Arc::default(),
        }
    }

    /// The holder field of `owner`, as an `Arc` shared by its holds.
    fn field_of(&self, owner: Owner) -> Arc<str> {
        let mut last = self
            .last_field
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*last {
            Some((id, field)) if *id == owner.id() => field.clone(),
            _ => {
                let field: Arc<str> = self.field(owner).into();
                *last = Some((owner.id(), field.clone()));
                field
            }
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    fn field(&self, owner: Owner) -> String {
        self.kind.field(&self.shared.id, owner.id())
    }

    /// Acquires for the owner and lease of `options`. `wait`: `None` waits for ever,
    /// `Some(ZERO)` makes one attempt.
    async fn acquire(
        &self,
        wait: Option<Duration>,
        options: &LockOptions,
    ) -> Result<Option<LockGuard>> {
        self.shared.ensure_open()?;
        let explicit_lease = options.lease_time();
        let lease_ms = match explicit_lease {
            Some(lease) => lease_millis(lease)?,
            None => self.shared.config.watchdog_ms(),
        };
        let owner = options.explicit_owner().unwrap_or_else(Owner::current);
        let spec = Arc::new(HoldSpec {
            shared: self.shared.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            field: self.field_of(owner),
            lease_ms,
        });
        let acquire = Arc::new(LockAcquire {
            spec,
            owner,
            explicit_lease,
        });
        let held = crate::wait::acquire(&self.shared, acquire, wait).await?;
        Ok(held.map(LockGuard::new))
    }

    pub(crate) async fn lock(&self, options: &LockOptions) -> Result<LockGuard> {
        match self.acquire(None, options).await? {
            Some(guard) => Ok(guard),
            // Without a deadline the engine only returns a guard or an error.
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
        self.acquire(Some(wait), options).await
    }

    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        self.shared.ensure_open()?;
        self.kind.force_unlock(&self.shared, &self.name).await
    }

    pub(crate) async fn is_locked(&self) -> Result<bool> {
        self.shared.ensure_open()?;
        self.kind.is_locked(&self.shared, &self.name).await
    }

    pub(crate) async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        let mut cmd = redis::cmd("HEXISTS");
        cmd.arg(&*self.name).arg(self.field(owner));
        let v = self.query("is_held_by", &cmd).await?;
        Ok(matches!(v, Value::Int(1)))
    }

    pub(crate) async fn hold_count(&self, owner: Owner) -> Result<u64> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(&*self.name).arg(self.field(owner));
        match self.query("hold_count", &cmd).await? {
            Value::Nil => Ok(0),
            other => redis::from_redis_value::<u64>(other.clone())
                .map_err(|_| unexpected("HGET", &other)),
        }
    }

    pub(crate) async fn remaining_ttl(&self) -> Result<Ttl> {
        let mut cmd = redis::cmd("PTTL");
        cmd.arg(&*self.name);
        match self.query("remaining_ttl", &cmd).await? {
            Value::Int(ms) => Ok(Ttl::from_pttl(ms)),
            other => Err(unexpected("PTTL", &other)),
        }
    }

    /// A read-only command on the lock's key.
    async fn query(&self, op: &'static str, cmd: &redis::Cmd) -> Result<Value> {
        self.shared.ensure_open()?;
        self.shared.conn.call(Call::read(op, &self.name, cmd)).await
    }
}

/// Gives a public lock type (a struct with a `core: LockCore` field) the shared lock API, with
/// its documentation. `make` is the expression that makes such a lock in the examples, from a
/// `client`; `errors` and `cancel` add the type's own sentences to the `# Errors` and
/// `# Cancel safety` sections of its acquire methods; `force_unlock` and `is_locked` are the
/// first lines of those methods' docs.
macro_rules! lock_api {
    (
        $ty:ident,
        make: $make:literal,
        errors: $errors:literal,
        cancel: $cancel:literal,
        force_unlock: $force:literal,
        is_locked: $locked:literal $(,)?
    ) => {
        impl $ty {
            /// The lock's name: its Redis key.
            pub fn name(&self) -> &str {
                self.core.name()
            }

            /// Acquires the lock, waiting as long as it takes; the lease is the watchdog
            /// timeout, renewed while the guard lives (Redisson's `lock()`).
            ///
            /// # Errors
            ///
            /// [`Error::WrongType`](crate::Error::WrongType) when a key holds another Redis
            /// type; [`Error::Redis`](crate::Error::Redis) or
            /// [`Error::Timeout`](crate::Error::Timeout) when Redis fails or does not answer
            /// within the command timeout (while it waits, transient errors such as `BUSY`,
            /// `LOADING` or a dropped connection are retried instead);
            /// [`Error::Shutdown`](crate::Error::Shutdown) after
            /// [`Client::shutdown`](crate::Client::shutdown).
            #[doc = $errors]
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: dropping the future at any point leaves the lock as it was. An
            /// acquire script that is in flight when the future is dropped runs to completion
            /// in a task of the client; if it granted the lock, that task releases the hold
            /// again at once. An acquire whose reply never came (a broken connection) is
            /// resolved before the next attempt: its connection is cut off at the server, so it
            /// cannot run later, and the hold count read then says whether it ran.
            #[doc = $cancel]
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
                self.core.lock(&$crate::LockOptions::new()).await
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
                self.core.lock(options).await
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
                self.core
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
                self.core
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
                self.core.try_lock(wait, options).await
            }

            #[doc = $force]
            /// Returns `true` if it deleted the lock. Holders find out at their next renewal or
            /// release.
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown);
            /// [`Error::WrongType`](crate::Error::WrongType) when the halves of a read-write
            /// lock find a key of another type (they read its `mode`; the other kinds delete a
            /// key of any type, as Redisson does).
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
                self.core.force_unlock().await
            }

            #[doc = $locked]
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown);
            /// [`Error::WrongType`](crate::Error::WrongType) when the halves of a read-write
            /// lock find a key of another type (the other kinds' `EXISTS` counts any key).
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
                self.core.is_locked().await
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
                self.core.is_held_by(owner).await
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
                self.core.hold_count(owner).await
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
                self.core.remaining_ttl().await
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.core.fmt(f)
            }
        }
    };
}
pub(crate) use lock_api;
