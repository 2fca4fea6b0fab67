//! Client-side compositions of locks (docs/LAYOUT.md §6.7): [`MultiLock`] takes all of its
//! locks, [`RedLock`] a majority of locks on independent servers. Neither has a Redis layout
//! of its own: each lock is taken with its own protocol, so Java sees ordinary locks.
//!
//! Both run Redisson's `RedissonMultiLock.tryLock` loop ([`Composite::try_acquire`]); they
//! differ in how many locks must be held and how the wait is shared between the locks.

mod composite;
mod redlock;

use std::collections::HashSet;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::lock::{DistributedLock, lock_surface};
use composite::{Composite, placements, trait_objects};

pub use redlock::RedLock;

/// A list of locks acquired together, all or nothing (Redisson's `RedissonMultiLock`,
/// `redisson.getMultiLock(lock1, lock2, ...)`).
///
/// The locks may be of any single kind (any [`DistributedLock`] but a composite: the reentrant
/// lock, the fair lock, either half of a read-write lock, the token lock, ...) and on any
/// clients and servers. The multi-lock writes nothing of its
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
#[derive(Clone)]
pub struct MultiLock {
    core: Composite,
}

lock_surface!(
    MultiLock,
    setup: "# ",
    make: "redisson_sync::MultiLock::new([client.lock(\"account:1\"), client.lock(\"account:2\")])?",
    errors: "A lock's own errors end the acquisition after releasing the locks held (see [How it \
        acquires](Self#how-it-acquires-as-redisson)); a kind's own such as \
        [`Error::UpgradeRefused`](crate::Error::UpgradeRefused).",
    cancel: "A dropped acquisition releases the locks it holds, in the background; a lock \
        acquire in flight is undone by its own lock.",
    force_unlock: "Force-unlocks every lock of the list (each as its own kind's `force_unlock`); \
        `true` if any was deleted.",
    is_locked: "`true` when some lock of the list is held, by anyone: an acquisition could not \
        get them all now.",
);

impl MultiLock {
    /// A multi-lock over `locks`, taken in this order.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty list, for a composite in it (a multi-lock or a
    /// RedLock), or for the same lock twice: two locks of one client with the same name,
    /// whatever their kinds (they share one Redis key). Two clients of one server naming the
    /// same key are not detected: such a multi-lock can never be acquired (the second waits for
    /// the first).
    pub fn new<L: DistributedLock + 'static>(locks: impl IntoIterator<Item = L>) -> Result<Self> {
        let locks = trait_objects(locks);
        if locks.is_empty() {
            return Err(Error::InvalidArgument(
                "a multi-lock needs at least one lock".into(),
            ));
        }
        let mut seen = HashSet::with_capacity(locks.len());
        for at in placements(&locks, "multi-lock")? {
            if !seen.insert((&*at.shared.id, at.name)) {
                return Err(Error::InvalidArgument(format!(
                    "lock {:?} of client {} appears twice in the multi-lock",
                    at.name, at.shared.id
                )));
            }
        }
        let quorum = locks.len();
        Ok(Self {
            core: Composite::new(locks, quorum, false),
        })
    }

    /// The locks, in the order they are taken.
    pub fn locks(&self) -> &[Arc<dyn DistributedLock>] {
        &self.core.locks
    }
}
