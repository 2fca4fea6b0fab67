//! [`DistributedLock`]: the trait every single lock kind and [`AnyLock`] implement, for
//! generic code.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{AnyLock, LockGuard};
use crate::error::{Error, Result};
use crate::options::{LockOptions, Ttl};
use crate::owner::Owner;
use crate::with_lock::{WithLockOptions, run_section};

mod sealed {
    /// Only this crate's locks implement [`DistributedLock`](super::DistributedLock).
    pub trait Sealed {}
}

/// A lock of any kind, as a trait: [`Lock`](crate::Lock), [`FairLock`](crate::FairLock),
/// [`ReadLock`](crate::ReadLock), [`WriteLock`](crate::WriteLock),
/// [`FencedLock`](crate::FencedLock), [`SpinLock`](crate::SpinLock),
/// [`NonReentrantLock`](crate::NonReentrantLock),
/// [`NonReentrantFairLock`](crate::NonReentrantFairLock) and [`AnyLock`] implement it (and so
/// do references, `Box`es and `Arc`s of them), each method behaving as the type's inherent
/// method of the same name.
///
/// Two ways to write code that takes "a lock, whatever its kind":
///
/// - **`AnyLock`**, an enum: one concrete, cloneable type, no allocation per call, for a list
///   of locks or a lock picked at run time (`lock.into()` from any kind).
/// - **This trait**, for generic functions (`fn f(lock: &impl DistributedLock)`) and trait
///   objects (`Box<dyn DistributedLock>`, `Arc<dyn DistributedLock>`).
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
/// With the trait in scope, calls on a concrete type still reach the inherent methods.
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
/// let locks: Vec<Box<dyn DistributedLock>> =
///     vec![Box::new(client.lock("a")), Box::new(client.spin_lock("b"))];
/// for lock in &locks {
///     if let Some(guard) = lock.try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10)).await? {
///         guard.unlock().await?;
///     }
/// }
/// # Ok(())
/// # }
/// ```
pub trait DistributedLock: sealed::Sealed + Send + Sync {
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

    /// `true` when `owner` of this client holds the lock
    /// ([`Lock::is_held_by`](crate::Lock::is_held_by)).
    ///
    /// # Errors
    ///
    /// As the type's `is_held_by`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    fn is_held_by(&self, owner: Owner) -> BoxFuture<'_, Result<bool>>;

    /// How many times `owner` of this client holds the lock
    /// ([`Lock::hold_count`](crate::Lock::hold_count)).
    ///
    /// # Errors
    ///
    /// As the type's `hold_count`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    fn hold_count(&self, owner: Owner) -> BoxFuture<'_, Result<u64>>;

    /// The lock's remaining lease ([`Lock::remaining_ttl`](crate::Lock::remaining_ttl)).
    ///
    /// # Errors
    ///
    /// As the type's `remaining_ttl`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    fn remaining_ttl(&self) -> BoxFuture<'_, Result<Ttl>>;

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

/// Implements [`DistributedLock`] for a lock type through its [`LockCore`](super::LockCore):
/// `$core` is an expression of `self` giving it.
macro_rules! distributed_lock {
    ($ty:ty, |$this:ident| $core:expr) => {
        impl sealed::Sealed for $ty {}

        impl DistributedLock for $ty {
            fn name(&self) -> &str {
                let $this = self;
                $core.name()
            }

            fn lock_with_options<'a>(
                &'a self,
                options: &'a LockOptions,
            ) -> BoxFuture<'a, Result<LockGuard>> {
                let $this = self;
                Box::pin($core.lock(options))
            }

            fn try_lock_with_options<'a>(
                &'a self,
                wait: Duration,
                options: &'a LockOptions,
            ) -> BoxFuture<'a, Result<Option<LockGuard>>> {
                let $this = self;
                Box::pin($core.try_lock(wait, options))
            }

            fn force_unlock(&self) -> BoxFuture<'_, Result<bool>> {
                let $this = self;
                Box::pin($core.force_unlock())
            }

            fn is_locked(&self) -> BoxFuture<'_, Result<bool>> {
                let $this = self;
                Box::pin($core.is_locked())
            }

            fn is_held_by(&self, owner: Owner) -> BoxFuture<'_, Result<bool>> {
                let $this = self;
                Box::pin($core.is_held_by(owner))
            }

            fn hold_count(&self, owner: Owner) -> BoxFuture<'_, Result<u64>> {
                let $this = self;
                Box::pin($core.hold_count(owner))
            }

            fn remaining_ttl(&self) -> BoxFuture<'_, Result<Ttl>> {
                let $this = self;
                Box::pin($core.remaining_ttl())
            }
        }
    };
}

distributed_lock!(super::Lock, |l| &l.core);
distributed_lock!(super::FairLock, |l| &l.core);
distributed_lock!(super::ReadLock, |l| &l.core);
distributed_lock!(super::WriteLock, |l| &l.core);
distributed_lock!(super::FencedLock, |l| &l.core);
distributed_lock!(super::SpinLock, |l| &l.core);
distributed_lock!(super::NonReentrantLock, |l| &l.core);
distributed_lock!(super::NonReentrantFairLock, |l| &l.core);
distributed_lock!(AnyLock, |l| l.core());

/// Implements [`DistributedLock`] for a pointer to a lock (`&L`, `Box<L>`, `Arc<L>`), `dyn`
/// locks included, by forwarding to the lock.
macro_rules! forward_distributed_lock {
    ($ptr:ty) => {
        impl<L: DistributedLock + ?Sized> sealed::Sealed for $ptr {}

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

            fn is_held_by(&self, owner: Owner) -> BoxFuture<'_, Result<bool>> {
                (**self).is_held_by(owner)
            }

            fn hold_count(&self, owner: Owner) -> BoxFuture<'_, Result<u64>> {
                (**self).hold_count(owner)
            }

            fn remaining_ttl(&self) -> BoxFuture<'_, Result<Ttl>> {
                (**self).remaining_ttl()
            }
        }
    };
}

forward_distributed_lock!(&L);
forward_distributed_lock!(Box<L>);
forward_distributed_lock!(Arc<L>);
