//! What [`MultiLock`](crate::MultiLock) and [`RedLock`](crate::RedLock) share: a list of
//! locks taken with Redisson's `RedissonMultiLock.tryLock` loop ([`Composite::try_acquire`]),
//! and how many of them an acquisition must hold.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::lock::{Core, DistributedLock, LockGuard, Placement, release_all, sealed::Sealed};
use crate::options::LockOptions;
use crate::owner::Owner;
use crate::wait::OUTAGE_WARN_EVERY;

/// What [`lock`](MultiLock::lock) waits per attempt, per lock (Redisson's `1500 * size`).
const BASE_WAIT_PER_LOCK: Duration = Duration::from_millis(1500);

/// The shortest per-lock wait of a RedLock (Redisson's `Math.max(remainTime / size, 1)`).
const MIN_LOCK_WAIT: Duration = Duration::from_millis(1);

/// The longest random pause between two rounds of an acquisition (not in Redisson): clients
/// that failed together do not retry in lockstep.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// `locks` as shared trait objects.
pub(super) fn trait_objects<L: DistributedLock + 'static>(
    locks: impl IntoIterator<Item = L>,
) -> Vec<Arc<dyn DistributedLock>> {
    locks
        .into_iter()
        .map(|l| Arc::new(l) as Arc<dyn DistributedLock>)
        .collect()
}

/// Where each of `locks` lives; a composite among them (a `what` of composites) is refused.
pub(super) fn placements<'a>(
    locks: &'a [Arc<dyn DistributedLock>],
    what: &str,
) -> Result<Vec<Placement<'a>>> {
    locks
        .iter()
        .map(|lock| {
            lock.placement().ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "a {what} takes single locks, not a composite ({:?})",
                    lock.name()
                ))
            })
        })
        .collect()
}

/// The locks of a multi-lock or a RedLock and how many of them an acquisition must hold.
#[derive(Clone)]
pub(crate) struct Composite {
    pub(super) locks: Vec<Arc<dyn DistributedLock>>,
    /// All the locks (multi-lock), or a majority (RedLock).
    pub(super) quorum: usize,
    /// A RedLock: each lock waits a share of the wait, and a lock whose server fails counts as
    /// one not acquired.
    red: bool,
    /// The names of the locks, for guards and errors: the distinct ones, in order.
    name: Arc<str>,
}

impl fmt::Debug for Composite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(if self.red { "RedLock" } else { "MultiLock" })
            .field("name", &self.name)
            .field("locks", &self.locks.len())
            .field("quorum", &self.quorum)
            .finish()
    }
}

impl Composite {
    pub(super) fn new(locks: Vec<Arc<dyn DistributedLock>>, quorum: usize, red: bool) -> Self {
        let mut names: Vec<&str> = Vec::with_capacity(locks.len());
        for lock in &locks {
            if !names.contains(&lock.name()) {
                names.push(lock.name());
            }
        }
        let name = names.join(", ").into();
        Self {
            locks,
            quorum,
            red,
            name,
        }
    }

    /// Redisson's `lock(leaseTime)`: attempts until one succeeds.
    async fn acquire(&self, options: &LockOptions) -> Result<LockGuard> {
        // One owner for every attempt, also when the caller did not name one.
        let options = options
            .clone()
            .owner(options.explicit_owner().unwrap_or_else(Owner::current));
        let base =
            BASE_WAIT_PER_LOCK.saturating_mul(u32::try_from(self.locks.len()).unwrap_or(u32::MAX));
        let mut warned: Option<Instant> = None;
        loop {
            let wait = attempt_wait(base, options.lease_time());
            match self.try_acquire(wait, &options).await {
                Ok(Some(guard)) => return Ok(guard),
                Ok(None) => {}
                // Its servers unreachable for a whole round: an untimed wait keeps trying, as
                // each lock's own waits do (crate::wait), with a warning every few rounds.
                Err(e @ Error::Connection { .. }) => {
                    if warned.is_none_or(|at| at.elapsed() >= OUTAGE_WARN_EVERY) {
                        warned = Some(Instant::now());
                        tracing::warn!(lock = %self.name, error = %e, "Redis unreachable while waiting; retrying");
                    } else {
                        tracing::debug!(lock = %self.name, error = %e, "Redis unreachable while waiting; retrying");
                    }
                }
                Err(e) => return Err(e),
            }
            tokio::time::sleep(random_upto(wait.min(MAX_RETRY_PAUSE))).await;
        }
    }

    /// Redisson's `RedissonMultiLock.tryLock(waitTime, leaseTime, unit)`: rounds over the
    /// locks in order until one holds the quorum or the wait runs out. A zero `wait` makes one
    /// round of single attempts.
    async fn try_acquire(
        &self,
        wait: Duration,
        options: &LockOptions,
    ) -> Result<Option<LockGuard>> {
        let options = options
            .clone()
            .owner(options.explicit_owner().unwrap_or_else(Owner::current));
        let single = wait.is_zero();
        // A wait too long for the clock has no deadline.
        let deadline = Instant::now().checked_add(wait);
        let remaining = || {
            deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            })
        };
        let n = self.locks.len();
        let spare = n - self.quorum;
        loop {
            let share = if self.red {
                (remaining() / u32::try_from(n).unwrap_or(u32::MAX)).max(MIN_LOCK_WAIT)
            } else {
                remaining()
            };
            let mut held: Vec<LockGuard> = Vec::with_capacity(n);
            let mut failed = 0;
            let mut contended = false;
            let mut server_error = None;
            for (i, lock) in self.locks.iter().enumerate() {
                let lock_wait = if single {
                    Duration::ZERO
                } else {
                    let left = remaining();
                    if i > 0 && left.is_zero() {
                        // Out of time: what is held decides.
                        break;
                    }
                    share.min(left)
                };
                match lock.try_lock_with_options(lock_wait, &options).await {
                    Ok(Some(guard)) => held.push(guard),
                    Ok(None) => {
                        failed += 1;
                        contended = true;
                    }
                    Err(e) if self.red && is_server_failure(&e) => {
                        tracing::debug!(lock = lock.name(), error = %e, "RedLock: a lock's server failed");
                        failed += 1;
                        server_error.get_or_insert(e);
                    }
                    Err(e) => {
                        release_quietly(held).await;
                        return Err(e);
                    }
                }
                if failed > spare {
                    break;
                }
            }
            let valid = held.iter().filter(|g| !g.is_lost()).count();
            if valid >= self.quorum {
                return Ok(Some(LockGuard::of_parts(
                    held,
                    self.quorum,
                    self.name.clone(),
                )));
            }
            release_quietly(held).await;
            if single || remaining().is_zero() {
                return match server_error {
                    // Nothing was held by anyone else: the servers are the reason.
                    Some(e) if !contended => Err(e),
                    _ => Ok(None),
                };
            }
            tokio::time::sleep(random_upto(remaining().min(MAX_RETRY_PAUSE))).await;
        }
    }
}

impl Core for Composite {
    fn name(&self) -> &str {
        &self.name
    }

    fn placement(&self) -> Option<Placement<'_>> {
        None
    }

    async fn lock(&self, options: &LockOptions) -> Result<LockGuard> {
        self.acquire(options).await
    }

    async fn try_lock(&self, wait: Duration, options: &LockOptions) -> Result<Option<LockGuard>> {
        self.try_acquire(wait, options).await
    }

    async fn force_unlock(&self) -> Result<bool> {
        let all = futures_util::future::join_all(self.locks.iter().map(|l| l.force_unlock()));
        let mut deleted = false;
        for result in all.await {
            deleted |= result?;
        }
        Ok(deleted)
    }

    async fn is_locked(&self) -> Result<bool> {
        let all = futures_util::future::join_all(self.locks.iter().map(|l| l.is_locked()));
        let mut locked = 0;
        for result in all.await {
            locked += usize::from(result?);
        }
        // An acquisition needs `quorum` free locks.
        Ok(self.locks.len() - locked < self.quorum)
    }
}

/// A failure of one lock's server, which a RedLock tolerates in a minority of its locks.
fn is_server_failure(e: &Error) -> bool {
    matches!(
        e,
        Error::Redis(_) | Error::Connection { .. } | Error::Timeout { .. }
    )
}

/// Releases the holds of a failed round, waiting for the releases; errors are only logged.
async fn release_quietly(held: Vec<LockGuard>) {
    if held.is_empty() {
        return;
    }
    for result in release_all(held).await {
        if let Err(e) = result {
            tracing::debug!(error = %e, "releasing a lock of a failed multi-lock round");
        }
    }
}

/// The wait of one attempt of `lock()` (Redisson's synchronous `lock(leaseTime)`): `base`
/// without a lease; with one, random in `[lease / 2, lease)` when it is at most `base`, in
/// `[base, lease)` otherwise. At least 1 ms, so that attempts wait.
fn attempt_wait(base: Duration, lease: Option<Duration>) -> Duration {
    let wait = match lease {
        None => base,
        Some(lease) if lease <= base => random_in(lease / 2, lease),
        Some(lease) => random_in(base, lease),
    };
    wait.max(MIN_LOCK_WAIT)
}

/// A random duration in `[low, high)` (`low` when the range is empty), to the millisecond.
fn random_in(low: Duration, high: Duration) -> Duration {
    low + random_upto(high.saturating_sub(low).saturating_sub(MIN_LOCK_WAIT))
}

/// A random duration in `[0, max]`, to the millisecond.
fn random_upto(max: Duration) -> Duration {
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    if max_ms == 0 {
        return Duration::ZERO;
    }
    let random = uuid::Uuid::new_v4().as_u64_pair().0;
    Duration::from_millis(random % max_ms.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn lock_waits_follow_redissons_rules() {
        let base = 3 * BASE_WAIT_PER_LOCK;
        assert_eq!(attempt_wait(base, None), base);
        for _ in 0..200 {
            let w = attempt_wait(base, Some(2000 * MS));
            assert!((1000 * MS..2000 * MS).contains(&w), "{w:?}");
            let w = attempt_wait(base, Some(10_000 * MS));
            assert!((base..10_000 * MS).contains(&w), "{w:?}");
            assert_eq!(attempt_wait(base, Some(MS)), MS);
        }
    }

    #[test]
    fn random_durations_stay_in_range() {
        assert_eq!(random_upto(Duration::ZERO), Duration::ZERO);
        assert_eq!(random_in(5 * MS, 5 * MS), 5 * MS);
        for _ in 0..200 {
            assert!(random_upto(10 * MS) <= 10 * MS);
            let r = random_in(5 * MS, 8 * MS);
            assert!((5 * MS..8 * MS).contains(&r), "{r:?}");
        }
    }
}
