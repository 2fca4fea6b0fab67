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
//! Also the one copy of every helper the test files share:
//! - client builders: [`client`], [`client_with_watchdog`], [`client_with`], [`fair_client`],
//!   [`builder`];
//! - names: [`unique_name`], the lock's hash field and channels ([`field`], [`channel`],
//!   [`waiter_channel`], [`queue_key`], [`timeouts_key`]);
//! - raw-connection queries for assertions: [`hash`], [`value`], [`key_type`], [`exists`],
//!   [`pttl`], [`dbsize`], [`all_keys`], [`lock_keys`], [`describe_keys`], [`state`],
//!   [`assert_pttls_within`], [`command_stats`], [`script_calls`], [`reset_stats`],
//!   [`numsub`], [`subscriptions`];
//! - bounded polls: [`wait_value`], [`value_becomes`], [`join`], [`wait_gone`],
//!   [`wait_all_gone`], [`gone_within`], [`all_gone_within`], [`wait_numsub`], [`wait_llen`],
//!   [`wait_no_subscriptions`];
//! - raw subscriptions: [`subscribe`], [`psubscribe`], [`next_message`], [`next_payload`],
//!   [`drain`], [`assert_no_message`], [`Messages`];
//! - faults: [`Paused`] (a SIGSTOPped server resumed on drop), [`dead_port`], a script
//!   keeping the server busy ([`busy_server`], [`busy_for`]);
//! - the test matrix: every lock kind ([`Kind`], what each writes, publishes and refuses, and
//!   [`per_kind!`](crate::common::per_kind) for one test per kind), the lock of any kind
//!   ([`AnyLock`]), and the other primitives ([`Primitive`],
//!   [`per_primitive!`](crate::common::per_primitive));
//! - in [`lua`], what the Lua script tests share, in [`leased`] every primitive with
//!   leased holds, in [`memory`] the memory-pressure tests' list of every primitive, and in
//!   [`fuzz`] the fixed-seed property runner.

// Not every test file uses every helper; the items are `pub` for use by the
// including test crate only.
#![allow(dead_code, unreachable_pub)]

mod batch;
pub mod fuzz;
pub mod leased;
pub mod lua;
mod matrix;
pub mod memory;
mod primitive;
pub mod recorder;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{Stream, StreamExt};
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Msg};
use redisson_sync::{Client, ClientBuilder, Owner};

#[allow(unused_imports)]
pub use batch::{Batch, Flavor, selected};
#[allow(unused_imports)]
pub use matrix::{
    AnyLock, FOREIGN_HOLDER, Foreign, Kind, Reentry, STAND_IN_WAITER, Writes, assert_numsub,
};
#[allow(unused_imports)]
pub(crate) use matrix::{per_kind, per_kind_test};
#[allow(unused_imports)]
pub use primitive::{Primitive, Taken};
#[allow(unused_imports)]
pub(crate) use primitive::{per_primitive, per_primitive_test};

// Not every test file uses the proxy.
#[allow(unused_imports)]
pub use testkit::{FaultProxy, Mode, RedisServer};

/// Upper bound of the polls of this module that take no bound of their own.
pub const POLL_LIMIT: Duration = Duration::from_secs(5);

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

/// A builder for a client of `url` (a server's, or a proxy's in front of it) with a 30 s
/// watchdog; the caller sets the rest.
pub fn builder(url: String) -> ClientBuilder {
    Client::builder()
        .url(url)
        .watchdog_timeout(Duration::from_secs(30))
}

/// The lock hash field of `owner` through `client`: `<client id>:<owner id>`.
pub fn field(client: &Client, owner: Owner) -> String {
    format!("{}:{}", client.id(), owner.id())
}

/// The unlock channel of the lock `name` (a name without `{`): `redisson_lock__channel:{name}`.
pub fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// The channel of one fair-lock waiter, the only one its lock's releases publish on:
/// `redisson_lock__channel:{name}:<field>` (a name without `{`).
pub fn waiter_channel(name: &str, field: &str) -> String {
    format!("{}:{field}", channel(name))
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

/// The fenced lock's token counter of `name` (a name without `{`): `redisson_lock_token:{name}`.
pub fn token_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}

/// This host's wall clock in epoch ms, the clock the fair lock's deadlines use.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A port with nothing listening on it (bound, read back, released).
pub fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A server that answers `BUSY` once a script has run 100 ms (`busy-reply-threshold`, 7.0+;
/// `lua-time-limit` before: whichever the server knows), for [`busy_for`].
pub fn busy_server() -> RedisServer {
    RedisServer::builder()
        .args(&["--busy-reply-threshold", "100"])
        .try_start()
        .unwrap_or_else(|_| RedisServer::start_with(&["--lua-time-limit", "100"]))
}

/// Keeps `server` busy for `busy` inside one script, on a connection and thread of its own:
/// from 100 ms in, on a [`busy_server`], every other command gets `BUSY`. Join the handle.
pub fn busy_for(server: &RedisServer, busy: Duration) -> std::thread::JoinHandle<()> {
    let mut con = server.connect();
    let micros = busy.as_micros().to_string();
    std::thread::spawn(move || {
        let script = "local t = redis.call('TIME') \
             local start = t[1] * 1000000 + t[2] \
             while true do \
               local n = redis.call('TIME') \
               if n[1] * 1000000 + n[2] - start > tonumber(ARGV[1]) then break end \
             end return 1";
        let _: redis::RedisResult<i64> = redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .arg(micros)
            .query(&mut con);
    })
}

/// Resumes a SIGSTOPped server when dropped, also when the test fails half-way.
pub struct Paused<'a>(&'a RedisServer);

impl<'a> Paused<'a> {
    /// Stops `server` (SIGSTOP) until the returned value is dropped.
    pub fn pause(server: &'a RedisServer) -> Self {
        server.pause();
        Self(server)
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.resume();
    }
}

// ---------------------------------------------------------------------------------------------
// Raw-connection queries
// ---------------------------------------------------------------------------------------------

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
            start.elapsed() < POLL_LIMIT,
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

/// `GET key` (`None` if the key is absent).
pub async fn value(raw: &mut MultiplexedConnection, key: &str) -> Option<String> {
    raw.get(key).await.unwrap()
}

/// `TYPE key`: `"none"`, `"string"`, `"hash"`, ...
pub async fn key_type(raw: &mut MultiplexedConnection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query_async(raw).await.unwrap()
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

/// `KEYS *`, sorted.
pub async fn all_keys(raw: &mut MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = raw.keys("*").await.unwrap();
    keys.sort();
    keys
}

/// Every key of the server with its type, content (a hash's fields, a string, a list's or a
/// sorted set's members) and PTTL, for failure messages.
pub async fn describe_keys(raw: &mut MultiplexedConnection) -> Vec<String> {
    let mut detail = Vec::new();
    for k in all_keys(raw).await {
        let kind = key_type(raw, &k).await;
        let content = match kind.as_str() {
            "hash" => format!("{:?}", hash(raw, &k).await),
            "list" => format!(
                "{:?}",
                raw.lrange::<_, Vec<String>>(&k, 0, -1).await.unwrap()
            ),
            "zset" => format!(
                "{:?}",
                raw.zrange_withscores::<_, Vec<(String, f64)>>(&k, 0, -1)
                    .await
                    .unwrap()
            ),
            "string" => format!("{:?}", value(raw, &k).await),
            _ => String::new(),
        };
        let ttl = pttl(raw, &k).await;
        detail.push(format!("{k} ({kind}, pttl {ttl}) {content}"));
    }
    detail
}

/// What a key holds, as a lock of any kind writes it (see [`state`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// No such key.
    Absent,
    /// A hash: its `(field, value)` pairs, sorted (the hash-based lock kinds).
    Hash(Vec<(String, String)>),
    /// A string: its value (the token lock's holder value).
    Value(String),
}

/// What `key` holds: [`State::Absent`], its sorted hash, or its string value; panics on a key
/// of another type.
pub async fn state(raw: &mut MultiplexedConnection, key: &str) -> State {
    match key_type(raw, key).await.as_str() {
        "none" => State::Absent,
        "hash" => State::Hash(hash(raw, key).await),
        "string" => State::Value(value(raw, key).await.unwrap_or_default()),
        other => panic!("{key} is a {other}, not a lock"),
    }
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

/// Script calls (`EVALSHA` and `EVAL`) the server has run so far.
pub async fn script_calls(raw: &mut MultiplexedConnection) -> u64 {
    command_stats(raw, "evalsha").await.calls + command_stats(raw, "eval").await.calls
}

/// `CONFIG RESETSTAT`: zeroes the `INFO commandstats` counters.
pub async fn reset_stats(raw: &mut MultiplexedConnection) {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(raw)
        .await
        .unwrap();
}

/// `CLIENT LIST` narrowed by `filter` (`["TYPE", "pubsub"]`, `["ID", "7"]`), one line per
/// connection.
pub async fn client_list(raw: &mut MultiplexedConnection, filter: &[&str]) -> Vec<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg(filter)
        .query_async(raw)
        .await
        .unwrap();
    list.lines().map(str::to_owned).collect()
}

/// The value of `field=` in one `CLIENT LIST` line.
pub fn client_field<'a>(line: &'a str, field: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(field).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {field} in {line:?}"))
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

/// The channels anyone is subscribed to (sorted), and the number of pattern subscriptions.
pub async fn subscriptions(raw: &mut MultiplexedConnection) -> (Vec<String>, i64) {
    let mut channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("*")
        .query_async(raw)
        .await
        .unwrap();
    channels.sort();
    let patterns: i64 = redis::cmd("PUBSUB")
        .arg("NUMPAT")
        .query_async(raw)
        .await
        .unwrap();
    (channels, patterns)
}

// ---------------------------------------------------------------------------------------------
// Bounded polls
// ---------------------------------------------------------------------------------------------

/// Polls every 10 ms until [`numsub`] of `channel` is `want`; panics after 5 s.
pub async fn wait_numsub(raw: &mut MultiplexedConnection, channel: &str, want: i64) {
    let start = Instant::now();
    loop {
        let n = numsub(raw, channel).await;
        if n == want {
            return;
        }
        assert!(
            start.elapsed() < POLL_LIMIT,
            "NUMSUB {channel} stayed {n}, expected {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls (every 10 ms) until no connection is subscribed to any channel; panics after 5 s.
pub async fn wait_no_subscriptions(raw: &mut MultiplexedConnection) {
    let start = Instant::now();
    loop {
        let (channels, _) = subscriptions(raw).await;
        if channels.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < POLL_LIMIT,
            "subscriptions left after {POLL_LIMIT:?}: {channels:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls (every 10 ms) until `GET key` is `want`; panics after 5 s.
pub async fn wait_value(raw: &mut MultiplexedConnection, key: &str, want: &str) {
    let start = Instant::now();
    loop {
        let v = value(raw, key).await;
        if v.as_deref() == Some(want) {
            return;
        }
        assert!(
            start.elapsed() < POLL_LIMIT,
            "{key} stayed {v:?}, expected {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls (every 10 ms) until `key` is gone; panics if it is still there after `within`, with
/// what the server holds. Returns how long it took.
pub async fn wait_gone(raw: &mut MultiplexedConnection, key: &str, within: Duration) -> Duration {
    let start = Instant::now();
    while exists(raw, key).await {
        assert!(
            start.elapsed() < within,
            "{key} still present after {within:?}: {:?}",
            describe_keys(raw).await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

/// Polls until every key of `keys` is gone; panics if one is still there after `within`.
pub async fn wait_all_gone(raw: &mut MultiplexedConnection, keys: &[String], within: Duration) {
    let start = Instant::now();
    for key in keys {
        wait_gone(raw, key, within.saturating_sub(start.elapsed())).await;
    }
}

/// Polls (every 10 ms) until `GET key` is `want`; `false` if it is not after `within`.
pub async fn value_becomes(
    raw: &mut MultiplexedConnection,
    key: &str,
    want: &str,
    within: Duration,
) -> bool {
    let start = Instant::now();
    loop {
        if value(raw, key).await.as_deref() == Some(want) {
            return true;
        }
        if start.elapsed() > within {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (bounded, 5 s) for `task` to end; its output.
pub async fn join<T>(task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(POLL_LIMIT, task)
        .await
        .expect("task still running after 5 s")
        .unwrap()
}

/// Asserts that each key of `keys` exists with a PTTL in `(0, max_ms]` (`context` says when,
/// for the message).
pub async fn assert_pttls_within(
    raw: &mut MultiplexedConnection,
    keys: &[String],
    max_ms: i64,
    context: impl std::fmt::Debug,
) {
    for key in keys {
        let p = pttl(raw, key).await;
        assert!(
            p > 0 && p <= max_ms,
            "{key}: pttl {p}, at most {max_ms} ({context:?})"
        );
    }
}

/// `KEYS *` (sorted) but the fenced locks' token counters (`redisson_lock_token:{name}`,
/// strings without TTL that outlive every hold, by design): what a hold, a waiter or a leak
/// writes.
pub async fn lock_keys(raw: &mut MultiplexedConnection) -> Vec<String> {
    let mut keys = all_keys(raw).await;
    keys.retain(|k| !k.starts_with("redisson_lock_token:"));
    keys
}

/// Polls (every 20 ms) until `key` is gone; `false` if it is still there after `within`.
pub async fn gone_within(raw: &mut MultiplexedConnection, key: &str, within: Duration) -> bool {
    all_gone_within(raw, &[key.to_owned()], within).await
}

/// Polls (every 20 ms) until none of `keys` exists; `false` if one is still there after
/// `within`.
pub async fn all_gone_within(
    raw: &mut MultiplexedConnection,
    keys: &[String],
    within: Duration,
) -> bool {
    let start = Instant::now();
    loop {
        let mut any = false;
        for k in keys {
            any |= exists(raw, k).await;
        }
        if !any {
            return true;
        }
        if start.elapsed() > within {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Raw subscriptions
// ---------------------------------------------------------------------------------------------

/// The messages of a raw subscription (a connection of its own) to `channels`.
pub async fn subscribe<S: AsRef<str>>(
    server: &RedisServer,
    channels: &[S],
) -> impl Stream<Item = Msg> + Unpin + use<S> {
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    for c in channels {
        pubsub.subscribe(c.as_ref()).await.unwrap();
    }
    pubsub.into_on_message()
}

/// The messages of a raw pattern subscription (a connection of its own) to `patterns`.
pub async fn psubscribe<S: AsRef<str>>(
    server: &RedisServer,
    patterns: &[S],
) -> impl Stream<Item = Msg> + Unpin + use<S> {
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    for p in patterns {
        pubsub.psubscribe(p.as_ref()).await.unwrap();
    }
    pubsub.into_on_message()
}

/// The next message; panics if none arrives within 2 s.
pub async fn next_message(messages: &mut (impl Stream<Item = Msg> + Unpin)) -> Msg {
    tokio::time::timeout(Duration::from_secs(2), messages.next())
        .await
        .expect("no message within 2 s")
        .expect("the subscription ended")
}

/// The payload of the next message, which must come on `channel`; panics if none arrives
/// within 2 s.
pub async fn next_payload(
    messages: &mut (impl Stream<Item = Msg> + Unpin),
    channel: &str,
) -> String {
    let msg = next_message(messages).await;
    assert_eq!(msg.get_channel_name(), channel);
    msg.get_payload::<String>().unwrap()
}

/// The (channel, payload) of every message arriving within 300 ms.
pub async fn drain(messages: &mut (impl Stream<Item = Msg> + Unpin)) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout(ms(300), messages.next()).await {
        seen.push((m.get_channel_name().to_owned(), m.get_payload().unwrap()));
    }
    seen
}

/// Asserts that no message arrives within `within` (nor does the subscription end); `why`
/// says why none may.
pub async fn assert_no_message(
    messages: &mut (impl Stream<Item = Msg> + Unpin),
    within: Duration,
    why: &str,
) {
    match tokio::time::timeout(within, messages.next()).await {
        Err(_) => {}
        Ok(Some(msg)) => panic!(
            "{why}: got {:?} on {}",
            msg.get_payload::<String>(),
            msg.get_channel_name()
        ),
        Ok(None) => panic!("{why}: the subscription ended"),
    }
}

/// A raw subscription to one channel whose messages are read as payloads.
pub struct Messages(Box<dyn Stream<Item = Msg> + Unpin + Send>);

impl Messages {
    /// Subscribes to `channel` on a connection of its own.
    pub async fn subscribe(server: &RedisServer, channel: &str) -> Self {
        Self(Box::new(subscribe(server, &[channel.to_owned()]).await))
    }

    /// The payload of the next message; panics after 2 s without one.
    pub async fn next(&mut self) -> String {
        next_message(&mut self.0).await.get_payload().unwrap()
    }

    /// Asserts that no message comes within `d`.
    pub async fn none_within(&mut self, d: Duration) {
        assert_no_message(&mut self.0, d, "unexpected message").await;
    }
}
