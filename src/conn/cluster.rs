//! Redis Cluster, on redis-rs's `cluster_async`: it keeps one connection per node, knows the
//! slot map, picks up topology changes (a `MOVED` makes it rebuild the map) and reconnects
//! nodes on its own.
//!
//! One thing it does not: tell a request that may have run from one that did not. Its own
//! retries re-send a request after a dropped connection or a timeout, which would run an
//! acquire or a release twice. So calls go with its retries off, each routed explicitly to the
//! master of its key's slot, and this module follows the redirections that prove a request
//! did not run: `MOVED` (sent again to the node it names), `ASK` (sent again to the importing
//! node, after `ASKING`, in one pipeline), `NOSCRIPT` (the script is loaded on that node, then
//! sent again). `TRYAGAIN`, `CLUSTERDOWN` and `MASTERDOWN` come back to the caller, whose
//! wait retries them like `BUSY`; a request of unknown outcome is resolved by the caller as on
//! a single server.
//!
//! On top of that: the pub/sub flavour (§1.6), the identity of the connection a request went
//! on (so that a request of unknown outcome can be cut off at its node), clear errors for a
//! wrong topology, the check that a name's keys share one slot, and synced calls in flight
//! together written in rounds per node (cluster_rounds.rs).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{ProtocolVersion, PushInfo, Value};
use tokio::sync::{OnceCell, mpsc};

use super::call::{Body, Call, ServerClient};
use super::cluster_rounds::NodeRounds;
use super::sync::{self, WaitFor, WaitReply};
use super::tls::Tls;
use crate::config::{Config, PubSubMode};
use crate::credentials::CredentialsProvider;
use crate::error::{BuildError, Error, Result};

/// What the client publishes with and subscribes by, once settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flavour {
    pub(crate) classic: bool,
    pub(crate) sharded: bool,
}

impl Flavour {
    /// The verb(s) the scripts publish with (space separated; the scripts run each).
    pub(crate) fn verbs(self) -> &'static str {
        match (self.sharded, self.classic) {
            (true, true) => "SPUBLISH PUBLISH",
            (true, false) => "SPUBLISH",
            _ => "PUBLISH",
        }
    }
}

/// The connections to one Redis Cluster.
pub(super) struct Cluster {
    nodes: Vec<String>,
    /// User and password for every node, over those in the seed URLs.
    credentials: (Option<String>, Option<String>),
    provider: Option<CredentialsProvider>,
    tls: Tls,
    mode: PubSubMode,
    calls: ClusterClient,
    /// Connection and response timeouts, for the subscription clients (each subscriber gets
    /// a client of its own, RESP3, with its push channel).
    timeouts: (Duration, Duration),
    conn: OnceCell<ClusterConnection>,
    flavour: OnceCell<Flavour>,
    /// `CLIENT INFO` of the connection to each slot's master, as last seen; forgotten at the
    /// first failed call.
    identities: Mutex<HashMap<Route, Arc<ServerClient>>>,
    /// When the slot map was last asked to be rebuilt (see [`Routed::refresh`]).
    refreshed: Arc<Mutex<Option<std::time::Instant>>>,
    command_timeout: Duration,
    connect_timeout: Duration,
    closed: AtomicBool,
    /// The rounds of synced calls in flight together, per node (cluster_rounds.rs).
    rounds: NodeRounds,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field(
                "seeds",
                &self
                    .nodes
                    .iter()
                    .map(|n| crate::config::redact(n))
                    .collect::<Vec<_>>(),
            )
            .field("pubsub", &self.mode)
            .field("flavour", &self.flavour.get())
            .finish()
    }
}

/// A cluster client builder for these seed nodes, with [`Config::username`] and
/// [`Config::password`] (when set) for every node.
fn seeds(
    nodes: &[String],
    (user, password): &(Option<String>, Option<String>),
    provider: Option<&CredentialsProvider>,
    tls: &Tls,
) -> ClusterClientBuilder {
    let mut builder = ClusterClientBuilder::new(nodes.iter().map(String::as_str));
    if let Some(user) = user {
        builder = builder.username(user);
    }
    if let Some(password) = password {
        builder = builder.password(password);
    }
    if let Some(provider) = provider {
        builder = builder.set_credentials_provider(provider.streaming());
    }
    #[cfg(feature = "tls")]
    if let Some(certs) = tls.certs() {
        builder = builder.certs(certs);
    }
    #[cfg(not(feature = "tls"))]
    let _ = tls;
    builder
}

impl Cluster {
    pub(super) fn new(
        config: &Config,
        provider: Option<CredentialsProvider>,
        tls: &Tls,
    ) -> Result<Self, BuildError> {
        let credentials = (config.username.clone(), config.password.clone());
        let provider_for_rounds = provider.clone();
        let calls = seeds(&config.cluster_nodes, &credentials, provider.as_ref(), tls)
            .connection_timeout(config.connect_timeout)
            .response_timeout(config.command_timeout)
            .retries(0)
            .build()
            .map_err(BuildError::Url)?;
        Ok(Self {
            nodes: config.cluster_nodes.clone(),
            credentials,
            provider,
            tls: tls.clone(),
            mode: config.pubsub,
            calls,
            timeouts: (config.connect_timeout, config.command_timeout),
            conn: OnceCell::new(),
            flavour: OnceCell::new(),
            identities: Mutex::new(HashMap::new()),
            refreshed: Arc::new(Mutex::new(None)),
            command_timeout: config.command_timeout,
            connect_timeout: config.connect_timeout,
            closed: AtomicBool::new(false),
            rounds: NodeRounds::new(
                rounds_base(config)?,
                provider_for_rounds,
                tls.clone(),
                (
                    config.connect_timeout,
                    config.command_timeout + config.replica_sync_timeout,
                ),
                config.pool_size,
            ),
        })
    }

    /// The connection for calls, opened on first use.
    async fn connection(&self) -> Result<ClusterConnection> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        let limit = self.connect_timeout + self.command_timeout;
        let conn = self
            .conn
            .get_or_try_init(|| async {
                match tokio::time::timeout(limit, self.calls.get_async_connection()).await {
                    Ok(Ok(conn)) => Ok(conn),
                    Ok(Err(e)) => Err(self.connect_error(e)),
                    Err(_) => Err(Error::Topology(format!(
                        "no Redis Cluster node answered within {limit:?} (seed nodes {:?}): check \
                         the addresses, or use Client::builder().url(..) for a single server",
                        self.nodes
                    ))),
                }
            })
            .await?;
        Ok(conn.clone())
    }

    /// The cluster, as errors name it: its seed nodes, passwords redacted.
    pub(super) fn describe(&self) -> String {
        let seeds: Vec<_> = self
            .nodes
            .iter()
            .map(|n| crate::config::redact(n))
            .collect();
        format!("cluster seeds {}", seeds.join(", "))
    }

    fn connect_error(&self, e: redis::RedisError) -> Error {
        let text = e.to_string();
        if text.contains("cluster support disabled")
            || text.contains("ERR This instance has cluster")
        {
            Error::Topology(format!(
                "{:?} is a single Redis server, not a Redis Cluster node (cluster support \
                 disabled): connect with Client::builder().url(..) instead of .cluster(..)",
                self.nodes
            ))
        } else if e.is_io_error() || e.is_connection_refusal() || text.contains("connect") {
            Error::Topology(format!(
                "no Redis Cluster seed node is reachable ({:?}): {text}; check the addresses",
                self.nodes
            ))
        } else {
            Error::Redis(e)
        }
    }

    /// Connects and settles the pub/sub flavour (Redisson's `checkShardingSupport`).
    pub(super) async fn check(&self) -> Result<Flavour> {
        let conn = self.connection().await?;
        let flavour = self
            .flavour
            .get_or_try_init(|| async {
                let mut conn = conn.clone();
                let supported = super::capabilities::sharded_pubsub(&mut conn).await?;
                let flavour = decide(self.mode, supported.is_yes())?;
                tracing::debug!(
                    ?flavour,
                    mode = self.mode.as_str(),
                    "cluster pub/sub flavour"
                );
                Ok::<_, Error>(flavour)
            })
            .await?;
        Ok(*flavour)
    }

    /// Sends one call to the master of its key's slot, following `MOVED`, `ASK` and
    /// `NOSCRIPT` (see the module documentation); scripts go as EVALSHA.
    pub(super) async fn run(
        &self,
        call: &Call<'_>,
        limit: Duration,
        wait: Option<WaitFor>,
    ) -> Result<(Value, Option<WaitReply>)> {
        if !call.keyless {
            check_name(call.key)?;
        }
        // The connection, and the identity of a call's node, known after the first call: the
        // first of each (a connect, a CLIENT INFO) is boxed apart, so that a call's future stays
        // within glibc's per-thread cache (`future::SMALL_BLOCK`).
        let conn = match self.conn.get() {
            Some(conn) if !self.closed.load(Ordering::Acquire) => conn.clone(),
            _ => Box::pin(self.connection()).await?,
        };
        let route = Route::with_slot(Slot::for_key(call.key), SlotAddr::Master);
        let mut routed = Routed {
            conn,
            refreshed: self.refreshed.clone(),
            home: SingleNodeRoutingInfo::SpecificNode(route),
            target: SingleNodeRoutingInfo::SpecificNode(route),
            asking: false,
        };
        // The identity of the slot's connection: recorded for the cut-off of an unknown
        // outcome, and the node a synced call's round is by.
        let mut identity = None;
        if call.sent.is_some() || wait.is_some() {
            identity = self.identities().get(&route).cloned();
            if identity.is_none() {
                identity = Box::pin(self.identity(&mut routed.conn, route)).await;
            }
        }
        if let Some(sent) = call.sent
            && wait.is_none()
        {
            sent.record(identity.clone());
        }
        let request = async {
            if let Some(wait) = wait {
                return Box::pin(self.run_synced(
                    call,
                    limit,
                    &mut routed,
                    identity.as_ref(),
                    wait,
                ))
                .await
                .map(|(value, reply)| (value, Some(reply)));
            }
            match call.body {
                Body::Script(invocation) if call.load_first => {
                    Box::pin(super::capabilities::load_and_run(&mut routed, invocation))
                        .await
                        .map(|value| (value, None))
                }
                Body::Script(invocation) => {
                    // EVALSHA, loaded on NOSCRIPT and sent again; NOSCRIPT once more (the load
                    // went to another node while the slot map was being rebuilt after a
                    // failover) proves it did not run: try again.
                    let mut result = invocation.invoke(&mut routed).await;
                    for _ in 0..3 {
                        match &result {
                            Err(e) if super::script::is_noscript_reply(e) => {
                                tracing::debug!(error = %e, "NOSCRIPT after loading; loading again");
                                routed.target = routed.home.clone();
                                routed.asking = false;
                                result = invocation.invoke(&mut routed).await;
                            }
                            _ => break,
                        }
                    }
                    result.map(|value| (value, None))
                }
                Body::Command(cmd) => cmd
                    .query_async(&mut routed)
                    .await
                    .map(|value| (value, None)),
            }
        };
        let reply = match tokio::time::timeout(limit, request).await {
            Ok(reply) => reply,
            Err(_) => {
                self.forget_identities();
                return Err(Error::Timeout {
                    operation: call.op,
                    after: limit,
                });
            }
        };
        reply.map_err(|e| {
            if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                self.forget_identities();
            }
            if e.is_timeout() {
                Error::Timeout {
                    operation: call.op,
                    after: limit,
                }
            } else {
                Error::from_redis(e, call.key)
            }
        })
    }

    /// A synced call: in its node's round (cluster_rounds.rs) if its time limit is the
    /// rounds' (that of their connections' replies), so that no `WAIT` blocks the cluster
    /// connection other calls share; otherwise, or if the node cannot be reached that way,
    /// alone: the call then `WAIT`, pipelined to the slot's master (redirects followed as for
    /// one command).
    async fn run_synced(
        &self,
        call: &Call<'_>,
        limit: Duration,
        routed: &mut Routed,
        identity: Option<&Arc<ServerClient>>,
        wait: WaitFor,
    ) -> redis::RedisResult<(Value, WaitReply)> {
        if !call.load_first
            && limit == self.command_timeout + wait.timeout
            && let Some(identity) = identity
            && let Some(reply) = self.run_in_round(call, routed, identity, wait).await
        {
            return reply;
        }
        // Where it goes alone (recorded only now: a call that waited for a round's connection
        // until its time ran out was never sent).
        if let Some(sent) = call.sent {
            sent.record(identity.cloned());
        }
        sync::send(routed, &call.body, wait).await
    }

    /// A synced call in the round of its node (`own`: its slot's connection's identity, which
    /// names the node), on a connection of the rounds (cluster_rounds.rs). `None` when it
    /// goes alone after all: no round to go in there, or the node refused the call without
    /// running it (`MOVED`, `ASK`, a transition, `NOSCRIPT`); alone, it follows the redirect
    /// from where this one points, or loads the script.
    async fn run_in_round(
        &self,
        call: &Call<'_>,
        routed: &mut Routed,
        own: &Arc<ServerClient>,
        wait: WaitFor,
    ) -> Option<redis::RedisResult<(Value, WaitReply)>> {
        let node = own.node.as_deref()?;
        let (identity, pending) = self.rounds.join(call, node, wait).await?;
        if let Some(sent) = call.sent {
            sent.record(Some(identity));
        }
        // The round's connection stays out of other rounds until this call settled.
        let (reply, held) = pending.reply().await;
        if let (Err(e), Some(held)) = (&reply, &held)
            && (e.is_io_error() || e.is_timeout() || e.is_connection_dropped())
        {
            held.broken();
        }
        match reply {
            Err(e) if not_run(&e) => {
                tracing::debug!(error = %e, "a synced call refused in its round; sending it alone");
                routed.again_after(&e, &mut 0).await;
                None
            }
            reply => Some(reply),
        }
    }

    /// The connection a call on `key` goes on, as its node knows it, asked of the node (`run`
    /// reads the per-slot cache first; this fills it).
    async fn identity(
        &self,
        conn: &mut ClusterConnection,
        route: Route,
    ) -> Option<Arc<ServerClient>> {
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
        let info = conn
            .route_command(redis::cmd("CLIENT").arg("INFO").clone(), routing.clone())
            .await;
        let identity = match info {
            Ok(info) => ServerClient::parse(&redis::from_redis_value::<String>(info).ok()?)?,
            // Without CLIENT INFO (before 6.2, or refused to this user): the id alone, killed
            // on the slot's master (capabilities.rs, RELIABILITY.md).
            Err(e) if !(e.is_io_error() || e.is_timeout()) => {
                let id = conn
                    .route_command(redis::cmd("CLIENT").arg("ID").clone(), routing)
                    .await
                    .ok()?;
                ServerClient {
                    id: redis::from_redis_value(id).ok()?,
                    addr: None,
                    node: None,
                }
            }
            Err(_) => return None,
        };
        let identity = Arc::new(identity);
        self.identities().insert(route, identity.clone());
        Some(identity)
    }

    fn identities(&self) -> std::sync::MutexGuard<'_, HashMap<Route, Arc<ServerClient>>> {
        self.identities
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn forget_identities(&self) {
        self.identities().clear();
    }

    /// Kills the connection `client` at its node (`CLIENT KILL ID .. ADDR ..`, sent to the
    /// node the identity names, else to `key`'s master).
    ///
    /// When that node cannot be reached (killed, or cut off from this client), the request
    /// counts as cut off once `key`'s slot is served by another master
    /// ([`served_elsewhere`](Self::served_elsewhere)): nothing that node runs from then on
    /// reaches the slot's data. Otherwise a master that died for good would leave every
    /// request of unknown outcome on it unsettled.
    pub(super) async fn cut_off(&self, client: &ServerClient, key: &str) -> Result<Value> {
        let killed = self.kill_client(client, key).await;
        match (&killed, client.node.as_deref()) {
            (Err(e), Some(node)) if e.is_transient() => {
                let mut conn = self.connection().await?;
                refresh_slots(&mut conn, &self.refreshed).await;
                if self.served_elsewhere(&mut conn, node, key).await {
                    tracing::debug!(node, key, error = %e, "the node a request went to is unreachable and its slot served by another master: nothing of the request can take effect");
                    return Ok(Value::Int(0));
                }
                killed
            }
            _ => killed,
        }
    }

    /// Whether `key`'s slot is served now by a master other than `node`, as that master says
    /// (`CLIENT INFO`'s `laddr`, `ROLE`). A replica promoted over `node` takes nothing from
    /// it any more, and a node whose slot migrated refuses the slot's keys: what `node` runs
    /// later cannot change the slot's data, so evidence read from its master is final.
    async fn served_elsewhere(&self, conn: &mut ClusterConnection, node: &str, key: &str) -> bool {
        let master = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
            Route::with_slot(Slot::for_key(key), SlotAddr::Master),
        ));
        let info = tokio::time::timeout(
            self.command_timeout,
            conn.route_command(redis::cmd("CLIENT").arg("INFO").clone(), master),
        )
        .await;
        let serving = match info {
            Ok(Ok(info)) => redis::from_redis_value::<String>(info)
                .ok()
                .and_then(|info| ServerClient::parse(&info))
                .and_then(|client| client.node),
            _ => None,
        };
        let Some((host, port)) = serving
            .filter(|serving| serving != node)
            .as_deref()
            .and_then(split_host_port)
        else {
            return false;
        };
        let at = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
        let role = tokio::time::timeout(
            self.command_timeout,
            conn.route_command(redis::cmd("ROLE").clone(), at),
        )
        .await;
        matches!(
            role,
            Ok(Ok(Value::Array(ref items)))
                if matches!(items.first(), Some(Value::BulkString(b)) if b.as_slice() == b"master")
        )
    }

    /// `CLIENT KILL` of `client` at its node (see [`cut_off`](Self::cut_off)).
    async fn kill_client(&self, client: &ServerClient, key: &str) -> Result<Value> {
        let mut conn = self.connection().await?;
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("KILL").arg("ID").arg(client.id);
        if let Some(addr) = &client.addr {
            cmd.arg("ADDR").arg(addr);
        }
        cmd.arg("SKIPME").arg("yes");
        let routing = match client.node.as_deref().and_then(split_host_port) {
            Some((host, port)) => SingleNodeRoutingInfo::ByAddress { host, port },
            None => SingleNodeRoutingInfo::SpecificNode(Route::with_slot(
                Slot::for_key(key),
                SlotAddr::Master,
            )),
        };
        let request = conn.route_command(cmd, RoutingInfo::SingleNode(routing));
        match tokio::time::timeout(self.command_timeout, request).await {
            Ok(reply) => reply.map_err(|e| Error::from_redis(e, key)),
            Err(_) => Err(Error::Timeout {
                operation: "cut off",
                after: self.command_timeout,
            }),
        }
    }

    /// A connection for subscriptions and the channel its pushes (messages, confirmations,
    /// `sunsubscribe` of a moved slot, disconnections) arrive on.
    pub(super) async fn subscriber(
        &self,
    ) -> Result<(
        ClusterConnection,
        mpsc::UnboundedReceiver<PushInfo>,
        Flavour,
    )> {
        let flavour = self.check().await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let client = seeds(
            &self.nodes,
            &self.credentials,
            self.provider.as_ref(),
            &self.tls,
        )
        .connection_timeout(self.timeouts.0)
        .response_timeout(self.timeouts.1)
        .retries(3)
        .use_protocol(ProtocolVersion::RESP3)
        .push_sender(tx)
        .build()
        .map_err(Error::Redis)?;
        let limit = self.connect_timeout + self.command_timeout;
        match tokio::time::timeout(limit, client.get_async_connection()).await {
            Ok(Ok(conn)) => Ok((conn, rx, flavour)),
            Ok(Err(e)) => Err(self.connect_error(e)),
            Err(_) => Err(Error::Timeout {
                operation: "pub/sub connect",
                after: limit,
            }),
        }
    }

    /// The publish verb(s), once the flavour is settled (connecting if needed).
    pub(super) async fn publish_command(&self) -> Result<&'static str> {
        Ok(self.check().await?.verbs())
    }

    /// The slot of `key`, to group renewals (a batch script never spans slots).
    pub(super) fn slot(key: &str) -> Slot {
        Slot::for_key(key)
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.rounds.close();
    }
}

/// How many times one call is sent at most: redirections (a slot migrating while the map is
/// rebuilt) and refusals during a transition (`TRYAGAIN` and the like), which back off.
const MAX_SENDS: usize = 40;
/// Back-off after a refusal during a transition, doubled each time up to the last.
const TRANSITION_BACKOFF: [Duration; 5] = [
    Duration::from_millis(10),
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(200),
];

/// The call connection, routed to one slot's master: what a script invocation or a command is
/// sent through, redirections followed.
struct Routed {
    conn: ClusterConnection,
    /// Shared by the client's calls: when the slot map was last asked to be rebuilt.
    refreshed: Arc<Mutex<Option<std::time::Instant>>>,
    /// The slot's master, where a call starts over after a refusal.
    home: SingleNodeRoutingInfo,
    /// Where the next command goes: the slot's master, or the node a redirection named (kept
    /// for the rest of the call, so that a script loaded after `NOSCRIPT` is loaded there).
    target: SingleNodeRoutingInfo,
    /// Whether that node needs `ASKING` first (the slot is being imported there).
    asking: bool,
}

impl redis::aio::ConnectionLike for Routed {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut last = None;
            let mut refusals = 0;
            for _ in 0..MAX_SENDS {
                let reply = if self.asking {
                    let mut pipe = redis::pipe();
                    pipe.cmd("ASKING").add_command(cmd.clone());
                    self.conn
                        .route_pipeline(pipe, 1, 1, self.target.clone())
                        .await
                        .map(|mut replies| replies.pop().unwrap_or(Value::Nil))
                } else {
                    self.conn
                        .route_command(cmd.clone(), RoutingInfo::SingleNode(self.target.clone()))
                        .await
                };
                let e = match reply {
                    Ok(value) => return Ok(value),
                    Err(e) => e,
                };
                if !self.again_after(&e, &mut refusals).await {
                    return Err(e);
                }
                last = Some(e);
            }
            Err(last.unwrap_or_else(|| {
                redis::RedisError::from((redis::ErrorKind::Client, "too many redirections"))
            }))
        })
    }

    /// A pipeline to the slot's master (a synced call: the script, then `WAIT`), redirects
    /// followed as for one command: a redirect or refusal shows in the first reply (the node
    /// refused the whole pipeline, which did not run). The replies are values, errors
    /// included.
    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut last = None;
            let mut refusals = 0;
            for _ in 0..MAX_SENDS {
                let reply = if self.asking {
                    let mut pipe = redis::pipe();
                    pipe.cmd("ASKING");
                    for cmd in pipeline.cmd_iter() {
                        pipe.add_command(cmd.clone());
                    }
                    self.conn
                        .route_pipeline(pipe, offset + 1, count, self.target.clone())
                        .await
                } else {
                    self.conn
                        .route_pipeline(pipeline.clone(), offset, count, self.target.clone())
                        .await
                };
                let e = match reply {
                    Ok(replies) => match replies.first() {
                        Some(Value::ServerError(e)) if refusal(Some(e.code())) => {
                            redis::RedisError::from(e.clone())
                        }
                        _ => return Ok(replies),
                    },
                    Err(e) => e,
                };
                if !self.again_after(&e, &mut refusals).await {
                    return Err(e);
                }
                last = Some(e);
            }
            Err(last.unwrap_or_else(|| {
                redis::RedisError::from((redis::ErrorKind::Client, "too many redirections"))
            }))
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// Whether a call's error in a round proves it did not run, and it is to go again alone: a
/// redirect or refusal of its node, or `NOSCRIPT`.
fn not_run(e: &redis::RedisError) -> bool {
    refusal(e.code()) || super::script::is_noscript_reply(e)
}

/// Error codes of a request a node refused without running it (see `Routed::again_after`).
fn refusal(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN")
    )
}

/// At most one slot-map rebuild asked for in this period.
const REFRESH_PERIOD: Duration = Duration::from_millis(500);

/// Has redis-rs rebuild its slot map from the seed nodes, at most once per
/// [`REFRESH_PERIOD`] for the client (`refreshed`: when it was last asked): see
/// [`Routed::refresh`].
async fn refresh_slots(
    conn: &mut ClusterConnection,
    refreshed: &Mutex<Option<std::time::Instant>>,
) {
    {
        let mut last = refreshed.lock().unwrap_or_else(PoisonError::into_inner);
        let now = std::time::Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < REFRESH_PERIOD) {
            return;
        }
        *last = Some(now);
    }
    let nowhere = SingleNodeRoutingInfo::ByAddress {
        host: "redisson-sync.refresh.invalid".to_owned(),
        port: 1,
    };
    let _ = conn
        .route_command(redis::cmd("PING"), RoutingInfo::SingleNode(nowhere))
        .await;
}

impl Routed {
    /// After a request failed with `e`: `true` when it was refused without running and is
    /// worth sending again (to where `MOVED` or `ASK` points, or after a pause in a
    /// transition); `false` when `e` is the answer.
    async fn again_after(&mut self, e: &redis::RedisError, refusals: &mut usize) -> bool {
        // MOVED and ASK: the node refused the request, which did not run.
        let redirect = e
            .redirect_node()
            .and_then(|(addr, _)| split_host_port(addr))
            .map(|(host, port)| SingleNodeRoutingInfo::ByAddress { host, port });
        match (e.code(), redirect) {
            (Some("MOVED"), Some(node)) => {
                tracing::debug!(error = %e, "slot moved; following");
                self.target = node;
                self.asking = false;
            }
            (Some("ASK"), Some(node)) => {
                tracing::debug!(error = %e, "slot migrating; asking the importing node");
                self.target = node;
                self.asking = true;
            }
            // Refused, not run, during a migration (a multi-key request while the slot's
            // keys are split), a failover, or while the connection to the slot's node is
            // being made: start over from the slot's master, a little later (the caller's
            // time limit bounds it).
            (Some("TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN"), _) => {
                tracing::debug!(error = %e, "cluster in transition; trying again");
                self.backoff(refusals).await;
            }
            _ if e.kind() == redis::ErrorKind::ClusterConnectionNotFound => {
                tracing::debug!(error = %e, "no connection to the slot's node yet; trying again");
                self.backoff(refusals).await;
            }
            // The node refused the connection: the request was not sent. Its slot may have a
            // new master (a failover): have the map rebuilt, then again.
            _ if e.is_connection_refusal() => {
                tracing::debug!(error = %e, "the slot's node refused the connection; refreshing the slot map");
                self.refresh().await;
                self.backoff(refusals).await;
            }
            // Sent, outcome unknown (a dropped connection, a timeout): never sent again from
            // here (the caller resolves it), but the map is rebuilt so that the next call
            // finds the slot's master if it changed.
            _ if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => {
                self.refresh().await;
                return false;
            }
            _ => return false,
        }
        true
    }

    /// Has redis-rs rebuild its slot map from the seed nodes, at most once per
    /// [`REFRESH_PERIOD`]. It does so by itself on `MOVED`, but not when a node is gone: its
    /// requests then fail with I/O errors and are sent to the dead node until something else
    /// refreshes the map. A command routed to an address it has no connection to makes it
    /// reconnect from the seed nodes; nothing is sent anywhere.
    async fn refresh(&mut self) {
        refresh_slots(&mut self.conn, &self.refreshed).await;
    }

    /// Waits before starting over from the slot's master.
    async fn backoff(&mut self, refusals: &mut usize) {
        let pause = TRANSITION_BACKOFF[(*refusals).min(TRANSITION_BACKOFF.len() - 1)];
        *refusals += 1;
        tokio::time::sleep(pause).await;
        self.target = self.home.clone();
        self.asking = false;
    }
}

/// The connection settings of a node connection for synced rounds: the first seed's, with the
/// configured login.
fn rounds_base(config: &Config) -> Result<redis::ConnectionInfo, BuildError> {
    use redis::IntoConnectionInfo;
    let seed = config
        .cluster_nodes
        .first()
        .ok_or_else(|| BuildError::InvalidConfig("no cluster seed node".to_owned()))?;
    let info = seed
        .as_str()
        .into_connection_info()
        .map_err(BuildError::Url)?;
    Ok(super::sentinel::with_credentials(info, config))
}

/// The flavour `mode` gives on a cluster that does (`supported`) or does not have sharded
/// pub/sub (Redisson's `checkShardingSupport`).
fn decide(mode: PubSubMode, supported: bool) -> Result<Flavour> {
    let (classic, sharded) = match mode {
        PubSubMode::Classic => (true, false),
        PubSubMode::Auto => (!supported, supported),
        PubSubMode::Sharded | PubSubMode::Both if !supported => {
            return Err(Error::Topology(format!(
                "pub/sub mode {} needs sharded pub/sub (Redis or Valkey 7+), which this cluster \
                 does not have (PUBSUB SHARDNUMSUB failed): use PubSubMode::Classic or Auto",
                mode.as_str()
            )));
        }
        PubSubMode::Sharded => (false, true),
        _ => (true, true),
    };
    Ok(Flavour { classic, sharded })
}

fn split_host_port(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    Some((host.trim_matches(['[', ']']).to_owned(), port.parse().ok()?))
}

/// Refuses a name whose derived keys would not share its slot: Redisson derives channels and
/// auxiliary keys as `prefix:{name}` for a name without `{`, and `prefix:name` for one with
/// `{` (docs/LAYOUT.md §1.2). The first keeps the slot only if the name is not empty and has
/// no `}` (else the braces added make another tag, or an empty one); the second only if the
/// name's first `{` opens a complete, non-empty hash tag. (`a{b` hashes whole while
/// `redisson_lock__channel:a{b` does not: Redisson 4.7.0 then fails its unlock with CROSSSLOT
/// after the lock was taken; `a}b` and the empty name likewise.)
pub(crate) fn check_name(name: &str) -> Result<()> {
    let why = match name.find('{') {
        None if name.is_empty() => "it is empty",
        None if name.contains('}') => "it has a '}' but no '{' before it",
        None => return Ok(()),
        Some(open) => match name[open + 1..].find('}') {
            Some(len) if len > 0 => return Ok(()),
            _ => "its first '{' opens no complete, non-empty {hash tag}",
        },
    };
    Err(Error::Topology(format!(
        "name {name:?} cannot be used on Redis Cluster: {why}, so the keys and channels \
         derived from it (such as {:?}) fall in other slots than the name itself and its \
         scripts would fail with CROSSSLOT; use a non-empty name without braces, or one \
         whose first '{{' opens a non-empty tag such as \"{{orders}}:42\"; nothing was written",
        crate::layout::lock_channel(name)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_keys_in_one_slot_or_are_refused() {
        for ok in ["order:42", "{orders}:42", "a{b}c", "x{y}z{"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["a{b", "{}x", "a{}b{c}", "{", "a}b", "}", ""] {
            let err = check_name(bad).unwrap_err().to_string();
            assert!(err.contains("CROSSSLOT"), "{bad}: {err}");
        }
        // The rule is the slot rule: the refused ones really differ, the accepted ones agree.
        let same = |name: &str| {
            let channel = if name.contains('{') {
                format!("redisson_lock__channel:{name}")
            } else {
                format!("redisson_lock__channel:{{{name}}}")
            };
            Slot::for_key(name) == Slot::for_key(&channel)
        };
        assert!(same("order:42") && same("{orders}:42") && same("a{b}c"));
        assert!(!same("a{b") && !same("{}x") && !same("a}b") && !same(""));
    }

    /// Any name (issue 29, item 8): refused exactly when one of the names derived from it
    /// falls in another slot. (Found by it: names with a `}` and no `{`, and the empty name,
    /// were let through and failed with CROSSSLOT.) `REDISSON_FUZZ_CASES` and
    /// `REDISSON_FUZZ_SEED` choose another run, as for `tests/fuzz_*.rs`.
    #[test]
    fn any_name_is_refused_exactly_when_a_derived_name_leaves_its_slot() {
        use proptest::prelude::*;
        use proptest::test_runner::TestRunner;

        use crate::layout;

        let mut runner = TestRunner::new(crate::reply::fuzz::config(2_000));
        let pieces = prop::sample::select(vec!["{", "}", "{}", "a", "b", ":", "é", "{a}"]);
        let names = prop_oneof![
            prop::collection::vec(pieces, 0..7).prop_map(|p| p.concat()),
            any::<String>(),
        ];
        runner
            .run(&names, |name| {
                let slot = Slot::for_key(&name);
                let derived = [
                    layout::lock_channel(&name),
                    layout::fair_queue(&name),
                    layout::fenced_token(&name),
                    layout::permit_timeouts(&name),
                    layout::semaphore_grant_marker(&name, "r"),
                    layout::rwlock_timeout_prefix(&name, "f"),
                ];
                let kept = derived.iter().all(|key| Slot::for_key(key) == slot);
                prop_assert_eq!(check_name(&name).is_ok(), kept, "{:?}", name);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn the_flavour_follows_the_mode_as_redisson_decides() {
        let f = |mode, supported| decide(mode, supported).map(Flavour::verbs);
        assert_eq!(f(PubSubMode::Auto, true).unwrap(), "SPUBLISH");
        assert_eq!(f(PubSubMode::Auto, false).unwrap(), "PUBLISH");
        assert_eq!(f(PubSubMode::Classic, true).unwrap(), "PUBLISH");
        assert_eq!(f(PubSubMode::Sharded, true).unwrap(), "SPUBLISH");
        assert_eq!(f(PubSubMode::Both, true).unwrap(), "SPUBLISH PUBLISH");
        for mode in [PubSubMode::Sharded, PubSubMode::Both] {
            let err = f(mode, false).unwrap_err().to_string();
            assert!(
                err.contains("needs sharded pub/sub") && err.contains("Classic or Auto"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_verbs_follow_the_flavour() {
        let f = |classic, sharded| Flavour { classic, sharded }.verbs();
        assert_eq!(f(true, false), "PUBLISH");
        assert_eq!(f(false, true), "SPUBLISH");
        assert_eq!(f(true, true), "SPUBLISH PUBLISH");
    }
}
