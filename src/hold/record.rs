//! The client's own record of its holds: per lock name and holder field, how many holds Redis
//! confirmed, and whether an operation on them is in flight or unresolved.
//!
//! Redis knows a holder field's hold count; the client knows which of those holds it handed
//! out as guards. Keeping the two in step is what makes faults survivable:
//!
//! - operations on one (name, field) run one at a time ([`Record::enter`]), so while one is in
//!   flight the count it started from is exact;
//! - an acquire passes that count to its script, which grants only when Redis agrees, and
//!   otherwise replies the real count: the client then learns that its older holds are gone
//!   (expired, force-unlocked) and reports them lost, instead of letting a stale guard release
//!   a newer hold;
//! - when the outcome of an acquire or release is unknown (a timeout, a broken connection), the
//!   operation keeps the slot until it is resolved: cutting off its connection at the server
//!   stops the request from taking effect later, and the count read then says whether it did. A
//!   re-acquire of the same owner waits for that (bounded), instead of racing a release that
//!   may land late.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::fasthash::{FastMap, NameField};
use crate::watchdog::{Lease, Loss};

#[derive(Debug, Default)]
struct Slot {
    /// Holds Redis confirmed and guards still own.
    held: u32,
    /// An operation is in flight, or its outcome is unresolved.
    busy: bool,
    /// Operations waiting for `busy` to clear, and what wakes them (made on first use).
    waiting: u32,
    wake: Option<Arc<Notify>>,
    /// The leases of the guards of these holds, reported lost when Redis shows the holds gone.
    leases: Leases,
    /// The count cannot be trusted (an operation ran without exclusive access, or an unknown
    /// outcome was never resolved): guards granted meanwhile are reported lost at once.
    tainted: bool,
}

impl Slot {
    fn idle(&self) -> bool {
        !self.busy && self.waiting == 0 && self.held == 0 && self.leases.is_empty()
    }
}

/// The guards' leases of one slot: almost always one, kept without an allocation.
#[derive(Debug, Default)]
struct Leases {
    first: Option<Weak<Lease>>,
    more: Vec<Weak<Lease>>,
}

impl Leases {
    fn is_empty(&self) -> bool {
        self.first.is_none() && self.more.is_empty()
    }

    fn push(&mut self, lease: &Arc<Lease>) {
        let weak = Arc::downgrade(lease);
        if self.first.is_none() {
            self.first = Some(weak);
        } else {
            self.more.push(weak);
        }
    }

    /// Stops counting one guard with `lease`; `false` if none was counted.
    fn remove(&mut self, lease: &Arc<Lease>) -> bool {
        let is = |w: &Weak<Lease>| std::ptr::eq(w.as_ptr(), Arc::as_ptr(lease));
        if self.first.as_ref().is_some_and(is) {
            self.first = self.more.pop();
            return true;
        }
        match self.more.iter().position(is) {
            Some(i) => {
                self.more.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Every lease still alive, the list emptied.
    fn drain(&mut self) -> impl Iterator<Item = Arc<Lease>> {
        self.first
            .take()
            .into_iter()
            .chain(std::mem::take(&mut self.more))
            .filter_map(|l| l.upgrade())
    }

    fn prune(&mut self) {
        self.more.retain(|l| l.strong_count() > 0);
        if self.first.as_ref().is_some_and(|l| l.strong_count() == 0) {
            self.first = self.more.pop();
        }
    }
}

/// How many independently locked parts the record is split into, so that operations on
/// different locks rarely wait for each other's mutex.
const SHARDS: usize = 16;

/// The record of one client's holds.
#[derive(Clone)]
pub(crate) struct Record {
    shards: Arc<[Mutex<FastMap<NameField, Slot>>; SHARDS]>,
}

impl Default for Record {
    fn default() -> Self {
        Self {
            shards: Arc::new(std::array::from_fn(|_| Mutex::default())),
        }
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slots: usize = self.shards.iter().map(|s| lock(s).len()).sum();
        f.debug_struct("Record").field("slots", &slots).finish()
    }
}

/// Locks a shard; nothing panics while holding it, so stay usable even if something did.
fn lock(shard: &Mutex<FastMap<NameField, Slot>>) -> MutexGuard<'_, FastMap<NameField, Slot>> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Record {
    /// The shard of `key`.
    fn slots(&self, key: &NameField) -> MutexGuard<'_, FastMap<NameField, Slot>> {
        lock(&self.shards[(key.hash() >> 32) as usize % SHARDS])
    }

    /// Slots kept now (one per lock and holder with a hold, an operation in flight or one
    /// waiting for it: an idle slot is dropped at once) and holds counted in them.
    pub(crate) fn sizes(&self) -> (usize, u64) {
        let mut slots = 0;
        let mut held = 0;
        for shard in self.shards.iter() {
            let shard = lock(shard);
            slots += shard.len();
            held += shard.values().map(|s| u64::from(s.held)).sum::<u64>();
        }
        (slots, held)
    }

    /// How many holds of `key` (a lock name and holder field) the client counts now, or an
    /// operation on them is in flight (`u32::MAX`: the count is not settled, so the holder may
    /// hold it): read without waiting.
    pub(crate) fn holds_now(&self, key: &NameField) -> u32 {
        match self.slots(key).get(key) {
            Some(slot) if slot.busy || slot.tainted => u32::MAX,
            Some(slot) => slot.held,
            None => 0,
        }
    }

    /// Stops counting the hold of `lease` at once when no operation on the holds of `key` is
    /// in flight (`true`); `false` leaves it to an operation ([`Op::forgotten`]).
    pub(crate) fn try_forget(&self, key: &NameField, lease: &Arc<Lease>) -> bool {
        let mut slots = self.slots(key);
        let Some(slot) = slots.get_mut(key) else {
            return true;
        };
        if slot.busy {
            return false;
        }
        if slot.leases.remove(lease) {
            slot.held = slot.held.saturating_sub(1);
        }
        if slot.held == 0 {
            slot.tainted = false;
            slot.leases.prune();
        }
        drop_if_idle(&mut slots, key);
        true
    }

    /// Starts an operation on the holds of `key`: waits while another one is in flight
    /// or unresolved, until `until` (for ever when `None`). Past `until` the operation goes
    /// ahead without exclusive access, and the slot is marked tainted.
    pub(crate) async fn enter(&self, key: &NameField, patience: Option<Duration>) -> Op {
        let mut until = None;
        loop {
            let wake = {
                let mut slots = self.slots(key);
                let slot = match slots.get_mut(key) {
                    Some(slot) => slot,
                    None => slots.entry(key.clone()).or_default(),
                };
                if !slot.busy {
                    slot.busy = true;
                    let (held, tainted) = (slot.held, slot.tainted);
                    return Op {
                        holds: self.clone(),
                        key: key.clone(),
                        held,
                        exclusive: true,
                        tainted,
                        done: false,
                    };
                }
                slot.waiting += 1;
                slot.wake.get_or_insert_with(Default::default).clone()
            };
            let notified = wake.notified();
            let until = *until.get_or_insert_with(|| patience.map(|p| Instant::now() + p));
            let in_time = match until {
                Some(until) => tokio::time::timeout_at(until, notified).await.is_ok(),
                None => {
                    notified.await;
                    true
                }
            };
            let mut slots = self.slots(key);
            let slot = slots.entry(key.clone()).or_default();
            slot.waiting -= 1;
            if !in_time && slot.busy {
                tracing::warn!(lock = %key.name, holder = %key.field, "an earlier operation of this holder is still unresolved; going ahead without it");
                slot.tainted = true;
                let held = slot.held;
                return Op {
                    holds: self.clone(),
                    key: key.clone(),
                    held,
                    exclusive: false,
                    tainted: true,
                    done: false,
                };
            }
        }
    }
}

/// Drops the slot of `key` if it is idle: a slot lives from an operation's start to the end
/// of the last hold, operation or wait on it. Kept idle for the next operation on the same
/// lock and holder, slots piled up where holders are used once (a token lock's tokens, a
/// re-checking waiter's attempts) until a sweep, and with them the maps' and names' memory.
fn drop_if_idle(slots: &mut FastMap<NameField, Slot>, key: &NameField) {
    if slots.get(key).is_some_and(Slot::idle) {
        slots.remove(key);
    }
}

/// One operation on the holds of one (name, field), exclusive while it lives. It ends with one
/// of its consuming methods; dropped without one, its outcome counts as never resolved.
#[must_use = "an operation ends with granted, released, unchanged or corrected"]
pub(crate) struct Op {
    holds: Record,
    key: NameField,
    held: u32,
    exclusive: bool,
    tainted: bool,
    done: bool,
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Op")
            .field("name", &self.key.name)
            .field("field", &self.key.field)
            .field("held", &self.held)
            .field("exclusive", &self.exclusive)
            .finish()
    }
}

impl Op {
    /// The holds Redis confirmed and guards own, when the operation started.
    pub(crate) fn held(&self) -> u32 {
        self.held
    }

    /// `true` when the count cannot be trusted: a guard granted now must report lost at once.
    pub(crate) fn tainted(&self) -> bool {
        self.tainted
    }

    /// Redis says the field has `actual` holds where the client counted [`held`](Self::held),
    /// and the operation goes on from `actual`. Fewer: the holds the client lost track of are
    /// gone (expired, force-unlocked), so the guards of this field are reported lost. More:
    /// holds no guard owns any more (given up with `forget`, or granted by an acquire that
    /// could not be resolved) still count, as Redisson counts them; they expire with their
    /// lease once no guard keeps the lock renewed.
    pub(crate) fn correct(&mut self, actual: u32) {
        if actual == self.held {
            return;
        }
        let mut slots = self.holds.slots(&self.key);
        let slot = slots.entry(self.key.clone()).or_default();
        if actual < self.held {
            tracing::warn!(lock = %self.key.name, holder = %self.key.field, counted = self.held, actual, "hold count differs from Redis: the older holds are lost");
            for lease in slot.leases.drain() {
                lease.raise(Loss::Gone);
            }
        } else {
            tracing::debug!(lock = %self.key.name, holder = %self.key.field, counted = self.held, actual, "holds without a guard still count");
        }
        slot.held = actual;
        self.held = actual;
    }

    /// The operation granted one more hold, whose guard has `lease`.
    pub(crate) fn granted(mut self, lease: &Arc<Lease>) {
        self.finish(|slot| {
            slot.held += 1;
            slot.leases.push(lease);
        });
    }

    /// The operation released one hold, the one of the guard with `lease`.
    pub(crate) fn released(mut self, lease: &Arc<Lease>) {
        self.finish(|slot| {
            slot.held = slot.held.saturating_sub(1);
            slot.leases.remove(lease);
        });
    }

    /// The operation changed nothing (contention, a refused or fenced request).
    pub(crate) fn unchanged(mut self) {
        self.finish(|_| {});
    }

    /// A guard gives its hold up without a release (`forget`, a lease found gone): the
    /// client stops counting it, unless a correction already did (its lease is no longer
    /// counted then).
    pub(crate) fn forgotten(mut self, lease: &Arc<Lease>) {
        self.finish(|slot| {
            if slot.leases.remove(lease) {
                slot.held = slot.held.saturating_sub(1);
            }
        });
    }

    fn finish(&mut self, update: impl FnOnce(&mut Slot)) {
        self.done = true;
        let mut slots = self.holds.slots(&self.key);
        let slot = match slots.get_mut(&self.key) {
            Some(slot) => slot,
            None => slots.entry(self.key.clone()).or_default(),
        };
        update(slot);
        self.release(slot);
        if slot.idle() {
            slots.remove(&self.key);
        }
    }

    fn release(&self, slot: &mut Slot) {
        if self.exclusive {
            slot.busy = false;
            if slot.waiting > 0
                && let Some(wake) = &slot.wake
            {
                wake.notify_one();
            }
        }
        if slot.held == 0 {
            slot.tainted = false;
            slot.leases.prune();
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Never resolved: whatever it did, the count may be off by one.
        let mut slots = self.holds.slots(&self.key);
        if let Some(slot) = slots.get_mut(&self.key) {
            slot.tainted = slot.held > 0 || slot.tainted;
            self.release(slot);
        }
        drop_if_idle(&mut slots, &self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> NameField {
        NameField::new("lock".into(), "client:1".into())
    }

    #[tokio::test]
    async fn operations_count_holds_and_leave_no_entry_behind() {
        let holds = Record::default();
        let key = key();
        let lease = Lease::new(
            Instant::now(),
            Duration::from_secs(30),
            crate::observe::Tag::kind_only("lock"),
        );
        let op = holds.enter(&key, None).await;
        assert_eq!(op.held(), 0);
        op.granted(&lease);
        let op = holds.enter(&key, None).await;
        assert_eq!(op.held(), 1);
        op.released(&lease);
        assert!(
            holds
                .shards
                .iter()
                .all(|s| lock(s).values().all(Slot::idle))
        );
    }

    #[tokio::test]
    async fn a_second_operation_waits_for_the_first() {
        let holds = Record::default();
        let key = key();
        let first = holds.enter(&key, None).await;
        let soon = Instant::now() + Duration::from_millis(50);
        let second = holds.enter(&key, Some(Duration::from_millis(50))).await;
        // it went ahead after waiting, without exclusive access
        assert!(second.tainted());
        assert!(Instant::now() >= soon);
        second.unchanged();
        first.unchanged();
        let waiter = {
            let holds = holds.clone();
            let key = key.clone();
            let first = holds.enter(&key, None).await;
            let handle = tokio::spawn({
                let holds = holds.clone();
                async move { holds.enter(&key, None).await.held() }
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!handle.is_finished());
            first.unchanged();
            handle
        };
        assert_eq!(waiter.await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_correction_reports_the_older_holds_lost() {
        let holds = Record::default();
        let key = key();
        let old = Lease::new(
            Instant::now(),
            Duration::from_secs(30),
            crate::observe::Tag::kind_only("lock"),
        );
        holds.enter(&key, None).await.granted(&old);
        let mut op = holds.enter(&key, None).await;
        op.correct(0);
        assert_eq!(op.held(), 0);
        assert_eq!(old.loss(), Some(Loss::Gone));
        let new = Lease::new(
            Instant::now(),
            Duration::from_secs(30),
            crate::observe::Tag::kind_only("lock"),
        );
        op.granted(&new);
        assert!(!new.is_lost());
        let op = holds.enter(&key, None).await;
        assert_eq!(op.held(), 1);
        op.released(&new);
    }
}
