//! Every operation of the reentrant lock, with the exact Redis state after each step.

mod common;

use std::time::Duration;

use common::{RedisServer, client, client_field, client_list, exists, field, pttl, unique_name};
use redis::AsyncCommands;
use redisson_sync::{Error, LockOptions, Owner, Ttl};

#[tokio::test]
async fn lock_writes_redisson_hash_and_ttl() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("lock");
    let lock = client.lock(&name);

    let guard = lock.lock().await.unwrap();
    let owner = guard.owner();
    let field = format!("{}:{}", client.id(), owner.id());
    let key_type: String = redis::cmd("TYPE")
        .arg(&name)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(key_type, "hash");
    let all: Vec<(String, String)> = raw.hgetall(&name).await.unwrap();
    assert_eq!(all, vec![(field.clone(), "1".to_owned())]);
    let pttl: i64 = raw.pttl(&name).await.unwrap();
    assert!((29_000..=30_000).contains(&pttl), "pttl {pttl}");

    assert!(lock.is_locked().await.unwrap());
    assert!(lock.is_held_by(owner).await.unwrap());
    assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
    assert!(!lock.is_held_by(Owner::new(owner.id() + 1)).await.unwrap());
    match lock.remaining_ttl().await.unwrap() {
        Ttl::Remaining(d) => assert!(d > Duration::from_secs(29) && d <= Duration::from_secs(30)),
        other => panic!("{other:?}"),
    }

    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count(owner).await.unwrap(), 0);
    assert_eq!(lock.remaining_ttl().await.unwrap(), Ttl::Absent);
    assert_eq!(Ttl::Absent.as_redis_millis(), -2);
    client.shutdown().await;
}

#[tokio::test]
async fn unlock_publishes_zero_on_the_lock_channel() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = unique_name("pub");
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    let channel = format!("redisson_lock__channel:{{{name}}}");
    pubsub.subscribe(&channel).await.unwrap();

    let lock = client.lock(&name);
    let g1 = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    g2.unlock().await.unwrap(); // partial release: no message
    g1.unlock().await.unwrap(); // full release: "0"
    let mut stream = pubsub.on_message();
    let msg = tokio::time::timeout(Duration::from_secs(2), futures_next(&mut stream))
        .await
        .expect("unlock message")
        .unwrap();
    assert_eq!(msg.get_channel_name(), channel);
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    // exactly one message
    assert!(
        tokio::time::timeout(Duration::from_millis(200), futures_next(&mut stream))
            .await
            .is_err()
    );
    drop(stream);
    client.shutdown().await;
}

async fn futures_next<S: futures_util::Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    use futures_util::StreamExt;
    s.next().await
}

#[tokio::test]
async fn another_owner_is_excluded_and_try_lock_reports_contention() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock(unique_name("excl"));
    let a = LockOptions::new().owner(Owner::new(1));
    let b = LockOptions::new().owner(Owner::new(2));
    let ga = lock
        .try_lock_with_options(Duration::ZERO, &a)
        .await
        .unwrap()
        .unwrap();
    assert!(
        lock.try_lock_with_options(Duration::ZERO, &b)
            .await
            .unwrap()
            .is_none()
    );
    let t = std::time::Instant::now();
    assert!(
        lock.try_lock_with_options(Duration::from_millis(300), &b)
            .await
            .unwrap()
            .is_none()
    );
    assert!(t.elapsed() >= Duration::from_millis(300));
    ga.unlock().await.unwrap();
    let gb = lock
        .try_lock_with_options(Duration::ZERO, &b)
        .await
        .unwrap()
        .unwrap();
    gb.unlock().await.unwrap();
    client.shutdown().await;
}

#[tokio::test]
async fn force_unlock_frees_and_the_old_guard_reports_not_held() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock(unique_name("force"));
    let g = lock
        .lock_with_options(&LockOptions::new().lease(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert!(!lock.force_unlock().await.unwrap());
    assert!(!lock.is_locked().await.unwrap());
    let err = g.unlock().await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
    client.shutdown().await;
}

#[tokio::test]
async fn hold_counts_go_0_1_0_2_1_0() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("count");
    let lock = client.lock(&name);
    let me = Owner::current();
    let field = field(&client, me);
    let count = async |raw: &mut redis::aio::MultiplexedConnection| -> Option<String> {
        raw.hget(&name, &field).await.unwrap()
    };

    assert_eq!(lock.hold_count(me).await.unwrap(), 0);
    let g = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count(me).await.unwrap(), 1);
    assert_eq!(count(&mut raw).await.as_deref(), Some("1"));
    g.unlock().await.unwrap();
    assert_eq!(lock.hold_count(me).await.unwrap(), 0);
    assert_eq!(count(&mut raw).await, None);

    let g1 = lock.lock().await.unwrap();
    let g2 = lock.try_lock().await.unwrap().expect("re-entry");
    assert_eq!(lock.hold_count(me).await.unwrap(), 2);
    assert_eq!(count(&mut raw).await.as_deref(), Some("2"));
    let fields: usize = raw.hlen(&name).await.unwrap();
    assert_eq!(fields, 1, "one holder field, count 2");
    g2.unlock().await.unwrap();
    assert_eq!(lock.hold_count(me).await.unwrap(), 1);
    assert!(lock.is_locked().await.unwrap());
    g1.unlock().await.unwrap();
    assert_eq!(lock.hold_count(me).await.unwrap(), 0);
    assert!(!lock.is_locked().await.unwrap());
    client.shutdown().await;
}

/// docs/LAYOUT.md §2.6: a re-entry resets the TTL to its own lease; a partial unlock
/// re-applies the releasing hold's lease.
#[tokio::test]
async fn ttl_rules_of_reentry_and_partial_unlock() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("ttl");
    let lock = client.lock(&name);
    let lease = |s| LockOptions::new().lease(Duration::from_secs(s));

    // Redisson testRemainTimeToLive2: three lock(10 s), two unlocks -> TTL within 9..10 s.
    let g1 = lock.lock_with_options(&lease(10)).await.unwrap();
    let g2 = lock.lock_with_options(&lease(10)).await.unwrap();
    let g3 = lock.lock_with_options(&lease(10)).await.unwrap();
    g3.unlock().await.unwrap();
    g2.unlock().await.unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!((9_000..=10_000).contains(&t), "pttl {t}");

    // re-entry with a longer lease raises the TTL to that lease
    let g4 = lock.lock_with_options(&lease(100)).await.unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!((99_000..=100_000).contains(&t), "pttl {t}");
    // re-entry with a shorter lease lowers it
    let g5 = lock.lock_with_options(&lease(20)).await.unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!((19_000..=20_000).contains(&t), "pttl {t}");
    // partial unlock of the 20 s hold re-applies 20 s; of the 100 s hold, 100 s
    g5.unlock().await.unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!((19_000..=20_000).contains(&t), "pttl {t}");
    g4.unlock().await.unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!((99_000..=100_000).contains(&t), "pttl {t}");
    // a watchdog re-entry uses the watchdog timeout (30 s here)
    let g6 = lock.lock().await.unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!((29_000..=30_000).contains(&t), "pttl {t}");
    assert_eq!(g6.lease(), None);
    assert_eq!(g1.lease(), Some(Duration::from_secs(10)));
    g6.unlock().await.unwrap();
    g1.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    client.shutdown().await;
}

#[tokio::test]
async fn explicit_lease_expires_and_another_owner_takes_over() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock(unique_name("lease"));
    let a = LockOptions::new()
        .owner(Owner::new(1))
        .lease(Duration::from_millis(300));
    let ga = lock.lock_with_options(&a).await.unwrap();
    assert_eq!(ga.lease(), Some(Duration::from_millis(300)));
    // Redisson testExpire: the other owner gets it once the lease ran out, not before.
    let b = LockOptions::new().owner(Owner::new(2));
    let t = std::time::Instant::now();
    let gb = lock
        .try_lock_with_options(Duration::from_secs(5), &b)
        .await
        .unwrap()
        .expect("acquired after the lease");
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(250), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    assert!(lock.is_held_by(Owner::new(2)).await.unwrap());
    assert!(!lock.is_held_by(Owner::new(1)).await.unwrap());
    let err = ga.unlock().await.unwrap_err();
    assert!(err.is_not_held(), "{err}");
    assert!(lock.is_held_by(Owner::new(2)).await.unwrap(), "untouched");
    gb.unlock().await.unwrap();
    client.shutdown().await;
}

#[tokio::test]
async fn two_clients_have_distinct_ids_and_fields() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c1 = client(&server);
    let c2 = client(&server);
    assert_ne!(c1.id(), c2.id());
    let name = unique_name("ids");
    let g = c1
        .lock(&name)
        .lock_with_options(&LockOptions::new().owner(Owner::new(5)))
        .await
        .unwrap();
    // same owner number, other client: not the holder
    assert!(!c2.lock(&name).is_held_by(Owner::new(5)).await.unwrap());
    assert!(
        c2.lock(&name)
            .try_lock_with_options(Duration::ZERO, &LockOptions::new().owner(Owner::new(5)))
            .await
            .unwrap()
            .is_none()
    );
    let fields: Vec<String> = raw.hkeys(&name).await.unwrap();
    assert_eq!(fields, vec![format!("{}:5", c1.id())]);
    g.unlock().await.unwrap();
    c1.shutdown().await;
    c2.shutdown().await;
}

#[tokio::test]
async fn names_with_braces_use_their_own_hash_tag() {
    let server = RedisServer::start();
    let client = client(&server);
    let name = format!("{{{}}}:lock", unique_name("tag"));
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    let channel = format!("redisson_lock__channel:{name}");
    pubsub.subscribe(&channel).await.unwrap();
    let g = client.lock(&name).lock().await.unwrap();
    g.unlock().await.unwrap();
    let mut stream = pubsub.on_message();
    let msg = tokio::time::timeout(Duration::from_secs(2), futures_next(&mut stream))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(msg.get_channel_name(), channel);
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    drop(stream);
    client.shutdown().await;
}

/// `CLIENT LIST TYPE normal`: the ids of the server's plain (not pub/sub) connections.
async fn normal_clients(raw: &mut redis::aio::MultiplexedConnection) -> Vec<u64> {
    client_list(raw, &["TYPE", "normal"])
        .await
        .iter()
        .map(|line| client_field(line, "id").parse().unwrap())
        .collect()
}

/// The server's plain connections other than `own` (the test's): exactly `n`, each of which
/// last ran `EVALSHA` (a lock script).
async fn assert_connections_ran_evalsha(
    raw: &mut redis::aio::MultiplexedConnection,
    own: u64,
    n: usize,
) {
    let mut clients = normal_clients(raw).await;
    clients.retain(|id| *id != own);
    assert_eq!(clients.len(), n, "the client's connections: {clients:?}");
    for id in clients {
        let line = client_list(raw, &["ID", &id.to_string()]).await;
        assert_eq!(client_field(&line[0], "cmd"), "evalsha", "connection {id}");
    }
}

/// A burst of first calls (256 tasks locking at once on a client that has no connection yet)
/// opens as many connections as `connections` says (1, then 2 by default), which the calls
/// then take in turn (each has run the lock scripts), not one per call the pool could not
/// serve at that instant (up to its size, then idle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_first_calls_opens_the_configured_connections() {
    for connections in [Some(1), None] {
        let server = RedisServer::start();
        let mut raw = server.conn().await;
        let own: u64 = redis::cmd("CLIENT")
            .arg("ID")
            .query_async(&mut raw)
            .await
            .unwrap();
        assert_eq!(normal_clients(&mut raw).await, vec![own]);
        let mut builder = common::builder(server.url());
        if let Some(n) = connections {
            builder = builder.connections(n);
        }
        let client = builder.build().unwrap();
        let name = unique_name("burst");
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(256));
        let tasks: Vec<_> = (0..256)
            .map(|i| {
                let lock = client.lock(format!("{name}:{i}"));
                let start = start.clone();
                tokio::spawn(async move {
                    start.wait().await;
                    for _ in 0..2 {
                        lock.try_lock()
                            .await
                            .unwrap()
                            .unwrap()
                            .unlock()
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_connections_ran_evalsha(&mut raw, own, connections.unwrap_or(2)).await;
        client.shutdown().await;
    }
}

/// The first call opens every connection `connections` asks for (2 by default), and the
/// calls of one task at a time then take them in turn: none waits for a connection to open
/// later (tests/link_faults.rs delays the link after the first call).
#[tokio::test]
async fn the_first_call_opens_every_connection() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = common::builder(server.url()).build().unwrap();
    let name = unique_name("first");
    let guard = client.lock(&name).try_lock().await.unwrap().unwrap();
    // This connection and the client's two.
    assert_eq!(normal_clients(&mut raw).await.len(), 3);
    guard.unlock().await.unwrap();
    for i in 0..4 {
        let guard = client.lock(format!("{name}:{i}")).try_lock().await.unwrap();
        guard.unwrap().unlock().await.unwrap();
    }
    let own: u64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_connections_ran_evalsha(&mut raw, own, 2).await;
    client.shutdown().await;
}

/// A client whose pool has room for one connection only gets a new one after the server killed
/// it: the dead one leaves its place first (one failed call, then the lock works again).
#[tokio::test]
async fn a_pool_of_one_replaces_its_killed_connection() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = common::builder(server.url()).pool_size(1).build().unwrap();
    let name = unique_name("one");
    let lock = client.lock(&name);
    lock.try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let killed: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(killed, 1, "the client's one connection");
    let mut errors = 0;
    let guard = loop {
        match lock.try_lock().await {
            Ok(Some(guard)) => break guard,
            Ok(None) => panic!("nobody holds it"),
            Err(e) => {
                assert!(matches!(e, Error::Connection { .. }), "{e}");
                errors += 1;
                assert!(errors <= 1, "a second failed call: {e}");
            }
        }
    };
    guard.unlock().await.unwrap();
    assert_eq!(normal_clients(&mut raw).await.len(), 2);
    client.shutdown().await;
}
