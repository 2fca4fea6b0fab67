//! The fair lock's Lua scripts on their own (`lua/fair/`), driven by raw EVAL with chosen
//! clocks: headers, SHAs, and the exact effects and replies of docs/LAYOUT.md §4 — the
//! purge, the queue arithmetic of its §4.4 worked example (scaled down 10x: lease 3 s, slot
//! 500 ms), the non-waiting form, unlock, force unlock and the give-up cleanup.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::lua::{self, eval};
use common::{
    RedisServer, channel, drain, exists, hash, pttl, queue_key, subscribe, timeouts_key,
    unique_name,
};
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Value};

const PURGE: &str = include_str!("../lua/fair/purge.lua");
/// What each script runs: the purge prefix, then the script (as `src/scripts.rs` builds them).
const ACQUIRE: &str = concat!(
    include_str!("../lua/fair/purge.lua"),
    include_str!("../lua/fair/acquire.lua")
);
const TRY_ACQUIRE: &str = concat!(
    include_str!("../lua/fair/purge.lua"),
    include_str!("../lua/fair/try_acquire.lua")
);
const UNLOCK: &str = concat!(
    include_str!("../lua/fair/purge.lua"),
    include_str!("../lua/fair/unlock.lua")
);
const FORCE_UNLOCK: &str = concat!(
    include_str!("../lua/fair/purge.lua"),
    include_str!("../lua/fair/force_unlock.lua")
);
const ACQUIRE_FAILED: &str = include_str!("../lua/fair/acquire_failed.lua");

/// The files under `lua/fair/`, with the Redisson method each header must cite.
const EXPECTED: [(&str, &str); 6] = [
    ("acquire.lua", "tryLockInnerAsync"),
    ("acquire_failed.lua", "acquireFailedAsync"),
    ("force_unlock.lua", "forceUnlockAsync"),
    ("purge.lua", "RedissonFairLock"),
    ("try_acquire.lua", "tryLockInnerAsync"),
    ("unlock.lua", "unlockInnerAsync"),
];

const LEASE: i64 = 3_000;
const SLOT: i64 = 500;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The keys of one fair lock: N, queue, timeouts, channel prefix.
struct Keys {
    name: String,
    queue: String,
    timeouts: String,
    channel: String,
}

impl Keys {
    fn new(prefix: &str) -> Self {
        let name = unique_name(prefix);
        Self {
            queue: queue_key(&name),
            timeouts: timeouts_key(&name),
            channel: channel(&name),
            name,
        }
    }

    fn waiter_channel(&self, field: &str) -> String {
        format!("{}:{field}", self.channel)
    }
}

async fn acquire(raw: &mut MultiplexedConnection, k: &Keys, now: i64, field: &str) -> Value {
    let args = [
        now.to_string(),
        LEASE.to_string(),
        field.into(),
        SLOT.to_string(),
    ];
    eval(raw, ACQUIRE, &[&k.name, &k.queue, &k.timeouts], &args).await
}

async fn try_acquire(raw: &mut MultiplexedConnection, k: &Keys, now: i64, field: &str) -> Value {
    let args = [
        now.to_string(),
        LEASE.to_string(),
        field.into(),
        SLOT.to_string(),
    ];
    eval(raw, TRY_ACQUIRE, &[&k.name, &k.queue, &k.timeouts], &args).await
}

async fn unlock(raw: &mut MultiplexedConnection, k: &Keys, now: i64, field: &str) -> Value {
    let args = [
        now.to_string(),
        LEASE.to_string(),
        field.into(),
        "0".into(),
        "PUBLISH".into(),
    ];
    eval(
        raw,
        UNLOCK,
        &[&k.name, &k.queue, &k.timeouts, &k.channel],
        &args,
    )
    .await
}

async fn force_unlock(raw: &mut MultiplexedConnection, k: &Keys, now: i64) -> Value {
    let args = [now.to_string(), "0".into(), "PUBLISH".into()];
    eval(
        raw,
        FORCE_UNLOCK,
        &[&k.name, &k.queue, &k.timeouts, &k.channel],
        &args,
    )
    .await
}

async fn acquire_failed(
    raw: &mut MultiplexedConnection,
    k: &Keys,
    field: &str,
    slot: i64,
) -> Value {
    let args = [field.to_owned(), slot.to_string()];
    eval(raw, ACQUIRE_FAILED, &[&k.queue, &k.timeouts], &args).await
}

async fn queue(raw: &mut MultiplexedConnection, k: &Keys) -> Vec<String> {
    raw.lrange(&k.queue, 0, -1).await.unwrap()
}

/// The zset as (member, score), by score.
async fn deadlines(raw: &mut MultiplexedConnection, k: &Keys) -> Vec<(String, i64)> {
    let v: Vec<(String, f64)> = raw.zrange_withscores(&k.timeouts, 0, -1).await.unwrap();
    v.into_iter().map(|(m, s)| (m, s as i64)).collect()
}

async fn score(raw: &mut MultiplexedConnection, k: &Keys, field: &str) -> i64 {
    let s: f64 = raw.zscore(&k.timeouts, field).await.unwrap();
    s as i64
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("expected an integer reply, got {other:?}"),
    }
}

#[test]
fn every_fair_script_has_a_header_naming_keys_argv_reply_and_redisson() {
    lua::assert_files("fair", &EXPECTED);
    lua::assert_headers(
        "fair",
        &EXPECTED,
        &["KEYS[", "ARGV[", "Reply", "Redisson", "docs/LAYOUT.md §4."],
    );
    // The purge is a prefix: it never returns, so the script after it runs.
    assert!(!PURGE.lines().any(|l| l.trim_start().starts_with("return")));
}

#[tokio::test]
async fn every_fair_script_loads_and_its_sha_is_the_evalsha_hash() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    for (what, text) in [
        ("acquire", ACQUIRE),
        ("try_acquire", TRY_ACQUIRE),
        ("unlock", UNLOCK),
        ("force_unlock", FORCE_UNLOCK),
        ("acquire_failed", ACQUIRE_FAILED),
    ] {
        lua::script_load(&mut raw, what, text).await;
    }
}

/// docs/LAYOUT.md §4.4's worked example (`testAcquireFailedTimeoutDrift_Descrete`), at a tenth of
/// the scale, with every effect on the list and the zset checked exactly.
#[tokio::test]
async fn queue_arithmetic_follows_redissons_worked_example() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let k = Keys::new("fair-arith");
    let (a, b, c, d, e) = ("id:a", "id:b", "id:c", "id:d", "id:e");
    let mut msgs = subscribe(
        &server,
        &[
            k.channel.clone(),
            k.waiter_channel(b),
            k.waiter_channel(d),
            k.waiter_channel(e),
        ],
    )
    .await;
    let t = now();

    assert_eq!(acquire(&mut raw, &k, t, a).await, Value::Nil);
    assert_eq!(hash(&mut raw, &k.name).await, vec![(a.into(), "1".into())]);
    assert!(
        !exists(&mut raw, &k.queue).await,
        "the holder is not queued"
    );

    // B, C, D, E queue: ~3000, 3500, 4000, 4500 (Redisson: 30, 35, 40, 45 s).
    let ttl_b = int(&acquire(&mut raw, &k, t, b).await);
    assert!((LEASE - 100..=LEASE).contains(&ttl_b), "B's ttl {ttl_b}");
    for (i, f) in [c, d, e].into_iter().enumerate() {
        let ttl = int(&acquire(&mut raw, &k, t, f).await);
        assert_eq!(
            ttl,
            ttl_b + SLOT * (i as i64 + 1),
            "{f}: one slot per waiter ahead"
        );
    }
    assert_eq!(queue(&mut raw, &k).await, [b, c, d, e]);
    let base = t + ttl_b + SLOT;
    assert_eq!(
        deadlines(&mut raw, &k).await,
        vec![
            (b.into(), base),
            (c.into(), base + SLOT),
            (d.into(), base + 2 * SLOT),
            (e.into(), base + 3 * SLOT),
        ],
        "deadline = ttl + slot + now"
    );
    assert_eq!(pttl(&mut raw, &k.queue).await, -1, "the queue has no TTL");
    assert_eq!(pttl(&mut raw, &k.timeouts).await, -1, "the zset has no TTL");

    // A re-poll of a queued waiter: the lock's PTTL, its deadline not refreshed.
    let again = int(&acquire(&mut raw, &k, t + 50, d).await);
    assert!((0..=ttl_b).contains(&again), "{again}");
    assert_eq!(score(&mut raw, &k, d).await, base + 2 * SLOT);

    // C gives up: D and E move up one slot; B keeps its deadline.
    assert_eq!(acquire_failed(&mut raw, &k, c, SLOT).await, Value::Int(0));
    assert_eq!(queue(&mut raw, &k).await, [b, d, e]);
    assert_eq!(
        deadlines(&mut raw, &k).await,
        vec![
            (b.into(), base),
            (d.into(), base + SLOT),
            (e.into(), base + 2 * SLOT)
        ]
    );
    // Giving up again (or a waiter never queued) changes nothing.
    acquire_failed(&mut raw, &k, c, SLOT).await;
    acquire_failed(&mut raw, &k, "id:never", SLOT).await;
    assert_eq!(queue(&mut raw, &k).await, [b, d, e]);
    assert_eq!(score(&mut raw, &k, e).await, base + 2 * SLOT);

    // Re-polls by B, D and E: about the lock's PTTL each.
    for f in [b, d, e] {
        let ttl = int(&acquire(&mut raw, &k, t, f).await);
        assert!((0..=LEASE).contains(&ttl), "{f}: {ttl}");
    }

    // The non-waiting form neither acquires nor enqueues.
    assert_eq!(try_acquire(&mut raw, &k, t, "id:x").await, Value::Int(1));
    assert_eq!(
        try_acquire(&mut raw, &k, t, d).await,
        Value::Int(1),
        "not D's turn"
    );
    assert_eq!(queue(&mut raw, &k).await, [b, d, e]);
    assert_eq!(deadlines(&mut raw, &k).await.len(), 3);
    assert_eq!(drain(&mut msgs).await, vec![], "nothing published so far");

    // A unlocks: "0" on B's channel only. B acquires: D and E move up one more slot.
    assert_eq!(unlock(&mut raw, &k, t, a).await, Value::Int(1));
    assert!(!exists(&mut raw, &k.name).await);
    assert_eq!(
        drain(&mut msgs).await,
        vec![(k.waiter_channel(b), "0".into())],
        "only the head's own channel"
    );
    // D is not the head: the lock is free but it is B's turn. D's hint is the time until
    // B's deadline (Redisson replies 0 here).
    assert_eq!(int(&acquire(&mut raw, &k, t, d).await), base - t);
    assert_eq!(try_acquire(&mut raw, &k, t, d).await, Value::Int(1));
    assert_eq!(acquire(&mut raw, &k, t, b).await, Value::Nil);
    assert_eq!(hash(&mut raw, &k.name).await, vec![(b.into(), "1".into())]);
    assert!((LEASE - 100..=LEASE).contains(&pttl(&mut raw, &k.name).await));
    assert_eq!(queue(&mut raw, &k).await, [d, e]);
    assert_eq!(
        deadlines(&mut raw, &k).await,
        vec![(d.into(), base), (e.into(), base + SLOT)]
    );

    // Re-entry: nil, count 2, not queued.
    assert_eq!(acquire(&mut raw, &k, t, b).await, Value::Nil);
    assert_eq!(try_acquire(&mut raw, &k, t, b).await, Value::Nil);
    assert_eq!(hash(&mut raw, &k.name).await, vec![(b.into(), "3".into())]);
    assert_eq!(queue(&mut raw, &k).await, [d, e]);

    // A newcomer queues one slot behind the last deadline.
    let f = "id:f";
    assert_eq!(int(&acquire(&mut raw, &k, t, f).await), base + SLOT - t);
    assert_eq!(score(&mut raw, &k, f).await, base + 2 * SLOT);
    acquire_failed(&mut raw, &k, f, SLOT).await;

    // Unlock replies: a stranger nil, partial releases 0 (lease re-applied), nothing published.
    assert_eq!(unlock(&mut raw, &k, t, "id:x").await, Value::Nil);
    let () = raw.pexpire(&k.name, 60_000).await.unwrap();
    assert_eq!(unlock(&mut raw, &k, t, b).await, Value::Int(0));
    assert!((LEASE - 100..=LEASE).contains(&pttl(&mut raw, &k.name).await));
    assert_eq!(unlock(&mut raw, &k, t, b).await, Value::Int(0));
    assert_eq!(hash(&mut raw, &k.name).await, vec![(b.into(), "1".into())]);
    assert_eq!(drain(&mut msgs).await, vec![]);

    // B unlocks at a clock past D's deadline: the purge drops D first, E is woken.
    assert_eq!(unlock(&mut raw, &k, base, b).await, Value::Int(1));
    assert_eq!(queue(&mut raw, &k).await, [e]);
    assert_eq!(deadlines(&mut raw, &k).await, vec![(e.into(), base + SLOT)]);
    assert_eq!(
        drain(&mut msgs).await,
        vec![(k.waiter_channel(e), "0".into())]
    );

    // Unlocking a lock that is gone: reply 2, the head is woken all the same (Redisson: 1).
    assert_eq!(unlock(&mut raw, &k, t, b).await, Value::Int(2));
    assert_eq!(
        drain(&mut msgs).await,
        vec![(k.waiter_channel(e), "0".into())]
    );
    assert_eq!(queue(&mut raw, &k).await, [e], "nothing else changed");

    // Force unlock: 0 when free (nothing published); 1 when held, waking the head.
    assert_eq!(force_unlock(&mut raw, &k, t).await, Value::Int(0));
    assert_eq!(drain(&mut msgs).await, vec![]);
    assert_eq!(
        try_acquire(&mut raw, &k, t, e).await,
        Value::Nil,
        "E is the head"
    );
    assert!(!exists(&mut raw, &k.queue).await);
    assert!(!exists(&mut raw, &k.timeouts).await);
    let ttl_d = int(&acquire(&mut raw, &k, t, d).await);
    assert!(
        (LEASE - 100..=LEASE).contains(&ttl_d),
        "first in the queue: the PTTL, {ttl_d}"
    );
    assert_eq!(force_unlock(&mut raw, &k, t).await, Value::Int(1));
    assert!(!exists(&mut raw, &k.name).await);
    assert_eq!(
        drain(&mut msgs).await,
        vec![(k.waiter_channel(d), "0".into())]
    );
    assert_eq!(
        queue(&mut raw, &k).await,
        [d],
        "force unlock does not dequeue"
    );
}

/// The purge (docs/LAYOUT.md §4.3) only drops past-due heads, stops at a head without a deadline,
/// and the non-waiting form runs it too.
#[tokio::test]
async fn purge_drops_only_past_due_heads() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let k = Keys::new("fair-purge");
    let t = now();
    // Three waiters by hand: two past due at t, the third not; a past-due one behind it.
    for (f, deadline) in [
        ("id:1", t - 10),
        ("id:2", t),
        ("id:3", t + 1_000),
        ("id:4", t - 5),
    ] {
        let () = raw.rpush(&k.queue, f).await.unwrap();
        let () = raw.zadd(&k.timeouts, f, deadline).await.unwrap();
    }
    assert_eq!(try_acquire(&mut raw, &k, t, "id:x").await, Value::Int(1));
    assert_eq!(
        queue(&mut raw, &k).await,
        ["id:3", "id:4"],
        "deadline <= now goes"
    );
    assert_eq!(deadlines(&mut raw, &k).await.len(), 2);

    // At t + 1000 id:3 is due too, and id:4 behind it; the caller then takes the free lock.
    assert_eq!(
        try_acquire(&mut raw, &k, t + 1_000, "id:x").await,
        Value::Nil
    );
    assert!(!exists(&mut raw, &k.queue).await);
    assert!(!exists(&mut raw, &k.timeouts).await);
    assert_eq!(unlock(&mut raw, &k, t, "id:x").await, Value::Int(1));

    // A head without a deadline stops the purge (Redisson 3.32+), and blocks the free lock.
    let () = raw.rpush(&k.queue, "id:ghost").await.unwrap();
    let () = raw.rpush(&k.queue, "id:5").await.unwrap();
    let () = raw.zadd(&k.timeouts, "id:5", t - 10).await.unwrap();
    assert_eq!(try_acquire(&mut raw, &k, t, "id:x").await, Value::Int(1));
    assert_eq!(queue(&mut raw, &k).await, ["id:ghost", "id:5"]);
    // A waiter queued behind them: one slot after the last deadline, as in Redisson; its
    // re-poll has no hint to give (-2): the head has no deadline.
    assert_eq!(acquire(&mut raw, &k, t, "id:y").await, Value::Int(-10));
    assert_eq!(score(&mut raw, &k, "id:y").await, t - 10 + SLOT);
    assert_eq!(acquire(&mut raw, &k, t, "id:y").await, Value::Int(-2));
    // With the last entry lacking a deadline, the lock's PTTL (-2: free) is the ttl.
    let () = raw.rpush(&k.queue, "id:ghost2").await.unwrap();
    assert_eq!(acquire(&mut raw, &k, t, "id:z").await, Value::Int(-2));
    assert_eq!(score(&mut raw, &k, "id:z").await, t - 2 + SLOT);
    assert_eq!(
        queue(&mut raw, &k).await,
        ["id:ghost", "id:5", "id:y", "id:ghost2", "id:z"]
    );
}

/// The sleep hint of a queued waiter's re-poll: the lock's PTTL, or sooner the head's
/// deadline (a crashed head's wake-up is lost; its deadline is when the purge drops it).
#[tokio::test]
async fn a_queued_waiter_sleeps_until_the_heads_deadline_at_most() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let k = Keys::new("fair-hint");
    let t = now();
    assert_eq!(acquire(&mut raw, &k, t, "id:x").await, Value::Nil);
    let () = raw.rpush(&k.queue, "id:dead").await.unwrap();
    let () = raw.zadd(&k.timeouts, "id:dead", t + 1_000).await.unwrap();
    assert_eq!(acquire(&mut raw, &k, t, "id:y").await, Value::Int(1_000));
    assert_eq!(score(&mut raw, &k, "id:y").await, t + 1_000 + SLOT);
    assert_eq!(acquire(&mut raw, &k, t, "id:y").await, Value::Int(1_000));
    assert_eq!(acquire(&mut raw, &k, t + 999, "id:y").await, Value::Int(1));
    // At the dead head's deadline the purge drops it; y is the head: the lock's PTTL.
    let hint = int(&acquire(&mut raw, &k, t + 1_000, "id:y").await);
    assert!((LEASE - 100..=LEASE).contains(&hint), "{hint}");
    assert_eq!(queue(&mut raw, &k).await, ["id:y"]);
    let () = raw.persist(&k.name).await.unwrap();
    assert_eq!(acquire(&mut raw, &k, t, "id:y").await, Value::Int(-1));
    // Behind a head with a deadline, a lock without expiry gives the head's deadline (also
    // z's ttl when it queued: one slot after it).
    assert_eq!(
        acquire(&mut raw, &k, t, "id:z").await,
        Value::Int(1_000 + SLOT)
    );
    assert_eq!(
        acquire(&mut raw, &k, t, "id:z").await,
        Value::Int(1_000 + SLOT)
    );
    assert_eq!(
        acquire(&mut raw, &k, t + 1_400, "id:z").await,
        Value::Int(100)
    );
}
