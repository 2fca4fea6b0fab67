//! Shared helpers for integration tests (`mod common;` in each test file).
//!
//! [`RedisServer`] spawns a private, throwaway `redis-server` child process
//! on a free port of 127.0.0.1 with persistence disabled and its own temp
//! directory. It can be stopped/restarted (same port) and paused/resumed
//! (SIGSTOP/SIGCONT) to simulate outages, and is killed when dropped.
//!
//! `redis-server` must be on PATH (run `scripts/ensure-redis`); tests panic
//! loudly if it is missing.
//!
//! Also the helpers several test files share: client builders ([`client`],
//! [`client_with_watchdog`], [`client_with`], [`fair_client`]), the lock's hash
//! field and key and channel names ([`field`], [`channel`], [`queue_key`],
//! [`timeouts_key`]), raw-connection queries for assertions ([`hash`],
//! [`exists`], [`pttl`], [`dbsize`], [`command_stats`], [`numsub`],
//! [`wait_numsub`]) and, in [`lua`], what the Lua script tests share.

// Not every test file uses every helper; the items are `pub` for use by the
// including test crate only.
#![allow(dead_code, unreachable_pub)]

pub mod lua;

use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Owner};

/// How long to wait for a freshly spawned server to answer PING.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Poll interval while waiting for the server to come up.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// How many fresh ports to try if another process grabs ours first.
const PORT_ATTEMPTS: usize = 5;

const MISSING_REDIS: &str = "redis-server not found on PATH; run scripts/ensure-redis";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Returns `prefix + ":" + <random hex>`, e.g. `"lock:3f9a0c1d2e4b5a6f"`, so
/// tests sharing a server (or re-running) never collide on key names.
pub fn unique_name(prefix: &str) -> String {
    let suffix: u64 = rand::random();
    format!("{prefix}:{suffix:016x}")
}

/// `Duration::from_millis(n)`, for the many short durations of the tests.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A client of `server` with a 30 s watchdog timeout, every other setting at its default.
pub fn client(server: &RedisServer) -> Client {
    client_with_watchdog(server, Duration::from_secs(30))
}

/// A client of `server` with this watchdog timeout, every other setting at its default.
pub fn client_with_watchdog(server: &RedisServer, watchdog: Duration) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_timeout(watchdog)
        .build()
        .unwrap()
}

/// A client of `server` with this watchdog timeout and re-check interval, the rest default.
pub fn client_with(server: &RedisServer, watchdog: Duration, recheck: Duration) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_timeout(watchdog)
        .recheck_interval(recheck)
        .build()
        .unwrap()
}

/// A client of `server` with this fair-lock slot (`fair_wait_timeout`) and re-check interval,
/// a 30 s watchdog.
pub fn fair_client(server: &RedisServer, slot: Duration, recheck: Duration) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_timeout(Duration::from_secs(30))
        .recheck_interval(recheck)
        .fair_wait_timeout(slot)
        .build()
        .unwrap()
}

/// The lock hash field of `owner` through `client`: `<client id>:<owner id>`.
pub fn field(client: &Client, owner: Owner) -> String {
    format!("{}:{}", client.id(), owner.id())
}

/// The unlock channel of the lock `name` (a name without `{`): `redisson_lock__channel:{name}`.
pub fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// The waiter queue of the fair lock `name` (a name without `{`): `redisson_lock_queue:{name}`.
pub fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

/// The waiters' deadlines of the fair lock `name` (a name without `{`):
/// `redisson_lock_timeout:{name}`.
pub fn timeouts_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

/// This host's wall clock in epoch ms, the clock the fair lock's deadlines use.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The fair lock's waiter queue, head first.
pub async fn queue(raw: &mut MultiplexedConnection, name: &str) -> Vec<String> {
    raw.lrange(queue_key(name), 0, -1).await.unwrap()
}

/// Polls (every 2 ms) until the fair lock's queue has `n` entries; panics after 5 s.
pub async fn wait_llen(raw: &mut MultiplexedConnection, name: &str, n: usize) {
    let start = Instant::now();
    loop {
        let len: usize = raw.llen(queue_key(name)).await.unwrap();
        if len == n {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "queue length stayed {len}, expected {n}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// `HGETALL key` as `(field, value)` pairs, sorted (empty if the key is absent).
pub async fn hash(raw: &mut MultiplexedConnection, key: &str) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = raw.hgetall(key).await.unwrap();
    all.sort();
    all
}

/// `EXISTS key`.
pub async fn exists(raw: &mut MultiplexedConnection, key: &str) -> bool {
    raw.exists(key).await.unwrap()
}

/// `PTTL key` in milliseconds (-2 if the key is absent, -1 if it has no expiry).
pub async fn pttl(raw: &mut MultiplexedConnection, key: &str) -> i64 {
    raw.pttl(key).await.unwrap()
}

/// `DBSIZE`: how many keys the server holds.
pub async fn dbsize(raw: &mut MultiplexedConnection) -> u64 {
    redis::cmd("DBSIZE").query_async(raw).await.unwrap()
}

/// The counters of one command in `INFO commandstats` (calls made by scripts included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommandStats {
    /// `calls=`: calls since the last `CONFIG RESETSTAT`.
    pub calls: u64,
    /// `rejected_calls=`: calls refused before running (0 on servers without the counter).
    pub rejected_calls: u64,
}

/// The `INFO commandstats` counters of `command` (lower case, e.g. `"evalsha"`); all 0 if it
/// was never called.
pub async fn command_stats(raw: &mut MultiplexedConnection, command: &str) -> CommandStats {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(raw)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:");
    let mut stats = CommandStats::default();
    let Some(line) = info.lines().find(|l| l.starts_with(&prefix)) else {
        return stats;
    };
    for (k, v) in line[prefix.len()..]
        .split(',')
        .filter_map(|kv| kv.split_once('='))
    {
        match k {
            "calls" => stats.calls = v.parse().unwrap(),
            "rejected_calls" => stats.rejected_calls = v.parse().unwrap(),
            _ => {}
        }
    }
    stats
}

/// `PUBSUB NUMSUB channel`: how many connections are subscribed to `channel`.
pub async fn numsub(raw: &mut MultiplexedConnection, channel: &str) -> i64 {
    let (ch, n): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async::<Vec<(String, i64)>>(raw)
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(ch, channel);
    n
}

/// Polls every 10 ms until [`numsub`] of `channel` is `want`; panics after 5 s.
pub async fn wait_numsub(raw: &mut MultiplexedConnection, channel: &str, want: i64) {
    let start = Instant::now();
    loop {
        let n = numsub(raw, channel).await;
        if n == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "NUMSUB {channel} stayed {n}, expected {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A private `redis-server` child process bound to 127.0.0.1 on a free port.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    pid: u32,
}

impl RedisServer {
    /// Starts a new server on a free port and waits until it answers PING.
    ///
    /// Panics if `redis-server` is not on PATH or the server does not come up
    /// within ~10 s (the panic message includes the server's output).
    pub fn start() -> Self {
        let dir = make_temp_dir();
        let mut last_failure = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port();
            let mut child = match spawn_redis(port, &dir) {
                Ok(child) => child,
                Err(msg) => {
                    let _ = fs::remove_dir_all(&dir);
                    panic!("{msg}");
                }
            };
            match wait_ready(port, &mut child) {
                Ok(()) => {
                    let pid = child.id();
                    return Self {
                        port,
                        dir,
                        child: Some(child),
                        pid,
                    };
                }
                Err(reason) => {
                    kill_and_wait(&mut child);
                    last_failure = format!("port {port}: {reason}\n{}", server_output(&dir));
                    // If the server exited on its own this was most likely a
                    // port race (someone else bound the port): try another.
                }
            }
        }
        let _ = fs::remove_dir_all(&dir);
        panic!(
            "redis-server failed to start after {PORT_ATTEMPTS} attempts; last failure: {last_failure}"
        );
    }

    /// The TCP port the server listens on (stable across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// PID of the current (or, after [`stop`](Self::stop), the last) server process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether a server process is currently running (i.e. not stopped).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// A fresh `redis::Client` for this server.
    pub fn redis_client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis URL")
    }

    /// A raw multiplexed connection, for assertions independent of the
    /// library under test.
    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        self.redis_client()
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url()))
    }

    /// Kills the server (SIGKILL, simulating a crash) and reaps it.
    /// Idempotent. Data is lost (persistence is disabled).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_wait(&mut child);
        }
    }

    /// Starts the server again on the same port after [`stop`](Self::stop)
    /// (stops it first if still running) and waits until it answers PING.
    pub fn restart(&mut self) {
        self.stop();
        let mut last_failure = String::new();
        // The port is ours, but allow a few attempts in case the old socket
        // lingers briefly.
        for _ in 0..PORT_ATTEMPTS {
            let mut child = spawn_redis(self.port, &self.dir).unwrap_or_else(|msg| panic!("{msg}"));
            match wait_ready(self.port, &mut child) {
                Ok(()) => {
                    self.pid = child.id();
                    self.child = Some(child);
                    return;
                }
                Err(reason) => {
                    kill_and_wait(&mut child);
                    last_failure = format!("{reason}\n{}", server_output(&self.dir));
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
        panic!(
            "redis-server failed to restart on port {}: {last_failure}",
            self.port
        );
    }

    /// Freezes the server with SIGSTOP: connections stay open but nothing is
    /// answered (simulates a hung server / network stall).
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Resumes a server frozen by [`pause`](Self::pause) (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        assert!(self.child.is_some(), "redis-server is not running");
        let status = Command::new("kill")
            .args([sig, &self.pid.to_string()])
            .status()
            .unwrap_or_else(|e| panic!("run `kill {sig} {}`: {e}", self.pid));
        assert!(
            status.success(),
            "`kill {sig} {}` failed: {status}",
            self.pid
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Binds 127.0.0.1:0, reads the assigned port and releases it.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

fn make_temp_dir() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "redisson-sync-test-{}-{n}-{nanos}",
        std::process::id()
    ));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

fn spawn_redis(port: u16, dir: &Path) -> Result<Child, String> {
    let stdout = File::create(dir.join("stdout.log")).expect("create stdout.log");
    let stderr = File::create(dir.join("stderr.log")).expect("create stderr.log");
    let result = Command::new("redis-server")
        .args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(["--appendonly", "no"])
        .args(["--daemonize", "no"])
        .args(["--enable-debug-command", "local"])
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn();
    result.map_err(|e| match e.kind() {
        ErrorKind::NotFound => MISSING_REDIS.to_owned(),
        _ => format!("failed to spawn redis-server: {e}"),
    })
}

/// Polls until the server accepts a connection and replies `+PONG` to PING.
fn wait_ready(port: u16, child: &mut Child) -> Result<(), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("redis-server exited early with {status}"));
        }
        if ping(addr) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "redis-server did not answer PING within {STARTUP_TIMEOUT:?}"
            ));
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// One raw RESP PING round trip; true only for a `+PONG` reply.
fn ping(addr: SocketAddr) -> bool {
    let timeout = Duration::from_millis(500);
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let mut len = 0;
    while len < buf.len() {
        match stream.read(&mut buf[len..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                len += n;
                if buf[..len].ends_with(b"\r\n") {
                    break;
                }
            }
        }
    }
    buf[..len].starts_with(b"+PONG")
}

fn kill_and_wait(child: &mut Child) {
    // Child::kill sends SIGKILL to this pid only (works on SIGSTOPped
    // processes too); ignore "already exited".
    let _ = child.kill();
    let _ = child.wait();
}

fn server_output(dir: &Path) -> String {
    let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap_or_default();
    format!(
        "--- redis-server stdout ---\n{}--- redis-server stderr ---\n{}",
        read("stdout.log"),
        read("stderr.log")
    )
}
