//! The count-down latch, compatible with Redisson's `RCountDownLatch` (docs/LAYOUT.md §6.6):
//! its scripts (`lua/latch/`), its channel, and waiting for it to open through the wait engine
//! with the latch wake policy (`0` opens, `1` closes).

use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Cmd;

use crate::conn::{Call, Script};
use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::layout;
use crate::object::{Object, object_methods};
use crate::observe::Subject;
use crate::pubsub::WakePolicy;
use crate::reply::{bool_reply, int_reply};
use crate::shared::Shared;
use crate::wait::{self, Acquire, Step, Strategy};

/// `lua/latch/try_set.lua`: RedissonCountDownLatch.trySetCountAsync.
static TRY_SET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/latch/try_set.lua")));

/// `lua/latch/count_down.lua`: RedissonCountDownLatch.countDownAsync.
static COUNT_DOWN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/latch/count_down.lua")));

/// `lua/latch/delete.lua`: RedissonCountDownLatch.deleteAsync.
static DELETE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/latch/delete.lua")));

/// Redisson `CountDownLatchPubSub.ZERO_COUNT_MESSAGE`: the latch opened.
const ZERO_COUNT_MESSAGE: &str = "0";
/// Redisson `CountDownLatchPubSub.NEW_COUNT_MESSAGE`: the latch was set (or reset).
const NEW_COUNT_MESSAGE: &str = "1";

/// A distributed count-down latch: Redisson's `RCountDownLatch`.
///
/// The latch is the Redis string `name` holding the count. [`count_down`](Self::count_down)
/// decrements it; at zero the key is deleted and `0` is published on
/// `redisson_countdownlatch__channel__{name}`, which opens the latch for every waiter here and
/// in Java. A missing key counts as 0: the latch is open. Once open it can be set again with
/// [`try_set_count`](Self::try_set_count) (which publishes `1`), so a latch can be reused
/// round after round.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let ready = client.count_down_latch("batch:17:ready");
/// ready.try_set_count(3).await?;
/// // ... three workers, in Rust or Java, each call count_down() when ready ...
/// ready.await_open().await?; // returns once all three did
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    name: Arc<str>,
    /// `redisson_countdownlatch__channel__{N}`.
    channel: Arc<str>,
    /// The latch's one key, `N`, for the object methods.
    keys: [Arc<str>; 1],
}

impl Object for Inner {
    fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    /// `latch/delete.lua`: Redisson's `deleteAsync`, which publishes the new-count message.
    async fn delete(&self) -> Result<bool> {
        self.usable()?;
        let verb = self.shared.conn.publish_command().await?;
        let mut invocation = DELETE.prepare_invoke();
        invocation
            .key(&*self.name)
            .key(&*self.channel)
            .arg(NEW_COUNT_MESSAGE)
            .arg(verb);
        let call = Call::write("delete", &self.name, &invocation).idempotent();
        bool_reply("latch/delete.lua", self.shared.conn.call(call).await?)
    }
}

object_methods!(
    CountDownLatch,
    field: inner,
    make: "client.count_down_latch(\"batch:ready\")",
    keys: "It acts on the latch's key `name` (Redisson's `RCountDownLatch` has no expiry \
        methods: this crate's addition; a latch that expires is open).",
    delete: "Deletes the latch, as Redisson's `delete()` does: `1` is then published (the \
        new-count message). Waiters stay waiting: a missing latch is open, but they learn it \
        at their next check (the next message, or within `recheck_interval`). A key of another \
        type is [`Error::WrongType`](crate::Error::WrongType), and nothing is deleted.",
    watchdog: "",
);

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.inner.name)
            .field("client_id", &self.inner.shared.id)
            .finish()
    }
}

impl CountDownLatch {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        let channel = layout::latch_channel(&name).into();
        let name: Arc<str> = name.into();
        Self {
            inner: Arc::new(Inner {
                keys: [name.clone()],
                channel,
                shared,
                name,
            }),
        }
    }

    /// The latch's name: its Redis key.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Sets the count if the latch does not exist (it is open): `true` if set (and `1`
    /// published: the latch is closed again), `false` if a count is already there.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a count of 0 (a latch at 0 is open: there is nothing to
    /// set) or above `i64::MAX`; [`Error::WrongType`]; [`Error::Redis`], [`Error::Timeout`].
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        if count == 0 || count > i64::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "a latch count must be between 1 and 2^63 - 1, got {count}"
            )));
        }
        let inner = &self.inner;
        inner.usable()?;
        let verb = inner.shared.conn.publish_command().await?;
        let mut invocation = TRY_SET.prepare_invoke();
        invocation
            .key(&*inner.name)
            .key(&*inner.channel)
            .arg(NEW_COUNT_MESSAGE)
            .arg(count)
            .arg(verb);
        let call = Call::write("try_set_count", &inner.name, &invocation).idempotent();
        bool_reply("latch/try_set.lua", inner.shared.conn.call(call).await?)
    }

    /// Counts down by one; at zero the latch opens (its key is deleted and `0` published).
    /// Counting down an open latch does nothing. Like Redisson's `countDown`, it is sent once,
    /// never again after a lost reply (a second run would count twice).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn count_down(&self) -> Result<()> {
        let inner = &self.inner;
        inner.usable()?;
        let verb = inner.shared.conn.publish_command().await?;
        let mut invocation = COUNT_DOWN.prepare_invoke();
        invocation
            .key(&*inner.name)
            .key(&*inner.channel)
            .arg(ZERO_COUNT_MESSAGE)
            .arg(verb);
        let call = Call::write("count_down", &inner.name, &invocation);
        int_reply("latch/count_down.lua", inner.shared.conn.call(call).await?).map(|_| ())
    }

    /// The count (0 when the latch does not exist: open; Redisson's `getCount()`).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn count(&self) -> Result<u64> {
        self.inner.usable()?;
        self.inner.count().await
    }

    /// Waits until the count is zero (Redisson's `await()`), woken by the `0` message of the
    /// last `count_down`; one waiter per client also re-checks every `recheck_interval`, so a
    /// lost message costs at most that long.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Shutdown`], Redis errors that are not transient.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: waiting changes nothing in Redis.
    pub async fn await_open(&self) -> Result<()> {
        wait::acquire(&self.inner.shared, self.open()?).await
    }

    /// Waits at most `wait` until the count is zero: `true` if it opened in time. Returns
    /// within `wait` plus 100 ms, also when Redis stalls.
    ///
    /// # Errors
    ///
    /// As [`await_open`](Self::await_open).
    ///
    /// # Cancel safety
    ///
    /// As [`await_open`](Self::await_open).
    pub async fn await_for(&self, wait: Duration) -> Result<bool> {
        let opened = wait::try_acquire(&self.inner.shared, self.open()?, wait).await?;
        Ok(opened.is_some())
    }

    /// The wait for the latch to open, as the engine drives it.
    fn open(&self) -> Result<Arc<LatchOpen>> {
        self.inner.usable()?;
        Ok(Arc::new(LatchOpen {
            inner: self.inner.clone(),
        }))
    }
}

impl Inner {
    /// The client is open, and the latch's name can be used on its servers: in a cluster a
    /// latch name must not contain `{`, since Redisson wraps the whole name in braces for
    /// the channel (`redisson_countdownlatch__channel__{N}`, docs/LAYOUT.md §1.2), which
    /// then hashes to another slot than the latch key.
    fn usable(&self) -> Result<()> {
        self.shared.ensure_open()?;
        if self.shared.conn.is_cluster() && self.name.contains('{') {
            return Err(Error::Topology(format!(
                "count-down latch name {:?} cannot be used on Redis Cluster: Redisson's latch \
                 channel wraps the whole name in braces, so with a '{{' in the name the channel \
                 falls in another slot than the latch and its scripts would fail with \
                 CROSSSLOT; use a name without braces; nothing was written",
                self.name
            )));
        }
        Ok(())
    }

    async fn count(&self) -> Result<u64> {
        let cmd = Cmd::get(&*self.name);
        let reply = self
            .shared
            .conn
            .call(Call::read("count", &self.name, &cmd))
            .await?;
        // A count below zero cannot stay (count_down deletes it); read it as open.
        Ok(u64::try_from(int_reply("GET", reply)?).unwrap_or(0))
    }
}

/// Waiting for a latch to open, as the wait engine drives it: an "attempt" reads the count and
/// is granted at zero. It writes nothing, so there is nothing to resolve or undo.
struct LatchOpen {
    inner: Arc<Inner>,
}

impl Acquire for LatchOpen {
    type Grant = ();
    type Pending = ();

    fn subject(&self) -> Subject<'_> {
        Subject {
            kind: "latch",
            name: &self.inner.name,
            client_id: &self.inner.shared.id,
            owner: None,
        }
    }

    fn strategy(&self) -> Strategy {
        Strategy::PubSub {
            channel: self.inner.channel.to_string(),
            policy: WakePolicy::Latch,
        }
    }

    fn attempt(
        &self,
        _wait: Option<Duration>,
        _limit: Duration,
        _contended: bool,
    ) -> BoxFuture<'_, Step<(), ()>> {
        Box::pin(async move {
            match self.inner.count().await {
                Ok(0) => Step::Granted(()),
                // No expiry to hint at: a message (or the re-check) wakes the waiter.
                Ok(_) => Step::Busy(None),
                Err(e) => Step::Failed(e),
            }
        })
    }

    fn resolve(&self, (): ()) -> BoxFuture<'_, Result<Option<()>>> {
        Box::pin(async { Ok(None) })
    }

    fn undo(&self, (): ()) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}
