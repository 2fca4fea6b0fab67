//! The connection seam: every Redis call of the crate goes through [`Conn::call`].
//!
//! A [`Call`] says what it is (an operation name, for errors and tracing), which key it is for
//! (where a topology routes it, and the key an error names), whether it reads or writes, and
//! whether it may be sent a second time after its connection broke. Everything that depends on
//! the topology (a single server, one found through Sentinel, a Redis Cluster), replica sync after
//! writes, tracing and metrics hooks in here and nowhere else; the pub/sub transport gets its
//! subscriber connections here too.
//!
//! Retries: a call is sent at most twice, and only a call marked [`Resend::Once`] (reads,
//! and writes that are idempotent) is sent again, once, on a fresh connection, after its
//! connection dropped. Acquire and release scripts are never re-sent from here: whether they
//! took effect is then unknown, and their callers find out (the hold layer, `crate::hold`).

mod batch;
mod call;
mod capabilities;
mod cluster;
mod cluster_rounds;
mod script;
mod sentinel;
mod single;
mod sync;
mod sync_batch;
mod tls;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::PubSub;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, Value};
use tokio::sync::{mpsc, watch};

use crate::config::Config;
use crate::credentials::CredentialsProvider;
use crate::error::{BuildError, Result};
use crate::future::BoxFuture;
use crate::tasks::Tasks;

use call::{Access, Body, Resend};
pub(crate) use call::{Call, Delivery, SlotGroup};
pub use capabilities::{Capabilities, Supported};
use cluster::Cluster;
pub(crate) use cluster::Flavour;
pub(crate) use script::{Script, ScriptInvocation};
use single::Single;
pub(crate) use sync::Synced;
use sync::{ReplicaSync, WaitFor, WaitReply};

/// The client's way to Redis.
pub(crate) struct Conn {
    topology: Topology,
    command_timeout: Duration,
    /// Bumped when the server behind the connections changed (a Sentinel failover): the
    /// pub/sub transport then moves its subscriptions (see [`Conn::topology_changes`]).
    epoch: Arc<watch::Sender<u64>>,
    sync: ReplicaSync,
    /// What the server offers, probed once (see [`Conn::capabilities`]).
    capabilities: tokio::sync::OnceCell<Capabilities>,
    /// The data nodes' ACL user, for the messages of [`capabilities::check`].
    user: Option<String>,
}

enum Topology {
    Single(Single),
    Cluster(Box<Cluster>),
}

/// A dedicated connection for the pub/sub transport.
pub(crate) enum Subscriber {
    /// A single server's RESP2 pub/sub connection.
    Single(PubSub),
    /// A cluster connection (RESP3) and its pushes, with the flavour to subscribe by.
    Cluster(
        ClusterConnection,
        mpsc::UnboundedReceiver<PushInfo>,
        Flavour,
    ),
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.topology {
            Topology::Single(single) => single.fmt(f),
            Topology::Cluster(cluster) => cluster.fmt(f),
        }
    }
}

impl Conn {
    pub(crate) fn new(
        config: &Config,
        provider: Option<CredentialsProvider>,
    ) -> Result<Self, BuildError> {
        let tls = tls::Tls::new(config)?;
        let topology = if config.is_cluster() {
            Topology::Cluster(Box::new(Cluster::new(config, provider, &tls)?))
        } else {
            Topology::Single(Single::new(config, provider, tls)?)
        };
        Ok(Self {
            topology,
            command_timeout: config.command_timeout,
            epoch: Arc::new(watch::Sender::new(0)),
            sync: ReplicaSync::new(config),
            capabilities: tokio::sync::OnceCell::new(),
            user: config.username.clone(),
        })
    }

    /// Starts the topology's own services (with Sentinel: the `+switch-master` listener).
    pub(crate) fn start(&self, tasks: &Tasks) {
        if let Topology::Single(single) = &self.topology {
            single.start(tasks, self.epoch.clone());
        }
    }

    /// Changes whenever the server behind the connections changed (a Sentinel failover):
    /// connections opened before then talk to the old one.
    pub(crate) fn topology_changes(&self) -> watch::Receiver<u64> {
        self.epoch.subscribe()
    }

    /// The server(s) the client talks to, as connection errors name them: `host:port`, the
    /// Sentinels' master, or a cluster's seed nodes; never a password.
    fn server(&self) -> String {
        match &self.topology {
            Topology::Single(single) => single.describe(),
            Topology::Cluster(cluster) => cluster.describe(),
        }
    }

    /// Whether the client talks to a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.topology, Topology::Cluster(_))
    }

    /// Connects and checks that the servers are what the configuration says (see
    /// `ClientBuilder::connect`).
    pub(crate) async fn check(&self) -> Result<()> {
        match &self.topology {
            Topology::Single(single) => single.check().await,
            Topology::Cluster(cluster) => cluster.check().await.map(drop),
        }
        .map_err(|e| e.in_context(|| self.server(), "connect", ""))?;
        let caps = self.capabilities().await?;
        capabilities::check(&caps, self.user.as_deref())?;
        if self.sync.enabled() && !caps.wait.is_yes() {
            self.sync.refused(&redis::RedisError::from((
                redis::ErrorKind::Client,
                "WAIT probe",
                format!("WAIT: {}", caps.wait),
            )));
        }
        Ok(())
    }

    /// What the server offers this client, probed at the first call (see
    /// `capabilities.rs`); a probe that failed (I/O, timeout) is tried again next time.
    pub(crate) async fn capabilities(&self) -> Result<Capabilities> {
        let caps = self
            .capabilities
            .get_or_try_init(|| async {
                let send = |cmd: redis::Cmd| -> BoxFuture<'_, Result<Value>> {
                    Box::pin(async move {
                        self.call(Call::read("probe", "", &cmd).about_server())
                            .await
                    })
                };
                let script = Script::new("return 1");
                let invocation = script.prepare_invoke();
                let probe_script =
                    self.call(Call::read_script("probe", "", &invocation).about_server());
                let caps = capabilities::probe(&send, probe_script).await?;
                tracing::debug!(capabilities = %caps, "server capabilities");
                Ok::<_, crate::error::Error>(caps)
            })
            .await?;
        Ok(caps.clone())
    }

    /// Runs one call. With [`call_synced`](Self::call_synced), the only functions of the
    /// crate that send a request to Redis. A synced write that no replica acknowledged did
    /// take effect on the master: it succeeds, with a warning.
    pub(crate) async fn call(&self, call: Call<'_>) -> Result<Value> {
        let (op, key) = (call.op, call.key);
        let (value, synced) = self.call_synced(call).await?;
        if let Synced::Unacked { replicas, after } = synced {
            tracing::warn!(
                op,
                key,
                replicas,
                ?after,
                "none of the master's replicas acknowledged the write within the replica sync timeout; it took effect on the master"
            );
        }
        Ok(value)
    }

    /// Runs one call and says whether its write reached the replicas: a call marked
    /// [`Call::synced`], with replica sync on and a master that has replicas, is pipelined
    /// with `WAIT <replicas> <replica_sync_timeout>` on the same connection.
    ///
    /// Boxed, as [`run`](Self::run): every primitive's futures contain this one, and an
    /// unboxed chain grows past the compiler's default limits in the callers' crates.
    pub(crate) fn call_synced<'a>(
        &'a self,
        call: Call<'a>,
    ) -> BoxFuture<'a, Result<(Value, Synced)>> {
        Box::pin(self.call_synced_inner(call))
    }

    async fn call_synced_inner(&self, call: Call<'_>) -> Result<(Value, Synced)> {
        let wait = if call.synced {
            self.wait_for(call.key).await
        } else {
            None
        };
        let limit =
            call.limit.unwrap_or(self.command_timeout) + wait.map_or(Duration::ZERO, |w| w.timeout);
        // A loop, and the resend boxed (rare): the first reply is out of scope when the
        // resend is awaited, and neither comes on top of the first send's state in every
        // call's future.
        let mut resent = false;
        let result = loop {
            let result = if resent {
                Box::pin(self.run(&call, limit, wait)).await
            } else {
                self.run(&call, limit, wait).await
            };
            match result {
                Err(e) if !resent && call.resend == Resend::Once && e.connection_dropped() => {
                    tracing::debug!(op = call.op, key = call.key, error = %e, "connection dropped; sending once more");
                    resent = true;
                }
                other => break other,
            }
        };
        let result = if let Body::Script(_) = call.body {
            // A script the server forgot again right after loading it (capabilities.rs).
            let atomic = Call {
                load_first: true,
                ..call.clone()
            };
            // Boxed: rare, and a whole call large.
            let again = || -> BoxFuture<'_, _> { Box::pin(self.run(&atomic, limit, wait)) };
            capabilities::again_on_noscript(call.op, result, again)
                .await
                .map_err(|e| capabilities::script_refused(&e, call.op, call.key).unwrap_or(e))
        } else {
            result
        };
        let (value, reply) = match result {
            Ok(ok) => ok,
            Err(e) => {
                let e = e.named_out_of_memory(call.op, call.key).in_context(
                    || self.server(),
                    call.op,
                    call.key,
                );
                tracing::debug!(op = call.op, key = call.key, access = ?call.access, error = %e, "redis call failed");
                return Err(e);
            }
        };
        let synced = match (wait, reply) {
            (Some(wait), Some(WaitReply::Acks(acks))) => {
                if acks < wait.replicas {
                    // A replica went away, or lags: count them again next time.
                    self.sync.forget(self.slot_group(call.key));
                }
                if acks == 0 {
                    Synced::Unacked {
                        replicas: wait.replicas,
                        after: wait.timeout,
                    }
                } else {
                    Synced::Acked(acks)
                }
            }
            (_, Some(WaitReply::Refused(e))) => {
                self.sync.refused(&e);
                Synced::Skipped
            }
            _ => Synced::Skipped,
        };
        Ok((value, synced))
    }

    /// The `WAIT` a synced call on `key` goes with: `None` when replica sync is off or the
    /// key's master has no replicas (or cannot say how many it has).
    async fn wait_for(&self, key: &str) -> Option<WaitFor> {
        if !self.sync.enabled() {
            return None;
        }
        let group = self.slot_group(key);
        let epoch = *self.epoch.borrow();
        let replicas = match self.sync.known(group, epoch) {
            Some(count) => count,
            None => {
                let cmd = redis::cmd("INFO").arg("replication").clone();
                let call = Call::read("replica count", key, &cmd);
                let limit = self.command_timeout;
                // Boxed: once per replica count learnt, and inline it would make every
                // call's future a second call large.
                let info = match Box::pin(self.run(&call, limit, None)).await {
                    Ok((info, _)) => info,
                    Err(e) => {
                        tracing::debug!(key, error = %e, "cannot read the replica count; this call goes without WAIT");
                        return None;
                    }
                };
                let text: String = redis::from_redis_value(info).unwrap_or_default();
                let count = sync::connected_replicas(&text).unwrap_or(0);
                self.sync.store(group, count, epoch);
                count
            }
        };
        (replicas > 0).then_some(WaitFor {
            replicas,
            timeout: self.sync.timeout,
        })
    }

    /// Sends `call` through the topology. Not boxed: [`call_synced`](Self::call_synced), the
    /// one way in, boxes the whole call once.
    async fn run(
        &self,
        call: &Call<'_>,
        limit: Duration,
        wait: Option<WaitFor>,
    ) -> Result<(Value, Option<WaitReply>)> {
        match &self.topology {
            Topology::Single(single) => single.run(call, limit, wait).await,
            // Boxed: a cluster call's future is the larger (routing, redirects), and inline
            // it would make every single-server call's future as large.
            Topology::Cluster(cluster) => Box::pin(cluster.run(call, limit, wait)).await,
        }
    }

    /// Makes sure a request of unknown outcome can no longer run: kills, at the server, the
    /// connection it was sent on (`CLIENT KILL ID .. ADDR ..`), so whatever of it Redis has not
    /// run yet is dropped with the connection. `key` routes the kill to the request's server
    /// (in a cluster: the node the connection's identity names).
    /// `Ok(false)` when it cannot (no connection identity, or no permission for `CLIENT
    /// KILL`): the request may then still run later.
    pub(crate) async fn cut_off(&self, delivery: &Delivery, key: &str) -> Result<bool> {
        let Some(client) = delivery.client() else {
            return Ok(false);
        };
        let result = match &self.topology {
            Topology::Single(_) => {
                let mut cmd = redis::cmd("CLIENT");
                cmd.arg("KILL").arg("ID").arg(client.id);
                if let Some(addr) = &client.addr {
                    cmd.arg("ADDR").arg(addr);
                }
                cmd.arg("SKIPME").arg("yes");
                let call = Call::new(
                    "cut off",
                    key,
                    Access::Write,
                    Resend::Once,
                    Body::Command(&cmd),
                );
                self.call(call).await
            }
            Topology::Cluster(cluster) => cluster.cut_off(&client, key).await,
        };
        match result {
            // 1: killed; 0: the server had already closed it. Either way nothing of it runs.
            Ok(_) => Ok(true),
            Err(crate::error::Error::Redis(e)) if e.code() == Some("NOPERM") => {
                tracing::warn!(
                    "no permission for CLIENT KILL: a request of unknown outcome cannot be stopped; it may still take effect later"
                );
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// A dedicated connection for the pub/sub transport's subscriptions.
    pub(crate) async fn subscriber(&self) -> Result<Subscriber> {
        match &self.topology {
            Topology::Single(single) => Ok(Subscriber::Single(single.subscriber().await?)),
            Topology::Cluster(cluster) => {
                let (conn, pushes, flavour) = cluster.subscriber().await?;
                Ok(Subscriber::Cluster(conn, pushes, flavour))
            }
        }
    }

    /// The verb(s) a script publishes its message with (passed as an argument, as Redisson
    /// does, docs/LAYOUT.md §1.6): `PUBLISH` on a single server; in a cluster `SPUBLISH`,
    /// `PUBLISH`, or `SPUBLISH PUBLISH` (both), per `Config::pubsub`, settled at the first
    /// connection.
    pub(crate) async fn publish_command(&self) -> Result<&'static str> {
        match &self.topology {
            Topology::Single(_) => Ok("PUBLISH"),
            Topology::Cluster(cluster) => cluster.publish_command().await,
        }
    }

    /// The renewal group of `key`: its slot in a cluster, one group on a single server.
    pub(crate) fn slot_group(&self, key: &str) -> SlotGroup {
        match &self.topology {
            Topology::Single(_) => SlotGroup(None),
            Topology::Cluster(_) => SlotGroup(Some(Cluster::slot(key))),
        }
    }

    /// The time limit of one command.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// Closes the connections; later calls fail with `Error::Shutdown`.
    pub(crate) fn close(&self) {
        match &self.topology {
            Topology::Single(single) => single.close(),
            Topology::Cluster(cluster) => cluster.close(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::future::SMALL_BLOCK;

    /// One call's future is one box (`call_synced`).
    #[tokio::test]
    async fn a_calls_future_fits_in_a_small_block() {
        let conn = Conn::new(&Config::from_url("redis://127.0.0.1:1"), None).unwrap();
        let cmd = redis::cmd("PING");
        let size = std::mem::size_of_val(&conn.call_synced_inner(Call::read("ping", "k", &cmd)));
        assert!(
            size <= SMALL_BLOCK,
            "a call's future is {size} bytes, more than glibc's per-thread cache serves ({SMALL_BLOCK})"
        );
    }

    /// A cluster call's future, boxed apart (`run`), fits too: its first connect, a node's
    /// first identity, a synced call and the NOSCRIPT reload are boxed apart of it.
    #[tokio::test]
    async fn a_cluster_calls_future_fits_in_a_small_block() {
        let mut config = Config::from_url("redis://127.0.0.1:1");
        config.cluster_nodes = vec!["redis://127.0.0.1:1".into()];
        let conn = Conn::new(&config, None).unwrap();
        let Topology::Cluster(cluster) = &conn.topology else {
            panic!("a client with cluster nodes has a single server")
        };
        let cmd = redis::cmd("PING");
        let call = Call::read("ping", "k", &cmd);
        let size = std::mem::size_of_val(&cluster.run(&call, Duration::from_secs(1), None));
        assert!(
            size <= SMALL_BLOCK,
            "a cluster call's future is {size} bytes, more than glibc's per-thread cache serves ({SMALL_BLOCK})"
        );
    }
}
