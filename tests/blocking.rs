//! The blocking API (`redisson_sync::blocking`) from plain `std::thread`s: the lock (its exact
//! Redis effects: the hash field is `<client id>:<thread owner id>`), reentrancy per thread,
//! the fair lock's arrival order, the semaphores, the latch, mutual exclusion with async tasks
//! on the same lock (a counter incremented under it, checked exact), guards released on drop,
//! shutdown and the last handle's drop completing scheduled releases, every kind reachable,
//! and a call from inside async code refused. Every server is a throwaway `redis-server` on a
//! free port; every wait is bounded.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redisson_sync::{Error, LockOptions, Owner, Ttl, WithLockOptions, blocking};

use common::{RedisServer, ms, unique_name};

/// A blocking client of `server` with a 30 s watchdog timeout.
fn client(server: &RedisServer) -> blocking::Client {
    blocking::Client::builder()
        .url(server.url())
        .build()
        .unwrap()
}

/// A plain sync connection for assertions.
fn raw(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn exists(conn: &mut redis::Connection, key: &str) -> bool {
    conn.exists(key).unwrap()
}

/// Polls `cond` every 5 ms for at most `limit`; `true` when it held.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        thread::sleep(ms(5));
    }
    cond()
}

const THREAD_OWNER_BASE: u64 = 1 << 62;

#[test]
fn a_thread_locks_with_its_own_owner_in_the_hash_field() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("blocking:field");
    let lock = client.lock(&name);
    let id = client.id().to_owned();
    let mut conn = raw(&server);
    let (field, owner) = thread::scope(|s| {
        s.spawn(|| {
            let guard = lock.lock().unwrap();
            let owner = Owner::current();
            assert!(owner.id() >= THREAD_OWNER_BASE, "a thread owner: {owner}");
            assert_eq!(guard.owner(), owner);
            let field = format!("{id}:{}", owner.id());
            assert_eq!(guard.holder(), field);
            let hash: Vec<(String, u64)> = conn.hgetall(&name).unwrap();
            assert_eq!(hash, vec![(field.clone(), 1)]);
            let pttl: i64 = conn.pttl(&name).unwrap();
            assert!((29_000..=30_000).contains(&pttl), "PTTL {pttl}");
            assert!(lock.is_held_by(owner).unwrap());
            assert_eq!(lock.hold_count(owner).unwrap(), 1);
            guard.unlock().unwrap();
            (field, owner)
        })
        .join()
        .unwrap()
    });
    assert!(!exists(&mut conn, &name));
    assert!(!lock.is_held_by(owner).unwrap());
    assert!(field.starts_with(client.id()));
    client.shutdown().unwrap();
}

#[test]
fn two_threads_exclude_each_other_and_one_thread_reenters() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("blocking:reentry");
    let lock = client.lock(&name);
    let mut conn = raw(&server);
    let (held_tx, held_rx) = mpsc::channel::<String>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let holder = {
        let lock = lock.clone();
        thread::spawn(move || {
            let outer = lock.lock().unwrap();
            let inner = lock.lock().unwrap(); // the same thread re-enters
            assert_eq!(lock.hold_count(Owner::current()).unwrap(), 2);
            held_tx.send(outer.holder().to_owned()).unwrap();
            go_rx.recv_timeout(Duration::from_secs(10)).unwrap();
            inner.unlock().unwrap();
            assert_eq!(lock.hold_count(Owner::current()).unwrap(), 1);
            outer.unlock().unwrap();
        })
    };
    let field = held_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let count: u64 = conn.hget(&name, &field).unwrap();
    assert_eq!(count, 2, "two holds of one thread in one field");
    // This thread is another owner: excluded.
    assert!(lock.is_locked().unwrap());
    assert!(!lock.is_held_by(Owner::current()).unwrap());
    assert!(lock.try_lock().unwrap().is_none());
    assert!(lock.try_lock_for(ms(100)).unwrap().is_none());
    go_tx.send(()).unwrap();
    holder.join().unwrap();
    assert!(!exists(&mut conn, &name));
    let mine = lock
        .try_lock()
        .unwrap()
        .expect("free once the holder released it");
    assert_ne!(mine.holder(), field);
    mine.unlock().unwrap();
    client.shutdown().unwrap();
}

#[test]
fn an_explicit_owner_is_kept() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("blocking:owner");
    let lock = client.lock(&name);
    let opts = LockOptions::new().owner(Owner::new(7));
    let guard = lock.lock_with_options(&opts).unwrap();
    assert_eq!(guard.holder(), format!("{}:7", client.id()));
    // Another thread with the same explicit owner re-enters.
    let again = thread::scope(|s| {
        s.spawn(|| lock.try_lock_with_options(Duration::ZERO, &opts).unwrap())
            .join()
            .unwrap()
    })
    .expect("the same owner re-enters from another thread");
    assert_eq!(lock.hold_count(Owner::new(7)).unwrap(), 2);
    again.unlock().unwrap();
    guard.unlock().unwrap();
    client.shutdown().unwrap();
}

#[test]
fn the_fair_lock_serves_threads_in_arrival_order() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("blocking:fair");
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let fair = client.fair_lock(&name);
    let mut conn = raw(&server);
    let head = fair.lock().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut fields = Vec::new();
    let mut waiters = Vec::new();
    for i in 0..3 {
        let (tx, rx) = mpsc::channel();
        let fair = fair.clone();
        let order = order.clone();
        let id = client.id().to_owned();
        waiters.push(thread::spawn(move || {
            tx.send(format!("{id}:{}", Owner::current().id())).unwrap();
            let guard = fair
                .try_lock_for(Duration::from_secs(30))
                .unwrap()
                .expect("served within 30 s");
            order.lock().unwrap().push(i);
            guard.unlock().unwrap();
        }));
        fields.push(rx.recv_timeout(Duration::from_secs(10)).unwrap());
        // The next waiter starts once this one is in the queue.
        assert!(
            eventually(Duration::from_secs(10), || {
                conn.llen::<_, usize>(&queue).unwrap() == i + 1
            }),
            "waiter {i} never queued"
        );
    }
    let queued: Vec<String> = conn.lrange(&queue, 0, -1).unwrap();
    assert_eq!(
        queued, fields,
        "the queue holds the threads' fields in arrival order"
    );
    head.unlock().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    assert!(!exists(&mut conn, &name));
    assert!(!exists(&mut conn, &queue));
    client.shutdown().unwrap();
}

#[test]
fn the_semaphore_never_lets_more_threads_in_than_its_permits() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("blocking:sem");
    let sem = client.semaphore(&name);
    let mut conn = raw(&server);
    assert!(sem.try_set_permits(2).unwrap());
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (sem, inside, most, done) =
                (sem.clone(), inside.clone(), most.clone(), done.clone());
            thread::spawn(move || {
                for _ in 0..5 {
                    let permits = sem
                        .try_acquire_for(1, Duration::from_secs(30))
                        .unwrap()
                        .expect("a permit within 30 s");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    thread::sleep(ms(2));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                    permits.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 30);
    assert!(most.load(Ordering::SeqCst) <= 2, "at most 2 inside");
    let left: String = conn.get(&name).unwrap();
    assert_eq!(left, "2");
    // The other methods.
    let two = sem.try_acquire(2).unwrap().expect("both free");
    assert_eq!(two.count(), 2);
    assert!(sem.try_acquire_for(1, ms(50)).unwrap().is_none());
    drop(two); // released in the background
    assert!(eventually(Duration::from_secs(5), || sem
        .available_permits()
        .unwrap()
        == 2));
    assert_eq!(sem.add_permits(1).unwrap(), 3);
    assert_eq!(sem.drain_permits().unwrap(), 3);
    sem.release(1).unwrap();
    assert!(sem.release_if_exists(1).unwrap());
    assert_eq!(sem.available_permits().unwrap(), 2);
    client.shutdown().unwrap();
}

#[test]
fn the_permit_expirable_semaphore_and_its_renewing_guard() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("blocking:psem");
    let sem = client.permit_expirable_semaphore(&name);
    assert!(sem.try_set_permits(3).unwrap());
    let ids = sem.acquire(2, Some(Duration::from_secs(60))).unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(sem.acquired_permits().unwrap(), 2);
    assert_eq!(sem.total_permits().unwrap(), 3);
    assert!(sem.update_lease_time(&ids[0], None).unwrap());
    assert_eq!(sem.lease_time(&ids[0]).unwrap(), None);
    assert!(sem.try_release(&ids[0]).unwrap());
    assert_eq!(sem.try_release_many(&ids).unwrap(), 0, "all or nothing");
    assert_eq!(sem.try_release_many(&ids[1..]).unwrap(), 1);
    let guard = thread::scope(|s| {
        s.spawn(|| sem.acquire_renewing(3, Duration::from_secs(3)).unwrap())
            .join()
            .unwrap()
    });
    assert_eq!(guard.ids().len(), 3);
    assert!(!guard.is_lost());
    assert!(!guard.lost_timeout(ms(20)).unwrap());
    assert!(sem.try_acquire(1, None).unwrap().is_none());
    guard.release().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 3);
    assert!(sem.try_acquire_for(1, ms(100), None).unwrap().is_some());
    client.shutdown().unwrap();
}

#[test]
fn the_latch_opens_for_waiting_threads() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("blocking:latch");
    let latch = client.count_down_latch(&name);
    let mut conn = raw(&server);
    assert!(latch.try_set_count(3).unwrap());
    assert!(!latch.try_set_count(5).unwrap());
    assert_eq!(latch.count().unwrap(), 3);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let latch = latch.clone();
            thread::spawn(move || latch.await_for(Duration::from_secs(10)).unwrap())
        })
        .collect();
    assert!(!latch.await_for(ms(50)).unwrap(), "still closed");
    let counters: Vec<_> = (0..3)
        .map(|_| {
            let latch = latch.clone();
            thread::spawn(move || latch.count_down().unwrap())
        })
        .collect();
    for c in counters {
        c.join().unwrap();
    }
    for w in waiters {
        assert!(w.join().unwrap(), "every waiter saw the latch open");
    }
    latch.await_open().unwrap();
    assert_eq!(latch.count().unwrap(), 0);
    assert!(!exists(&mut conn, &name));
    client.shutdown().unwrap();
}

/// A counter incremented under one lock by threads of a blocking client and by tasks of an
/// async client, as a read, a pause and a write: any overlap would lose an increment.
#[test]
fn threads_and_async_tasks_exclude_each_other_on_one_lock() {
    const THREADS: u64 = 3;
    const TASKS: u64 = 3;
    const ROUNDS: u64 = 20;
    let server = RedisServer::start();
    let sync_client = client(&server);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let async_client = redisson_sync::Client::builder()
        .url(server.url())
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    let name = unique_name("blocking:mutex");
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(THREADS as usize + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let lock = sync_client.lock(&name);
            let (counter, inside, overlaps, start) = (
                counter.clone(),
                inside.clone(),
                overlaps.clone(),
                start.clone(),
            );
            thread::spawn(move || {
                start.wait();
                for _ in 0..ROUNDS {
                    let guard = lock
                        .try_lock_for(Duration::from_secs(60))
                        .unwrap()
                        .expect("the lock within 60 s");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    let v = counter.load(Ordering::SeqCst);
                    thread::sleep(ms(1));
                    counter.store(v + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().unwrap();
                }
            })
        })
        .collect();
    start.wait();
    rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let lock = async_client.lock(&name);
                let (counter, inside, overlaps) =
                    (counter.clone(), inside.clone(), overlaps.clone());
                tokio::spawn(async move {
                    for _ in 0..ROUNDS {
                        let guard = lock
                            .try_lock_for(Duration::from_secs(60))
                            .await
                            .unwrap()
                            .expect("the lock within 60 s");
                        if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        let v = counter.load(Ordering::SeqCst);
                        tokio::time::sleep(ms(1)).await;
                        counter.store(v + 1, Ordering::SeqCst);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        guard.unlock().await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .expect("the tasks finish")
                .unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(counter.load(Ordering::SeqCst), (THREADS + TASKS) * ROUNDS);
    rt.block_on(async_client.shutdown());
    sync_client.shutdown().unwrap();
}

#[test]
fn a_guard_dropped_on_a_plain_thread_releases_the_lock() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("blocking:drop");
    let lock = client.lock(&name);
    thread::scope(|s| {
        s.spawn(|| {
            let guard = lock.lock().unwrap();
            drop(guard); // schedules the release, returns at once
        })
        .join()
        .unwrap();
    });
    let started = Instant::now();
    let mine = lock
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("the dropped guard's release freed the lock");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "released at the drop, not by expiry"
    );
    mine.unlock().unwrap();

    // A section that panics: the guard dropped while unwinding releases the lock.
    let panicked = thread::scope(|s| {
        s.spawn(|| lock.with_lock(|| -> Result<(), Error> { panic!("section failed") }))
            .join()
    });
    assert!(panicked.is_err());
    let mine = lock
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("the panicked section's lock was released");
    mine.unlock().unwrap();
    client.shutdown().unwrap();
}

#[test]
fn sections_return_their_value_and_their_error() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = raw(&server);
    let name = unique_name("blocking:section");
    let lock = client.lock(&name);
    let held = lock
        .with_lock(|| lock.is_held_by(Owner::current()))
        .unwrap();
    assert!(held, "the section runs on the calling thread, its owner");
    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    let failed: Result<(), BoxError> = lock.with_lock(|| Err("no".into()));
    assert_eq!(failed.unwrap_err().to_string(), "no");
    assert!(!exists(&mut conn, &name), "released after the error");
    let opts = WithLockOptions::new().lease(Duration::from_secs(5));
    let got = lock
        .try_with_lock(ms(100), &opts, || {
            let ttl: i64 = conn.pttl(&name).unwrap();
            Ok::<_, Error>(ttl)
        })
        .unwrap()
        .unwrap();
    assert!((4_000..=5_000).contains(&got), "explicit lease: PTTL {got}");
    // stop_on_lost: a section that outlives its lease returns LeaseLost.
    let opts = WithLockOptions::new().lease(ms(100)).stop_on_lost(true);
    let lost = lock.with_lock_options(&opts, || {
        thread::sleep(ms(300));
        Ok::<_, Error>(())
    });
    assert!(matches!(lost, Err(Error::LeaseLost { .. })), "{lost:?}");
    client.shutdown().unwrap();
}

#[test]
fn shutdown_completes_the_releases_of_dropped_guards() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = raw(&server);
    let names: Vec<String> = (0..5).map(|_| unique_name("blocking:shutdown")).collect();
    let sem_name = unique_name("blocking:shutdown:sem");
    let sem = client.semaphore(&sem_name);
    assert!(sem.try_set_permits(1).unwrap());
    let psem_name = unique_name("blocking:shutdown:psem");
    let psem = client.permit_expirable_semaphore(&psem_name);
    assert!(psem.try_set_permits(1).unwrap());
    thread::scope(|s| {
        for name in &names {
            let lock = client.lock(name);
            s.spawn(move || drop(lock.lock().unwrap()));
        }
        s.spawn(|| drop(sem.acquire(1).unwrap()));
        s.spawn(|| drop(psem.acquire_renewing(1, Duration::from_secs(30)).unwrap()));
    });
    client.shutdown().unwrap();
    for name in &names {
        assert!(
            !exists(&mut conn, name),
            "{name} released by the time shutdown returned"
        );
    }
    let permits: String = conn.get(&sem_name).unwrap();
    assert_eq!(permits, "1", "the dropped permit was given back");
    let available: String = conn.get(&psem_name).unwrap();
    let acquired: usize = conn.zcard(format!("{{{psem_name}}}:timeout")).unwrap();
    assert_eq!(
        (available.as_str(), acquired),
        ("1", 0),
        "the dropped renewing permit was given back"
    );
    assert!(client.is_shut_down());
    assert!(matches!(
        client.lock(&names[0]).lock(),
        Err(Error::Shutdown)
    ));
    assert!(matches!(sem.available_permits(), Err(Error::Shutdown)));
}

#[test]
fn dropping_the_last_handle_completes_the_releases() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    let name = unique_name("blocking:last");
    {
        let client = client(&server);
        let lock = client.lock(&name);
        let guard = lock.lock().unwrap();
        assert!(exists(&mut conn, &name));
        drop(client); // the lock and the guard keep the runtime
        drop(guard);
        drop(lock); // the last handle: shuts down, which completes the release
    }
    assert!(!exists(&mut conn, &name));
}

#[test]
fn a_call_from_async_code_is_refused() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = raw(&server);
    let name = unique_name("blocking:refused");
    let lock = client.lock(&name);
    let sem = client.semaphore(&name);
    let guard = client
        .lock(unique_name("blocking:refused:held"))
        .lock()
        .unwrap();
    let held = guard.name().to_owned();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // In a block_on body...
        match lock.lock() {
            Err(Error::InAsyncContext { operation }) => assert_eq!(operation, "lock"),
            other => panic!("not refused: {other:?}"),
        }
        assert!(matches!(lock.try_lock(), Err(Error::InAsyncContext { .. })));
        assert!(matches!(
            sem.try_set_permits(1),
            Err(Error::InAsyncContext { .. })
        ));
        assert!(matches!(
            client.shutdown(),
            Err(Error::InAsyncContext { .. })
        ));
        assert!(matches!(
            blocking::Client::builder().url(server.url()).connect(),
            Err(Error::InAsyncContext { .. })
        ));
        // ... and in a task.
        let in_task = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.is_locked() }).await.unwrap()
        };
        assert!(matches!(in_task, Err(Error::InAsyncContext { .. })));
        // A client built and dropped here does not panic.
        drop(blocking::Client::open(server.url()).unwrap());
        // Unlock refused: the guard is dropped, its release scheduled.
        let err = guard.unlock().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("unlock") && text.contains("async"), "{text}");
        // spawn_blocking: refused, unless allowed.
        let lock2 = lock.clone();
        let refused = tokio::task::spawn_blocking(move || lock2.try_lock().map(|g| g.is_some()))
            .await
            .unwrap();
        assert!(matches!(refused, Err(Error::InAsyncContext { .. })));
        let lock2 = lock.clone();
        tokio::task::spawn_blocking(move || {
            blocking::allow_in_runtime(|| {
                let g = lock2.lock().unwrap();
                g.unlock().unwrap();
            });
        })
        .await
        .unwrap();
    });
    // A worker of a multi-thread runtime too.
    let mt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let in_worker = mt.block_on(async move {
        tokio::spawn(async move { lock.try_lock_for(ms(10)).map(|g| g.is_some()) })
            .await
            .unwrap()
    });
    assert!(matches!(in_worker, Err(Error::InAsyncContext { .. })));
    drop(mt);
    assert!(!client.is_shut_down(), "the refused shutdown did nothing");
    assert!(
        !exists(&mut conn, &name),
        "nothing was written by refused calls"
    );
    assert!(
        eventually(Duration::from_secs(5), || !exists(&mut conn, &held)),
        "the guard whose unlock was refused was released on drop"
    );
    client.shutdown().unwrap();
}

#[test]
fn every_lock_kind_is_reachable() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = raw(&server);
    let id = client.id().to_owned();

    // Read-write: two readers on two threads, a writer excluded.
    let rw = client.rw_lock(unique_name("blocking:rw"));
    let read = rw.read_lock().lock().unwrap();
    let other_read = thread::scope(|s| {
        s.spawn(|| {
            let g = rw.read_lock().try_lock().unwrap().expect("readers share");
            g.unlock().unwrap();
            let writer = rw.write_lock().try_lock().unwrap();
            assert!(writer.is_none(), "a writer waits for the reader");
        })
        .join()
    });
    other_read.unwrap();
    assert_eq!(rw.read_lock().hold_count(Owner::current()).unwrap(), 1);
    read.unlock().unwrap();
    let write = rw.write_lock().lock().unwrap();
    assert!(write.holder().ends_with(":write"));
    write.unlock().unwrap();

    // Fenced: tokens go up.
    let fenced = client.fenced_lock(unique_name("blocking:fenced"));
    let (g1, t1) = fenced.lock_and_get_token().unwrap();
    g1.unlock().unwrap();
    let (g2, t2) = fenced.try_lock_and_get_token().unwrap().unwrap();
    assert!(t2 > t1);
    assert_eq!(fenced.token().unwrap(), t2);
    assert_eq!(g2.token(), Some(t2));
    g2.unlock().unwrap();

    // Spin, non-reentrant, non-reentrant fair, token.
    let spin = client.spin_lock(unique_name("blocking:spin"));
    let g = spin.lock_with_lease(Duration::from_secs(5)).unwrap();
    assert_eq!(g.lease(), Some(Duration::from_secs(5)));
    g.unlock().unwrap();
    let nr = client.non_reentrant_lock(unique_name("blocking:nr"));
    let g = nr.lock().unwrap();
    assert!(matches!(nr.try_lock(), Err(Error::NotReentrant { .. })));
    g.unlock().unwrap();
    let nrf = client.non_reentrant_fair_lock(unique_name("blocking:nrf"));
    let g = nrf.try_lock_for(ms(500)).unwrap().unwrap();
    assert!(matches!(nrf.lock(), Err(Error::NotReentrant { .. })));
    g.unlock().unwrap();
    let token = client.token_lock(unique_name("blocking:token"));
    let g = token.lock().unwrap();
    let value: String = conn.get(token.name()).unwrap();
    assert_eq!(value, g.holder());
    g.unlock().unwrap();

    // MultiLock of blocking and of async locks; a lock of any kind.
    let a = client.lock(unique_name("blocking:multi:a"));
    let b = client.fair_lock(unique_name("blocking:multi:b"));
    let multi = client
        .multi_lock([a.clone().boxed(), b.clone().boxed()])
        .unwrap();
    let g = multi.lock().unwrap();
    assert_eq!(g.parts().len(), 2);
    assert!(a.is_locked().unwrap() && b.is_locked().unwrap());
    g.unlock().unwrap();
    assert!(!a.is_locked().unwrap());
    let from_async = client
        .multi_lock([
            a.as_async().clone(),
            client.as_async().lock(unique_name("blocking:multi:c")),
        ])
        .unwrap();
    assert_eq!(from_async.locks().len(), 2);
    from_async.try_lock().unwrap().unwrap().unlock().unwrap();
    let any: blocking::AnyLock = client.spin_lock(unique_name("blocking:any")).boxed();
    any.lock().unwrap().unlock().unwrap();

    // RedLock: three servers, three clients.
    let servers = [RedisServer::start(), RedisServer::start()];
    let others: Vec<blocking::Client> = servers
        .iter()
        .map(|s| blocking::Client::open(s.url()).unwrap())
        .collect();
    let red_name = unique_name("blocking:red");
    let red = client
        .red_lock([
            client.lock(&red_name),
            others[0].lock(&red_name),
            others[1].lock(&red_name),
        ])
        .unwrap();
    assert_eq!(red.quorum(), 2);
    let g = red.lock().unwrap();
    let field: Option<u64> = conn.hget(&red_name, g.parts()[0].holder()).unwrap();
    assert_eq!(field, Some(1));
    g.unlock().unwrap();

    // Object and expiry methods, on a lock, a semaphore, a latch.
    let lock = client.lock(unique_name("blocking:object"));
    let g = lock.lock_with_lease(Duration::from_secs(60)).unwrap();
    assert!(lock.is_exists().unwrap());
    assert!(lock.expire(Duration::from_secs(100)).unwrap());
    assert!(
        matches!(lock.remaining_ttl().unwrap(), Ttl::Remaining(d) if d > Duration::from_secs(90))
    );
    assert!(lock.clear_expire().unwrap());
    assert_eq!(lock.remaining_ttl().unwrap(), Ttl::Persistent);
    assert!(lock.delete().unwrap());
    assert!(matches!(g.unlock(), Err(e) if e.is_not_held()));
    let sem = client.semaphore(unique_name("blocking:object:sem"));
    assert!(sem.try_set_permits(1).unwrap());
    assert!(
        sem.expire_at(std::time::SystemTime::now() + Duration::from_secs(50))
            .unwrap()
    );
    assert!(matches!(
        sem.expire_time().unwrap(),
        redisson_sync::ExpireTime::At(_)
    ));
    assert!(sem.delete().unwrap());
    assert!(!sem.is_exists().unwrap());
    let latch = client.count_down_latch(unique_name("blocking:object:latch"));
    assert!(latch.try_set_count(1).unwrap());
    assert!(latch.delete().unwrap());

    // Inspection sees this thread's hold.
    let inspected = client.lock(unique_name("blocking:inspect"));
    let g = inspected.lock().unwrap();
    let snap = client.inspect(inspected.name()).limit(10).run().unwrap();
    assert_eq!(snap.kind, redisson_sync::inspect::StructureKind::Lock);
    assert_eq!(snap.holders.len(), 1);
    let holder = &snap.holders[0];
    assert_eq!(holder.field, format!("{id}:{}", Owner::current().id()));
    assert_eq!(holder.owner, Some(Owner::current().id()));
    assert!(holder.this_client);
    g.unlock().unwrap();

    for other in &others {
        other.shutdown().unwrap();
    }
    client.shutdown().unwrap();
}

/// The lock watchdog's and the renewing permit's fault-proxy promise, through the blocking API:
/// a partition longer than the lease is reported lost (`lost_timeout`, `is_lost`) before
/// another holder can take the lock or the permit, and `valid_until` never reaches past it.
#[test]
fn a_partition_longer_than_the_lease_is_lost_before_another_holder_takes_it() {
    let server = RedisServer::start();
    let proxy = common::FaultProxy::start(server.addr());
    let lease = ms(1_200);
    let holder = blocking::Client::builder()
        .url(proxy.url())
        .watchdog_timeout(lease)
        .command_timeout(ms(500))
        .connect_timeout(ms(500))
        .build()
        .unwrap();
    let other = client(&server);
    let lock_name = unique_name("blocking:partition:lock");
    let permit_name = unique_name("blocking:partition:psem");
    let psem = holder.permit_expirable_semaphore(&permit_name);
    assert!(psem.try_set_permits(1).unwrap());
    let guard = holder.lock(&lock_name).lock().unwrap();
    let permit = psem.acquire_renewing(1, lease).unwrap();
    // Both renewed at least once before the fault.
    let (lock_first, permit_first) = (guard.valid_until(), permit.valid_until());
    assert!(
        eventually(Duration::from_secs(3), || guard.valid_until()
            > lock_first + ms(200)
            && permit.valid_until() > permit_first + ms(200)),
        "not renewed before the fault"
    );

    proxy.set_mode(common::Mode::Freeze);
    let taken = {
        let other = other.clone();
        thread::spawn(move || {
            let lock = other.lock(&lock_name);
            let g = lock
                .try_lock_for(Duration::from_secs(10))
                .unwrap()
                .expect("the other client gets the lock once the lease ends");
            let lock_at = Instant::now();
            let ids = other
                .permit_expirable_semaphore(&permit_name)
                .try_acquire_for(1, Duration::from_secs(10), None)
                .unwrap()
                .expect("the other client gets the permit once its lease ends");
            let permit_at = Instant::now();
            g.unlock().unwrap();
            (lock_at, permit_at, ids)
        })
    };
    assert!(
        guard.lost_timeout(lease * 2).unwrap(),
        "lock lost within the lease"
    );
    let lock_lost_at = Instant::now();
    assert!(
        permit.lost_timeout(lease * 2).unwrap(),
        "permit lost within the lease"
    );
    let permit_lost_at = Instant::now();
    assert!(guard.is_lost() && permit.is_lost());
    let (lock_at, permit_at, ids) = taken.join().unwrap();
    // Neither guard ever vouched for its hold past the moment another holder took it.
    assert!(guard.valid_until() <= lock_at && permit.valid_until() <= permit_at);
    assert!(
        lock_lost_at < lock_at,
        "the guard reported the loss {:?} after another holder took the lock",
        lock_lost_at - lock_at
    );
    assert!(
        permit_lost_at < permit_at,
        "the permit guard reported the loss {:?} after another holder took the permit",
        permit_lost_at - permit_at
    );
    assert_eq!(ids.len(), 1);
    proxy.set_mode(common::Mode::Pass);
    drop(guard);
    drop(permit);
    holder.shutdown().unwrap();
    other.shutdown().unwrap();
}
