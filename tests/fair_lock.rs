//! The fair lock through its API (`Client::fair_lock`), with the exact Redis state after each
//! step: the lock API shared with `Lock`, arrival order, the queue deadlines of Redisson's
//! arithmetic (docs/LAYOUT.md §4.4, scaled down), the non-waiting `try_lock`, and the
//! give-up cleanup of waiters that leave (dropped futures, expired waits, shutdown).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    RedisServer, all_keys, exists, fair_client, field, hash, join, ms, now_ms, pttl, queue,
    queue_key, timeouts_key, unique_name, wait_llen,
};
use futures_util::StreamExt;
use rand::{Rng, SeedableRng};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockGuard, LockOptions, Owner, Ttl};
use tokio::task::JoinHandle;

/// Upper bound of every poll loop here.
const POLL_LIMIT: Duration = Duration::from_secs(5);

/// Queues `head` by hand, as a Java waiter would be queued, with a deadline a minute away.
async fn queue_by_hand(raw: &mut MultiplexedConnection, name: &str, head: &str) {
    let () = raw.rpush(queue_key(name), head).await.unwrap();
    let () = raw
        .zadd(timeouts_key(name), head, now_ms() + 60_000)
        .await
        .unwrap();
}

/// Deletes the queue and the deadlines.
async fn delete_queue(raw: &mut MultiplexedConnection, name: &str) {
    let () = raw
        .del(&[queue_key(name), timeouts_key(name)])
        .await
        .unwrap();
}

/// The deadlines in queue order.
async fn deadlines(raw: &mut MultiplexedConnection, name: &str) -> Vec<i64> {
    let mut v = Vec::new();
    for f in queue(raw, name).await {
        let s: f64 = raw.zscore(timeouts_key(name), &f).await.unwrap();
        v.push(s as i64);
    }
    v
}

/// Asserts that neither the queue nor the deadline set exists.
async fn assert_no_queue(raw: &mut MultiplexedConnection, name: &str) {
    assert!(
        !exists(raw, &queue_key(name)).await,
        "queue left: {:?}",
        queue(raw, name).await
    );
    assert!(!exists(raw, &timeouts_key(name)).await, "deadlines left");
}

/// Polls until the queue is exactly `want`; panics after 5 s.
async fn wait_queue(raw: &mut MultiplexedConnection, name: &str, want: &[String]) {
    let start = Instant::now();
    loop {
        let q = queue(raw, name).await;
        if q == want {
            return;
        }
        assert!(
            start.elapsed() < POLL_LIMIT,
            "queue stayed {q:?}, expected {want:?}"
        );
        tokio::time::sleep(ms(5)).await;
    }
}

/// A task waiting in `lock()` (watchdog lease) that hands back its guard.
fn spawn_lock(client: &Client, name: &str) -> JoinHandle<LockGuard> {
    let lock = client.fair_lock(name);
    tokio::spawn(async move { lock.lock().await.unwrap() })
}

#[tokio::test]
async fn lock_api_writes_the_same_hash_as_redisson_and_queues_nothing_uncontended() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = common::client(&server);
    let name = unique_name("fair");
    let lock = client.fair_lock(&name);
    assert_eq!(lock.name(), name);
    assert!(format!("{lock:?}").starts_with("FairLock"), "{lock:?}");

    let g1 = lock.lock().await.unwrap();
    let owner = g1.owner();
    let f = field(&client, owner);
    assert_eq!(hash(&mut raw, &name).await, vec![(f.clone(), "1".into())]);
    assert!((29_000..=30_000).contains(&pttl(&mut raw, &name).await));
    assert_no_queue(&mut raw, &name).await;

    // Re-entry by the same owner, with lock(), try_lock() and a lease: never queued.
    let g2 = lock.try_lock().await.unwrap().expect("re-entry");
    let g3 = lock
        .lock_with_options(&LockOptions::new().lease(ms(5_000)))
        .await
        .unwrap();
    assert_eq!(g3.lease(), Some(ms(5_000)));
    assert!((4_000..=5_000).contains(&pttl(&mut raw, &name).await));
    assert_eq!(lock.hold_count(owner).await.unwrap(), 3);
    assert!(lock.is_held_by(owner).await.unwrap());
    assert!(!lock.is_held_by(Owner::new(owner.id() + 1)).await.unwrap());
    assert!(lock.is_locked().await.unwrap());
    assert!(matches!(lock.remaining_ttl().await.unwrap(), Ttl::Remaining(d) if d <= ms(5_000)));
    assert_no_queue(&mut raw, &name).await;

    // Another owner cannot take it without waiting.
    let other = LockOptions::new().owner(Owner::new(owner.id() + 1));
    assert!(
        lock.try_lock_with_options(Duration::ZERO, &other)
            .await
            .unwrap()
            .is_none()
    );

    g3.unlock().await.unwrap();
    g2.unlock().await.unwrap();
    assert_eq!(hash(&mut raw, &name).await, vec![(f, "1".into())]);
    g1.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count(owner).await.unwrap(), 0);
    assert_eq!(lock.remaining_ttl().await.unwrap(), Ttl::Absent);
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());
    client.shutdown().await;
}

/// N waiters from two clients, each confirmed queued (LLEN) before the next arrives, are
/// granted in exactly that order; every handoff is a wake-up message (re-checks every 10 s
/// could not finish the chain in time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_granted_in_arrival_order() {
    const N: usize = 8;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let clients = [
        fair_client(&server, ms(300_000), ms(10_000)),
        fair_client(&server, ms(300_000), ms(10_000)),
    ];
    let name = unique_name("fair-fifo");
    let holder = clients[0].fair_lock(&name).lock().await.unwrap();

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..N {
        let lock = clients[i % 2].fair_lock(&name);
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(ms(5)).await;
            guard.unlock().await.unwrap();
        }));
        wait_llen(&mut raw, &name, i + 1).await;
    }
    let q = queue(&mut raw, &name).await;
    assert_eq!(q.len(), N);
    assert_eq!(q.iter().collect::<std::collections::HashSet<_>>().len(), N);

    let start = Instant::now();
    holder.unlock().await.unwrap();
    for t in tasks {
        join(t).await;
    }
    println!("{N} handoffs in {:?}", start.elapsed());
    assert_eq!(*order.lock().unwrap(), (0..N).collect::<Vec<_>>());
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());
    for c in clients {
        c.shutdown().await;
    }
}

/// docs/LAYOUT.md §4.4's worked example at a tenth of the scale (lease 3 s, slot 500 ms): the
/// deadlines of B, C, D, E are spaced by exactly one slot, B's is the lock's expiry plus a slot;
/// when C's wait ends, D and E move up one slot; when B takes the lock, again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_follow_redissons_arithmetic() {
    const SLOT: i64 = 500;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = common::client(&server);
    let w = fair_client(&server, ms(SLOT as u64), ms(10_000));
    let name = unique_name("fair-arith");

    let ga = a
        .fair_lock(&name)
        .lock_with_options(&LockOptions::new().lease(ms(3_000)))
        .await
        .unwrap();
    let b = spawn_lock(&w, &name);
    wait_llen(&mut raw, &name, 1).await;
    let c_lock = w.fair_lock(&name);
    let c = tokio::spawn(async move { c_lock.try_lock_for(ms(SLOT as u64)).await.unwrap() });
    wait_llen(&mut raw, &name, 2).await;
    let d = spawn_lock(&w, &name);
    wait_llen(&mut raw, &name, 3).await;
    let e = spawn_lock(&w, &name);
    wait_llen(&mut raw, &name, 4).await;
    assert!(!c.is_finished(), "C's 500 ms wait ended before E queued");

    let q = queue(&mut raw, &name).await;
    let d0 = deadlines(&mut raw, &name).await;
    println!(
        "deadlines relative to B's: {:?}",
        d0.iter().map(|s| s - d0[0]).collect::<Vec<_>>()
    );
    assert_eq!(
        d0.windows(2).map(|p| p[1] - p[0]).collect::<Vec<_>>(),
        [SLOT, SLOT, SLOT],
        "one slot per waiter ahead"
    );
    let expiry = now_ms() + pttl(&mut raw, &name).await;
    // (Within 100 ms: the script computes B's deadline from the time B's client passed it, as
    // Redisson's does, so the request's latency on a loaded machine shifts it; 66 ms was seen
    // on a CI run of 2 cores at load 10.)
    assert!(
        (d0[0] - (expiry + SLOT)).abs() <= 100,
        "B's deadline {} vs the lock's expiry {expiry} + slot",
        d0[0]
    );

    // C's wait ends: it leaves, and D and E move up one slot.
    assert!(join(c).await.is_none());
    let q1 = vec![q[0].clone(), q[2].clone(), q[3].clone()];
    assert_eq!(queue(&mut raw, &name).await, q1, "C left at once");
    assert_eq!(
        deadlines(&mut raw, &name).await,
        [d0[0], d0[2] - SLOT, d0[3] - SLOT]
    );

    // A unlocks: B (the head) takes it, and the later deadlines move up one more slot.
    ga.unlock().await.unwrap();
    let gb = join(b).await;
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(q[0].clone(), "1".into())]
    );
    assert_eq!(queue(&mut raw, &name).await, q1[1..]);
    assert_eq!(
        deadlines(&mut raw, &name).await,
        [d0[2] - 2 * SLOT, d0[3] - 2 * SLOT]
    );

    gb.unlock().await.unwrap();
    let gd = join(d).await;
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(q[2].clone(), "1".into())]
    );
    assert_eq!(deadlines(&mut raw, &name).await, [d0[3] - 3 * SLOT]);
    gd.unlock().await.unwrap();
    join(e).await.unlock().await.unwrap();
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());
    a.shutdown().await;
    w.shutdown().await;
}

/// `try_lock()` (Redisson's `tryLock()`) never joins the queue: not while the lock is held,
/// not while it is free but another waiter's turn, and it leaves a queue as it found it.
#[tokio::test]
async fn try_lock_never_enqueues() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = common::client(&server);
    let name = unique_name("fair-try");
    let lock = client.fair_lock(&name);
    let (o1, o2, o3) = (Owner::new(1), Owner::new(2), Owner::new(3));
    let as_owner = |o| LockOptions::new().owner(o);

    let g1 = lock
        .try_lock_with_options(Duration::ZERO, &as_owner(o1))
        .await
        .unwrap()
        .expect("free");
    for _ in 0..3 {
        assert!(
            lock.try_lock_with_options(Duration::ZERO, &as_owner(o2))
                .await
                .unwrap()
                .is_none()
        );
    }
    assert_no_queue(&mut raw, &name).await;

    // A queued waiter: try_lock by a third owner fails and leaves its entry as it was.
    let lock2 = lock.clone();
    let waiter = tokio::spawn(async move { lock2.lock_with_options(&as_owner(o2)).await.unwrap() });
    wait_llen(&mut raw, &name, 1).await;
    let before = (
        queue(&mut raw, &name).await,
        deadlines(&mut raw, &name).await,
    );
    assert!(
        lock.try_lock_with_options(Duration::ZERO, &as_owner(o3))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        (
            queue(&mut raw, &name).await,
            deadlines(&mut raw, &name).await
        ),
        before
    );
    g1.unlock().await.unwrap();
    let g2 = join(waiter).await;
    assert_no_queue(&mut raw, &name).await;
    g2.unlock().await.unwrap();

    // Free, but a (hand-made, Java-like) waiter is the head with a live deadline: not our
    // turn, and still not queued.
    let head = "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab:1";
    queue_by_hand(&mut raw, &name, head).await;
    assert!(
        lock.try_lock_with_options(Duration::ZERO, &as_owner(o3))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(queue(&mut raw, &name).await, [head]);
    assert!(!exists(&mut raw, &name).await);
    delete_queue(&mut raw, &name).await;

    // A holder's explicit lease runs out: any caller then acquires (Redisson's
    // testLockAcquiredBooleanTimeoutDrift).
    let g = lock
        .try_lock_with_options(Duration::ZERO, &as_owner(o1).lease(ms(300)))
        .await
        .unwrap()
        .unwrap();
    assert!(
        lock.try_lock_with_options(Duration::ZERO, &as_owner(o3))
            .await
            .unwrap()
            .is_none()
    );
    tokio::time::sleep(ms(400)).await;
    let g3 = lock
        .try_lock_with_options(Duration::ZERO, &as_owner(o3))
        .await
        .unwrap()
        .expect("the lease ran out");
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
    g3.unlock().await.unwrap();
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());
    client.shutdown().await;
}

/// Waiters that leave without the lock leave no entry behind, and the waiters after them move
/// up one slot: a dropped `lock()` future, an expired `try_lock_for`, a client shut down while
/// its waiter waits (checked as soon as `shutdown()` returns).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_that_give_up_leave_the_queue() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let slot = 300_000;
    let client = fair_client(&server, ms(slot), ms(1_000));
    let name = unique_name("fair-giveup");
    let holder = client.fair_lock(&name).lock().await.unwrap();

    // A dropped future: B waits, C queues behind it; B's task is aborted.
    let b = spawn_lock(&client, &name);
    wait_llen(&mut raw, &name, 1).await;
    let c = spawn_lock(&client, &name);
    wait_llen(&mut raw, &name, 2).await;
    let q = queue(&mut raw, &name).await;
    let d0 = deadlines(&mut raw, &name).await;
    b.abort();
    assert!(b.await.unwrap_err().is_cancelled());
    wait_queue(&mut raw, &name, &q[1..]).await;
    assert_eq!(deadlines(&mut raw, &name).await, [d0[1] - slot as i64]);

    // An expired wait: gone by the time try_lock_for returns; C moves up by D's slot.
    let start = Instant::now();
    let d = client.fair_lock(&name);
    let d = tokio::spawn(async move { d.try_lock_for(ms(400)).await.unwrap() });
    wait_llen(&mut raw, &name, 2).await;
    assert!(join(d).await.is_none());
    assert!(start.elapsed() >= ms(400));
    assert_eq!(queue(&mut raw, &name).await, q[1..]);
    assert_eq!(deadlines(&mut raw, &name).await, [d0[1] - slot as i64]);

    // A shutdown: the waiter fails with Shutdown, and its entry is gone when shutdown()
    // returns.
    let other = fair_client(&server, ms(slot), ms(1_000));
    let lock = other.fair_lock(&name);
    let e = tokio::spawn(async move { lock.lock().await });
    wait_llen(&mut raw, &name, 2).await;
    other.shutdown().await;
    assert_eq!(queue(&mut raw, &name).await, q[1..]);
    assert_eq!(deadlines(&mut raw, &name).await, [d0[1] - slot as i64]);
    assert!(matches!(join(e).await, Err(Error::Shutdown)));

    // C is still served.
    holder.unlock().await.unwrap();
    join(c).await.unlock().await.unwrap();
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());
    client.shutdown().await;
}

/// Futures dropped at random moments (tiny timeouts, including while an acquire script is in
/// flight), with a holder coming and going: afterwards no hold, no queue entry, no deadline,
/// and a fresh waiter is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waiters_never_leave_entries_behind() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = fair_client(&server, ms(300_000), ms(200));
    let name = unique_name("fair-cancel");
    let mut tasks = Vec::new();
    for t in 0..4u64 {
        let lock = client.fair_lock(&name);
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(t);
            for _ in 0..40 {
                let limit = ms(rng.gen_range(0..15));
                if let Ok(guard) = tokio::time::timeout(limit, lock.lock()).await {
                    let guard = guard.unwrap();
                    tokio::time::sleep(ms(rng.gen_range(0..3))).await;
                    drop(guard);
                }
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .unwrap()
            .unwrap();
    }
    // Background releases and cleanups settle, then nothing is left.
    let start = Instant::now();
    while !all_keys(&mut raw).await.is_empty() {
        assert!(
            start.elapsed() < POLL_LIMIT,
            "left behind: {:?} queue {:?}",
            all_keys(&mut raw).await,
            queue(&mut raw, &name).await
        );
        tokio::time::sleep(ms(10)).await;
    }
    let start = Instant::now();
    let g = client.fair_lock(&name).lock().await.unwrap();
    assert!(start.elapsed() < ms(500));
    g.unlock().await.unwrap();
    client.shutdown().await;
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());
}

/// Unlocking a fair lock that is gone is `NotHeld` (Redisson reports success), and, as in
/// Redisson, it still wakes the queue's head; a force-unlocked hold is `NotHeld` too.
#[tokio::test]
async fn unlock_of_a_lost_hold_is_not_held_and_wakes_the_head() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = common::client(&server);
    let name = unique_name("fair-lost");
    let lock = client.fair_lock(&name);
    let head = "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab:1";
    let head_channel = format!("redisson_lock__channel:{{{name}}}:{head}");
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(&head_channel).await.unwrap();
    let mut messages = pubsub.into_on_message();

    let g = lock
        .lock_with_options(&LockOptions::new().lease(ms(200)))
        .await
        .unwrap();
    queue_by_hand(&mut raw, &name, head).await;
    tokio::time::sleep(ms(300)).await;
    match g.unlock().await {
        Err(Error::NotHeld { name: n, holder }) => {
            assert_eq!(n, name);
            assert_eq!(holder, field(&client, Owner::current()));
        }
        other => panic!("expected NotHeld, got {other:?}"),
    }
    let msg = tokio::time::timeout(ms(2_000), messages.next())
        .await
        .expect("the head was woken")
        .unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    assert_eq!(
        queue(&mut raw, &name).await,
        [head],
        "the queue is left as it was"
    );
    delete_queue(&mut raw, &name).await;

    // Force-unlocked under an explicit lease (no watchdog to notice): NotHeld.
    let g = lock
        .lock_with_options(&LockOptions::new().lease(ms(30_000)))
        .await
        .unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert!(!lock.force_unlock().await.unwrap());
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
    assert_eq!(all_keys(&mut raw).await, Vec::<String>::new());
    client.shutdown().await;
}
