//! The lease watchdog: one renewal task per client (Redisson's `LockRenewalScheduler`,
//! docs/LAYOUT.md §1.9).
//!
//! Holds taken without an explicit lease register here with their [`Renewal`] kind and their
//! lease (the watchdog timeout for the locks; the permits a renewing acquisition holds bring
//! their own). Every third of a lease the task renews the holds of that lease, kind by kind
//! (and in a cluster slot by slot), up to `watchdog_batch_size` holds per script call: the
//! holds of one lease share one tick grid, so they are renewed together. A hold whose holder
//! is gone is dropped from renewal and its [`Lease`] reports the loss. A hold whose last
//! confirmed renewal is older than its lease (minus a margin) is lost too: the guard reports
//! it at that instant by itself, the watchdog stops renewing it at its next tick. Transient
//! Redis errors are retried at the next tick.

mod lease;
mod renewal;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::Value;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::Instrument;

use crate::conn::{Call, Conn, SlotGroup};
use crate::fasthash::{FastMap, NameField};
use crate::observe::{self, Subject, Tag};
use crate::owner::Owner;
use crate::tasks::Tasks;

pub(crate) use lease::{Lease, Loss};
pub(crate) use renewal::{BatchArgs, Renewal};

/// One renewed hold: a kind and the hold's key and holder field, whose hash it uses as it is
/// (the kinds of one key and field, rare, share a hash and differ by `kind`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Watched {
    kind: &'static str,
    hold: NameField,
}

impl std::hash::Hash for Watched {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hold.hash());
    }
}

#[derive(Debug)]
struct Entry {
    /// Guards relying on this renewal (each hold of a reentrant owner registers once).
    guards: usize,
    lease: Arc<Lease>,
    /// The lease each renewal sets (its third is the renewal period).
    lease_time: Duration,
    renewal: Arc<dyn Renewal>,
    /// What the hold's metrics and spans carry: its primitive's labels and its owner.
    tag: Tag,
    owner: Option<Owner>,
}

#[derive(Debug, Default)]
struct Registry {
    entries: Mutex<FastMap<Watched, Entry>>,
    /// Wakes the renewal task when a hold registers with a lease it has no tick grid for.
    new_lease: Arc<Notify>,
}

impl Registry {
    fn entries(&self) -> MutexGuard<'_, FastMap<Watched, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes `watched` if its entry is still the one of `lease`.
    fn remove(&self, watched: &Watched, lease: &Arc<Lease>) {
        let mut entries = self.entries();
        if entries
            .get(watched)
            .is_some_and(|e| Arc::ptr_eq(&e.lease, lease))
        {
            entries.remove(watched);
        }
    }
}

/// The client's watchdog.
#[derive(Debug)]
pub(crate) struct Watchdog {
    registry: Arc<Registry>,
    /// The lease of a hold registered without one of its own: the watchdog timeout.
    lease: Duration,
}

impl Watchdog {
    /// Starts the renewal task as a service of `tasks`.
    pub(crate) fn start(
        conn: Arc<Conn>,
        client_id: Arc<str>,
        lease: Duration,
        batch_size: usize,
        tasks: &Tasks,
    ) -> Self {
        let registry = Arc::new(Registry::default());
        tasks.spawn_service(renew_loop(
            Arc::downgrade(&registry),
            registry.new_lease.clone(),
            conn,
            client_id,
            lease,
            batch_size,
        ));
        Self { registry, lease }
    }

    /// Holds renewed now.
    pub(crate) fn watched(&self) -> usize {
        self.registry.entries().len()
    }

    /// Starts renewing the hold of `hold` (a key and holder field) the `renewal` way (or counts
    /// one more guard on it), after an acquire sent at `sent` was confirmed, with the watchdog
    /// timeout as its lease; returns the lease the guards of this hold share. `tag` and `owner`
    /// are what its metrics and spans carry.
    pub(crate) fn register(
        &self,
        renewal: &Arc<dyn Renewal>,
        hold: &NameField,
        sent: Instant,
        tag: &Tag,
        owner: Option<Owner>,
    ) -> Arc<Lease> {
        self.register_leased(renewal, hold, sent, self.lease, tag, owner)
    }

    /// [`register`](Self::register) with a lease of the hold's own: renewed every third of
    /// it.
    pub(crate) fn register_leased(
        &self,
        renewal: &Arc<dyn Renewal>,
        hold: &NameField,
        sent: Instant,
        lease: Duration,
        tag: &Tag,
        owner: Option<Owner>,
    ) -> Arc<Lease> {
        let watched = Watched {
            kind: renewal.kind(),
            hold: hold.clone(),
        };
        let fresh = || Entry {
            guards: 0,
            lease: Lease::new(sent, lease, tag.clone()),
            lease_time: lease,
            renewal: renewal.clone(),
            tag: tag.clone(),
            owner,
        };
        let mut entries = self.registry.entries();
        let entry = entries.entry(watched).or_insert_with(fresh);
        if entry.lease.is_lost() {
            // A hold found lost earlier: this acquire starts a new one.
            *entry = fresh();
        }
        entry.guards += 1;
        entry.lease.confirm(sent, entry.lease_time);
        let shared_lease = entry.lease.clone();
        drop(entries);
        if lease != self.lease {
            // It may need a tick grid the task does not run yet.
            self.registry.new_lease.notify_one();
        }
        shared_lease
    }

    /// One guard stops relying on the renewal; the last one stops it. Does nothing when the
    /// entry is gone or belongs to a later hold (its lease differs).
    pub(crate) fn unregister(&self, kind: &'static str, hold: &NameField, lease: &Arc<Lease>) {
        let watched = Watched {
            kind,
            hold: hold.clone(),
        };
        let mut entries = self.registry.entries();
        if let Some(entry) = entries.get_mut(&watched)
            && Arc::ptr_eq(&entry.lease, lease)
        {
            entry.guards -= 1;
            if entry.guards == 0 {
                entries.remove(&watched);
            }
        }
    }
}

async fn renew_loop(
    registry: Weak<Registry>,
    new_lease: Arc<Notify>,
    conn: Arc<Conn>,
    client_id: Arc<str>,
    lease: Duration,
    batch_size: usize,
) {
    // One tick grid per lease: the holds of a lease are renewed every third of it, together.
    // The watchdog timeout's grid starts with the task, as Redisson's scheduler does; another
    // lease's grid starts when its first hold registers.
    let started = Instant::now();
    let mut grids: BTreeMap<Duration, Instant> = BTreeMap::new();
    grids.insert(lease, started + period_of(lease));
    loop {
        let next = grids
            .values()
            .min()
            .copied()
            .unwrap_or(started + period_of(lease));
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = new_lease.notified() => {}
        }
        let Some(live) = registry.upgrade() else {
            return;
        };
        let now = Instant::now();
        // The leases in use: a new one gets its grid, one without holds loses its own.
        let leases: std::collections::BTreeSet<Duration> =
            live.entries().values().map(|e| e.lease_time).collect();
        for l in &leases {
            grids.entry(*l).or_insert_with(|| now + period_of(*l));
        }
        grids.retain(|l, _| *l == lease || leases.contains(l));
        let due: Vec<Duration> = grids
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(l, _)| *l)
            .collect();
        if due.is_empty() {
            continue;
        }
        // Kind by kind: each kind has its own script, so its holds are batched on their own.
        let mut by_kind: BTreeMap<(Duration, &'static str), Vec<Renew>> = BTreeMap::new();
        for (watched, entry) in live.entries().iter() {
            if !due.contains(&entry.lease_time) {
                continue;
            }
            by_kind
                .entry((entry.lease_time, watched.kind))
                .or_default()
                .push(Renew {
                    watched: watched.clone(),
                    lease: entry.lease.clone(),
                    renewal: entry.renewal.clone(),
                    tag: entry.tag.clone(),
                    owner: entry.owner,
                });
        }
        drop(live);
        for l in &due {
            // On the grid; a tick missed by a whole period is delayed (tokio's
            // `MissedTickBehavior::Delay`): the next one a period from now.
            if let Some(at) = grids.get_mut(l) {
                let period = period_of(*l);
                *at = if *at + period > now {
                    *at + period
                } else {
                    now + period
                };
            }
        }
        for ((lease, _), holds) in &by_kind {
            renew_kind(&registry, &conn, &client_id, *lease, batch_size, holds).await;
        }
    }
}

/// The renewal period of a lease: a third of it (Redisson's `internalLockLeaseTime / 3`).
fn period_of(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(1))
}

/// Renews the holds of one kind and lease: drops those past their deadline, then renews the
/// others slot by slot (a script's keys share one slot in a cluster), in batches.
async fn renew_kind(
    registry: &Weak<Registry>,
    conn: &Conn,
    client_id: &str,
    lease: Duration,
    batch_size: usize,
    holds: &[Renew],
) {
    let lease_ms = lease.as_millis().to_string();
    // A hold past its deadline is not vouched for any more: its guards already report it
    // lost; renewing it now could extend a lock another holder has meanwhile.
    let (expired, due): (Vec<&Renew>, Vec<&Renew>) = holds.iter().partition(|r| r.lease.is_lost());
    for r in expired {
        r.span(client_id).in_scope(|| {
            tracing::warn!(lock = %r.watched.hold.name, holder = %r.watched.hold.field, "lock lost: no renewal was confirmed within its lease");
        });
        if let Some(live) = registry.upgrade() {
            live.remove(&r.watched, &r.lease);
        }
    }
    // Slot by slot in a cluster (a script's keys must share one slot), each group in batches
    // of at most `batch_size`, as Redisson's LockRenewalScheduler groups them.
    let mut groups: FastMap<SlotGroup, Vec<&Renew>> = FastMap::default();
    for r in due {
        groups
            .entry(conn.slot_group(&r.watched.hold.name))
            .or_default()
            .push(r);
    }
    // Several batches at once: on a cluster a tick has about one batch per slot in use, which
    // one after another (each with its replica `WAIT`) outlast the period.
    let in_flight = if conn.is_cluster() {
        CLUSTER_RENEWALS_IN_FLIGHT
    } else {
        RENEWALS_IN_FLIGHT
    };
    let batches = groups
        .values()
        .flat_map(|members| members.chunks(batch_size.max(1)));
    futures_util::stream::iter(batches)
        .for_each_concurrent(in_flight, |batch| {
            let span = observe::renewal_batch_span(batch[0].watched.kind, batch.len(), client_id);
            renew_batch(registry, conn, client_id, &lease_ms, lease, batch).instrument(span)
        })
        .await;
}

/// Renewal batches a tick has in flight at once on a single server (or Sentinel's master):
/// its batches are full (`batch_size` holds each), so a few at once renew 100,000 holds well
/// within the period, and the locks' calls never queue behind more than a few of them.
const RENEWALS_IN_FLIGHT: usize = 8;

/// Renewal batches a tick has in flight at once on a cluster, where it has about one batch per
/// slot in use (up to 16,384, of a few holds each): with 8 at once, 100,000 holds took longer
/// than the period to renew (S13: about two thirds of them lost at a 3 s lease before
/// per-node rounds, a few hundred after); 64 at once share their nodes' rounds and `WAIT`s and
/// renew them all within it (S13 on a 3+3 cluster: every lock held, renewal lag p99 7-142 ms
/// against 387-456 ms).
const CLUSTER_RENEWALS_IN_FLIGHT: usize = 64;

struct Renew {
    watched: Watched,
    lease: Arc<Lease>,
    renewal: Arc<dyn Renewal>,
    tag: Tag,
    owner: Option<Owner>,
}

impl Renew {
    /// The span of this hold's renewal result.
    fn span(&self, client_id: &str) -> tracing::Span {
        Subject {
            kind: self.tag.kind(),
            name: &self.watched.hold.name,
            client_id,
            owner: self.owner,
        }
        .renewal_span()
    }
}

/// Renews one batch of holds of one kind: confirms the lease of every hold still held,
/// reports the others lost.
async fn renew_batch(
    registry: &Weak<Registry>,
    conn: &Conn,
    client_id: &str,
    lease_ms: &str,
    lease: Duration,
    batch: &[&Renew],
) {
    let Some(first) = batch.first() else {
        return;
    };
    let mut invocation = first.renewal.script().prepare_invoke();
    invocation.arg(lease_ms);
    // Leases that end on the client's wall clock (permits) are valid from the instant their
    // milliseconds denote; the others from the send.
    let mut stamped = None;
    if first.renewal.batch_args() == BatchArgs::NowAndVerb {
        let verb = match conn.publish_command().await {
            Ok(verb) => verb,
            Err(e) => {
                tracing::warn!(error = %e, holds = batch.len(), "lease renewal failed; retrying at the next tick");
                batch.iter().for_each(|r| r.tag.renewal_failed());
                return;
            }
        };
        let (now, since) = crate::clock::epoch_ms_since();
        invocation.arg(now).arg(verb);
        stamped = Some(since);
    }
    for r in batch {
        r.renewal
            .add(&mut invocation, &r.watched.hold.name, &r.watched.hold.field);
    }
    let sent = stamped.unwrap_or_else(Instant::now);
    let call = Call::write("renew", &first.watched.hold.name, &invocation)
        .idempotent()
        .synced();
    let replies = match conn.call(call).await {
        Ok(Value::Array(replies)) if replies.len() == batch.len() => replies,
        Ok(other) => {
            tracing::warn!(reply = ?other, kind = first.watched.kind, "unexpected reply from a renewal script");
            batch.iter().for_each(|r| r.tag.renewal_failed());
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, holds = batch.len(), "lease renewal failed; retrying at the next tick");
            batch.iter().for_each(|r| r.tag.renewal_failed());
            return;
        }
    };
    let live = registry.upgrade();
    for (r, reply) in batch.iter().zip(replies) {
        let _span = r.span(client_id).entered();
        if matches!(reply, Value::Int(1)) {
            r.lease.confirm(sent, lease);
            r.tag.renewed();
            tracing::trace!("lease renewed");
        } else {
            tracing::warn!(lock = %r.watched.hold.name, holder = %r.watched.hold.field, "lock lost: the watchdog found its holder gone");
            r.lease.raise(Loss::Gone);
            if let Some(live) = &live {
                live.remove(&r.watched, &r.lease);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_renewed_every_third_of_it_as_redisson_schedules() {
        let config = crate::config::Config::default();
        assert_eq!(period_of(config.watchdog_timeout), Duration::from_secs(10));
        assert_eq!(
            period_of(Duration::from_millis(1500)),
            Duration::from_millis(500)
        );
        assert_eq!(
            period_of(Duration::from_millis(1)),
            Duration::from_millis(1)
        );
    }
}
