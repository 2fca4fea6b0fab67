//! The one public lock surface: the [`DistributedLock`] trait every lock implements, the
//! [`Core`] each lock type wraps (a single lock's [`LockCore`](super::single::LockCore), or a
//! composite), and the macros that give every lock type its documented methods from one
//! place: [`lock_surface!`] (acquisition, sections, `is_locked`, `force_unlock`, `name`, and
//! the trait) and [`hold_queries!`] (the queries of a single lock's holds).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::guard::LockGuard;
use super::section::{WithLockOptions, run_section};
use crate::error::{Error, Result};
use crate::options::LockOptions;
use crate::shared::Shared;

pub(crate) mod sealed {
    use super::Placement;

    /// Only this crate's locks implement [`DistributedLock`](super::DistributedLock).
    pub trait Sealed {
        /// Where a single lock lives (its client and name), for the compositions' checks;
        /// `None` for a composite.
        fn placement(&self) -> Option<Placement<'_>>;
    }
}

/// Where a single lock lives: its client and its name (a [`MultiLock`](crate::MultiLock)
/// refuses the same lock twice, a [`RedLock`](crate::RedLock) two locks on one server).
#[derive(Clone, Copy, Debug)]
pub struct Placement<'a> {
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) name: &'a str,
}

/// What every lock type wraps: a single lock ([`LockCore`](super::single::LockCore), over the
/// hold layer) or a composite of locks (`multi::Composite`). The surface macro builds each
/// type's public methods from these.
pub(crate) trait Core: std::fmt::Debug + Send + Sync {
    /// The lock's name.
    fn name(&self) -> &str;

    /// Where a single lock lives; `None` for a composite.
    fn placement(&self) -> Option<Placement<'_>>;

    /// Acquires with `options`, waiting as long as it takes.
    fn lock<'a>(
        &'a self,
        options: &'a LockOptions,
    ) -> impl Future<Output = Result<LockGuard>> + Send + 'a;

    /// Acquires with `options`, waiting at most `wait` (`ZERO`: one attempt).
    fn try_lock<'a>(
        &'a self,
        wait: Duration,
        options: &'a LockOptions,
    ) -> impl Future<Output = Result<Option<LockGuard>>> + Send + 'a;

    /// Deletes the lock whoever holds it; `true` if something was deleted.
    fn force_unlock(&self) -> impl Future<Output = Result<bool>> + Send + '_;

    /// `true` when anyone holds the lock.
    fn is_locked(&self) -> impl Future<Output = Result<bool>> + Send + '_;

    /// Runs the section `f` under a hold taken with `options`, waiting for it as long as it
    /// takes (the body of every lock's `with_lock_options`).
    async fn with_lock<F, Fut, T, E>(&self, options: &WithLockOptions, f: F) -> Result<T, E>
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
    async fn try_with_lock<F, Fut, T, E>(
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
}

/// A lock of any kind, as a trait (Redisson's `RLock`): every lock of the crate implements it,
/// [`Lock`](crate::Lock), [`FairLock`](crate::FairLock), [`ReadLock`](crate::ReadLock),
/// [`WriteLock`](crate::WriteLock), [`FencedLock`](crate::FencedLock),
/// [`SpinLock`](crate::SpinLock), [`NonReentrantLock`](crate::NonReentrantLock),
/// [`NonReentrantFairLock`](crate::NonReentrantFairLock), [`TokenLock`](crate::TokenLock),
/// [`MultiLock`](crate::MultiLock) and [`RedLock`](crate::RedLock) (and so do references,
/// `Box`es and `Arc`s of them), each method behaving as the type's inherent method of the
/// same name. Every acquisition returns a [`LockGuard`].
///
/// It is how code takes "a lock, whatever its kind": generic functions
/// (`fn f(lock: &impl DistributedLock)`), and trait objects for a list of locks or a lock
/// picked at run time (`Box<dyn DistributedLock>`, `Arc<dyn DistributedLock>`, which clones;
/// every lock converts into both with `.into()`).
///
/// The acquire and query methods return boxed futures (`Pin<Box<dyn Future + Send>>`), which
/// keeps the trait usable as `dyn DistributedLock` and its futures `Send` in generic code (a
/// generic function can `tokio::spawn` them); the box costs one allocation per call, next to a
/// Redis round trip. The `with_lock` family is generic over the section, so it needs a sized
/// receiver (`where Self: Sized`): call it on a concrete type, a generic `L`, a
/// `Box<dyn DistributedLock>` or `Arc<dyn DistributedLock>`, or as
/// `DistributedLock::with_lock(&lock, f)` on a `&dyn DistributedLock`. Its sections must be
/// `Send` (the inherent `with_lock` of each type has no such bound).
///
/// The trait is sealed: only this crate implements it (its guards cannot be made elsewhere).
/// With the trait in scope, calls on a concrete type still reach the inherent methods. The
/// queries that only a single lock's holds answer (`is_held_by`, `hold_count`,
/// `remaining_ttl`) are inherent methods of the kinds that have them.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), redisson_sync::Error> {
/// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
/// use std::time::Duration;
/// use redisson_sync::{DistributedLock, Error};
///
/// /// Runs a job under whatever lock the caller chose.
/// async fn run_job(lock: &impl DistributedLock, job: u32) -> Result<u32, Error> {
///     lock.with_lock(|| async move { Ok(job * 2) }).await
/// }
///
/// assert_eq!(run_job(&client.lock("jobs"), 21).await?, 42);
/// assert_eq!(run_job(&client.fair_lock("jobs:fair"), 1).await?, 2);
///
/// // As trait objects:
/// let locks: Vec<Box<dyn DistributedLock>> = vec![
///     Box::new(client.lock("a")),
///     Box::new(client.spin_lock("b")),
///     Box::new(client.token_lock("c")),
/// ];
/// for lock in &locks {
///     if let Some(guard) = lock.try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10)).await? {
///         guard.unlock().await?;
///     }
/// }
/// # Ok(())
/// # }
/// ```
pub trait DistributedLock: sealed::Sealed + std::fmt::Debug + Send + Sync {
    /// The lock's name: its Redis key.
    fn name(&self) -> &str;

    /// Acquires the lock with the lease and owner of `options`, waiting as long as it takes
    /// ([`Lock::lock_with_options`](crate::Lock::lock_with_options)).
    ///
    /// # Errors
    ///
    /// As the type's `lock_with_options`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    fn lock_with_options<'a>(
        &'a self,
        options: &'a LockOptions,
    ) -> BoxFuture<'a, Result<LockGuard>>;

    /// Tries to acquire the lock within `wait` with the lease and owner of `options`
    /// ([`Lock::try_lock_with_options`](crate::Lock::try_lock_with_options)); `None` when it
    /// did not come free in time. A zero `wait` makes one attempt.
    ///
    /// # Errors
    ///
    /// As the type's `try_lock_with_options`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    fn try_lock_with_options<'a>(
        &'a self,
        wait: Duration,
        options: &'a LockOptions,
    ) -> BoxFuture<'a, Result<Option<LockGuard>>>;

    /// Deletes the lock whoever holds it ([`Lock::force_unlock`](crate::Lock::force_unlock));
    /// `true` if it deleted it.
    ///
    /// # Errors
    ///
    /// As the type's `force_unlock`.
    ///
    /// # Cancel safety
    ///
    /// A dropped call may or may not have deleted the lock.
    fn force_unlock(&self) -> BoxFuture<'_, Result<bool>>;

    /// `true` when anyone holds the lock ([`Lock::is_locked`](crate::Lock::is_locked)).
    ///
    /// # Errors
    ///
    /// As the type's `is_locked`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    fn is_locked(&self) -> BoxFuture<'_, Result<bool>>;

    /// Acquires the lock, waiting as long as it takes, the watchdog renewing it
    /// ([`Lock::lock`](crate::Lock::lock)).
    ///
    /// # Errors
    ///
    /// As the type's `lock`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    fn lock(&self) -> BoxFuture<'_, Result<LockGuard>> {
        Box::pin(async move { self.lock_with_options(&LockOptions::new()).await })
    }

    /// One attempt ([`Lock::try_lock`](crate::Lock::try_lock)).
    ///
    /// # Errors
    ///
    /// As the type's `try_lock`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    fn try_lock(&self) -> BoxFuture<'_, Result<Option<LockGuard>>> {
        self.try_lock_for(Duration::ZERO)
    }

    /// Tries to acquire the lock within `wait` ([`Lock::try_lock_for`](crate::Lock::try_lock_for)).
    ///
    /// # Errors
    ///
    /// As the type's `try_lock_for`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    fn try_lock_for(&self, wait: Duration) -> BoxFuture<'_, Result<Option<LockGuard>>> {
        Box::pin(async move { self.try_lock_with_options(wait, &LockOptions::new()).await })
    }

    /// Acquires the lock with an explicit lease, waiting as long as it takes (Redisson's
    /// `lock(leaseTime, unit)`, [`Lock::lock_with_lease`](crate::Lock::lock_with_lease)).
    ///
    /// # Errors
    ///
    /// As the type's `lock_with_lease`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    fn lock_with_lease(&self, lease: Duration) -> BoxFuture<'_, Result<LockGuard>> {
        Box::pin(async move {
            self.lock_with_options(&LockOptions::new().lease(lease))
                .await
        })
    }

    /// Tries to acquire the lock within `wait` with an explicit lease (Redisson's
    /// `tryLock(waitTime, leaseTime, unit)`,
    /// [`Lock::try_lock_with_lease`](crate::Lock::try_lock_with_lease)).
    ///
    /// # Errors
    ///
    /// As the type's `try_lock_with_lease`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> BoxFuture<'_, Result<Option<LockGuard>>> {
        Box::pin(async move {
            self.try_lock_with_options(wait, &LockOptions::new().lease(lease))
                .await
        })
    }

    /// Runs the section `f` under the lock and always releases it
    /// ([`Lock::with_lock`](crate::Lock::with_lock), which tells the contract in full), for
    /// `Send` sections.
    ///
    /// # Errors
    ///
    /// As [`Lock::with_lock`](crate::Lock::with_lock).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the section and schedules the release.
    fn with_lock<F, Fut, T, E>(&self, f: F) -> impl Future<Output = Result<T, E>> + Send
    where
        Self: Sized,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Send,
        E: From<Error> + Send,
    {
        async move {
            let guard = self.lock_with_options(&LockOptions::new()).await?;
            run_section(guard, false, f).await
        }
    }

    /// [`with_lock`](Self::with_lock) with `options`
    /// ([`Lock::with_lock_options`](crate::Lock::with_lock_options)).
    ///
    /// # Errors
    ///
    /// As [`Lock::with_lock_options`](crate::Lock::with_lock_options).
    ///
    /// # Cancel safety
    ///
    /// As [`with_lock`](Self::with_lock).
    fn with_lock_options<F, Fut, T, E>(
        &self,
        options: &WithLockOptions,
        f: F,
    ) -> impl Future<Output = Result<T, E>> + Send
    where
        Self: Sized,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Send,
        E: From<Error> + Send,
    {
        async move {
            let guard = self.lock_with_options(options.options()).await?;
            run_section(guard, options.stops_on_lost(), f).await
        }
    }

    /// [`with_lock_options`](Self::with_lock_options), waiting at most `wait`: `Ok(None)`
    /// when the lock did not come free in time ([`Lock::try_with_lock`](crate::Lock::try_with_lock)).
    ///
    /// # Errors
    ///
    /// As [`Lock::try_with_lock`](crate::Lock::try_with_lock).
    ///
    /// # Cancel safety
    ///
    /// As [`with_lock`](Self::with_lock).
    fn try_with_lock<F, Fut, T, E>(
        &self,
        wait: Duration,
        options: &WithLockOptions,
        f: F,
    ) -> impl Future<Output = Result<Option<T>, E>> + Send
    where
        Self: Sized,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Send,
        E: From<Error> + Send,
    {
        async move {
            match self.try_lock_with_options(wait, options.options()).await? {
                Some(guard) => run_section(guard, options.stops_on_lost(), f)
                    .await
                    .map(Some),
                None => Ok(None),
            }
        }
    }
}

/// Gives a public lock type (a struct with a `core` field whose type implements [`Core`]) the
/// lock API, with its documentation, and implements [`DistributedLock`] for it. `make` is the
/// expression that makes such a lock in the examples, from a `client` (after the hidden
/// `setup` line); `errors` and `cancel` add the type's own sentences to the `# Errors` and
/// `# Cancel safety` sections of its acquire methods; `force_unlock` and `is_locked` are the
/// first lines of those methods' docs.
macro_rules! lock_surface {
    (
        $ty:ident,
        setup: $setup:literal,
        make: $make:literal,
        errors: $errors:literal,
        cancel: $cancel:literal,
        force_unlock: $force:literal,
        is_locked: $locked:literal $(,)?
    ) => {
        impl $ty {
            /// The lock's name: its Redis key (mapped by the client's
            /// [`NameMapper`](crate::config::NameMapper), if any); a composite's: the names of
            /// its locks.
            pub fn name(&self) -> &str {
                $crate::lock::Core::name(&self.core)
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
            #[doc = $setup]
            #[doc = concat!("let guard = ", $make, ".lock().await?;")]
            /// // ... critical section ...
            /// guard.unlock().await?;
            /// # Ok(())
            /// # }
            /// ```
            pub async fn lock(&self) -> $crate::error::Result<$crate::lock::LockGuard> {
                $crate::lock::Core::lock(&self.core, &$crate::options::LockOptions::new()).await
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
            #[doc = $setup]
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
                options: &$crate::options::LockOptions,
            ) -> $crate::error::Result<$crate::lock::LockGuard> {
                $crate::lock::Core::lock(&self.core, options).await
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
            #[doc = $setup]
            #[doc = concat!("match ", $make, ".try_lock().await? {")]
            ///     Some(guard) => guard.unlock().await?,
            ///     None => println!("busy"),
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn try_lock(&self) -> $crate::error::Result<Option<$crate::lock::LockGuard>> {
                $crate::lock::Core::try_lock(
                    &self.core,
                    std::time::Duration::ZERO,
                    &$crate::options::LockOptions::new(),
                )
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
            #[doc = $setup]
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
            ) -> $crate::error::Result<Option<$crate::lock::LockGuard>> {
                $crate::lock::Core::try_lock(&self.core, wait, &$crate::options::LockOptions::new()).await
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
            #[doc = $setup]
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
                options: &$crate::options::LockOptions,
            ) -> $crate::error::Result<Option<$crate::lock::LockGuard>> {
                $crate::lock::Core::try_lock(&self.core, wait, options).await
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
            #[doc = $setup]
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
            ) -> $crate::error::Result<$crate::lock::LockGuard> {
                $crate::lock::Core::lock(&self.core, &$crate::options::LockOptions::new().lease(lease)).await
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
            #[doc = $setup]
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
            ) -> $crate::error::Result<Option<$crate::lock::LockGuard>> {
                $crate::lock::Core::try_lock(
                    &self.core,
                    wait,
                    &$crate::options::LockOptions::new().lease(lease),
                )
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
            #[doc = $setup]
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
            #[doc = $setup]
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
                E: From<$crate::error::Error>,
            {
                $crate::lock::Core::with_lock(&self.core, &$crate::lock::WithLockOptions::new(), f).await
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
            #[doc = $setup]
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
                options: &$crate::lock::WithLockOptions,
                f: F,
            ) -> std::result::Result<T, E>
            where
                F: FnOnce() -> Fut,
                Fut: std::future::Future<Output = std::result::Result<T, E>>,
                E: From<$crate::error::Error>,
            {
                $crate::lock::Core::with_lock(&self.core, options, f).await
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
            #[doc = $setup]
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
                options: &$crate::lock::WithLockOptions,
                f: F,
            ) -> std::result::Result<Option<T>, E>
            where
                F: FnOnce() -> Fut,
                Fut: std::future::Future<Output = std::result::Result<T, E>>,
                E: From<$crate::error::Error>,
            {
                $crate::lock::Core::try_with_lock(&self.core, wait, options, f).await
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
            #[doc = $setup]
            #[doc = concat!("if ", $make, ".force_unlock().await? {")]
            ///     println!("it was locked");
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn force_unlock(&self) -> $crate::error::Result<bool> {
                $crate::lock::Core::force_unlock(&self.core).await
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
            #[doc = $setup]
            #[doc = concat!("let locked = ", $make, ".is_locked().await?;")]
            /// println!("locked: {locked}");
            /// # Ok(())
            /// # }
            /// ```
            pub async fn is_locked(&self) -> $crate::error::Result<bool> {
                $crate::lock::Core::is_locked(&self.core).await
            }

        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&self.core, f)
            }
        }

        impl From<$ty> for Box<dyn $crate::lock::DistributedLock> {
            fn from(lock: $ty) -> Self {
                Box::new(lock)
            }
        }

        impl From<$ty> for std::sync::Arc<dyn $crate::lock::DistributedLock> {
            fn from(lock: $ty) -> Self {
                std::sync::Arc::new(lock)
            }
        }

        impl $crate::lock::sealed::Sealed for $ty {
            fn placement(&self) -> Option<$crate::lock::Placement<'_>> {
                $crate::lock::Core::placement(&self.core)
            }
        }

        impl $crate::lock::DistributedLock for $ty {
            fn name(&self) -> &str {
                $crate::lock::Core::name(&self.core)
            }

            fn lock_with_options<'a>(
                &'a self,
                options: &'a $crate::options::LockOptions,
            ) -> futures_util::future::BoxFuture<'a, $crate::error::Result<$crate::lock::LockGuard>> {
                Box::pin($crate::lock::Core::lock(&self.core, options))
            }

            fn try_lock_with_options<'a>(
                &'a self,
                wait: std::time::Duration,
                options: &'a $crate::options::LockOptions,
            ) -> futures_util::future::BoxFuture<'a, $crate::error::Result<Option<$crate::lock::LockGuard>>>
            {
                Box::pin($crate::lock::Core::try_lock(&self.core, wait, options))
            }

            fn force_unlock(&self) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin($crate::lock::Core::force_unlock(&self.core))
            }

            fn is_locked(&self) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin($crate::lock::Core::is_locked(&self.core))
            }
        }
    };
}
pub(crate) use lock_surface;

/// Gives a lock type of a hash-based kind (a struct with a `core: LockCore` field) the queries
/// of its holds per owner: `is_held_by` and `hold_count`.
macro_rules! hold_queries {
    ($ty:ident, make: $make:literal) => {
        impl $ty {
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
            pub async fn is_held_by(
                &self,
                owner: $crate::owner::Owner,
            ) -> $crate::error::Result<bool> {
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
            pub async fn hold_count(
                &self,
                owner: $crate::owner::Owner,
            ) -> $crate::error::Result<u64> {
                self.core.hold_count(owner).await
            }
        }
    };
}
pub(crate) use hold_queries;

/// Implements [`DistributedLock`] for a pointer to a lock (`&L`, `Box<L>`, `Arc<L>`), `dyn`
/// locks included, by forwarding to the lock.
macro_rules! forward_distributed_lock {
    ($ptr:ty) => {
        impl<L: DistributedLock + ?Sized> sealed::Sealed for $ptr {
            fn placement(&self) -> Option<Placement<'_>> {
                (**self).placement()
            }
        }

        impl<L: DistributedLock + ?Sized> DistributedLock for $ptr {
            fn name(&self) -> &str {
                (**self).name()
            }

            fn lock_with_options<'a>(
                &'a self,
                options: &'a LockOptions,
            ) -> BoxFuture<'a, Result<LockGuard>> {
                (**self).lock_with_options(options)
            }

            fn try_lock_with_options<'a>(
                &'a self,
                wait: Duration,
                options: &'a LockOptions,
            ) -> BoxFuture<'a, Result<Option<LockGuard>>> {
                (**self).try_lock_with_options(wait, options)
            }

            fn force_unlock(&self) -> BoxFuture<'_, Result<bool>> {
                (**self).force_unlock()
            }

            fn is_locked(&self) -> BoxFuture<'_, Result<bool>> {
                (**self).is_locked()
            }
        }
    };
}

forward_distributed_lock!(&L);
forward_distributed_lock!(Box<L>);
forward_distributed_lock!(Arc<L>);
