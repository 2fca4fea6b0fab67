//! The lock primitives: one [`LockKind`] per primitive, in its own file with its own scripts
//! and key names ([`reentrant`], [`fair`], [`rwlock`]), and what they share: the hold
//! bookkeeping ([`hold`]), the guard ([`guard`]), the per-name core every public lock type
//! wraps ([`LockCore`]), the [`lock_api!`] macro that gives each of them the same documented
//! methods, [`AnyLock`] and the [`DistributedLock`] trait.

mod any;
mod distributed;
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
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Value;

use crate::conn::Call;
use crate::error::{Error, Result};
use crate::options::{LockOptions, Ttl};
use crate::owner::Owner;
use crate::shared::Shared;
use crate::with_lock::{WithLockOptions, run_section};

pub use any::AnyLock;
pub use distributed::DistributedLock;
pub use fair::FairLock;
pub use fenced::FencedLock;
pub use guard::LockGuard;
pub use nonreentrant::{NonReentrantFairLock, NonReentrantLock};
pub use reentrant::Lock;
pub use rwlock::{ReadLock, RwLock, WriteLock};
pub use spin::{SpinBackoff, SpinLock};

use hold::{HoldSpec, LockAcquire};
use kind::LockKind;
pub(crate) use kind::{lease_millis, millis, status, unexpected};

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

    /// Runs the section `f` under a hold taken with `options`, waiting for it as long as it
    /// takes (the body of every single lock's `with_lock_options`).
    pub(crate) async fn with_lock<F, Fut, T, E>(
        &self,
        options: &WithLockOptions,
        f: F,
    ) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        let guard = self.lock(options.options()).await?;
        run_section(guard, options.stops_on_lost(), f).await
    }

    /// [`with_lock`](Self::with_lock), waiting at most `wait`: `None` when the lock did not
    /// come free in time, the section not run.
    pub(crate) async fn try_with_lock<F, Fut, T, E>(
        &self,
        wait: Duration,
        options: &WithLockOptions,
        f: F,
    ) -> Result<Option<T>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        match self.try_lock(wait, options.options()).await? {
            Some(guard) => run_section(guard, options.stops_on_lost(), f)
                .await
                .map(Some),
            None => Ok(None),
        }
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
            /// The lock's name: its Redis key (mapped by the client's [`NameMapper`](crate::NameMapper), if any).
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

            /// Acquires the lock with an explicit lease, waiting as long as it takes (Redisson's
            /// `lock(leaseTime, unit)`): the lock expires `lease` after it is granted and is
            /// never renewed. Shorthand for [`lock_with_options`](Self::lock_with_options) with
            /// [`LockOptions::lease`](crate::LockOptions::lease).
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
            ///
            /// // Java: lock.lock(10, TimeUnit.SECONDS)
            #[doc = concat!("let guard = ", $make, ".lock_with_lease(Duration::from_secs(10)).await?;")]
            /// guard.unlock().await?;
            /// # Ok(())
            /// # }
            /// ```
            pub async fn lock_with_lease(
                &self,
                lease: std::time::Duration,
            ) -> $crate::Result<$crate::LockGuard> {
                self.core
                    .lock(&$crate::LockOptions::new().lease(lease))
                    .await
            }

            /// Tries to acquire the lock for at most `wait`, with an explicit lease (Redisson's
            /// `tryLock(waitTime, leaseTime, unit)`). Shorthand for
            /// [`try_lock_with_options`](Self::try_lock_with_options) with
            /// [`LockOptions::lease`](crate::LockOptions::lease).
            ///
            /// # Errors
            ///
            /// As [`try_lock_with_options`](Self::try_lock_with_options).
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
            /// // Java: lock.tryLock(2, 10, TimeUnit.SECONDS)
            #[doc = concat!("let lock = ", $make, ";")]
            /// if let Some(guard) = lock.try_lock_with_lease(Duration::from_secs(2), Duration::from_secs(10)).await? {
            ///     guard.unlock().await?;
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn try_lock_with_lease(
                &self,
                wait: std::time::Duration,
                lease: std::time::Duration,
            ) -> $crate::Result<Option<$crate::LockGuard>> {
                self.core
                    .try_lock(wait, &$crate::LockOptions::new().lease(lease))
                    .await
            }

            /// Runs the critical section `f` under the lock and always releases it: Java's
            /// `lock(); try { ... } finally { unlock(); }` in one call. Waits for the lock as
            /// long as it takes ([`lock`](Self::lock)); the watchdog renews it while the section
            /// runs. The section runs in the calling task, so the owner is the caller's
            /// ([`Owner::current`](crate::Owner::current)); it does not see the guard (use
            /// [`lock`](Self::lock) when it needs it, e.g. for a fencing token).
            ///
            /// The section returns `Result<T, E>`, with an error type `E` of the caller's
            /// choosing that this crate's [`Error`](crate::Error) converts into
            /// (`E: From<Error>`): `Error` itself, `Box<dyn std::error::Error + Send + Sync>`,
            /// `anyhow::Error`, an application error with a `From<Error>` impl. One `?` then
            /// handles the lock's errors and the section's alike, and an infallible section
            /// returns `Ok::<_, Error>(value)`.
            ///
            /// # Release
            ///
            /// - **The section returns `Ok(v)`**: the release is awaited (as
            ///   [`LockGuard::unlock`](crate::LockGuard::unlock)), then `Ok(v)` is returned,
            ///   unless the release failed: its error is returned instead. The section's work
            ///   is done then, but [`Error::LeaseLost`](crate::Error::LeaseLost) or
            ///   [`Error::NotHeld`](crate::Error::NotHeld) say the lock may not have been
            ///   exclusive all along (lost during the section), and a timeout that it may not
            ///   be free yet: the caller must know.
            /// - **The section returns `Err(e)`**: the release is awaited, then `Err(e)` is
            ///   returned; the section's error wins, a release error is only logged (a
            ///   `tracing` warning).
            /// - **The section panics**: the panic propagates; the guard is dropped while
            ///   unwinding, which schedules the release in a background task (as any dropped
            ///   [`LockGuard`](crate::LockGuard)): the lock is free shortly after, not poisoned.
            /// - **The `with_lock` future is dropped** (cancelled by a timeout, a `select!`, an
            ///   aborted task): the section's future is dropped with it at its current
            ///   `.await`, and the release is scheduled in the background likewise.
            ///
            /// Background releases need the client to live on: call
            /// [`Client::shutdown`](crate::Client::shutdown) before the process exits.
            ///
            /// A section runs to its end even if the lock is lost meanwhile; to stop it as soon
            /// as the guard's [lost signal](crate::LockGuard::lost) fires, use
            /// [`with_lock_options`](Self::with_lock_options) with
            /// [`WithLockOptions::stop_on_lost`](crate::WithLockOptions::stop_on_lost).
            ///
            /// # Errors
            ///
            /// The section's own error; the acquisition's, as [`lock`](Self::lock); the
            /// release's, as [`LockGuard::unlock`](crate::LockGuard::unlock), when the section
            /// succeeded.
            ///
            /// # Cancel safety
            ///
            /// Dropping the future leaves the lock as it was before the call: a dropped
            /// acquisition is undone (as [`lock`](Self::lock)'s), a dropped section's hold is
            /// released in the background. What the section did before it was dropped stays
            /// done.
            ///
            /// # Examples
            ///
            /// An infallible section (the error type is this crate's):
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use redisson_sync::Error;
            ///
            #[doc = concat!("let lock = ", $make, ";")]
            /// let answer = lock.with_lock(|| async { Ok::<_, Error>(6 * 7) }).await?;
            /// assert_eq!(answer, 42);
            /// # Ok(())
            /// # }
            /// ```
            ///
            /// A fallible section with its own error type: the lock's errors convert into it.
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
            ///
            /// async fn charge(order: u64) -> Result<String, BoxError> {
            ///     if order == 0 {
            ///         return Err("no such order".into());
            ///     }
            ///     Ok(format!("receipt-{order}"))
            /// }
            ///
            #[doc = concat!("let lock = ", $make, ";")]
            /// let receipt = lock.with_lock(|| charge(42)).await?;
            /// assert_eq!(receipt, "receipt-42");
            /// // The section's error comes back as is; the lock is released all the same.
            /// assert!(lock.with_lock(|| charge(0)).await.is_err());
            /// # Ok(())
            /// # }
            /// ```
            pub async fn with_lock<F, Fut, T, E>(&self, f: F) -> std::result::Result<T, E>
            where
                F: FnOnce() -> Fut,
                Fut: std::future::Future<Output = std::result::Result<T, E>>,
                E: From<$crate::Error>,
            {
                self.core
                    .with_lock(&$crate::WithLockOptions::new(), f)
                    .await
            }

            /// [`with_lock`](Self::with_lock) with the lease and owner of `options`, and, with
            /// [`WithLockOptions::stop_on_lost`](crate::WithLockOptions::stop_on_lost), the
            /// section stopped as soon as the lock is lost: its future is dropped at its
            /// current `.await` and [`Error::LeaseLost`](crate::Error::LeaseLost) returned
            /// (the watchdog finds a force-unlocked or expired lock at its next renewal, every
            /// third of the watchdog timeout; an explicit lease is lost shortly before it ends).
            /// Waits for the lock as long as it takes; see [`try_with_lock`](Self::try_with_lock)
            /// for a bounded wait.
            ///
            /// # Errors
            ///
            /// As [`with_lock`](Self::with_lock), plus
            /// [`Error::LeaseLost`](crate::Error::LeaseLost) when the section was stopped and
            /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a lease under
            /// 1 ms.
            ///
            /// # Cancel safety
            ///
            /// As [`with_lock`](Self::with_lock).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use std::time::Duration;
            /// use redisson_sync::{Error, WithLockOptions};
            ///
            /// let opts = WithLockOptions::new().stop_on_lost(true);
            #[doc = concat!("let lock = ", $make, ";")]
            /// match lock.with_lock_options(&opts, || async {
            ///     tokio::time::sleep(Duration::from_secs(1)).await; // ... long work ...
            ///     Ok::<_, Error>(())
            /// }).await {
            ///     Ok(()) => println!("done"),
            ///     Err(Error::LeaseLost { name }) => println!("{name} lost: work stopped"),
            ///     Err(e) => return Err(e),
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn with_lock_options<F, Fut, T, E>(
                &self,
                options: &$crate::WithLockOptions,
                f: F,
            ) -> std::result::Result<T, E>
            where
                F: FnOnce() -> Fut,
                Fut: std::future::Future<Output = std::result::Result<T, E>>,
                E: From<$crate::Error>,
            {
                self.core.with_lock(options, f).await
            }

            /// [`with_lock_options`](Self::with_lock_options), waiting at most `wait` for the
            /// lock (Redisson's `tryLock(waitTime, ...)`, then the section): `Ok(None)` when
            /// the lock did not come free in time, and the section was not run. Contention is
            /// not an error, as for [`try_lock_for`](Self::try_lock_for). A zero `wait` makes
            /// one attempt.
            ///
            /// # Errors
            ///
            /// As [`with_lock_options`](Self::with_lock_options); the acquisition's as
            /// [`try_lock_for`](Self::try_lock_for).
            ///
            /// # Cancel safety
            ///
            /// As [`with_lock`](Self::with_lock).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use std::time::Duration;
            /// use redisson_sync::{Error, WithLockOptions};
            ///
            /// let opts = WithLockOptions::new().lease(Duration::from_secs(10));
            #[doc = concat!("let lock = ", $make, ";")]
            /// match lock.try_with_lock(Duration::from_secs(2), &opts, || async { Ok::<_, Error>(1) }).await? {
            ///     Some(n) => println!("ran: {n}"),
            ///     None => println!("busy, not run"),
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn try_with_lock<F, Fut, T, E>(
                &self,
                wait: std::time::Duration,
                options: &$crate::WithLockOptions,
                f: F,
            ) -> std::result::Result<Option<T>, E>
            where
                F: FnOnce() -> Fut,
                Fut: std::future::Future<Output = std::result::Result<T, E>>,
                E: From<$crate::Error>,
            {
                self.core.try_with_lock(wait, options, f).await
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
