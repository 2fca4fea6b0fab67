//! The transport: the subscriber connection and the task that owns it.
//!
//! One task per client holds a dedicated connection: classic `SUBSCRIBE` on a single server
//! (as Redisson uses outside Redis Cluster); in a cluster, a RESP3 cluster connection that
//! subscribes by the flavour the client settled on (`SSUBSCRIBE` on the slot's master,
//! `SUBSCRIBE`, or both, docs/LAYOUT.md §1.6). It subscribes the channels the registry has
//! waiters on, in order, hands every message to the registry, and keeps the connection honest:
//! it pings it every `ping_interval` while subscribed, and a connection that drops or does not
//! answer its `PING` within the command timeout is replaced. After a new connection is up,
//! every channel in use is subscribed again and every waiter is woken to re-check, since a
//! message may have been lost meanwhile.
//!
//! With Sentinel, a failover the client hears of (`+switch-master`) replaces the connection
//! the same way, since the old master may still be up and silent.
//!
//! In a cluster, Redis drops a sharded subscription when its slot moves (a failover, a
//! migration) and says so with a `sunsubscribe` push: the channel is subscribed again (the
//! cluster connection routes it to the slot's new master) and its waiters re-check at once.
//! A node connection the cluster connection lost and restored is re-subscribed by it; its
//! disconnection push wakes every waiter.
//!
//! Keyspace notifications (`__keyspace@<db>__:<key>`, observed by `crate::events`) are never
//! sharded messages: in a cluster they are subscribed the classic way whatever the flavour
//! (routed by the channel name, so to the key's node only when the key has a hash tag).

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::registry::Registry;
use crate::conn::{Conn, Flavour, Subscriber};
use crate::error::{Error, Result};

/// Back-off between reconnection attempts.
const RECONNECT_BACKOFF: [Duration; 4] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(500),
];

/// What the waiters ask of the transport.
#[derive(Debug)]
pub(crate) enum Command {
    /// Make sure `channel` is subscribed; report when Redis confirmed it.
    Subscribe {
        channel: String,
        done: oneshot::Sender<Result<()>>,
    },
    /// The last local waiter left `channel`.
    Unsubscribe { channel: String },
}

/// The task owning the subscriber connection.
pub(crate) struct Transport {
    registry: Weak<Registry>,
    conn: Arc<Conn>,
    commands: mpsc::UnboundedReceiver<Command>,
    /// Channels Redis confirmed on the current connection.
    subscribed: HashSet<String>,
    link: Option<Link>,
    ping_interval: Duration,
    command_timeout: Duration,
    /// A connection was up before: the next one is a reconnection (for the metrics).
    connected_before: bool,
    /// Changes when the server behind the connections changed (a Sentinel failover).
    topology: watch::Receiver<u64>,
}

/// The subscriber connection.
enum Link {
    Single(PubSubSink, PubSubStream),
    Cluster(
        ClusterConnection,
        mpsc::UnboundedReceiver<PushInfo>,
        Flavour,
    ),
}

impl Link {
    fn new(subscriber: Subscriber) -> Self {
        match subscriber {
            Subscriber::Single(pubsub) => {
                let (sink, stream) = pubsub.split();
                Self::Single(sink, stream)
            }
            Subscriber::Cluster(conn, pushes, flavour) => Self::Cluster(conn, pushes, flavour),
        }
    }

    async fn subscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        match self {
            Self::Single(sink, _) => sink.subscribe(channels).await,
            Self::Cluster(conn, _, flavour) => {
                let (keyspace, channels): (Vec<&String>, Vec<&String>) =
                    channels.iter().partition(|c| is_keyspace(c));
                if flavour.sharded {
                    // One slot per call: sharded channels of several slots cannot share one.
                    for channel in &channels {
                        conn.ssubscribe(channel.as_str()).await?;
                    }
                }
                if flavour.classic && !channels.is_empty() {
                    conn.subscribe(channels).await?;
                }
                for channel in keyspace {
                    conn.subscribe(channel.as_str()).await?;
                }
                Ok(())
            }
        }
    }

    async fn unsubscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Single(sink, _) => sink.unsubscribe(channel).await,
            Self::Cluster(conn, _, flavour) => {
                if is_keyspace(channel) {
                    return conn.unsubscribe(channel).await;
                }
                if flavour.sharded {
                    conn.sunsubscribe(channel).await?;
                }
                if flavour.classic {
                    conn.unsubscribe(channel).await?;
                }
                Ok(())
            }
        }
    }

    async fn ping(&mut self) -> redis::RedisResult<()> {
        match self {
            Self::Single(sink, _) => sink.ping::<Value>().await.map(drop),
            Self::Cluster(conn, ..) => redis::cmd("PING")
                .query_async::<Value>(conn)
                .await
                .map(drop),
        }
    }

    async fn next(&mut self) -> Event {
        match self {
            Self::Single(_, stream) => match stream.next().await {
                Some(msg) => Event::Message(
                    msg.get_channel_name().to_owned(),
                    msg.get_payload_bytes().to_vec(),
                ),
                None => Event::Lost,
            },
            Self::Cluster(_, pushes, _) => match pushes.recv().await {
                Some(push) => Event::push(push),
                None => Event::Lost,
            },
        }
    }
}

enum Event {
    Message(String, Vec<u8>),
    /// The connection is gone.
    Lost,
    /// Redis dropped a sharded subscription (its slot moved).
    Dropped(String),
    /// The cluster connection lost a node connection (it restores it and its subscriptions).
    Disconnected,
    /// Nothing for us (a subscription confirmation, a pong).
    Other,
    Command(Option<Command>),
    Ping,
    /// The server behind the connections changed (a Sentinel failover).
    Switched,
}

impl Event {
    fn push(push: PushInfo) -> Self {
        let text = |v: Option<&Value>| match v {
            Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            Some(Value::SimpleString(s)) => Some(s.clone()),
            _ => None,
        };
        match push.kind {
            PushKind::Message | PushKind::SMessage => {
                let payload = match push.data.get(1) {
                    Some(Value::BulkString(b)) => b.clone(),
                    Some(Value::SimpleString(s)) => s.clone().into_bytes(),
                    Some(Value::Int(n)) => n.to_string().into_bytes(),
                    _ => Vec::new(),
                };
                match text(push.data.first()) {
                    Some(channel) => Self::Message(channel, payload),
                    None => Self::Other,
                }
            }
            PushKind::SUnsubscribe => match text(push.data.first()) {
                Some(channel) => Self::Dropped(channel),
                None => Self::Other,
            },
            PushKind::Disconnection => Self::Disconnected,
            _ => Self::Other,
        }
    }
}

impl Transport {
    pub(crate) fn new(
        registry: Weak<Registry>,
        conn: Arc<Conn>,
        commands: mpsc::UnboundedReceiver<Command>,
        ping_interval: Duration,
    ) -> Self {
        let command_timeout = conn.command_timeout();
        let topology = conn.topology_changes();
        Self {
            topology,
            registry,
            conn,
            commands,
            subscribed: HashSet::new(),
            link: None,
            ping_interval,
            command_timeout,
            connected_before: false,
        }
    }

    pub(crate) async fn run(mut self) {
        let mut next_ping = Instant::now() + self.ping_interval;
        loop {
            if self.link.is_none() && self.has_waiters() {
                self.reconnect().await;
                next_ping = Instant::now() + self.ping_interval;
            }
            let keep_alive = self.link.is_some() && !self.subscribed.is_empty();
            let event = match &mut self.link {
                Some(link) => tokio::select! {
                    biased;
                    event = link.next() => event,
                    cmd = self.commands.recv() => Event::Command(cmd),
                    () = tokio::time::sleep_until(next_ping), if keep_alive => Event::Ping,
                    changed = self.topology.changed() => match changed {
                        Ok(()) => Event::Switched,
                        // The connections are gone with the client.
                        Err(_) => Event::Command(None),
                    },
                },
                None => Event::Command(self.commands.recv().await),
            };
            match event {
                Event::Command(None) => return,
                Event::Command(Some(cmd)) => self.handle(cmd).await,
                Event::Message(channel, payload) => {
                    if let Some(registry) = self.registry.upgrade() {
                        registry.dispatch(&channel, &payload);
                    }
                }
                Event::Lost => {
                    tracing::warn!("pub/sub connection lost; reconnecting");
                    self.drop_link();
                }
                Event::Dropped(channel) => self.resubscribe(channel).await,
                Event::Switched => {
                    tracing::info!("the master changed; moving the pub/sub connection to it");
                    // The next connection opens to the new master; after it every channel is
                    // subscribed again and every waiter re-checks.
                    self.drop_link();
                }
                Event::Disconnected => {
                    tracing::debug!("a pub/sub node connection dropped; waiters re-check");
                    if let Some(registry) = self.registry.upgrade() {
                        registry.wake_everyone();
                    }
                }
                Event::Other => {}
                Event::Ping => {
                    next_ping = Instant::now() + self.ping_interval;
                    self.ping().await;
                }
            }
        }
    }

    /// Redis dropped the sharded subscription of `channel` (its slot moved): subscribes it
    /// again, on the slot's new master, and wakes its waiters, who may have missed a message.
    async fn resubscribe(&mut self, channel: String) {
        if !self.subscribed.contains(&channel) {
            // Our own unsubscription's confirmation.
            return;
        }
        tracing::debug!(
            channel,
            "sharded subscription dropped by Redis (slot moved); subscribing again"
        );
        crate::observe::pubsub_reconnected();
        let limit = self.command_timeout;
        if let Some(link) = &mut self.link
            && let Err(e) = bounded(limit, link.subscribe(std::slice::from_ref(&channel))).await
        {
            tracing::warn!(channel, error = %e, "re-subscribing a moved channel failed; reconnecting");
            self.drop_link();
        }
        if let Some(registry) = self.registry.upgrade() {
            registry.wake_channel(&channel);
        }
    }

    fn has_waiters(&self) -> bool {
        self.registry.upgrade().is_some_and(|r| !r.is_empty())
    }

    fn drop_link(&mut self) {
        self.link = None;
        self.subscribed.clear();
    }

    /// One keep-alive round trip; a connection that does not answer is replaced.
    async fn ping(&mut self) {
        let Some(link) = &mut self.link else {
            return;
        };
        let limit = self.command_timeout;
        match tokio::time::timeout(limit, link.ping()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "pub/sub PING failed; replacing the connection");
                self.drop_link();
            }
            Err(_) => {
                tracing::warn!(
                    ?limit,
                    "pub/sub connection did not answer PING; replacing it"
                );
                self.drop_link();
            }
        }
    }

    async fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Subscribe { channel, done } => {
                // Every waiter of the channel may have left while the command was queued:
                // subscribing now would only cost a SUBSCRIBE and its UNSUBSCRIBE.
                let wanted = self
                    .registry
                    .upgrade()
                    .is_some_and(|r| r.contains(&channel));
                if !wanted {
                    let _ = done.send(Ok(()));
                    return;
                }
                let result = self.ensure_subscribed(&channel).await;
                let _ = done.send(result);
            }
            Command::Unsubscribe { channel } => {
                let still_wanted = self
                    .registry
                    .upgrade()
                    .is_some_and(|r| r.contains(&channel));
                if still_wanted || !self.subscribed.remove(&channel) {
                    return;
                }
                let limit = self.command_timeout;
                if let Some(link) = &mut self.link
                    && let Err(e) = bounded(limit, link.unsubscribe(&channel)).await
                {
                    tracing::debug!(channel, error = %e, "UNSUBSCRIBE failed; reconnecting");
                    self.drop_link();
                }
            }
        }
    }

    async fn ensure_subscribed(&mut self, channel: &str) -> Result<()> {
        if self.link.is_none() {
            // Subscribes every channel with waiters, this one included.
            self.reconnect().await;
        }
        if self.subscribed.contains(channel) {
            return Ok(());
        }
        let limit = self.command_timeout;
        let Some(link) = &mut self.link else {
            return Err(Error::Shutdown);
        };
        match bounded(limit, link.subscribe(&[channel.to_owned()])).await {
            Ok(()) => {
                self.subscribed.insert(channel.to_owned());
                Ok(())
            }
            Err(e) => {
                // Unconfirmed: the connection is broken or stalled; start over (the reconnect
                // subscribes every channel again and wakes every waiter).
                self.drop_link();
                Err(e)
            }
        }
    }

    /// Opens the connection and subscribes every channel that has waiters.
    async fn connect(&mut self) -> Result<()> {
        let mut link = Link::new(self.conn.subscriber().await?);
        let wanted = match self.registry.upgrade() {
            Some(r) => r.names(),
            None => return Err(Error::Shutdown),
        };
        if !wanted.is_empty() {
            bounded(self.command_timeout, link.subscribe(&wanted)).await?;
        }
        self.subscribed = wanted.into_iter().collect();
        self.link = Some(link);
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
                Ok(()) => {
                    if std::mem::replace(&mut self.connected_before, true) {
                        crate::observe::pubsub_reconnected();
                        tracing::debug!("pub/sub connection re-established");
                    }
                    break;
                }
                Err(e) => {
                    let pause = RECONNECT_BACKOFF[attempt.min(RECONNECT_BACKOFF.len() - 1)];
                    tracing::warn!(error = %e, ?pause, "pub/sub reconnection failed");
                    attempt += 1;
                    tokio::time::sleep(pause).await;
                }
            }
        }
        if let Some(registry) = self.registry.upgrade() {
            registry.wake_everyone();
        }
    }
}

/// A keyspace notification channel: classic pub/sub only, even in a sharded cluster.
fn is_keyspace(channel: &str) -> bool {
    channel.starts_with("__keyspace@")
}

/// Runs a subscription command with the command timeout.
async fn bounded(limit: Duration, op: impl Future<Output = redis::RedisResult<()>>) -> Result<()> {
    match tokio::time::timeout(limit, op).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(Error::Timeout {
            operation: "subscribe",
            after: limit,
        }),
    }
}
