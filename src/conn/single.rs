//! One Redis server (at a fixed address, or the master Redis Sentinel names): a pool of
//! multiplexed connections for calls, and dedicated connections for the pub/sub transport.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use deadpool::managed::{self, Metrics, RecycleResult};
use redis::aio::{MultiplexedConnection, PubSub};
use redis::{AsyncConnectionConfig, Value};

use tokio::sync::watch;

use super::batch::Batch;
use super::call::{Body, Call, ServerClient};
use super::sentinel::Source;
use super::sync::{self, WaitFor, WaitReply};
use super::sync_batch::Rounds;
use super::tls::Tls;
use crate::config::Config;
use crate::credentials::CredentialsProvider;
use crate::error::{BuildError, Error, Result};
use crate::tasks::Tasks;

/// Creates multiplexed connections for the pool.
///
/// Calls share the multiplexed connections their lanes keep checked out (`Config::connections`
/// of them, two by default, all opened by the first call), so the requests of many tasks travel
/// pipelined; a lane gets another only when its own failed or was retired, one call at a time
/// (`Single::checkout`). Synced calls, which hold theirs until the reply, have a pool of their
/// own.
///
/// Unlike `deadpool_redis::Manager`, recycling does not send `UNWATCH` + `PING` on every
/// checkout (one extra round trip per lock operation). Instead, a connection whose call failed
/// with an I/O error or timed out is marked broken and replaced at its next checkout, and a
/// dropped-connection error retires every connection opened before it (a server restart breaks
/// them all at once, so one failed call is enough to renew the whole pool).
struct Manager {
    source: Arc<Source>,
    config: AsyncConnectionConfig,
    /// Bumped when a connection is found broken; older connections are not reused. Shared by
    /// both pools.
    generation: Arc<AtomicU64>,
}

/// A pooled connection and the generation it was opened in.
struct Pooled {
    conn: MultiplexedConnection,
    /// The connection as the server knows it, to cut off a request of unknown outcome.
    identity: Option<Arc<ServerClient>>,
    generation: u64,
    /// Set by a call that found the connection broken or stalled; it is then not reused.
    broken: Arc<AtomicBool>,
}

impl managed::Manager for Manager {
    type Type = Pooled;
    type Error = redis::RedisError;

    /// Boxed: opening a connection is rare, and its future (a Sentinel lookup, the connect,
    /// the `CLIENT INFO`) is large; inline, it would make every pool check-out's future, and
    /// so every call's, kilobytes larger, copied at each call.
    async fn create(&self) -> Result<Pooled, redis::RedisError> {
        Box::pin(self.open()).await
    }

    async fn recycle(&self, conn: &mut Pooled, _: &Metrics) -> RecycleResult<redis::RedisError> {
        self.recycled(conn)
    }
}

impl Manager {
    /// Opens one pooled connection: found (with Sentinel: asked for), connected, identified.
    async fn open(&self) -> Result<Pooled, redis::RedisError> {
        let generation = self.generation.load(Ordering::Acquire);
        let client = self.source.client().await?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        let identity = identify(&mut conn).await?;
        Ok(Pooled {
            conn,
            identity,
            generation,
            broken: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Whether a pooled connection may be used again.
    fn recycled(&self, conn: &Pooled) -> RecycleResult<redis::RedisError> {
        if conn.generation < self.generation.load(Ordering::Acquire) {
            Err(managed::RecycleError::message(
                "opened before a connection failure",
            ))
        } else if conn.broken.load(Ordering::Acquire) {
            Err(managed::RecycleError::message("a call on it failed"))
        } else {
            Ok(())
        }
    }
}

/// Asks the server who this connection is (`CLIENT INFO`, Redis 6.2+; `CLIENT ID` before).
/// `None` when neither is allowed: requests on it then cannot be cut off.
pub(super) async fn identify(
    conn: &mut MultiplexedConnection,
) -> Result<Option<Arc<ServerClient>>, redis::RedisError> {
    let info: redis::RedisResult<String> = redis::cmd("CLIENT").arg("INFO").query_async(conn).await;
    match info {
        Ok(info) => return Ok(ServerClient::parse(&info).map(Arc::new)),
        Err(e) if e.is_io_error() || e.is_timeout() => return Err(e),
        Err(_) => {}
    }
    match redis::cmd("CLIENT")
        .arg("ID")
        .query_async::<u64>(conn)
        .await
    {
        Ok(id) => Ok(Some(Arc::new(ServerClient {
            id,
            addr: None,
            node: None,
        }))),
        Err(e) if e.is_io_error() || e.is_timeout() => Err(e),
        Err(_) => Ok(None),
    }
}

type Pool = managed::Pool<Manager>;

/// The handle of a pooled connection calls share, kept in a [`Lane`] so that a call clones it
/// without a pool check-out (a semaphore permit, the slot queue's lock, a recycle step and the
/// return, about a tenth of an uncontended lock pair's instructions). It is used only while the
/// pool would reuse it: opened in the current generation and not marked broken; otherwise the
/// call checks out from the pool and keeps what it got in the lane.
#[derive(Clone)]
struct Shared {
    conn: MultiplexedConnection,
    identity: Option<Arc<ServerClient>>,
    generation: u64,
    broken: Arc<AtomicBool>,
}

impl Shared {
    fn of(pooled: &Pooled) -> Self {
        Self {
            conn: pooled.conn.clone(),
            identity: pooled.identity.clone(),
            generation: pooled.generation,
            broken: pooled.broken.clone(),
        }
    }
}

/// One connection calls share: its handle, and the pooled object it came from, kept checked
/// out so that each lane has a connection of its own.
#[derive(Default)]
struct Lane {
    /// `None` before the first call, after a failure and after `close`.
    slot: std::sync::Mutex<Option<(Shared, managed::Object<Manager>)>>,
    /// Taken by a call that finds no usable connection in the lane while it gets one (see
    /// [`Single::checkout`]).
    opening: tokio::sync::Mutex<()>,
    /// The calls waiting to be written together (see [`SPREAD_BELOW`]).
    batch: Batch,
}

/// While fewer calls than this are in flight, successive calls take the lanes in turn, each
/// sent at once: a few concurrent calls finish sooner over two connections, each with its own
/// redis-rs task, than queued on one. At or above it every call takes the first lane and joins
/// its batch (batch.rs): many calls pipelined on one connection, and written together, cost
/// the fewest system calls each.
///
/// Measured with `pairs --throughput --connections 2` on two cores (2026-12-05): against always
/// in turn, 8 tasks the same (both about 1.5 x one lane), 512 tasks back to one lane's figure
/// (0.83-0.91 of the bare client, in turn 0.77-0.86). (Taking the first lane also when no other
/// call was in flight cost a third at 8 tasks in the agent's bench, though 98 % of the calls
/// still went in turn: `scripts/bench-ab`, S8 and S9.) Batching from 4, 16, 32 calls in flight
/// or never (2026-12-06, crate / bare pairs/s): 8 tasks 1.25 / 1.85 / 1.60 / 1.58, 16 tasks
/// 1.31 / 1.50 / 1.57 / 1.63, 32 tasks 1.43 / 1.46 / 1.49 / 1.36, 64 tasks 1.26 / 1.31 / 1.22 /
/// 0.91: a batch's task and hand-over cost more than they save while batches are small.
const SPREAD_BELOW: usize = 32;

/// Counts one call in flight while it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Self(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Lane {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(Shared, managed::Object<Manager>)>> {
        // A panic while holding it leaves a plain value behind: still usable.
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The connections to one server.
pub(super) struct Single {
    pool: Pool,
    /// The connections calls share, taken in turn while few calls are in flight (see [`Lane`],
    /// [`SPREAD_BELOW`]).
    lanes: Box<[Lane]>,
    /// The lane of the next call.
    next: AtomicUsize,
    /// Calls in flight over the lanes (see [`SPREAD_BELOW`]).
    in_flight: AtomicUsize,
    /// Connections that a synced call (the script, then `WAIT`) holds for itself until its
    /// reply: `WAIT` blocks its connection, and on a shared one every other call would queue
    /// behind it (seconds, while the replicas do not answer, as in a failover).
    synced: Pool,
    /// Synced calls in flight over `synced`: from the second on, they go in rounds.
    synced_in_flight: AtomicUsize,
    /// The synced calls written together before one `WAIT` (sync_batch.rs).
    rounds: Rounds<Shared, managed::Object<Manager>>,
    source: Arc<Source>,
    command_timeout: Duration,
    connect_timeout: Duration,
}

impl std::fmt::Debug for Single {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Single")
            .field("server", &self.source)
            .field("pool", &self.pool.status())
            .field("synced", &self.synced.status())
            .finish()
    }
}

impl Single {
    pub(super) fn new(
        config: &Config,
        provider: Option<CredentialsProvider>,
        tls: Tls,
    ) -> Result<Self, BuildError> {
        let source = Arc::new(Source::new(config, provider, tls)?);
        let conn_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(config.command_timeout));
        let generation = Arc::new(AtomicU64::new(0));
        let pool = |size: usize| {
            let manager = Manager {
                source: source.clone(),
                config: conn_config.clone(),
                generation: generation.clone(),
            };
            Pool::builder(manager)
                .max_size(size)
                .runtime(deadpool::Runtime::Tokio1)
                .wait_timeout(Some(config.command_timeout))
                .create_timeout(Some(config.connect_timeout))
                .recycle_timeout(Some(config.command_timeout))
                .build()
                .map_err(|e| BuildError::InvalidConfig(e.to_string()))
        };
        Ok(Self {
            pool: pool(config.pool_size)?,
            lanes: (0..config.connections.clamp(1, config.pool_size.max(1)))
                .map(|_| Lane::default())
                .collect(),
            next: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            synced: pool(config.pool_size)?,
            synced_in_flight: AtomicUsize::new(0),
            rounds: Rounds::default(),
            source,
            command_timeout: config.command_timeout,
            connect_timeout: config.connect_timeout,
        })
    }

    /// Sends one call and waits up to `limit` for its reply, and as long for a connection
    /// (taking one is immediate unless one must be opened; only then is a timer armed). Scripts
    /// go as EVALSHA, loaded and sent again on NOSCRIPT. An error on a key of the wrong type
    /// names the key.
    ///
    /// A `READONLY` reply (the server was demoted to a replica: a Sentinel failover, a managed
    /// endpoint that moved) retires every pooled connection, so the next ones go to the master
    /// (with Sentinel: the one they name now), and the call is sent once more on a new
    /// connection: a replica refuses a write before it changes anything, so this is safe for
    /// every call, acquires and releases included.
    ///
    /// With `wait`, the call and `WAIT` go as one pipeline (see [`sync::send`]).
    pub(super) async fn run(
        &self,
        call: &Call<'_>,
        limit: Duration,
        wait: Option<WaitFor>,
    ) -> Result<(Value, Option<WaitReply>)> {
        let refused = match self.run_once(call, limit, wait).await {
            Err(Sent::ReadOnly(e)) => e,
            Err(Sent::Failed(e)) => return Err(e),
            Ok(value) => return Ok(value),
        };
        tracing::debug!(op = call.op, key = call.key, server = %self.source.describe(), error = %refused, "write refused by a replica; reconnecting to the master and sending it again");
        // A second refusal (the Sentinels still name the old master) is transient: the
        // callers' retries find the new master. Boxed: rare, and the call's future stays one
        // attempt large.
        Box::pin(self.run_once(call, limit, wait))
            .await
            .map_err(|(Sent::ReadOnly(e) | Sent::Failed(e))| e)
    }

    async fn run_once(
        &self,
        call: &Call<'_>,
        limit: Duration,
        wait: Option<WaitFor>,
    ) -> Result<(Value, Option<WaitReply>), Sent> {
        if let Some(wait) = wait {
            // Boxed: replica sync is the rarer path, and its state (a connection held to
            // itself, the pipeline's future) the larger.
            return Box::pin(self.run_synced(call, limit, wait)).await;
        }
        // Any call but a synced one shares the connection of the next lane, when the pool
        // would reuse it.
        let busy = self.in_flight.load(Ordering::Relaxed) >= SPREAD_BELOW;
        let lane = if busy || self.lanes.len() == 1 {
            &self.lanes[0]
        } else {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            &self.lanes[i % self.lanes.len()]
        };
        let _in_flight = InFlight::new(&self.in_flight);
        // With many calls in flight, written together with the others (batch.rs): only a call
        // with the connection's own response timeout, which bounds the batch's pipeline.
        let batched = busy && limit == self.command_timeout;
        // Taken apart at once, and the check-out behind `if let`: what a future keeps across
        // its awaits is what makes it large (each call's future is one box, see `Conn`).
        let (mut conn, generation, broken) = self.ready(
            call,
            limit,
            if let Some(shared) = self.reusable(lane) {
                shared
            } else {
                // Boxed: the first call, and one after a failure; inline it would make every
                // call's future larger.
                Box::pin(self.checkout(call.op, limit, Some(lane))).await?.0
            },
        );
        let reply = match &call.body {
            // Boxed: after NOSCRIPT twice only.
            Body::Script(invocation) if call.load_first => {
                Box::pin(super::capabilities::load_and_run(&mut conn, invocation)).await
            }
            Body::Script(invocation) if batched => {
                let cmd = invocation.eval_cmd().into_owned();
                match lane.batch.send(cmd, &conn, &broken).await {
                    // Boxed: rare. As `invoke` does after NOSCRIPT.
                    Err(e) if super::script::is_noscript_reply(&e) => {
                        Box::pin(invocation.load_and_invoke(&mut conn)).await
                    }
                    other => other,
                }
            }
            Body::Script(invocation) => invocation.invoke(&mut conn).await,
            Body::Command(cmd) if batched => lane.batch.send((*cmd).clone(), &conn, &broken).await,
            Body::Command(cmd) => cmd.query_async(&mut conn).await,
        };
        self.settle(
            call,
            limit,
            generation,
            &broken,
            reply.map(|value| (value, None)),
        )
    }

    /// A synced call: the call then `WAIT`, pipelined on a connection it holds until the
    /// reply (`WAIT` blocks its connection; see [`Single::synced`]). While another is in
    /// flight, written with the others before one `WAIT` (sync_batch.rs): only a call with the
    /// synced calls' own limit, which bounds the round's pipeline.
    async fn run_synced(
        &self,
        call: &Call<'_>,
        limit: Duration,
        wait: WaitFor,
    ) -> Result<(Value, Option<WaitReply>), Sent> {
        let others = self.synced_in_flight.load(Ordering::Relaxed);
        let _in_flight = InFlight::new(&self.synced_in_flight);
        if others > 0
            && !call.load_first
            && limit == self.command_timeout + wait.timeout
            && let Some(reply) = self.run_in_round(call, limit, wait).await
        {
            return reply;
        }
        let (shared, _held) = self.checkout(call.op, limit, None).await?;
        let (mut conn, generation, broken) = self.ready(call, limit, shared);
        let reply = sync::send(&mut conn, &call.body, wait)
            .await
            .map(|(value, reply)| (value, Some(reply)));
        self.settle(call, limit, generation, &broken, reply)
    }

    /// A synced call in the open round, or in a round it opens (sync_batch.rs). `None` when
    /// it goes alone after all: a round with another `WAIT` was open, or the server did not
    /// know the script (nothing of it ran; alone, it is loaded and sent again).
    async fn run_in_round(
        &self,
        call: &Call<'_>,
        limit: Duration,
        wait: WaitFor,
    ) -> Option<Result<(Value, Option<WaitReply>), Sent>> {
        let (shared, pending) = match self.rounds.join(call.body.to_cmd(), wait) {
            Ok(joined) => joined,
            Err(cmd) => {
                let (shared, held) = match self.checkout(call.op, limit, None).await {
                    Ok((shared, Some(held))) => (shared, held),
                    Ok((_, None)) => return None,
                    Err(e) => return Some(Err(e)),
                };
                let mut conn = shared.conn.clone();
                conn.set_response_timeout(limit);
                self.rounds.open(cmd, wait, shared, conn, held)?
            }
        };
        if let Some(sent) = call.sent {
            sent.record(shared.identity.clone());
        }
        // The round's connection stays checked out until this call settled its outcome.
        let (reply, _held) = pending.reply().await;
        if matches!(&reply, Err(e) if super::script::is_noscript_reply(e)) {
            return None;
        }
        let reply = reply.map(|(value, waited)| (value, Some(waited)));
        Some(self.settle(call, limit, shared.generation, &shared.broken, reply))
    }

    /// `shared` made ready for `call`: where the call goes recorded, the reply's limit set on
    /// the handle; its handle, generation and broken flag.
    fn ready(
        &self,
        call: &Call<'_>,
        limit: Duration,
        shared: Shared,
    ) -> (MultiplexedConnection, u64, Arc<AtomicBool>) {
        let Shared {
            mut conn,
            identity,
            generation,
            broken,
        } = shared;
        if let Some(sent) = call.sent {
            sent.record(identity);
        }
        if limit != self.command_timeout {
            conn.set_response_timeout(limit);
        }
        (conn, generation, broken)
    }

    /// The outcome of a call sent on a connection of `generation` (marked `broken` here when
    /// it must not be reused), with its error named.
    fn settle<T>(
        &self,
        call: &Call<'_>,
        limit: Duration,
        generation: u64,
        broken: &AtomicBool,
        reply: redis::RedisResult<T>,
    ) -> Result<T, Sent> {
        let retire_all = || {
            let _ = self.pool.manager().generation.compare_exchange(
                generation,
                generation + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        };
        reply.map_err(|e| {
            let e = super::capabilities::as_readonly(e);
            if e.is_unrecoverable_error() || e.is_io_error() || e.is_timeout() {
                // A broken or stalled connection must not be reused (a request queued behind a
                // stalled one would stall too).
                broken.store(true, Ordering::Release);
                if e.is_connection_dropped() || e.is_unrecoverable_error() {
                    // Its siblings are likely broken too (server restart): retire them.
                    retire_all();
                }
            }
            if e.code() == Some("READONLY") {
                // Every connection goes to a replica now.
                broken.store(true, Ordering::Release);
                retire_all();
                return Sent::ReadOnly(Error::from_redis(e, call.key));
            }
            Sent::Failed(if e.is_timeout() {
                Error::Timeout {
                    operation: call.op,
                    after: limit,
                }
            } else if matches!(e.code(), Some("MOVED" | "ASK")) {
                cluster_node(&self.source)
            } else {
                Error::from_redis(e, call.key)
            })
        })
    }

    /// A connection from the pool, waiting up to `limit` for it: for a synced call (no
    /// `lane`), one it holds until its reply (returned, to be kept); for any other, the
    /// connection of its lane, kept there for the next calls (see [`Lane`]). Calls that find
    /// no usable connection in a lane take turns here: the first opens one, the others then
    /// share it instead of each opening one while the pool has none to give (a burst of first
    /// calls would open up to the pool's size, then leave all but one idle).
    async fn checkout(
        &self,
        op: &'static str,
        limit: Duration,
        lane: Option<&Lane>,
    ) -> Result<(Shared, Option<managed::Object<Manager>>), Sent> {
        let pool = if lane.is_some() {
            &self.pool
        } else {
            &self.synced
        };
        let deadline = tokio::time::Instant::now() + limit;
        let got = tokio::time::timeout_at(deadline, async {
            let Some(lane) = lane else {
                return pool.get().await.map(Ok);
            };
            let _turn = lane.opening.lock().await;
            if let Some(shared) = self.reusable(lane) {
                // Opened by the call before this one.
                return Ok(Err(shared));
            }
            // The lane's broken or retired connection goes back to the pool first, which
            // drops it at this check-out: a pool of `connections` objects has room for the
            // replacement.
            drop(lane.slot().take());
            pool.get().await.map(Ok)
        })
        .await
        .map_err(|_| {
            Sent::Failed(Error::Timeout {
                operation: op,
                after: limit,
            })
        })?
        .map_err(|e| Sent::Failed(pool_error(e, op, limit)))?;
        let pooled = match got {
            Ok(pooled) => pooled,
            Err(shared) => return Ok((shared, None)),
        };
        // The call runs on a clone of the handle, which shares the connection. The pooled
        // handle keeps its response timeout (`command_timeout`), which bounds the reply;
        // another limit goes on the clone.
        let shared = Shared::of(&pooled);
        match lane {
            None => Ok((shared, Some(pooled))),
            Some(lane) => {
                self.keep(lane, &shared, pooled);
                self.open_the_other_lanes(lane, deadline).await;
                Ok((shared, None))
            }
        }
    }

    /// The server, as errors name it (see `Source::describe`).
    pub(super) fn describe(&self) -> String {
        self.source.describe()
    }

    /// With Sentinel, starts the `+switch-master` listener: on a switch it retires every
    /// pooled connection (the next ones open to the new master) and bumps `epoch`, which moves
    /// the pub/sub connection.
    pub(super) fn start(&self, tasks: &Tasks, epoch: Arc<watch::Sender<u64>>) {
        if self.source.sentinels().is_none() {
            return;
        }
        let source = self.source.clone();
        let pool = self.pool.clone();
        let timeout = self.connect_timeout + self.command_timeout;
        tasks.spawn_service(async move {
            if let Some(sentinels) = source.sentinels() {
                sentinels
                    .follow_switches(timeout, || {
                        pool.manager().generation.fetch_add(1, Ordering::AcqRel);
                        epoch.send_modify(|e| *e += 1);
                    })
                    .await;
            }
        });
    }

    /// Connects and checks that the server is not a Redis Cluster node (`INFO cluster`) nor
    /// a replica (`ROLE`, where the user may run it).
    pub(super) async fn check(&self) -> Result<()> {
        let cmd = redis::cmd("INFO").arg("cluster").clone();
        let call = Call::read("check", "", &cmd);
        let (info, _) = self.run(&call, self.command_timeout, None).await?;
        let text: String = redis::from_redis_value(info).unwrap_or_default();
        if text.contains("cluster_enabled:1") {
            return Err(cluster_node(&self.source));
        }
        let cmd = redis::cmd("ROLE");
        let call = Call::read("check", "", &cmd);
        if let Ok((Value::Array(role), _)) = self.run(&call, self.command_timeout, None).await
            && matches!(role.first(), Some(Value::BulkString(r)) if r == b"slave")
        {
            return Err(Error::Topology(format!(
                "{} is a read-only replica: point the client at the master, or use Sentinel \
                 mode (Client::builder().sentinel([..], master)), which asks the Sentinels for it",
                self.source.describe()
            )));
        }
        Ok(())
    }

    /// Opens a dedicated pub/sub connection.
    pub(super) async fn subscriber(&self) -> Result<PubSub> {
        match tokio::time::timeout(self.connect_timeout + self.command_timeout, async {
            self.source.client().await?.get_async_pubsub().await
        })
        .await
        {
            Ok(r) => Ok(r?),
            Err(_) => Err(Error::Timeout {
                operation: "pub/sub connect",
                after: self.connect_timeout + self.command_timeout,
            }),
        }
    }

    pub(super) fn close(&self) {
        self.pool.close();
        self.synced.close();
        for lane in &self.lanes {
            *lane.slot() = None;
        }
    }

    /// The lane's connection, if the pool would reuse it.
    fn reusable(&self, lane: &Lane) -> Option<Shared> {
        let slot = lane.slot();
        let (shared, _) = slot.as_ref()?;
        let current = self.pool.manager().generation.load(Ordering::Acquire);
        (shared.generation >= current && !shared.broken.load(Ordering::Acquire))
            .then(|| shared.clone())
    }

    /// Opens a connection for each lane other than `lane` that never had one (and that no other
    /// call is opening), until `deadline`, the end of the calling call's time for a connection;
    /// the first call opens them all, so that no later call waits for a connection to open (on
    /// a slow link, one handshake can take longer than the call's whole limit). A lane not
    /// opened here opens at its first call.
    async fn open_the_other_lanes(&self, lane: &Lane, deadline: tokio::time::Instant) {
        for other in self.lanes.iter() {
            if std::ptr::eq(other, lane) {
                continue;
            }
            let Ok(_turn) = other.opening.try_lock() else {
                continue;
            };
            if other.slot().is_some() {
                continue;
            }
            match tokio::time::timeout_at(deadline, self.pool.get()).await {
                Ok(Ok(pooled)) => {
                    let shared = Shared::of(&pooled);
                    self.keep(other, &shared, pooled);
                }
                _ => return,
            }
        }
    }

    /// Keeps `shared` (and its pooled object, checked out) in `lane` for the next calls,
    /// unless the pool was closed meanwhile.
    fn keep(&self, lane: &Lane, shared: &Shared, pooled: managed::Object<Manager>) {
        let mut slot = lane.slot();
        // Checked under the slot's lock, which `close` takes after closing the pool.
        if !self.pool.is_closed() {
            *slot = Some((shared.clone(), pooled));
        }
    }
}

fn pool_error(
    e: managed::PoolError<redis::RedisError>,
    op: &'static str,
    limit: Duration,
) -> Error {
    match e {
        managed::PoolError::Backend(e) if e.is_timeout() => Error::Timeout {
            operation: op,
            after: limit,
        },
        managed::PoolError::Backend(e) => Error::Redis(e),
        managed::PoolError::Timeout(_) => Error::Timeout {
            operation: op,
            after: limit,
        },
        managed::PoolError::Closed => Error::Shutdown,
        other => Error::Redis(redis::RedisError::from((
            redis::ErrorKind::Io,
            "connection pool",
            other.to_string(),
        ))),
    }
}

/// How a call on one connection ended, when it failed.
enum Sent {
    /// Refused by a replica (`READONLY`): nothing of it ran.
    ReadOnly(Error),
    Failed(Error),
}

/// The error for a Redis Cluster node configured as a single server.
fn cluster_node(source: &Source) -> Error {
    Error::Topology(format!(
        "{} is a Redis Cluster node (it answers MOVED for keys of other nodes): connect with \
         Client::builder().cluster([..]) instead of .url(..)",
        source.describe()
    ))
}
