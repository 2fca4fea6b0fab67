//! [`Blocking`]: the one handle type of the blocking API, an async primitive and the runtime
//! its calls block on. Its methods come from what the primitive is (`lock.rs`: any
//! [`DistributedLock`](crate::lock::DistributedLock); `object.rs`: any
//! [`Expirable`](crate::object::Expirable); one impl block per semaphore and for the latch).

use std::fmt;
use std::sync::Arc;

use super::runtime::Inner;

/// A primitive of the async API made blocking: every method of `P` as a call that blocks the
/// calling thread until it is done, on the runtime of the [`blocking::Client`](super::Client)
/// that made it.
///
/// One type for every primitive, written once over what the primitive is:
///
/// - for any lock (`P:` [`DistributedLock`](crate::DistributedLock)): the lock surface
///   (`lock`, `try_lock`, `try_lock_for`, the lease and options forms, `with_lock`,
///   `with_lock_options`, `try_with_lock`, `is_locked`, `force_unlock`, `name`), each
///   acquisition returning a blocking [`LockGuard`](super::LockGuard) and, unless the options
///   name one, taken for the calling thread's [`Owner`](crate::Owner);
/// - for any primitive (`P:` [`Expirable`](crate::Expirable)): the object and expiry methods
///   (`delete`, `is_exists`, `expire` and its conditional forms, `expire_at`, `clear_expire`,
///   `remaining_ttl`, `expire_time`);
/// - for the kinds that count holds per owner: `is_held_by`, `hold_count`; and each kind's own
///   methods (a fenced lock's tokens, a read-write lock's halves, the semaphores' permits, the
///   latch's count).
///
/// The aliases name the usual ones: [`Lock`](super::Lock) is `Blocking<redisson_sync::Lock>`,
/// [`Semaphore`](super::Semaphore) `Blocking<redisson_sync::Semaphore>`, and so on. A lock of
/// any kind picked at run time is a `Blocking<Box<dyn DistributedLock>>`
/// ([`boxed`](Self::boxed)).
///
/// Cheap to clone when `P` is (every primitive of the crate is); `Send + Sync`: share it
/// between threads.
pub struct Blocking<P> {
    pub(super) inner: P,
    pub(super) rt: Arc<Inner>,
}

impl<P> Blocking<P> {
    pub(super) fn new(inner: P, rt: Arc<Inner>) -> Self {
        Self { inner, rt }
    }

    /// The async primitive behind this handle, for async code (its background work runs on
    /// the blocking client's runtime, which lives as long as a blocking handle does).
    pub fn as_async(&self) -> &P {
        &self.inner
    }

    /// The async primitive behind this handle (see [`as_async`](Self::as_async)). Keep a
    /// blocking handle of the client (the [`Client`](super::Client) itself, say) while using
    /// it: when the last one is dropped the client shuts down and its runtime stops.
    pub fn into_async(self) -> P {
        self.inner
    }
}

impl<P: Clone> Clone for Blocking<P> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            rt: self.rt.clone(),
        }
    }
}

impl<P: fmt::Debug> fmt::Debug for Blocking<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Blocking").field(&self.inner).finish()
    }
}
