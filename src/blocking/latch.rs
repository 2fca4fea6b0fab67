//! The count-down latch and inspection, blocking.

use std::time::Duration;

use super::handle::Blocking;
use crate::error::Result;
use crate::inspect::{CounterHint, Inspect, Snapshot};
use crate::latch::CountDownLatch;

impl Blocking<CountDownLatch> {
    /// The latch's name: its Redis key.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the count if the latch is not set (Redisson's `trySetCount`); `true` when set.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::try_set_count`];
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code (so for every
    /// method of this type).
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.rt
            .call("try_set_count", self.inner.try_set_count(count))
    }

    /// Counts down by one; at 0 the latch opens and its waiters wake (Redisson's
    /// `countDown`).
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::count_down`].
    pub fn count_down(&self) -> Result<()> {
        self.rt.call("count_down", self.inner.count_down())
    }

    /// The count now; 0 when the latch is open (Redisson's `getCount`).
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::count`].
    pub fn count(&self) -> Result<u64> {
        self.rt.call("count", self.inner.count())
    }

    /// Blocks until the latch is open (Redisson's `await()`).
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::await_open`].
    pub fn await_open(&self) -> Result<()> {
        self.rt.call("await_open", self.inner.await_open())
    }

    /// Blocks until the latch is open or `wait` has passed: `true` when open (Redisson's
    /// `await(time, unit)`).
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::await_for`].
    pub fn await_for(&self, wait: Duration) -> Result<bool> {
        self.rt.call("await_for", self.inner.await_for(wait))
    }
}

impl Blocking<Inspect> {
    /// How to read a positive integer string ([`Inspect::counter_hint`]).
    pub fn counter_hint(self, hint: CounterHint) -> Self {
        Self::new(self.inner.counter_hint(hint), self.rt)
    }

    /// Lists at most `limit` entries ([`Inspect::limit`]).
    pub fn limit(self, limit: usize) -> Self {
        Self::new(self.inner.limit(limit), self.rt)
    }

    /// Reads the snapshot, blocking for one read-only script call ([`Inspect::run`]).
    ///
    /// # Errors
    ///
    /// As [`Inspect::run`]; [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside
    /// async code.
    pub fn run(self) -> Result<Snapshot> {
        self.rt.call("inspect", self.inner.run())
    }
}
