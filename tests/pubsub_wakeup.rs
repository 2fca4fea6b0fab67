//! Waking waiters: a blocked waiter acquires on the unlock message (not at lease expiry, not at
//! its next re-check), survives the loss of its pub/sub connection, shares one subscription with
//! the other waiters of its client, and follows Redisson's `0` (wake one) / `1` (wake all)
//! message semantics (docs/LAYOUT.md §1.10).

mod common;

use std::time::{Duration, Instant};

use common::{
    RedisServer, channel, client_field, client_list, client_with, exists, field, hash, numsub,
    pttl, unique_name, wait_numsub,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, LockGuard, LockOptions, Owner};
use tokio::task::JoinHandle;

/// Upper bound for every poll loop of this file.
const POLL_LIMIT: Duration = Duration::from_secs(5);

/// `PUBSUB CHANNELS redisson_lock__channel:*`, sorted.
async fn lock_channels(raw: &mut MultiplexedConnection) -> Vec<String> {
    let mut v: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("redisson_lock__channel:*")
        .query_async(raw)
        .await
        .unwrap();
    v.sort();
    v
}

/// Spawns a waiter that calls `lock()` and reports when it got the lock.
fn spawn_waiter(client: &Client, name: &str) -> JoinHandle<(LockGuard, Instant)> {
    let lock = client.lock(name);
    tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        (guard, Instant::now())
    })
}

/// Spawns a waiter (see [`spawn_waiter`]) and returns it once it has subscribed to the lock's
/// channel and then had `settle` to make its post-subscribe attempt and go to sleep.
async fn parked_waiter(
    raw: &mut MultiplexedConnection,
    client: &Client,
    name: &str,
    settle: Duration,
) -> JoinHandle<(LockGuard, Instant)> {
    let waiter = spawn_waiter(client, name);
    wait_numsub(raw, &channel(name), 1).await;
    tokio::time::sleep(settle).await;
    waiter
}

/// A holder the library does not know about (a Java client): a raw hash with a 30 s lease.
async fn foreign_hold(raw: &mut MultiplexedConnection, name: &str) -> String {
    let field = "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab:1".to_owned();
    let () = raw.hset(name, &field, 1).await.unwrap();
    let () = raw.pexpire(name, 30_000).await.unwrap();
    field
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_wakes_on_the_unlock_message_within_milliseconds() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // Lease 30 s and re-check 10 s: neither expiry nor polling can explain a prompt wake-up.
    let a = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("wake");

    let ga = a.lock(&name).lock().await.unwrap();
    let waiter = parked_waiter(&mut raw, &b, &name, Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());

    let unlocked = Instant::now();
    ga.unlock().await.unwrap();
    let (gb, acquired) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("waiter still blocked 5 s after the unlock")
        .unwrap();
    let latency = acquired.saturating_duration_since(unlocked);
    println!("wake-up latency after unlock: {latency:?}");
    assert!(
        latency < Duration::from_millis(500),
        "waiter took {latency:?} to acquire after the unlock (re-check is 10 s)"
    );
    let field_b = field(&b, gb.owner());
    assert_eq!(hash(&mut raw, &name).await, vec![(field_b, "1".to_owned())]);

    gb.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_does_not_acquire_while_the_lock_is_held_and_renewed() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // A's lease is 600 ms, renewed every 200 ms; B re-checks every 50 ms, so over 1.5 s it
    // tries about 30 times and sees the lease renewed 7 times.
    let a = client_with(&server, Duration::from_millis(600), Duration::from_secs(1));
    let b = client_with(&server, Duration::from_secs(30), Duration::from_millis(50));
    let name = unique_name("held");

    let ga = a.lock(&name).lock().await.unwrap();
    let field_a = field(&a, ga.owner());
    let waiter = spawn_waiter(&b, &name);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!waiter.is_finished(), "B acquired while A held the lock");
    assert_eq!(hash(&mut raw, &name).await, vec![(field_a, "1".to_owned())]);
    let pttl = pttl(&mut raw, &name).await;
    assert!(
        (1..=600).contains(&pttl),
        "A's lease was renewed: pttl {pttl}"
    );
    assert!(!ga.is_lost());

    ga.unlock().await.unwrap();
    let (gb, _) = tokio::time::timeout(Duration::from_secs(3), waiter)
        .await
        .expect("waiter not woken after the unlock")
        .unwrap();
    let field_b = field(&b, gb.owner());
    assert_eq!(hash(&mut raw, &name).await, vec![(field_b, "1".to_owned())]);
    gb.unlock().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_racing_the_waiters_subscription_is_never_lost() {
    const ROUNDS: usize = 40;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    // Re-check 10 s: a wake-up lost between the first attempt and the subscription would
    // show up as a 10 s wait.
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("race-sub");
    let mut worst = Duration::ZERO;
    for round in 0..ROUNDS {
        let ga = a.lock(&name).lock().await.unwrap();
        let waiter = spawn_waiter(&b, &name);
        // Unlock at a random moment around the waiter's first attempt and SUBSCRIBE.
        let delay = Duration::from_micros(rand::random::<u64>() % 3_000);
        tokio::time::sleep(delay).await;
        let unlocked = Instant::now();
        ga.unlock().await.unwrap();
        let (gb, acquired) = tokio::time::timeout(Duration::from_secs(15), waiter)
            .await
            .unwrap_or_else(|_| panic!("round {round}: waiter never acquired"))
            .unwrap();
        let latency = acquired.saturating_duration_since(unlocked);
        worst = worst.max(latency);
        assert!(
            latency < Duration::from_secs(2),
            "round {round} (unlock after {delay:?}): took {latency:?}, a lost wake-up"
        );
        gb.unlock().await.unwrap();
    }
    println!("worst latency over {ROUNDS} racing unlocks: {worst:?}");
    assert!(!exists(&mut raw, &name).await);
    wait_numsub(&mut raw, &channel(&name), 0).await;
    a.shutdown().await;
    b.shutdown().await;
}

/// Kills B's pub/sub connection and returns the id of the connection that was killed.
async fn kill_pubsub(raw: &mut MultiplexedConnection) -> String {
    let before = client_list(raw, &["TYPE", "pubsub"]).await;
    assert_eq!(
        before.len(),
        1,
        "only B has a pub/sub connection: {before:?}"
    );
    let old_id = client_field(&before[0], "id").to_owned();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(raw)
        .await
        .unwrap();
    assert_eq!(killed, 1);
    old_id
}

/// Asserts that the pub/sub connection `old_id` (killed) is no longer among the server's.
async fn assert_connection_gone(raw: &mut MultiplexedConnection, old_id: &str) {
    let clients = client_list(raw, &["TYPE", "pubsub"]).await;
    assert!(
        clients.iter().all(|l| client_field(l, "id") != old_id),
        "{clients:?}"
    );
}

/// Waits until a new pub/sub connection (not `old_id`) is subscribed to exactly one channel.
async fn wait_resubscribed(raw: &mut MultiplexedConnection, old_id: &str, channel: &str) {
    let start = Instant::now();
    loop {
        let clients = client_list(raw, &["TYPE", "pubsub"]).await;
        if let [line] = clients.as_slice()
            && client_field(line, "id") != old_id
            && client_field(line, "sub") == "1"
        {
            break;
        }
        assert!(
            start.elapsed() < POLL_LIMIT,
            "no resubscription after CLIENT KILL: {clients:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(numsub(raw, channel).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_right_after_pubsub_kill_is_seen_within_the_recheck_interval() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(1));
    let name = unique_name("kill-now");

    let ga = a.lock(&name).lock().await.unwrap();
    let waiter = parked_waiter(&mut raw, &b, &name, Duration::from_millis(200)).await;

    let old_id = kill_pubsub(&mut raw).await;
    // The unlock message may be published while B has no subscription: it is lost.
    let unlocked = Instant::now();
    ga.unlock().await.unwrap();
    let (gb, acquired) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("waiter never acquired after its pub/sub connection was killed")
        .unwrap();
    let latency = acquired.saturating_duration_since(unlocked);
    println!("acquired {latency:?} after an unlock during the pub/sub outage");
    assert!(
        latency < Duration::from_secs(3),
        "took {latency:?}: beyond the 1 s re-check bound (the lease was 30 s)"
    );
    let field_b = field(&b, gb.owner());
    assert_eq!(hash(&mut raw, &name).await, vec![(field_b, "1".to_owned())]);
    // The connection was replaced, not left dead (it unsubscribes once the waiter is done).
    assert_connection_gone(&mut raw, &old_id).await;
    gb.unlock().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnection_wakes_waiters_to_recheck_even_without_a_message() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // Re-check 10 s, lease 30 s, and no unlock message at all: only the wake-up that follows
    // the reconnection can make B acquire within 2 s.
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("kill-wake");
    let ch = channel(&name);

    foreign_hold(&mut raw, &name).await;
    let waiter = parked_waiter(&mut raw, &b, &name, Duration::from_millis(300)).await;
    // Freed behind B's back (a lost message): B keeps sleeping.
    let () = raw.del(&name).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "B acquired without being woken");

    let old_id = kill_pubsub(&mut raw).await;
    let killed = Instant::now();
    let (gb, acquired) = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("waiter never acquired")
        .unwrap();
    let latency = acquired.saturating_duration_since(killed);
    println!("acquired {latency:?} after the pub/sub connection was killed (re-check 10 s)");
    assert!(
        latency < Duration::from_secs(2),
        "took {latency:?}: waiters were not woken on reconnection"
    );
    let field_b = field(&b, gb.owner());
    assert_eq!(hash(&mut raw, &name).await, vec![(field_b, "1".to_owned())]);
    // A new connection replaced the killed one.
    assert_connection_gone(&mut raw, &old_id).await;
    gb.unlock().await.unwrap();
    wait_numsub(&mut raw, &ch, 0).await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_after_resubscription_wakes_the_waiter_by_message() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("kill-later");
    let ch = channel(&name);

    let ga = a.lock(&name).lock().await.unwrap();
    let field_a = field(&a, ga.owner());
    let waiter = parked_waiter(&mut raw, &b, &name, Duration::from_millis(200)).await;

    let old_id = kill_pubsub(&mut raw).await;
    wait_resubscribed(&mut raw, &old_id, &ch).await;
    // The reconnection woke B; it re-checked, found A, and sleeps again (10 s re-check).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());
    assert_eq!(hash(&mut raw, &name).await, vec![(field_a, "1".to_owned())]);

    let unlocked = Instant::now();
    ga.unlock().await.unwrap();
    let (gb, acquired) = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("waiter never acquired")
        .unwrap();
    let latency = acquired.saturating_duration_since(unlocked);
    println!("wake-up latency on the new subscription: {latency:?}");
    assert!(
        latency < Duration::from_millis(500),
        "took {latency:?}: the message on the new subscription did not wake the waiter"
    );
    gb.unlock().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_one_client_share_one_subscription_and_all_acquire_in_turn() {
    const WAITERS: usize = 5;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    // Re-check 10 s: a waiter stranded after a `0` woke somebody else would take 10 s.
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("shared");
    let ch = channel(&name);

    let ga = a.lock(&name).lock().await.unwrap();
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            let lock = b.lock(&name);
            tokio::spawn(async move {
                let guard = lock.lock().await.unwrap();
                let acquired = Instant::now();
                tokio::time::sleep(Duration::from_millis(20)).await;
                let releasing = Instant::now();
                guard.unlock().await.unwrap();
                (acquired, releasing)
            })
        })
        .collect();
    wait_numsub(&mut raw, &ch, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(tasks.iter().all(|t| !t.is_finished()));
    // One pub/sub connection for the whole client, subscribed to one channel, once.
    assert_eq!(numsub(&mut raw, &ch).await, 1);
    let clients = client_list(&mut raw, &["TYPE", "pubsub"]).await;
    assert_eq!(clients.len(), 1, "{clients:?}");
    assert_eq!(client_field(&clients[0], "sub"), "1");
    assert_eq!(lock_channels(&mut raw).await, vec![ch.clone()]);

    let unlocked = Instant::now();
    ga.unlock().await.unwrap();
    let mut intervals = Vec::new();
    for t in tasks {
        let interval = tokio::time::timeout(Duration::from_secs(8), t)
            .await
            .expect("a waiter was stranded")
            .unwrap();
        intervals.push(interval);
    }
    let all_done = unlocked.elapsed();
    println!("{WAITERS} waiters acquired in turn within {all_done:?}");
    assert!(
        all_done < Duration::from_secs(5),
        "{all_done:?}: some waiter waited for its 10 s re-check"
    );
    intervals.sort();
    for w in intervals.windows(2) {
        assert!(w[0].1 < w[1].0, "overlapping holds: {w:?}");
    }
    assert!(!exists(&mut raw, &name).await);

    // The last waiter gone, the client unsubscribes (asynchronously).
    wait_numsub(&mut raw, &ch, 0).await;
    assert_eq!(lock_channels(&mut raw).await, Vec::<String>::new());
    a.shutdown().await;
    b.shutdown().await;
}

/// Spawns `n` waiters sharing one explicit owner: once the lock is free, every waiter that
/// re-checks acquires (re-entry), so the hold count tells how many woke.
fn spawn_same_owner_waiters(client: &Client, name: &str, n: usize) -> Vec<JoinHandle<LockGuard>> {
    (0..n)
        .map(|_| {
            let lock = client.lock(name);
            tokio::spawn(async move {
                let opts = LockOptions::new().owner(Owner::new(7));
                lock.lock_with_options(&opts).await.unwrap()
            })
        })
        .collect()
}

async fn hold_count(raw: &mut MultiplexedConnection, name: &str, field: &str) -> u64 {
    let v: Option<u64> = raw.hget(name, field).await.unwrap();
    v.unwrap_or(0)
}

async fn wait_hold_count(raw: &mut MultiplexedConnection, name: &str, field: &str, want: u64) {
    let start = Instant::now();
    loop {
        let n = hold_count(raw, name, field).await;
        if n == want {
            return;
        }
        assert!(
            n < want && start.elapsed() < Duration::from_secs(2),
            "hold count {n}, expected {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_message_wakes_one_local_waiter_and_one_message_wakes_all() {
    const WAITERS: usize = 3;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("wake-kinds");
    let ch = channel(&name);
    let field = format!("{}:7", b.id());

    foreign_hold(&mut raw, &name).await;
    let tasks = spawn_same_owner_waiters(&b, &name, WAITERS);
    wait_numsub(&mut raw, &ch, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Deleted without a message: nobody wakes (re-check 10 s, lease 30 s).
    let () = raw.del(&name).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !exists(&mut raw, &name).await,
        "a waiter acquired without being woken"
    );

    // `0`: exactly one local waiter wakes and acquires.
    let receivers: i64 = raw.publish(&ch, "0").await.unwrap();
    assert_eq!(receivers, 1);
    wait_hold_count(&mut raw, &name, &field, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(hold_count(&mut raw, &name, &field).await, 1);
    assert_eq!(tasks.iter().filter(|t| t.is_finished()).count(), 1);

    // `1`: every remaining waiter wakes and re-enters.
    let receivers: i64 = raw.publish(&ch, "1").await.unwrap();
    assert_eq!(receivers, 1);
    wait_hold_count(&mut raw, &name, &field, WAITERS as u64).await;
    let mut guards = Vec::new();
    for t in tasks {
        let guard = tokio::time::timeout(Duration::from_secs(2), t)
            .await
            .expect("a waiter did not wake on `1`")
            .unwrap();
        assert_eq!(guard.owner(), Owner::new(7));
        guards.push(guard);
    }
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field.clone(), WAITERS.to_string())]
    );
    for g in guards {
        g.unlock().await.unwrap();
    }
    assert!(!exists(&mut raw, &name).await);
    wait_numsub(&mut raw, &ch, 0).await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_other_than_zero_and_one_wake_nobody() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("wake-junk");
    let ch = channel(&name);

    foreign_hold(&mut raw, &name).await;
    let waiter = parked_waiter(&mut raw, &b, &name, Duration::from_millis(300)).await;
    let () = raw.del(&name).await.unwrap();
    for junk in ["2", "unlock", ""] {
        let receivers: i64 = raw.publish(&ch, junk).await.unwrap();
        assert_eq!(receivers, 1);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "woken by a message that is not 0 or 1"
    );
    assert!(!exists(&mut raw, &name).await);

    let published = Instant::now();
    let _: i64 = raw.publish(&ch, "0").await.unwrap();
    let (g, acquired) = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("a hand-published 0 did not wake the waiter")
        .unwrap();
    assert!(acquired.saturating_duration_since(published) < Duration::from_millis(500));
    g.unlock().await.unwrap();
    b.shutdown().await;
}

/// Redisson's `unlockInnerAsync` script (3.24+, with the unlock latch), as a Java client sends
/// it: KEYS = [N, channel, latch], ARGV = ["0", lease, F, "PUBLISH", latchTtl].
const JAVA_UNLOCK: &str = r"
local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call(ARGV[4], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
    return 1;
end;
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_unlock_script_wakes_our_waiter() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("java");
    let ch = channel(&name);

    let java_field = foreign_hold(&mut raw, &name).await;
    let waiter = parked_waiter(&mut raw, &b, &name, Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());

    let latch = format!("redisson_unlock_latch:{{{name}}}:0123456789abcdef0123456789abcdef");
    let unlocked = Instant::now();
    let reply: Option<i64> = redis::Script::new(JAVA_UNLOCK)
        .key(&name)
        .key(&ch)
        .key(&latch)
        .arg("0")
        .arg(30_000)
        .arg(&java_field)
        .arg("PUBLISH")
        .arg(13_500)
        .invoke_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(reply, Some(1), "the Java holder released its lock");
    let (g, acquired) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("waiter not woken by the Java unlock")
        .unwrap();
    let latency = acquired.saturating_duration_since(unlocked);
    println!("woken {latency:?} after the Java unlock");
    assert!(latency < Duration::from_millis(500), "{latency:?}");
    let field_b = field(&b, g.owner());
    assert_eq!(hash(&mut raw, &name).await, vec![(field_b, "1".to_owned())]);
    let pttl = pttl(&mut raw, &name).await;
    assert!((29_000..=30_000).contains(&pttl), "pttl {pttl}");
    g.unlock().await.unwrap();
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_waiters_leave_the_periodic_recheck_to_one_of_them() {
    const WAITERS: usize = 8;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // Re-check every 100 ms; the lock is a foreign hold with a 30 s lease, so only the
    // re-check explains an attempt while they are parked.
    let b = client_with(&server, Duration::from_secs(30), Duration::from_millis(100));
    let name = unique_name("parked");
    foreign_hold(&mut raw, &name).await;
    // Each waiter releases the lock as soon as it has it.
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            let lock = b.lock(&name);
            tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
        })
        .collect();
    wait_numsub(&mut raw, &channel(&name), 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut raw)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempts = common::command_stats(&mut raw, "evalsha").await.calls;
    println!("{WAITERS} parked waiters, re-check 100 ms: {attempts} attempts in 1 s");
    // One re-checker: about 10; every waiter re-checking would make about 80.
    assert!(
        (3..=20).contains(&attempts),
        "{attempts} attempts in 1 s: expected one waiter re-checking every 100 ms"
    );

    // Freed behind their back (no message): the re-checker takes it, and its unlock's message
    // hands the lock on, one waiter after another.
    let () = raw.del(&name).await.unwrap();
    for waiter in waiters {
        tokio::time::timeout(POLL_LIMIT, waiter)
            .await
            .expect("a parked waiter never got the lock")
            .unwrap();
    }
    assert!(!exists(&mut raw, &name).await);
    b.shutdown().await;
}
