//! Lock events, blocking: the [`EventStream`] of a name as an [`Iterator`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use super::handle::Blocking;
use super::runtime::Inner;
use crate::error::{Error, Result};
use crate::events::{Event, EventStream, Events, Keyspace};
use crate::inspect::CounterHint;

impl Blocking<Events> {
    /// How the snapshots read a bare integer ([`Events::counter_hint`]).
    pub fn counter_hint(self, hint: CounterHint) -> Self {
        Self::new(self.inner.counter_hint(hint), self.rt)
    }

    /// How often the state is read when nothing was heard ([`Events::poll_interval`]).
    pub fn poll_interval(self, every: Duration) -> Self {
        Self::new(self.inner.poll_interval(every), self.rt)
    }

    /// Whether to use keyspace notifications where the server has them on
    /// ([`Events::keyspace`]).
    pub fn keyspace(self, on: bool) -> Self {
        Self::new(self.inner.keyspace(on), self.rt)
    }

    /// Subscribes and reads the first snapshot ([`Events::start`]): the events as a blocking
    /// iterator, first [`EventKind::Watching`](crate::events::EventKind::Watching).
    ///
    /// # Errors
    ///
    /// As [`Events::start`]; [`Error::InAsyncContext`] inside async code.
    pub fn start(self) -> Result<EventIter> {
        let stream = self.rt.call("events", self.inner.start())?;
        Ok(EventIter {
            stream,
            rt: self.rt,
        })
    }
}

/// The events at one name, blocking ([`blocking::Client::events`](super::Client::events)):
/// an [`Iterator`] of `Result<`[`Event`]`>` over the async [`EventStream`], with its items and
/// its end. [`next`](Iterator::next) blocks until the next event; [`next_timeout`](Self::next_timeout)
/// waits at most a while. Dropping it ends its subscriptions.
///
/// The stream does its work while it is read (see [`EventStream`]): changes made between two
/// reads are told by what the two reads show. Inside async code each call returns
/// [`Error::InAsyncContext`] instead of blocking.
pub struct EventIter {
    stream: EventStream,
    rt: Arc<Inner>,
}

impl fmt::Debug for EventIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("EventIter").field(&self.stream).finish()
    }
}

impl EventIter {
    /// Whether keyspace notifications are used ([`EventStream::keyspace`]).
    pub fn keyspace(&self) -> &Keyspace {
        self.stream.keyspace()
    }

    /// The channels subscribed at the start ([`EventStream::channels`]).
    pub fn channels(&self) -> &[String] {
        self.stream.channels()
    }

    /// The next event if one comes within `wait`: `Ok(None)` when none did.
    ///
    /// # Errors
    ///
    /// A failed read, as the stream's items ([`EventStream`]); [`Error::Shutdown`] once the
    /// stream has ended; [`Error::InAsyncContext`] inside async code.
    pub fn next_timeout(&mut self, wait: Duration) -> Result<Option<Event>> {
        // The timer is made inside the future: on the runtime, when it runs.
        let next = async { tokio::time::timeout(wait, self.stream.next()).await };
        match self.rt.block("events", next)? {
            Err(_elapsed) => Ok(None),
            Ok(None) => Err(Error::Shutdown),
            Ok(Some(event)) => event.map(Some),
        }
    }
}

impl Iterator for EventIter {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Result<Event>> {
        match self.rt.block("events", self.stream.next()) {
            Ok(item) => item,
            Err(refused) => Some(Err(refused)),
        }
    }
}
