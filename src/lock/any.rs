//! [`AnyLock`]: one value for a lock of any kind.

use std::future::Future;
use std::time::Duration;

use super::{
    FairLock, FencedLock, Lock, LockCore, LockGuard, NonReentrantFairLock, NonReentrantLock,
    ReadLock, SpinLock, WriteLock,
};
use crate::error::{Error, Result};
use crate::options::{LockOptions, Ttl};
use crate::owner::Owner;
use crate::with_lock::WithLockOptions;

/// A lock of any kind: one type for code that takes "a lock" whatever its kind (a list of
/// locks to take together, a conformance agent mapping a kind name to a lock).
///
/// Every kind has the same API ([`Lock`]'s); `AnyLock` offers it once, and each method behaves
/// as the wrapped kind's (see each kind's own docs for what differs: a fair lock's queue, the
/// read half's shared holds, the write half's refused upgrade). For generic functions and
/// trait objects, the [`DistributedLock`](crate::DistributedLock) trait offers the same
/// (`AnyLock` implements it too).
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), redisson_sync::Error> {
/// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
/// use redisson_sync::AnyLock;
///
/// let locks: Vec<AnyLock> = vec![
///     client.lock("order:42").into(),
///     client.fair_lock("jobs").into(),
///     client.rw_lock("device:7").read_lock().into(),
/// ];
/// for lock in &locks {
///     let guard = lock.lock().await?;
///     println!("{} held", guard.name());
///     guard.unlock().await?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyLock {
    /// A reentrant lock ([`Client::lock`](crate::Client::lock)).
    Lock(Lock),
    /// A fair lock ([`Client::fair_lock`](crate::Client::fair_lock)).
    Fair(FairLock),
    /// The read half of a read-write lock.
    Read(ReadLock),
    /// The write half of a read-write lock.
    Write(WriteLock),
    /// A fenced lock ([`Client::fenced_lock`](crate::Client::fenced_lock)); its guards carry
    /// tokens.
    Fenced(FencedLock),
    /// A spin lock ([`Client::spin_lock`](crate::Client::spin_lock)).
    Spin(SpinLock),
    /// A non-reentrant lock ([`Client::non_reentrant_lock`](crate::Client::non_reentrant_lock)).
    NonReentrant(NonReentrantLock),
    /// A non-reentrant fair lock
    /// ([`Client::non_reentrant_fair_lock`](crate::Client::non_reentrant_fair_lock)).
    NonReentrantFair(NonReentrantFairLock),
}

impl From<Lock> for AnyLock {
    fn from(lock: Lock) -> Self {
        Self::Lock(lock)
    }
}

impl From<FairLock> for AnyLock {
    fn from(lock: FairLock) -> Self {
        Self::Fair(lock)
    }
}

impl From<ReadLock> for AnyLock {
    fn from(lock: ReadLock) -> Self {
        Self::Read(lock)
    }
}

impl From<WriteLock> for AnyLock {
    fn from(lock: WriteLock) -> Self {
        Self::Write(lock)
    }
}

impl From<FencedLock> for AnyLock {
    fn from(lock: FencedLock) -> Self {
        Self::Fenced(lock)
    }
}

impl From<SpinLock> for AnyLock {
    fn from(lock: SpinLock) -> Self {
        Self::Spin(lock)
    }
}

impl From<NonReentrantLock> for AnyLock {
    fn from(lock: NonReentrantLock) -> Self {
        Self::NonReentrant(lock)
    }
}

impl From<NonReentrantFairLock> for AnyLock {
    fn from(lock: NonReentrantFairLock) -> Self {
        Self::NonReentrantFair(lock)
    }
}

impl AnyLock {
    pub(crate) fn core(&self) -> &LockCore {
        match self {
            Self::Lock(l) => &l.core,
            Self::Fair(l) => &l.core,
            Self::Read(l) => &l.core,
            Self::Write(l) => &l.core,
            Self::Fenced(l) => &l.core,
            Self::Spin(l) => &l.core,
            Self::NonReentrant(l) => &l.core,
            Self::NonReentrantFair(l) => &l.core,
        }
    }

    /// The lock's name: its Redis key.
    pub fn name(&self) -> &str {
        self.core().name()
    }

    /// [`Lock::lock`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `lock`.
    ///
    /// # Cancel safety
    ///
    /// As the wrapped kind's `lock`: cancel safe.
    pub async fn lock(&self) -> Result<LockGuard> {
        self.core().lock(&LockOptions::new()).await
    }

    /// [`Lock::lock_with_options`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `lock_with_options`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn lock_with_options(&self, options: &LockOptions) -> Result<LockGuard> {
        self.core().lock(options).await
    }

    /// [`Lock::try_lock`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `try_lock`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.core()
            .try_lock(Duration::ZERO, &LockOptions::new())
            .await
    }

    /// [`Lock::try_lock_for`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `try_lock_for`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.core().try_lock(wait, &LockOptions::new()).await
    }

    /// [`Lock::try_lock_with_options`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `try_lock_with_options`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn try_lock_with_options(
        &self,
        wait: Duration,
        options: &LockOptions,
    ) -> Result<Option<LockGuard>> {
        self.core().try_lock(wait, options).await
    }

    /// [`Lock::lock_with_lease`], for the wrapped kind (Redisson's `lock(leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `lock_with_lease`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.core().lock(&LockOptions::new().lease(lease)).await
    }

    /// [`Lock::try_lock_with_lease`], for the wrapped kind (Redisson's
    /// `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `try_lock_with_lease`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.core()
            .try_lock(wait, &LockOptions::new().lease(lease))
            .await
    }

    /// [`Lock::with_lock`], for the wrapped kind: runs the section `f` under the lock and
    /// always releases it (on success, error, panic and cancellation).
    ///
    /// # Errors
    ///
    /// As [`Lock::with_lock`].
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::with_lock`]: dropping the future drops the section and schedules the release.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use redisson_sync::{AnyLock, Error};
    ///
    /// let lock: AnyLock = client.rw_lock("config").write_lock().into();
    /// lock.with_lock(|| async { Ok::<_, Error>(()) }).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn with_lock<F, Fut, T, E>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        self.core().with_lock(&WithLockOptions::new(), f).await
    }

    /// [`Lock::with_lock_options`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As [`Lock::with_lock_options`].
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::with_lock`].
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
        self.core().with_lock(options, f).await
    }

    /// [`Lock::try_with_lock`], for the wrapped kind: `Ok(None)` when the lock did not come
    /// free within `wait` (the section not run).
    ///
    /// # Errors
    ///
    /// As [`Lock::try_with_lock`].
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::with_lock`].
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
        self.core().try_with_lock(wait, options, f).await
    }

    /// [`Lock::force_unlock`], for the wrapped kind (the halves of a read-write lock delete
    /// it only in their own mode).
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `force_unlock`.
    ///
    /// # Cancel safety
    ///
    /// A dropped call may or may not have deleted the lock.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.core().force_unlock().await
    }

    /// [`Lock::is_locked`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `is_locked`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    pub async fn is_locked(&self) -> Result<bool> {
        self.core().is_locked().await
    }

    /// [`Lock::is_held_by`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `is_held_by`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        self.core().is_held_by(owner).await
    }

    /// [`Lock::hold_count`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `hold_count`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    pub async fn hold_count(&self, owner: Owner) -> Result<u64> {
        self.core().hold_count(owner).await
    }

    /// [`Lock::remaining_ttl`], for the wrapped kind.
    ///
    /// # Errors
    ///
    /// As the wrapped kind's `remaining_ttl`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    pub async fn remaining_ttl(&self) -> Result<Ttl> {
        self.core().remaining_ttl().await
    }
}
