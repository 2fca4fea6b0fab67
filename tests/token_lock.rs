//! The plain token lock (`client.token_lock(name)`), what only it does: exactly what it
//! writes with its default random values (`SET name <value> NX PX lease`, a string and its
//! TTL, nothing else, a fresh value per acquisition), compare-and-delete that never deletes
//! another holder's value, the value formats and sharing a lock with a service that hand-wrote
//! the same protocol, the `ClientId` format's one holder per client, and the random format's
//! own paths under cancellation and lost replies (an attempt's random value settles its
//! outcome exactly).
//!
//! What the token lock shares with every kind (release on drop, the watchdog, re-entry,
//! errors, leases, cancellation, faults) runs in the test matrix (`common::Kind::Token`, with
//! `<client id>:<owner id>` values).
//!
//! Every loop is bounded in count and time.

mod common;

use std::time::Duration;

use common::{
    FaultProxy, Kind, POLL_LIMIT, RedisServer, client, command_stats, dbsize, exists, key_type, ms,
    pttl, reset_stats, script_calls, unique_name, value, wait_gone,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner, ValueFormat};
use tokio::time::{Instant, sleep, timeout};

/// What a hand-written service's release does: compare-and-delete with its own value.
async fn service_release(raw: &mut MultiplexedConnection, key: &str, token: &str) -> i64 {
    redis::cmd("EVAL")
        .arg("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0")
        .arg(1)
        .arg(key)
        .arg(token)
        .query_async(raw)
        .await
        .unwrap()
}

fn is_random_token(token: &str) -> bool {
    token.len() == 32
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn lease(d: Duration) -> LockOptions {
    LockOptions::new().lease(d)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_writes_set_nx_px_and_a_second_client_waits_for_the_unlock() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client(&server);
    let b = client(&server);
    let name = unique_name("token");

    // An explicit lease: exactly `SET name token PX 10000`, nothing else.
    let guard = a
        .token_lock(&name)
        .try_lock_with_options(Duration::ZERO, &lease(ms(10_000)))
        .await
        .unwrap()
        .expect("a free lock is granted");
    assert_eq!(guard.name(), name);
    assert!(is_random_token(guard.holder()), "{}", guard.holder());
    assert_eq!(guard.lease(), Some(ms(10_000)));
    assert_eq!(key_type(&mut raw, &name).await, "string");
    assert_eq!(
        value(&mut raw, &name).await.as_deref(),
        Some(guard.holder())
    );
    let ttl = pttl(&mut raw, &name).await;
    assert!((9_000..=10_000).contains(&ttl), "pttl {ttl}");
    assert_eq!(dbsize(&mut raw).await, 1, "only the lock key is written");
    let until = guard.valid_until();
    let now = std::time::Instant::now();
    assert!(until > now + ms(9_000) && until <= now + ms(10_000));
    assert!(!guard.is_lost());

    // Another client finds it busy, then waits for it.
    let lock_b = b.token_lock(&name);
    assert!(lock_b.try_lock().await.unwrap().is_none());
    assert!(lock_b.try_lock_for(ms(150)).await.unwrap().is_none());
    let waiter = tokio::spawn(async move {
        let g = lock_b.lock().await.unwrap();
        (g, std::time::Instant::now())
    });
    sleep(ms(200)).await;
    assert!(!waiter.is_finished());
    assert_eq!(
        value(&mut raw, &name).await.as_deref(),
        Some(guard.holder())
    );
    let first = guard.holder().to_owned();
    guard.unlock().await.unwrap();
    let unlocked = std::time::Instant::now();
    let (g, got) = timeout(POLL_LIMIT, waiter).await.unwrap().unwrap();
    assert!(
        got.duration_since(unlocked) < ms(500),
        "the poller took {:?}",
        got.duration_since(unlocked)
    );
    assert_ne!(g.holder(), first, "a fresh token per acquisition");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(g.holder()));
    // No lease given: the watchdog timeout (30 s).
    assert_eq!(g.lease(), None);
    let ttl = pttl(&mut raw, &name).await;
    assert!((29_000..=30_000).contains(&ttl), "pttl {ttl}");

    // Dropping the guard releases it in the background.
    drop(g);
    wait_gone(&mut raw, &name, POLL_LIMIT).await;
    assert_eq!(dbsize(&mut raw).await, 0);
    a.shutdown().await;
    b.shutdown().await;
}

/// The `INFO commandstats` calls of the commands a token lock sends, since the last reset:
/// `SET` (the plain one and the scripts' own), script runs, and the script's `TYPE` and `PTTL`.
async fn token_commands(raw: &mut MultiplexedConnection) -> [u64; 4] {
    [
        command_stats(raw, "set").await.calls,
        script_calls(raw).await,
        command_stats(raw, "type").await.calls,
        command_stats(raw, "pttl").await.calls,
    ]
}

/// What goes to Redis: a free lock is one plain `SET NX PX` and no script; a refused first
/// attempt is that `SET` and then the script, which says why (another holder's PTTL); every
/// later poll of a wait is the script alone, which also grants when it finds the name free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_lock_is_one_set_nx_px_and_only_a_refusal_runs_the_script() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client(&server);
    let b = client(&server);
    let name = unique_name("token");
    // Both clients connected and every script loaded before counting.
    for c in [&a, &b] {
        let warm = unique_name("warm");
        let g = c
            .token_lock(&warm)
            .lock_with_options(&lease(ms(10_000)))
            .await
            .unwrap();
        assert!(c.token_lock(&warm).try_lock().await.unwrap().is_none());
        g.unlock().await.unwrap();
    }

    reset_stats(&mut raw).await;
    let guard = a
        .token_lock(&name)
        .lock_with_options(&lease(ms(10_000)))
        .await
        .unwrap();
    assert_eq!(
        token_commands(&mut raw).await,
        [1, 0, 0, 0],
        "SET, no script"
    );
    assert_eq!(
        value(&mut raw, &name).await.as_deref(),
        Some(guard.holder())
    );
    let ttl = pttl(&mut raw, &name).await;
    assert!((9_000..=10_000).contains(&ttl), "pttl {ttl}");

    // Refused: the plain SET, then the script (its TYPE, SET NX, GET, PTTL).
    reset_stats(&mut raw).await;
    let lock_b = b.token_lock(&name);
    assert!(lock_b.try_lock().await.unwrap().is_none());
    assert_eq!(token_commands(&mut raw).await, [2, 1, 1, 1]);
    assert_eq!(command_stats(&mut raw, "get").await.calls, 1);

    // A wait: one plain SET, then polls that are the script alone; the last one grants.
    reset_stats(&mut raw).await;
    let waiter = tokio::spawn(async move { lock_b.try_lock_for(ms(5_000)).await });
    sleep(ms(300)).await;
    guard.unlock().await.unwrap();
    let got = timeout(POLL_LIMIT, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .expect("granted after the unlock");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(got.holder()));
    let [sets, scripts, types, pttls] = token_commands(&mut raw).await;
    // Scripts: the waiter's polls and the holder's compare-and-delete.
    let polls = scripts - 1;
    assert!(polls >= 2, "{polls} polls in 300 ms");
    assert_eq!(sets, 1 + polls, "one plain SET, one SET NX per poll");
    assert_eq!(types, polls);
    assert_eq!(
        pttls,
        polls - 1,
        "every poll but the granting one read the PTTL"
    );
    got.unlock().await.unwrap();
    assert_eq!(dbsize(&mut raw).await, 0);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_delete_never_deletes_another_holders_value() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("token");
    let lock = c.token_lock(&name);

    // unlock(): the lease ran out and another service took the lock.
    let guard = lock.lock_with_options(&lease(ms(200))).await.unwrap();
    let token = guard.holder().to_owned();
    timeout(POLL_LIMIT, guard.lost()).await.unwrap();
    wait_gone(&mut raw, &name, POLL_LIMIT).await;
    let () = raw.set_ex(&name, "other-service", 10).await.unwrap();
    match guard.unlock().await {
        Err(Error::NotHeld { name: n, holder }) => {
            assert_eq!(n, name);
            assert_eq!(holder, token);
        }
        other => panic!("expected NotHeld, got {other:?}"),
    }
    assert_eq!(
        value(&mut raw, &name).await.as_deref(),
        Some("other-service")
    );
    let ttl = pttl(&mut raw, &name).await;
    assert!((9_000..=10_000).contains(&ttl), "pttl {ttl}");
    let () = raw.del(&name).await.unwrap();

    // Drop: the same, in the background.
    let guard = lock.lock_with_options(&lease(ms(200))).await.unwrap();
    sleep(ms(300)).await;
    let () = raw.set_ex(&name, "other-service", 10).await.unwrap();
    drop(guard);
    sleep(ms(300)).await;
    assert_eq!(
        value(&mut raw, &name).await.as_deref(),
        Some("other-service")
    );
    // And a holder never takes it from the other service.
    assert!(lock.try_lock_for(ms(100)).await.unwrap().is_none());
    assert_eq!(
        value(&mut raw, &name).await.as_deref(),
        Some("other-service")
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_token_formats_write_the_expected_values() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("token");

    let random = c.token_lock(&name);
    assert_eq!(random.format(), ValueFormat::Random);
    let g1 = random.lock().await.unwrap();
    assert!(is_random_token(g1.holder()));
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(g1.holder()));
    let t1 = g1.holder().to_owned();
    g1.unlock().await.unwrap();
    let g2 = random.lock().await.unwrap();
    assert!(is_random_token(g2.holder()));
    assert_ne!(g2.holder(), t1);
    g2.unlock().await.unwrap();

    let by_client = c.token_lock(&name).with_format(ValueFormat::ClientId);
    assert_eq!(by_client.format(), ValueFormat::ClientId);
    let g = by_client.lock().await.unwrap();
    assert_eq!(g.holder(), c.id());
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(c.id()));
    g.unlock().await.unwrap();

    let by_owner = c
        .token_lock(&name)
        .with_format(ValueFormat::ClientIdAndOwner);
    let g = by_owner
        .lock_with_options(&LockOptions::new().owner(Owner::new(57)))
        .await
        .unwrap();
    let want = format!("{}:57", c.id());
    assert_eq!(g.holder(), want);
    assert_eq!(value(&mut raw, &name).await, Some(want));
    g.unlock().await.unwrap();
    // The default owner is the current task, as for the locks.
    let (token, task) = tokio::spawn(async move {
        let g = by_owner.lock().await.unwrap();
        let token = g.holder().to_owned();
        g.unlock().await.unwrap();
        (token, Owner::current())
    })
    .await
    .unwrap();
    assert_eq!(token, format!("{}:{}", c.id(), task.id()));
    assert!(!exists(&mut raw, &name).await);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_id_and_owner_shares_a_lock_with_a_hand_written_service() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("token");
    let lock = c
        .token_lock(&name)
        .with_format(ValueFormat::ClientIdAndOwner);
    let owner = |n| LockOptions::new().owner(Owner::new(n));
    let service_value = format!("{}:7", c.id());

    // "Another service" holds it with a `<uuid>:<thread>` value.
    let set: Option<String> = redis::cmd("SET")
        .arg(&name)
        .arg(&service_value)
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(set.as_deref(), Some("OK"));
    // Another owner is kept out.
    assert!(
        lock.try_lock_with_options(Duration::ZERO, &owner(8))
            .await
            .unwrap()
            .is_none()
    );
    // The same value, held by a service this client has no guard for: busy, as another
    // holder's hold (not a re-entry, which only a guard of this client makes), Redis unchanged.
    assert!(
        lock.try_lock_with_options(Duration::ZERO, &owner(7))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(value(&mut raw, &name).await, Some(service_value.clone()));
    let ttl = pttl(&mut raw, &name).await;
    assert!((9_000..=10_000).contains(&ttl), "pttl {ttl}");

    // Owner 8 waits; the service's own compare-and-delete lets it in.
    let waiting = lock.clone();
    let waiter = tokio::spawn(async move {
        waiting
            .try_lock_with_options(POLL_LIMIT, &owner(8).lease(ms(10_000)))
            .await
    });
    sleep(ms(150)).await;
    assert!(!waiter.is_finished());
    assert_eq!(service_release(&mut raw, &name, &service_value).await, 1);
    let guard = timeout(POLL_LIMIT, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .expect("owner 8 gets the lock");
    let ours = format!("{}:8", c.id());
    assert_eq!(guard.holder(), ours);
    assert_eq!(value(&mut raw, &name).await, Some(ours.clone()));

    // The service's release with its own value leaves ours alone; a service holder with our
    // value (the same identity) releases it, and our unlock then finds it gone.
    assert_eq!(service_release(&mut raw, &name, &service_value).await, 0);
    assert_eq!(value(&mut raw, &name).await, Some(ours.clone()));
    assert_eq!(service_release(&mut raw, &name, &ours).await, 1);
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    assert!(!exists(&mut raw, &name).await);
    c.shutdown().await;
}

/// The `ClientId` format: every task of the client is the same holder, so another task's
/// acquire is refused as a re-entry (`NotReentrant`) instead of waiting. (A re-entry of the
/// same value in general, for the `ClientIdAndOwner` format: `tests/lock_variants.rs`, with
/// every kind.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_client_id_values_every_task_of_the_client_is_the_same_holder() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("token");
    let by_client = c.token_lock(&name).with_format(ValueFormat::ClientId);
    let held = by_client.lock().await.unwrap();
    let sets = command_stats(&mut raw, "set").await.calls;
    let again = by_client.clone();
    let other_task = tokio::spawn(async move { again.try_lock_for(ms(500)).await.map(|_| ()) })
        .await
        .unwrap();
    match other_task {
        Err(Error::NotReentrant { name: n, holder }) => {
            assert_eq!(n, name);
            assert_eq!(holder, c.id());
        }
        other => panic!("expected NotReentrant, got {other:?}"),
    }
    // Refused before anything was sent: no SET.
    assert_eq!(command_stats(&mut raw, "set").await.calls, sets);
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(c.id()));
    held.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_acquire_futures_and_tiny_waits_leave_no_key_behind() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("token");
    let lock = c.token_lock(&name);

    // A waiter dropped while the lock is held (it polls), then the holder leaves.
    let held = lock.lock().await.unwrap();
    assert!(timeout(ms(200), lock.lock()).await.is_err());
    held.unlock().await.unwrap();
    sleep(ms(200)).await;
    assert!(!exists(&mut raw, &name).await);

    // 2,000 acquires with tiny waits, half of them also dropped mid-flight, while another
    // task keeps taking the lock.
    let busy = {
        let lock = lock.clone();
        tokio::spawn(async move {
            for _ in 0..100 {
                if let Some(g) = lock.try_lock_for(ms(500)).await.unwrap() {
                    sleep(ms(1)).await;
                    g.unlock().await.unwrap();
                }
            }
        })
    };
    let mut granted = 0;
    let started = Instant::now();
    for i in 0..2_000u32 {
        let wait = Duration::from_micros(u64::from(i % 7) * 50);
        if i % 2 == 0 {
            if let Some(g) = lock.try_lock_for(wait).await.unwrap() {
                granted += 1;
                drop(g);
            }
        } else if let Ok(Ok(Some(g))) = timeout(
            Duration::from_micros(u64::from(i % 5) * 40),
            lock.try_lock_for(ms(50)),
        )
        .await
        {
            granted += 1;
            g.unlock().await.unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(60), "too slow");
    }
    timeout(Duration::from_secs(60), busy)
        .await
        .unwrap()
        .unwrap();
    assert!(granted > 0, "no acquire ever succeeded");
    wait_gone(&mut raw, &name, POLL_LIMIT).await;
    sleep(ms(200)).await;
    assert!(!exists(&mut raw, &name).await, "a late grant was left");
    assert_eq!(dbsize(&mut raw).await, 0);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_acquire_reply_is_resolved_and_handed_to_the_caller() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let c = Client::builder()
        .url(proxy.url())
        .watchdog_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    Kind::Token.warm_up(&c).await;
    for wait in [None, Some(ms(2_000)), Some(Duration::ZERO)] {
        let name = unique_name("token");
        let lock = c.token_lock(&name);
        // The acquire's EVALSHA is the first request naming the lock.
        let trigger = proxy.reset_after(name.as_bytes());
        let got = timeout(Duration::from_secs(10), async {
            match wait {
                None => lock.lock().await.map(Some),
                Some(wait) => lock.try_lock_for(wait).await,
            }
        })
        .await
        .expect("the acquire did not return");
        assert!(trigger.fired(), "{wait:?}: the proxy did not reset");
        let guard = match got {
            Ok(Some(guard)) => guard,
            other => panic!("{wait:?}: the grant was not handed out: {other:?}"),
        };
        assert_eq!(
            value(&mut raw, &name).await.as_deref(),
            Some(guard.holder())
        );
        let ttl = pttl(&mut raw, &name).await;
        assert!((25_000..=30_000).contains(&ttl), "pttl {ttl}");
        assert!(!guard.is_lost());
        guard.unlock().await.unwrap();
        assert!(!exists(&mut raw, &name).await);
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_release_reply_is_settled_without_a_second_delete() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let c = Client::builder()
        .url(proxy.url())
        .watchdog_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    Kind::Token.warm_up(&c).await;
    let name = unique_name("token");
    let guard = c
        .token_lock(&name)
        .lock_with_options(&lease(ms(20_000)))
        .await
        .unwrap();
    let dels = command_stats(&mut raw, "del").await.calls;
    // The release's EVALSHA is the next request carrying the token.
    let trigger = proxy.reset_after(guard.holder().as_bytes());
    timeout(Duration::from_secs(10), guard.unlock())
        .await
        .expect("the unlock did not return")
        .expect("the release ran: settled as released");
    assert!(trigger.fired());
    assert!(!exists(&mut raw, &name).await);
    assert_eq!(command_stats(&mut raw, "del").await.calls - dels, 1);
    c.shutdown().await;
}

#[test]
fn handles_and_guards_are_send_sync_and_static() {
    fn check<T: Send + Sync + 'static>() {}
    check::<redisson_sync::TokenLock>();
    check::<redisson_sync::LockGuard>();
    check::<ValueFormat>();
    assert_eq!(ValueFormat::default(), ValueFormat::Random);
}

#[tokio::test]
async fn a_handle_is_cheap_debug_and_keeps_its_format() {
    let server = RedisServer::start();
    let c = client(&server);
    let lock = c.token_lock("jobs:1").with_format(ValueFormat::ClientId);
    let copy = lock.clone();
    assert_eq!(copy.name(), "jobs:1");
    assert_eq!(copy.format(), ValueFormat::ClientId);
    let shown = format!("{lock:?}");
    assert!(
        shown.contains("TokenLock") && shown.contains("jobs:1") && shown.contains(c.id()),
        "{shown}"
    );
    c.shutdown().await;
    assert!(matches!(lock.try_lock().await, Err(Error::Shutdown)));
}
