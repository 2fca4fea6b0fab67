//! Fuzz tests against a real server (issue 29, item 8): names with any bytes and sizes for
//! every lock kind, and inspection of arbitrary structures at a name. One `redis-server` per
//! test (testkit); each property runs a short, fixed-seed count (`common::fuzz`;
//! `REDISSON_FUZZ_CASES` and `REDISSON_FUZZ_SEED` choose a longer or another run).
//!
//! What a name may be: anything Redisson takes, which is any string (`RedissonObject` refuses
//! only `null`): empty, a megabyte long, with NUL, any UTF-8, braces that make a cluster hash
//! tag, `:` that looks like a derived name. On a cluster a name whose derived keys would fall
//! in other slots is refused with `Error::Topology` before anything is sent (tests/cluster.rs
//! and the unit tests of `src/conn/cluster.rs`).

mod common;

use std::time::{Duration, Instant};

use common::fuzz;
use common::{AnyLock, RedisServer};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use redis::aio::MultiplexedConnection;
use redisson_sync::inspect::{CounterHint, HoldMode, Snapshot, StructureKind};
use redisson_sync::{Client, Error, LockOptions, Owner, ValueFormat};

/// A client id-shaped holder field, as Redisson writes them.
const FIELD: &str = "1f6a3c2e-9b1d-4c7a-8e55-0d2f4b6a7c81:1";

/// Names: any characters, and pieces that mean something to Redis or Redisson (hash tags,
/// derived-name prefixes and suffixes, glob characters, NUL, multi-byte UTF-8).
fn name() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "",
        "{",
        "}",
        "{}",
        "{x}",
        ":",
        "redisson_lock__channel:",
        "redisson_lock_queue:",
        "redisson_lock_timeout:",
        "redisson_lock_token:",
        "redisson_rwlock:",
        "redisson_sc:",
        ":write",
        ":rwlock_timeout:1",
        ":timeout",
        "\0",
        "é",
        "🔒",
        "*",
        "?",
        "[a]",
        "\\",
        " ",
        "\n",
        "mode",
        FIELD,
    ]);
    prop_oneof![
        prop::collection::vec(piece, 0..6).prop_map(|p| p.concat()),
        prop::collection::vec(any::<char>(), 0..24).prop_map(String::from_iter),
        "[a-z]{0,3}",
    ]
}

/// Every lock kind, with what an inspection of one hold reports.
#[derive(Clone, Copy, Debug)]
enum LockKind {
    Lock,
    Fair,
    Read,
    Write,
    Fenced,
    Spin,
    NonReentrant,
    NonReentrantFair,
    Token,
}

impl LockKind {
    const ALL: [Self; 9] = [
        Self::Lock,
        Self::Fair,
        Self::Read,
        Self::Write,
        Self::Fenced,
        Self::Spin,
        Self::NonReentrant,
        Self::NonReentrantFair,
        Self::Token,
    ];

    fn lock(self, client: &Client, name: &str) -> AnyLock {
        match self {
            Self::Lock => AnyLock::Lock(client.lock(name)),
            Self::Fair => AnyLock::Fair(client.fair_lock(name)),
            Self::Read => AnyLock::Read(client.rw_lock(name).read_lock()),
            Self::Write => AnyLock::Write(client.rw_lock(name).write_lock()),
            Self::Fenced => AnyLock::Fenced(client.fenced_lock(name)),
            Self::Spin => AnyLock::Spin(client.spin_lock(name)),
            Self::NonReentrant => AnyLock::NonReentrant(client.non_reentrant_lock(name)),
            Self::NonReentrantFair => {
                AnyLock::NonReentrantFair(client.non_reentrant_fair_lock(name))
            }
            Self::Token => AnyLock::Token(
                client
                    .token_lock(name)
                    .with_format(ValueFormat::ClientIdAndOwner),
            ),
        }
    }

    /// The kind whose hold keeps this one out: the write half for the read half.
    fn rival(self) -> Self {
        match self {
            Self::Read => Self::Write,
            other => other,
        }
    }

    /// What an inspection of one hold reports (a fair lock nobody waits for stores what a
    /// reentrant lock stores, and so do the spin and non-reentrant locks).
    fn inspected(self) -> (StructureKind, Option<HoldMode>) {
        match self {
            Self::Read => (StructureKind::Rw, Some(HoldMode::Read)),
            Self::Write => (StructureKind::Rw, Some(HoldMode::Write)),
            Self::Fenced => (StructureKind::Fenced, None),
            Self::Token => (StructureKind::Token, None),
            _ => (StructureKind::Lock, None),
        }
    }
}

/// `name` in a derived name, as Redisson's `prefixName` puts it: `prefix:{name}`, or
/// `prefix:name` when the name has a `{`.
fn prefixed(prefix: &str, name: &str) -> Vec<u8> {
    if name.contains('{') {
        format!("{prefix}:{name}").into_bytes()
    } else {
        format!("{prefix}:{{{name}}}").into_bytes()
    }
}

/// Every key of the server with its type, its content (members sorted where Redis keeps no
/// order) and its `PEXPIRETIME`, sorted: what an inspection must leave as it was. (Not
/// `DUMP`: a read of a large hash can take a step of its incremental rehash, which reorders
/// the `DUMP` without changing the hash.)
async fn contents(raw: &mut MultiplexedConnection) -> Vec<(Vec<u8>, String, Vec<Vec<u8>>, i64)> {
    let mut all = Vec::new();
    for key in keys(raw).await {
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(raw).await.unwrap();
        let read = |name: &str| redis::cmd(name).arg(&key).clone();
        let mut items: Vec<Vec<u8>> = match kind.as_str() {
            "string" => vec![read("GET").query_async(raw).await.unwrap()],
            "hash" => {
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> =
                    read("HGETALL").query_async(raw).await.unwrap();
                pairs.sort();
                pairs.into_iter().flat_map(|(f, v)| [f, v]).collect()
            }
            "list" => read("LRANGE")
                .arg(0)
                .arg(-1)
                .query_async(raw)
                .await
                .unwrap(),
            "set" => read("SMEMBERS").query_async(raw).await.unwrap(),
            "zset" => read("ZRANGE")
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async(raw)
                .await
                .unwrap(),
            _ => {
                let entries: redis::Value = read("XRANGE")
                    .arg("-")
                    .arg("+")
                    .query_async(raw)
                    .await
                    .unwrap();
                vec![format!("{entries:?}").into_bytes()]
            }
        };
        if kind == "set" {
            items.sort();
        }
        let at: i64 = read("PEXPIRETIME").query_async(raw).await.unwrap();
        all.push((key, kind, items, at));
    }
    all
}

/// Every key of the server, sorted.
async fn keys(raw: &mut MultiplexedConnection) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query_async(raw).await.unwrap();
    keys.sort();
    keys
}

/// Every channel with a subscriber.
async fn channels(raw: &mut MultiplexedConnection) -> Vec<Vec<u8>> {
    redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .query_async(raw)
        .await
        .unwrap()
}

/// Polls (every 10 ms, at most 5 s) until the server holds exactly `want` keys and no
/// channel has a subscriber: a waiter's clean-up and unsubscription may end just after its
/// call returned.
async fn wait_for_only(raw: &mut MultiplexedConnection, want: &[Vec<u8>]) {
    let start = Instant::now();
    loop {
        let (keys, channels) = (keys(raw).await, channels(raw).await);
        if keys == want && channels.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "left behind: keys {:?} (expected {:?}), channels {:?}",
            lossy(&keys),
            lossy(want),
            lossy(&channels)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn lossy(all: &[Vec<u8>]) -> Vec<String> {
    all.iter()
        .map(|k| {
            let text = String::from_utf8_lossy(k);
            if text.chars().count() > 80 {
                let head: String = text.chars().take(80).collect();
                format!("{head}... ({} bytes)", k.len())
            } else {
                text.into_owned()
            }
        })
        .collect()
}

/// One hold of `kind` on `name` through `client`, a rival of `other` that waits for it, and
/// the handoff: the key is the name byte for byte, the inspection reports the holder (and a
/// fair lock's waiter) exactly, the waiter listens on the channel the layout names, the
/// release wakes it, and after its release nothing is left (but a fenced lock's counter,
/// which Redisson keeps for ever and which is then deleted here).
async fn hold_and_release(
    raw: &mut MultiplexedConnection,
    client: &Client,
    other: &Client,
    kind: LockKind,
    name: &str,
) {
    let lock = kind.lock(client, name);
    assert_eq!(lock.name(), name);
    let guard = lock
        .try_lock_with_options(Duration::ZERO, &LockOptions::new().owner(Owner::new(7)))
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"))
        .unwrap_or_else(|| panic!("{kind:?}: a free lock was not granted"));
    assert_eq!(guard.name(), name);
    assert!(keys(raw).await.contains(&name.as_bytes().to_vec()));
    assert!(lock.is_locked().await.unwrap());
    check_holder(client, kind, name, 7, guard.token()).await;

    // A rival on another client waits (for ever, as far as the test goes) ...
    let rival = kind.rival();
    let waiter = {
        let lock = rival.lock(other, name);
        tokio::spawn(async move {
            lock.lock_with_options(&LockOptions::new().owner(Owner::new(8)))
                .await
        })
    };
    let field = format!("{}:8", other.id());
    let channel = match rival {
        LockKind::Lock | LockKind::Fenced | LockKind::NonReentrant => {
            Some(prefixed("redisson_lock__channel", name))
        }
        LockKind::Fair | LockKind::NonReentrantFair => {
            let mut channel = prefixed("redisson_lock__channel", name);
            channel.extend_from_slice(format!(":{field}").as_bytes());
            Some(channel)
        }
        LockKind::Read | LockKind::Write => Some(prefixed("redisson_rwlock", name)),
        // They poll.
        LockKind::Spin | LockKind::Token => None,
    };
    if let Some(channel) = &channel {
        wait_for_channel(raw, channel).await;
    }
    if matches!(rival, LockKind::Fair | LockKind::NonReentrantFair) {
        let snapshot = client.inspect(name).await.unwrap();
        assert_eq!(snapshot.kind, StructureKind::Fair);
        let [waiter] = snapshot.queue.as_slice() else {
            panic!("{kind:?}: {:?}", snapshot.queue);
        };
        assert_eq!(waiter.field, field);
        assert_eq!((waiter.owner, waiter.this_client), (Some(8), false));
        assert!(waiter.deadline_ms.is_some());
    }

    // ... and is handed the lock by the release.
    guard.unlock().await.unwrap();
    let second = handed(waiter).await;
    let token = second.token();
    check_holder(other, rival, name, 8, token).await;
    second.unlock().await.unwrap();

    let leftover = match kind {
        LockKind::Fenced => vec![prefixed("redisson_lock_token", name)],
        _ => Vec::new(),
    };
    wait_for_only(raw, &leftover).await;
    if !leftover.is_empty() {
        let free = client.inspect(name).await.unwrap();
        assert_eq!((free.kind, free.holders.len()), (StructureKind::Fenced, 0));
        assert_eq!(free.token, token);
        let () = redis::cmd("DEL")
            .arg(&leftover[0])
            .query_async(raw)
            .await
            .unwrap();
    }
}

/// The inspection of `name` held once by `owner` of `client` through a lock of `kind`.
async fn check_holder(client: &Client, kind: LockKind, name: &str, owner: u64, token: Option<u64>) {
    let snapshot = client.inspect(name).await.unwrap();
    let (structure, mode) = kind.inspected();
    assert_eq!(snapshot.name, name);
    assert_eq!(snapshot.kind, structure, "{snapshot:?}");
    assert_eq!(snapshot.mode, mode);
    let [holder] = snapshot.holders.as_slice() else {
        panic!("{kind:?}: {:?}", snapshot.holders);
    };
    assert!(holder.this_client, "{holder:?}");
    assert_eq!(holder.client_id.as_deref(), Some(client.id()));
    assert_eq!(
        (holder.owner, holder.count, holder.mode),
        (Some(owner), 1, mode)
    );
    assert_eq!(snapshot.token, token);
}

#[test]
fn every_lock_kind_under_any_name_leaves_nothing_behind() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _entered = rt.enter();
    let server = RedisServer::start();
    let (client, other) = (common::client(&server), common::client(&server));
    let raw = rt.block_on(server.conn());
    let kinds = prop::sample::select(LockKind::ALL.to_vec());
    fuzz::runner(40)
        .run(&(kinds, name()), |(kind, name)| {
            let mut raw = raw.clone();
            rt.block_on(hold_and_release(&mut raw, &client, &other, kind, &name));
            Ok(())
        })
        .unwrap();
    rt.block_on(async {
        client.shutdown().await;
        other.shutdown().await;
    });
}

/// What a waiting task was handed; panics after 30 s.
async fn handed<T>(waiter: tokio::task::JoinHandle<redisson_sync::Result<T>>) -> T {
    tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the waiter was not handed over within 30 s")
        .unwrap()
        .unwrap()
}

/// Polls (every 5 ms, at most 5 s) until `channel` is the one channel with a subscriber.
async fn wait_for_channel(raw: &mut MultiplexedConnection, channel: &[u8]) {
    let start = Instant::now();
    while channels(raw).await != [channel.to_vec()] {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "nobody waits on {:?}: {:?}",
            lossy(&[channel.to_vec()]),
            lossy(&channels(raw).await)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Both semaphores and the latch under `name`: set, taken, waited for by `other`, handed
/// over and given back; the inspection reports each exactly, the waiter listens on the
/// channel the layout names, and afterwards only the structure's own key is left (deleted
/// here), or nothing for the latch.
async fn counters_under(
    raw: &mut MultiplexedConnection,
    client: &Client,
    other: &Client,
    name: &str,
) {
    let key = name.as_bytes().to_vec();
    let del = |raw: &mut MultiplexedConnection| {
        let mut raw = raw.clone();
        let key = key.clone();
        async move {
            let () = redis::cmd("DEL")
                .arg(&key)
                .query_async(&mut raw)
                .await
                .map(|_: i64| ())
                .unwrap();
        }
    };

    let semaphore = client.semaphore(name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let permits = semaphore.acquire(1).await.unwrap();
    let waiter = {
        let semaphore = other.semaphore(name);
        tokio::spawn(async move { semaphore.acquire(1).await })
    };
    wait_for_channel(raw, &prefixed("redisson_sc", name)).await;
    let s = client.inspect(name).await.unwrap();
    assert_eq!(
        (s.name.as_str(), s.kind, s.kind_inferred, s.permits),
        (name, StructureKind::Semaphore, false, Some(0))
    );
    permits.release().await.unwrap();
    handed(waiter).await.release().await.unwrap();
    wait_for_only(raw, std::slice::from_ref(&key)).await;
    assert_eq!(client.inspect(name).await.unwrap().permits, Some(1));
    del(raw).await;

    let semaphore = client.permit_expirable_semaphore(name);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let ids = semaphore.acquire(1, None).await.unwrap();
    let waiter = {
        let semaphore = other.permit_expirable_semaphore(name);
        tokio::spawn(async move { semaphore.acquire(1, Some(Duration::from_secs(60))).await })
    };
    wait_for_channel(raw, &prefixed("redisson_sc", name)).await;
    let s = client.inspect(name).await.unwrap();
    assert_eq!(
        (s.kind, s.permits, s.acquired_len),
        (StructureKind::PermitSemaphore, Some(0), 1)
    );
    assert_eq!(s.acquired[0].permit_id(), Some(ids[0]));
    assert_eq!(s.acquired[0].expires_ms, None);
    semaphore.release(&ids).await.unwrap();
    let theirs = handed(waiter).await;
    let s = client.inspect(name).await.unwrap();
    assert_eq!(s.acquired[0].permit_id(), Some(theirs[0]));
    assert!(s.acquired[0].expires_ms.is_some());
    other
        .permit_expirable_semaphore(name)
        .release(&theirs)
        .await
        .unwrap();
    wait_for_only(raw, std::slice::from_ref(&key)).await;
    del(raw).await;

    let latch = client.count_down_latch(name);
    assert!(latch.try_set_count(1).await.unwrap());
    let waiter = {
        let latch = other.count_down_latch(name);
        tokio::spawn(async move { latch.await_open().await })
    };
    let mut channel = b"redisson_countdownlatch__channel__{".to_vec();
    channel.extend_from_slice(name.as_bytes());
    channel.push(b'}');
    wait_for_channel(raw, &channel).await;
    let s = client.inspect(name).await.unwrap();
    assert_eq!(
        (s.kind, s.kind_inferred, s.count),
        (StructureKind::Latch, true, Some(1))
    );
    latch.count_down().await.unwrap();
    handed(waiter).await;
    wait_for_only(raw, &[]).await;
}

#[test]
fn semaphores_and_latches_under_any_name_leave_nothing_behind() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _entered = rt.enter();
    let server = RedisServer::start();
    let (client, other) = (common::client(&server), common::client(&server));
    let raw = rt.block_on(server.conn());
    fuzz::runner(15)
        .run(&name(), |name| {
            let mut raw = raw.clone();
            rt.block_on(counters_under(&mut raw, &client, &other, &name));
            Ok(())
        })
        .unwrap();
    rt.block_on(async {
        client.shutdown().await;
        other.shutdown().await;
    });
}

/// A lease from nothing to far past what Redis takes (2^62 ms).
fn lease() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::from_nanos(1)),
        Just(Duration::from_micros(999)),
        Just(Duration::from_millis(1)),
        (2u64..10_000_000).prop_map(Duration::from_millis),
        Just(Duration::from_millis(1 << 62)),
        Just(Duration::from_millis((1 << 62) + 1)),
        Just(Duration::MAX),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

/// Any lease for any lock kind, with a wait of nothing or of `Duration::MAX`: a lease Redis
/// takes (1 ms to 2^62 ms) is granted and the key expires within it (a lease under a minute
/// gets one attempt, which may give back a grant already spent); any other is
/// `InvalidArgument` naming the lease, and nothing is written.
#[test]
fn any_lease_is_granted_or_refused_and_leaves_nothing_behind() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _entered = rt.enter();
    let server = RedisServer::start();
    let client = common::client(&server);
    let raw = rt.block_on(server.conn());
    let kinds = prop::sample::select(LockKind::ALL.to_vec());
    let waits = prop::sample::select(vec![Duration::ZERO, Duration::MAX]);
    fuzz::runner(60)
        .run(&(kinds, lease(), waits), |(kind, lease, wait)| {
            let mut raw = raw.clone();
            rt.block_on(async {
                let name = "lease";
                let lock = kind.lock(&client, name);
                let options = LockOptions::new().lease(lease);
                let ms = lease.as_millis();
                // A grant whose lease is spent by the time its reply arrives is given back
                // (RELIABILITY.md): a short lease gets one attempt, which may end so.
                let short = (1..60_000).contains(&ms);
                let wait = if short { Duration::ZERO } else { wait };
                match lock.try_lock_with_options(wait, &options).await {
                    Ok(Some(guard)) => {
                        assert!((1..=1 << 62).contains(&ms), "{kind:?}: {lease:?} granted");
                        assert_eq!(guard.lease(), Some(lease));
                        // A lease shorter than a minute may run out while the test looks.
                        if ms >= 60_000 {
                            let pttl: i64 = redis::cmd("PTTL")
                                .arg(name)
                                .query_async(&mut raw)
                                .await
                                .unwrap();
                            assert!(pttl > 0 && pttl as u128 <= ms, "{kind:?}: PTTL {pttl}");
                            guard.unlock().await.unwrap();
                        } else if let Err(e) = guard.unlock().await {
                            assert!(e.is_not_held(), "{kind:?}, {lease:?}: {e:?}");
                        }
                    }
                    Err(Error::InvalidArgument(message)) => {
                        assert!(
                            ms == 0 || ms > 1 << 62,
                            "{kind:?}: {lease:?} refused: {message}"
                        );
                        assert!(message.contains("lease"), "{message}");
                    }
                    Ok(None) if short => {}
                    other => panic!("{kind:?}, {lease:?}, wait {wait:?}: {other:?}"),
                }
                let () = redis::cmd("DEL")
                    .arg(prefixed("redisson_lock_token", name))
                    .query_async(&mut raw)
                    .await
                    .map(|_: i64| ())
                    .unwrap();
                wait_for_only(&mut raw, &[]).await;
            });
            Ok(())
        })
        .unwrap();
    rt.block_on(client.shutdown());
}

/// The edges of the fuzzed names, every kind and the counters: empty, NUL alone, and a megabyte of
/// multi-byte UTF-8 with braces and separators.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_nul_and_megabyte_names_work_for_every_kind() {
    let server = RedisServer::start();
    let (client, other) = (common::client(&server), common::client(&server));
    let mut raw = server.conn().await;
    let huge = format!("{{big}}:é🔒:{}", "x:".repeat(1 << 19));
    assert!(huge.len() > 1 << 20);
    for name in ["", "\0", huge.as_str()] {
        for kind in LockKind::ALL {
            hold_and_release(&mut raw, &client, &other, kind, name).await;
        }
        counters_under(&mut raw, &client, &other, name).await;
    }
    client.shutdown().await;
    other.shutdown().await;
}

/// One key's content, as a test writes it.
#[derive(Clone, Debug)]
enum Stored {
    Absent,
    String(Vec<u8>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    Zset(Vec<(Vec<u8>, f64)>),
    Stream(Vec<(Vec<u8>, Vec<u8>)>),
}

/// Bytes that mean something to the inspection (counts, modes, holder fields, tokens), the
/// edges of its length limits (a 20-byte token counter, a 256-byte string), and any bytes.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "1", "2", "0", "-1", "+3", "007", "1.5", "1e3", " 1", "9223372036854775807",
            "9223372036854775808", "18446744073709551615", "mode", "read", "write", "",
            FIELD, "1f6a3c2e-9b1d-4c7a-8e55-0d2f4b6a7c81:1:write",
            "1f6a3c2e-9b1d-4c7a-8e55-0d2f4b6a7c81", "0123456789abcdef0123456789abcdef",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        2 => prop::collection::vec(any::<u8>(), 0..24),
        1 => (19usize..22).prop_map(|n| vec![b'7'; n]),
        1 => (255usize..258).prop_map(|n| vec![b'5'; n]),
    ]
}

fn stored() -> impl Strategy<Value = Stored> {
    let pairs = || prop::collection::vec((bytes(), bytes()), 1..6);
    let members = || prop::collection::vec(bytes(), 1..5);
    let score = prop_oneof![
        -1e15..1e15f64,
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(922_337_203_685_477.0),
    ];
    prop_oneof![
        3 => Just(Stored::Absent),
        2 => bytes().prop_map(Stored::String),
        3 => pairs().prop_map(Stored::Hash),
        1 => members().prop_map(Stored::List),
        1 => members().prop_map(Stored::Set),
        1 => prop::collection::vec((bytes(), score), 1..5).prop_map(Stored::Zset),
        1 => pairs().prop_map(Stored::Stream),
    ]
}

impl Stored {
    async fn write(&self, raw: &mut MultiplexedConnection, key: &[u8]) {
        let cmd = match self {
            Self::Absent => return,
            Self::String(v) => redis::cmd("SET").arg(key).arg(v).clone(),
            Self::Hash(pairs) => {
                let mut c = redis::cmd("HSET");
                c.arg(key);
                for (f, v) in pairs {
                    c.arg(f).arg(v);
                }
                c
            }
            Self::List(items) => redis::cmd("RPUSH").arg(key).arg(items).clone(),
            Self::Set(items) => redis::cmd("SADD").arg(key).arg(items).clone(),
            Self::Zset(items) => {
                let mut c = redis::cmd("ZADD");
                c.arg(key);
                for (m, s) in items {
                    c.arg(s.to_string()).arg(m);
                }
                c
            }
            Self::Stream(pairs) => {
                let mut c = redis::cmd("XADD");
                c.arg(key).arg("*");
                for (f, v) in pairs {
                    c.arg(f).arg(v);
                }
                c
            }
        };
        let _: redis::Value = cmd.query_async(raw).await.unwrap();
    }

    /// The hash as it ends up in Redis (a later field overwrites an earlier one).
    fn hash(&self) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let Self::Hash(pairs) = self else { return None };
        let mut map = std::collections::BTreeMap::new();
        for (f, v) in pairs {
            map.insert(f.clone(), v.clone());
        }
        Some(map.into_iter().collect())
    }
}

/// A name's keys as a test fills them: the name, the fair lock's queue and deadlines, the
/// fenced lock's counter, the acquired permits, and one read-hold marker.
#[derive(Clone, Debug)]
struct Scene {
    name: Stored,
    queue: Stored,
    deadlines: Stored,
    token: Stored,
    permits: Stored,
    marker: Stored,
    limit: usize,
    hint: CounterHint,
}

fn scene() -> impl Strategy<Value = Scene> {
    let hint = prop::sample::select(vec![
        CounterHint::Auto,
        CounterHint::Semaphore,
        CounterHint::Latch,
    ]);
    (
        (stored(), stored(), stored()),
        (stored(), stored(), stored()),
        prop::sample::select(vec![1usize, 2, 3, 1000]),
        hint,
    )
        .prop_map(
            |((name, queue, deadlines), (token, permits, marker), limit, hint)| Scene {
                name,
                queue,
                deadlines,
                token,
                permits,
                marker,
                limit,
                hint,
            },
        )
}

const N: &str = "fz";

fn int(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// What the documented rules ([`StructureKind`]) say the scene is: `None` for
/// `Error::WrongType`; checked only where the listing was not cut (a hash longer than the
/// limit is read in part).
fn expected(scene: &Scene) -> Option<Option<StructureKind>> {
    let has_queue =
        matches!(scene.queue, Stored::List(_)) || matches!(scene.deadlines, Stored::Zset(_));
    let has_permits = matches!(scene.permits, Stored::Zset(_));
    let token = match &scene.token {
        Stored::String(v) if v.len() <= 20 => std::str::from_utf8(v)
            .ok()
            .and_then(|t| t.parse::<u64>().ok()),
        _ => None,
    };
    let kind = match &scene.name {
        Stored::Absent if has_queue => StructureKind::Fair,
        Stored::Absent if has_permits => StructureKind::PermitSemaphore,
        Stored::Absent if token.is_some() => StructureKind::Fenced,
        Stored::Absent => StructureKind::None,
        Stored::Hash(_) => {
            let hash = scene.name.hash().unwrap();
            if hash.len() > scene.limit {
                return None;
            }
            let mode = hash.iter().find(|(f, _)| f == b"mode").map(|(_, v)| v);
            let rw = match mode.map(Vec::as_slice) {
                None => false,
                Some(b"read" | b"write") => true,
                Some(_) => return Some(None),
            };
            let counts = hash
                .iter()
                .filter(|(f, _)| !(rw && f == b"mode"))
                .all(|(_, v)| int(v).is_some());
            if !counts {
                return Some(None);
            }
            if rw {
                StructureKind::Rw
            } else if has_queue {
                StructureKind::Fair
            } else if token.is_some() {
                StructureKind::Fenced
            } else {
                StructureKind::Lock
            }
        }
        Stored::String(v) if v.len() > 256 => return Some(None),
        Stored::String(v) => match int(v) {
            Some(_) if has_permits => StructureKind::PermitSemaphore,
            Some(n) if n <= 0 => StructureKind::Semaphore,
            Some(_) => match scene.hint {
                CounterHint::Latch => StructureKind::Latch,
                // Nobody listens on the latch's channel here.
                _ => StructureKind::Semaphore,
            },
            None if has_permits => return Some(None),
            None => {
                let text = std::str::from_utf8(v).unwrap_or("");
                let uuid = |t: &str| {
                    t.len() == 36
                        && t.char_indices().all(|(i, c)| match i {
                            8 | 13 | 18 | 23 => c == '-',
                            _ => c.is_ascii_hexdigit(),
                        })
                };
                let owner = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
                let shaped = match text.split_at_checked(36) {
                    Some((id, rest)) if uuid(id) => {
                        rest.is_empty()
                            || rest
                                .strip_prefix(':')
                                .is_some_and(|o| owner(o) && o.parse::<u64>().is_ok())
                    }
                    _ => text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()),
                };
                if !shaped {
                    return Some(None);
                }
                StructureKind::Token
            }
        },
        _ => return Some(None),
    };
    Some(Some(kind))
}

/// Checks one inspection of `scene` against the rules, and that nothing changed.
fn check(
    scene: &Scene,
    unchanged: bool,
    got: &Result<Snapshot, Error>,
) -> Result<(), TestCaseError> {
    prop_assert!(unchanged, "the inspection changed the server");
    match got {
        Err(Error::WrongType { key }) => prop_assert_eq!(key.as_str(), N),
        Err(other) => prop_assert!(false, "not a clear error: {other:?}"),
        Ok(s) => prop_assert_eq!(s.name.as_str(), N),
    }
    let Some(want) = expected(scene) else {
        return Ok(());
    };
    match (want, got) {
        (None, Err(_)) => {}
        (Some(kind), Ok(s)) => {
            prop_assert_eq!(s.kind, kind, "{:?}", s);
            if let Some(hash) = scene.name.hash() {
                let rw = kind == StructureKind::Rw;
                let want: Vec<(String, i64)> = hash
                    .iter()
                    .filter(|(f, _)| !(rw && f == b"mode"))
                    .map(|(f, v)| (String::from_utf8_lossy(f).into_owned(), int(v).unwrap()))
                    .collect();
                let mut holders: Vec<(String, i64)> = s
                    .holders
                    .iter()
                    .map(|h| (h.field.clone(), h.count))
                    .collect();
                holders.sort();
                let mut want = want;
                want.sort();
                prop_assert_eq!(holders, want);
                prop_assert!(
                    !s.truncated || kind == StructureKind::Rw || kind == StructureKind::Fair
                );
            }
        }
        (want, got) => prop_assert!(false, "expected {want:?}, got {got:?}"),
    }
    Ok(())
}

#[test]
fn inspecting_any_structure_reports_it_or_refuses_it_clearly() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _entered = rt.enter();
    let server = RedisServer::start();
    let client = common::client(&server);
    let raw = rt.block_on(server.conn());
    let queue = prefixed("redisson_lock_queue", N);
    let deadlines = prefixed("redisson_lock_timeout", N);
    let token = prefixed("redisson_lock_token", N);
    let permits = format!("{{{N}}}:timeout").into_bytes();
    let marker = format!("{{{N}}}:{FIELD}:rwlock_timeout:1").into_bytes();
    fuzz::runner(300)
        .run(&scene(), |scene| {
            let mut raw = raw.clone();
            rt.block_on(async {
                let () = redis::cmd("FLUSHALL").query_async(&mut raw).await.unwrap();
                scene.name.write(&mut raw, N.as_bytes()).await;
                scene.queue.write(&mut raw, &queue).await;
                scene.deadlines.write(&mut raw, &deadlines).await;
                scene.token.write(&mut raw, &token).await;
                scene.permits.write(&mut raw, &permits).await;
                scene.marker.write(&mut raw, &marker).await;
                let before = contents(&mut raw).await;
                let got = client
                    .inspect(N)
                    .limit(scene.limit)
                    .counter_hint(scene.hint)
                    .await;
                let after = contents(&mut raw).await;
                check(&scene, before == after, &got)
            })
        })
        .unwrap();
    rt.block_on(client.shutdown());
}

/// The edges of the fuzzed structures: a megabyte string, a hash with a megabyte count, a
/// hash longer than the limit, a stream, a list: each reported or refused as the rules say.
#[tokio::test]
async fn huge_and_foreign_structures_are_reported_or_refused() {
    let server = RedisServer::start();
    let client = common::client(&server);
    let mut raw = server.conn().await;
    let megabyte = vec![b'7'; 1 << 20];
    let wrong = |r: Result<Snapshot, Error>| matches!(r, Err(Error::WrongType { key }) if key == N);

    let () = redis::cmd("SET")
        .arg(N)
        .arg(&megabyte)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(wrong(client.inspect(N).await));
    let () = redis::cmd("FLUSHALL").query_async(&mut raw).await.unwrap();
    let _: i64 = redis::cmd("HSET")
        .arg(N)
        .arg(FIELD)
        .arg(&megabyte)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(wrong(client.inspect(N).await));

    let () = redis::cmd("FLUSHALL").query_async(&mut raw).await.unwrap();
    let mut hset = redis::cmd("HSET");
    hset.arg(N);
    for i in 0..3000 {
        hset.arg(format!("{FIELD}{i}")).arg(1);
    }
    let _: i64 = hset.query_async(&mut raw).await.unwrap();
    let s = client.inspect(N).await.unwrap();
    assert_eq!(s.kind, StructureKind::Lock);
    assert!(s.truncated);
    assert!(
        s.holders.len() >= 1000 && s.holders.len() < 3000,
        "{}",
        s.holders.len()
    );

    for make in [
        redis::cmd("XADD").arg(N).arg("*").arg("f").arg("v").clone(),
        redis::cmd("RPUSH").arg(N).arg(FIELD).clone(),
    ] {
        let () = redis::cmd("FLUSHALL").query_async(&mut raw).await.unwrap();
        let _: redis::Value = make.query_async(&mut raw).await.unwrap();
        assert!(wrong(client.inspect(N).await));
    }
    client.shutdown().await;
}
