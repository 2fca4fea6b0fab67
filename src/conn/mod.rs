//! The connection seam: every Redis call of the crate goes through [`Conn::call`].
//!
//! A [`Call`] says what it is (an operation name, for errors and tracing), which key it is for
//! (where a topology routes it, and the key an error names), whether it reads or writes, and
//! whether it may be sent a second time after its connection broke. Everything that depends on
//! the topology (a single server today; Redis Cluster and Sentinel next), replica sync after
//! writes, tracing and metrics hooks in here and nowhere else; the pub/sub transport gets its
//! subscriber connections here too.
//!
//! Retries: a call is sent at most twice, and only a call marked [`Resend::Once`] (reads,
//! and writes that are idempotent) is sent again, once, on a fresh connection, after its
//! connection dropped. Acquire and release scripts are never re-sent from here: whether they
//! took effect is then unknown, and their callers find out (`crate::holds`).

mod cluster;
mod sentinel;
mod single;
mod sync;
mod tls;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::PubSub;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, PushInfo, ScriptInvocation, Value};
use tokio::sync::{mpsc, watch};

use crate::config::Config;
use crate::credentials::CredentialsProvider;
use crate::error::{BuildError, Result};
use crate::tasks::Tasks;
use crate::wait::BoxFuture;

use cluster::Cluster;
pub(crate) use cluster::Flavour;
use single::Single;
pub(crate) use sync::Synced;
use sync::{ReplicaSync, WaitFor, WaitReply};

/// A connection as the server knows it (`CLIENT INFO`): what `CLIENT KILL` needs to cut it
/// off.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ServerClient {
    /// `id=`: unique per server process.
    pub(crate) id: u64,
    /// `addr=`: the client's address as the server sees it; with the id it cannot match another
    /// connection, even after a server restart that reuses ids. `None` on servers before 6.2.
    pub(crate) addr: Option<String>,
    /// `laddr=`: the server's own address on this connection (which cluster node it is).
    pub(crate) node: Option<String>,
}

impl ServerClient {
    /// Parses a `CLIENT INFO` line (`id=7 addr=127.0.0.1:50000 laddr=... fd=...`).
    pub(crate) fn parse(info: &str) -> Option<Self> {
        let mut id = None;
        let mut addr = None;
        let mut node = None;
        for field in info.split_whitespace() {
            match field.split_once('=') {
                Some(("id", v)) => id = v.parse().ok(),
                Some(("addr", v)) => addr = Some(v.to_owned()),
                Some(("laddr", v)) => node = Some(v.to_owned()),
                _ => {}
            }
        }
        Some(Self {
            id: id?,
            addr,
            node,
        })
    }
}

/// Where a request went: the seam records it when it hands the request to a connection. Until
/// then a failure means the request was never sent; after, its outcome is unknown, and
/// [`Conn::cut_off`] can make sure it never runs later.
#[derive(Debug, Default)]
pub(crate) struct Delivery(Mutex<Option<Option<Arc<ServerClient>>>>);

impl Delivery {
    /// `true` once the request may have reached Redis.
    pub(crate) fn was_sent(&self) -> bool {
        self.lock().is_some()
    }

    /// Records the connection the request goes out on; a request sent again (after a replica
    /// refused it, so that nothing of the first send ran) records its new connection.
    fn record(&self, client: Option<Arc<ServerClient>>) {
        *self.lock() = Some(client);
    }

    /// The connection the request last went out on, if it was sent on one the server could
    /// name.
    fn client(&self) -> Option<Arc<ServerClient>> {
        self.lock().clone().flatten()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Option<Arc<ServerClient>>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether a call reads or writes: where a topology may send it (replicas serve reads), and
/// which calls replica sync follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// Whether a call may be sent a second time after its connection broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resend {
    /// Never: its effect is not idempotent (acquire, release), the caller resolves an unknown
    /// outcome itself.
    Never,
    /// Once, on a fresh connection, when the connection dropped: reads, and writes whose
    /// second run changes nothing more (renewal, force unlock, cleanup).
    Once,
}

/// What a call sends.
pub(crate) enum Body<'a> {
    /// A script: EVALSHA, loaded and sent again on NOSCRIPT.
    Script(&'a ScriptInvocation<'a>),
    /// A plain command.
    Command(&'a Cmd),
}

/// One Redis call, as the seam sees it.
pub(crate) struct Call<'a> {
    pub(crate) op: &'static str,
    pub(crate) key: &'a str,
    pub(crate) access: Access,
    pub(crate) resend: Resend,
    /// How long to wait for the reply; `None`: the command timeout.
    pub(crate) limit: Option<Duration>,
    pub(crate) body: Body<'a>,
    /// Records where the request went (see [`Delivery`]).
    pub(crate) sent: Option<&'a Delivery>,
    /// Followed by `WAIT` on the replicas when replica sync is on (see [`Call::synced`]).
    pub(crate) synced: bool,
}

impl<'a> Call<'a> {
    /// A read-only command on `key`, sent again once if its connection dropped.
    pub(crate) fn read(op: &'static str, key: &'a str, cmd: &'a Cmd) -> Self {
        Self::new(op, key, Access::Read, Resend::Once, Body::Command(cmd))
    }

    /// A read-only script on `key`, sent again once if its connection dropped.
    pub(crate) fn read_script(
        op: &'static str,
        key: &'a str,
        invocation: &'a ScriptInvocation<'a>,
    ) -> Self {
        Self::new(
            op,
            key,
            Access::Read,
            Resend::Once,
            Body::Script(invocation),
        )
    }

    /// A script that writes `key`: never sent twice (see [`idempotent`](Self::idempotent)).
    pub(crate) fn write(
        op: &'static str,
        key: &'a str,
        invocation: &'a ScriptInvocation<'a>,
    ) -> Self {
        Self::new(
            op,
            key,
            Access::Write,
            Resend::Never,
            Body::Script(invocation),
        )
    }

    /// A plain command that writes `key`: never sent twice (see
    /// [`idempotent`](Self::idempotent)).
    pub(crate) fn write_command(op: &'static str, key: &'a str, cmd: &'a Cmd) -> Self {
        Self::new(op, key, Access::Write, Resend::Never, Body::Command(cmd))
    }

    /// A call with the command timeout, whose delivery is not tracked.
    fn new(op: &'static str, key: &'a str, access: Access, resend: Resend, body: Body<'a>) -> Self {
        Self {
            op,
            key,
            access,
            resend,
            limit: None,
            body,
            sent: None,
            synced: false,
        }
    }

    /// A write Redisson syncs to the replicas (docs/LAYOUT.md §1.7): with replica sync on,
    /// it is pipelined with `WAIT` (see [`Conn::call_synced`]).
    pub(crate) fn synced(mut self) -> Self {
        self.synced = true;
        self
    }

    /// Marks a write as safe to send a second time.
    pub(crate) fn idempotent(mut self) -> Self {
        self.resend = Resend::Once;
        self
    }

    /// Records in `delivery` whether, and on which connection, the request was sent.
    pub(crate) fn tracked(mut self, delivery: &'a Delivery) -> Self {
        self.sent = Some(delivery);
        self
    }

    /// Waits up to `limit` for the reply instead of the command timeout.
    pub(crate) fn limit(mut self, limit: Duration) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// The client's way to Redis.
pub(crate) struct Conn {
    topology: Topology,
    command_timeout: Duration,
    /// Bumped when the server behind the connections changed (a Sentinel failover): the
    /// pub/sub transport then moves its subscriptions (see [`Conn::topology_changes`]).
    epoch: Arc<watch::Sender<u64>>,
    sync: ReplicaSync,
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

/// The renewal group of a key: a watchdog batch script only ever holds keys of one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SlotGroup(Option<redis::cluster_routing::Slot>);

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
        let result = match self.run(&call, limit, wait).await {
            Err(e) if call.resend == Resend::Once && e.connection_dropped() => {
                tracing::debug!(op = call.op, key = call.key, error = %e, "connection dropped; sending once more");
                self.run(&call, limit, wait).await
            }
            other => other,
        };
        let (value, reply) = match result {
            Ok(ok) => ok,
            Err(e) => {
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
                let info = match self.run(&call, limit, None).await {
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

    /// Sends `call` through the topology. Boxed: the topologies' futures are deep types, and
    /// every primitive's futures contain this one.
    fn run<'a>(
        &'a self,
        call: &'a Call<'a>,
        limit: Duration,
        wait: Option<WaitFor>,
    ) -> BoxFuture<'a, Result<(Value, Option<WaitReply>)>> {
        Box::pin(async move {
            match &self.topology {
                Topology::Single(single) => single.run(call, limit, wait).await,
                Topology::Cluster(cluster) => cluster.run(call, limit, wait).await,
            }
        })
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
