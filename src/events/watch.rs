//! The loop behind an [`EventStream`](super::EventStream): the subscriptions (observers of the
//! client's pub/sub connection), the reads, the timers.
//!
//! A read happens at the start; a few milliseconds after anything is heard (so that the
//! notifications and the message of one script arrive together); a follow-up after an unlock
//! message, to see who took the lock; when the last read's TTL runs out; and every poll
//! interval. After each read the channels are reconciled with what the snapshot shows: the
//! semaphore's or the latch's channel once the name is one, a fair lock's first queued
//! waiters' own channels (a fair unlock wakes only the head, on its channel).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::sync::mpsc;

use super::detect::{self, Channels, Read};
use super::event::{Event, Keyspace, Notice};
use crate::conn::Call;
use crate::error::{Error, Result};
use crate::inspect::{CounterHint, Inspect, StructureKind};
use crate::layout;
use crate::pubsub::{Observed, Subscription, WakePolicy};
use crate::shared::Shared;

/// How long after the first notice the read waits for the rest of what one script sent.
const COALESCE: Duration = Duration::from_millis(5);
/// How long after an unlock message the state is read once more, to see who took the lock.
const FOLLOW_UP: Duration = Duration::from_millis(100);
/// How long a difference nothing explains waits for a notice still on its way.
const SETTLE: Duration = Duration::from_millis(30);
/// After the last read's TTL ran out, how long before the read that sees the expiry.
const AFTER_EXPIRY: Duration = Duration::from_millis(15);
/// The shortest time between two reads that nothing asked for.
const MIN_GAP: Duration = Duration::from_millis(10);
/// How many of a fair lock's first queued waiters have their channel observed.
const FAIR_HEADS: usize = 8;

pub(super) struct Watch {
    shared: Arc<Shared>,
    name: String,
    hint: CounterHint,
    poll: Duration,
    keyspace: Keyspace,
    channels: Channels,
    tx: mpsc::UnboundedSender<Observed>,
    rx: mpsc::UnboundedReceiver<Observed>,
    subs: HashMap<String, Subscription>,
    last: Read,
    /// Notices heard and not yet told, with when they arrived.
    heard: Vec<(Notice, Instant)>,
    follow_up: Option<Instant>,
    /// After a failed read, the next one (at the next poll).
    retry_at: Option<Instant>,
    gap: bool,
    pending: VecDeque<Result<Event>>,
    done: bool,
}

/// `true` when `name` has a hash tag: a non-empty `{...}`, as Redis Cluster reads it.
fn has_hash_tag(name: &str) -> bool {
    name.find('{')
        .and_then(|open| name[open + 1..].find('}'))
        .is_some_and(|len| len > 0)
}

/// The database of the configuration's URL (0 in a cluster, or when it says none).
fn database(shared: &Shared) -> i64 {
    if shared.conn.is_cluster() {
        return 0;
    }
    redis::IntoConnectionInfo::into_connection_info(shared.config.url.as_str())
        .map(|info| info.redis_settings().db())
        .unwrap_or(0)
}

/// Reads `notify-keyspace-events` where the key lives.
async fn keyspace_status(shared: &Shared, name: &str) -> Keyspace {
    if shared.conn.is_cluster() && !has_hash_tag(name) {
        return Keyspace::Unsupported {
            reason: format!(
                "Redis Cluster: keyspace notifications are published only on the node holding \
                 the key, and {name:?} has no hash tag to route the subscription there"
            ),
        };
    }
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("notify-keyspace-events");
    match shared
        .conn
        .call(Call::read("keyspace settings", name, &cmd))
        .await
    {
        Ok(value) => match redis::from_redis_value::<Vec<String>>(value) {
            Ok(pair) if pair.len() == 2 => Keyspace::from_config(&pair[1]),
            Ok(other) => Keyspace::Unknown {
                reason: format!("CONFIG GET notify-keyspace-events answered {other:?}"),
            },
            Err(e) => Keyspace::Unknown {
                reason: format!("CONFIG GET notify-keyspace-events: {e}"),
            },
        },
        Err(e) => Keyspace::Unknown {
            reason: format!("CONFIG GET notify-keyspace-events: {e}"),
        },
    }
}

impl Watch {
    /// Subscribes, reads the first snapshot, and returns the loop with its first event.
    pub(super) async fn start(
        shared: Arc<Shared>,
        name: String,
        hint: CounterHint,
        poll: Duration,
        keyspace: bool,
    ) -> Result<(Self, Event)> {
        let keyspace = if keyspace {
            keyspace_status(&shared, &name).await
        } else {
            Keyspace::NotRequested
        };
        let keyspace_channel = match keyspace {
            Keyspace::NotRequested | Keyspace::Unsupported { .. } => None,
            _ => Some(format!("__keyspace@{}__:{name}", database(&shared))),
        };
        let channels = Channels {
            lock: layout::lock_channel(&name),
            rwlock: layout::rwlock_channel(&name),
            semaphore: layout::semaphore_channel(&name),
            latch: layout::latch_channel(&name),
            keyspace: keyspace_channel,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let mut subs = HashMap::new();
        let mut base = vec![
            (channels.lock.clone(), WakePolicy::Lock),
            (channels.rwlock.clone(), WakePolicy::Lock),
        ];
        if let Some(k) = &channels.keyspace {
            base.push((k.clone(), WakePolicy::Observe));
        }
        match hint {
            CounterHint::Semaphore => base.push((channels.semaphore.clone(), WakePolicy::Permits)),
            CounterHint::Latch => base.push((channels.latch.clone(), WakePolicy::Latch)),
            _ => {}
        }
        for (channel, policy) in base {
            let sub = shared.pubsub.observe(&channel, policy, tx.clone());
            sub.ready().await?;
            subs.insert(channel, sub);
        }
        let mut watch = Self {
            last: read(&shared, &name, hint).await?,
            shared,
            name,
            hint,
            poll,
            keyspace,
            channels,
            tx,
            rx,
            subs,
            heard: Vec::new(),
            follow_up: None,
            retry_at: None,
            gap: false,
            pending: VecDeque::new(),
            done: false,
        };
        // Heard before the first read (the subscription's own start): in it already.
        while watch.rx.try_recv().is_ok() {}
        watch.reconcile().await;
        let first = detect::watching(&watch.last, &watch.keyspace);
        Ok((watch, first))
    }

    pub(super) fn keyspace(&self) -> &Keyspace {
        &self.keyspace
    }

    /// The lock's channel, the read-write lock's, the others as they apply (sorted), the
    /// keyspace channel last.
    pub(super) fn channels(&self) -> Vec<String> {
        let base = [&self.channels.lock, &self.channels.rwlock];
        let mut others: Vec<String> = self
            .subs
            .keys()
            .filter(|c| !base.contains(c) && Some(*c) != self.channels.keyspace.as_ref())
            .cloned()
            .collect();
        others.sort();
        let mut channels: Vec<String> = base.into_iter().cloned().collect();
        channels.extend(others);
        channels.extend(self.channels.keyspace.iter().cloned());
        channels
    }

    pub(super) fn into_stream(mut self, first: Event) -> BoxStream<'static, Result<Event>> {
        self.pending.push_back(Ok(first));
        futures_util::stream::unfold(self, |mut watch| async move {
            let item = watch.next().await?;
            Some((item, watch))
        })
        .boxed()
    }

    async fn next(&mut self) -> Option<Result<Event>> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if self.done {
                return None;
            }
            if self.shared.ensure_open().is_err() {
                self.done = true;
                return Some(Err(Error::Shutdown));
            }
            self.wait().await;
            self.step().await;
        }
    }

    /// The next read's time when nothing is heard.
    fn next_read(&self) -> Instant {
        if let Some(at) = self.retry_at {
            return at;
        }
        let mut at = self.last.done + self.poll;
        if let Some(f) = self.follow_up {
            at = at.min(f);
        }
        if let Some(expires) = self.last.expires() {
            at = at.min(expires + AFTER_EXPIRY);
        }
        at.max(self.last.done + MIN_GAP)
    }

    /// Until something is heard or the next read is due.
    async fn wait(&mut self) {
        if self.heard.iter().any(|(_, t)| *t > self.last.sent) && self.retry_at.is_none() {
            // Heard while the last read was on its way: read again now.
            return;
        }
        let at = tokio::time::Instant::from_std(self.next_read());
        tokio::select! {
            observed = self.rx.recv() => {
                if let Some(observed) = observed {
                    self.take(observed);
                    tokio::time::sleep(COALESCE).await;
                    self.drain();
                    self.retry_at = None;
                }
            }
            () = tokio::time::sleep_until(at) => {}
        }
    }

    fn take(&mut self, observed: Observed) {
        match observed {
            Observed::Message { channel, payload } => {
                let notice = Notice {
                    channel,
                    payload: String::from_utf8_lossy(&payload).into_owned(),
                };
                if Some(&notice.channel) != self.channels.keyspace.as_ref() {
                    self.follow_up = Some(Instant::now() + FOLLOW_UP);
                }
                self.heard.push((notice, Instant::now()));
            }
            Observed::Gap => self.gap = true,
        }
    }

    fn drain(&mut self) {
        while let Ok(observed) = self.rx.try_recv() {
            self.take(observed);
        }
    }

    /// One read, and the events it shows.
    async fn step(&mut self) {
        self.drain();
        let sent = Instant::now();
        if self.follow_up.is_some_and(|f| f <= sent) {
            self.follow_up = None;
        }
        let now = match read(&self.shared, &self.name, self.hint).await {
            Ok(now) => now,
            Err(e) => {
                if matches!(e, Error::Shutdown) {
                    self.done = true;
                }
                self.retry_at = Some(Instant::now() + self.poll);
                self.pending.push_back(Err(e));
                return;
            }
        };
        self.retry_at = None;
        self.drain();
        let ctx = detect::Context {
            channels: &self.channels,
            keyspace_on: self.keyspace.is_on(),
        };
        if std::mem::take(&mut self.gap) {
            self.pending.push_back(Ok(detect::gap(&now)));
        }
        let definite = self.heard.iter().filter(|(_, t)| *t < sent).count();
        let notices: Vec<Notice> = self.heard.iter().map(|(n, _)| n.clone()).collect();
        let mut events = detect::classify(&ctx, &self.last, &now, &notices, definite);
        if !events.is_empty() && notices.is_empty() {
            // Nothing heard explains it: a notice may still be on its way.
            tokio::time::sleep(SETTLE).await;
            self.drain();
            if !self.heard.is_empty() {
                let notices: Vec<Notice> = self.heard.iter().map(|(n, _)| n.clone()).collect();
                let ctx = detect::Context {
                    channels: &self.channels,
                    keyspace_on: self.keyspace.is_on(),
                };
                events = detect::classify(&ctx, &self.last, &now, &notices, 0);
                self.heard.clear();
            }
        } else if events.is_empty() {
            // Only what came before the read is in it; the rest may be of the next change.
            self.heard.retain(|(_, t)| *t >= sent);
        } else {
            self.heard.clear();
        }
        self.pending.extend(events.into_iter().map(Ok));
        self.last = now;
        self.reconcile().await;
    }

    /// Observes the channels the last snapshot calls for, and drops those it no longer does.
    async fn reconcile(&mut self) {
        let s = &self.last.snapshot;
        let mut wanted: Vec<(String, WakePolicy)> = Vec::new();
        if matches!(
            s.kind,
            StructureKind::Semaphore | StructureKind::PermitSemaphore
        ) || self.hint == CounterHint::Semaphore
        {
            wanted.push((self.channels.semaphore.clone(), WakePolicy::Permits));
        }
        if s.kind == StructureKind::Latch || self.hint == CounterHint::Latch {
            wanted.push((self.channels.latch.clone(), WakePolicy::Latch));
        }
        if s.kind == StructureKind::Fair {
            for w in s.queue.iter().take(FAIR_HEADS) {
                wanted.push((
                    layout::fair_waiter_channel(&self.name, &w.field),
                    WakePolicy::Lock,
                ));
            }
        }
        let base = [
            Some(self.channels.lock.as_str()),
            Some(self.channels.rwlock.as_str()),
            self.channels.keyspace.as_deref(),
        ];
        self.subs.retain(|channel, _| {
            base.contains(&Some(channel.as_str())) || wanted.iter().any(|(w, _)| w == channel)
        });
        for (channel, policy) in wanted {
            if self.subs.contains_key(&channel) {
                continue;
            }
            let sub = self
                .shared
                .pubsub
                .observe(&channel, policy, self.tx.clone());
            match sub.ready().await {
                Ok(()) => {
                    self.subs.insert(channel, sub);
                }
                Err(e) => {
                    tracing::debug!(channel, error = %e, "an event stream's subscription failed; tried again after the next read");
                }
            }
        }
    }
}

/// One snapshot read, timed.
async fn read(shared: &Arc<Shared>, name: &str, hint: CounterHint) -> Result<Read> {
    let sent = Instant::now();
    let snapshot = Inspect::new(shared.clone(), name.to_owned())
        .counter_hint(hint)
        .run()
        .await?;
    Ok(Read {
        snapshot,
        sent,
        done: Instant::now(),
        at: SystemTime::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::has_hash_tag;

    #[test]
    fn hash_tags_as_redis_cluster_reads_them() {
        assert!(has_hash_tag("{order}:42"));
        assert!(has_hash_tag("a{b}c"));
        assert!(!has_hash_tag("order:42"));
        assert!(!has_hash_tag("{}x"));
        assert!(!has_hash_tag("a{b"));
    }
}
