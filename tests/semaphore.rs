//! The counting semaphore (`client.semaphore(name)`, Redisson's `RSemaphore`), after Redisson's own
//! `RedissonSemaphoreTest` (its layout: docs/LAYOUT.md §6.4): the exact value of the key and the
//! messages on `redisson_sc:{name}` after each operation, waiting and `n`-aware wake-ups, cancel
//! safety, and bad input.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use common::{
    Messages, POLL_LIMIT, Primitive, RedisServer, client, client_with, command_stats, dbsize,
    exists, ms, pttl, unique_name, value, wait_numsub, wait_value,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::Error;

/// Upper bound of every poll loop of this file.
/// This crate's grant markers of `name` (docs/LAYOUT.md §12), with their values and TTLs.
async fn markers(raw: &mut MultiplexedConnection, name: &str) -> Vec<(String, i64)> {
    let keys: Vec<String> = raw
        .keys(format!("{{{name}}}:redisson_sync:grant:*"))
        .await
        .unwrap();
    let mut out = Vec::new();
    for k in keys {
        let v: String = raw.get(&k).await.unwrap();
        out.push((v, pttl(raw, &k).await));
    }
    out
}

#[tokio::test]
async fn try_set_permits_sets_once_and_publishes_the_count() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);
    let mut messages = Messages::subscribe(&server, &Primitive::Semaphore.channel(&name)).await;

    assert!(sem.try_set_permits(3).await.unwrap());
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("3"));
    assert_eq!(pttl(&mut raw, &name).await, -1);
    assert_eq!(messages.next().await, "3");

    assert!(!sem.try_set_permits(5).await.unwrap());
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("3"));
    messages.none_within(ms(200)).await;
    assert_eq!(sem.available_permits().await.unwrap(), 3);
    c.shutdown().await;
}

#[tokio::test]
async fn try_set_with_a_ttl_expires_and_add_permits_clears_the_ttl() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);

    assert!(sem.try_set_permits_with_ttl(2, ms(10_000)).await.unwrap());
    let ttl = pttl(&mut raw, &name).await;
    assert!((9_000..=10_000).contains(&ttl), "pttl {ttl}");
    assert_eq!(sem.add_permits(1).await.unwrap(), 3);
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("3"));
    assert_eq!(pttl(&mut raw, &name).await, -1, "add_permits keeps no TTL");

    let short = c.semaphore(unique_name("sem"));
    assert!(short.try_set_permits_with_ttl(1, ms(200)).await.unwrap());
    tokio::time::sleep(ms(400)).await;
    assert!(!exists(&mut raw, short.name()).await);
    assert_eq!(short.available_permits().await.unwrap(), 0);
    assert!(
        short.try_set_permits(4).await.unwrap(),
        "set again once expired"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn add_permits_may_go_negative_and_publishes_the_new_count() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);
    let mut messages = Messages::subscribe(&server, &Primitive::Semaphore.channel(&name)).await;

    assert_eq!(sem.add_permits(2).await.unwrap(), 2, "creates the key");
    assert_eq!(messages.next().await, "2");
    assert_eq!(sem.add_permits(-5).await.unwrap(), -3);
    assert_eq!(messages.next().await, "-3");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("-3"));
    assert_eq!(sem.available_permits().await.unwrap(), -3);
    assert!(sem.try_acquire(1).await.unwrap().is_none());
    sem.release(4).await.unwrap();
    assert_eq!(messages.next().await, "1");
    let p = sem
        .try_acquire(1)
        .await
        .unwrap()
        .expect("one permit is back");
    assert_eq!(p.count(), 1);
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    p.release().await.unwrap();
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("1"));
    c.shutdown().await;
}

#[tokio::test]
async fn zero_permits_always_succeed_and_change_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);

    let p = sem.try_acquire(0).await.unwrap().expect("0 permits always");
    assert_eq!(p.count(), 0);
    drop(p);
    let p = sem.acquire(0).await.unwrap();
    p.release().await.unwrap();
    sem.release(0).await.unwrap();
    assert!(!sem.release_if_exists(0).await.unwrap());
    tokio::time::sleep(ms(100)).await;
    assert!(!exists(&mut raw, &name).await, "nothing written");
    c.shutdown().await;
}

#[tokio::test]
async fn release_without_acquire_creates_the_key_and_release_if_exists_does_not() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);
    let mut messages = Messages::subscribe(&server, &Primitive::Semaphore.channel(&name)).await;

    assert!(!sem.release_if_exists(2).await.unwrap());
    assert!(!exists(&mut raw, &name).await);
    messages.none_within(ms(100)).await;

    sem.release(2).await.unwrap();
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("2"));
    assert_eq!(messages.next().await, "2");
    assert!(sem.release_if_exists(3).await.unwrap());
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("5"));
    assert_eq!(messages.next().await, "5");
    c.shutdown().await;
}

#[tokio::test]
async fn drain_takes_every_permit() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);

    assert_eq!(sem.drain_permits().await.unwrap(), 0);
    assert!(
        !exists(&mut raw, &name).await,
        "a missing semaphore stays missing"
    );
    sem.try_set_permits(5).await.unwrap();
    let p = sem.acquire(2).await.unwrap();
    assert_eq!(sem.drain_permits().await.unwrap(), 3);
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    p.release().await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_release_within_milliseconds() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // Re-check every 10 s: only the message can explain a prompt wake-up.
    let a = client(&server);
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("sem");
    a.semaphore(&name).try_set_permits(1).await.unwrap();
    let held = a.semaphore(&name).acquire(1).await.unwrap();

    let sem_b = b.semaphore(&name);
    let waiter = tokio::spawn(async move {
        let p = sem_b.acquire(1).await.unwrap();
        (p, Instant::now())
    });
    wait_numsub(&mut raw, &Primitive::Semaphore.channel(&name), 1).await;
    tokio::time::sleep(ms(300)).await;
    assert!(!waiter.is_finished());

    let released = Instant::now();
    held.release().await.unwrap();
    let (p, woke) = tokio::time::timeout(POLL_LIMIT, waiter)
        .await
        .expect("waiter still blocked")
        .unwrap();
    let latency = woke.saturating_duration_since(released);
    assert!(latency < ms(500), "woken after {latency:?}");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    p.release().await.unwrap();
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("1"));
    wait_numsub(&mut raw, &Primitive::Semaphore.channel(&name), 0).await;
    a.shutdown().await;
    b.shutdown().await;
}

/// `testAcquireAfterAddPermits`: a waiter for 2 permits is not served by 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_for_two_permits_waits_until_two_are_there() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client_with(&server, Duration::from_secs(30), ms(100));
    let name = unique_name("sem");
    let sem = c.semaphore(&name);
    sem.try_set_permits(0).await.unwrap();
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(2).await.unwrap() })
    };
    wait_numsub(&mut raw, &Primitive::Semaphore.channel(&name), 1).await;
    sem.add_permits(1).await.unwrap();
    tokio::time::sleep(ms(400)).await;
    assert!(!waiter.is_finished(), "acquired 2 permits out of 1");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("1"));
    sem.add_permits(1).await.unwrap();
    let p = tokio::time::timeout(POLL_LIMIT, waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.count(), 2);
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    p.release().await.unwrap();
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("2"));
    c.shutdown().await;
}

/// `testTryNAcquire`: a timed wait for 4 permits succeeds after two releases, and a timed
/// wait that sees too few permits returns `None` after its wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_acquire_for_waits_at_most_its_wait() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);
    sem.try_set_permits(2).await.unwrap();

    let start = Instant::now();
    assert!(sem.try_acquire_for(3, ms(300)).await.unwrap().is_none());
    let took = start.elapsed();
    assert!(took >= ms(290) && took < ms(1500), "took {took:?}");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("2"));

    let releaser = {
        let sem = sem.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ms(200)).await;
            sem.release(1).await.unwrap();
            tokio::time::sleep(ms(200)).await;
            sem.release(1).await.unwrap();
        })
    };
    let p = sem
        .try_acquire_for(4, ms(3000))
        .await
        .unwrap()
        .expect("4 permits after 2 releases");
    releaser.await.unwrap();
    assert_eq!(p.count(), 4);
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    drop(p);
    wait_value(&mut raw, &name, "4").await;
    c.shutdown().await;
}

/// Three waiters of one client parked on an empty semaphore; one permit released: exactly one
/// waiter wakes and acquires, and Redis sees exactly one acquire attempt after the release
/// (counted by `INFO commandstats`), not one per waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_one_permit_wakes_exactly_one_waiter() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let releaser = client(&server);
    let c = client_with(&server, Duration::from_secs(30), Duration::from_secs(30));
    let name = unique_name("sem");
    releaser.semaphore(&name).try_set_permits(0).await.unwrap();
    // Loads the release script, so the release below is one EVALSHA.
    releaser
        .semaphore(unique_name("warm"))
        .release(1)
        .await
        .unwrap();

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for i in 0..3 {
        let sem = c.semaphore(&name);
        let tx = tx.clone();
        waiters.push(tokio::spawn(async move {
            let p = sem.acquire(1).await.unwrap();
            tx.send(i).unwrap();
            p.forget();
        }));
    }
    wait_numsub(&mut raw, &Primitive::Semaphore.channel(&name), 1).await;
    // Every waiter has made its attempt after subscribing and sleeps.
    tokio::time::sleep(ms(500)).await;
    let before = command_stats(&mut raw, "evalsha").await.calls;

    releaser.semaphore(&name).release(1).await.unwrap();
    let first = tokio::time::timeout(POLL_LIMIT, rx.recv())
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(ms(500)).await;
    assert!(
        rx.try_recv().is_err(),
        "a second waiter acquired after one release"
    );
    let calls = command_stats(&mut raw, "evalsha").await.calls - before;
    assert_eq!(
        calls, 2,
        "the release and one woken waiter's attempt, not one per waiter"
    );
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));

    // Two more permits wake the other two.
    releaser.semaphore(&name).release(2).await.unwrap();
    let mut woke = vec![first];
    for _ in 0..2 {
        woke.push(
            tokio::time::timeout(POLL_LIMIT, rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    woke.sort_unstable();
    assert_eq!(woke, vec![0, 1, 2]);
    for w in waiters {
        w.await.unwrap();
    }
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    releaser.shutdown().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_released_on_drop_kept_by_forget_and_movable() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);
    sem.try_set_permits(3).await.unwrap();

    let p = sem.acquire(2).await.unwrap();
    // The grant marker: the permits taken, expiring within a minute; gone with the release.
    let m = markers(&mut raw, &name).await;
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0].0, "2");
    assert!((50_000..=60_000).contains(&m[0].1), "{m:?}");
    drop(p);
    wait_value(&mut raw, &name, "3").await;
    assert!(markers(&mut raw, &name).await.is_empty());

    sem.acquire(1).await.unwrap().forget();
    tokio::time::sleep(ms(100)).await;
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("2"));
    // Anyone may release it later.
    c.semaphore(&name).release(1).await.unwrap();
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("3"));

    // Released from another task.
    let p = sem.acquire(3).await.unwrap();
    tokio::spawn(async move { p.release().await.unwrap() })
        .await
        .unwrap();
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("3"));
    c.shutdown().await;
}

/// At most `N` holders at any instant: 6 tasks on 2 clients, 2 permits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_holders_than_permits() {
    const PERMITS: i64 = 2;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let clients = [client(&server), client(&server)];
    let name = unique_name("sem");
    clients[0]
        .semaphore(&name)
        .try_set_permits(PERMITS as i32)
        .await
        .unwrap();
    let inside = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for t in 0..6 {
        let sem = clients[t % 2].semaphore(&name);
        let (inside, most) = (inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..15 {
                let p = sem.acquire(1).await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(ms(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                p.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), PERMITS);
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("2"));
    assert!(
        markers(&mut raw, &name).await.is_empty(),
        "every release deleted its marker"
    );
    for c in clients {
        c.shutdown().await;
    }
}

/// 10,000 acquires with tiny waits, half of them also dropped mid-flight, on a semaphore of 2
/// permits that another task keeps busy: afterwards the count is exactly 2 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_tiny_timeout_acquires_leave_the_count_exact() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);
    sem.try_set_permits(2).await.unwrap();
    let busy = {
        let sem = sem.clone();
        tokio::spawn(async move {
            for _ in 0..200 {
                let p = sem.acquire(1).await.unwrap();
                tokio::time::sleep(ms(1)).await;
                p.release().await.unwrap();
            }
        })
    };
    let mut granted = 0;
    for i in 0..10_000u32 {
        let wait = Duration::from_micros(u64::from(i % 7) * 50);
        if i % 2 == 0 {
            // (A reply slower than the wait plus its 100 ms grace, on a loaded machine, ends
            // the acquire with `Timeout`; the attempt is settled in the background, which the
            // final count checks too.)
            match sem.try_acquire_for(1, wait).await {
                Ok(Some(p)) => {
                    granted += 1;
                    drop(p);
                }
                Ok(None) | Err(Error::Timeout { .. }) => {}
                Err(e) => panic!("acquire {i}: {e:?}"),
            }
        } else if let Ok(Ok(Some(p))) = tokio::time::timeout(
            Duration::from_micros(u64::from(i % 5) * 40),
            sem.try_acquire_for(1, ms(50)),
        )
        .await
        {
            granted += 1;
            p.release().await.unwrap();
        }
    }
    busy.await.unwrap();
    assert!(granted > 0, "no acquire ever succeeded");
    wait_value(&mut raw, &name, "2").await;
    tokio::time::sleep(ms(200)).await;
    assert_eq!(
        value(&mut raw, &name).await.as_deref(),
        Some("2"),
        "count drifted later"
    );
    assert!(
        markers(&mut raw, &name).await.is_empty(),
        "an undo left its marker"
    );
    c.shutdown().await;
}

/// A dropped waiting `acquire` future neither loses a permit nor keeps one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_acquire_neither_loses_nor_keeps_permits() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("sem");
    let sem = c.semaphore(&name);
    sem.try_set_permits(1).await.unwrap();
    let held = sem.acquire(1).await.unwrap();
    // A waiter dropped while parked.
    assert!(tokio::time::timeout(ms(200), sem.acquire(1)).await.is_err());
    held.release().await.unwrap();
    tokio::time::sleep(ms(200)).await;
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("1"));
    wait_numsub(&mut raw, &Primitive::Semaphore.channel(&name), 0).await;
    c.shutdown().await;
}

#[tokio::test]
async fn out_of_range_arguments_are_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let sem = c.semaphore(unique_name("sem"));
    let before = dbsize(&mut raw).await;
    let invalid = |r: Result<_, Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(sem.try_acquire(u32::MAX).await.map(|_| ())));
    assert!(invalid(sem.acquire(1 << 31).await.map(|_| ())));
    assert!(invalid(sem.release(u32::MAX).await));
    assert!(invalid(
        sem.try_set_permits_with_ttl(1, Duration::ZERO)
            .await
            .map(|_| ())
    ));
    assert!(invalid(
        sem.try_set_permits_with_ttl(1, Duration::from_micros(10))
            .await
            .map(|_| ())
    ));
    assert_eq!(dbsize(&mut raw).await, before);
    c.shutdown().await;
}

/// Parked waiters cost Redis one re-check per interval per channel (the re-checker's), not
/// one per waiter: five waiters parked for 1.5 s with a 300 ms re-check make at most about
/// five attempts in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_waiters_recheck_once_per_interval_per_channel() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client_with(&server, Duration::from_secs(30), ms(300));
    let name = unique_name("sem");
    let sem = c.semaphore(&name);
    sem.try_set_permits(0).await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..5 {
        let sem = sem.clone();
        waiters.push(tokio::spawn(async move {
            sem.acquire(1).await.unwrap().forget();
        }));
    }
    wait_numsub(&mut raw, &Primitive::Semaphore.channel(&name), 1).await;
    tokio::time::sleep(ms(500)).await;
    let before = command_stats(&mut raw, "evalsha").await.calls;
    tokio::time::sleep(ms(1_500)).await;
    let attempts = command_stats(&mut raw, "evalsha").await.calls - before;
    assert!(
        (2..=7).contains(&attempts),
        "{attempts} attempts in 1.5 s by 5 parked waiters (re-check 300 ms)"
    );
    sem.release(5).await.unwrap();
    for w in waiters {
        tokio::time::timeout(POLL_LIMIT, w).await.unwrap().unwrap();
    }
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    c.shutdown().await;
}
