//! Who owns a hold (issue item 2): by default the current Tokio task, so nested locking inside
//! one task re-enters and another task waits; outside a task the current thread; or an explicit
//! [`Owner`]. The owner is the decimal after `<client id>:` in the lock hash field, so every test
//! checks the exact fields and counts in Redis.

mod common;

use std::time::Duration;

use common::{RedisServer, client, exists, field, hash, unique_name};
use redis::AsyncCommands;
use redisson_sync::{Client, LockOptions, Owner};
use tokio::sync::oneshot;
use tokio::time::timeout;

/// Generous bound for anything that should be prompt (2 cores, tests in parallel).
const PROMPT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn nested_lock_in_one_task_reenters_under_the_task_id() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("owners-nested");
    let lock = client.lock(&name);

    let (task_id, owner, field_after_1, field_after_2, counts) = tokio::spawn({
        let lock = lock.clone();
        let client = client.clone();
        let name = name.clone();
        async move {
            let mut raw = server_conn_for(&client).await;
            let task_id = tokio::task::id().to_string();
            let owner = Owner::current();
            let c0 = lock.hold_count(Owner::current()).await.unwrap();
            let g1 = lock.lock().await.unwrap();
            let c1 = lock.hold_count(Owner::current()).await.unwrap();
            let after_1 = hash(&mut raw, &name).await;
            let g2 = lock.lock().await.unwrap();
            let c2 = lock.hold_count(Owner::current()).await.unwrap();
            let after_2 = hash(&mut raw, &name).await;
            assert_eq!(g1.owner(), owner);
            assert_eq!(g2.owner(), owner);
            g2.unlock().await.unwrap();
            let c3 = lock.hold_count(owner).await.unwrap();
            g1.unlock().await.unwrap();
            let c4 = lock.hold_count(owner).await.unwrap();
            (task_id, owner, after_1, after_2, [c0, c1, c2, c3, c4])
        }
    })
    .await
    .unwrap();

    // The owner id is the task id, printed as Tokio prints it.
    assert_eq!(owner.id().to_string(), task_id);
    assert!(
        owner.id() < 1 << 62,
        "a task id, not a thread owner: {owner}"
    );
    let field = format!("{}:{task_id}", client.id());
    assert_eq!(field_after_1, vec![(field.clone(), "1".to_owned())]);
    assert_eq!(field_after_2, vec![(field, "2".to_owned())]);
    assert_eq!(counts, [0, 1, 2, 1, 0]);
    assert!(!exists(&mut raw, &name).await);
    client.shutdown().await;
}

/// A raw connection to the server the client talks to (for assertions inside spawned tasks).
async fn server_conn_for(client: &Client) -> redis::aio::MultiplexedConnection {
    redis::Client::open(client.config().url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_task_is_excluded_and_waits_for_the_last_hold() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // A short re-check interval is not needed (the unlock message wakes the waiter), but keep
    // the default 1 s so that a lost message would still be noticed well within PROMPT.
    let client = client(&server);
    let name = unique_name("owners-tasks");
    let lock = client.lock(&name);

    // Task A takes two holds and keeps them until told.
    let (held_tx, held_rx) = oneshot::channel::<Owner>();
    let (release_one_tx, release_one_rx) = oneshot::channel::<()>();
    let (released_one_tx, released_one_rx) = oneshot::channel::<()>();
    let (release_all_tx, release_all_rx) = oneshot::channel::<()>();
    let a = tokio::spawn({
        let lock = lock.clone();
        async move {
            let g1 = lock.lock().await.unwrap();
            let g2 = lock.lock().await.unwrap();
            held_tx.send(Owner::current()).unwrap();
            release_one_rx.await.unwrap();
            g2.unlock().await.unwrap();
            released_one_tx.send(()).unwrap();
            release_all_rx.await.unwrap();
            g1.unlock().await.unwrap();
        }
    });
    let owner_a = timeout(PROMPT, held_rx).await.unwrap().unwrap();
    let field_a = field(&client, owner_a);
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field_a.clone(), "2".to_owned())]
    );

    // Task B: one attempt fails, then a blocking lock() waits.
    let (tried_tx, tried_rx) = oneshot::channel::<(bool, Owner)>();
    let b = tokio::spawn({
        let lock = lock.clone();
        async move {
            let attempt = lock.try_lock().await.unwrap();
            tried_tx
                .send((attempt.is_some(), Owner::current()))
                .unwrap();
            drop(attempt);
            let guard = lock.lock().await.unwrap();
            (guard, Owner::current())
        }
    });
    let (b_got_it, owner_b) = timeout(PROMPT, tried_rx).await.unwrap().unwrap();
    assert!(
        !b_got_it,
        "another task of the same client must not re-enter"
    );
    assert_ne!(owner_a, owner_b);

    // A releases one of its two holds: B keeps waiting.
    release_one_tx.send(()).unwrap();
    timeout(PROMPT, released_one_rx).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!b.is_finished(), "B acquired while A still held one hold");
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field_a.clone(), "1".to_owned())]
    );

    // A releases its last hold: B acquires, under its own task id.
    release_all_tx.send(()).unwrap();
    timeout(PROMPT, a).await.unwrap().unwrap();
    let (guard_b, owner_b2) = timeout(PROMPT, b).await.unwrap().unwrap();
    assert_eq!(owner_b2, owner_b);
    assert_eq!(guard_b.owner(), owner_b);
    let field_b = field(&client, owner_b);
    assert_eq!(hash(&mut raw, &name).await, vec![(field_b, "1".to_owned())]);

    guard_b.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    client.shutdown().await;
}

/// Redisson `RedissonLockTest.testGetHoldCount`: 0, 1, 0, 2, 1, 0.
#[tokio::test]
async fn hold_count_follows_redisson_test_get_hold_count() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("owners-holdcount");
    let counts = tokio::spawn({
        let lock = client.lock(&name);
        let client = client.clone();
        let name = name.clone();
        async move {
            let mut raw = server_conn_for(&client).await;
            let field = field(&client, Owner::current());
            let mut counts = Vec::new();
            let mut raw_counts = Vec::new();
            let mut record = async |counts: &mut Vec<u64>, raw_counts: &mut Vec<Option<String>>| {
                counts.push(lock.hold_count(Owner::current()).await.unwrap());
                raw_counts.push(raw.hget(&name, &field).await.unwrap());
            };
            record(&mut counts, &mut raw_counts).await;
            let g = lock.lock().await.unwrap();
            record(&mut counts, &mut raw_counts).await;
            g.unlock().await.unwrap();
            record(&mut counts, &mut raw_counts).await;
            let g1 = lock.lock().await.unwrap();
            let g2 = lock.lock().await.unwrap();
            record(&mut counts, &mut raw_counts).await;
            g2.unlock().await.unwrap();
            record(&mut counts, &mut raw_counts).await;
            g1.unlock().await.unwrap();
            record(&mut counts, &mut raw_counts).await;
            (counts, raw_counts)
        }
    })
    .await
    .unwrap();
    assert_eq!(counts.0, [0, 1, 0, 2, 1, 0]);
    let raw: Vec<Option<&str>> = counts.1.iter().map(Option::as_deref).collect();
    assert_eq!(
        raw,
        [None, Some("1"), None, Some("2"), Some("1"), None],
        "HGET of the holder field after each step"
    );
    client.shutdown().await;
}

/// Outside any task (the body of `block_on` on a plain thread) the owner is the thread: the
/// same thread re-enters, another thread does not. Thread owners are numbered from 2^62.
#[test]
fn outside_a_task_the_thread_is_the_owner() {
    let server = RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = Client::builder()
        .url(server.url())
        .watchdog_timeout(Duration::from_secs(30))
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    let mut raw = rt.block_on(server.conn());
    let name = unique_name("owners-thread");
    let lock = client.lock(&name);

    let me = Owner::current();
    assert!(me.id() >= 1 << 62, "thread owner {me}");
    let g1 = rt.block_on(lock.lock()).unwrap();
    let g2 = rt.block_on(lock.lock()).unwrap();
    assert_eq!(g1.owner(), me);
    assert_eq!(g2.owner(), me);
    assert_eq!(rt.block_on(lock.hold_count(me)).unwrap(), 2);
    let my_field = field(&client, me);
    assert_eq!(
        rt.block_on(hash(&mut raw, &name)),
        vec![(my_field.clone(), "2".to_owned())]
    );

    // Another thread is another owner: it does not re-enter.
    let (other, attempt_is_some) = std::thread::scope(|s| {
        s.spawn(|| {
            let other = Owner::current();
            let attempt = rt.block_on(lock.try_lock()).unwrap();
            let some = attempt.is_some();
            if let Some(g) = attempt {
                rt.block_on(g.unlock()).unwrap();
            }
            (other, some)
        })
        .join()
        .unwrap()
    });
    assert_ne!(other, me);
    assert!(other.id() >= 1 << 62, "thread owner {other}");
    assert!(!attempt_is_some, "another thread re-entered the lock");
    assert_eq!(
        rt.block_on(hash(&mut raw, &name)),
        vec![(my_field, "2".to_owned())]
    );

    rt.block_on(g2.unlock()).unwrap();
    rt.block_on(g1.unlock()).unwrap();
    assert!(!rt.block_on(exists(&mut raw, &name)));

    // Once free, another thread can take it, under its own thread owner.
    let (third, fields) = std::thread::scope(|s| {
        s.spawn(|| {
            let g = rt.block_on(lock.try_lock()).unwrap().expect("free lock");
            let fields = rt.block_on(hash(&mut raw.clone(), &name));
            rt.block_on(g.unlock()).unwrap();
            (Owner::current(), fields)
        })
        .join()
        .unwrap()
    });
    assert!(third != me && third != other && third.id() >= 1 << 62);
    assert_eq!(fields, vec![(field(&client, third), "1".to_owned())]);
    rt.block_on(client.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_owner_is_shared_across_tasks() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("owners-explicit");
    let lock = client.lock(&name);
    let shared = LockOptions::new().owner(Owner::new(42));

    let g1 = tokio::spawn({
        let (lock, shared) = (lock.clone(), shared.clone());
        async move { lock.lock_with_options(&shared).await.unwrap() }
    })
    .await
    .unwrap();
    let g2 = tokio::spawn({
        let (lock, shared) = (lock.clone(), shared.clone());
        async move {
            lock.try_lock_with_options(Duration::ZERO, &shared)
                .await
                .unwrap()
        }
    })
    .await
    .unwrap()
    .expect("the same explicit owner re-enters from another task");
    assert_eq!(g1.owner(), Owner::new(42));
    assert_eq!(g2.owner(), Owner::new(42));
    assert_eq!(lock.hold_count(Owner::new(42)).await.unwrap(), 2);
    let field = format!("{}:42", client.id());
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field.clone(), "2".to_owned())]
    );

    // A task with its default owner is someone else.
    let other = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock().await.unwrap().is_some() }
    })
    .await
    .unwrap();
    assert!(!other);
    assert_eq!(hash(&mut raw, &name).await, vec![(field, "2".to_owned())]);

    g2.unlock().await.unwrap();
    g1.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    client.shutdown().await;
}

#[tokio::test]
async fn the_same_owner_id_on_two_clients_is_two_owners() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c1 = client(&server);
    let c2 = client(&server);
    assert_ne!(c1.id(), c2.id());
    let name = unique_name("owners-clients");
    let opts = LockOptions::new().owner(Owner::new(42));

    let g1 = c1.lock(&name).lock_with_options(&opts).await.unwrap();
    let attempt = c2
        .lock(&name)
        .try_lock_with_options(Duration::ZERO, &opts)
        .await
        .unwrap();
    assert!(attempt.is_none(), "owner 42 of another client re-entered");
    assert!(c1.lock(&name).is_held_by(Owner::new(42)).await.unwrap());
    assert!(!c2.lock(&name).is_held_by(Owner::new(42)).await.unwrap());
    assert_eq!(c2.lock(&name).hold_count(Owner::new(42)).await.unwrap(), 0);
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(format!("{}:42", c1.id()), "1".to_owned())]
    );

    g1.unlock().await.unwrap();
    let g2 = c2
        .lock(&name)
        .try_lock_with_options(Duration::ZERO, &opts)
        .await
        .unwrap()
        .expect("free lock");
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(format!("{}:42", c2.id()), "1".to_owned())]
    );
    g2.unlock().await.unwrap();
    c1.shutdown().await;
    c2.shutdown().await;
}

/// A guard can be moved to another task and released there (explicitly, or by dropping it);
/// the release is for the owner that acquired, not for the releasing task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_moves_to_another_task_and_is_released_there() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("owners-move");
    let lock = client.lock(&name);

    let guard = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    })
    .await
    .unwrap();
    let owner = guard.owner();
    let field = field(&client, owner);
    assert_eq!(hash(&mut raw, &name).await, vec![(field, "1".to_owned())]);

    // Explicit unlock in a different task (whose own owner id differs).
    let releaser = tokio::spawn(async move {
        let me = Owner::current();
        (me, guard.unlock().await)
    })
    .await
    .unwrap();
    assert_ne!(releaser.0, owner);
    releaser.1.unwrap();
    assert!(!exists(&mut raw, &name).await);

    // Drop in a different task: released in the background, promptly.
    let guard = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    })
    .await
    .unwrap();
    tokio::spawn(async move { drop(guard) }).await.unwrap();
    timeout(PROMPT, async {
        loop {
            if !exists(&mut raw, &name).await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a guard dropped in another task is released");
    client.shutdown().await;
}
