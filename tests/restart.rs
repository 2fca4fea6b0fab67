//! Redis restarts without persistence (RELIABILITY_TESTS.md T7): every lock vanishes. Holders
//! learn it from the watchdog, waiters acquire once Redis is back, the client keeps working.
//!
//! Every test runs once per lock kind (`common::Kind`, `per_kind!`). A read hold does not keep
//! other readers out: the waiter behind a read holder takes the write half (`Kind::rival`).
//! After the restart the server has no scripts loaded; the read half's `is_locked` is a script
//! too.

mod common;

use std::time::{Duration, Instant};

use common::{Kind, RedisServer, hash, per_kind, unique_name};
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

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn after_a_restart_holders_learn_the_loss_and_waiters_acquire);

async fn after_a_restart_holders_learn_the_loss_and_waiters_acquire(kind: Kind) {
    let mut server = RedisServer::start();
    let holder = client(&server);
    let waiter = client(&server);
    let name = unique_name("restart");
    let guard = kind.any(&holder, &name).lock().await.unwrap();

    // A waiter on the other client, subscribed and sleeping (behind a read holder, a writer).
    let waiter_kind = kind.rival();
    let waiting = {
        let lock = waiter_kind.any(&waiter, &name);
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
    assert_eq!(
        hash(&mut raw, &name).await,
        waiter_kind.hold_hash(&waiter, Owner::new(9), 1)
    );
    got.unlock().await.unwrap();

    // Both clients met the broken connections already (renewals, attempts), which retired
    // every connection opened before the restart: the next operations work at once.
    for client in [&holder, &waiter] {
        let lock = kind.any(client, &unique_name("after"));
        let g = lock.lock().await.expect("lock works after the restart");
        assert!(lock.is_locked().await.unwrap());
        g.unlock().await.unwrap();
    }
    holder.shutdown().await;
    waiter.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn an_idle_client_recovers_after_a_restart);

/// A client idle during the restart still has broken connections in its pool: queries retry
/// once on a fresh connection; a lock operation (not retried: an acquire may have run) fails
/// at most once with a connection error, which retires every stale connection.
async fn an_idle_client_recovers_after_a_restart(kind: Kind) {
    let mut server = RedisServer::start();
    let idle = client(&server);
    let name = unique_name("idle");
    // Open a few pooled connections.
    let locks: Vec<_> = (0..4)
        .map(|i| kind.any(&idle, &format!("{name}:{i}")))
        .collect();
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
    let lock = kind.any(&idle, &name);
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
