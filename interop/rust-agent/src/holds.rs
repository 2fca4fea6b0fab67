//! The guards of the locks held through the protocol, per lock name and owner.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use redisson_sync::{LockGuard, PermitGuard, PermitId};

use crate::protocol::Kind;

/// A hold's key: the lock's kind and name (the two halves of a read-write lock share a name),
/// and the owner.
type Key = (Kind, String, u64);

/// Guards of held locks: one per hold, newest last (a reentrant lock pushes one more).
///
/// A guard taken out of here is always consumed explicitly, with `unlock()` or `forget()`:
/// dropping a `LockGuard` would schedule a release of the lock in the background, which a
/// stale guard must never do.
#[derive(Debug, Default)]
pub struct Holds {
    guards: Mutex<HashMap<Key, Vec<LockGuard>>>,
    /// The permits of renewing acquisitions (`psem_acquire` with `renew`), renewed until a
    /// release names one of their ids.
    renewing: Mutex<Vec<PermitGuard>>,
}

impl Holds {
    /// Stores `guard`, taken on the lock the request named `name` (`guard.name()` is the Redis
    /// key, which differs under `--name-prefix`).
    pub fn push(&self, kind: Kind, name: String, guard: LockGuard) {
        let key = (kind, name, guard.owner().id());
        self.lock().entry(key).or_default().push(guard);
    }

    /// Takes the newest hold of `owner` on `name`.
    pub fn pop(&self, kind: Kind, name: &str, owner: u64) -> Option<LockGuard> {
        let mut guards = self.lock();
        let key = (kind, name.to_owned(), owner);
        let stack = guards.get_mut(&key)?;
        let guard = stack.pop();
        if stack.is_empty() {
            guards.remove(&key);
        }
        guard
    }

    /// Forgets every remaining hold of `owner` on `name`: Redis said it does not hold the lock,
    /// so they are stale. Nothing is sent to Redis.
    pub fn forget(&self, kind: Kind, name: &str, owner: u64) {
        let stale = self.lock().remove(&(kind, name.to_owned(), owner));
        stale.into_iter().flatten().for_each(LockGuard::forget);
    }

    /// Keeps renewing the permits of `guard` until a release names one of its ids.
    pub fn push_renewing(&self, guard: PermitGuard) {
        lock(&self.renewing).push(guard);
    }

    /// Stops renewing every renewing acquisition of `name` (the semaphore's key) that holds one
    /// of `ids`: the release that names them then releases them as any permits (a release of
    /// only some of an acquisition's ids stops the renewal of all of them). Nothing is sent.
    pub fn stop_renewing(&self, name: &str, ids: &[PermitId]) {
        let mut renewing = lock(&self.renewing);
        let (stop, keep): (Vec<PermitGuard>, Vec<PermitGuard>) = renewing
            .drain(..)
            .partition(|g| g.name() == name && g.ids().iter().any(|id| ids.contains(id)));
        *renewing = keep;
        drop(renewing);
        for guard in stop {
            drop(guard.into_ids());
        }
    }

    /// Forgets every hold: the locks stay in Redis until their leases end, as after Redisson's
    /// `shutdown()`, and the renewing permits until theirs do.
    pub fn forget_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        all.into_values().flatten().for_each(LockGuard::forget);
        for guard in std::mem::take(&mut *lock(&self.renewing)) {
            drop(guard.into_ids());
        }
    }

    /// Guards and renewing acquisitions kept now.
    pub fn kept(&self) -> usize {
        self.lock().values().map(Vec::len).sum::<usize>() + lock(&self.renewing).len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Vec<LockGuard>>> {
        lock(&self.guards)
    }
}

/// Nothing here panics while holding a mutex; stay usable even if something did.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
