//! The blocking [`LockGuard`]: an async guard of any lock kind, whose `unlock` blocks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::runtime::Inner;
use crate::error::Result;
use crate::lock::LockGuard as AsyncGuard;
use crate::owner::Owner;

/// A held lock of any kind, from a blocking acquisition: the async
/// [`LockGuard`](crate::LockGuard) with blocking [`unlock`](Self::unlock) and
/// [`lost`](Self::lost).
///
/// # Release on drop
///
/// Dropping the guard schedules the release on the client's runtime and returns at once, on
/// any thread, also while unwinding: the lock is free shortly after the drop, not at it (use
/// [`unlock`](Self::unlock) when the next step depends on it).
/// [`blocking::Client::shutdown`](super::Client::shutdown) completes every release scheduled
/// before it, and so does dropping the client's last handle.
///
/// Validity, parts and every query are the async guard's: see
/// [`LockGuard`](crate::LockGuard).
#[clippy::has_significant_drop]
#[must_use = "if unused the lock will immediately be released"]
#[derive(Debug)]
pub struct LockGuard {
    guard: AsyncGuard,
    rt: Arc<Inner>,
}

impl LockGuard {
    pub(super) fn new(guard: AsyncGuard, rt: Arc<Inner>) -> Self {
        Self { guard, rt }
    }

    /// The lock's name: its Redis key (a composite's: the names of its locks).
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// The owner holding the lock through this guard: the thread that acquired it, unless the
    /// options named another.
    pub fn owner(&self) -> Owner {
        self.guard.owner()
    }

    /// The holder as Redis stores it: the lock hash's field, `<client id>:<owner id>` (see
    /// [`LockGuard::holder`](crate::LockGuard::holder)).
    pub fn holder(&self) -> &str {
        self.guard.holder()
    }

    /// The fencing token of this hold (a [`FencedLock`](crate::FencedLock)'s), else `None`.
    pub fn token(&self) -> Option<u64> {
        self.guard.token()
    }

    /// The explicit lease, or `None` when the watchdog renews the lock.
    pub fn lease(&self) -> Option<Duration> {
        self.guard.lease()
    }

    /// The instant until which the client vouches for the hold
    /// ([`LockGuard::valid_until`](crate::LockGuard::valid_until)).
    pub fn valid_until(&self) -> Instant {
        self.guard.valid_until()
    }

    /// `true` once the hold is lost ([`LockGuard::is_lost`](crate::LockGuard::is_lost)).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Blocks until the hold is lost ([`LockGuard::lost`](crate::LockGuard::lost)); see
    /// [`lost_timeout`](Self::lost_timeout) for a bounded wait.
    ///
    /// # Errors
    ///
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code.
    pub fn lost(&self) -> Result<()> {
        self.rt.block("lost", self.guard.lost())
    }

    /// Blocks until the hold is lost or `timeout` has passed: `true` when it was lost.
    ///
    /// # Errors
    ///
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code.
    pub fn lost_timeout(&self, timeout: Duration) -> Result<bool> {
        self.rt.block("lost_timeout", async {
            tokio::time::timeout(timeout, self.guard.lost())
                .await
                .is_ok()
        })
    }

    /// The parts of the acquisition, as async guards (read them; release through this guard):
    /// see [`LockGuard::parts`](crate::LockGuard::parts).
    pub fn parts(&self) -> &[AsyncGuard] {
        self.guard.parts()
    }

    /// How many parts must stay valid ([`LockGuard::needed`](crate::LockGuard::needed)).
    pub fn needed(&self) -> usize {
        self.guard.needed()
    }

    /// The parts, for whoever wants to release them one by one.
    pub fn into_parts(self) -> Vec<Self> {
        let rt = self.rt;
        self.guard
            .into_parts()
            .into_iter()
            .map(|guard| Self::new(guard, rt.clone()))
            .collect()
    }

    /// Releases the hold and blocks until Redis confirmed it (Redisson's `unlock()`; see
    /// [`LockGuard::unlock`](crate::LockGuard::unlock), whose errors it returns).
    ///
    /// # Errors
    ///
    /// As [`LockGuard::unlock`](crate::LockGuard::unlock);
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code, the guard
    /// then dropped (its release scheduled, as on drop).
    pub fn unlock(self) -> Result<()> {
        let Self { guard, rt } = self;
        rt.call("unlock", guard.unlock())
    }

    /// Stops renewal and keeps the lock without releasing it: it stays held until its lease
    /// expires ([`LockGuard::forget`](crate::LockGuard::forget)).
    pub fn forget(self) {
        self.guard.forget();
    }

    /// The async guard, e.g. to release it from async code. Its renewal and its release on
    /// drop run on the blocking client's runtime: keep a blocking handle of the client while
    /// it lives.
    pub fn into_async(self) -> AsyncGuard {
        self.guard
    }

    /// The async guard (its `lost()` future, for a `select!` in async code).
    pub fn as_async(&self) -> &AsyncGuard {
        &self.guard
    }
}
