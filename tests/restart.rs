//! Redis restarts without persistence (RELIABILITY_TESTS.md T7): every lock vanishes. Holders
//! learn it from the watchdog, waiters acquire once Redis is back, the client keeps working.

mod common;

use std::time::{Duration, Instant};

use common::{RedisServer, unique_name};
use redis::AsyncCommands;
use redisson_sync::{Client, Error, LockOptions, Owner};

fn client(server: &RedisServer) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_timeout(Duration::from_millis(600))
        .recheck_interval(Duration::from_millis(200))
        .command_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_holders_learn_the_loss_and_waiters_acquire() {
    let mut server = RedisServer::start();
    let holder = client(&server);
    let waiter = client(&server);
    let name = unique_name("restart");
    let guard = holder.lock(&name).lock().await.unwrap();

    // A waiter on the other client, subscribed and sleeping.
    let waiting = {
        let lock = waiter.lock(&name);
        tokio::spawn(async move {
            // Errors while Redis is down end this attempt; retry, bounded.
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                match lock
                    .try_lock_with_options(
                        Duration::from_secs(15),
                        &LockOptions::new().owner(Owner::new(9)),
                    )
                    .await
                {
                    Ok(Some(g)) => return g,
                    Ok(None) => panic!("gave up while the lock was free"),
                    Err(e) => {
                        assert!(Instant::now() < deadline, "waiter never recovered: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());

    server.stop();
    server.restart();

    // The holder's watchdog finds the lock gone.
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the guard reports the loss");
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost { .. })));

    // The waiter acquires on the restarted server.
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("waiter acquired after the restart")
        .unwrap();
    let mut raw = server.conn().await;
    let fields: Vec<String> = raw.hkeys(&name).await.unwrap();
    assert_eq!(fields, vec![format!("{}:9", waiter.id())]);
    got.unlock().await.unwrap();

    // Both clients met the broken connections already (renewals, attempts), which retired
    // every connection opened before the restart: the next operations work at once.
    for client in [&holder, &waiter] {
        let lock = client.lock(unique_name("after"));
        let g = lock.lock().await.expect("lock works after the restart");
        assert!(lock.is_locked().await.unwrap());
        g.unlock().await.unwrap();
    }
    holder.shutdown().await;
    waiter.shutdown().await;
}

/// A client idle during the restart still has broken connections in its pool: queries retry
/// once on a fresh connection; a lock operation (not retried: an acquire may have run) fails
/// at most once with a connection error, which retires every stale connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_client_recovers_after_a_restart() {
    let mut server = RedisServer::start();
    let idle = client(&server);
    let name = unique_name("idle");
    // Open a few pooled connections.
    let locks: Vec<_> = (0..4).map(|i| idle.lock(format!("{name}:{i}"))).collect();
    let guards = futures_util::future::join_all(locks.iter().map(|l| l.try_lock())).await;
    for g in guards {
        g.unwrap().unwrap().forget();
    }
    server.stop();
    server.restart();

    // Read-only queries retry once: no error.
    for lock in &locks {
        assert!(
            !lock.is_locked().await.unwrap(),
            "keys are gone after the restart"
        );
    }
    let lock = idle.lock(&name);
    let mut errors = 0;
    let guard = loop {
        match lock.try_lock().await {
            Ok(Some(g)) => break g,
            Ok(None) => panic!("nobody holds it"),
            Err(e) => {
                assert!(matches!(e, Error::Redis(_)), "{e}");
                errors += 1;
                assert!(
                    errors <= 1,
                    "more than one failed call after the restart: {e}"
                );
            }
        }
    };
    guard.unlock().await.unwrap();
    idle.shutdown().await;
}
