//! Pub/sub waiting: one subscription connection per client, shared by all its waiters.
//!
//! Mirrors Redisson's `PublishSubscribe` / `LockPubSub` (REDISSON_LAYOUT.md §1.10): waiters on
//! the same channel share one subscription, reference-counted; a `0` message wakes one local
//! waiter, a `1` wakes them all. One background task owns the connection: it sends
//! SUBSCRIBE/UNSUBSCRIBE in order, dispatches messages, and after the connection drops it
//! reconnects, resubscribes every channel in use and wakes every waiter to re-check, since a
//! message may have been lost meanwhile.
//!
//! Of the local waiters on one channel, one at a time is the *re-checker*
//! ([`Subscription::claim_recheck`]): only it re-checks the lock every `recheck_interval` on its
//! own; the others sleep until a message or the lock's TTL, as Redisson's waiters do. So parked
//! waiters cost Redis nothing while they wait, however many there are.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::connection::Connections;
use crate::error::{Error, Result};

/// Redisson `LockPubSub.UNLOCK_MESSAGE`: wake one waiter per client.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// Redisson `LockPubSub.READ_UNLOCK_MESSAGE`: wake every waiter.
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

/// Back-off between reconnection attempts of the pub/sub connection.
const RECONNECT_BACKOFF: [Duration; 4] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(500),
];

#[derive(Debug)]
struct Entry {
    refs: usize,
    notify: Arc<Notify>,
    /// Set while one of the channel's waiters is its re-checker.
    rechecker: Arc<AtomicBool>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Channels with at least one local waiter.
    channels: Mutex<HashMap<String, Entry>>,
}

enum Command {
    Subscribe {
        channel: String,
        done: oneshot::Sender<Result<()>>,
    },
    Unsubscribe {
        channel: String,
    },
}

/// The client's pub/sub service.
#[derive(Debug)]
pub(crate) struct PubSub {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
}

impl PubSub {
    /// Starts the service's task on `handle`. It connects lazily, on the first subscription,
    /// and stops when `shutdown` is cancelled.
    pub(crate) fn start(
        connections: Arc<Connections>,
        handle: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> Self {
        let shared = Arc::new(Shared::default());
        let (commands, rx) = mpsc::unbounded_channel();
        let task = Task {
            shared: Arc::downgrade(&shared),
            connections,
            commands: rx,
            subscribed: HashSet::new(),
            conn: None,
        };
        handle.spawn(async move {
            tokio::select! {
                () = task.run() => {}
                () = shutdown.cancelled() => {}
            }
        });
        Self { shared, commands }
    }

    /// Registers a waiter on `channel`. The registration counts at once (a message dispatched
    /// after this call reaches the returned [`Subscription`]'s notifier); await
    /// [`Subscription::ready`] to know that Redis confirmed the subscription.
    pub(crate) fn subscribe(&self, channel: &str) -> Subscription {
        let (notify, rechecker) = {
            let mut channels = lock(&self.shared.channels);
            let entry = channels.entry(channel.to_owned()).or_insert_with(|| Entry {
                refs: 0,
                notify: Arc::new(Notify::new()),
                rechecker: Arc::new(AtomicBool::new(false)),
            });
            entry.refs += 1;
            (entry.notify.clone(), entry.rechecker.clone())
        };
        Subscription {
            channel: channel.to_owned(),
            notify,
            rechecker,
            is_rechecker: AtomicBool::new(false),
            shared: self.shared.clone(),
            commands: self.commands.clone(),
        }
    }
}

/// One waiter's share of a channel subscription; dropping it releases the share (the last one
/// unsubscribes).
#[derive(Debug)]
pub(crate) struct Subscription {
    channel: String,
    notify: Arc<Notify>,
    /// The channel's re-checker flag, shared by its waiters.
    rechecker: Arc<AtomicBool>,
    /// This waiter holds the flag.
    is_rechecker: AtomicBool,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Subscription {
    /// Waits until Redis has confirmed the subscription.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the registration stays until the `Subscription` is dropped.
    pub(crate) async fn ready(&self) -> Result<()> {
        let (done, rx) = oneshot::channel();
        self.commands
            .send(Command::Subscribe {
                channel: self.channel.clone(),
                done,
            })
            .map_err(|_| Error::Shutdown)?;
        rx.await.map_err(|_| Error::Shutdown)?
    }

    /// The notifier woken by messages on this channel (and on reconnection).
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }

    /// `true` when this waiter is (or now becomes) the channel's re-checker: the one local
    /// waiter that re-checks the lock every `recheck_interval` on its own, in case a message
    /// was lost. The role is free again once its holder's subscription is dropped; the next
    /// waiter to wake takes it.
    pub(crate) fn claim_recheck(&self) -> bool {
        if self.is_rechecker.load(Ordering::Relaxed) {
            return true;
        }
        let claimed = self
            .rechecker
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if claimed {
            self.is_rechecker.store(true, Ordering::Relaxed);
        }
        claimed
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if *self.is_rechecker.get_mut() {
            self.rechecker.store(false, Ordering::Release);
        }
        let mut channels = lock(&self.shared.channels);
        let last = match channels.get_mut(&self.channel) {
            Some(entry) => {
                entry.refs -= 1;
                entry.refs == 0
            }
            None => false,
        };
        if last {
            channels.remove(&self.channel);
            drop(channels);
            let _ = self.commands.send(Command::Unsubscribe {
                channel: std::mem::take(&mut self.channel),
            });
        }
    }
}

/// The background task owning the pub/sub connection.
struct Task {
    shared: Weak<Shared>,
    connections: Arc<Connections>,
    commands: mpsc::UnboundedReceiver<Command>,
    /// Channels Redis confirmed on the current connection.
    subscribed: HashSet<String>,
    conn: Option<(PubSubSink, PubSubStream)>,
}

impl Task {
    async fn run(mut self) {
        loop {
            if self.conn.is_none() && self.has_waiters() {
                self.reconnect().await;
            }
            let event = match &mut self.conn {
                Some((_, stream)) => tokio::select! {
                    biased;
                    msg = stream.next() => Event::Message(msg),
                    cmd = self.commands.recv() => Event::Command(cmd),
                },
                None => Event::Command(self.commands.recv().await),
            };
            match event {
                Event::Command(None) => return,
                Event::Command(Some(cmd)) => self.handle(cmd).await,
                Event::Message(Some(msg)) => self.dispatch(&msg),
                Event::Message(None) => {
                    tracing::warn!("pub/sub connection lost; reconnecting");
                    self.drop_connection();
                }
            }
        }
    }

    fn has_waiters(&self) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|s| !lock(&s.channels).is_empty())
    }

    fn drop_connection(&mut self) {
        self.conn = None;
        self.subscribed.clear();
    }

    async fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Subscribe { channel, done } => {
                let result = self.ensure_subscribed(&channel).await;
                let _ = done.send(result);
            }
            Command::Unsubscribe { channel } => {
                let still_wanted = self
                    .shared
                    .upgrade()
                    .is_some_and(|s| lock(&s.channels).contains_key(&channel));
                if still_wanted || !self.subscribed.remove(&channel) {
                    return;
                }
                let limit = self.connections.command_timeout();
                if let Some((sink, _)) = &mut self.conn
                    && let Err(e) = bounded(limit, sink.unsubscribe(&channel)).await
                {
                    tracing::debug!(channel, error = %e, "UNSUBSCRIBE failed; reconnecting");
                    self.drop_connection();
                }
            }
        }
    }

    async fn ensure_subscribed(&mut self, channel: &str) -> Result<()> {
        if self.conn.is_none() {
            // Subscribes every channel with waiters, this one included.
            self.reconnect().await;
        }
        if self.subscribed.contains(channel) {
            return Ok(());
        }
        let limit = self.connections.command_timeout();
        let Some((sink, _)) = &mut self.conn else {
            return Err(Error::Shutdown);
        };
        match bounded(limit, sink.subscribe(channel)).await {
            Ok(()) => {
                self.subscribed.insert(channel.to_owned());
                Ok(())
            }
            Err(e) => {
                // Unconfirmed: the connection is broken or stalled; start over (the reconnect
                // resubscribes every channel and wakes every waiter).
                self.drop_connection();
                Err(e)
            }
        }
    }

    /// Opens the connection and subscribes every channel that has waiters.
    async fn connect(&mut self) -> Result<()> {
        let (mut sink, stream) = self.connections.pubsub().await?.split();
        let wanted: Vec<String> = match self.shared.upgrade() {
            Some(s) => lock(&s.channels).keys().cloned().collect(),
            None => return Err(Error::Shutdown),
        };
        if !wanted.is_empty() {
            bounded(self.connections.command_timeout(), sink.subscribe(&wanted)).await?;
        }
        self.subscribed = wanted.into_iter().collect();
        self.conn = Some((sink, stream));
        Ok(())
    }

    /// (Re)connects while any channel has waiters, then wakes every waiter: a message may
    /// have been lost while the connection was down.
    async fn reconnect(&mut self) {
        let mut attempt = 0;
        loop {
            if !self.has_waiters() {
                return;
            }
            match self.connect().await {
                Ok(()) => break,
                Err(e) => {
                    let pause = RECONNECT_BACKOFF[attempt.min(RECONNECT_BACKOFF.len() - 1)];
                    tracing::warn!(error = %e, ?pause, "pub/sub reconnection failed");
                    attempt += 1;
                    tokio::time::sleep(pause).await;
                }
            }
        }
        if let Some(shared) = self.shared.upgrade() {
            for entry in lock(&shared.channels).values() {
                entry.notify.notify_waiters();
                entry.notify.notify_one();
            }
        }
    }

    fn dispatch(&self, msg: &redis::Msg) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let channel = msg.get_channel_name();
        let channels = lock(&shared.channels);
        let Some(entry) = channels.get(channel) else {
            return;
        };
        match msg.get_payload_bytes() {
            p if p == UNLOCK_MESSAGE.as_bytes() => entry.notify.notify_one(),
            p if p == READ_UNLOCK_MESSAGE.as_bytes() => {
                entry.notify.notify_waiters();
                entry.notify.notify_one();
            }
            other => tracing::debug!(channel, payload = ?other, "ignoring pub/sub message"),
        }
    }
}

/// Runs a subscription command with the client's command timeout.
async fn bounded(limit: Duration, op: impl Future<Output = redis::RedisResult<()>>) -> Result<()> {
    match tokio::time::timeout(limit, op).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(Error::Timeout {
            operation: "subscribe",
            after: limit,
        }),
    }
}

enum Event {
    Message(Option<redis::Msg>),
    Command(Option<Command>),
}

/// Locks a std mutex, ignoring poisoning (the maps stay consistent: no code panics while
/// holding them).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
