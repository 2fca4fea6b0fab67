//! The lock surface, blocking: written once for every `Blocking<L>` whose `L` is a
//! [`DistributedLock`], plus the few methods that only some kinds have (hold counts, a fenced
//! lock's tokens, a read-write lock's halves, a composite's locks).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::guard::LockGuard;
use super::handle::Blocking;
use crate::error::{Error, Result};
use crate::lock::{
    DistributedLock, FairLock, FencedLock, Lock, LockGuard as AsyncGuard, NonReentrantFairLock,
    NonReentrantLock, ReadLock, RwLock, SpinBackoff, SpinLock, TokenLock, ValueFormat,
    WithLockOptions, WriteLock,
};
use crate::multi::{MultiLock, RedLock};
use crate::options::LockOptions;
use crate::owner::Owner;

/// `options` for the calling thread: its owner unless they name one. Evaluated on the caller's
/// thread, before the call blocks, so that the owner is that thread.
fn for_caller(options: &LockOptions) -> LockOptions {
    match options.explicit_owner() {
        Some(_) => options.clone(),
        None => options.clone().owner(Owner::current()),
    }
}

impl<L: DistributedLock> Blocking<L> {
    fn guard(&self, guard: AsyncGuard) -> LockGuard {
        LockGuard::new(guard, self.rt.clone())
    }

    fn acquire(&self, op: &'static str, options: &LockOptions) -> Result<LockGuard> {
        let options = for_caller(options);
        let guard = self.rt.call(op, self.inner.lock_with_options(&options))?;
        Ok(self.guard(guard))
    }

    fn try_acquire(
        &self,
        op: &'static str,
        wait: Duration,
        options: &LockOptions,
    ) -> Result<Option<LockGuard>> {
        let options = for_caller(options);
        let guard = self
            .rt
            .call(op, self.inner.try_lock_with_options(wait, &options))?;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// The lock's name: its Redis key ([`DistributedLock::name`]).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Acquires the lock for the calling thread, blocking as long as it takes; the watchdog
    /// renews it while the guard lives (Redisson's `lock()`; as the async kind's `lock`).
    ///
    /// # Errors
    ///
    /// As the async kind's `lock` ([`Lock::lock`](crate::Lock::lock));
    /// [`Error::InAsyncContext`] inside async code.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let client = redisson_sync::blocking::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.lock("order:42").lock()?;
    /// // ... critical section ...
    /// guard.unlock()?;
    /// client.shutdown()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock(&self) -> Result<LockGuard> {
        self.acquire("lock", &LockOptions::new())
    }

    /// Acquires the lock with the lease and owner of `options` (the calling thread when they
    /// name none), blocking as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), plus [`Error::InvalidArgument`] for a lease under 1 ms.
    pub fn lock_with_options(&self, options: &LockOptions) -> Result<LockGuard> {
        self.acquire("lock_with_options", options)
    }

    /// Acquires the lock with an explicit lease, never renewed (Redisson's
    /// `lock(leaseTime, unit)`), blocking as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`lock_with_options`](Self::lock_with_options).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.acquire("lock_with_lease", &LockOptions::new().lease(lease))
    }

    /// One attempt: `Some(guard)` if the lock was free or already held by the calling thread,
    /// `None` if not (Redisson's `tryLock()`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.try_acquire("try_lock", Duration::ZERO, &LockOptions::new())
    }

    /// Tries to acquire the lock, blocking at most `wait` (plus at most 100 ms when Redis is
    /// stalled; Redisson's `tryLock(waitTime, unit)`). `None`: not available in time.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.try_acquire("try_lock_for", wait, &LockOptions::new())
    }

    /// Tries to acquire the lock within `wait` with the lease and owner of `options`.
    ///
    /// # Errors
    ///
    /// As [`lock_with_options`](Self::lock_with_options).
    pub fn try_lock_with_options(
        &self,
        wait: Duration,
        options: &LockOptions,
    ) -> Result<Option<LockGuard>> {
        self.try_acquire("try_lock_with_options", wait, options)
    }

    /// Tries to acquire the lock within `wait`, with an explicit lease (Redisson's
    /// `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock_with_options`](Self::lock_with_options).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.try_acquire(
            "try_lock_with_lease",
            wait,
            &LockOptions::new().lease(lease),
        )
    }

    /// Runs the section `f` on the calling thread under the lock and always releases it:
    /// Java's `lock(); try { ... } finally { unlock(); }`. As the async
    /// [`with_lock`](crate::Lock::with_lock): `Ok(v)` waits for the release and returns its
    /// error if it failed (the lock may not have been exclusive all along); `Err(e)` releases
    /// and returns `e`; a panic drops the guard while unwinding, which schedules the release.
    ///
    /// # Errors
    ///
    /// The section's own error; the acquisition's and the release's, as for
    /// [`lock`](Self::lock) and [`LockGuard::unlock`].
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::blocking::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use redisson_sync::Error;
    ///
    /// let answer = client.lock("jobs").with_lock(|| Ok::<_, Error>(6 * 7))?;
    /// assert_eq!(answer, 42);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_lock<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        E: From<Error>,
    {
        let guard = self.acquire("with_lock", &LockOptions::new())?;
        run_section(guard, false, f)
    }

    /// [`with_lock`](Self::with_lock) with the lease and owner of `options`. A sync section
    /// cannot be stopped midway: with
    /// [`stop_on_lost`](crate::WithLockOptions::stop_on_lost), a section that ends after the
    /// hold was lost returns [`Error::LeaseLost`] instead of its own result.
    ///
    /// # Errors
    ///
    /// As [`with_lock`](Self::with_lock), plus [`Error::LeaseLost`] as above.
    pub fn with_lock_options<T, E>(
        &self,
        options: &WithLockOptions,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<Error>,
    {
        let guard = self.acquire("with_lock_options", options.options())?;
        run_section(guard, options.stops_on_lost(), f)
    }

    /// [`with_lock_options`](Self::with_lock_options), waiting at most `wait` for the lock:
    /// `Ok(None)` when it did not come free in time, and the section was not run.
    ///
    /// # Errors
    ///
    /// As [`with_lock_options`](Self::with_lock_options).
    pub fn try_with_lock<T, E>(
        &self,
        wait: Duration,
        options: &WithLockOptions,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<Option<T>, E>
    where
        E: From<Error>,
    {
        match self.try_acquire("try_with_lock", wait, options.options())? {
            Some(guard) => run_section(guard, options.stops_on_lost(), f).map(Some),
            None => Ok(None),
        }
    }

    /// Deletes the lock whoever holds it ([`DistributedLock::force_unlock`]); `true` if it
    /// deleted it.
    ///
    /// # Errors
    ///
    /// As the async kind's `force_unlock`; [`Error::InAsyncContext`] inside async code.
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.call("force_unlock", self.inner.force_unlock())
    }

    /// `true` when anyone holds the lock ([`DistributedLock::is_locked`]).
    ///
    /// # Errors
    ///
    /// As the async kind's `is_locked`; [`Error::InAsyncContext`] inside async code.
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.call("is_locked", self.inner.is_locked())
    }

    /// This lock as a lock of any kind: `Blocking<Box<dyn DistributedLock>>`, for a list of
    /// locks of several kinds or one picked at run time.
    pub fn boxed(self) -> Blocking<Box<dyn DistributedLock>>
    where
        L: 'static,
    {
        Blocking::new(Box::new(self.inner), self.rt)
    }
}

/// Runs a sync section under `guard` and releases it (the async `run_section`'s rules; a sync
/// section cannot be raced against the loss, so `stop_on_lost` is checked when it ends).
fn run_section<T, E>(
    guard: LockGuard,
    stop_on_lost: bool,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E>
where
    E: From<Error>,
{
    // A panic unwinds through here and drops the guard: the release is scheduled.
    let outcome = f();
    if stop_on_lost && guard.is_lost() {
        let name = guard.as_async().lost_name();
        if let Err(release) = guard.unlock()
            && !release.is_not_held()
        {
            tracing::warn!(lock = %name, error = %release, "release after a lost lease failed");
        }
        return Err(Error::LeaseLost { name }.into());
    }
    match outcome {
        Ok(value) => guard.unlock().map(|()| value).map_err(E::from),
        Err(e) => {
            let name = guard.name().to_owned();
            if let Err(release) = guard.unlock() {
                tracing::warn!(
                    lock = %name,
                    error = %release,
                    "release after a failed critical section failed; returning the section's error"
                );
            }
            Err(e)
        }
    }
}

pub(super) mod sealed {
    use futures_util::future::BoxFuture;

    use crate::error::Result;
    use crate::owner::Owner;

    /// The per-owner hold queries of a kind, as boxed futures.
    pub trait Queries {
        /// The kind's `is_held_by`.
        fn is_held_by(&self, owner: Owner) -> BoxFuture<'_, Result<bool>>;
        /// The kind's `hold_count`.
        fn hold_count(&self, owner: Owner) -> BoxFuture<'_, Result<u64>>;
    }
}

/// The lock kinds whose holds are counted per owner (a hash field `<client id>:<owner id>`):
/// [`Lock`](crate::Lock), [`FairLock`](crate::FairLock), [`ReadLock`](crate::ReadLock),
/// [`WriteLock`](crate::WriteLock), [`FencedLock`](crate::FencedLock),
/// [`SpinLock`](crate::SpinLock), [`NonReentrantLock`](crate::NonReentrantLock),
/// [`NonReentrantFairLock`](crate::NonReentrantFairLock): their blocking handles have
/// [`is_held_by`](Blocking::is_held_by) and [`hold_count`](Blocking::hold_count). Sealed.
pub trait HoldQueries: sealed::Queries + DistributedLock {}

macro_rules! hold_queries {
    ($($ty:ty),* $(,)?) => {$(
        impl sealed::Queries for $ty {
            fn is_held_by(&self, owner: Owner) -> BoxFuture<'_, Result<bool>> {
                Box::pin(<$ty>::is_held_by(self, owner))
            }

            fn hold_count(&self, owner: Owner) -> BoxFuture<'_, Result<u64>> {
                Box::pin(<$ty>::hold_count(self, owner))
            }
        }

        impl HoldQueries for $ty {}
    )*};
}

hold_queries!(
    Lock,
    FairLock,
    ReadLock,
    WriteLock,
    FencedLock,
    SpinLock,
    NonReentrantLock,
    NonReentrantFairLock,
);

impl<L: HoldQueries> Blocking<L> {
    /// `true` when `owner` of this client holds the lock (Redisson's `isHeldByThread`;
    /// `Owner::current()` on a plain thread is that thread: "held by me").
    ///
    /// # Errors
    ///
    /// As the async kind's `is_held_by`; [`Error::InAsyncContext`] inside async code.
    pub fn is_held_by(&self, owner: Owner) -> Result<bool> {
        self.rt.call(
            "is_held_by",
            sealed::Queries::is_held_by(&self.inner, owner),
        )
    }

    /// How many times `owner` of this client holds the lock; 0 when it does not (Redisson's
    /// `getHoldCount()` with `Owner::current()`).
    ///
    /// # Errors
    ///
    /// As the async kind's `hold_count`; [`Error::InAsyncContext`] inside async code.
    pub fn hold_count(&self, owner: Owner) -> Result<u64> {
        self.rt.call(
            "hold_count",
            sealed::Queries::hold_count(&self.inner, owner),
        )
    }
}

/// The token a fenced guard carries.
fn tokened(guard: &LockGuard) -> Result<u64> {
    guard.token().ok_or_else(|| Error::UnexpectedReply {
        script: "fenced/acquire.lua",
        detail: "a grant without a token".into(),
    })
}

impl Blocking<FencedLock> {
    /// [`lock`](Self::lock), returning the guard and its fencing token (Redisson's
    /// `lockAndGetToken()`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn lock_and_get_token(&self) -> Result<(LockGuard, u64)> {
        let guard = self.acquire("lock_and_get_token", &LockOptions::new())?;
        let token = tokened(&guard)?;
        Ok((guard, token))
    }

    /// [`try_lock`](Self::try_lock), returning the guard and its token when acquired
    /// (Redisson's `tryLockAndGetToken()`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_and_get_token(&self) -> Result<Option<(LockGuard, u64)>> {
        self.try_lock_and_get_token_for(Duration::ZERO)
    }

    /// [`try_lock_for`](Self::try_lock_for), returning the guard and its token when acquired
    /// (Redisson's `tryLockAndGetToken(waitTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for).
    pub fn try_lock_and_get_token_for(&self, wait: Duration) -> Result<Option<(LockGuard, u64)>> {
        match self.try_acquire("try_lock_and_get_token_for", wait, &LockOptions::new())? {
            Some(guard) => {
                let token = tokened(&guard)?;
                Ok(Some((guard, token)))
            }
            None => Ok(None),
        }
    }

    /// The counter's current value: the token of the latest acquisition, by anyone
    /// (Redisson's `getToken()`; [`FencedLock::token`](crate::FencedLock::token)).
    ///
    /// # Errors
    ///
    /// As [`FencedLock::token`](crate::FencedLock::token); [`Error::InAsyncContext`] inside
    /// async code.
    pub fn token(&self) -> Result<u64> {
        self.rt.call("token", self.inner.token())
    }
}

impl Blocking<RwLock> {
    /// The lock's name: its Redis key.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The read half (Redisson's `readLock()`).
    pub fn read_lock(&self) -> Blocking<ReadLock> {
        Blocking::new(self.inner.read_lock(), self.rt.clone())
    }

    /// The write half (Redisson's `writeLock()`).
    pub fn write_lock(&self) -> Blocking<WriteLock> {
        Blocking::new(self.inner.write_lock(), self.rt.clone())
    }
}

impl Blocking<SpinLock> {
    /// The same lock with another back-off ([`SpinLock::with_backoff`]).
    #[must_use]
    pub fn with_backoff(self, backoff: SpinBackoff) -> Self {
        Self::new(self.inner.with_backoff(backoff), self.rt)
    }
}

impl Blocking<TokenLock> {
    /// The value format of this lock's key ([`TokenLock::format`]).
    pub fn format(&self) -> ValueFormat {
        self.inner.format()
    }

    /// The same lock writing `format` ([`TokenLock::with_format`]).
    #[must_use]
    pub fn with_format(self, format: ValueFormat) -> Self {
        Self::new(self.inner.with_format(format), self.rt)
    }
}

impl Blocking<MultiLock> {
    /// The locks, in the order they are taken.
    pub fn locks(&self) -> &[Arc<dyn DistributedLock>] {
        self.inner.locks()
    }
}

impl Blocking<RedLock> {
    /// The locks, in the order they are taken.
    pub fn locks(&self) -> &[Arc<dyn DistributedLock>] {
        self.inner.locks()
    }

    /// How many locks an acquisition must hold: `n / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.inner.quorum()
    }
}

pub(super) mod sealed_part {
    /// Only async locks and their blocking handles are parts of a composite.
    pub trait Part {}
}

/// What a [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock) of the blocking
/// client is made of: any async lock ([`DistributedLock`], `Box<dyn DistributedLock>`
/// included) or the blocking handle of one. Sealed.
pub trait CompositePart: sealed_part::Part {
    /// The async lock.
    type Lock: DistributedLock + 'static;

    /// The async lock, for the composite.
    fn into_lock(self) -> Self::Lock;
}

impl<L: DistributedLock + 'static> sealed_part::Part for L {}

impl<L: DistributedLock + 'static> CompositePart for L {
    type Lock = L;

    fn into_lock(self) -> L {
        self
    }
}

impl<L: DistributedLock + 'static> sealed_part::Part for Blocking<L> {}

impl<L: DistributedLock + 'static> CompositePart for Blocking<L> {
    type Lock = L;

    fn into_lock(self) -> L {
        self.inner
    }
}
