//! [`MultiLockGuard`]: the holds of one acquisition of a [`MultiLock`](crate::MultiLock) or a
//! [`RedLock`](crate::RedLock).

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use crate::error::Result;
use crate::lock::LockGuard;
use crate::owner::Owner;

/// The holds of one acquisition of a [`MultiLock`](crate::MultiLock) (one hold per lock) or of
/// a [`RedLock`](crate::RedLock) (one hold on each lock it got: at least a majority).
///
/// It is made of ordinary [`LockGuard`]s, each renewed by its own client's watchdog (or
/// ending with the explicit lease), and it answers for them as a whole: the acquisition is
/// valid while at least [`needed`](Self::needed) of its holds are (all of them for a
/// multi-lock, a majority of all the locks for a RedLock).
///
/// # Release on drop
///
/// Dropping it drops every [`LockGuard`]: each schedules its release in a background task of
/// its client and returns at once (see [`LockGuard`]'s *Release on drop*). Use
/// [`unlock`](Self::unlock) when the next step depends on the locks being free.
#[clippy::has_significant_drop]
#[must_use = "if unused the locks will immediately be released"]
#[derive(Debug)]
pub struct MultiLockGuard {
    /// In the order of the locks (a RedLock's: of the locks it got).
    guards: Vec<LockGuard>,
    /// How many of them must be valid for the acquisition to be.
    needed: usize,
}

impl MultiLockGuard {
    pub(crate) fn new(guards: Vec<LockGuard>, needed: usize) -> Self {
        debug_assert!(needed >= 1 && needed <= guards.len());
        Self { guards, needed }
    }

    /// The holds, in the order of the locks. A RedLock's guard has one per lock it acquired,
    /// which may be fewer than its locks.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// The holds, for whoever wants to release them one by one.
    pub fn into_guards(self) -> Vec<LockGuard> {
        self.guards
    }

    /// How many holds must stay valid for the acquisition to be valid: all of them for a
    /// [`MultiLock`](crate::MultiLock), the quorum (`n / 2 + 1` of its `n` locks) for a
    /// [`RedLock`](crate::RedLock).
    pub fn needed(&self) -> usize {
        self.needed
    }

    /// The owner holding the locks (the same for every hold).
    pub fn owner(&self) -> Owner {
        self.guards[0].owner()
    }

    /// How many holds may be lost before the acquisition is.
    fn spare(&self) -> usize {
        self.guards.len() - self.needed
    }

    /// `true` once more holds are [lost](LockGuard::is_lost) than the acquisition can spare:
    /// any of them for a multi-lock; for a RedLock, when fewer than the quorum remain.
    pub fn is_lost(&self) -> bool {
        self.guards.iter().filter(|g| g.is_lost()).count() > self.spare()
    }

    /// The instant until which the client vouches for the acquisition: the earliest
    /// [`LockGuard::valid_until`] of a multi-lock's holds; for a RedLock, the instant at which
    /// fewer than the quorum of its holds would still be valid.
    pub fn valid_until(&self) -> std::time::Instant {
        let mut until: Vec<std::time::Instant> =
            self.guards.iter().map(LockGuard::valid_until).collect();
        until.sort_unstable();
        until[self.spare()]
    }

    /// Resolves when the acquisition is lost (see [`is_lost`](Self::is_lost)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn lost(&self) {
        let spare = self.spare();
        let mut lost: FuturesUnordered<_> = self.guards.iter().map(LockGuard::lost).collect();
        let mut count = 0;
        while lost.next().await.is_some() {
            count += 1;
            if count > spare {
                return;
            }
        }
    }

    /// Releases every hold, all at once, and waits for the releases.
    ///
    /// # Errors
    ///
    /// The first error (in the order of the locks) of the releases ([`LockGuard::unlock`]'s
    /// errors: [`Error::LeaseLost`](crate::Error::LeaseLost),
    /// [`Error::NotHeld`](crate::Error::NotHeld), ...), returned after every release was tried.
    /// For a RedLock, only when fewer than the quorum were released cleanly: a minority of
    /// failed releases (a server down) is what a RedLock tolerates.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: each release completes even if this future is dropped.
    pub async fn unlock(self) -> Result<()> {
        let spare = self.spare();
        let results = release_all(self.guards).await;
        let mut failed = results.into_iter().filter_map(Result::err);
        let first = failed.next();
        match first {
            Some(e) if 1 + failed.count() > spare => Err(e),
            _ => Ok(()),
        }
    }

    /// Stops renewal of every hold and keeps the locks until their leases expire
    /// ([`LockGuard::forget`]).
    pub fn forget(self) {
        self.guards.into_iter().for_each(LockGuard::forget);
    }
}

/// Releases `guards` all at once; the results in their order.
pub(crate) async fn release_all(guards: Vec<LockGuard>) -> Vec<Result<()>> {
    futures_util::future::join_all(guards.into_iter().map(LockGuard::unlock)).await
}
