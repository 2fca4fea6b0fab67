//! [`RedLock`]: a majority of locks on independent servers.

use std::collections::HashMap;
use std::sync::Arc;

use redis::Value;

use super::composite::{Composite, placements, trait_objects};
use crate::conn::Call;
use crate::error::{Error, Result};
use crate::lock::{DistributedLock, Placement, lock_surface};
use crate::reply::unexpected;

/// The Redlock algorithm: a lock held when a majority of `n` locks, each on its own
/// independent Redis server, are held (Redisson's deprecated `RedissonRedLock`).
///
/// **Prefer a single [`Lock`](crate::Lock), or better the fenced lock
/// ([`FencedLock`](crate::FencedLock), Redisson's `getFencedLock`) when correctness
/// matters.** Redisson deprecated `RedissonRedLock` in favour of `getLock` and
/// `getFencedLock`; this type exists for services that share RedLocks with Java, and for the
/// cases that only need efficiency (avoiding duplicate work), not mutual exclusion that
/// correctness depends on.
///
/// # What it guarantees, and what it does not
///
/// Redlock (antirez, "Distributed locks with Redis") keeps the lock while up to
/// `n - quorum` of the servers are down or unreachable, where `quorum = n / 2 + 1`: with 5
/// servers, 2 may fail. Its safety argument assumes that network delays, process pauses and
/// clock drift are small compared with the lease: a holder acts on the lock only while its
/// holds are valid, and every server expires a key after about the lease.
///
/// Those assumptions can fail, and then two clients can both believe they hold it (Martin
/// Kleppmann, "How to do distributed locking", 2016):
///
/// - **Process pauses.** A holder paused (a long GC, page faults, a stopped VM or container)
///   for longer than the lease wakes up believing it still holds the lock, while the keys have
///   expired and another client holds it. Checking [`LockGuard::is_lost`](crate::LockGuard::is_lost) right before
///   acting narrows the window but cannot close it: the pause can fall between the check and
///   the action. Network delays do the same to a request already sent.
/// - **Clock jumps.** A server whose wall clock jumps forward (an NTP step, an operator)
///   expires keys early; if it is part of a majority, another client can gather a majority at
///   once. A server that restarts without its data (no persistence, or `appendfsync` not
///   `always`) forgets its keys the same way: keep a restarted server out for longer than the
///   longest lease (antirez's "delayed restarts").
/// - **No fencing.** Nothing in the lock lets the protected resource reject a stale holder:
///   there is no monotonically increasing token to pass along with each write.
///
/// Antirez's reply ("Is Redlock safe?") holds that the algorithm is safe when clocks advance
/// at about the same rate without jumps (servers should not step their clocks), and that
/// pauses and delays hit every lock with automatic release alike. Whatever one concludes, a
/// RedLock gives the protected resource nothing to reject a stale holder with. Use it for
/// efficiency (avoiding the same work twice, most of the time); when a stale holder would
/// corrupt data, use the fenced lock and have the resource check its token.
///
/// # How it acquires (as Redisson)
///
/// As [`MultiLock`](crate::MultiLock), in list order, with these differences:
///
/// - each lock waits at most `max(remaining wait / n, 1 ms)`, so that servers that do not
///   answer cannot use up the whole wait;
/// - the round goes on past a failed lock (held by someone else, or its server failed or did
///   not answer within the client's command timeout) until more than `n - quorum` failed;
///   it then releases what it holds and starts again while the wait lasts;
/// - it succeeds once every lock was tried (or the wait ran out) with at least `quorum`
///   holds still valid: the guard holds the locks it got, at least a quorum.
///
/// A lock whose acquire got no answer (its server stalled) is settled by the lock itself: the
/// client cuts off that request's connection and reads the hold count, in the background, and
/// releases a hold it finds. If the server cannot be reached even for that, the request may
/// still run when the server comes back; that hold then ends with its lease (the watchdog
/// timeout without an explicit lease: it is never renewed). Redisson sends an `unlock` after
/// such a request instead, with the same outcome when the server comes back.
///
/// # Differences from Redisson
///
/// - [`new`](Self::new) checks what Redisson does not: at least 3 locks, each on its own
///   [`Client`](crate::Client) and its own server (it reads each server's `run_id` with
///   `INFO server`: two names for one server, or two clients of one server, are refused).
/// - As for [`MultiLock`](crate::MultiLock): each lock is taken with the requested lease (no
///   `PEXPIRE` afterwards), errors other than a server's failure (a wrong key type, a bad
///   lease, shutdown) end the acquisition, and the end of the wait with a quorum held is
///   success.
/// - When the wait runs out with no lock held by anyone else, only failed servers, the error
///   of the first failed server is returned instead of `None`.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use redisson_sync::{Client, LockOptions, RedLock};
///
/// let clients = [
///     Client::open("redis://redis-a:6379")?,
///     Client::open("redis://redis-b:6379")?,
///     Client::open("redis://redis-c:6379")?,
/// ];
/// let redlock = RedLock::new(clients.iter().map(|c| c.lock("report:daily"))).await?;
/// let opts = LockOptions::new().lease(Duration::from_secs(30));
/// if let Some(guard) = redlock.try_lock_with_options(Duration::from_secs(1), &opts).await? {
///     // ... do the work, checking guard.is_lost() before each step ...
///     guard.unlock().await?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedLock {
    core: Composite,
}

lock_surface!(
    RedLock,
    setup: "# let (a, b, c) = (client.clone(), client.clone(), client);",
    make: "redisson_sync::RedLock::new([a.lock(\"resource\"), b.lock(\"resource\"), c.lock(\"resource\")]).await?",
    errors: "When an attempt failed only because servers failed (no lock was held by someone \
        else), the first server's error ([`Error::Redis`](crate::Error::Redis), \
        [`Error::Timeout`](crate::Error::Timeout)); a lock's other errors at once \
        ([`Error::WrongType`](crate::Error::WrongType), \
        [`Error::Shutdown`](crate::Error::Shutdown), a kind's own such as \
        [`Error::UpgradeRefused`](crate::Error::UpgradeRefused)). The locks held are released \
        first.",
    cancel: "A dropped acquisition releases the locks it holds, in the background; a lock \
        acquire in flight is undone by its own lock. With a lease, a hold that was granted \
        after its caller gave up on it ends with it.",
    force_unlock: "Force-unlocks every lock (each as its own kind's `force_unlock`); `true` if \
        any was deleted.",
    is_locked: "`true` when so many of the locks are held, by anyone, that fewer than the \
        quorum are free: an acquisition could not get a quorum now.",
);

/// The fewest locks a RedLock takes: with 2, one failed server would stop it.
const MIN_LOCKS: usize = 3;

impl RedLock {
    /// A RedLock over `locks`, taken in this order. Asks each lock's server for its identity
    /// (`INFO server`, one call per lock, all at once).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for fewer than 3 locks, a composite among them, two locks of
    /// one [`Client`](crate::Client), or two locks on one Redis server (the same `run_id`: one
    /// server under two names, or two clients of it); the error of a server that could not
    /// tell its identity ([`Error::Redis`], [`Error::Timeout`], [`Error::Shutdown`]): every
    /// server must answer once, when the RedLock is made.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    pub async fn new<L: DistributedLock + 'static>(
        locks: impl IntoIterator<Item = L>,
    ) -> Result<Self> {
        let locks = trait_objects(locks);
        if locks.len() < MIN_LOCKS {
            return Err(Error::InvalidArgument(format!(
                "a RedLock needs at least {MIN_LOCKS} locks on independent servers, got {}",
                locks.len()
            )));
        }
        let at = placements(&locks, "RedLock")?;
        let mut clients = HashMap::with_capacity(locks.len());
        for lock in &at {
            if let Some(other) = clients.insert(&*lock.shared.id, lock.name) {
                return Err(Error::InvalidArgument(format!(
                    "RedLock: locks {other:?} and {:?} are on the same client {}; each lock \
                     needs its own client and server",
                    lock.name, lock.shared.id
                )));
            }
        }
        let ids = futures_util::future::join_all(at.iter().map(server_run_id)).await;
        let mut servers = HashMap::with_capacity(locks.len());
        for (lock, id) in at.iter().zip(ids) {
            if let Some(other) = servers.insert(id?, lock.name) {
                return Err(Error::InvalidArgument(format!(
                    "RedLock: locks {other:?} and {:?} are on the same Redis server (one \
                     server under two names, or two clients of it); each lock needs its own \
                     server",
                    lock.name
                )));
            }
        }
        let quorum = locks.len() / 2 + 1;
        Ok(Self {
            core: Composite::new(locks, quorum, true),
        })
    }

    /// The locks, in the order they are taken.
    pub fn locks(&self) -> &[Arc<dyn DistributedLock>] {
        &self.core.locks
    }

    /// How many locks an acquisition must hold: `n / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.core.quorum
    }
}

/// The `run_id` of the server that holds `lock`'s key (`INFO server`): random per server
/// process, so two names or two clients of one server give the same one.
async fn server_run_id(lock: &Placement<'_>) -> Result<String> {
    let shared = lock.shared;
    shared.ensure_open()?;
    let mut cmd = redis::cmd("INFO");
    cmd.arg("server");
    let reply = shared
        .conn
        .call(Call::read("server identity", lock.name, &cmd))
        .await?;
    let info = match &reply {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::SimpleString(text) => text.clone(),
        _ => return Err(unexpected("INFO", &reply)),
    };
    info.lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
        .ok_or_else(|| unexpected("INFO", &reply))
}
