//! Critical sections run under a lock: [`WithLockOptions`], the section runner every
//! `with_lock` shares ([`run_section`]), and the `with_lock` family and lease shortcuts of the
//! locks that do not go through `lock_api!`: [`MultiLock`], [`RedLock`] and [`TokenLock`].
//!
//! The single lock kinds get the same methods from `lock_api!` (`src/lock/mod.rs`), and
//! [`AnyLock`](crate::AnyLock) and [`DistributedLock`](crate::DistributedLock) have them too.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::lock::LockGuard;
use crate::multi::{MultiLock, MultiLockGuard, RedLock};
use crate::options::LockOptions;
use crate::owner::Owner;
use crate::token_lock::{TokenGuard, TokenLock};

/// Options of a critical section run by `with_lock_options` or `try_with_lock` (for example
/// [`Lock::with_lock_options`](crate::Lock::with_lock_options)): the lease and owner of the
/// acquisition ([`LockOptions`]), and whether the section stops when the lock is lost.
///
/// How long to wait for the lock is not an option: `with_lock_options` waits as long as it
/// takes and returns the section's value; `try_with_lock(wait, ...)` waits at most `wait` and
/// returns `None` (the section not run) when the lock did not come free, as the `try_lock`
/// methods do: contention is not an error.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redisson_sync::{Owner, WithLockOptions};
///
/// let opts = WithLockOptions::new()
///     .lease(Duration::from_secs(10))
///     .owner(Owner::new(7))
///     .stop_on_lost(true);
/// assert_eq!(opts.options().lease_time(), Some(Duration::from_secs(10)));
/// assert!(opts.stops_on_lost());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WithLockOptions {
    lock: LockOptions,
    stop_on_lost: bool,
}

impl WithLockOptions {
    /// The defaults: the watchdog renews the lock while the section runs, the owner is the
    /// current task, and the section runs to its end even if the lock is lost meanwhile.
    pub fn new() -> Self {
        Self::default()
    }

    /// An explicit lease ([`LockOptions::lease`]): the lock expires this long after it is
    /// granted and is never renewed, so a section that outlives it runs without the lock
    /// (combine with [`stop_on_lost`](Self::stop_on_lost)). Must be at least 1 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lock = self.lock.lease(lease);
        self
    }

    /// Acquire for this owner instead of [`Owner::current`] ([`LockOptions::owner`]).
    pub fn owner(mut self, owner: Owner) -> Self {
        self.lock = self.lock.owner(owner);
        self
    }

    /// Replaces the lease and owner with those of `options`.
    pub fn lock_options(mut self, options: LockOptions) -> Self {
        self.lock = options;
        self
    }

    /// With `true`, the section is raced against the guard's lost signal
    /// ([`LockGuard::lost`]): as soon as the hold is lost (the watchdog found the lock gone:
    /// expired, force-unlocked, deleted; or its validity ran out, e.g. an explicit lease or a
    /// partition), the section's future is dropped at its current `.await` and the call
    /// returns [`Error::LeaseLost`]. A section must then be written to be cancellable at any
    /// await point (as any future in a `select!`). Default `false`: the section runs to its
    /// end and the loss is reported by the release ([`Error::LeaseLost`] instead of the
    /// section's value).
    pub fn stop_on_lost(mut self, stop: bool) -> Self {
        self.stop_on_lost = stop;
        self
    }

    /// The lease and owner of the acquisition.
    pub fn options(&self) -> &LockOptions {
        &self.lock
    }

    /// Whether the section stops when the lock is lost (see
    /// [`stop_on_lost`](Self::stop_on_lost)).
    pub fn stops_on_lost(&self) -> bool {
        self.stop_on_lost
    }
}

impl From<LockOptions> for WithLockOptions {
    fn from(options: LockOptions) -> Self {
        Self::new().lock_options(options)
    }
}

/// What the section runner needs of a guard.
pub(crate) trait SectionGuard {
    /// The name reported in [`Error::LeaseLost`] when the section was stopped.
    fn lost_name(&self) -> String;
    /// Resolves when the hold is lost.
    async fn lost(&self);
    /// Releases the hold.
    async fn unlock(self) -> Result<()>;
}

impl SectionGuard for LockGuard {
    fn lost_name(&self) -> String {
        self.name().to_owned()
    }

    async fn lost(&self) {
        Self::lost(self).await;
    }

    async fn unlock(self) -> Result<()> {
        Self::unlock(self).await
    }
}

impl SectionGuard for TokenGuard {
    fn lost_name(&self) -> String {
        self.name().to_owned()
    }

    async fn lost(&self) {
        Self::lost(self).await;
    }

    async fn unlock(self) -> Result<()> {
        Self::unlock(self).await
    }
}

impl SectionGuard for MultiLockGuard {
    /// The first lost lock's name (in the order of the locks), else the first lock's.
    fn lost_name(&self) -> String {
        let guards = self.guards();
        guards
            .iter()
            .find(|g| g.is_lost())
            .or_else(|| guards.first())
            .map_or_else(String::new, |g| g.name().to_owned())
    }

    async fn lost(&self) {
        Self::lost(self).await;
    }

    async fn unlock(self) -> Result<()> {
        Self::unlock(self).await
    }
}

/// Runs the section `f` under `guard` and releases it: the body of every `with_lock`.
///
/// - `Ok(v)`: the release is awaited; its error, if any, replaces `v`.
/// - `Err(e)`: the release is awaited; `e` is returned, a release error only logged.
/// - `stop_on_lost` and the hold lost first: the section's future is dropped, the release is
///   awaited (a hold Redis showed gone is not touched), and [`Error::LeaseLost`] returned.
/// - A panic in the section, or this future dropped: `guard` is dropped with it, which
///   schedules the release in the background.
pub(crate) async fn run_section<G, F, Fut, T, E>(guard: G, stop_on_lost: bool, f: F) -> Result<T, E>
where
    G: SectionGuard,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: From<Error>,
{
    let outcome = if stop_on_lost {
        let section = f();
        // Biased towards the loss: a section is never polled (again) once the hold is lost.
        tokio::select! {
            biased;
            () = guard.lost() => None,
            result = section => Some(result),
        }
    } else {
        Some(f().await)
    };
    match outcome {
        Some(Ok(value)) => match guard.unlock().await {
            Ok(()) => Ok(value),
            Err(e) => Err(e.into()),
        },
        Some(Err(e)) => {
            let name = guard.lost_name();
            if let Err(release) = guard.unlock().await {
                tracing::warn!(
                    lock = %name,
                    error = %release,
                    "release after a failed critical section failed; returning the section's error"
                );
            }
            Err(e)
        }
        None => {
            let name = guard.lost_name();
            // Expected to say `LeaseLost` too; a hold still in Redis (validity ran out, not
            // shown gone) is released by it.
            if let Err(release) = guard.unlock().await
                && !release.is_not_held()
            {
                tracing::warn!(lock = %name, error = %release, "release after a lost lease failed");
            }
            Err(Error::LeaseLost { name }.into())
        }
    }
}

/// The `with_lock` family and the lease shortcuts of a lock type outside `lock_api!`, whose
/// `lock_with_options` and `try_lock_with_options` return `$guard`.
macro_rules! sections {
    ($ty:ident, $guard:ident, setup: $setup:literal, make: $make:literal) => {
        impl $ty {
            /// Acquires with an explicit lease, waiting as long as it takes (Redisson's
            /// `lock(leaseTime, unit)`): shorthand for
            /// [`lock_with_options`](Self::lock_with_options) with
            /// [`LockOptions::lease`].
            ///
            /// # Errors
            ///
            /// As [`lock_with_options`](Self::lock_with_options).
            ///
            /// # Cancel safety
            ///
            /// As [`lock`](Self::lock).
            pub async fn lock_with_lease(&self, lease: Duration) -> Result<$guard> {
                self.lock_with_options(&LockOptions::new().lease(lease))
                    .await
            }

            /// Tries to acquire within `wait` with an explicit lease (Redisson's
            /// `tryLock(waitTime, leaseTime, unit)`): shorthand for
            /// [`try_lock_with_options`](Self::try_lock_with_options) with
            /// [`LockOptions::lease`].
            ///
            /// # Errors
            ///
            /// As [`try_lock_with_options`](Self::try_lock_with_options).
            ///
            /// # Cancel safety
            ///
            /// As [`lock`](Self::lock).
            pub async fn try_lock_with_lease(
                &self,
                wait: Duration,
                lease: Duration,
            ) -> Result<Option<$guard>> {
                self.try_lock_with_options(wait, &LockOptions::new().lease(lease))
                    .await
            }

            /// Runs the section `f` under the lock, waiting for it as long as it takes, and
            /// always releases it: on the section's success, on its error, on a panic and
            /// when this future is dropped. The same contract as
            /// [`Lock::with_lock`](crate::Lock::with_lock), which tells it in full.
            ///
            /// # Errors
            ///
            /// The section's own error; the acquisition's (as [`lock`](Self::lock)); the
            /// release's when the section succeeded (as the guard's `unlock`).
            ///
            /// # Cancel safety
            ///
            /// Dropping the future drops the section and schedules the release.
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            #[doc = $setup]
            #[doc = concat!("let lock = ", $make, ";")]
            /// let done = lock.with_lock(|| async { Ok::<_, redisson_sync::Error>("done") }).await?;
            /// assert_eq!(done, "done");
            /// # Ok(())
            /// # }
            /// ```
            pub async fn with_lock<F, Fut, T, E>(&self, f: F) -> Result<T, E>
            where
                F: FnOnce() -> Fut,
                Fut: Future<Output = Result<T, E>>,
                E: From<Error>,
            {
                self.with_lock_options(&WithLockOptions::new(), f).await
            }

            /// [`with_lock`](Self::with_lock) with the lease and owner of `options`, and the
            /// section stopped with [`Error::LeaseLost`] when the lock is lost if `options`
            /// say so ([`WithLockOptions::stop_on_lost`]).
            ///
            /// # Errors
            ///
            /// As [`with_lock`](Self::with_lock); [`Error::LeaseLost`] when the section was
            /// stopped.
            ///
            /// # Cancel safety
            ///
            /// As [`with_lock`](Self::with_lock).
            pub async fn with_lock_options<F, Fut, T, E>(
                &self,
                options: &WithLockOptions,
                f: F,
            ) -> Result<T, E>
            where
                F: FnOnce() -> Fut,
                Fut: Future<Output = Result<T, E>>,
                E: From<Error>,
            {
                let guard = self.lock_with_options(options.options()).await?;
                run_section(guard, options.stops_on_lost(), f).await
            }

            /// [`with_lock_options`](Self::with_lock_options), waiting at most `wait` for the
            /// lock: `Ok(None)` when it did not come free in time (the section was not run).
            ///
            /// # Errors
            ///
            /// As [`with_lock_options`](Self::with_lock_options), the acquisition's as
            /// [`try_lock_with_options`](Self::try_lock_with_options).
            ///
            /// # Cancel safety
            ///
            /// As [`with_lock`](Self::with_lock).
            pub async fn try_with_lock<F, Fut, T, E>(
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
                match self.try_lock_with_options(wait, options.options()).await? {
                    Some(guard) => run_section(guard, options.stops_on_lost(), f)
                        .await
                        .map(Some),
                    None => Ok(None),
                }
            }
        }
    };
}

sections!(
    MultiLock,
    MultiLockGuard,
    setup: "# ",
    make: "redisson_sync::MultiLock::new([client.lock(\"account:1\"), client.lock(\"account:2\")])?"
);
sections!(
    RedLock,
    MultiLockGuard,
    setup: "# let (a, b, c) = (client.clone(), client.clone(), client);",
    make: "redisson_sync::RedLock::new([a.lock(\"resource\"), b.lock(\"resource\"), c.lock(\"resource\")]).await?"
);
sections!(TokenLock, TokenGuard, setup: "# ", make: "client.token_lock(\"job\")");
