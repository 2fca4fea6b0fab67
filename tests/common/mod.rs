//! Shared helpers for integration tests (`mod common;` in each test file).
//!
//! [`RedisServer`] (from the `testkit` workspace crate) spawns a private,
//! throwaway `redis-server` child process on a free port of 127.0.0.1 with
//! persistence disabled and its own temp directory. It can be
//! stopped/restarted (same port) and paused/resumed (SIGSTOP/SIGCONT) to
//! simulate outages, and is killed when dropped. [`FaultProxy`] (with its
//! [`Mode`]s) sits between a client and a server to delay, freeze, drop or
//! reset their traffic.
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

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Owner};

// Not every test file uses the proxy.
#[allow(unused_imports)]
pub use testkit::{FaultProxy, Mode, RedisServer};

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
