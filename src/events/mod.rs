//! Lock events: a [`Stream`] of what happens at a name
//! ([`Client::events`](crate::Client::events)): acquired, re-entered, released, expired,
//! deleted, force-unlocked, with the holder the state tells.
//!
//! Built on what the CLI's `watch` reads: the structure's channels (the unlock messages of
//! every lock kind, a fair lock's head-waiter channels, a semaphore's and a latch's), heard
//! through the client's own pub/sub connection as an *observer* (sharded channels in a cluster
//! when the client's pub/sub mode uses them), plus the key's keyspace notifications
//! (`__keyspace@<db>__:<name>`) where the server has them on; and a
//! [`Snapshot`](crate::inspect::Snapshot) read after each of them, after a short follow-up, at
//! the moment the last read's TTL runs out and every poll interval. Each event comes from the
//! difference between two snapshots; what was heard between them says *why* (see
//! [`SeenBy`] and the table on [`EventKind`]):
//!
//! - `detect`: the difference and its classification (no I/O, unit-tested);
//! - `watch`: the loop: subscriptions, reads, timers.

mod detect;
mod event;
mod watch;

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use futures_util::stream::BoxStream;

use crate::error::{Error, Result};
use crate::inspect::CounterHint;
use crate::shared::Shared;

pub use event::{Event, EventKind, Keyspace, Notice, SeenBy};

/// The default of [`Events::poll_interval`].
const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// A stream of events at one name, made by [`Client::events`](crate::Client::events):
/// `.await` it (after setting options) for the [`EventStream`], which is subscribed by then.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), redisson_sync::Error> {
/// use futures_util::StreamExt;
/// use redisson_sync::{Client, events::EventKind};
///
/// let client = Client::open("redis://127.0.0.1:6379").unwrap();
/// let mut events = client.events("order:42").await?;
/// println!("keyspace notifications: {}", events.keyspace());
/// while let Some(event) = events.next().await {
///     let event = event?;
///     if event.kind == EventKind::Expired {
///         println!("{:?} let its lease run out", event.holder);
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[must_use = "an event stream does nothing until awaited"]
pub struct Events {
    shared: Arc<Shared>,
    name: String,
    hint: CounterHint,
    poll: Duration,
    keyspace: bool,
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events")
            .field("name", &self.name)
            .field("hint", &self.hint)
            .field("poll", &self.poll)
            .field("keyspace", &self.keyspace)
            .finish()
    }
}

impl Events {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        Self {
            shared,
            name,
            hint: CounterHint::Auto,
            poll: DEFAULT_POLL,
            keyspace: true,
        }
    }

    /// How the snapshots read a bare integer
    /// ([`Inspect::counter_hint`](crate::inspect::Inspect::counter_hint)).
    pub fn counter_hint(mut self, hint: CounterHint) -> Self {
        self.hint = hint;
        self
    }

    /// How often the state is read when nothing was heard (default 1 s): the delay after
    /// which a change that publishes nothing (an acquisition of a free lock without keyspace
    /// notifications) is seen.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll = every;
        self
    }

    /// Whether to use keyspace notifications where the server has them on (default `true`).
    pub fn keyspace(mut self, on: bool) -> Self {
        self.keyspace = on;
        self
    }

    /// Subscribes (waiting for Redis to confirm), reads the first snapshot and returns the
    /// stream, whose first event is [`EventKind::Watching`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero poll interval; [`Error::Redis`],
    /// [`Error::Timeout`] when a subscription or the first read fails; [`Error::Shutdown`];
    /// [`Error::WrongType`] when the name holds something that is not a Redisson structure.
    pub async fn start(self) -> Result<EventStream> {
        if self.poll.is_zero() {
            return Err(Error::InvalidArgument(
                "an event stream's poll interval must be above zero".into(),
            ));
        }
        self.shared.ensure_open()?;
        let (watch, first) =
            watch::Watch::start(self.shared, self.name, self.hint, self.poll, self.keyspace)
                .await?;
        let keyspace = watch.keyspace().clone();
        let channels = watch.channels();
        Ok(EventStream {
            keyspace,
            channels,
            inner: watch.into_stream(first),
        })
    }
}

impl IntoFuture for Events {
    type Output = Result<EventStream>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<EventStream>> + Send + 'static>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.start())
    }
}

/// The events at one name (see [`Client::events`](crate::Client::events)): a
/// [`Stream`] of `Result<`[`Event`]`>`, first [`EventKind::Watching`].
///
/// A failed read is an `Err` item and the stream goes on (the next read is at the next
/// notice or poll); it ends after [`Error::Shutdown`]. Dropping it ends its subscriptions.
/// It does its work while polled: events are told when the stream is read, and what changed
/// meanwhile is then one difference (several changes between two reads are told by what the
/// two reads show).
pub struct EventStream {
    keyspace: Keyspace,
    channels: Vec<String>,
    inner: BoxStream<'static, Result<Event>>,
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("keyspace", &self.keyspace)
            .field("channels", &self.channels)
            .finish()
    }
}

impl EventStream {
    /// Whether keyspace notifications are used, and what is missed without them
    /// ([`Keyspace::missed`]).
    pub fn keyspace(&self) -> &Keyspace {
        &self.keyspace
    }

    /// The channels subscribed at the start: the lock's, the read-write lock's, then the
    /// semaphore's, the latch's and the fair queue's first waiters' as they apply, and the
    /// keyspace channel last (channels are added and dropped as the structure changes).
    pub fn channels(&self) -> &[String] {
        &self.channels
    }
}

impl Stream for EventStream {
    type Item = Result<Event>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
