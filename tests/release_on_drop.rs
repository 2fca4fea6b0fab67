//! Release on drop (STYLE.md §7.9): dropping a guard stops its renewal at once and schedules the
//! release without blocking and without panicking, inside a task, during unwinding, on a thread
//! outside the runtime; `shutdown` completes pending releases; `forget` keeps the lock until its
//! lease; guards move between tasks.
//!
//! Every test runs once per lock kind (`common::Kind`, `per_kind!`): the lock, the fair lock and
//! both halves of the read-write lock share the guard. What differs is what a hold writes (the
//! `mode` field of the halves, the read half's marker keys) and where a release publishes (the
//! write half publishes `1`; the fair lock publishes only to the head of its queue, so the tests
//! queue a stand-in waiter, `Kind::queue_stand_in`, wherever they expect a message).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{
    Kind, RedisServer, client_with_watchdog, dbsize, exists, hash, ms, per_kind, pttl, unique_name,
};
use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner};
use tokio::time::{Instant, sleep, timeout};

/// A 30 s watchdog timeout like `common::client`, with a 5 s command timeout.
fn client(server: &RedisServer) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_timeout(Duration::from_secs(30))
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Polls until `key` is gone; panics if it is still there after `within`.
async fn wait_gone(raw: &mut MultiplexedConnection, key: &str, within: Duration) -> Duration {
    let start = Instant::now();
    while exists(raw, key).await {
        assert!(
            start.elapsed() < within,
            "{key} still present after {within:?}: {:?}",
            hash(raw, key).await
        );
        sleep(ms(10)).await;
    }
    start.elapsed()
}

/// Polls until every key of `keys` is gone; panics if one is still there after `within`.
async fn wait_all_gone(raw: &mut MultiplexedConnection, keys: &[String], within: Duration) {
    let start = Instant::now();
    for key in keys {
        wait_gone(raw, key, within.saturating_sub(start.elapsed())).await;
    }
}

/// Asserts that each key of `keys` exists with a PTTL in `(0, lease]`: the lock hash and, for
/// the read half, its marker keys, which carry the hold's lease too.
async fn assert_ttls_within(raw: &mut MultiplexedConnection, keys: &[String], lease: i64) {
    for key in keys {
        let p = pttl(raw, key).await;
        assert!(p > 0 && p <= lease, "{key}: pttl {p}, lease {lease}");
    }
}

/// A raw subscription to the channel a release of the lock publishes on.
async fn subscribe(server: &RedisServer, kind: Kind, name: &str) -> redis::aio::PubSub {
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(kind.channel(name)).await.unwrap();
    pubsub
}

/// Asserts that exactly one message, the kind's release message (`0`, or `1` for the write
/// half), arrives on the lock's channel.
async fn expect_one_unlock_message(pubsub: &mut redis::aio::PubSub, kind: Kind, name: &str) {
    let mut stream = pubsub.on_message();
    let msg = timeout(Duration::from_secs(3), stream.next())
        .await
        .expect("unlock message")
        .expect("pub/sub stream open");
    assert_eq!(msg.get_channel_name(), kind.channel(name));
    assert_eq!(msg.get_payload::<String>().unwrap(), kind.release_message());
    assert!(
        timeout(ms(200), stream.next()).await.is_err(),
        "a second message arrived"
    );
}

/// A long explicit lease, so that expiry never explains a release.
fn long_lease_opts() -> LockOptions {
    LockOptions::new().lease(Duration::from_secs(30))
}

per_kind!(#[tokio::test] async fn drop_inside_task_releases_and_publishes_unlock);

async fn drop_inside_task_releases_and_publishes_unlock(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("drop-task");
    let mut pubsub = subscribe(&server, kind, &name).await;

    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn({
        let lock = kind.any(&client, &name);
        async move {
            let guard = lock.lock().await.unwrap();
            let owner = guard.owner();
            assert_eq!(owner, Owner::current());
            // Hold until the test has seen the hash, then drop at the end of the task.
            let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
            tx.send((owner, seen_tx)).unwrap();
            seen_rx.await.unwrap();
            drop(guard);
        }
    });
    let (owner, seen) = rx.await.unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        kind.hold_hash(&client, owner, 1)
    );
    // The fair lock publishes only to a queued waiter.
    kind.queue_stand_in(&mut raw, &name).await;
    seen.send(()).unwrap();
    task.await.unwrap();

    expect_one_unlock_message(&mut pubsub, kind, &name).await;
    let keys = kind.hold_keys(&name, &kind.field(&client, owner), 1);
    wait_all_gone(&mut raw, &keys, ms(2000)).await;
    kind.dequeue_stand_in(&mut raw, &name).await;
    assert_eq!(dbsize(&mut raw).await, 0);
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn drop_during_panic_unwinding_releases);

async fn drop_during_panic_unwinding_releases(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("drop-panic");
    let mut pubsub = subscribe(&server, kind, &name).await;

    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn({
        let lock = kind.any(&client, &name);
        async move {
            let guard = lock.lock_with_options(&long_lease_opts()).await.unwrap();
            let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
            tx.send((guard.owner(), go_tx)).unwrap();
            go_rx.await.unwrap();
            panic!("critical section failed while holding {}", guard.name());
        }
    });
    let (owner, go) = rx.await.unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        kind.hold_hash(&client, owner, 1)
    );
    kind.queue_stand_in(&mut raw, &name).await;
    go.send(()).unwrap();
    let err = task.await.unwrap_err();
    assert!(err.is_panic(), "{err:?}");

    expect_one_unlock_message(&mut pubsub, kind, &name).await;
    let keys = kind.hold_keys(&name, &kind.field(&client, owner), 1);
    wait_all_gone(&mut raw, &keys, ms(2000)).await;
    // (The fair lock's stand-in waiter would be next in line: it leaves first.)
    kind.dequeue_stand_in(&mut raw, &name).await;
    // The lock is usable again at once: no poisoning.
    let g = kind
        .any(&client, &name)
        .try_lock()
        .await
        .unwrap()
        .expect("free");
    g.unlock().await.unwrap();
    assert_eq!(dbsize(&mut raw).await, 0);
    client.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn drop_on_thread_outside_runtime_releases);

async fn drop_on_thread_outside_runtime_releases(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("drop-thread");
    let mut pubsub = subscribe(&server, kind, &name).await;

    let guard = kind.any(&client, &name).lock().await.unwrap();
    let owner = guard.owner();
    assert_eq!(
        hash(&mut raw, &name).await,
        kind.hold_hash(&client, owner, 1)
    );
    kind.queue_stand_in(&mut raw, &name).await;

    let thread = std::thread::spawn(move || {
        assert!(tokio::runtime::Handle::try_current().is_err());
        drop(guard);
    });
    // The drop does not block on Redis; join on a blocking thread to keep the workers free.
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap()
        .expect("drop on a plain thread must not panic");

    expect_one_unlock_message(&mut pubsub, kind, &name).await;
    let keys = kind.hold_keys(&name, &kind.field(&client, owner), 1);
    wait_all_gone(&mut raw, &keys, ms(2000)).await;
    kind.dequeue_stand_in(&mut raw, &name).await;
    assert_eq!(dbsize(&mut raw).await, 0);
    client.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn drop_returns_while_redis_is_frozen);

async fn drop_returns_while_redis_is_frozen(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let in_task = unique_name("drop-frozen-task");
    let on_thread = unique_name("drop-frozen-thread");

    let g_task = kind.any(&client, &in_task).lock().await.unwrap();
    let g_thread = kind.any(&client, &on_thread).lock().await.unwrap();
    assert!(exists(&mut raw, &in_task).await && exists(&mut raw, &on_thread).await);
    let task_keys = kind.hold_keys(&in_task, &kind.field(&client, g_task.owner()), 1);
    let thread_keys = kind.hold_keys(&on_thread, &kind.field(&client, g_thread.owner()), 1);

    server.pause();
    // Both drops return although Redis answers nothing (the releases are only scheduled).
    let dropped_in_task = timeout(
        Duration::from_secs(2),
        tokio::spawn(async move { drop(g_task) }),
    )
    .await;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(g_thread);
        done_tx.send(()).unwrap();
    });
    let dropped_on_thread =
        tokio::task::spawn_blocking(move || done_rx.recv_timeout(Duration::from_secs(2)))
            .await
            .unwrap();
    server.resume();
    assert!(
        matches!(dropped_in_task, Ok(Ok(()))),
        "drop in a task blocked or panicked: {dropped_in_task:?}"
    );
    assert!(
        dropped_on_thread.is_ok(),
        "drop on a thread blocked or panicked: {dropped_on_thread:?}"
    );

    // Once Redis answers again, the scheduled releases run.
    wait_all_gone(&mut raw, &task_keys, Duration::from_secs(4)).await;
    wait_all_gone(&mut raw, &thread_keys, Duration::from_secs(4)).await;
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn drop_after_shutdown_keeps_key_until_its_lease);

async fn drop_after_shutdown_keeps_key_until_its_lease(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client_with_watchdog(&server, ms(600));
    let leased = unique_name("drop-shut-lease");
    let watched = unique_name("drop-shut-wd");

    let g_leased = kind
        .any(&client, &leased)
        .lock_with_options(&LockOptions::new().lease(ms(1000)))
        .await
        .unwrap();
    let g_watched = kind.any(&client, &watched).lock().await.unwrap();
    let leased_holder = kind.field(&client, g_leased.owner());
    let watched_holder = kind.field(&client, g_watched.owner());

    client.shutdown().await;
    assert!(client.is_shut_down());
    drop(g_leased);
    drop(g_watched);

    // Nothing was released: both keys are there with their holder and a TTL within the lease
    // (for the read half, its marker key too).
    assert_eq!(
        hash(&mut raw, &leased).await,
        kind.hash_of(&leased_holder, 1)
    );
    assert_eq!(
        hash(&mut raw, &watched).await,
        kind.hash_of(&watched_holder, 1)
    );
    let leased_keys = kind.hold_keys(&leased, &leased_holder, 1);
    let watched_keys = kind.hold_keys(&watched, &watched_holder, 1);
    assert_ttls_within(&mut raw, &leased_keys, 1000).await;
    assert_ttls_within(&mut raw, &watched_keys, 600).await;

    // No late release either, and no renewal after shutdown.
    sleep(ms(250)).await;
    assert_eq!(
        hash(&mut raw, &leased).await,
        kind.hash_of(&leased_holder, 1)
    );

    // Both expire by their lease.
    wait_all_gone(&mut raw, &watched_keys, ms(2000)).await;
    wait_all_gone(&mut raw, &leased_keys, ms(2000)).await;
}

per_kind!(#[tokio::test] async fn shutdown_completes_pending_releases);

async fn shutdown_completes_pending_releases(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    pubsub
        .psubscribe(kind.channel_pattern("drop-many"))
        .await
        .unwrap();

    let mut guards = Vec::new();
    let mut names = Vec::new();
    let mut keys = 0;
    for i in 0..50 {
        let name = unique_name(&format!("drop-many{i}"));
        let lock = kind.any(&client, &name);
        let guard = if i % 2 == 0 {
            lock.lock().await.unwrap()
        } else {
            lock.lock_with_options(&long_lease_opts()).await.unwrap()
        };
        kind.queue_stand_in(&mut raw, &name).await;
        keys += kind
            .hold_keys(&name, &kind.field(&client, guard.owner()), 1)
            .len()
            + kind.waiter_keys(&name).len();
        guards.push(guard);
        names.push(name);
    }
    // 50 lock hashes (and the read half's markers, the fair lock's stand-in queues).
    assert_eq!(dbsize(&mut raw).await, keys as u64);
    assert!(keys >= 50);

    drop(guards);
    client.shutdown().await;
    // Every release scheduled before shutdown ran before it returned.
    for name in &names {
        kind.dequeue_stand_in(&mut raw, name).await;
    }
    assert_eq!(dbsize(&mut raw).await, 0);

    // ... and each published its unlock message.
    let mut channels: BTreeSet<String> = names.iter().map(|n| kind.channel(n)).collect();
    // `redisson_lock__channel:{drop-many` or `redisson_rwlock:{drop-many`.
    let prefix = {
        let channel = kind.channel("drop-many");
        channel[..channel.find("drop-many").unwrap() + "drop-many".len()].to_owned()
    };
    let mut stream = pubsub.on_message();
    for n in 0..50 {
        let msg = timeout(Duration::from_secs(3), stream.next())
            .await
            .unwrap_or_else(|_| panic!("only {n} unlock messages"))
            .unwrap();
        assert!(msg.get_channel_name().starts_with(&prefix));
        assert!(
            channels.remove(msg.get_channel_name()),
            "unexpected or repeated {}",
            msg.get_channel_name()
        );
        assert_eq!(msg.get_payload::<String>().unwrap(), kind.release_message());
    }
    assert!(timeout(ms(200), stream.next()).await.is_err());
}

per_kind!(#[tokio::test] async fn forget_keeps_key_until_lease_expires);

async fn forget_keeps_key_until_lease_expires(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("forget-lease");
    let mut pubsub = subscribe(&server, kind, &name).await;

    let guard = kind
        .any(&client, &name)
        .lock_with_options(&LockOptions::new().lease(ms(300)))
        .await
        .unwrap();
    let holder = kind.field(&client, guard.owner());
    // For the fair lock: a waiter a release would publish to.
    kind.queue_stand_in(&mut raw, &name).await;
    guard.forget();

    assert_eq!(hash(&mut raw, &name).await, kind.hash_of(&holder, 1));
    let keys = kind.hold_keys(&name, &holder, 1);
    assert_ttls_within(&mut raw, &keys, 300).await;
    wait_all_gone(&mut raw, &keys, ms(2000)).await;
    // Gone by expiry, not by a release: no unlock message.
    assert!(timeout(ms(200), pubsub.on_message().next()).await.is_err());
    kind.dequeue_stand_in(&mut raw, &name).await;
    assert_eq!(dbsize(&mut raw).await, 0);
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn forget_stops_watchdog_renewal);

async fn forget_stops_watchdog_renewal(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client_with_watchdog(&server, ms(600));
    let forgotten = unique_name("forget-wd");
    let kept = unique_name("forget-wd-kept");

    let g_forgotten = kind.any(&client, &forgotten).lock().await.unwrap();
    let g_kept = kind.any(&client, &kept).lock().await.unwrap();
    let holder = kind.field(&client, g_forgotten.owner());
    let forgotten_keys = kind.hold_keys(&forgotten, &holder, 1);
    let kept_keys = kind.hold_keys(&kept, &kind.field(&client, g_kept.owner()), 1);
    // Both are renewed for a while (the read half's marker keys too).
    sleep(ms(700)).await;
    assert!(exists(&mut raw, &forgotten).await);
    assert_ttls_within(&mut raw, &forgotten_keys, 600).await;
    g_forgotten.forget();
    assert_eq!(hash(&mut raw, &forgotten).await, kind.hash_of(&holder, 1));

    // Without renewal it expires within the 600 ms watchdog timeout (+ at most one renewal
    // already in flight, + margin), while the kept lock is still renewed.
    let start = Instant::now();
    wait_all_gone(&mut raw, &forgotten_keys, ms(2000)).await;
    let after = start.elapsed();
    sleep(ms(700).saturating_sub(after)).await;
    assert_ttls_within(&mut raw, &kept_keys, 600).await;
    assert!(!exists(&mut raw, &forgotten).await);
    g_kept.unlock().await.unwrap();
    assert!(!exists(&mut raw, &kept).await);
    assert_eq!(dbsize(&mut raw).await, 0);
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn guard_moved_to_another_task_is_unlocked_there);

async fn guard_moved_to_another_task_is_unlocked_there(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("moved");
    let lock = kind.any(&client, &name);
    let mut pubsub = subscribe(&server, kind, &name).await;

    let guard = lock.lock().await.unwrap();
    let owner = guard.owner();
    assert_eq!(owner, Owner::current());
    let expected = kind.hold_hash(&client, owner, 1);
    let keys = kind.hold_keys(&name, &kind.field(&client, owner), 1);
    kind.queue_stand_in(&mut raw, &name).await;

    let (name2, mut raw2) = (name.clone(), server.conn().await);
    let result = tokio::spawn(async move {
        // The hold still belongs to the acquiring owner, not to this task.
        assert_ne!(Owner::current(), guard.owner());
        assert_eq!(guard.owner(), owner);
        assert_eq!(guard.name(), name2);
        assert_eq!(hash(&mut raw2, &name2).await, expected);
        guard.unlock().await
    })
    .await
    .unwrap();
    result.unwrap();
    assert!(!exists(&mut raw, &name).await);
    for key in &keys {
        assert!(!exists(&mut raw, key).await, "{key}");
    }
    expect_one_unlock_message(&mut pubsub, kind, &name).await;
    kind.dequeue_stand_in(&mut raw, &name).await;
    assert_eq!(dbsize(&mut raw).await, 0);
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn guard_with_explicit_owner_dropped_in_another_task_releases);

async fn guard_with_explicit_owner_dropped_in_another_task_releases(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("moved-owner");
    let lock = kind.any(&client, &name);
    let mut pubsub = subscribe(&server, kind, &name).await;

    let owner = Owner::new(4242);
    let guard = lock
        .lock_with_options(&LockOptions::new().owner(owner))
        .await
        .unwrap();
    assert_eq!(guard.owner(), owner);
    assert_eq!(
        hash(&mut raw, &name).await,
        kind.hold_hash(&client, owner, 1)
    );
    assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
    kind.queue_stand_in(&mut raw, &name).await;

    tokio::spawn(async move { drop(guard) }).await.unwrap();
    expect_one_unlock_message(&mut pubsub, kind, &name).await;
    let keys = kind.hold_keys(&name, &kind.field(&client, owner), 1);
    wait_all_gone(&mut raw, &keys, ms(2000)).await;
    assert_eq!(lock.hold_count(owner).await.unwrap(), 0);
    kind.dequeue_stand_in(&mut raw, &name).await;
    assert_eq!(dbsize(&mut raw).await, 0);
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn unlock_after_shutdown_returns_shutdown);

async fn unlock_after_shutdown_returns_shutdown(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("unlock-shut");

    let guard = kind
        .any(&client, &name)
        .lock_with_options(&LockOptions::new().lease(Duration::from_secs(10)))
        .await
        .unwrap();
    let holder = kind.field(&client, guard.owner());
    client.shutdown().await;

    let err = guard.unlock().await.unwrap_err();
    assert!(matches!(err, Error::Shutdown), "{err:?}");
    assert!(err.is_shutdown());
    // The lock stays until its lease expires (for the read half, its marker key too).
    assert_eq!(hash(&mut raw, &name).await, kind.hash_of(&holder, 1));
    for key in kind.hold_keys(&name, &holder, 1) {
        let p = pttl(&mut raw, &key).await;
        assert!(p > 9_000 && p <= 10_000, "{key}: pttl {p}");
    }
}

per_kind!(#[test] fn drop_after_runtime_is_gone_does_not_panic);

/// A guard that outlives its runtime (no `shutdown` was called) is dropped on a plain thread:
/// no panic, and the lock simply expires with its lease.
fn drop_after_runtime_is_gone_does_not_panic(kind: Kind) {
    let server = RedisServer::start();
    let name = unique_name("drop-no-runtime");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (client, guard) = rt.block_on(async {
        let client = client(&server);
        let guard = kind
            .any(&client, &name)
            .lock_with_options(&LockOptions::new().lease(Duration::from_secs(10)))
            .await
            .unwrap();
        (client, guard)
    });
    let holder = kind.field(&client, guard.owner());
    drop(rt);

    let dropped = std::thread::spawn(move || drop(guard)).join();
    assert!(dropped.is_ok(), "drop after the runtime ended panicked");
    drop(client);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut raw = server.conn().await;
        assert_eq!(hash(&mut raw, &name).await, kind.hash_of(&holder, 1));
        for key in kind.hold_keys(&name, &holder, 1) {
            let p = pttl(&mut raw, &key).await;
            assert!(p > 0 && p <= 10_000, "{key}: pttl {p}");
        }
    });
}
