//! The lease watchdog: one renewal task per client (Redisson's `LockRenewalScheduler`,
//! REDISSON_LAYOUT.md §1.9).
//!
//! Guards of locks taken without an explicit lease register here. Every `watchdog_timeout / 3`
//! the task renews all registered locks, up to `watchdog_batch_size` keys per script call. A
//! lock whose holder field is gone (expired, force-unlocked, deleted) is dropped from renewal and
//! its [`LostSignal`] is raised, which the guards observe. Transient Redis errors are retried at
//! the next tick: the lease leaves two more periods of slack.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::connection::Connections;
use crate::kind::Renewal;
use crate::pubsub::lock;
use crate::scripts;

/// Raised once when a held lock is found lost; shared by every guard of the same hold.
#[derive(Debug)]
pub(crate) struct LostSignal(watch::Sender<bool>);

impl LostSignal {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self(watch::Sender::new(false)))
    }

    pub(crate) fn raise(&self) {
        self.0.send_replace(true);
    }

    pub(crate) fn is_raised(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the signal is raised.
    pub(crate) async fn raised(&self) {
        let mut rx = self.0.subscribe();
        // `wait_for` fails only when the sender is dropped, which cannot happen while `self`
        // lives.
        let _ = rx.wait_for(|lost| *lost).await;
    }
}

/// One watched hold: a lock key, the holder field to renew it for, and how.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Watched {
    pub(crate) key: String,
    pub(crate) field: String,
    pub(crate) renewal: Renewal,
}

#[derive(Debug)]
struct Entry {
    /// Guards currently relying on this renewal (reentrant holds register once each).
    guards: usize,
    lost: Arc<LostSignal>,
}

#[derive(Debug, Default)]
struct Registry {
    entries: Mutex<HashMap<Watched, Entry>>,
}

/// The client's watchdog.
#[derive(Debug)]
pub(crate) struct Watchdog {
    registry: Arc<Registry>,
}

impl Watchdog {
    /// Starts the renewal task on `handle`; it stops when `shutdown` is cancelled or the
    /// watchdog is dropped.
    pub(crate) fn start(
        connections: Arc<Connections>,
        lease: Duration,
        period: Duration,
        batch_size: usize,
        handle: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> Self {
        let registry = Arc::new(Registry::default());
        let task = renew_loop(
            Arc::downgrade(&registry),
            connections,
            lease,
            period,
            batch_size,
        );
        handle.spawn(async move {
            tokio::select! {
                () = task => {}
                () = shutdown.cancelled() => {}
            }
        });
        Self { registry }
    }

    /// Starts renewing `watched` (or counts one more guard on it) and returns its lost signal.
    pub(crate) fn register(&self, watched: Watched) -> Arc<LostSignal> {
        let mut entries = lock(&self.registry.entries);
        let entry = entries.entry(watched).or_insert_with(|| Entry {
            guards: 0,
            lost: LostSignal::new(),
        });
        entry.guards += 1;
        entry.lost.clone()
    }

    /// One guard stops relying on the renewal of `watched`; the last one stops it. Does nothing
    /// when the entry is already gone or belongs to a later hold (its signal differs).
    pub(crate) fn unregister(&self, watched: &Watched, lost: &Arc<LostSignal>) {
        let mut entries = lock(&self.registry.entries);
        if let Some(entry) = entries.get_mut(watched)
            && Arc::ptr_eq(&entry.lost, lost)
        {
            entry.guards -= 1;
            if entry.guards == 0 {
                entries.remove(watched);
            }
        }
    }
}

async fn renew_loop(
    registry: Weak<Registry>,
    connections: Arc<Connections>,
    lease: Duration,
    period: Duration,
    batch_size: usize,
) {
    let lease_ms = lease.as_millis().to_string();
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let snapshot: Vec<(Watched, Arc<LostSignal>)> = match registry.upgrade() {
            Some(r) => lock(&r.entries)
                .iter()
                .map(|(w, e)| (w.clone(), e.lost.clone()))
                .collect(),
            None => return,
        };
        // Plain holds and read holds take different scripts; each is batched on its own.
        let (hashes, reads): (Vec<_>, Vec<_>) = snapshot
            .into_iter()
            .partition(|(w, _)| w.renewal == Renewal::Hash);
        for batch in hashes.chunks(batch_size).chain(reads.chunks(batch_size)) {
            renew_batch(&registry, &connections, &lease_ms, batch).await;
        }
    }
}

/// Renews one batch of holds of the same [`Renewal`]; raises the lost signal of every hold
/// whose field is gone.
async fn renew_batch(
    registry: &Weak<Registry>,
    connections: &Connections,
    lease_ms: &str,
    batch: &[(Watched, Arc<LostSignal>)],
) {
    let script = match batch.first().map(|(w, _)| &w.renewal) {
        Some(Renewal::Read { .. }) => &*scripts::RWLOCK_RENEW_READ,
        _ => &*scripts::LOCK_RENEW,
    };
    let mut invocation = script.prepare_invoke();
    invocation.arg(lease_ms);
    for (watched, _) in batch {
        invocation.key(&watched.key).arg(&watched.field);
        if let Renewal::Read { marker_prefix } = &watched.renewal {
            invocation.arg(marker_prefix);
        }
    }
    let first_key = batch.first().map_or("", |(w, _)| w.key.as_str());
    let replies = match connections.script("renew", first_key, &invocation).await {
        Ok(Value::Array(replies)) if replies.len() == batch.len() => replies,
        Ok(other) => {
            tracing::warn!(reply = ?other, "unexpected reply from a renewal script");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, locks = batch.len(), "lease renewal failed; retrying at the next tick");
            return;
        }
    };
    let Some(registry) = registry.upgrade() else {
        return;
    };
    let mut entries = lock(&registry.entries);
    for ((watched, lost), reply) in batch.iter().zip(replies) {
        if matches!(reply, Value::Int(0)) {
            tracing::warn!(lock = %watched.key, holder = %watched.field, "lock lost: the watchdog found its holder gone");
            if entries
                .get(watched)
                .is_some_and(|e| Arc::ptr_eq(&e.lost, lost))
            {
                entries.remove(watched);
            }
            lost.raise();
        }
    }
}
