//! The scenarios' private, throwaway `redis-server` (testkit's [`RedisServer`]: a free port of
//! 127.0.0.1, killed by its own pid when dropped), plus the raw queries the scenarios use to
//! look at what Redis holds.

use std::path::Path;

use redis::{Cmd, RedisResult, Value};

pub use testkit::{RedisCluster, RedisSentinel, RedisServer};

/// A connection for looking at what Redis holds: to the single server, or to the cluster
/// (routed by key; `KEYS` goes to every master).
pub enum Connection {
    Single(redis::Connection),
    /// The cluster connection, and the URL of every node (for per-node queries).
    Cluster(Box<redis::cluster::ClusterConnection>, Vec<String>),
}

impl redis::ConnectionLike for Connection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c, _) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c, _) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Self::Single(c) => c.req_command(cmd),
            Self::Cluster(c, _) => c.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        match self {
            Self::Single(c) => c.check_connection(),
            Self::Cluster(c, _) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            Self::Single(c) => c.is_open(),
            Self::Cluster(c, _) => c.is_open(),
        }
    }
}

/// Where the scenarios run: one server, a cluster of 3 masters with a replica each, or a
/// master with two replicas behind three Sentinels.
pub enum Backend {
    Single(RedisServer),
    Cluster(RedisCluster),
    Sentinel(RedisSentinel),
}

impl Backend {
    /// The URL the agents get: the server's, or the first seed node's.
    pub fn url(&self) -> String {
        match self {
            Self::Single(server) => server.url(),
            Self::Cluster(cluster) => cluster.seed_urls()[0].clone(),
            Self::Sentinel(setup) => setup.sentinel_urls()[0].clone(),
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// Whether the servers have sharded pub/sub (probed with `PUBSUB SHARDNUMSUB` on the first
    /// node; Redis and Valkey 7+). Without it, `auto` is classic on both sides.
    pub fn has_sharded_pubsub(&self) -> bool {
        let server = match self {
            Self::Single(server) => server,
            Self::Cluster(cluster) => cluster.server(0),
            Self::Sentinel(setup) => setup.master(),
        };
        server.try_connect().is_ok_and(|mut con| {
            redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .query::<Value>(&mut con)
                .is_ok()
        })
    }

    pub fn try_connect(&self) -> Result<Connection, String> {
        match self {
            Self::Single(server) => server.try_connect().map(Connection::Single),
            Self::Cluster(cluster) => redis::cluster::ClusterClient::new(cluster.seed_urls())
                .and_then(|c| c.get_connection())
                .map(|c| Connection::Cluster(Box::new(c), cluster.seed_urls()))
                .map_err(|e| format!("cluster connection: {e}")),
            // The master the Sentinels name now.
            Self::Sentinel(setup) => {
                let addr = setup.current_master_addr()?;
                redis::Client::open(format!("redis://{addr}"))
                    .and_then(|c| c.get_connection())
                    .map(Connection::Single)
                    .map_err(|e| format!("master {addr}: {e}"))
            }
        }
    }
}

/// Starts a cluster of 3 masters and 3 replicas, its nodes' files under `logs`.
pub fn start_cluster() -> Result<RedisCluster, String> {
    RedisCluster::builder().masters(3).replicas(1).try_start()
}

/// Starts a master, two replicas and three Sentinels.
pub fn start_sentinel() -> Result<RedisSentinel, String> {
    RedisSentinel::try_start()
}

/// Starts `redis-server` without persistence, its files in a fresh directory under `logs`
/// (removed when the server is dropped).
pub fn start(logs: &Path) -> Result<RedisServer, String> {
    RedisServer::builder().dir_in(logs).try_start()
}

/// What Redis holds under one key, as a scenario compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// `TYPE key`: `none`, `hash`, `string`, ...
    pub kind: String,
    /// The hash's fields and values, sorted (empty unless `kind` is `hash`).
    pub fields: Vec<(String, String)>,
    /// `PTTL key`: -2 no key, -1 no expiry.
    pub pttl: i64,
}

pub fn key_state(con: &mut Connection, key: &str) -> Result<KeyState, String> {
    let kind: String = query(con, redis::cmd("TYPE").arg(key))?;
    let mut fields: Vec<(String, String)> = if kind == "hash" {
        query(con, redis::cmd("HGETALL").arg(key))?
    } else {
        Vec::new()
    };
    fields.sort();
    let pttl: i64 = query(con, redis::cmd("PTTL").arg(key))?;
    Ok(KeyState { kind, fields, pttl })
}

/// Every key in the database, sorted.
pub fn all_keys(con: &mut Connection) -> Result<Vec<String>, String> {
    let mut keys: Vec<String> = query(con, redis::cmd("KEYS").arg("*"))?;
    keys.sort();
    Ok(keys)
}

/// `PUBSUB NUMSUB channel`; on a cluster, the subscribers of every node, classic
/// (`NUMSUB`, per node) and sharded (`SHARDNUMSUB`, on the slot's master) alike.
pub fn numsub(con: &mut Connection, channel: &str) -> Result<i64, String> {
    if let Connection::Cluster(_, nodes) = con {
        let mut total = 0;
        for url in nodes.iter() {
            let mut node = redis::Client::open(url.as_str())
                .and_then(|c| c.get_connection())
                .map_err(|e| format!("{url}: {e}"))?;
            for verb in ["NUMSUB", "SHARDNUMSUB"] {
                total += node_subscribers(&mut node, verb, channel)
                    .map_err(|e| format!("{url}: {e}"))?;
            }
        }
        return Ok(total);
    }
    let reply: Vec<Value> = query(con, redis::cmd("PUBSUB").arg("NUMSUB").arg(channel))?;
    match reply.get(1) {
        Some(Value::Int(n)) => Ok(*n),
        other => Err(format!(
            "PUBSUB NUMSUB {channel}: unexpected reply {other:?}"
        )),
    }
}

/// `PUBSUB <verb> channel` (`NUMSUB` or `SHARDNUMSUB`) on one node: its subscribers of
/// `channel`. A server without sharded pub/sub (before 7.0) has no sharded subscribers.
pub fn node_subscribers(
    node: &mut redis::Connection,
    verb: &str,
    channel: &str,
) -> Result<i64, String> {
    let reply: Vec<Value> = match redis::cmd("PUBSUB").arg(verb).arg(channel).query(node) {
        Ok(reply) => reply,
        Err(e) if verb == "SHARDNUMSUB" && e.kind() != redis::ErrorKind::Io => return Ok(0),
        Err(e) => return Err(format!("PUBSUB {verb}: {e}")),
    };
    match reply.get(1) {
        Some(Value::Int(n)) => Ok(*n),
        other => Err(format!(
            "PUBSUB {verb} {channel}: unexpected reply {other:?}"
        )),
    }
}

pub fn query<T: redis::FromRedisValue>(
    con: &mut Connection,
    cmd: &redis::Cmd,
) -> Result<T, String> {
    cmd.query(con).map_err(|e| format!("redis: {e}"))
}
