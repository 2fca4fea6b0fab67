//! The client facade: the builder, and one factory per primitive. Everything the primitives
//! share lives in [`Shared`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;

use crate::config::Config;
use crate::credentials::CredentialsProvider;
use crate::error::{BuildError, Result};
use crate::hold::Record;
use crate::latch::CountDownLatch;
use crate::lock::{
    FairLock, FencedLock, Lock, Locks, NonReentrantFairLock, NonReentrantLock, RwLock, SpinLock,
    TokenLock,
};
use crate::names::NameMapper;
use crate::semaphore::{PermitExpirableSemaphore, Semaphore};
use crate::shared::{LastHandle, Shared};
use crate::tasks::Tasks;

/// A connection to Redis and the home of every lock made from it.
///
/// The counterpart of a `RedissonClient`: it has a random v4 UUID as its id (the first half of
/// every lock hash field it writes, formatted like Java's `UUID.toString()`), a pool of
/// connections for lock commands, one pub/sub connection shared by all its waiters, and one
/// watchdog task renewing the leases of its locks.
///
/// `Client` is cheap to clone (an `Arc`); clones share everything.
///
/// # Shut down before exit
///
/// **Call [`shutdown`](Self::shutdown) before the process (or the runtime) ends.** A dropped
/// [`LockGuard`](crate::LockGuard) (an early return, a `?`, a panic, a cancelled
/// `with_lock`) releases its lock in a background task of the client; a process that exits
/// before that task ran leaves the lock held, in Redis, until its lease ends (the watchdog
/// timeout, 30 s by default, or the explicit lease), and every other process waits that long.
/// `shutdown().await` completes every release already scheduled. When the last handle of a
/// client is dropped without it while releases are still pending, the client logs a
/// `tracing` warning.
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.lock("order:42").lock().await?;
/// drop(guard); // the release is scheduled, not done
/// client.shutdown().await; // done now: the lock is free for the next process
/// # Ok(())
/// # }
/// ```
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
    shared: Arc<Shared>,
    /// What every lock of the client gets: the shared state and the client's record of holds.
    locks: Locks,
    /// Shared by this client's clones only: warns when the last of them drops before
    /// [`shutdown`](Self::shutdown) with releases pending.
    #[allow(dead_code)]
    last_handle: Arc<LastHandle>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
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
        &self.shared.id
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// What the server (on a cluster: the master of slot 0) offers this client: sharded
    /// pub/sub, `CLIENT INFO` and `CLIENT KILL`, `PEXPIRETIME`, `WAIT`, and Lua scripts for
    /// this user. Probed once, by [`ClientBuilder::connect`] (which also acts on it and logs
    /// it at debug level) or else by the first call here; later calls return what was found.
    /// See docs/servers.md for what each server build offers.
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// let client = redisson_sync::Client::builder()
    ///     .url("redis://127.0.0.1:6379")
    ///     .connect()
    ///     .await?;
    /// let caps = client.capabilities().await?;
    /// println!("{caps}"); // e.g. "valkey 9.1.2: scripts yes, sharded pub/sub yes, ..."
    /// assert!(caps.scripts_allowed());
    /// client.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Connection`](crate::Error::Connection) or [`Error::Timeout`](crate::Error::Timeout)
    /// when the server cannot be reached (the probe is then tried again at the next call),
    /// [`Error::Shutdown`](crate::Error::Shutdown) after [`shutdown`](Self::shutdown).
    pub async fn capabilities(&self) -> Result<crate::conn::Capabilities> {
        self.shared.ensure_open()?;
        self.shared.conn.capabilities().await
    }

    /// What the client keeps in memory now, for leak checks and dashboards: subscribed
    /// channels, registered waiters, renewed holds, the record of holds per lock and holder,
    /// and background tasks still running. Cheap (a few mutexes taken in turn); no I/O. After
    /// every guard is released and every wait has ended, `channels`, `waiters`,
    /// `watched_holds`, `counted_holds` and `background_tasks` are 0.
    pub fn stats(&self) -> crate::observe::ClientStats {
        let (channels, waiters, observers) = self.shared.pubsub.sizes();
        let (record_slots, counted_holds) = self.locks.record.sizes();
        crate::observe::ClientStats {
            channels,
            waiters,
            observers,
            watched_holds: self.shared.watchdog.watched(),
            record_slots,
            counted_holds,
            background_tasks: self.shared.tasks.pending(),
        }
    }

    /// A reentrant lock named `name` (the Redis key, mapped by the client's [`NameMapper`] if it has one; Redisson's
    /// `getLock(name)`). Creating the handle does no I/O.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(&self.locks, self.map(name))
    }

    /// A fair lock named `name` (the Redis key, mapped by the client's [`NameMapper`] if it has one; Redisson's
    /// `getFairLock(name)`): waiters are served in arrival order. Creating the handle does no
    /// I/O.
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        FairLock::new(&self.locks, self.map(name))
    }

    /// A read-write lock named `name` (the Redis key, mapped by the client's [`NameMapper`] if it has one; Redisson's
    /// `getReadWriteLock(name)`), with its [`read_lock`](RwLock::read_lock) and
    /// [`write_lock`](RwLock::write_lock) halves. Creating the handle does no I/O.
    pub fn rw_lock(&self, name: impl Into<String>) -> RwLock {
        RwLock::new(&self.locks, self.map(name))
    }

    /// A fenced lock named `name` (Redisson's `getFencedLock(name)`): a reentrant lock whose
    /// every acquisition gets a fencing token. Creating the handle does no I/O.
    pub fn fenced_lock(&self, name: impl Into<String>) -> FencedLock {
        FencedLock::new(&self.locks, self.map(name))
    }

    /// A spin lock named `name` (Redisson's `getSpinLock(name)`): waiters poll with back-off
    /// instead of subscribing. Creating the handle does no I/O.
    pub fn spin_lock(&self, name: impl Into<String>) -> SpinLock {
        SpinLock::new(&self.locks, self.map(name))
    }

    /// A non-reentrant lock named `name` (Redisson 4.4's `getNonReentrantLock(name)`).
    /// Creating the handle does no I/O.
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> NonReentrantLock {
        NonReentrantLock::new(&self.locks, self.map(name))
    }

    /// A non-reentrant fair lock named `name` (Redisson 4.4's
    /// `getNonReentrantFairLock(name)`). Creating the handle does no I/O.
    pub fn non_reentrant_fair_lock(&self, name: impl Into<String>) -> NonReentrantFairLock {
        NonReentrantFairLock::new(&self.locks, self.map(name))
    }

    /// A counting semaphore named `name` (the Redis key, mapped by the client's [`NameMapper`] if it has one; Redisson's
    /// `getSemaphore(name)`). Creating the handle does no I/O.
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(self.shared.clone(), self.map(name))
    }

    /// A semaphore whose permits have ids and leases, named `name` (Redisson's
    /// `getPermitExpirableSemaphore(name)`). Creating the handle does no I/O.
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.shared.clone(), self.map(name))
    }

    /// A count-down latch named `name` (the Redis key, mapped by the client's [`NameMapper`] if it has one; Redisson's
    /// `getCountDownLatch(name)`). Creating the handle does no I/O.
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(self.shared.clone(), self.map(name))
    }

    /// A plain token lock named `name` (the Redis key, mapped by the client's [`NameMapper`] if it has one): `SET name <token> NX PX
    /// lease`, released by compare-and-delete. Not a Redisson structure; see [`TokenLock`].
    /// Creating the handle does no I/O.
    pub fn token_lock(&self, name: impl Into<String>) -> TokenLock {
        TokenLock::new(&self.locks, self.map(name))
    }

    /// Inspects whatever Redisson structure lives at `name`: `.await` it for a
    /// [`Snapshot`](crate::inspect::Snapshot) with the kind (see [`StructureKind`](crate::inspect::StructureKind)
    /// for how it is told from the layout), the TTL, the holders (this client's marked), the
    /// fair queue with its deadlines, read holds' markers, a fenced lock's token, permits and
    /// counts. One read-only script call: it never changes anything. Options (how to read a
    /// bare integer, the listing limit) are on [`Inspect`](crate::inspect::Inspect).
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// let snapshot = client.inspect("order:42").await?;
    /// println!("{} held by {} holder(s)", snapshot.kind, snapshot.holders.len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn inspect(&self, name: impl Into<String>) -> crate::inspect::Inspect {
        crate::inspect::Inspect::new(self.shared.clone(), self.map(name))
    }

    /// The events at `name`: `.await` it for an
    /// [`EventStream`](crate::events::EventStream) of what happens there (acquired,
    /// re-entered, released, expired, deleted, force-unlocked, with the holder the state
    /// tells), whatever the structure and whoever (Java or Rust) changes it. Built on the
    /// structure's channels and [snapshots](Self::inspect), plus keyspace notifications where
    /// the server has them on ([`Keyspace`](crate::events::Keyspace) says whether, and what is
    /// missed without them). Options are on [`Events`](crate::events::Events).
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use futures_util::StreamExt;
    ///
    /// let mut events = client.events("order:42").await?;
    /// while let Some(event) = events.next().await {
    ///     let event = event?;
    ///     println!("{} {:?} ({})", event.kind, event.holder, event.seen_by);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn events(&self, name: impl Into<String>) -> crate::events::Events {
        crate::events::Events::new(self.shared.clone(), self.map(name))
    }

    /// `name` as the client's [`NameMapper`] maps it: the name keys are derived from.
    fn map(&self, name: impl Into<String>) -> String {
        let name = name.into();
        if self.shared.names.is_identity() {
            name
        } else {
            self.shared.names.map(&name)
        }
    }

    /// `true` once [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.shared.tasks.is_shut_down()
    }

    /// Shuts the client down: new operations fail with [`Error::Shutdown`](crate::Error::Shutdown), waiters return
    /// [`Error::Shutdown`](crate::Error::Shutdown), the watchdog and pub/sub tasks stop, and every release already
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
        self.shared.tasks.shut_down();
        self.shared.tasks.drain().await;
        self.shared.conn.close();
    }
}

impl Config {
    /// Builds a [`Client`] from this configuration, on the current Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`BuildError`] when a setting is out of range, the URL is invalid, or no runtime is
    /// current.
    pub fn create_client(&self) -> Result<Client, BuildError> {
        ClientBuilder::new().config(self.clone()).build()
    }
}

/// Builds a [`Client`]; every setter has the name of the [`Config`] field it sets.
#[must_use = "builder does nothing itself, use `.build()` to build it"]
#[derive(Debug, Default)]
pub struct ClientBuilder {
    config: Config,
    names: Option<NameMapper>,
    credentials: Option<CredentialsProvider>,
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

    /// Connects to a Redis Cluster through these seed nodes ([`Config::cluster_nodes`]);
    /// [`url`](Self::url) is then ignored.
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use redisson_sync::{Client, config::PubSubMode};
    ///
    /// let client = Client::builder()
    ///     .cluster(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"])
    ///     .pubsub(PubSubMode::Auto) // as Redisson's default shardedSubscriptionMode
    ///     .connect()
    ///     .await?;
    /// client.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cluster<S: Into<String>>(mut self, nodes: impl IntoIterator<Item = S>) -> Self {
        self.config.cluster_nodes = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Connects to the master that these Sentinels monitor as `master`
    /// ([`Config::sentinel_nodes`], [`Config::sentinel_master`]; Redisson's
    /// `useSentinelServers()`), and follows its failovers. [`url`](Self::url) then only gives
    /// the database and the data nodes' credentials (see also [`username`](Self::username) and
    /// [`password`](Self::password)); the Sentinels' own credentials go in their URLs.
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use redisson_sync::Client;
    ///
    /// let client = Client::builder()
    ///     .sentinel(["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"], "mymaster")
    ///     .connect()
    ///     .await?;
    /// client.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn sentinel<S: Into<String>>(
        mut self,
        nodes: impl IntoIterator<Item = S>,
        master: impl Into<String>,
    ) -> Self {
        self.config.sentinel_nodes = nodes.into_iter().map(Into::into).collect();
        self.config.sentinel_master = master.into();
        self
    }

    /// Sets [`Config::username`]: the ACL user for the data nodes.
    pub fn username(mut self, user: impl Into<String>) -> Self {
        self.config.username = Some(user.into());
        self
    }

    /// Sets [`Config::password`]: the password for the data nodes.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.config.password = Some(password.into());
        self
    }

    /// Sets [`Config::pubsub`].
    pub fn pubsub(mut self, mode: crate::config::PubSubMode) -> Self {
        self.config.pubsub = mode;
        self
    }

    /// Sets [`Config::pool_size`].
    pub fn pool_size(mut self, size: usize) -> Self {
        self.config.pool_size = size;
        self
    }

    /// Sets [`Config::connections`].
    pub fn connections(mut self, connections: usize) -> Self {
        self.config.connections = connections;
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

    /// Sets [`Config::ping_interval`].
    pub fn ping_interval(mut self, interval: Duration) -> Self {
        self.config.ping_interval = interval;
        self
    }

    /// Sets [`Config::connect_timeout`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Sets [`Config::key_prefix`]: every name is used with this prefix (Redisson's
    /// `NameMapper` that prepends it).
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use redisson_sync::Client;
    ///
    /// let client = Client::builder()
    ///     .url("redis://127.0.0.1:6379")
    ///     .key_prefix("billing:")
    ///     .build()?;
    /// let guard = client.lock("order:42").lock().await?; // the key is billing:order:42
    /// assert_eq!(guard.name(), "billing:order:42");
    /// guard.unlock().await?;
    /// client.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.key_prefix = prefix.into();
        self
    }

    /// Maps every name the client is given with `mapper` (Redisson's `Config.setNameMapper`);
    /// for a plain prefix [`key_prefix`](Self::key_prefix) is enough (and serializes with the
    /// [`Config`]). Setting both is refused by [`build`](Self::build).
    pub fn name_mapper(mut self, mapper: NameMapper) -> Self {
        self.names = Some(mapper);
        self
    }

    /// Asks `provider` for the data nodes' login at every new connection (rotating tokens;
    /// see [`CredentialsProvider`]), over [`username`](Self::username),
    /// [`password`](Self::password) and the URL's.
    pub fn credentials_provider(mut self, provider: CredentialsProvider) -> Self {
        self.credentials = Some(provider);
        self
    }

    /// Sets [`Config::tls_ca_cert`]: with the `tls` feature, `rediss://` servers must present a
    /// certificate that chains to the CA certificates of this PEM file.
    pub fn tls_ca_cert(mut self, path: impl Into<String>) -> Self {
        self.config.tls_ca_cert = Some(path.into());
        self
    }

    /// Sets [`Config::tls_client_cert`] and [`Config::tls_client_key`]: with the `tls`
    /// feature, the client certificate (PEM) and its key presented to `rediss://` servers.
    pub fn tls_client_cert(mut self, cert: impl Into<String>, key: impl Into<String>) -> Self {
        self.config.tls_client_cert = Some(cert.into());
        self.config.tls_client_key = Some(key.into());
        self
    }

    /// Sets [`Config::sync_replicas`]: whether lock writes wait for the master's replicas
    /// (Redisson's `checkLockSyncedSlaves`).
    pub fn sync_replicas(mut self, mode: crate::config::SyncReplicas) -> Self {
        self.config.sync_replicas = mode;
        self
    }

    /// Sets [`Config::replica_sync_timeout`] (Redisson's `slavesSyncTimeout`).
    pub fn replica_sync_timeout(mut self, timeout: Duration) -> Self {
        self.config.replica_sync_timeout = timeout;
        self
    }

    /// Sets [`Config::metrics_name_label`].
    pub fn metrics_name_label(mut self, on: bool) -> Self {
        self.config.metrics_name_label = on;
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
        let names = match self.names {
            Some(_) if !self.config.key_prefix.is_empty() => {
                return Err(BuildError::InvalidConfig(
                    "key_prefix and name_mapper are both set: give the prefix in the mapper \
                     (NameMapper::new), or use key_prefix alone"
                        .into(),
                ));
            }
            Some(mapper) => mapper,
            None => NameMapper::prefix(self.config.key_prefix.as_str()),
        };
        let handle = match self.runtime {
            Some(h) => h,
            None => Handle::try_current().map_err(|_| BuildError::NoRuntime)?,
        };
        let shared = Arc::new(Shared::new(
            self.config,
            names,
            self.credentials,
            Tasks::new(handle),
        )?);
        Ok(Client {
            last_handle: Arc::new(LastHandle(shared.clone())),
            locks: Locks {
                shared: shared.clone(),
                record: Record::default(),
            },
            shared,
        })
    }

    /// [`build`](Self::build), then connects and checks the topology at once, so that a
    /// misconfiguration is reported at startup rather than by the first lock call: no seed
    /// node reachable, a single server given as a cluster or a cluster node given as a single
    /// server, or [`PubSubMode::Sharded`](crate::config::PubSubMode::Sharded) on a cluster without
    /// sharded pub/sub. In cluster mode it also settles the pub/sub flavour. It probes what
    /// the server offers ([`Client::capabilities`]): a server without Lua, or a user whose ACL
    /// rules refuse the script commands, fails here; a server without `CLIENT INFO` is a
    /// warning; one without `WAIT` turns replica sync off.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`](crate::Error::Unsupported) naming the commands the crate needs,
    /// [`Error::Topology`](crate::Error::Topology) naming the fix,
    /// [`Error::Connection`](crate::Error::Connection) (operation `"connect"`, the address) or
    /// [`Error::Timeout`](crate::Error::Timeout) when Redis cannot be reached, and
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) wrapping a [`BuildError`].
    pub async fn connect(self) -> Result<Client> {
        let client = self
            .build()
            .map_err(|e| crate::error::Error::InvalidArgument(e.to_string()))?;
        if let Err(e) = client.shared.conn.check().await {
            client.shutdown().await;
            return Err(e);
        }
        Ok(client)
    }
}
