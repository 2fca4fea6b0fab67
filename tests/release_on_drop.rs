//! Release on drop: dropping a guard stops its renewal at once and schedules the release
//! without blocking and without panicking, inside a task, during unwinding, on a thread outside
//! the runtime; `shutdown` completes pending releases; `forget` keeps the lock until its lease;
//! guards move between tasks.
//!
//! Every test runs once per lock kind (`common::Kind`, `per_kind!`): every kind's guard is the
//! one `LockGuard`. What differs is what a hold writes (the `mode` field of the halves, the read
//! half's marker keys, the token lock's string value, the fenced lock's token counter that stays)
//! and where a release publishes (the write half publishes `1`; the fair kinds publish only to
//! the head of their queue, so the tests queue a stand-in waiter, `Kind::queue_stand_in`,
//! wherever they expect a message; the spin and token locks publish nothing). A raw pattern
//! subscription to every channel naming the lock sees exactly the kind's messages.
//!
//! The semaphore's `Permits` release on drop the same way (`common::Primitive`); the
//! permit-expirable semaphore's ids and the latch hold nothing that could be dropped.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{
    Kind, Primitive, RedisServer, State, assert_pttls_within, builder, client_with_watchdog,
    dbsize, exists, ms, per_kind, per_primitive, psubscribe, pttl, state, unique_name, value,
    wait_all_gone,
};
use futures_util::{Stream, StreamExt};
use redis::Msg;
use redisson_sync::{Client, Error, LockOptions, Owner};
use tokio::time::{Instant, sleep, timeout};

/// A 30 s watchdog timeout like `common::client`, with a 5 s command timeout.
fn new_client(server: &RedisServer) -> Client {
    builder(server.url())
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// A raw pattern subscription to every channel naming the lock `name` (`Kind::channels_of`).
async fn messages_about(
    server: &RedisServer,
    name: &str,
) -> impl Stream<Item = Msg> + Unpin + use<> {
    psubscribe(server, &[Kind::channels_of(name)]).await
}

/// Asserts that exactly the kind's release message arrives about the lock: one message, the
/// kind's release message (`0`, or `1` for the write half) on its channel, then nothing; for
/// the kinds that publish nothing, no message at all.
async fn expect_one_unlock_message(
    messages: &mut (impl Stream<Item = Msg> + Unpin),
    kind: Kind,
    name: &str,
) {
    let (Some(channel), Some(payload)) = (kind.channel(name), kind.release_message()) else {
        common::assert_no_message(messages, ms(300), &format!("{kind} publishes nothing")).await;
        return;
    };
    let msg = timeout(Duration::from_secs(3), messages.next())
        .await
        .expect("unlock message")
        .expect("pub/sub stream open");
    assert_eq!(msg.get_channel_name(), channel);
    assert_eq!(msg.get_payload::<String>().unwrap(), payload);
    assert!(
        timeout(ms(200), messages.next()).await.is_err(),
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
    let client = new_client(&server);
    let name = unique_name("drop-task");
    let mut pubsub = messages_about(&server, &name).await;

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
        state(&mut raw, &name).await,
        kind.hold_state(&client, owner, 1)
    );
    // The fair lock publishes only to a queued waiter.
    kind.queue_stand_in(&mut raw, &name).await;
    seen.send(()).unwrap();
    task.await.unwrap();

    expect_one_unlock_message(&mut pubsub, kind, &name).await;
    let keys = kind.hold_keys(&name, &kind.field(&client, owner), 1);
    wait_all_gone(&mut raw, &keys, ms(2000)).await;
    kind.dequeue_stand_in(&mut raw, &name).await;
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn drop_during_panic_unwinding_releases);

async fn drop_during_panic_unwinding_releases(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("drop-panic");
    let mut pubsub = messages_about(&server, &name).await;

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
        state(&mut raw, &name).await,
        kind.hold_state(&client, owner, 1)
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
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    client.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn drop_on_thread_outside_runtime_releases);

async fn drop_on_thread_outside_runtime_releases(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("drop-thread");
    let mut pubsub = messages_about(&server, &name).await;

    let guard = kind.any(&client, &name).lock().await.unwrap();
    let owner = guard.owner();
    assert_eq!(
        state(&mut raw, &name).await,
        kind.hold_state(&client, owner, 1)
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
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    client.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn drop_returns_while_redis_is_frozen);

async fn drop_returns_while_redis_is_frozen(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
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

per_kind!(at_once current_thread, async fn drop_after_shutdown_keeps_key_until_its_lease);

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
        state(&mut raw, &leased).await,
        kind.state_of(&leased_holder, 1)
    );
    assert_eq!(
        state(&mut raw, &watched).await,
        kind.state_of(&watched_holder, 1)
    );
    let leased_keys = kind.hold_keys(&leased, &leased_holder, 1);
    let watched_keys = kind.hold_keys(&watched, &watched_holder, 1);
    assert_pttls_within(&mut raw, &leased_keys, 1000, "a lease").await;
    assert_pttls_within(&mut raw, &watched_keys, 600, "a lease").await;

    // No late release either, and no renewal after shutdown.
    sleep(ms(250)).await;
    assert_eq!(
        state(&mut raw, &leased).await,
        kind.state_of(&leased_holder, 1)
    );

    // Both expire by their lease.
    wait_all_gone(&mut raw, &watched_keys, ms(2000)).await;
    wait_all_gone(&mut raw, &leased_keys, ms(2000)).await;
}

per_kind!(#[tokio::test] async fn shutdown_completes_pending_releases);

async fn shutdown_completes_pending_releases(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    // Every channel naming one of these locks.
    let mut stream = psubscribe(&server, &[Kind::channels_of("drop-many")]).await;

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
            + kind.waiter_keys(&name).len()
            + kind.lasting_keys(&name).len();
        guards.push(guard);
        names.push(name);
    }
    // 50 lock keys (and the read half's markers, the fair kinds' stand-in queues, the fenced
    // lock's token counters).
    assert_eq!(dbsize(&mut raw).await, keys as u64);
    assert!(keys >= 50);

    drop(guards);
    client.shutdown().await;
    // Every release scheduled before shutdown ran before it returned.
    for name in &names {
        kind.dequeue_stand_in(&mut raw, name).await;
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    kind.assert_nothing_left(&mut raw, &names).await;

    // ... and each published its unlock message (the spin and token locks publish none).
    let Some(payload) = kind.release_message() else {
        common::assert_no_message(&mut stream, ms(300), &format!("{kind} publishes nothing")).await;
        return;
    };
    let mut channels: BTreeSet<String> = names.iter().map(|n| kind.channel(n).unwrap()).collect();
    // `redisson_lock__channel:{drop-many` or `redisson_rwlock:{drop-many`.
    let prefix = {
        let channel = kind.channel("drop-many").unwrap();
        channel[..channel.find("drop-many").unwrap() + "drop-many".len()].to_owned()
    };
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
        assert_eq!(msg.get_payload::<String>().unwrap(), payload);
    }
    assert!(timeout(ms(200), stream.next()).await.is_err());
}

per_kind!(at_once current_thread, async fn forget_keeps_key_until_lease_expires);

async fn forget_keeps_key_until_lease_expires(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("forget-lease");
    let mut pubsub = messages_about(&server, &name).await;

    let guard = kind
        .any(&client, &name)
        .lock_with_options(&LockOptions::new().lease(ms(300)))
        .await
        .unwrap();
    let holder = kind.field(&client, guard.owner());
    // For the fair lock: a waiter a release would publish to.
    kind.queue_stand_in(&mut raw, &name).await;
    guard.forget();

    assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
    let keys = kind.hold_keys(&name, &holder, 1);
    assert_pttls_within(&mut raw, &keys, 300, "a lease").await;
    wait_all_gone(&mut raw, &keys, ms(2000)).await;
    // Gone by expiry, not by a release: no unlock message.
    assert!(timeout(ms(200), pubsub.next()).await.is_err());
    kind.dequeue_stand_in(&mut raw, &name).await;
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    client.shutdown().await;
}

per_kind!(at_once current_thread, async fn forget_stops_watchdog_renewal);

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
    assert_pttls_within(&mut raw, &forgotten_keys, 600, "a lease").await;
    g_forgotten.forget();
    assert_eq!(state(&mut raw, &forgotten).await, kind.state_of(&holder, 1));

    // Without renewal it expires within the 600 ms watchdog timeout (+ at most one renewal
    // already in flight, + margin), while the kept lock is still renewed.
    let start = Instant::now();
    wait_all_gone(&mut raw, &forgotten_keys, ms(2000)).await;
    let after = start.elapsed();
    sleep(ms(700).saturating_sub(after)).await;
    assert_pttls_within(&mut raw, &kept_keys, 600, "a lease").await;
    assert!(!exists(&mut raw, &forgotten).await);
    g_kept.unlock().await.unwrap();
    assert!(!exists(&mut raw, &kept).await);
    kind.assert_nothing_left(&mut raw, &[&forgotten, &kept])
        .await;
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn guard_moved_to_another_task_is_unlocked_there);

async fn guard_moved_to_another_task_is_unlocked_there(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("moved");
    let lock = kind.any(&client, &name);
    let mut pubsub = messages_about(&server, &name).await;

    let guard = lock.lock().await.unwrap();
    let owner = guard.owner();
    assert_eq!(owner, Owner::current());
    let expected = kind.hold_state(&client, owner, 1);
    let keys = kind.hold_keys(&name, &kind.field(&client, owner), 1);
    kind.queue_stand_in(&mut raw, &name).await;

    let (name2, mut raw2) = (name.clone(), server.conn().await);
    let result = tokio::spawn(async move {
        // The hold still belongs to the acquiring owner, not to this task.
        assert_ne!(Owner::current(), guard.owner());
        assert_eq!(guard.owner(), owner);
        assert_eq!(guard.name(), name2);
        assert_eq!(state(&mut raw2, &name2).await, expected);
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
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn guard_with_explicit_owner_dropped_in_another_task_releases);

async fn guard_with_explicit_owner_dropped_in_another_task_releases(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("moved-owner");
    let lock = kind.any(&client, &name);
    let mut pubsub = messages_about(&server, &name).await;

    let owner = Owner::new(4242);
    let guard = lock
        .lock_with_options(&LockOptions::new().owner(owner))
        .await
        .unwrap();
    assert_eq!(guard.owner(), owner);
    assert_eq!(
        state(&mut raw, &name).await,
        kind.hold_state(&client, owner, 1)
    );
    let holder = kind.field(&client, owner);
    if kind.counts_holds() {
        assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
    }
    assert_eq!(kind.count_in_redis(&mut raw, &name, &holder).await, 1);
    kind.queue_stand_in(&mut raw, &name).await;

    tokio::spawn(async move { drop(guard) }).await.unwrap();
    expect_one_unlock_message(&mut pubsub, kind, &name).await;
    let keys = kind.hold_keys(&name, &kind.field(&client, owner), 1);
    wait_all_gone(&mut raw, &keys, ms(2000)).await;
    if kind.counts_holds() {
        assert_eq!(lock.hold_count(owner).await.unwrap(), 0);
    }
    assert_eq!(kind.count_in_redis(&mut raw, &name, &holder).await, 0);
    kind.dequeue_stand_in(&mut raw, &name).await;
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn unlock_after_shutdown_returns_shutdown);

async fn unlock_after_shutdown_returns_shutdown(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
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
    assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
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
        let client = new_client(&server);
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
        assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
        for key in kind.hold_keys(&name, &holder, 1) {
            let p = pttl(&mut raw, &key).await;
            assert!(p > 0 && p <= 10_000, "{key}: pttl {p}");
        }
    });
}

per_primitive!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn permits_dropped_anywhere_are_released; except {
    permit_semaphore: "not applicable: its permits are plain ids, released by id; nothing is released on drop",
    latch: "not applicable: waiting for a latch holds nothing",
});

/// The semaphore's `Permits` are released on drop as a lock guard is: at the end of a task,
/// while unwinding, on a thread outside the runtime, while Redis is frozen (the drop returns
/// at once, the release runs once Redis answers); each release puts the count back and
/// publishes it. After `shutdown` a drop releases nothing; `shutdown` completes the releases
/// scheduled before it.
async fn permits_dropped_anywhere_are_released(p: Primitive) {
    assert_eq!(p, Primitive::Semaphore);
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("drop-permits");
    let sem = client.semaphore(&name);
    let mut messages = common::Messages::subscribe(&server, &p.channel(&name)).await;
    assert!(sem.try_set_permits(1).await.unwrap());
    assert_eq!(messages.next().await, "1");
    let released = State::Value("1".to_owned());

    // At the end of a task.
    let task = tokio::spawn({
        let sem = sem.clone();
        async move {
            let permits = sem.acquire(1).await.unwrap();
            assert_eq!(permits.count(), 1);
            drop(permits);
        }
    });
    task.await.unwrap();
    common::wait_value(&mut raw, &name, "1").await;
    assert_eq!(messages.next().await, "1");
    p.assert_only(&mut raw, &name, &released).await;

    // While unwinding.
    let task = tokio::spawn({
        let sem = sem.clone();
        async move {
            let _permits = sem.acquire(1).await.unwrap();
            panic!("critical section failed while holding a permit");
        }
    });
    assert!(task.await.unwrap_err().is_panic());
    common::wait_value(&mut raw, &name, "1").await;
    assert_eq!(messages.next().await, "1");
    p.assert_only(&mut raw, &name, &released).await;

    // On a thread outside the runtime.
    let permits = sem.acquire(1).await.unwrap();
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    let thread = std::thread::spawn(move || {
        assert!(tokio::runtime::Handle::try_current().is_err());
        drop(permits);
    });
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap()
        .expect("drop on a plain thread must not panic");
    common::wait_value(&mut raw, &name, "1").await;
    assert_eq!(messages.next().await, "1");
    p.assert_only(&mut raw, &name, &released).await;

    // While Redis is frozen: the drop returns at once; the release runs once it answers.
    let permits = sem.acquire(1).await.unwrap();
    server.pause();
    let dropped = timeout(
        Duration::from_secs(2),
        tokio::spawn(async move { drop(permits) }),
    )
    .await;
    server.resume();
    assert!(
        matches!(dropped, Ok(Ok(()))),
        "drop in a task blocked or panicked: {dropped:?}"
    );
    common::wait_value(&mut raw, &name, "1").await;
    assert_eq!(messages.next().await, "1");
    p.assert_only(&mut raw, &name, &released).await;
    messages.none_within(ms(200)).await;

    // A drop after `shutdown` releases nothing (the permit is not given back: nothing in
    // Redis records who holds it). (A drop right before `shutdown`:
    // `shutdown_completes_the_permit_releases_scheduled_before_it`.)
    let permits = sem.acquire(1).await.unwrap();
    client.shutdown().await;
    drop(permits);
    sleep(ms(250)).await;
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    messages.none_within(ms(200)).await;
}

/// `shutdown` completes every release scheduled before it (as `Client::shutdown` documents, and
/// as the locks do: `shutdown_completes_pending_releases`), so permits dropped right before it
/// are given back. One thread: the releases cannot run before `shutdown` is called.
#[tokio::test]
async fn shutdown_completes_the_permit_releases_scheduled_before_it() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("drop-permits-shutdown");
    let sem = client.semaphore(&name);
    assert!(sem.try_set_permits(2).await.unwrap());
    let (first, second) = (sem.acquire(1).await.unwrap(), sem.acquire(1).await.unwrap());
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    drop(first);
    drop(second);
    client.shutdown().await;
    assert_eq!(
        value(&mut raw, &name).await.as_deref(),
        Some("2"),
        "the permits dropped before shutdown were not given back"
    );
    Primitive::Semaphore
        .assert_only(&mut raw, &name, &State::Value("2".to_owned()))
        .await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn the_owner_takes_the_lock_again_right_after_dropping_its_guard; except {}; bug {
    nonreentrant: "bug: the owner's acquire right after it dropped its guard fails with NotReentrant (lock() too, which should wait) while the release on drop is still pending",
    nonreentrant_fair: "bug: the owner's acquire right after it dropped its guard fails with NotReentrant (lock() too, which should wait) while the release on drop is still pending",
    token: "bug: the owner's acquire right after it dropped its guard fails with NotReentrant (lock() too, which should wait) while the release on drop is still pending",
});

/// A dropped guard's release runs in the background; the owner's acquire right after it is
/// granted (a reentrant kind may re-enter the hold being released, whose release then leaves
/// the count right), and `lock()` never fails on a free lock. The kinds that refuse a re-entry
/// refuse it with `NotReentrant` while the release is pending, although the owner holds no
/// guard: the client counts the dropped hold until its release ran.
async fn the_owner_takes_the_lock_again_right_after_dropping_its_guard(kind: Kind) {
    const ITERATIONS: usize = 200;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("drop-again");
    let lock = kind.any(&client, &name);
    let opts = LockOptions::new().owner(Owner::new(5));
    let mut refused = Vec::new();
    for i in 0..ITERATIONS {
        let guard = match timeout(Duration::from_secs(5), lock.lock_with_options(&opts)).await {
            Ok(Ok(guard)) => guard,
            Ok(Err(e)) => {
                refused.push(format!("iteration {i}, lock(): {e}"));
                continue;
            }
            Err(_) => panic!("{kind}: lock() did not return within 5 s"),
        };
        drop(guard);
        match lock
            .try_lock_with_options(Duration::from_secs(2), &opts)
            .await
        {
            Ok(Some(g)) => g.unlock().await.unwrap(),
            Ok(None) => panic!("{kind}: iteration {i}: not granted within 2 s"),
            Err(e) => refused.push(format!("iteration {i}, try_lock_for: {e}")),
        }
    }
    assert!(
        refused.is_empty(),
        "{kind}: {} refusals in {ITERATIONS} iterations: {:?}",
        refused.len(),
        &refused[..refused.len().min(3)]
    );
    assert!(common::gone_within(&mut raw, &name, Duration::from_secs(2)).await);
    client.shutdown().await;
    kind.assert_nothing_left(&mut raw, &[&name]).await;
}
