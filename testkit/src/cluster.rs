//! [`RedisCluster`]: a throwaway Redis Cluster of `redis-server` processes on one host.

use std::process::{Command, Stdio};
use std::time::Duration;

use redis::Value;

use crate::build::ServerBuild;
use crate::server::{RedisServer, connect_with_timeout, poll_until_ok};

/// How long the cluster may take to agree after `redis-cli --cluster create`.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one query of one node may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// What a cluster node was made by `redis-cli --cluster create`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Serves slots.
    Master,
    /// Replicates a master.
    Replica,
}

/// One node of a [`RedisCluster`], as [`RedisCluster::nodes`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterNode {
    /// Its position in [`RedisCluster::nodes`]; what [`RedisCluster::stop`] and the other
    /// node methods take.
    pub index: usize,
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    /// The pid of its current (or last) process.
    pub pid: u32,
    /// Its role when the cluster was created (a failover since does not change it).
    pub role: Role,
}

impl ClusterNode {
    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

/// Options of a [`RedisCluster`]; from [`RedisCluster::builder`].
#[derive(Debug, Clone)]
pub struct RedisClusterBuilder {
    masters: usize,
    replicas: usize,
    args: Vec<String>,
    /// CA certificate, server certificate and key: every node also listens for TLS.
    tls: Option<[String; 3]>,
}

impl RedisClusterBuilder {
    /// How many masters (default 3; `redis-cli --cluster create` needs at least 3).
    pub fn masters(mut self, n: usize) -> Self {
        self.masters = n;
        self
    }

    /// How many replicas each master gets (default 0).
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n;
        self
    }

    /// Extra `redis-server` arguments for every node (see
    /// [`RedisServerBuilder::args`](crate::RedisServerBuilder::args)).
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Every node also listens for TLS on a port of its own, with `files`' certificate, and
    /// the cluster bus runs over TLS (`tls-cluster yes`, so that `CLUSTER SLOTS` answers TLS
    /// clients with the TLS ports and plain clients with the plain ones); the cluster is
    /// created over TLS. [`tls_seed_urls`](RedisCluster::tls_seed_urls) are the `rediss://`
    /// seeds; the plain ports (and every other method) work as without TLS.
    pub fn tls(mut self, files: &crate::TlsFiles) -> Self {
        self.tls = Some(files.paths());
        self
    }

    /// Starts the nodes, creates the cluster and waits (up to 30 s) until every node reports
    /// `cluster_state:ok` and all agree on the slots. Panics on failure.
    pub fn start(self) -> RedisCluster {
        self.try_start().unwrap_or_else(|msg| panic!("{msg}"))
    }

    /// [`start`](Self::start), reporting failure as an error message instead of panicking.
    pub fn try_start(self) -> Result<RedisCluster, String> {
        if self.masters < 3 {
            return Err(format!(
                "a cluster needs at least 3 masters, not {}",
                self.masters
            ));
        }
        let count = self.masters * (1 + self.replicas);
        let mut servers = Vec::with_capacity(count);
        let mut tls_ports = Vec::new();
        for _ in 0..count {
            let mut tls_args: Vec<String> = Vec::new();
            if let Some(paths) = &self.tls {
                let port = crate::server::free_port()?;
                tls_ports.push(port);
                tls_args = crate::tls::server_args(paths, port);
                tls_args
                    .extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(String::from));
            }
            let server = RedisServer::builder()
                .args(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                    "--repl-diskless-sync-delay",
                    "0",
                ])
                .args(&self.args.iter().map(String::as_str).collect::<Vec<_>>())
                .args(&tls_args.iter().map(String::as_str).collect::<Vec<_>>())
                .try_start()?;
            servers.push(server);
        }
        let mut cluster = RedisCluster {
            servers,
            roles: Vec::new(),
            tls_ports,
        };
        cluster.create(self.replicas, self.tls.as_ref().map(|[ca, ..]| ca.as_str()))?;
        cluster.wait_agreed()?;
        cluster.roles = cluster
            .servers
            .iter()
            .map(|s| role(s).map_err(|e| format!("ROLE of node {}: {e}", s.port())))
            .collect::<Result<_, _>>()?;
        Ok(cluster)
    }
}

/// A Redis Cluster of private `redis-server` processes on free ports of 127.0.0.1: N masters
/// (default 3) with R replicas each (default 0), `--cluster-node-timeout 2000`, no
/// persistence, created with `redis-cli --cluster create`.
///
/// Every node is a [`RedisServer`] in its own directory: dropping the cluster kills every
/// node by its pid and removes the directories.
#[derive(Debug)]
pub struct RedisCluster {
    servers: Vec<RedisServer>,
    roles: Vec<Role>,
    /// The nodes' TLS ports, in node order (empty without [`RedisClusterBuilder::tls`]).
    tls_ports: Vec<u16>,
}

impl RedisCluster {
    /// Options: masters, replicas per master, extra node arguments.
    pub fn builder() -> RedisClusterBuilder {
        RedisClusterBuilder {
            masters: 3,
            replicas: 0,
            args: Vec::new(),
            tls: None,
        }
    }

    /// A cluster of 3 masters without replicas; panics on failure.
    pub fn start() -> Self {
        Self::builder().start()
    }

    /// `redis://127.0.0.1:<port>` of every node, for a cluster client's seed list.
    pub fn seed_urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }

    /// `rediss://127.0.0.1:<tls port>` of every node (empty without
    /// [`RedisClusterBuilder::tls`]).
    pub fn tls_seed_urls(&self) -> Vec<String> {
        self.tls_ports
            .iter()
            .map(|port| format!("rediss://127.0.0.1:{port}"))
            .collect()
    }

    /// Every node, with its index, port, pid and role at creation.
    pub fn nodes(&self) -> Vec<ClusterNode> {
        (0..self.servers.len()).map(|i| self.node(i)).collect()
    }

    /// The node at `index` of [`nodes`](Self::nodes).
    pub fn node(&self, index: usize) -> ClusterNode {
        let server = &self.servers[index];
        ClusterNode {
            index,
            port: server.port(),
            pid: server.pid(),
            role: self.roles[index],
        }
    }

    /// The [`RedisServer`] of node `index`, e.g. for a raw connection to it.
    pub fn server(&self, index: usize) -> &RedisServer {
        &self.servers[index]
    }

    /// The master that serves `key` now: its slot from `CLUSTER KEYSLOT`, the slot's master
    /// from `CLUSTER SLOTS`, both asked of the first node that answers. Panics if no node
    /// answers or the slot has no known master.
    pub fn node_for_key(&self, key: &str) -> ClusterNode {
        let mut failures = Vec::new();
        for server in self.servers.iter().filter(|s| s.is_running()) {
            match self.master_of_key(server, key) {
                Ok(node) => return node,
                Err(e) => failures.push(format!("node {}: {e}", server.port())),
            }
        }
        panic!("no node could route {key:?}: {}", failures.join("; "));
    }

    /// Kills node `index` (SIGKILL, by its pid); see [`RedisServer::stop`].
    pub fn stop(&mut self, index: usize) {
        self.servers[index].stop();
    }

    /// Starts node `index` again on its port and with its `nodes.conf`, so it rejoins.
    pub fn restart(&mut self, index: usize) {
        self.servers[index].restart();
    }

    /// Freezes node `index` with SIGSTOP.
    pub fn pause(&self, index: usize) {
        self.servers[index].pause();
    }

    /// Resumes node `index` after [`pause`](Self::pause) (SIGCONT).
    pub fn resume(&self, index: usize) {
        self.servers[index].resume();
    }

    fn master_of_key(&self, server: &RedisServer, key: &str) -> Result<ClusterNode, String> {
        let mut con = connect_with_timeout(server, QUERY_TIMEOUT)?;
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut con)
            .map_err(|e| format!("CLUSTER KEYSLOT: {e}"))?;
        let port = slots(&mut con)?
            .into_iter()
            .find(|r| r.start <= slot && slot <= r.end)
            .map(|r| r.master)
            .ok_or_else(|| format!("slot {slot} has no master"))?;
        let index = self
            .servers
            .iter()
            .position(|s| s.port() == port)
            .ok_or_else(|| format!("slot {slot} is served by unknown port {port}"))?;
        Ok(self.node(index))
    }

    /// `redis-cli --cluster create <every node> --cluster-replicas R --cluster-yes`; over TLS
    /// (the TLS ports, trusting `tls_ca`) when the nodes' bus is.
    fn create(&self, replicas: usize, tls_ca: Option<&str>) -> Result<(), String> {
        let build = ServerBuild::current();
        let mut cli = Command::new(build.cli());
        let addrs: Vec<String> = match tls_ca {
            Some(ca) => {
                cli.args(["--tls", "--cacert", ca]);
                self.tls_ports
                    .iter()
                    .map(|port| format!("127.0.0.1:{port}"))
                    .collect()
            }
            None => self.servers.iter().map(|s| s.addr().to_string()).collect(),
        };
        let output = cli
            .arg("--cluster")
            .arg("create")
            .args(addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => build.missing(build.cli()),
                _ => format!("run redis-cli --cluster create: {e}"),
            })?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "redis-cli --cluster create failed ({}):\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    /// Waits until every node reports `cluster_state:ok` and the same `CLUSTER SLOTS`.
    fn wait_agreed(&self) -> Result<(), String> {
        poll_until_ok(CLUSTER_TIMEOUT, || self.agreement())
            .map_err(|last| format!("the cluster did not agree within {CLUSTER_TIMEOUT:?}: {last}"))
    }

    fn agreement(&self) -> Result<(), String> {
        let mut first: Option<Vec<SlotRange>> = None;
        for server in &self.servers {
            let mut con = connect_with_timeout(server, QUERY_TIMEOUT)?;
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut con)
                .map_err(|e| format!("CLUSTER INFO of {}: {e}", server.port()))?;
            if !info.lines().any(|l| l.trim() == "cluster_state:ok") {
                return Err(format!("node {} is not cluster_state:ok", server.port()));
            }
            let mut ranges = slots(&mut con)?;
            ranges.sort();
            if ranges.iter().map(|r| r.end - r.start + 1).sum::<i64>() != 16384 {
                return Err(format!("node {} does not cover all slots", server.port()));
            }
            match &first {
                None => first = Some(ranges),
                Some(seen) if *seen == ranges => {}
                Some(_) => return Err(format!("node {} sees other slots", server.port())),
            }
        }
        Ok(())
    }
}

/// One entry of `CLUSTER SLOTS`: a slot range, its master's port and its replicas' ports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SlotRange {
    start: i64,
    end: i64,
    master: u16,
    replicas: Vec<u16>,
}

/// `CLUSTER SLOTS`, with each range's replicas sorted.
fn slots(con: &mut redis::Connection) -> Result<Vec<SlotRange>, String> {
    let reply: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(con)
        .map_err(|e| format!("CLUSTER SLOTS: {e}"))?;
    let bad = |what: &str| format!("CLUSTER SLOTS: unexpected {what}");
    let mut ranges = Vec::new();
    for entry in reply {
        let Value::Array(items) = entry else {
            return Err(bad("entry"));
        };
        let int = |v: Option<&Value>| match v {
            Some(Value::Int(n)) => Ok(*n),
            _ => Err(bad("slot bound")),
        };
        let port = |v: &Value| match v {
            Value::Array(node) => match node.get(1) {
                Some(Value::Int(p)) => u16::try_from(*p).map_err(|_| bad("port")),
                _ => Err(bad("node")),
            },
            _ => Err(bad("node")),
        };
        let master = port(items.get(2).ok_or_else(|| bad("range without master"))?)?;
        let mut replicas = items[3..].iter().map(port).collect::<Result<Vec<_>, _>>()?;
        replicas.sort_unstable();
        ranges.push(SlotRange {
            start: int(items.first())?,
            end: int(items.get(1))?,
            master,
            replicas,
        });
    }
    Ok(ranges)
}

/// `ROLE` of a running node.
fn role(server: &RedisServer) -> Result<Role, String> {
    let mut con = connect_with_timeout(server, QUERY_TIMEOUT)?;
    let reply: Vec<Value> = redis::cmd("ROLE")
        .query(&mut con)
        .map_err(|e| format!("ROLE: {e}"))?;
    match reply.first() {
        Some(Value::BulkString(b)) if b == b"master" => Ok(Role::Master),
        Some(Value::BulkString(b)) if b == b"slave" => Ok(Role::Replica),
        other => Err(format!("unexpected ROLE reply {other:?}")),
    }
}
