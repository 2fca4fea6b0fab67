//! Redis restarts without persistence (the restart fault of RELIABILITY.md): every lock
//! vanishes. Holders learn it from the watchdog, waiters acquire once Redis is back, the client
//! keeps working.
//!
//! Every test runs once per lock kind (`common::Kind`, `per_kind!`). A read hold does not keep
//! other readers out: the waiter behind a read holder takes the write half (`Kind::rival`).
//! After the restart the server has no scripts loaded; the read half's `is_locked` is a script
//! too. The fenced lock's token counter vanishes with the rest: the first grant after the
//! restart draws token 1 again (fencing needs a server that keeps its data).
//!
//! The semaphores and the latch (`common::Primitive`, `per_primitive!`): a waiter of a closed
//! one goes on waiting through the restart and is let in once it is opened again; the latch,
//! whose key vanished, is open, and its waiter returns by itself.

mod common;

use std::time::{Duration, Instant};

use common::{
    Kind, Primitive, RedisServer, State, Taken, per_kind, per_primitive, state, unique_name,
};
use redisson_sync::{Client, Error, LockOptions, Owner};

fn new_client(server: &RedisServer) -> Client {
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
    let holder = new_client(&server);
    let waiter = new_client(&server);
    let name = unique_name("restart");
    let guard = kind.any(&holder, &name).lock().await.unwrap();
    let guard_token = guard.token();

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
        state(&mut raw, &name).await,
        waiter_kind.hold_state(&waiter, Owner::new(9), 1)
    );
    // The fenced lock's counter restarted with the server: token 1 again, as the holder's.
    assert_eq!(guard_token, kind.draws_token().then_some(1), "{kind}");
    assert_eq!(got.token(), kind.draws_token().then_some(1), "{kind}");
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
    let idle = new_client(&server);
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
                assert!(matches!(e, Error::Connection { .. }), "{e}");
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

/// Calls `op` until it succeeds, at most twice: after a restart a client may meet one broken
/// pooled connection (which retires them all); panics on a second failure.
async fn after_at_most_one_failure<T, F>(what: &str, mut op: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Result<T, Error>>,
{
    match op().await {
        Ok(v) => v,
        Err(e) => {
            assert!(matches!(e, Error::Connection { .. }), "{what}: {e}");
            op().await
                .unwrap_or_else(|e| panic!("{what}: a second failure after the restart: {e}"))
        }
    }
}

per_primitive!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn after_a_restart_waiters_of_primitives_are_let_in);

async fn after_a_restart_waiters_of_primitives_are_let_in(p: Primitive) {
    let mut server = RedisServer::start();
    let setter = new_client(&server);
    let waiter = new_client(&server);
    let name = unique_name("restart-primitive");
    p.close(&setter, &name).await;

    let waiting = {
        let (client, name) = (waiter.clone(), name.clone());
        tokio::spawn(async move {
            // Errors while Redis is down end this attempt; retry, bounded.
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                match p
                    .try_acquire_for(&client, &name, Duration::from_secs(15))
                    .await
                {
                    Ok(Some(taken)) => return taken,
                    Ok(None) => panic!("{p}: gave up within its wait"),
                    Err(e) => {
                        assert!(
                            Instant::now() < deadline,
                            "{p}: waiter never recovered: {e}"
                        );
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        })
    };
    let mut raw = server.conn().await;
    p.wait_parked(&mut raw, &name, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());

    server.stop();
    server.restart();
    let mut raw = server.conn().await;

    if p == Primitive::Latch {
        // The latch vanished: a missing latch is open, and its waiter sees it.
    } else {
        // The semaphore vanished: no permits, so its waiter goes on waiting, until one is
        // released.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!waiting.is_finished(), "{p}: let in without a permit");
        after_at_most_one_failure("open", || async {
            match p {
                Primitive::Semaphore => setter.semaphore(&name).release(1).await,
                _ => setter
                    .permit_expirable_semaphore(&name)
                    .add_permits(1)
                    .await
                    .map(drop),
            }
        })
        .await;
    }
    let taken = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("waiter let in after the restart")
        .unwrap();
    match (&taken, p) {
        (Taken::Open, Primitive::Latch) => assert_eq!(state(&mut raw, &name).await, State::Absent),
        (Taken::Permits(_) | Taken::Ids(_), _) => {
            assert_eq!(
                common::value(&mut raw, &name).await.as_deref(),
                Some("0"),
                "{p}"
            );
        }
        other => panic!("{p}: took {other:?}"),
    }
    p.give_back(&waiter, &name, taken).await;
    p.assert_only(&mut raw, &name, &p.opened_state()).await;
    setter.shutdown().await;
    waiter.shutdown().await;
}

per_primitive!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn an_idle_client_of_primitives_recovers_after_a_restart);

/// As `an_idle_client_recovers_after_a_restart` for the locks: queries retry once on a fresh
/// connection; an acquire fails at most once with a connection error.
async fn an_idle_client_of_primitives_recovers_after_a_restart(p: Primitive) {
    let mut server = RedisServer::start();
    let idle = new_client(&server);
    let name = unique_name("idle-primitive");
    // Open a few pooled connections.
    let names: Vec<String> = (0..4).map(|i| format!("{name}:{i}")).collect();
    futures_util::future::join_all(names.iter().map(|n| p.close(&idle, n))).await;
    server.stop();
    server.restart();

    // An acquire: at most one failure, then the exact answer of a primitive that vanished (a
    // semaphore without permits, an open latch).
    let got = after_at_most_one_failure("try_acquire", || {
        p.try_acquire_for(&idle, &name, Duration::ZERO)
    })
    .await;
    match got {
        None => assert_ne!(p, Primitive::Latch),
        Some(Taken::Open) => assert_eq!(p, Primitive::Latch),
        Some(other) => panic!("{p}: took {other:?} from a semaphore without permits"),
    }
    // Everything works at once from here on.
    p.close(&idle, &name).await;
    let mut raw = server.conn().await;
    p.assert_only(&mut raw, &name, &p.closed_state()).await;
    idle.shutdown().await;
}
