//! The blocking [`Client`] and its [`ClientBuilder`]: the async client built on a runtime of
//! its own, and one factory per primitive.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::handle::Blocking;
use super::lock::CompositePart;
use super::runtime::{Inner, Runtime, may_block};
use crate::client::{Client as AsyncClient, ClientBuilder as AsyncBuilder};
use crate::config::{Config, PubSubMode, SyncReplicas};
use crate::credentials::CredentialsProvider;
use crate::error::{BuildError, Result};
use crate::events::Events;
use crate::inspect::Inspect;
use crate::latch::CountDownLatch;
use crate::lock::{
    FairLock, FencedLock, Lock, NonReentrantFairLock, NonReentrantLock, RwLock, SpinLock, TokenLock,
};
use crate::multi::{MultiLock, RedLock};
use crate::names::NameMapper;
use crate::semaphore::{PermitExpirableSemaphore, Semaphore};

/// The name of the runtime's thread unless [`ClientBuilder::thread_name`] gives another.
const THREAD_NAME: &str = "redisson-sync-blocking";

/// A blocking client: the async [`Client`](crate::Client) on a runtime of its own, and the
/// home of every blocking primitive made from it (as `reqwest::blocking::Client` is to
/// `reqwest::Client`).
///
/// Every call blocks the calling thread until it is done and runs there, with the thread as
/// the lock owner (see [the module](super)); the client's runtime thread drives the I/O and
/// runs the background work: connections, pub/sub, the watchdog, releases of dropped guards.
/// Cheap to clone (an `Arc`); clones, primitives and guards share the runtime, which stops when
/// the last of them is dropped.
///
/// # Shut down before exit
///
/// Call [`shutdown`](Self::shutdown) before the process exits: it completes every release
/// that dropped guards scheduled (dropping the last handle does the same, where the thread may
/// block).
///
/// # Examples
///
/// ```rust,no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use std::time::Duration;
/// use redisson_sync::blocking::Client;
///
/// let client = Client::builder()
///     .url("redis://127.0.0.1:6379")
///     .watchdog_timeout(Duration::from_secs(30))
///     .connect()?;
/// let guard = client.lock("order:42").lock()?;
/// guard.unlock()?;
/// client.shutdown()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    rt: Arc<Inner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.rt.fmt(f)
    }
}

impl Client {
    /// A builder with the default [`Config`].
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// A client for the Redis server at `url`, every other setting at its default; connections
    /// open on first use (see [`ClientBuilder::connect`] to check at once).
    ///
    /// # Errors
    ///
    /// [`BuildError`] when the URL is invalid or the runtime could not start.
    pub fn open(url: impl Into<String>) -> Result<Self, BuildError> {
        ClientBuilder::new().url(url).build()
    }

    /// This client's id: the prefix of every lock hash field it writes
    /// ([`Client::id`](crate::Client::id)).
    pub fn id(&self) -> &str {
        self.rt.client.id()
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        self.rt.client.config()
    }

    /// What the client keeps in memory now ([`Client::stats`](crate::Client::stats)).
    pub fn stats(&self) -> crate::observe::ClientStats {
        self.rt.client.stats()
    }

    /// The async client inside, for async code: the same id, connections and locks (a lock
    /// taken through it is the same lock). Its background work runs on this client's runtime,
    /// which lives as long as a blocking handle does.
    pub fn as_async(&self) -> &AsyncClient {
        &self.rt.client
    }

    /// Makes any async primitive blocking on this client's runtime: usually one of
    /// [`as_async`](Self::as_async)'s (a [`MultiLock`](crate::MultiLock) of async locks, a
    /// lock with a custom back-off); one of another client works too while that client's
    /// runtime runs.
    pub fn wrap<P>(&self, primitive: P) -> Blocking<P> {
        Blocking::new(primitive, self.rt.clone())
    }

    /// A reentrant lock named `name` (Redisson's `getLock`; [`Client::lock`](crate::Client::lock)).
    /// No I/O.
    pub fn lock(&self, name: impl Into<String>) -> Blocking<Lock> {
        self.wrap(self.rt.client.lock(name))
    }

    /// A fair lock (Redisson's `getFairLock`). No I/O.
    pub fn fair_lock(&self, name: impl Into<String>) -> Blocking<FairLock> {
        self.wrap(self.rt.client.fair_lock(name))
    }

    /// A read-write lock, with its blocking [`read_lock`](Blocking::read_lock) and
    /// [`write_lock`](Blocking::write_lock) halves (Redisson's `getReadWriteLock`). No I/O.
    pub fn rw_lock(&self, name: impl Into<String>) -> Blocking<RwLock> {
        self.wrap(self.rt.client.rw_lock(name))
    }

    /// A fenced lock (Redisson's `getFencedLock`). No I/O.
    pub fn fenced_lock(&self, name: impl Into<String>) -> Blocking<FencedLock> {
        self.wrap(self.rt.client.fenced_lock(name))
    }

    /// A spin lock (Redisson's `getSpinLock`). No I/O.
    pub fn spin_lock(&self, name: impl Into<String>) -> Blocking<SpinLock> {
        self.wrap(self.rt.client.spin_lock(name))
    }

    /// A non-reentrant lock (Redisson 4.4's `getNonReentrantLock`). No I/O.
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> Blocking<NonReentrantLock> {
        self.wrap(self.rt.client.non_reentrant_lock(name))
    }

    /// A non-reentrant fair lock (Redisson 4.4's `getNonReentrantFairLock`). No I/O.
    pub fn non_reentrant_fair_lock(
        &self,
        name: impl Into<String>,
    ) -> Blocking<NonReentrantFairLock> {
        self.wrap(self.rt.client.non_reentrant_fair_lock(name))
    }

    /// A plain token lock (`SET name <token> NX PX`; [`TokenLock`](crate::TokenLock)). No
    /// I/O.
    pub fn token_lock(&self, name: impl Into<String>) -> Blocking<TokenLock> {
        self.wrap(self.rt.client.token_lock(name))
    }

    /// A counting semaphore (Redisson's `getSemaphore`). No I/O.
    pub fn semaphore(&self, name: impl Into<String>) -> Blocking<Semaphore> {
        self.wrap(self.rt.client.semaphore(name))
    }

    /// A semaphore whose permits have ids and leases (Redisson's
    /// `getPermitExpirableSemaphore`). No I/O.
    pub fn permit_expirable_semaphore(
        &self,
        name: impl Into<String>,
    ) -> Blocking<PermitExpirableSemaphore> {
        self.wrap(self.rt.client.permit_expirable_semaphore(name))
    }

    /// A count-down latch (Redisson's `getCountDownLatch`). No I/O.
    pub fn count_down_latch(&self, name: impl Into<String>) -> Blocking<CountDownLatch> {
        self.wrap(self.rt.client.count_down_latch(name))
    }

    /// An inspection of whatever Redisson structure lives at `name`: [`run`](Blocking::run)
    /// it for the [`Snapshot`](crate::inspect::Snapshot) ([`Client::inspect`](crate::Client::inspect)).
    pub fn inspect(&self, name: impl Into<String>) -> Blocking<Inspect> {
        self.wrap(self.rt.client.inspect(name))
    }

    /// The events at `name` ([`Client::events`](crate::Client::events)): set its options, then
    /// [`start`](Blocking::start) it for a blocking [`EventIter`](super::EventIter).
    pub fn events(&self, name: impl Into<String>) -> Blocking<Events> {
        self.wrap(self.rt.client.events(name))
    }

    /// A multi-lock over `locks`, blocking or async ones, taken in this order
    /// ([`MultiLock::new`](crate::MultiLock::new)). Locks of several kinds go in as
    /// [`boxed`](Blocking::boxed) handles or `Box<dyn DistributedLock>`.
    ///
    /// # Errors
    ///
    /// As [`MultiLock::new`](crate::MultiLock::new).
    pub fn multi_lock<I>(&self, locks: I) -> Result<Blocking<MultiLock>>
    where
        I: IntoIterator,
        I::Item: CompositePart,
    {
        let multi = MultiLock::new(locks.into_iter().map(CompositePart::into_lock))?;
        Ok(self.wrap(multi))
    }

    /// A RedLock over `locks` (each of its own client and server), blocking or async ones;
    /// blocks while each server tells its identity ([`RedLock::new`](crate::RedLock::new)).
    ///
    /// # Errors
    ///
    /// As [`RedLock::new`](crate::RedLock::new);
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code.
    pub fn red_lock<I>(&self, locks: I) -> Result<Blocking<RedLock>>
    where
        I: IntoIterator,
        I::Item: CompositePart,
    {
        let locks: Vec<_> = locks.into_iter().map(CompositePart::into_lock).collect();
        let red = self.rt.call("red_lock", RedLock::new(locks))?;
        Ok(self.wrap(red))
    }

    /// `true` once [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.rt.client.is_shut_down()
    }

    /// Shuts the client down and blocks until every release already scheduled (guards and
    /// permits dropped before this call) is done ([`Client::shutdown`](crate::Client::shutdown)):
    /// new calls fail with [`Error::Shutdown`](crate::Error::Shutdown), waiters return it, the
    /// watchdog stops (locks held by live guards expire with their lease). The runtime's
    /// thread stops when the last handle is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code: nothing was
    /// done (call `as_async().shutdown().await` there).
    pub fn shutdown(&self) -> Result<()> {
        self.rt.block("shutdown", self.rt.client.shutdown())
    }
}

/// Builds a blocking [`Client`]: the setters of the async
/// [`ClientBuilder`](crate::ClientBuilder) (any other through
/// [`from`](From::from) an async builder), and the runtime's thread name.
///
/// The runtime is the client's own: a current-thread Tokio runtime on a thread of its own
/// (an async builder's [`runtime`](crate::ClientBuilder::runtime) is replaced by it).
///
/// ```rust,no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use redisson_sync::{blocking, ClientBuilder};
///
/// // Any setting of the async builder:
/// let client = blocking::ClientBuilder::from(ClientBuilder::new().url("redis://127.0.0.1:6379"))
///     .thread_name("locks")
///     .build()?;
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
#[must_use = "builder does nothing itself, use `.build()` or `.connect()`"]
#[derive(Debug)]
pub struct ClientBuilder {
    builder: AsyncBuilder,
    thread_name: String,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self::from(AsyncBuilder::new())
    }
}

impl From<AsyncBuilder> for ClientBuilder {
    fn from(builder: AsyncBuilder) -> Self {
        Self {
            builder,
            thread_name: THREAD_NAME.into(),
        }
    }
}

impl From<Config> for ClientBuilder {
    fn from(config: Config) -> Self {
        Self::from(AsyncBuilder::new().config(config))
    }
}

/// Setters that hand their arguments to the async builder's setter of the same name.
macro_rules! forward {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        $(#[$doc])*
        pub fn $name(self, $($arg: $ty),*) -> Self {
            Self {
                builder: self.builder.$name($($arg),*),
                ..self
            }
        }
    )*};
}

impl ClientBuilder {
    /// A builder with the default [`Config`].
    pub fn new() -> Self {
        Self::default()
    }

    forward! {
        /// Replaces every setting with `config` ([`ClientBuilder::config`](crate::ClientBuilder::config)).
        config(config: Config);
        /// Sets [`Config::url`].
        url(url: impl Into<String>);
        /// Sets [`Config::username`].
        username(user: impl Into<String>);
        /// Sets [`Config::password`].
        password(password: impl Into<String>);
        /// Sets [`Config::pubsub`].
        pubsub(mode: PubSubMode);
        /// Sets [`Config::pool_size`].
        pool_size(size: usize);
        /// Sets [`Config::connections`].
        connections(connections: usize);
        /// Sets [`Config::watchdog_timeout`].
        watchdog_timeout(timeout: Duration);
        /// Sets [`Config::watchdog_batch_size`].
        watchdog_batch_size(size: usize);
        /// Sets [`Config::recheck_interval`].
        recheck_interval(interval: Duration);
        /// Sets [`Config::fair_wait_timeout`].
        fair_wait_timeout(timeout: Duration);
        /// Sets [`Config::command_timeout`].
        command_timeout(timeout: Duration);
        /// Sets [`Config::ping_interval`].
        ping_interval(interval: Duration);
        /// Sets [`Config::connect_timeout`].
        connect_timeout(timeout: Duration);
        /// Sets [`Config::key_prefix`].
        key_prefix(prefix: impl Into<String>);
        /// Maps every name with `mapper` ([`ClientBuilder::name_mapper`](crate::ClientBuilder::name_mapper)).
        name_mapper(mapper: NameMapper);
        /// Asks `provider` for the login at every new connection
        /// ([`ClientBuilder::credentials_provider`](crate::ClientBuilder::credentials_provider)).
        credentials_provider(provider: CredentialsProvider);
        /// Sets [`Config::tls_ca_cert`].
        tls_ca_cert(path: impl Into<String>);
        /// Sets [`Config::tls_client_cert`] and [`Config::tls_client_key`].
        tls_client_cert(cert: impl Into<String>, key: impl Into<String>);
        /// Sets [`Config::sync_replicas`].
        sync_replicas(mode: SyncReplicas);
        /// Sets [`Config::replica_sync_timeout`].
        replica_sync_timeout(timeout: Duration);
        /// Sets [`Config::metrics_name_label`].
        metrics_name_label(on: bool);
    }

    /// Connects to a Redis Cluster through these seed nodes
    /// ([`ClientBuilder::cluster`](crate::ClientBuilder::cluster)).
    pub fn cluster<S: Into<String>>(self, nodes: impl IntoIterator<Item = S>) -> Self {
        Self {
            builder: self.builder.cluster(nodes),
            ..self
        }
    }

    /// Connects to the master these Sentinels monitor as `master`
    /// ([`ClientBuilder::sentinel`](crate::ClientBuilder::sentinel)).
    pub fn sentinel<S: Into<String>>(
        self,
        nodes: impl IntoIterator<Item = S>,
        master: impl Into<String>,
    ) -> Self {
        Self {
            builder: self.builder.sentinel(nodes, master),
            ..self
        }
    }

    /// The name of the runtime's thread (default `redisson-sync-blocking`).
    pub fn thread_name(self, name: impl Into<String>) -> Self {
        Self {
            thread_name: name.into(),
            ..self
        }
    }

    /// Starts the runtime and builds the client on it; connections open on first use. Builds
    /// anywhere, inside async code too (only its calls are refused there).
    ///
    /// # Errors
    ///
    /// As [`ClientBuilder::build`](crate::ClientBuilder::build); [`BuildError::Runtime`] when
    /// the runtime's thread could not start.
    pub fn build(self) -> Result<Client, BuildError> {
        let runtime = Runtime::start(self.thread_name).map_err(BuildError::Runtime)?;
        let client = self.builder.runtime(runtime.handle().clone()).build()?;
        Ok(Client {
            rt: Arc::new(Inner::new(client, runtime)),
        })
    }

    /// [`build`](Self::build), then connects and checks the topology at once, blocking
    /// ([`ClientBuilder::connect`](crate::ClientBuilder::connect)).
    ///
    /// # Errors
    ///
    /// As [`ClientBuilder::connect`](crate::ClientBuilder::connect), a failed build as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument);
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code.
    pub fn connect(self) -> Result<Client> {
        may_block("connect")?;
        let runtime = Runtime::start(self.thread_name).map_err(|e| {
            crate::error::Error::InvalidArgument(BuildError::Runtime(e).to_string())
        })?;
        let builder = self.builder.runtime(runtime.handle().clone());
        let client = runtime.block("connect", builder.connect())??;
        Ok(Client {
            rt: Arc::new(Inner::new(client, runtime)),
        })
    }
}
