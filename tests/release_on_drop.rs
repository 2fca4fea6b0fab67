//! Release on drop (STYLE.md §7.9): dropping a guard stops its renewal at once and schedules the
//! release without blocking and without panicking, inside a task, during unwinding, on a thread
//! outside the runtime; `shutdown` completes pending releases; `forget` keeps the lock until its
//! lease; guards move between tasks.

mod common;

use std::time::Duration;

use common::{
    RedisServer, channel, client_with_watchdog, dbsize, exists, field, hash, ms, pttl, unique_name,
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

/// A raw subscription to the lock's unlock channel.
async fn subscribe(server: &RedisServer, name: &str) -> redis::aio::PubSub {
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(channel(name)).await.unwrap();
    pubsub
}

/// Asserts that exactly one message, `0`, arrives on the lock's channel.
async fn expect_one_unlock_message(pubsub: &mut redis::aio::PubSub, name: &str) {
    let mut stream = pubsub.on_message();
    let msg = timeout(Duration::from_secs(3), stream.next())
        .await
        .expect("unlock message")
        .expect("pub/sub stream open");
    assert_eq!(msg.get_channel_name(), channel(name));
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    assert!(
        timeout(ms(200), stream.next()).await.is_err(),
        "a second message arrived"
    );
}

/// A long explicit lease, so that expiry never explains a release.
fn long_lease_opts() -> LockOptions {
    LockOptions::new().lease(Duration::from_secs(30))
}

#[tokio::test]
async fn drop_inside_task_releases_and_publishes_unlock() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("drop-task");
    let mut pubsub = subscribe(&server, &name).await;

    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn({
        let lock = client.lock(&name);
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
        vec![(field(&client, owner), "1".to_owned())]
    );
    seen.send(()).unwrap();
    task.await.unwrap();

    expect_one_unlock_message(&mut pubsub, &name).await;
    wait_gone(&mut raw, &name, ms(2000)).await;
    client.shutdown().await;
}

#[tokio::test]
async fn drop_during_panic_unwinding_releases() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("drop-panic");
    let mut pubsub = subscribe(&server, &name).await;

    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn({
        let lock = client.lock(&name);
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
        vec![(field(&client, owner), "1".to_owned())]
    );
    go.send(()).unwrap();
    let err = task.await.unwrap_err();
    assert!(err.is_panic(), "{err:?}");

    expect_one_unlock_message(&mut pubsub, &name).await;
    wait_gone(&mut raw, &name, ms(2000)).await;
    // The lock is usable again at once: no poisoning.
    let g = client.lock(&name).try_lock().await.unwrap().expect("free");
    g.unlock().await.unwrap();
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_on_thread_outside_runtime_releases() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("drop-thread");
    let mut pubsub = subscribe(&server, &name).await;

    let guard = client.lock(&name).lock().await.unwrap();
    let holder = field(&client, guard.owner());
    assert_eq!(hash(&mut raw, &name).await, vec![(holder, "1".to_owned())]);

    let thread = std::thread::spawn(move || {
        assert!(tokio::runtime::Handle::try_current().is_err());
        drop(guard);
    });
    // The drop does not block on Redis; join on a blocking thread to keep the workers free.
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap()
        .expect("drop on a plain thread must not panic");

    expect_one_unlock_message(&mut pubsub, &name).await;
    wait_gone(&mut raw, &name, ms(2000)).await;
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_returns_while_redis_is_frozen() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let in_task = unique_name("drop-frozen-task");
    let on_thread = unique_name("drop-frozen-thread");

    let g_task = client.lock(&in_task).lock().await.unwrap();
    let g_thread = client.lock(&on_thread).lock().await.unwrap();
    assert!(exists(&mut raw, &in_task).await && exists(&mut raw, &on_thread).await);

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
    wait_gone(&mut raw, &in_task, Duration::from_secs(4)).await;
    wait_gone(&mut raw, &on_thread, Duration::from_secs(4)).await;
    client.shutdown().await;
}

#[tokio::test]
async fn drop_after_shutdown_keeps_key_until_its_lease() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client_with_watchdog(&server, ms(600));
    let leased = unique_name("drop-shut-lease");
    let watched = unique_name("drop-shut-wd");

    let g_leased = client
        .lock(&leased)
        .lock_with_options(&LockOptions::new().lease(ms(1000)))
        .await
        .unwrap();
    let g_watched = client.lock(&watched).lock().await.unwrap();
    let leased_holder = field(&client, g_leased.owner());
    let watched_holder = field(&client, g_watched.owner());

    client.shutdown().await;
    assert!(client.is_shut_down());
    drop(g_leased);
    drop(g_watched);

    // Nothing was released: both keys are there with their holder and a TTL within the lease.
    assert_eq!(
        hash(&mut raw, &leased).await,
        vec![(leased_holder.clone(), "1".to_owned())]
    );
    assert_eq!(
        hash(&mut raw, &watched).await,
        vec![(watched_holder.clone(), "1".to_owned())]
    );
    let p = pttl(&mut raw, &leased).await;
    assert!(p > 0 && p <= 1000, "leased pttl {p}");
    let p = pttl(&mut raw, &watched).await;
    assert!(p > 0 && p <= 600, "watched pttl {p}");

    // No late release either, and no renewal after shutdown.
    sleep(ms(250)).await;
    assert_eq!(
        hash(&mut raw, &leased).await,
        vec![(leased_holder, "1".to_owned())]
    );

    // Both expire by their lease.
    wait_gone(&mut raw, &watched, ms(2000)).await;
    wait_gone(&mut raw, &leased, ms(2000)).await;
}

#[tokio::test]
async fn shutdown_completes_pending_releases() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    pubsub.psubscribe("redisson_lock__channel:*").await.unwrap();

    let mut guards = Vec::new();
    for i in 0..50 {
        let lock = client.lock(unique_name(&format!("drop-many{i}")));
        let guard = if i % 2 == 0 {
            lock.lock().await.unwrap()
        } else {
            lock.lock_with_options(&long_lease_opts()).await.unwrap()
        };
        guards.push(guard);
    }
    assert_eq!(dbsize(&mut raw).await, 50);

    drop(guards);
    client.shutdown().await;
    // Every release scheduled before shutdown ran before it returned.
    assert_eq!(dbsize(&mut raw).await, 0);

    // ... and each published its unlock message.
    let mut stream = pubsub.on_message();
    for n in 0..50 {
        let msg = timeout(Duration::from_secs(3), stream.next())
            .await
            .unwrap_or_else(|_| panic!("only {n} unlock messages"))
            .unwrap();
        assert!(
            msg.get_channel_name()
                .starts_with("redisson_lock__channel:{drop-many")
        );
        assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    }
    assert!(timeout(ms(200), stream.next()).await.is_err());
}

#[tokio::test]
async fn forget_keeps_key_until_lease_expires() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("forget-lease");
    let mut pubsub = subscribe(&server, &name).await;

    let guard = client
        .lock(&name)
        .lock_with_options(&LockOptions::new().lease(ms(300)))
        .await
        .unwrap();
    let holder = field(&client, guard.owner());
    guard.forget();

    assert_eq!(hash(&mut raw, &name).await, vec![(holder, "1".to_owned())]);
    let p = pttl(&mut raw, &name).await;
    assert!(p > 0 && p <= 300, "pttl {p}");
    wait_gone(&mut raw, &name, ms(2000)).await;
    // Gone by expiry, not by a release: no unlock message.
    assert!(timeout(ms(200), pubsub.on_message().next()).await.is_err());
    client.shutdown().await;
}

#[tokio::test]
async fn forget_stops_watchdog_renewal() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client_with_watchdog(&server, ms(600));
    let forgotten = unique_name("forget-wd");
    let kept = unique_name("forget-wd-kept");

    let g_forgotten = client.lock(&forgotten).lock().await.unwrap();
    let g_kept = client.lock(&kept).lock().await.unwrap();
    let holder = field(&client, g_forgotten.owner());
    // Both are renewed for a while.
    sleep(ms(700)).await;
    assert!(exists(&mut raw, &forgotten).await);
    g_forgotten.forget();
    assert_eq!(
        hash(&mut raw, &forgotten).await,
        vec![(holder, "1".to_owned())]
    );

    // Without renewal it expires within the 600 ms watchdog timeout (+ at most one renewal
    // already in flight, + margin), while the kept lock is still renewed.
    let after = wait_gone(&mut raw, &forgotten, ms(2000)).await;
    sleep(ms(700).saturating_sub(after)).await;
    let p = pttl(&mut raw, &kept).await;
    assert!(p > 0 && p <= 600, "kept lock pttl {p}");
    assert!(!exists(&mut raw, &forgotten).await);
    g_kept.unlock().await.unwrap();
    assert!(!exists(&mut raw, &kept).await);
    client.shutdown().await;
}

#[tokio::test]
async fn guard_moved_to_another_task_is_unlocked_there() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("moved");
    let lock = client.lock(&name);
    let mut pubsub = subscribe(&server, &name).await;

    let guard = lock.lock().await.unwrap();
    let owner = guard.owner();
    assert_eq!(owner, Owner::current());
    let holder = field(&client, owner);

    let (name2, mut raw2) = (name.clone(), server.conn().await);
    let result = tokio::spawn(async move {
        // The hold still belongs to the acquiring owner, not to this task.
        assert_ne!(Owner::current(), guard.owner());
        assert_eq!(guard.owner(), owner);
        assert_eq!(guard.name(), name2);
        assert_eq!(
            hash(&mut raw2, &name2).await,
            vec![(holder, "1".to_owned())]
        );
        guard.unlock().await
    })
    .await
    .unwrap();
    result.unwrap();
    assert!(!exists(&mut raw, &name).await);
    expect_one_unlock_message(&mut pubsub, &name).await;
    client.shutdown().await;
}

#[tokio::test]
async fn guard_with_explicit_owner_dropped_in_another_task_releases() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("moved-owner");
    let lock = client.lock(&name);
    let mut pubsub = subscribe(&server, &name).await;

    let owner = Owner::new(4242);
    let guard = lock
        .lock_with_options(&LockOptions::new().owner(owner))
        .await
        .unwrap();
    assert_eq!(guard.owner(), owner);
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field(&client, owner), "1".to_owned())]
    );
    assert_eq!(lock.hold_count(owner).await.unwrap(), 1);

    tokio::spawn(async move { drop(guard) }).await.unwrap();
    expect_one_unlock_message(&mut pubsub, &name).await;
    wait_gone(&mut raw, &name, ms(2000)).await;
    assert_eq!(lock.hold_count(owner).await.unwrap(), 0);
    client.shutdown().await;
}

#[tokio::test]
async fn unlock_after_shutdown_returns_shutdown() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("unlock-shut");

    let guard = client
        .lock(&name)
        .lock_with_options(&LockOptions::new().lease(Duration::from_secs(10)))
        .await
        .unwrap();
    let holder = field(&client, guard.owner());
    client.shutdown().await;

    let err = guard.unlock().await.unwrap_err();
    assert!(matches!(err, Error::Shutdown), "{err:?}");
    assert!(err.is_shutdown());
    // The lock stays until its lease expires.
    assert_eq!(hash(&mut raw, &name).await, vec![(holder, "1".to_owned())]);
    let p = pttl(&mut raw, &name).await;
    assert!(p > 9_000 && p <= 10_000, "pttl {p}");
}

/// A guard that outlives its runtime (no `shutdown` was called) is dropped on a plain thread:
/// no panic, and the lock simply expires with its lease.
#[test]
fn drop_after_runtime_is_gone_does_not_panic() {
    let server = RedisServer::start();
    let name = unique_name("drop-no-runtime");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (client, guard) = rt.block_on(async {
        let client = client(&server);
        let guard = client
            .lock(&name)
            .lock_with_options(&LockOptions::new().lease(Duration::from_secs(10)))
            .await
            .unwrap();
        (client, guard)
    });
    let holder = field(&client, guard.owner());
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
        assert_eq!(hash(&mut raw, &name).await, vec![(holder, "1".to_owned())]);
        let p = pttl(&mut raw, &name).await;
        assert!(p > 0 && p <= 10_000, "pttl {p}");
    });
}
