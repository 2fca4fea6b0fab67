//! One Redis server (at a fixed address, or the master Redis Sentinel names): a pool of
//! multiplexed connections for calls, and dedicated connections for the pub/sub transport.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use deadpool::managed::{self, Metrics, RecycleResult};
use redis::aio::{MultiplexedConnection, PubSub};
use redis::{AsyncConnectionConfig, Value};

use tokio::sync::watch;

use super::sentinel::Source;
use super::sync::{self, WaitFor, WaitReply};
use super::tls::Tls;
use super::{Body, Call, ServerClient};
use crate::config::Config;
use crate::credentials::CredentialsProvider;
use crate::error::{BuildError, Error, Result};
use crate::tasks::Tasks;

/// Creates multiplexed connections for the pool.
///
/// A call checks a connection out only to clone its handle, and puts it back before sending:
/// concurrent calls share one multiplexed connection, so the requests of many tasks travel
/// pipelined (the pool opens another connection only while every one is checked out at the same
/// instant, which is rare).
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

    async fn create(&self) -> Result<Pooled, redis::RedisError> {
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

    async fn recycle(&self, conn: &mut Pooled, _: &Metrics) -> RecycleResult<redis::RedisError> {
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
async fn identify(
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

/// The connections to one server.
pub(super) struct Single {
    pool: Pool,
    /// Connections that a synced call (the script, then `WAIT`) holds for itself until its
    /// reply: `WAIT` blocks its connection, and on a shared one every other call would queue
    /// behind it (seconds, while the replicas do not answer, as in a failover).
    synced: Pool,
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
            synced: pool(config.pool_size)?,
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
        match self.run_once(call, limit, wait).await {
            Err(Sent::ReadOnly(e)) => {
                tracing::debug!(op = call.op, key = call.key, server = %self.source.describe(), error = %e, "write refused by a replica; reconnecting to the master and sending it again");
                // A second refusal (the Sentinels still name the old master) is transient: the
                // callers' retries find the new master.
                self.run_once(call, limit, wait)
                    .await
                    .map_err(|(Sent::ReadOnly(e) | Sent::Failed(e))| e)
            }
            Err(Sent::Failed(e)) => Err(e),
            Ok(value) => Ok(value),
        }
    }

    async fn run_once(
        &self,
        call: &Call<'_>,
        limit: Duration,
        wait: Option<WaitFor>,
    ) -> Result<(Value, Option<WaitReply>), Sent> {
        let op = call.op;
        let pool = if wait.is_some() {
            &self.synced
        } else {
            &self.pool
        };
        let pooled = match tokio::time::timeout(limit, pool.get()).await {
            Ok(pooled) => pooled.map_err(|e| Sent::Failed(pool_error(e, op, limit)))?,
            Err(_) => {
                return Err(Sent::Failed(Error::Timeout {
                    operation: op,
                    after: limit,
                }));
            }
        };
        // The call runs on a clone of the handle, which shares the connection; the pooled
        // object goes back at once so that other calls share the connection meanwhile (a
        // synced call keeps it: its WAIT blocks the connection). The pooled handle keeps its
        // response timeout (`command_timeout`), which bounds the reply; another limit goes on
        // the clone.
        let mut conn = pooled.conn.clone();
        let generation = pooled.generation;
        let broken = pooled.broken.clone();
        if let Some(sent) = call.sent {
            sent.record(pooled.identity.clone());
        }
        let _held = if wait.is_some() {
            Some(pooled)
        } else {
            drop(pooled);
            None
        };
        if limit != self.command_timeout {
            conn.set_response_timeout(limit);
        }
        let reply = match (wait, &call.body) {
            (Some(wait), body) => sync::send(&mut conn, body, wait)
                .await
                .map(|(value, reply)| (value, Some(reply))),
            (None, Body::Script(invocation)) => invocation
                .invoke_async(&mut conn)
                .await
                .map(|value| (value, None)),
            (None, Body::Command(cmd)) => {
                cmd.query_async(&mut conn).await.map(|value| (value, None))
            }
        };
        let retire_all = || {
            let _ = self.pool.manager().generation.compare_exchange(
                generation,
                generation + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        };
        reply.map_err(|e| {
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
                    operation: op,
                    after: limit,
                }
            } else if matches!(e.code(), Some("MOVED" | "ASK")) {
                cluster_node(&self.source)
            } else {
                Error::from_redis(e, call.key)
            })
        })
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
