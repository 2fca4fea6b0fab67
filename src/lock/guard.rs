//! [`LockGuard`]: what every lock's acquisition returns, one hold of a single lock or the holds
//! of a [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use crate::error::Result;
use crate::hold::Held;
use crate::observe;
use crate::owner::Owner;

/// A held lock of any kind: one hold of one owner on a single lock ([`Lock`](crate::Lock),
/// [`FairLock`](crate::FairLock), either half of an [`RwLock`](crate::RwLock),
/// [`FencedLock`](crate::FencedLock), [`SpinLock`](crate::SpinLock), the non-reentrant locks,
/// [`TokenLock`](crate::TokenLock)), or the holds of one acquisition of a
/// [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock) (see [Parts](Self#parts)).
///
/// Like tokio's `OwnedMutexGuard`, the guard owns what it needs (`'static`, `Send + Sync`): it
/// can be moved to another task and released there. It does not lock anything in-process.
///
/// # Validity
///
/// The client vouches for the hold until [`valid_until`](Self::valid_until): the send time of
/// the last confirmed acquire or renewal plus the lease (Redis cannot have let the lock expire
/// earlier). The watchdog moves it forward while it renews the lock; an explicit lease ends
/// there. From shortly before that instant (a drift margin of 1 % of the lease plus 2 ms), or
/// as soon as Redis shows the hold gone, the guard is [lost](Self::is_lost): another holder may
/// have the lock. A partition that keeps every renewal from being confirmed is reported at that
/// instant, whatever the network does. Once lost, a guard stays lost, and a renewal confirmed
/// after that (its reply held up past the deadline) does not move `valid_until` again.
/// `valid_until` and `is_lost` read the clock, so they tell the truth even right after the
/// runtime was blocked (a sync call in a task) past the lease, when no timer has fired yet.
///
/// # Release on drop
///
/// Dropping the guard stops its lease renewal at once and schedules the release in a
/// background task of the client; it returns immediately, never blocks and never panics (also
/// on a thread outside the runtime, and during unwinding; there is no poisoning). The lock
/// becomes free shortly after the drop, not at it: use [`unlock`](Self::unlock) when the next
/// step depends on the lock being free. Call [`Client::shutdown`](crate::Client::shutdown)
/// before the runtime ends, or releases still scheduled are lost and those locks stay held
/// until their lease expires.
///
/// # Parts
///
/// The guard of a [`MultiLock`](crate::MultiLock) holds one guard per lock, and a
/// [`RedLock`](crate::RedLock)'s one per lock it got (at least a majority): its
/// [`parts`](Self::parts), each renewed by its own client's watchdog (or ending with the
/// explicit lease). It answers for them as a whole: it is valid while at least
/// [`needed`](Self::needed) of its parts are (all of them for a multi-lock, a majority of all
/// the locks for a RedLock), and [`unlock`](Self::unlock) releases them all at once. The guard
/// of a single lock is its own one part.
#[clippy::has_significant_drop]
#[must_use = "if unused the lock will immediately be released"]
#[derive(Debug)]
pub struct LockGuard {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    /// One hold of a single lock.
    One {
        held: Held,
        /// Counts the hold in the metrics while the guard lives.
        _metric: observe::Hold,
    },
    /// The guards of a composite acquisition, in the order of its locks.
    Parts {
        parts: Vec<LockGuard>,
        /// How many of them must be valid for the acquisition to be.
        needed: usize,
        /// The composite's name.
        name: Arc<str>,
    },
}

impl LockGuard {
    /// The guard of one hold of a single lock.
    pub(crate) fn new(held: Held) -> Self {
        let metric = held.metric();
        Self {
            inner: Inner::One {
                held,
                _metric: metric,
            },
        }
    }

    /// The guard of a composite acquisition: `parts` in the order of its locks, at least
    /// `needed` of them valid.
    pub(crate) fn of_parts(parts: Vec<Self>, needed: usize, name: Arc<str>) -> Self {
        debug_assert!(needed >= 1 && needed <= parts.len());
        Self {
            inner: Inner::Parts {
                parts,
                needed,
                name,
            },
        }
    }

    /// The lock's name: its Redis key (a composite's: the names of its locks).
    pub fn name(&self) -> &str {
        match &self.inner {
            Inner::One { held, .. } => held.name(),
            Inner::Parts { name, .. } => name,
        }
    }

    /// The owner holding the lock through this guard (the same for every part).
    pub fn owner(&self) -> Owner {
        match &self.inner {
            Inner::One { held, .. } => held.owner(),
            Inner::Parts { parts, .. } => parts[0].owner(),
        }
    }

    /// The holder as Redis stores it: the lock hash's field (`<client id>:<owner id>`, the
    /// write half's `<client id>:<owner id>:write`), or the value of a
    /// [`TokenLock`](crate::TokenLock)'s key; a composite's first part's.
    pub fn holder(&self) -> &str {
        match &self.inner {
            Inner::One { held, .. } => held.holder(),
            Inner::Parts { parts, .. } => parts[0].holder(),
        }
    }

    /// The fencing token of this hold: for a [`FencedLock`](crate::FencedLock), the value
    /// of its counter that this acquisition made (every acquisition, re-entries included,
    /// gets a higher one); `None` for the other kinds and for composites. Pass it to the
    /// protected resource, which refuses writes with a token lower than one it has seen.
    pub fn token(&self) -> Option<u64> {
        match &self.inner {
            Inner::One { held, .. } => held.token(),
            Inner::Parts { .. } => None,
        }
    }

    /// The explicit lease, or `None` when the watchdog renews the lock.
    pub fn lease(&self) -> Option<Duration> {
        match &self.inner {
            Inner::One { held, .. } => held.lease_time(),
            Inner::Parts { parts, .. } => parts[0].lease(),
        }
    }

    /// The parts of this acquisition, in the order of the locks: a
    /// [`RedLock`](crate::RedLock)'s guard has one per lock it acquired, which may be fewer
    /// than its locks; the guard of a single lock is its own one part.
    pub fn parts(&self) -> &[Self] {
        match &self.inner {
            Inner::One { .. } => std::slice::from_ref(self),
            Inner::Parts { parts, .. } => parts,
        }
    }

    /// The parts, for whoever wants to release them one by one.
    pub fn into_parts(self) -> Vec<Self> {
        match self.inner {
            Inner::Parts { parts, .. } => parts,
            one => vec![Self { inner: one }],
        }
    }

    /// How many parts must stay valid for the acquisition to be valid: all of them for a
    /// [`MultiLock`](crate::MultiLock), the quorum (`n / 2 + 1` of its `n` locks) for a
    /// [`RedLock`](crate::RedLock), 1 for a single lock.
    pub fn needed(&self) -> usize {
        match &self.inner {
            Inner::One { .. } => 1,
            Inner::Parts { needed, .. } => *needed,
        }
    }

    /// How many parts may be lost before the acquisition is.
    fn spare(&self) -> usize {
        self.parts().len() - self.needed()
    }

    /// The instant until which the client vouches for this hold: the send time of the last
    /// confirmed acquire or renewal plus the lease; for a composite, the instant at which
    /// fewer than [`needed`](Self::needed) of its parts would still be valid. See
    /// [Validity](Self#validity).
    pub fn valid_until(&self) -> std::time::Instant {
        match &self.inner {
            Inner::One { held, .. } => held.valid_until(),
            Inner::Parts { parts, .. } => {
                let mut until: Vec<std::time::Instant> =
                    parts.iter().map(Self::valid_until).collect();
                until.sort_unstable();
                until[self.spare()]
            }
        }
    }

    /// `true` once the hold is lost: Redis showed it gone (expired, force-unlocked, deleted,
    /// taken over), or no acquire or renewal was confirmed within its lease (see
    /// [Validity](Self#validity)); for an explicit lease, from shortly before it ends. A
    /// composite is lost once more parts are lost than it can spare.
    pub fn is_lost(&self) -> bool {
        match &self.inner {
            Inner::One { held, .. } => held.is_lost(),
            Inner::Parts { parts, .. } => {
                parts.iter().filter(|g| g.is_lost()).count() > self.spare()
            }
        }
    }

    /// Resolves when the hold is lost (see [`is_lost`](Self::is_lost)): at the latest shortly
    /// before [`valid_until`](Self::valid_until), unless a renewal moves that forward. Its
    /// timer needs the runtime: while the runtime's threads are blocked it cannot fire, and
    /// once they run again it is ready at its first poll.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// # async fn work() {}
    /// let guard = client.lock("job").lock().await?;
    /// tokio::select! {
    ///     () = work() => guard.unlock().await?,
    ///     () = guard.lost() => eprintln!("lock lost, stopping"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lost(&self) {
        match &self.inner {
            Inner::One { held, .. } => held.lost().await,
            Inner::Parts { parts, .. } => {
                let spare = self.spare();
                let mut lost: FuturesUnordered<_> =
                    parts.iter().map(|g| Box::pin(g.lost())).collect();
                let mut count = 0;
                while lost.next().await.is_some() {
                    count += 1;
                    if count > spare {
                        return;
                    }
                }
            }
        }
    }

    /// The name a section stopped by the loss of this hold reports: the first lost part's
    /// (in the order of the locks), else the first part's.
    pub(crate) fn lost_name(&self) -> String {
        match &self.inner {
            Inner::One { held, .. } => held.name().to_owned(),
            Inner::Parts { parts, .. } => parts
                .iter()
                .find(|g| g.is_lost())
                .or_else(|| parts.first())
                .map_or_else(String::new, |g| g.name().to_owned()),
        }
    }

    /// Releases this hold (Redisson's `unlock()`): decrements the hold count, and on the last
    /// hold deletes the key and publishes the unlock message (the kinds that publish one); a
    /// composite releases every part at once and waits for the releases.
    ///
    /// When the connection breaks before the reply (so whether the release ran is unknown),
    /// the client finds out: it cuts the request's connection off at the server so that the
    /// request cannot run later, reads the hold count, and sends the release once more if it
    /// had not run. A count one lower is taken as the release having run; when that count is
    /// 0 it cannot be told from the hold having vanished meanwhile (a Redis restart without
    /// its data), and the release is reported a success: the lock is not held by this owner
    /// either way.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) when the hold was lost: Redis had shown it
    /// gone (Redis is not touched), or its validity had run out (the release is still sent, so
    /// a hold still there is freed); [`Error::NotHeld`](crate::Error::NotHeld) when the owner
    /// no longer holds it (lease expired, force-unlocked, taken over);
    /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout) (after
    /// two command timeouts; the release then goes on in the background);
    /// [`Error::Shutdown`](crate::Error::Shutdown) after
    /// [`Client::shutdown`](crate::Client::shutdown) (the lock then expires with its lease).
    /// A composite returns the first error (in the order of the locks) after every release
    /// was tried; for a RedLock only when fewer than the quorum were released cleanly (a
    /// minority of failed releases, a server down, is what a RedLock tolerates).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release completes even if this future is dropped (it then finishes in a
    /// task of the client); only its result is lost.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// let guard = client.lock("order:42").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn unlock(self) -> Result<()> {
        let spare = self.spare();
        match self.inner {
            Inner::One { held, .. } => held.unlock().await,
            Inner::Parts { parts, .. } => {
                let results = release_all(parts).await;
                let mut failed = results.into_iter().filter_map(Result::err);
                let first = failed.next();
                match first {
                    Some(e) if 1 + failed.count() > spare => Err(e),
                    _ => Ok(()),
                }
            }
        }
    }

    /// Stops renewal and keeps the lock without releasing it: it stays held until its lease
    /// expires (like tokio's `SemaphorePermit::forget`); every part of a composite.
    pub fn forget(self) {
        match self.inner {
            Inner::One { held, .. } => held.forget(),
            Inner::Parts { parts, .. } => parts.into_iter().for_each(Self::forget),
        }
    }
}

/// Releases `guards` all at once; the results in their order.
pub(crate) async fn release_all(guards: Vec<LockGuard>) -> Vec<Result<()>> {
    futures_util::future::join_all(guards.into_iter().map(|g| Box::pin(g.unlock()))).await
}
