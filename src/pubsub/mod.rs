//! Pub/sub waiting: one subscription per channel and client, shared by all its waiters.
//!
//! Mirrors Redisson's `PublishSubscribe` (docs/LAYOUT.md §1.10): waiters on the same channel
//! share one subscription, reference-counted, and each channel has a [`WakePolicy`] saying what
//! a message means for them (a lock's `0` wakes one, `1` all; a semaphore's count wakes that
//! many; a latch's `0` opens it). Three parts:
//!
//! - the [`registry`] of waiters per channel and their wake-ups (no I/O);
//! - the [`transport`], a task owning the subscriber connection, which feeds the registry;
//! - [`Subscription`], one waiter's share of a channel.
//!
//! Besides waiters, a channel can have *observers* ([`PubSub::observe`]): they are handed
//! every message (and a [`Observed::Gap`] whenever the subscription was re-established, so
//! messages may have been lost), and wake nobody. The lock events of `crate::events` are
//! built on them.
//!
//! Of the local waiters on one channel, one at a time is the *re-checker*: only it re-checks
//! on its own every `recheck_interval` (the others sleep until a message or their hint, as
//! Redisson's waiters do), so parked waiters cost Redis nothing. When the re-checker leaves
//! (it got the lock, or gave up), the role is offered at once to a parked waiter, so a lost
//! message never costs more than about one re-check interval, however many waiters there are.

mod policy;
mod registry;
mod transport;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::{mpsc, oneshot};

use crate::conn::Conn;
use crate::error::{Error, Result};
use crate::tasks::Tasks;

pub(crate) use policy::WakePolicy;
pub(crate) use registry::Observed;
use registry::{Channel, Registry};
use transport::{Command, Transport};

/// Redisson `LockPubSub.UNLOCK_MESSAGE`: wakes one waiter per client.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// Redisson `LockPubSub.READ_UNLOCK_MESSAGE`: wakes every waiter.
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

/// The client's pub/sub service.
#[derive(Debug)]
pub(crate) struct PubSub {
    registry: Arc<Registry>,
    commands: mpsc::UnboundedSender<Command>,
    next_waiter: AtomicU64,
}

impl PubSub {
    /// Starts the transport as a service of `tasks`. It connects lazily, on the first
    /// subscription.
    pub(crate) fn start(conn: Arc<Conn>, ping_interval: Duration, tasks: &Tasks) -> Self {
        let registry = Arc::new(Registry::default());
        let (commands, rx) = mpsc::unbounded_channel();
        let transport = Transport::new(Arc::downgrade(&registry), conn, rx, ping_interval);
        tasks.spawn_service(transport.run());
        Self {
            registry,
            commands,
            next_waiter: AtomicU64::new(1),
        }
    }

    /// Registers a waiter on `channel`, whose messages wake by `policy`. The registration
    /// counts at once (a message dispatched after this call reaches the returned
    /// subscription's notifier); await [`Subscription::ready`] to know that Redis confirmed
    /// the subscription.
    pub(crate) fn subscribe(&self, channel: &str, policy: WakePolicy) -> Subscription {
        Subscription {
            channel: self.registry.register(channel, policy),
            waiter: self.next_waiter.fetch_add(1, Ordering::Relaxed),
            observer: false,
            registry: self.registry.clone(),
            commands: self.commands.clone(),
        }
    }

    /// `true` when some waiter of this client is registered on `channel` (a subscription is
    /// alive for it). Without any waiter on any channel it takes no lock.
    pub(crate) fn has_waiters(&self, channel: &str) -> bool {
        self.registry.any_waiters() && self.registry.waiters_on(channel) > 0
    }

    /// `true` when some waiter of this client is registered on any channel: cheap, an atomic
    /// read.
    pub(crate) fn any_waiters(&self) -> bool {
        self.registry.any_waiters()
    }

    /// Channels subscribed for this client, waiters and observers registered on them.
    pub(crate) fn sizes(&self) -> (usize, usize, usize) {
        self.registry.sizes()
    }

    /// Registers an observer of `channel` (whose waiters, if any, wake by `policy`): every
    /// message received on it is sent to `tx`, and [`Observed::Gap`] after every
    /// (re)subscription. It shares the channel's subscription as a waiter does; await
    /// [`Subscription::ready`] to know that Redis confirmed it.
    pub(crate) fn observe(
        &self,
        channel: &str,
        policy: WakePolicy,
        tx: mpsc::UnboundedSender<Observed>,
    ) -> Subscription {
        let waiter = self.next_waiter.fetch_add(1, Ordering::Relaxed);
        Subscription {
            channel: self.registry.observe(channel, policy, waiter, tx),
            waiter,
            observer: true,
            registry: self.registry.clone(),
            commands: self.commands.clone(),
        }
    }
}

/// One waiter's share of a channel subscription; dropping it releases the share (the last one
/// unsubscribes) and the re-checker role if it held it.
#[derive(Debug)]
pub(crate) struct Subscription {
    channel: Arc<Channel>,
    /// This waiter's id, for the re-checker role (an observer's id).
    waiter: u64,
    /// An observer's share ([`PubSub::observe`]), not a waiter's.
    observer: bool,
    registry: Arc<Registry>,
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
                channel: self.channel.name().to_owned(),
                done,
            })
            .map_err(|_| Error::Shutdown)?;
        rx.await.map_err(|_| Error::Shutdown)?
    }

    /// A future woken by a message (per the channel's policy) or after a reconnection.
    /// Enable it before the attempt it follows (tokio's `Notified::enable`), so that a
    /// message published meanwhile is not lost.
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.channel.notify().notified()
    }

    /// A future woken when the channel's re-checker leaves, offering its role.
    pub(crate) fn role_offered(&self) -> Notified<'_> {
        self.channel.role_offer().notified()
    }

    /// `true` when other waiters of this client are registered on this waiter's channel.
    pub(crate) fn has_company(&self) -> bool {
        self.registry.waiters_on(self.channel.name()) > 1
    }

    /// `true` when this waiter is (or now becomes) the channel's re-checker.
    pub(crate) fn claim_recheck(&self) -> bool {
        self.channel.claim_recheck(self.waiter)
    }

    /// `true` once a latch channel got its `0` (open), until a `1` closes it.
    #[allow(dead_code)] // the count-down latch waits on it (its issue follows this one)
    pub(crate) fn is_open(&self) -> bool {
        self.channel.is_open()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let last = if self.observer {
            self.registry.unobserve(&self.channel, self.waiter)
        } else {
            self.channel.release_recheck(self.waiter);
            self.registry.unregister(&self.channel)
        };
        if last {
            let _ = self.commands.send(Command::Unsubscribe {
                channel: self.channel.name().to_owned(),
            });
        }
    }
}
