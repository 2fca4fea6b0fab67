//! The semaphores, blocking: `Blocking<Semaphore>` with its [`Permits`] guard, and
//! `Blocking<PermitExpirableSemaphore>` with its renewing [`PermitGuard`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::handle::Blocking;
use super::runtime::Inner;
use crate::error::Result;
use crate::semaphore::{
    PermitExpirableSemaphore, PermitGuard as AsyncPermitGuard, PermitId, Permits as AsyncPermits,
    Semaphore,
};

impl Blocking<Semaphore> {
    fn permits(&self, permits: AsyncPermits) -> Permits {
        Permits {
            permits,
            rt: self.rt.clone(),
        }
    }

    /// The semaphore's name: its Redis key.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the number of permits if the semaphore does not exist yet (Redisson's
    /// `trySetPermits`); `true` when set.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_set_permits`];
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code (so for every
    /// method of this type).
    pub fn try_set_permits(&self, permits: i32) -> Result<bool> {
        self.rt
            .call("try_set_permits", self.inner.try_set_permits(permits))
    }

    /// [`try_set_permits`](Self::try_set_permits) with a time to live.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_set_permits_with_ttl`].
    pub fn try_set_permits_with_ttl(&self, permits: i32, ttl: Duration) -> Result<bool> {
        self.rt.call(
            "try_set_permits_with_ttl",
            self.inner.try_set_permits_with_ttl(permits, ttl),
        )
    }

    /// Adds `permits` (negative: removes); the new count (Redisson's `addPermits`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::add_permits`].
    pub fn add_permits(&self, permits: i32) -> Result<i64> {
        self.rt.call("add_permits", self.inner.add_permits(permits))
    }

    /// The permits available now (Redisson's `availablePermits`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.rt
            .call("available_permits", self.inner.available_permits())
    }

    /// Takes every available permit; how many (Redisson's `drainPermits`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::drain_permits`].
    pub fn drain_permits(&self) -> Result<i64> {
        self.rt.call("drain_permits", self.inner.drain_permits())
    }

    /// Acquires `permits`, blocking as long as it takes (Redisson's `acquire`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire`].
    pub fn acquire(&self, permits: u32) -> Result<Permits> {
        let got = self.rt.call("acquire", self.inner.acquire(permits))?;
        Ok(self.permits(got))
    }

    /// One attempt to acquire `permits` (Redisson's `tryAcquire`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire`].
    pub fn try_acquire(&self, permits: u32) -> Result<Option<Permits>> {
        let got = self
            .rt
            .call("try_acquire", self.inner.try_acquire(permits))?;
        Ok(got.map(|p| self.permits(p)))
    }

    /// Tries to acquire `permits`, blocking at most `wait` (Redisson's
    /// `tryAcquire(permits, waitTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire_for`].
    pub fn try_acquire_for(&self, permits: u32, wait: Duration) -> Result<Option<Permits>> {
        let got = self
            .rt
            .call("try_acquire_for", self.inner.try_acquire_for(permits, wait))?;
        Ok(got.map(|p| self.permits(p)))
    }

    /// Releases `permits` that were not taken through a [`Permits`] guard (Redisson's
    /// `release`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release`].
    pub fn release(&self, permits: u32) -> Result<()> {
        self.rt.call("release", self.inner.release(permits))
    }

    /// [`release`](Self::release) only if the semaphore exists (Redisson's
    /// `releaseIfExists`); `true` when released.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release_if_exists`].
    pub fn release_if_exists(&self, permits: u32) -> Result<bool> {
        self.rt
            .call("release_if_exists", self.inner.release_if_exists(permits))
    }
}

/// Permits of a [`Semaphore`](super::Semaphore) held by this guard: the async
/// [`Permits`](crate::Permits) with a blocking [`release`](Self::release). Dropping it
/// schedules the release on the client's runtime (completed by
/// [`blocking::Client::shutdown`](super::Client::shutdown)).
#[clippy::has_significant_drop]
#[must_use = "dropping Permits releases them at once"]
#[derive(Debug)]
pub struct Permits {
    permits: AsyncPermits,
    rt: Arc<Inner>,
}

impl Permits {
    /// How many permits this guard holds.
    pub fn count(&self) -> u32 {
        self.permits.count()
    }

    /// Releases the permits and blocks until Redis confirmed it.
    ///
    /// # Errors
    ///
    /// As [`Permits::release`](crate::Permits::release);
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code, the permits
    /// then dropped (their release scheduled).
    pub fn release(self) -> Result<()> {
        let Self { permits, rt } = self;
        rt.call("release", permits.release())
    }

    /// Keeps the permits taken: they are not given back.
    pub fn forget(self) {
        self.permits.forget();
    }

    /// The async guard.
    pub fn into_async(self) -> AsyncPermits {
        self.permits
    }
}

impl Blocking<PermitExpirableSemaphore> {
    /// The semaphore's name: its Redis key.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the number of permits if none was set yet (Redisson's `trySetPermits`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_set_permits`];
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code (so for every
    /// method of this type).
    pub fn try_set_permits(&self, permits: i32) -> Result<bool> {
        self.rt
            .call("try_set_permits", self.inner.try_set_permits(permits))
    }

    /// Sets the total number of permits (Redisson's `setPermits`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::set_permits`].
    pub fn set_permits(&self, permits: i32) -> Result<()> {
        self.rt.call("set_permits", self.inner.set_permits(permits))
    }

    /// Adds `permits` (negative: removes); the new count (Redisson's `addPermits`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::add_permits`].
    pub fn add_permits(&self, permits: i32) -> Result<i64> {
        self.rt.call("add_permits", self.inner.add_permits(permits))
    }

    /// The permits available now (Redisson's `availablePermits`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.rt
            .call("available_permits", self.inner.available_permits())
    }

    /// The total permits, available and acquired (Redisson's `getPermits`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::total_permits`].
    pub fn total_permits(&self) -> Result<i64> {
        self.rt.call("total_permits", self.inner.total_permits())
    }

    /// The permits acquired now (Redisson's `acquiredPermits`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::acquired_permits`].
    pub fn acquired_permits(&self) -> Result<i64> {
        self.rt
            .call("acquired_permits", self.inner.acquired_permits())
    }

    /// Acquires `permits` with an optional lease, blocking as long as it takes; their ids
    /// (Redisson's `acquire`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::acquire`].
    pub fn acquire(&self, permits: u32, lease: Option<Duration>) -> Result<Vec<PermitId>> {
        self.rt.call("acquire", self.inner.acquire(permits, lease))
    }

    /// One attempt to acquire `permits` (Redisson's `tryAcquire`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_acquire`].
    pub fn try_acquire(
        &self,
        permits: u32,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<PermitId>>> {
        self.rt
            .call("try_acquire", self.inner.try_acquire(permits, lease))
    }

    /// Tries to acquire `permits`, blocking at most `wait` (Redisson's
    /// `tryAcquire(permits, waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_acquire_for`].
    pub fn try_acquire_for(
        &self,
        permits: u32,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<PermitId>>> {
        self.rt.call(
            "try_acquire_for",
            self.inner.try_acquire_for(permits, wait, lease),
        )
    }

    /// Releases one permit; `false` when it was not held (Redisson's `tryRelease(id)`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_release`].
    pub fn try_release(&self, id: &PermitId) -> Result<bool> {
        self.rt.call("try_release", self.inner.try_release(id))
    }

    /// Releases every permit of `ids`, all or nothing (Redisson's `release(ids)`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::release`].
    pub fn release(&self, ids: &[PermitId]) -> Result<()> {
        self.rt.call("release", self.inner.release(ids))
    }

    /// Releases those of `ids` still held; how many (Redisson's `tryRelease(List)`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_release_many`].
    pub fn try_release_many(&self, ids: &[PermitId]) -> Result<u64> {
        self.rt
            .call("try_release_many", self.inner.try_release_many(ids))
    }

    /// Sets a permit's lease anew (`None`: no expiry); `false` when it is not held (Redisson's
    /// `updateLeaseTime`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::update_lease_time`].
    pub fn update_lease_time(&self, id: &PermitId, lease: Option<Duration>) -> Result<bool> {
        self.rt
            .call("update_lease_time", self.inner.update_lease_time(id, lease))
    }

    /// A permit's remaining lease (`None`: no expiry; Redisson's `getLeaseTime`).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::lease_time`].
    pub fn lease_time(&self, id: &PermitId) -> Result<Option<Duration>> {
        self.rt.call("lease_time", self.inner.lease_time(id))
    }

    fn guard(&self, guard: AsyncPermitGuard) -> PermitGuard {
        PermitGuard {
            guard,
            rt: self.rt.clone(),
        }
    }

    /// Acquires `permits` whose leases the client renews while the guard lives, blocking as
    /// long as it takes ([`PermitExpirableSemaphore::acquire_renewing`]).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::acquire_renewing`].
    pub fn acquire_renewing(&self, permits: u32, lease: Duration) -> Result<PermitGuard> {
        let guard = self.rt.call(
            "acquire_renewing",
            self.inner.acquire_renewing(permits, lease),
        )?;
        Ok(self.guard(guard))
    }

    /// One attempt at [`acquire_renewing`](Self::acquire_renewing).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_acquire_renewing`].
    pub fn try_acquire_renewing(
        &self,
        permits: u32,
        lease: Duration,
    ) -> Result<Option<PermitGuard>> {
        let guard = self.rt.call(
            "try_acquire_renewing",
            self.inner.try_acquire_renewing(permits, lease),
        )?;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// [`acquire_renewing`](Self::acquire_renewing), blocking at most `wait`.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_acquire_renewing_for`].
    pub fn try_acquire_renewing_for(
        &self,
        permits: u32,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<PermitGuard>> {
        let guard = self.rt.call(
            "try_acquire_renewing_for",
            self.inner.try_acquire_renewing_for(permits, wait, lease),
        )?;
        Ok(guard.map(|g| self.guard(g)))
    }
}

/// Renewed permits of a [`PermitExpirableSemaphore`](super::PermitExpirableSemaphore): the
/// async [`PermitGuard`](crate::PermitGuard) with a blocking [`release`](Self::release) and
/// [`lost`](Self::lost). Dropping it schedules the release on the client's runtime.
#[clippy::has_significant_drop]
#[must_use = "dropping the guard releases its permits"]
#[derive(Debug)]
pub struct PermitGuard {
    guard: AsyncPermitGuard,
    rt: Arc<Inner>,
}

impl PermitGuard {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// The ids of the permits.
    pub fn ids(&self) -> &[PermitId] {
        self.guard.ids()
    }

    /// The lease each renewal sets.
    pub fn lease(&self) -> Duration {
        self.guard.lease()
    }

    /// The instant until which the client vouches for the permits.
    pub fn valid_until(&self) -> Instant {
        self.guard.valid_until()
    }

    /// `true` once the permits are lost (released elsewhere, expired, unconfirmed).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Blocks until the permits are lost.
    ///
    /// # Errors
    ///
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code.
    pub fn lost(&self) -> Result<()> {
        self.rt.block("lost", self.guard.lost())
    }

    /// Blocks until the permits are lost or `timeout` has passed: `true` when lost.
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

    /// Stops the renewal and releases the permits, blocking until Redis confirmed it.
    ///
    /// # Errors
    ///
    /// As [`PermitGuard::release`](crate::PermitGuard::release);
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code, the guard
    /// then dropped (its release scheduled).
    pub fn release(self) -> Result<()> {
        let Self { guard, rt } = self;
        rt.call("release", guard.release())
    }

    /// Stops the renewal and keeps the permits: their ids, to release by hand.
    pub fn into_ids(self) -> Vec<PermitId> {
        self.guard.into_ids()
    }

    /// The async guard.
    pub fn into_async(self) -> AsyncPermitGuard {
        self.guard
    }
}
