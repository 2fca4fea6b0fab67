//! The client: connections, pub/sub, watchdog and background tasks shared by every lock.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::config::Config;
use crate::connection::Connections;
use crate::error::{BuildError, Error, Result};
use crate::fair::FairLock;
use crate::lock::Lock;
use crate::naming;
use crate::pubsub::PubSub;
use crate::rwlock::RwLock;
use crate::watchdog::Watchdog;

/// A connection to Redis and the home of every lock made from it.
///
/// The counterpart of a `RedissonClient`: it has a random v4 UUID as its id (the first half of
/// every lock hash field it writes, formatted like Java's `UUID.toString()`), a pool of
/// connections for lock commands, one pub/sub connection shared by all its waiters, and one
/// watchdog task renewing the leases of its locks.
///
/// `Client` is cheap to clone (an `Arc`); clones share everything. Call
/// [`shutdown`](Self::shutdown) before the runtime ends so scheduled releases complete.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use redisson_sync::Client;
///
/// let client = Client::builder()
///     .url("redis://127.0.0.1:6379")
///     .watchdog_timeout(Duration::from_secs(30))
///     .build()?;
/// let guard = client.lock("order:42").lock().await?;
/// guard.unlock().await?;
/// client.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) id: String,
    pub(crate) config: Config,
    pub(crate) connections: Arc<Connections>,
    pub(crate) pubsub: PubSub,
    pub(crate) watchdog: Watchdog,
    pub(crate) publish_command: &'static str,
    tracker: TaskTracker,
    handle: Handle,
    shutdown: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Stops the pub/sub and watchdog tasks once the last clone is gone.
        self.shutdown.cancel();
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("config", &self.inner.config)
            .field("connections", &self.inner.connections)
            .field("shut_down", &self.is_shut_down())
            .finish()
    }
}

impl Client {
    /// A builder with the default [`Config`].
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// A client for the Redis server at `url`, with every other setting at its default.
    ///
    /// # Errors
    ///
    /// [`BuildError`] when the URL is invalid or no Tokio runtime is current.
    pub fn open(url: impl Into<String>) -> Result<Self, BuildError> {
        ClientBuilder::new().url(url).build()
    }

    /// This client's id: a random v4 UUID in Java's `UUID.toString()` format, the prefix of
    /// every lock hash field it writes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A reentrant lock named `name` (the Redis key, used as given; Redisson's
    /// `getLock(name)`). Creating the handle does no I/O.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into())
    }

    /// A fair lock named `name` (the Redis key, used as given; Redisson's
    /// `getFairLock(name)`): waiters are served in arrival order. Creating the handle does no
    /// I/O.
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        FairLock::new(self.clone(), name.into())
    }

    /// A read-write lock named `name` (the Redis key, used as given; Redisson's
    /// `getReadWriteLock(name)`), with its [`read_lock`](RwLock::read_lock) and
    /// [`write_lock`](RwLock::write_lock) halves. Creating the handle does no I/O.
    pub fn rw_lock(&self, name: impl Into<String>) -> RwLock {
        RwLock::new(self.clone(), name.into())
    }

    /// `true` once [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.inner.shutdown.is_cancelled()
    }

    /// Shuts the client down: new operations fail with [`Error::Shutdown`], waiters return
    /// [`Error::Shutdown`], the watchdog and pub/sub tasks stop, and every release already
    /// scheduled (guards dropped before this call) is completed before this returns. Redis calls
    /// still in flight get at most one more command timeout, so a stalled Redis delays this by
    /// about that much.
    ///
    /// Locks still held by live guards are not released: without renewal they expire after
    /// their lease (the watchdog timeout by default), as with Redisson's `shutdown()`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the shutdown has taken effect before the first await; dropping the future
    /// only stops waiting for the scheduled releases, which go on in the background.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
        self.inner.connections.close();
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.is_shut_down() {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// Resolves when the client is shut down.
    pub(crate) async fn shut_down(&self) {
        self.inner.shutdown.cancelled().await;
    }

    /// A token that keeps [`shutdown`](Self::shutdown) waiting (before it closes the
    /// connections) until it is dropped: for cleanup that must still reach Redis.
    pub(crate) fn shutdown_waits(&self) -> TaskTrackerToken {
        self.inner.tracker.token()
    }

    /// Spawns background work that [`shutdown`](Self::shutdown) waits for, on the client's
    /// runtime (works from any thread).
    pub(crate) fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.tracker.spawn_on(task, &self.inner.handle)
    }
}

/// Builds a [`Client`]; every setter has the name of the [`Config`] field it sets.
#[must_use = "builder does nothing itself, use `.build()` to build it"]
#[derive(Debug, Default)]
pub struct ClientBuilder {
    config: Config,
    runtime: Option<Handle>,
}

impl ClientBuilder {
    /// A builder with the default [`Config`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces every setting with `config`.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Sets [`Config::url`].
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.config.url = url.into();
        self
    }

    /// Sets [`Config::pool_size`].
    pub fn pool_size(mut self, size: usize) -> Self {
        self.config.pool_size = size;
        self
    }

    /// Sets [`Config::watchdog_timeout`].
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.config.watchdog_timeout = timeout;
        self
    }

    /// Sets [`Config::watchdog_batch_size`].
    pub fn watchdog_batch_size(mut self, size: usize) -> Self {
        self.config.watchdog_batch_size = size;
        self
    }

    /// Sets [`Config::recheck_interval`].
    pub fn recheck_interval(mut self, interval: Duration) -> Self {
        self.config.recheck_interval = interval;
        self
    }

    /// Sets [`Config::fair_wait_timeout`].
    pub fn fair_wait_timeout(mut self, timeout: Duration) -> Self {
        self.config.fair_wait_timeout = timeout;
        self
    }

    /// Sets [`Config::command_timeout`].
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.config.command_timeout = timeout;
        self
    }

    /// Sets [`Config::connect_timeout`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// The runtime that runs the client's background tasks (renewal, pub/sub, releases on
    /// drop). Default: the runtime current at [`build`](Self::build).
    pub fn runtime(mut self, handle: Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// Validates the settings and starts the client's background tasks. Connections open
    /// lazily, on first use.
    ///
    /// # Errors
    ///
    /// [`BuildError::InvalidConfig`] naming the setting that is out of range (zero durations,
    /// zero sizes), [`BuildError::Url`] for an unparsable URL, [`BuildError::NoRuntime`] when no
    /// runtime was given and none is current.
    pub fn build(self) -> Result<Client, BuildError> {
        self.config.validate()?;
        let handle = match self.runtime {
            Some(h) => h,
            None => Handle::try_current().map_err(|_| BuildError::NoRuntime)?,
        };
        let connections = Arc::new(Connections::new(&self.config)?);
        let shutdown = CancellationToken::new();
        let pubsub = PubSub::start(connections.clone(), &handle, shutdown.clone());
        let watchdog = Watchdog::start(
            connections.clone(),
            self.config.watchdog_timeout,
            self.config.renew_interval(),
            self.config.watchdog_batch_size,
            &handle,
            shutdown.clone(),
        );
        Ok(Client {
            inner: Arc::new(Inner {
                id: naming::client_id(&uuid::Uuid::new_v4()),
                config: self.config,
                connections,
                pubsub,
                watchdog,
                publish_command: "PUBLISH",
                tracker: TaskTracker::new(),
                handle,
                shutdown,
            }),
        })
    }
}
