//! Client-side compositions of locks (docs/LAYOUT.md §6.7): [`MultiLock`] takes all of its
//! locks, [`RedLock`] a majority of locks on independent servers. Neither has a Redis layout
//! of its own: each lock is taken with its own protocol, so Java sees ordinary locks.
//!
//! Both run Redisson's `RedissonMultiLock.tryLock` loop ([`Composite::try_acquire`]); they
//! differ in how many locks must be held and how the wait is shared between the locks.

mod guard;
mod redlock;

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::lock::{AnyLock, LockGuard};
use crate::options::LockOptions;
use crate::owner::Owner;

pub use guard::MultiLockGuard;
pub use redlock::RedLock;

use guard::release_all;

/// What [`lock`](MultiLock::lock) waits per attempt, per lock (Redisson's `1500 * size`).
const BASE_WAIT_PER_LOCK: Duration = Duration::from_millis(1500);

/// The shortest per-lock wait of a RedLock (Redisson's `Math.max(remainTime / size, 1)`).
const MIN_LOCK_WAIT: Duration = Duration::from_millis(1);

/// The longest random pause between two rounds of an acquisition (not in Redisson): clients
/// that failed together do not retry in lockstep.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// A list of locks acquired together, all or nothing (Redisson's `RedissonMultiLock`,
/// `redisson.getMultiLock(lock1, lock2, ...)`).
///
/// The locks may be of any kind ([`AnyLock`]: the reentrant lock, the fair lock, either half
/// of a read-write lock) and on any clients and servers. The multi-lock writes nothing of its
/// own: each lock is acquired and released with its own protocol, so a Java service sees
/// ordinary locks, and a Java `RedissonMultiLock` over the same names excludes it.
///
/// # How it acquires (as Redisson)
///
/// - The locks are taken **in list order**, each by the same owner (the option's owner, or the
///   current task), each waiting at most what is left of the whole wait.
/// - If one is not available, every lock taken so far is released (and the releases awaited),
///   and, while the wait lasts, the acquisition starts again from the first lock; otherwise it
///   returns `None`. A caller never keeps part of the list, and two multi-locks over the same
///   locks in different orders cannot deadlock for longer than their waits.
/// - [`lock`](Self::lock) repeats such attempts until one succeeds, each waiting
///   `1500 ms × number of locks`; with a lease, a random wait in `[lease / 2, lease)` when the
///   lease is at most that, in `[1500 ms × n, lease)` otherwise (Redisson's synchronous rules;
///   its asynchronous `lockAsync` also raises the wait to 2 s for leases up to 2 s).
///
/// # Differences from Redisson
///
/// - **Leases.** With both a lease and a wait, Redisson takes each lock with a lease of twice
///   the wait, then shortens every key to the requested lease (`PEXPIRE`) once it holds them
///   all. This crate never changes a TTL behind a guard's back: each lock is taken with the
///   requested lease, so its guard knows until when it is valid. The locks taken first then
///   start their lease earlier: an acquisition succeeds only if every hold is still valid
///   when the last lock is taken (otherwise it releases them and tries again while the wait
///   lasts). Choose a lease well above the wait. Without a lease, each lock's watchdog renews
///   it while the guard lives, as in Redisson.
/// - **Errors.** Redisson counts an exception as "not acquired" and goes on; here an error
///   ends the acquisition (after releasing what it held) and is returned, as the single locks
///   do: a Redis that does not answer is reported, not waited out.
/// - **The end of the wait.** Redisson fails an acquisition whose wait ran out while it took
///   the last lock; here, holding every lock is success.
/// - **Bad input.** An empty list, or the same lock twice, is refused
///   ([`Error::InvalidArgument`]).
///
/// An acquisition whose future is dropped leaves nothing: the locks it holds are released in
/// the background, and a lock acquire in flight is undone by its own lock (each lock's
/// cancel safety).
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), redisson_sync::Error> {
/// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
/// use std::time::Duration;
/// use redisson_sync::MultiLock;
///
/// let transfer = MultiLock::new([client.lock("account:1"), client.lock("account:2")])?;
/// if let Some(guard) = transfer.try_lock_for(Duration::from_secs(2)).await? {
///     // ... both accounts are ours ...
///     guard.unlock().await?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    inner: Composite,
}

impl MultiLock {
    /// A multi-lock over `locks`, taken in this order.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty list, or for the same lock twice: two locks of
    /// one client with the same name, whatever their kinds (they share one Redis key). Two
    /// clients of one server naming the same key are not detected: such a multi-lock can
    /// never be acquired (the second waits for the first).
    pub fn new(locks: impl IntoIterator<Item = impl Into<AnyLock>>) -> Result<Self> {
        let locks: Vec<AnyLock> = locks.into_iter().map(Into::into).collect();
        if locks.is_empty() {
            return Err(Error::InvalidArgument(
                "a multi-lock needs at least one lock".into(),
            ));
        }
        let mut seen = HashSet::with_capacity(locks.len());
        for lock in &locks {
            if !seen.insert((client_id(lock), lock.name())) {
                return Err(Error::InvalidArgument(format!(
                    "lock {:?} of client {} appears twice in the multi-lock",
                    lock.name(),
                    client_id(lock)
                )));
            }
        }
        let quorum = locks.len();
        Ok(Self {
            inner: Composite {
                locks,
                quorum,
                red: false,
            },
        })
    }

    /// The locks, in the order they are taken.
    pub fn locks(&self) -> &[AnyLock] {
        &self.inner.locks
    }

    /// Acquires every lock, as long as it takes (Redisson's `lock()`): attempts of
    /// `1500 ms × n` each (see [How it acquires](Self#how-it-acquires-as-redisson)), the
    /// watchdog renewing each lock while the guard lives.
    ///
    /// # Errors
    ///
    /// The first error of a lock ([`Lock::lock`](crate::Lock::lock)'s errors:
    /// [`Error::Redis`], [`Error::Timeout`], [`Error::WrongType`], [`Error::Shutdown`], a
    /// kind's own such as [`Error::UpgradeRefused`]), after releasing the locks held.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future releases what it held, in the background.
    pub async fn lock(&self) -> Result<MultiLockGuard> {
        self.inner.lock(&LockOptions::new()).await
    }

    /// [`lock`](Self::lock) with the given lease and owner (Redisson's
    /// `lock(leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), plus [`Error::InvalidArgument`] for a lease under 1 ms.
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn lock_with_options(&self, options: &LockOptions) -> Result<MultiLockGuard> {
        self.inner.lock(options).await
    }

    /// One attempt at each lock, in order (Redisson's `tryLock()`): `None` as soon as one is
    /// not available (the ones taken are released first).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<Option<MultiLockGuard>> {
        self.inner
            .try_acquire(Duration::ZERO, &LockOptions::new())
            .await
    }

    /// Tries to acquire every lock within `wait` (Redisson's `tryLock(waitTime, unit)`);
    /// `None` when they could not all be held together within it, and then none is held.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        self.inner.try_acquire(wait, &LockOptions::new()).await
    }

    /// [`try_lock_for`](Self::try_lock_for) with the given lease and owner (Redisson's
    /// `tryLock(waitTime, leaseTime, unit)`, with the lease difference told in the
    /// [type's docs](Self#differences-from-redisson)). A zero `wait` makes one attempt at each
    /// lock.
    ///
    /// # Errors
    ///
    /// As [`lock_with_options`](Self::lock_with_options).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock_with_options(
        &self,
        wait: Duration,
        options: &LockOptions,
    ) -> Result<Option<MultiLockGuard>> {
        self.inner.try_acquire(wait, options).await
    }
}

/// The id of the client a lock belongs to.
fn client_id(lock: &AnyLock) -> &str {
    &lock.core().shared().id
}

/// The locks of a multi-lock or a RedLock and how many of them an acquisition must hold.
#[derive(Clone, Debug)]
struct Composite {
    locks: Vec<AnyLock>,
    /// All the locks (multi-lock), or a majority (RedLock).
    quorum: usize,
    /// A RedLock: each lock waits a share of the wait, and a lock whose server fails counts as
    /// one not acquired.
    red: bool,
}

impl Composite {
    /// Redisson's `lock(leaseTime)`: attempts until one succeeds.
    async fn lock(&self, options: &LockOptions) -> Result<MultiLockGuard> {
        // One owner for every attempt, also when the caller did not name one.
        let options = options
            .clone()
            .owner(options.explicit_owner().unwrap_or_else(Owner::current));
        let base =
            BASE_WAIT_PER_LOCK.saturating_mul(u32::try_from(self.locks.len()).unwrap_or(u32::MAX));
        loop {
            let wait = attempt_wait(base, options.lease_time());
            if let Some(guard) = self.try_acquire(wait, &options).await? {
                return Ok(guard);
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
    ) -> Result<Option<MultiLockGuard>> {
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
                return Ok(Some(MultiLockGuard::new(held, self.quorum)));
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

/// A failure of one lock's server, which a RedLock tolerates in a minority of its locks.
fn is_server_failure(e: &Error) -> bool {
    matches!(e, Error::Redis(_) | Error::Timeout { .. })
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
