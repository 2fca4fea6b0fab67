//! Who holds a lock: the decimal owner id that Redisson calls the thread id.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The owner of a lock hold: the decimal part of the hash field `<client id>:<owner id>`.
///
/// Redisson writes `<client uuid>:<thread id>`; this crate writes `<client uuid>:<owner id>`, so
/// reentrancy is per owner. By default ([`Owner::current`]) the owner is the running Tokio task:
/// nested locking inside one task re-enters, another task waits. Outside a task (for example in
/// the body of `#[tokio::main]` or on a plain thread) the owner is the current thread.
///
/// An explicit owner ([`Owner::new`], Redisson's `threadId` overloads) lets several tasks share
/// one ownership, or lets a program keep its own numbering (the conformance agents map their
/// numbered owners this way).
///
/// Task ids and thread ids never collide: thread owners are numbered from 2^62 up, task ids come
/// from Tokio's task counter, which starts at 1.
///
/// # Examples
///
/// ```
/// use redisson_sync::Owner;
///
/// let worker = Owner::new(7);
/// assert_eq!(worker.id(), 7);
/// assert_eq!(worker.to_string(), "7");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(u64);

/// First id handed to a thread outside any Tokio task.
const THREAD_OWNER_BASE: u64 = 1 << 62;

static NEXT_THREAD_OWNER: AtomicU64 = AtomicU64::new(THREAD_OWNER_BASE);

thread_local! {
    static THREAD_OWNER: u64 = NEXT_THREAD_OWNER.fetch_add(1, Ordering::Relaxed);
}

impl Owner {
    /// An explicit owner id. Any `u64` is valid: Java never parses the field, it only compares
    /// it as a string.
    pub const fn new(id: u64) -> Self {
        Self(id)
    }

    /// The owner of the calling code: the current Tokio task, or the current thread when not
    /// inside a task.
    pub fn current() -> Self {
        match tokio::task::try_id() {
            Some(task) => Self(task_id_number(task)),
            None => Self(THREAD_OWNER.with(|id| *id)),
        }
    }

    /// The decimal id written after the client id in the lock hash field.
    pub const fn id(self) -> u64 {
        self.0
    }
}

/// Tokio prints a task id as its `u64`; parsing the text keeps us off private API.
fn task_id_number(task: tokio::task::Id) -> u64 {
    task.to_string().parse().unwrap_or_else(|_| {
        use std::hash::{BuildHasher, RandomState};
        // Unreachable with Tokio's Display; still a stable, distinct number per task.
        static STATE: std::sync::LazyLock<RandomState> = std::sync::LazyLock::new(RandomState::new);
        STATE.hash_one(task) >> 2
    })
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<u64> for Owner {
    fn from(id: u64) -> Self {
        Self(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_owner_is_stable_per_thread_and_distinct_across_threads() {
        let a = Owner::current();
        assert_eq!(a, Owner::current());
        assert!(a.id() >= THREAD_OWNER_BASE);
        let b = std::thread::spawn(Owner::current).join().unwrap();
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn task_owner_is_the_task_id() {
        let (a, a2, id) =
            tokio::spawn(async { (Owner::current(), Owner::current(), tokio::task::id()) })
                .await
                .unwrap();
        assert_eq!(a, a2);
        assert_eq!(a.id().to_string(), id.to_string());
        let b = tokio::spawn(async { Owner::current() }).await.unwrap();
        assert_ne!(a, b);
        assert!(a.id() < THREAD_OWNER_BASE);
    }
}
