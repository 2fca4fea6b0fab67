//! [`RedisSentinel`]: a throwaway master, two replicas and three Sentinels on one host.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::server::{RedisServer, connect_with_timeout, poll_until_ok, replica_link_up};

/// The name the Sentinels monitor the master under.
const MASTER_NAME: &str = "mymaster";
/// How many replicas the master has.
const REPLICAS: usize = 2;
/// How many Sentinels, and how many must agree the master is down.
const SENTINELS: usize = 3;
const QUORUM: usize = 2;
/// How long the setup may take to settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one query of one process may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// One master, two replicas and three Sentinels (quorum 2, `down-after-milliseconds 1000`,
/// `failover-timeout 3000`), every one a private `redis-server` process ([`RedisServer`]) on a
/// free port of 127.0.0.1. The Sentinels run `redis-server <generated conf> --sentinel`.
///
/// [`start`](Self::start) returns once every Sentinel reports the master, knows the replica
/// and the two other Sentinels, and the replica's link to the master is up. Dropping it kills
/// every process by its pid and removes their directories.
///
/// [`master`](Self::master) and [`replicas`](Self::replicas) are the processes as started;
/// after a failover, [`current_master_addr`](Self::current_master_addr) says which one the
/// Sentinels now point at.
#[derive(Debug)]
pub struct RedisSentinel {
    master: RedisServer,
    replicas: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    /// With [`start_tls`](Self::start_tls): each process's plain port -> its TLS port.
    tls_ports: HashMap<u16, u16>,
}

impl RedisSentinel {
    /// Starts the processes and waits (up to 30 s) until they have settled; panics on failure.
    pub fn start() -> Self {
        Self::try_start().unwrap_or_else(|msg| panic!("{msg}"))
    }

    /// [`start`](Self::start), reporting failure as an error message instead of panicking.
    pub fn try_start() -> Result<Self, String> {
        Self::try_start_with(None)
    }

    /// [`start`](Self::start) with every process also listening for TLS (a port of its own,
    /// `files`' certificate): replication, the Sentinels' links to the data nodes and to each
    /// other, and what the Sentinels report all use the TLS ports
    /// ([`tls_sentinel_urls`](Self::tls_sentinel_urls) for clients); the plain ports stay
    /// open for the tests' own queries.
    pub fn start_tls(files: &crate::TlsFiles) -> Self {
        Self::try_start_with(Some(files)).unwrap_or_else(|msg| panic!("{msg}"))
    }

    fn try_start_with(files: Option<&crate::TlsFiles>) -> Result<Self, String> {
        let mut tls_ports = HashMap::new();
        let tls = files.map(crate::TlsFiles::paths);
        // The TLS arguments of one process (replication and the Sentinels' links over TLS).
        let tls_args = |port: u16| -> Vec<String> {
            let Some(paths) = &tls else {
                return Vec::new();
            };
            let mut args = crate::tls::server_args(paths, port);
            args.extend(["--tls-replication", "yes"].map(String::from));
            args
        };
        let mut start = |builder: crate::RedisServerBuilder| -> Result<RedisServer, String> {
            if tls.is_none() {
                return builder.try_start();
            }
            let port = crate::server::free_port()?;
            let args = tls_args(port);
            let server = builder
                .args(&args.iter().map(String::as_str).collect::<Vec<_>>())
                .try_start()?;
            tls_ports.insert(server.port(), port);
            Ok(server)
        };
        let data_args = ["--repl-diskless-sync-delay", "0"];
        let master = start(RedisServer::builder().args(&data_args))?;
        let master_port = master.port().to_string();
        let mut replicas = Vec::new();
        for _ in 0..REPLICAS {
            replicas.push(start(RedisServer::builder().args(&data_args).args(&[
                "--replicaof",
                "127.0.0.1",
                &master_port,
            ]))?);
        }
        let mut sentinels = Vec::new();
        for _ in 0..SENTINELS {
            // A Sentinel needs a configuration file of its own to write its state to.
            sentinels.push(start(
                RedisServer::builder()
                    .config_file("sentinel.conf", "# written by the Sentinel\n".to_owned())
                    .arg("--sentinel"),
            )?);
        }
        // Data addresses: the TLS ports with TLS. Replicas were pointed at the plain port
        // (started before their master's TLS port was known to them): point them again.
        let data_port = |server: &RedisServer| {
            tls_ports
                .get(&server.port())
                .copied()
                .unwrap_or(server.port())
        };
        if tls.is_some() {
            for replica in &replicas {
                let mut con = connect_with_timeout(replica, QUERY_TIMEOUT)?;
                let _: () = redis::cmd("REPLICAOF")
                    .arg("127.0.0.1")
                    .arg(data_port(&master))
                    .query(&mut con)
                    .map_err(|e| format!("REPLICAOF: {e}"))?;
            }
        }
        // The Sentinels monitor the master's data address; with TLS they announce their TLS
        // port to each other.
        for sentinel in &sentinels {
            let mut con = connect_with_timeout(sentinel, QUERY_TIMEOUT)?;
            if tls.is_some() {
                let _: () = redis::cmd("SENTINEL")
                    .arg("CONFIG")
                    .arg("SET")
                    .arg("announce-port")
                    .arg(data_port(sentinel))
                    .query(&mut con)
                    .map_err(|e| format!("SENTINEL CONFIG SET announce-port: {e}"))?;
            }
            let _: () = redis::cmd("SENTINEL")
                .arg("MONITOR")
                .arg(MASTER_NAME)
                .arg("127.0.0.1")
                .arg(data_port(&master))
                .arg(QUORUM)
                .query(&mut con)
                .map_err(|e| format!("SENTINEL MONITOR: {e}"))?;
            for (option, value) in [
                ("down-after-milliseconds", "1000"),
                ("failover-timeout", "3000"),
            ] {
                let _: () = redis::cmd("SENTINEL")
                    .arg("SET")
                    .arg(MASTER_NAME)
                    .arg(option)
                    .arg(value)
                    .query(&mut con)
                    .map_err(|e| format!("SENTINEL SET {option}: {e}"))?;
            }
        }
        let setup = Self {
            master,
            replicas,
            sentinels,
            tls_ports,
        };
        setup.wait_settled()?;
        Ok(setup)
    }

    /// `redis://127.0.0.1:<port>` of every Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// `rediss://127.0.0.1:<tls port>` of every Sentinel (empty without
    /// [`start_tls`](Self::start_tls)).
    pub fn tls_sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .filter_map(|s| self.tls_ports.get(&s.port()))
            .map(|port| format!("rediss://127.0.0.1:{port}"))
            .collect()
    }

    /// Where clients reach `server`: its TLS port with [`start_tls`](Self::start_tls).
    fn data_addr(&self, server: &RedisServer) -> SocketAddr {
        match self.tls_ports.get(&server.port()) {
            Some(&port) => SocketAddr::from(([127, 0, 0, 1], port)),
            None => server.addr(),
        }
    }

    /// The name the Sentinels know the master by (`mymaster`).
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// The process started as the master.
    pub fn master(&self) -> &RedisServer {
        &self.master
    }

    /// The processes started as replicas (two).
    pub fn replicas(&self) -> &[RedisServer] {
        &self.replicas
    }

    /// The Sentinel processes (three).
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// Freezes the started master with SIGSTOP; the Sentinels fail over after about 1 s of
    /// silence (plus the election).
    pub fn pause_master(&self) {
        self.master.pause();
    }

    /// Resumes the started master after [`pause_master`](Self::pause_master) (SIGCONT).
    pub fn resume_master(&self) {
        self.master.resume();
    }

    /// Kills the started master (SIGKILL).
    pub fn stop_master(&mut self) {
        self.master.stop();
    }

    /// Asks a Sentinel for a failover (`SENTINEL FAILOVER`) and waits (up to 30 s) until every
    /// Sentinel names another master and that server reports the role of master. Returns the
    /// new master's address.
    pub fn failover(&self) -> Result<SocketAddr, String> {
        let before = self.current_master_addr()?;
        let sentinel = self
            .sentinels
            .iter()
            .find(|s| s.is_running())
            .ok_or("no Sentinel is running")?;
        let mut con = connect_with_timeout(sentinel, QUERY_TIMEOUT)?;
        let _: () = redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(MASTER_NAME)
            .query(&mut con)
            .map_err(|e| format!("SENTINEL FAILOVER: {e}"))?;
        let mut new_master = None;
        poll_until_ok(SETTLE_TIMEOUT, || {
            for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
                let addr = master_addr(sentinel)?;
                if addr == before {
                    return Err(format!("Sentinel {} still names {addr}", sentinel.port()));
                }
            }
            let after = self.current_master_addr()?;
            let server = self
                .server_at(after)
                .ok_or_else(|| format!("{after} is none of the data nodes"))?;
            let mut con = connect_with_timeout(server, QUERY_TIMEOUT)?;
            let role: Vec<redis::Value> = redis::cmd("ROLE")
                .query(&mut con)
                .map_err(|e| format!("ROLE: {e}"))?;
            match role.first() {
                Some(redis::Value::BulkString(r)) if r == b"master" => {
                    new_master = Some(after);
                    Ok(())
                }
                other => Err(format!("{after} reports role {other:?}")),
            }
        })
        .map_err(|last| {
            format!("the failover did not complete within {SETTLE_TIMEOUT:?}: {last}")
        })?;
        new_master.ok_or_else(|| "no new master".to_owned())
    }

    /// The data node (master or replica, as started) at `addr`.
    pub fn server_at(&self, addr: SocketAddr) -> Option<&RedisServer> {
        self.servers()
            .find(|s| s.addr() == addr || self.data_addr(s) == addr)
    }

    fn servers(&self) -> impl Iterator<Item = &RedisServer> {
        std::iter::once(&self.master).chain(&self.replicas)
    }

    /// The master address the first answering Sentinel reports now
    /// (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
    pub fn current_master_addr(&self) -> Result<SocketAddr, String> {
        let mut failures = Vec::new();
        for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
            match master_addr(sentinel) {
                Ok(addr) => return Ok(addr),
                Err(e) => failures.push(e),
            }
        }
        Err(format!("no Sentinel answered: {}", failures.join("; ")))
    }

    fn wait_settled(&self) -> Result<(), String> {
        poll_until_ok(SETTLE_TIMEOUT, || self.settled()).map_err(|last| {
            format!("the Sentinel setup did not settle within {SETTLE_TIMEOUT:?}: {last}")
        })
    }

    fn settled(&self) -> Result<(), String> {
        for replica in &self.replicas {
            let mut con = connect_with_timeout(replica, QUERY_TIMEOUT)?;
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut con)
                .map_err(|e| format!("INFO replication: {e}"))?;
            if !replica_link_up(&info) {
                return Err(format!("replica {} link is not up", replica.port()));
            }
        }
        for sentinel in &self.sentinels {
            let addr = master_addr(sentinel)?;
            if addr != self.data_addr(&self.master) {
                return Err(format!(
                    "Sentinel {} reports master {addr}",
                    sentinel.port()
                ));
            }
            let mut con = connect_with_timeout(sentinel, QUERY_TIMEOUT)?;
            let fields: HashMap<String, String> = redis::cmd("SENTINEL")
                .arg("MASTER")
                .arg(MASTER_NAME)
                .query(&mut con)
                .map_err(|e| format!("SENTINEL MASTER: {e}"))?;
            let count = |name: &str| {
                fields
                    .get(name)
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0)
            };
            if count("num-slaves") < self.replicas.len()
                || count("num-other-sentinels") < SENTINELS - 1
            {
                return Err(format!(
                    "Sentinel {} knows {} replicas and {} other Sentinels",
                    sentinel.port(),
                    count("num-slaves"),
                    count("num-other-sentinels")
                ));
            }
        }
        Ok(())
    }
}

fn master_addr(sentinel: &RedisServer) -> Result<SocketAddr, String> {
    let mut con = connect_with_timeout(sentinel, QUERY_TIMEOUT)?;
    let reply: Option<(String, u16)> = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(MASTER_NAME)
        .query(&mut con)
        .map_err(|e| format!("Sentinel {}: {e}", sentinel.port()))?;
    let (host, port) =
        reply.ok_or_else(|| format!("Sentinel {} does not know the master", sentinel.port()))?;
    format!("{host}:{port}").parse().map_err(|e| {
        format!(
            "Sentinel {}: bad address {host}:{port}: {e}",
            sentinel.port()
        )
    })
}
