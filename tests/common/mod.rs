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
//! [`wait_numsub`]), the lock kinds ([`Kind`], with what each kind writes, and
//! [`per_kind!`](crate::common::per_kind) for one test per kind) and, in [`lua`],
//! what the Lua script tests share.

// Not every test file uses every helper; the items are `pub` for use by the
// including test crate only.
#![allow(dead_code, unreachable_pub)]

pub mod lua;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{AnyLock, Client, Owner};

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

/// The four lock kinds, for tests whose subject does not depend on the kind (cancel safety,
/// release on drop, the watchdog, restarts, errors): each such test runs once per kind (see
/// [`per_kind!`](crate::common::per_kind)). The methods say what a hold of each kind writes
/// (docs/LAYOUT.md §2, §4, §5), for names without `{`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The reentrant lock, `client.lock(name)` (Redisson's `RLock`).
    Lock,
    /// The fair lock, `client.fair_lock(name)` (`RFairLock`): a waiter queue.
    Fair,
    /// The read half of a read-write lock, `client.rw_lock(name).read_lock()`.
    Read,
    /// The write half of a read-write lock, `client.rw_lock(name).write_lock()`.
    Write,
}

/// A holder field no client has (a v4 UUID of zeros): the stand-in waiter that
/// [`Kind::queue_stand_in`] puts at the head of a fair lock's queue.
pub const STAND_IN_WAITER: &str = "00000000-0000-4000-8000-000000000000:1";

impl Kind {
    /// Every kind, the reentrant lock first.
    pub const ALL: [Self; 4] = [Self::Lock, Self::Fair, Self::Read, Self::Write];

    /// The kind's name in test names: `lock`, `fair`, `read`, `write`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Fair => "fair",
            Self::Read => "read",
            Self::Write => "write",
        }
    }

    /// The lock of this kind named `name`, through `client`.
    pub fn any(&self, client: &Client, name: &str) -> AnyLock {
        match self {
            Self::Lock => client.lock(name).into(),
            Self::Fair => client.fair_lock(name).into(),
            Self::Read => client.rw_lock(name).read_lock().into(),
            Self::Write => client.rw_lock(name).write_lock().into(),
        }
    }

    /// A kind whose hold on the same name keeps a hold of this kind out (and the other way
    /// round): the write half for the read half (readers share), the kind itself otherwise.
    pub fn rival(&self) -> Self {
        match self {
            Self::Read => Self::Write,
            other => *other,
        }
    }

    /// The hash field a hold of `owner` through `client` writes: `<client id>:<owner id>`, and
    /// `<client id>:<owner id>:write` for the write half.
    pub fn field(&self, client: &Client, owner: Owner) -> String {
        match self {
            Self::Write => format!("{}:write", field(client, owner)),
            _ => field(client, owner),
        }
    }

    /// The `mode` field the halves of a read-write lock write next to the holder's field.
    pub fn mode(&self) -> Option<&'static str> {
        match self {
            Self::Read => Some("read"),
            Self::Write => Some("write"),
            Self::Lock | Self::Fair => None,
        }
    }

    /// The lock hash (as [`hash`] returns it, sorted) when `holder` alone holds it `count`
    /// times: `[(holder, count)]`, plus `("mode", "read" | "write")` for the halves.
    pub fn hash_of(&self, holder: &str, count: u64) -> Vec<(String, String)> {
        let mut all = vec![(holder.to_owned(), count.to_string())];
        if let Some(mode) = self.mode() {
            all.push(("mode".to_owned(), mode.to_owned()));
        }
        all.sort();
        all
    }

    /// [`hash_of`](Self::hash_of) the field of `owner` through `client`.
    pub fn hold_hash(&self, client: &Client, owner: Owner, count: u64) -> Vec<(String, String)> {
        self.hash_of(&self.field(client, owner), count)
    }

    /// The channel a release that frees `name` publishes on: `redisson_lock__channel:{name}`
    /// for the lock, `redisson_rwlock:{name}` for both halves. The fair lock publishes only to
    /// the head of its waiter queue, on that waiter's own channel, and only when there is a
    /// head: this is the channel of the stand-in head [`queue_stand_in`](Self::queue_stand_in)
    /// puts there, `redisson_lock__channel:{name}:<STAND_IN_WAITER>`.
    pub fn channel(&self, name: &str) -> String {
        match self {
            Self::Lock => channel(name),
            Self::Fair => format!("{}:{STAND_IN_WAITER}", channel(name)),
            Self::Read | Self::Write => format!("redisson_rwlock:{{{name}}}"),
        }
    }

    /// The pattern matching [`channel`](Self::channel) of every name that starts with
    /// `prefix`.
    pub fn channel_pattern(&self, prefix: &str) -> String {
        match self {
            Self::Lock => format!("redisson_lock__channel:{{{prefix}*"),
            Self::Fair => format!("redisson_lock__channel:{{{prefix}*}}:{STAND_IN_WAITER}"),
            Self::Read | Self::Write => format!("redisson_rwlock:{{{prefix}*"),
        }
    }

    /// The message a release that frees the lock publishes: `0`, and `1` for the write half
    /// (Redisson's `READ_UNLOCK_MESSAGE`, which wakes every waiter).
    pub fn release_message(&self) -> &'static str {
        match self {
            Self::Write => "1",
            _ => "0",
        }
    }

    /// The marker keys of `count` read holds of `holder` on `name`,
    /// `{name}:<holder>:rwlock_timeout:<k>` for `k = 1..=count`, each with its hold's lease
    /// as TTL; none for the other kinds.
    pub fn markers(&self, name: &str, holder: &str, count: u64) -> Vec<String> {
        match self {
            Self::Read => (1..=count)
                .map(|k| format!("{{{name}}}:{holder}:rwlock_timeout:{k}"))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Every key `count` holds of `holder` on `name` write, each with the lease as TTL: the
    /// lock hash, and the read half's [`markers`](Self::markers).
    pub fn hold_keys(&self, name: &str, holder: &str, count: u64) -> Vec<String> {
        let mut keys = vec![name.to_owned()];
        keys.extend(self.markers(name, holder, count));
        keys
    }

    /// The waiter queue keys of the fair lock `name` (its queue and its deadlines); none for
    /// the other kinds. Both must be absent once every waiter has left.
    pub fn waiter_keys(&self, name: &str) -> Vec<String> {
        match self {
            Self::Fair => vec![queue_key(name), timeouts_key(name)],
            _ => Vec::new(),
        }
    }

    /// Polls (every 10 ms) until no waiter is queued on `name`: the fair lock's queue and
    /// deadline keys are absent (a waiter that gives up leaves the queue, in the background
    /// when its future was dropped); panics after 5 s. Returns at once for the other kinds.
    pub async fn wait_no_waiters(&self, raw: &mut MultiplexedConnection, name: &str) {
        let start = Instant::now();
        for key in self.waiter_keys(name) {
            while exists(raw, &key).await {
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "waiters left on {name}: queue {:?}, deadlines {:?}",
                    queue(raw, name).await,
                    raw.zrange_withscores::<_, Vec<(String, f64)>>(timeouts_key(name), 0, -1)
                        .await
                        .unwrap()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// For the fair lock, which publishes a release only to the head of its waiter queue:
    /// queues [`STAND_IN_WAITER`] (deadline a minute ahead) as that head, so that the next
    /// release of `name` publishes on [`channel`](Self::channel). Call it while the lock is
    /// held (a queued head keeps every other acquirer out of a free fair lock), and
    /// [`dequeue_stand_in`](Self::dequeue_stand_in) once the release was seen. Does nothing
    /// for the other kinds.
    pub async fn queue_stand_in(&self, raw: &mut MultiplexedConnection, name: &str) {
        if *self == Self::Fair {
            let () = raw
                .zadd(timeouts_key(name), STAND_IN_WAITER, now_ms() + 60_000)
                .await
                .unwrap();
            let () = raw.rpush(queue_key(name), STAND_IN_WAITER).await.unwrap();
        }
    }

    /// Takes [`STAND_IN_WAITER`] out of the fair lock's queue again (the queue and deadline
    /// keys go with it when it was the only waiter). Does nothing for the other kinds.
    pub async fn dequeue_stand_in(&self, raw: &mut MultiplexedConnection, name: &str) {
        if *self == Self::Fair {
            let () = raw.lrem(queue_key(name), 0, STAND_IN_WAITER).await.unwrap();
            let () = raw.zrem(timeouts_key(name), STAND_IN_WAITER).await.unwrap();
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// One test per lock kind. `per_kind!(#[attributes] async fn NAME);` next to
/// `async fn NAME(kind: Kind)` defines the module `NAME` with the tests `lock`, `fair`, `read`
/// and `write`, each calling `NAME` with its kind (a failure names the kind:
/// `NAME::read`); `per_kind!(#[test] fn NAME);` does the same for a plain `fn NAME(kind: Kind)`.
/// The attributes (`#[tokio::test(...)]`, `#[test]`) go on each of the four tests.
#[allow(unused_macros)]
macro_rules! per_kind {
    ($(#[$attr:meta])* async fn $name:ident) => {
        mod $name {
            $(#[$attr])*
            async fn lock() {
                super::$name(crate::common::Kind::Lock).await;
            }
            $(#[$attr])*
            async fn fair() {
                super::$name(crate::common::Kind::Fair).await;
            }
            $(#[$attr])*
            async fn read() {
                super::$name(crate::common::Kind::Read).await;
            }
            $(#[$attr])*
            async fn write() {
                super::$name(crate::common::Kind::Write).await;
            }
        }
    };
    ($(#[$attr:meta])* fn $name:ident) => {
        mod $name {
            $(#[$attr])*
            fn lock() {
                super::$name(crate::common::Kind::Lock);
            }
            $(#[$attr])*
            fn fair() {
                super::$name(crate::common::Kind::Fair);
            }
            $(#[$attr])*
            fn read() {
                super::$name(crate::common::Kind::Read);
            }
            $(#[$attr])*
            fn write() {
                super::$name(crate::common::Kind::Write);
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use per_kind;
