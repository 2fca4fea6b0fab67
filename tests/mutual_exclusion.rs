//! Mutual exclusion: tasks spread over several clients increment a counter stored in Redis
//! with a non-atomic GET then SET under the lock. Any overlap of two critical sections loses an
//! update, so the final count is exact only if the lock excludes; the recorded hold intervals
//! (one process, one monotonic clock) must not overlap either.

mod common;

use std::future::Future;
use std::time::{Duration, Instant};

use common::{RedisServer, client_with, exists, unique_name};
use rand::Rng;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Lock, LockGuard, LockOptions, Owner};

const CLIENTS: usize = 4;
const TASKS_PER_CLIENT: usize = 4;
const ITERATIONS: usize = 50;
const TOTAL: usize = CLIENTS * TASKS_PER_CLIENT * ITERATIONS;
/// Bound on one whole run of `TOTAL` critical sections.
const RUN_LIMIT: Duration = Duration::from_secs(25);

/// One critical section as seen from outside: [acquired, releasing].
type Interval = (Instant, Instant);

/// The read-modify-write under the lock: GET, a random 0-1 ms pause, SET + 1.
async fn increment(raw: &mut MultiplexedConnection, counter: &str) {
    let v: Option<u64> = raw.get(counter).await.unwrap();
    let pause = Duration::from_micros(rand::thread_rng().gen_range(0..1_000));
    if pause < Duration::from_micros(100) {
        tokio::task::yield_now().await;
    } else {
        tokio::time::sleep(pause).await;
    }
    let () = raw.set(counter, v.unwrap_or(0) + 1).await.unwrap();
}

/// Runs `CLIENTS × TASKS_PER_CLIENT` tasks, each calling `section(lock, raw, counter)`
/// `ITERATIONS` times, and checks the count and the intervals.
async fn run<F, Fut>(server: &RedisServer, prefix: &str, section: F)
where
    F: Fn(Lock, MultiplexedConnection, String) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Interval> + Send + 'static,
{
    let clients: Vec<Client> = (0..CLIENTS)
        .map(|_| client_with(server, Duration::from_secs(3), Duration::from_millis(200)))
        .collect();
    let name = unique_name(prefix);
    let counter = format!("{name}:counter");
    let mut raw = server.conn().await;

    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in &clients {
        for _ in 0..TASKS_PER_CLIENT {
            let (lock, conn, counter) = (c.lock(&name), raw.clone(), counter.clone());
            let section = section.clone();
            tasks.push(tokio::spawn(async move {
                let mut intervals = Vec::with_capacity(ITERATIONS);
                for _ in 0..ITERATIONS {
                    intervals.push(section(lock.clone(), conn.clone(), counter.clone()).await);
                }
                intervals
            }));
        }
    }
    let mut intervals: Vec<Interval> = Vec::with_capacity(TOTAL);
    for t in tasks {
        let mine = tokio::time::timeout(RUN_LIMIT.saturating_sub(started.elapsed()), t)
            .await
            .unwrap_or_else(|_| panic!("{TOTAL} critical sections did not finish in {RUN_LIMIT:?}"))
            .unwrap();
        assert_eq!(mine.len(), ITERATIONS);
        intervals.extend(mine);
    }
    println!(
        "{prefix}: {TOTAL} critical sections in {:?}",
        started.elapsed()
    );

    let count: u64 = raw.get(&counter).await.unwrap();
    assert_eq!(
        count, TOTAL as u64,
        "lost updates: the lock did not exclude"
    );

    assert_eq!(intervals.len(), TOTAL);
    intervals.sort();
    for w in intervals.windows(2) {
        assert!(
            w[0].0 <= w[0].1,
            "interval ends before it starts: {:?}",
            w[0]
        );
        assert!(
            w[0].1 < w[1].0,
            "two holders at once: {:?} overlaps {:?}",
            w[0],
            w[1]
        );
    }
    // Everything released: the lock key is gone.
    assert!(
        !exists(&mut raw, &name).await,
        "lock still held after every task released it"
    );
    for c in &clients {
        c.shutdown().await;
    }
}

/// Records the interval of one hold and releases it.
async fn release(guard: LockGuard, acquired: Instant) -> Interval {
    let releasing = Instant::now();
    guard.unlock().await.unwrap();
    (acquired, releasing)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_excludes_across_clients_and_tasks() {
    let server = RedisServer::start();
    run(&server, "mutex-lock", |lock, mut raw, counter| async move {
        let guard = lock.lock().await.unwrap();
        let acquired = Instant::now();
        assert!(guard.lease().is_none());
        increment(&mut raw, &counter).await;
        release(guard, acquired).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_for_with_explicit_lease_excludes_across_clients_and_tasks() {
    const LEASE: Duration = Duration::from_secs(10);
    let server = RedisServer::start();
    run(&server, "mutex-try", |lock, mut raw, counter| async move {
        let opts = LockOptions::new().lease(LEASE);
        let mut tries = 0;
        let guard = loop {
            tries += 1;
            assert!(tries <= 10_000, "never acquired in {tries} tries");
            let wait = Duration::from_millis(rand::thread_rng().gen_range(1..50));
            match lock.try_lock_with_options(wait, &opts).await {
                Ok(Some(g)) => break g,
                Ok(None) => {}
                // A first attempt that got no reply within the wait + 100 ms is a documented
                // `Timeout` (its grant, if any, is undone); on a loaded machine that happens.
                Err(e) if e.is_timeout() => {}
                Err(e) => panic!("{e}"),
            }
        };
        let acquired = Instant::now();
        assert_eq!(guard.lease(), Some(LEASE));
        // The explicit lease is on the key, not renewed by a watchdog.
        let pttl: i64 = raw.pttl(lock.name()).await.unwrap();
        assert!((9_000..=10_000).contains(&pttl), "pttl {pttl}");
        increment(&mut raw, &counter).await;
        release(guard, acquired).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_nesting_excludes_across_clients_and_tasks() {
    let server = RedisServer::start();
    run(
        &server,
        "mutex-nested",
        |lock, mut raw, counter| async move {
            let outer = lock.lock().await.unwrap();
            let acquired = Instant::now();
            let owner = Owner::current();
            assert_eq!(outer.owner(), owner);
            // Re-entry by the same task never waits.
            let inner = tokio::time::timeout(Duration::from_secs(2), lock.lock())
                .await
                .expect("re-entry waited")
                .unwrap();
            assert_eq!(inner.owner(), owner);
            assert_eq!(lock.hold_count(owner).await.unwrap(), 2);
            let fields: Vec<(String, String)> = raw.hgetall(lock.name()).await.unwrap();
            assert_eq!(fields.len(), 1, "{fields:?}");
            assert!(
                fields[0].0.ends_with(&format!(":{}", owner.id())),
                "{fields:?}"
            );
            assert_eq!(fields[0].1, "2");
            increment(&mut raw, &counter).await;
            inner.unlock().await.unwrap();
            assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
            assert!(lock.is_held_by(owner).await.unwrap());
            release(outer, acquired).await
        },
    )
    .await;
}
