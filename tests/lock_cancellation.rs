//! Cancel safety: acquire futures dropped at any moment (tiny timeouts, aborted tasks,
//! `select!` losers), including while their acquire script is in flight, never leave a lock
//! held without a guard. Afterwards the key is gone and a fresh lock succeeds at once.
//!
//! Leases here are 30 s on purpose: a leaked hold would outlive the test instead of expiring
//! quietly, so the "key absent" checks catch it.
//!
//! Every test runs once per lock kind (`common::Kind`, `per_kind!`). "No key left" covers what
//! each kind writes: the read half's marker keys, and the fair lock's waiter queue and deadlines,
//! which a waiter that is cancelled must leave. Where waiters need a holder to wait behind, the
//! holder takes the kind's rival (`Kind::rival`: the write half when the waiters read, as readers
//! share the lock).

mod common;

use std::time::{Duration, Instant};

use common::{
    Kind, RedisServer, client_with, command_stats, exists, hash, per_kind, unique_name, wait_numsub,
};
use rand::Rng;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, LockOptions, Owner};

/// How long background undo/release tasks get to finish before leftovers count as leaks.
const SETTLE: Duration = Duration::from_secs(5);

/// The client of every test here: 30 s leases (see above) and a 200 ms re-check interval.
fn client(server: &RedisServer) -> Client {
    client_with(server, Duration::from_secs(30), Duration::from_millis(200))
}

async fn all_keys(raw: &mut MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = raw.keys("*").await.unwrap();
    keys.sort();
    keys
}

/// Describes every key of the server, for failure messages.
async fn describe_keys(raw: &mut MultiplexedConnection) -> Vec<String> {
    let mut detail = Vec::new();
    for k in all_keys(raw).await {
        let fields: Vec<(String, String)> = raw.hgetall(&k).await.unwrap_or_default();
        let pttl: i64 = raw.pttl(&k).await.unwrap();
        detail.push(format!("{k} {fields:?} pttl {pttl}"));
    }
    detail
}

/// Polls until the server (private to the test) has had no key at all for 300 ms in a row:
/// background acquire attempts and their undos may still be queued when the loops end.
async fn wait_no_keys(raw: &mut MultiplexedConnection) {
    let start = Instant::now();
    let mut empty_since: Option<Instant> = None;
    loop {
        if all_keys(raw).await.is_empty() {
            let since = *empty_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_millis(300) {
                return;
            }
        } else {
            empty_since = None;
        }
        if start.elapsed() > SETTLE {
            panic!(
                "lock keys leaked after {SETTLE:?}: {:?}",
                describe_keys(raw).await
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Shuts `client` down (which waits for every background attempt and release it spawned)
/// and asserts that nothing at all is left in Redis.
async fn shutdown_and_assert_empty(client: &Client, raw: &mut MultiplexedConnection) {
    tokio::time::timeout(Duration::from_secs(10), client.shutdown())
        .await
        .expect("shutdown did not finish the background tasks");
    assert_eq!(describe_keys(raw).await, Vec::<String>::new());
}

/// Script calls (EVALSHA and EVAL) the server has run so far.
async fn script_calls(raw: &mut MultiplexedConnection) -> u64 {
    command_stats(raw, "evalsha").await.calls + command_stats(raw, "eval").await.calls
}

/// Polls until the server (private to the test) has run no script for 100 ms: background
/// attempts and their undos are done.
async fn wait_scripts_idle(raw: &mut MultiplexedConnection) {
    let start = Instant::now();
    let mut before = script_calls(raw).await;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let after = script_calls(raw).await;
        if after == before {
            return;
        }
        assert!(
            start.elapsed() < SETTLE,
            "scripts still running after {SETTLE:?}"
        );
        before = after;
    }
}

/// Polls until no connection is subscribed to any lock channel.
async fn wait_no_subscriptions(raw: &mut MultiplexedConnection) {
    let start = Instant::now();
    loop {
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg("*")
            .query_async(raw)
            .await
            .unwrap();
        if channels.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < SETTLE,
            "subscriptions left after {SETTLE:?}: {channels:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A fresh owner (never used by the cancelled acquisitions, so a leaked hold cannot be
/// re-entered) gets the lock with a single attempt, and holds it alone.
async fn assert_fresh_lock_succeeds(
    kind: Kind,
    client: &Client,
    raw: &mut MultiplexedConnection,
    name: &str,
) {
    let owner = Owner::new(rand::thread_rng().gen_range(1_000_000..2_000_000));
    let opts = LockOptions::new().owner(owner);
    let guard = tokio::time::timeout(
        Duration::from_secs(1),
        kind.any(client, name)
            .try_lock_with_options(Duration::ZERO, &opts),
    )
    .await
    .expect("try_lock did not answer")
    .unwrap()
    .unwrap_or_else(|| panic!("{name} still held after the cancellations"));
    assert_eq!(hash(raw, name).await, kind.hold_hash(client, owner, 1));
    guard.unlock().await.unwrap();
    assert!(!exists(raw, name).await);
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn tiny_timeouts_on_free_locks_leave_nothing_behind);

async fn tiny_timeouts_on_free_locks_leave_nothing_behind(kind: Kind) {
    const TASKS: usize = 8;
    const ITERATIONS: usize = 250;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let names: Vec<String> = (0..TASKS).map(|_| unique_name("cancel-free")).collect();

    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let lock = kind.any(&client, name);
            tokio::spawn(async move {
                let (mut completed, mut cancelled) = (0usize, 0usize);
                for i in 0..ITERATIONS {
                    // Mostly 0-300 µs (cut short with the script in flight); every fourth
                    // up to 3 ms, so some complete.
                    let max = if i % 4 == 3 { 3_000 } else { 300 };
                    let limit = Duration::from_micros(rand::thread_rng().gen_range(0..max));
                    match tokio::time::timeout(limit, lock.lock()).await {
                        Ok(guard) => {
                            let guard = guard.unwrap();
                            completed += 1;
                            // Half explicit unlocks, half releases on drop.
                            if i % 2 == 0 {
                                guard.unlock().await.unwrap();
                            } else {
                                drop(guard);
                            }
                        }
                        Err(_) => cancelled += 1,
                    }
                }
                (completed, cancelled)
            })
        })
        .collect();
    let (mut completed, mut cancelled) = (0, 0);
    for t in tasks {
        let (c, x) = tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("iterations took over 20 s")
            .unwrap();
        completed += c;
        cancelled += x;
    }
    println!("{completed} acquisitions completed, {cancelled} cut short");
    assert_eq!(completed + cancelled, TASKS * ITERATIONS);

    wait_no_keys(&mut raw).await;
    for name in &names {
        assert_fresh_lock_succeeds(kind, &client, &mut raw, name).await;
    }
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());
    wait_no_subscriptions(&mut raw).await;
    shutdown_and_assert_empty(&client, &mut raw).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn tiny_timeouts_on_one_shared_lock_leave_nothing_behind);

async fn tiny_timeouts_on_one_shared_lock_leave_nothing_behind(kind: Kind) {
    const TASKS: usize = 8;
    const ITERATIONS: usize = 150;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let clients = [client(&server), client(&server)];
    let name = unique_name("cancel-shared");

    // Tasks of two clients race for one lock: some time out while waiting, some while their
    // attempt is in flight, some get it.
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let lock = kind.any(&clients[t % 2], &name);
            tokio::spawn(async move {
                let mut completed = 0usize;
                for _ in 0..ITERATIONS {
                    let limit = Duration::from_micros(rand::thread_rng().gen_range(0..1_000));
                    if let Ok(guard) = tokio::time::timeout(limit, lock.lock()).await {
                        completed += 1;
                        guard.unwrap().unlock().await.unwrap();
                    }
                }
                completed
            })
        })
        .collect();
    let mut completed = 0;
    for t in tasks {
        completed += tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("iterations took over 20 s")
            .unwrap();
    }
    println!(
        "{completed} of {} contended acquisitions completed",
        TASKS * ITERATIONS
    );

    wait_no_keys(&mut raw).await;
    wait_no_subscriptions(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &clients[0], &mut raw, &name).await;
    assert_fresh_lock_succeeds(kind, &clients[1], &mut raw, &name).await;
    for c in &clients {
        shutdown_and_assert_empty(c, &mut raw).await;
    }
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn waiters_timing_out_behind_a_holder_leave_nothing_behind);

async fn waiters_timing_out_behind_a_holder_leave_nothing_behind(kind: Kind) {
    const TASKS: usize = 6;
    const ITERATIONS: usize = 60;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let holder_client = client(&server);
    let waiter_client = client(&server);
    let name = unique_name("cancel-held");
    // (The fair lock's waiters each have a channel of their own: `wait_no_subscriptions`
    // below covers them.)
    let ch = kind.channel(&name);

    // Readers share the lock: the read half's waiters wait behind a writer.
    let holder = kind
        .rival()
        .any(&holder_client, &name)
        .lock()
        .await
        .unwrap();
    let holder_field = kind.rival().field(&holder_client, holder.owner());
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let lock = kind.any(&waiter_client, &name);
            tokio::spawn(async move {
                for i in 0..ITERATIONS {
                    // Mostly tiny timeouts (cut short in the first attempt or while
                    // subscribing), some long enough to be parked on the message.
                    let limit = if i % 5 == 0 {
                        Duration::from_millis(rand::thread_rng().gen_range(5..40))
                    } else {
                        Duration::from_micros(rand::thread_rng().gen_range(0..500))
                    };
                    if t % 2 == 0 {
                        let r = tokio::time::timeout(limit, lock.lock()).await;
                        assert!(r.is_err(), "acquired a lock that is held");
                    } else {
                        let r = lock.try_lock_for(limit).await.unwrap();
                        assert!(r.is_none(), "acquired a lock that is held");
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("waiters took over 20 s")
            .unwrap();
    }
    // Nothing changed while the holder held it.
    assert_eq!(
        hash(&mut raw, &name).await,
        kind.rival().hash_of(&holder_field, 1)
    );
    // The fair lock's waiters left its queue already, while the lock is still held.
    kind.wait_no_waiters(&mut raw, &name).await;

    holder.unlock().await.unwrap();
    wait_no_keys(&mut raw).await;
    wait_numsub(&mut raw, &ch, 0).await;
    wait_no_subscriptions(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &waiter_client, &mut raw, &name).await;
    assert_fresh_lock_succeeds(kind, &holder_client, &mut raw, &name).await;
    shutdown_and_assert_empty(&holder_client, &mut raw).await;
    shutdown_and_assert_empty(&waiter_client, &mut raw).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn aborted_tasks_release_what_they_held);

async fn aborted_tasks_release_what_they_held(kind: Kind) {
    const ROUNDS: usize = 10;
    const TASKS_PER_ROUND: usize = 8;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let names = [unique_name("abort-a"), unique_name("abort-b")];

    let (mut finished, mut aborted) = (0, 0);
    for _ in 0..ROUNDS {
        let handles: Vec<_> = (0..TASKS_PER_ROUND)
            .map(|t| {
                let lock = kind.any(&client, &names[t % 2]);
                tokio::spawn(async move {
                    let guard = lock.lock().await.unwrap();
                    let hold = Duration::from_micros(rand::thread_rng().gen_range(0..5_000));
                    tokio::time::sleep(hold).await;
                    if t % 3 == 0 {
                        guard.unlock().await.unwrap();
                    } else {
                        drop(guard);
                    }
                })
            })
            .collect();
        for h in &handles {
            let pause = Duration::from_micros(rand::thread_rng().gen_range(0..3_000));
            tokio::time::sleep(pause).await;
            h.abort();
        }
        for h in handles {
            match tokio::time::timeout(Duration::from_secs(5), h)
                .await
                .expect("aborted task did not end")
            {
                Ok(()) => finished += 1,
                Err(e) => {
                    assert!(e.is_cancelled(), "task failed: {e}");
                    aborted += 1;
                }
            }
        }
    }
    println!("{finished} tasks finished, {aborted} aborted");
    assert_eq!(finished + aborted, ROUNDS * TASKS_PER_ROUND);

    wait_no_keys(&mut raw).await;
    wait_no_subscriptions(&mut raw).await;
    for name in &names {
        assert_fresh_lock_succeeds(kind, &client, &mut raw, name).await;
    }
    shutdown_and_assert_empty(&client, &mut raw).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn acquire_dropped_on_its_first_poll_is_undone);

async fn acquire_dropped_on_its_first_poll_is_undone(kind: Kind) {
    const ITERATIONS: usize = 500;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("select");
    let lock = kind.any(&client, &name);

    let mut won = 0;
    for _ in 0..ITERATIONS {
        // `biased`: the acquire is polled first (its script is sent), then the ready branch
        // wins and the acquire future is dropped with its script in flight.
        tokio::select! {
            biased;
            g = lock.lock() => {
                won += 1;
                g.unwrap().unlock().await.unwrap();
            }
            () = std::future::ready(()) => {}
        }
    }
    println!("{won} of {ITERATIONS} acquisitions completed on their first poll");
    wait_no_keys(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &client, &mut raw, &name).await;

    // Same with an explicit owner that holds the lock meanwhile: dropped re-entries must
    // not change the hold count.
    let owner = Owner::new(42);
    let opts = LockOptions::new().owner(owner);
    let held = lock.lock_with_options(&opts).await.unwrap();
    for _ in 0..ITERATIONS {
        tokio::select! {
            biased;
            g = lock.lock_with_options(&opts) => g.unwrap().unlock().await.unwrap(),
            () = std::future::ready(()) => {}
        }
    }
    let field = kind.field(&client, owner);
    let start = Instant::now();
    loop {
        let count: Option<u64> = raw.hget(&name, &field).await.unwrap();
        if count == Some(1) {
            break;
        }
        assert!(
            start.elapsed() < SETTLE,
            "hold count {count:?} after dropped re-entries, expected 1"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The dropped attempts finish in tasks of the client, one at a time per holder field: a
    // late one may still take the count to 2 and back. Once no script has run for 100 ms they
    // are all done, and the count stays 1 (no undo arrives late).
    wait_scripts_idle(&mut raw).await;
    let count: Option<u64> = raw.hget(&name, &field).await.unwrap();
    assert_eq!(count, Some(1));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let count: Option<u64> = raw.hget(&name, &field).await.unwrap();
    assert_eq!(count, Some(1));
    assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
    held.unlock().await.unwrap();
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());
    assert_fresh_lock_succeeds(kind, &client, &mut raw, &name).await;
    shutdown_and_assert_empty(&client, &mut raw).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn acquire_dropped_after_its_reply_arrived_is_undone);

/// Deterministic reproduction of the window behind the aborted-task leak: the acquire future
/// is driven by hand until its script has run in Redis (granting the lock), then it is dropped
/// without being polled again, with the reply delivered but unread (what `JoinHandle::abort`,
/// a losing `select!` branch or a timeout firing at that moment do). The grant must be undone.
async fn acquire_dropped_after_its_reply_arrived_is_undone(kind: Kind) {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("reply-dropped");
    let lock = kind.any(&client, &name);

    let mut cx = Context::from_waker(Waker::noop());
    let mut exercised = false;
    // Up to 20 tries: on a loaded machine the reply may come (and be read by the next poll)
    // before the check below sees the grant.
    for _ in 0..20 {
        let mut acquire = Box::pin(lock.lock());
        let start = Instant::now();
        // Poll (which makes progress: connect, send), then look whether the script ran.
        let completed = loop {
            if let Poll::Ready(r) = acquire.as_mut().poll(&mut cx) {
                break Some(r);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            if exists(&mut raw, &name).await {
                break None;
            }
            assert!(start.elapsed() < SETTLE, "the acquire script never ran");
        };
        match completed {
            // Polled once more after the reply came: the window was missed; release, retry.
            Some(r) => {
                r.unwrap().unlock().await.unwrap();
                continue;
            }
            None => {
                // Granted in Redis; let the reply reach the future, then drop it unread.
                tokio::time::sleep(Duration::from_millis(100)).await;
                drop(acquire);
                exercised = true;
                break;
            }
        }
    }
    assert!(
        exercised,
        "never caught the acquire between its grant and its reply"
    );

    wait_no_keys(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &client, &mut raw, &name).await;
    shutdown_and_assert_empty(&client, &mut raw).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn try_lock_for_a_millisecond_never_errors_on_a_healthy_server);

async fn try_lock_for_a_millisecond_never_errors_on_a_healthy_server(kind: Kind) {
    const ITERATIONS: usize = 300;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);

    // Uncontended: the first attempt always answers, so a free lock is always acquired.
    let name = unique_name("try-1ms");
    let lock = kind.any(&client, &name);
    for i in 0..ITERATIONS {
        match lock.try_lock_for(Duration::from_millis(1)).await {
            Ok(Some(g)) => g.unlock().await.unwrap(),
            Ok(None) => panic!("iteration {i}: a free lock was reported busy"),
            Err(e) => panic!("iteration {i}: {e}"),
        }
    }
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());

    // Contended: four tasks race with 1 ms waits; every call returns Ok.
    let shared = unique_name("try-1ms-shared");
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let lock = kind.any(&client, &shared);
            tokio::spawn(async move {
                let mut got = 0usize;
                for i in 0..ITERATIONS / 4 {
                    match lock.try_lock_for(Duration::from_millis(1)).await {
                        Ok(Some(g)) => {
                            got += 1;
                            g.unlock().await.unwrap();
                        }
                        Ok(None) => {}
                        Err(e) => panic!("iteration {i}: {e}"),
                    }
                }
                got
            })
        })
        .collect();
    let mut got = 0;
    for t in tasks {
        got += tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("try_lock_for loops took over 20 s")
            .unwrap();
    }
    println!("{got} of {ITERATIONS} contended 1 ms tries acquired");
    assert!(got > 0);
    wait_no_keys(&mut raw).await;
    wait_no_subscriptions(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &client, &mut raw, &shared).await;
    shutdown_and_assert_empty(&client, &mut raw).await;
}
