//! The plain token lock (`client.token_lock(name)`): exactly what it writes (`SET name token
//! NX PX lease`, a string and its TTL, nothing else), compare-and-delete that never deletes
//! another holder's value, the watchdog's compare-and-`PEXPIRE`, the token formats and sharing
//! a lock with a service that hand-wrote the same protocol, non-reentrancy, bad input, cancel
//! safety, and a lost acquire or release reply.
//!
//! Every loop is bounded in count and time.

mod common;

use std::time::Duration;

use common::{
    FaultProxy, RedisServer, client, client_with_watchdog, command_stats, dbsize, exists, ms, pttl,
    unique_name,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner, TokenFormat};
use tokio::time::{Instant, sleep, timeout};

/// Upper bound of every poll loop of this file.
const POLL_LIMIT: Duration = Duration::from_secs(5);

async fn value(raw: &mut MultiplexedConnection, key: &str) -> Option<String> {
    raw.get(key).await.unwrap()
}

async fn key_type(raw: &mut MultiplexedConnection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query_async(raw).await.unwrap()
}

/// Polls until `key` is absent; panics after [`POLL_LIMIT`].
async fn wait_absent(raw: &mut MultiplexedConnection, key: &str) {
    let start = Instant::now();
    while exists(raw, key).await {
        assert!(
            start.elapsed() < POLL_LIMIT,
            "{key} is still there: {:?}",
            value(raw, key).await
        );
        sleep(ms(10)).await;
    }
}

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
    assert!(is_random_token(guard.token()), "{}", guard.token());
    assert_eq!(guard.lease(), Some(ms(10_000)));
    assert_eq!(key_type(&mut raw, &name).await, "string");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(guard.token()));
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
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(guard.token()));
    let first = guard.token().to_owned();
    guard.unlock().await.unwrap();
    let unlocked = std::time::Instant::now();
    let (g, got) = timeout(POLL_LIMIT, waiter).await.unwrap().unwrap();
    assert!(
        got.duration_since(unlocked) < ms(500),
        "the poller took {:?}",
        got.duration_since(unlocked)
    );
    assert_ne!(g.token(), first, "a fresh token per acquisition");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(g.token()));
    // No lease given: the watchdog timeout (30 s).
    assert_eq!(g.lease(), None);
    let ttl = pttl(&mut raw, &name).await;
    assert!((29_000..=30_000).contains(&ttl), "pttl {ttl}");

    // Dropping the guard releases it in the background.
    drop(g);
    wait_absent(&mut raw, &name).await;
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
    let token = guard.token().to_owned();
    timeout(POLL_LIMIT, guard.lost()).await.unwrap();
    wait_absent(&mut raw, &name).await;
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
async fn the_watchdog_keeps_the_lock_past_several_leases_and_reports_its_loss() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client_with_watchdog(&server, ms(600));
    let name = unique_name("token");
    let guard = c.token_lock(&name).lock().await.unwrap();
    let token = guard.token().to_owned();
    let ttl = pttl(&mut raw, &name).await;
    assert!((400..=600).contains(&ttl), "pttl {ttl}");

    // Four leases later it is still held, its TTL renewed.
    sleep(ms(2_400)).await;
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(&*token));
    let ttl = pttl(&mut raw, &name).await;
    assert!((1..=600).contains(&ttl), "pttl {ttl}");
    assert!(!guard.is_lost());
    assert!(guard.valid_until() > std::time::Instant::now());

    // Replaced behind its back: the renewal finds another value, the guard reports lost,
    // and the intruder's value is neither extended nor deleted.
    let () = raw.set(&name, "intruder").await.unwrap();
    timeout(ms(2_000), guard.lost())
        .await
        .expect("the guard reports the loss");
    assert!(guard.is_lost());
    match guard.unlock().await {
        Err(Error::LeaseLost { name: n }) => assert_eq!(n, name),
        other => panic!("expected LeaseLost, got {other:?}"),
    }
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("intruder"));
    assert_eq!(pttl(&mut raw, &name).await, -1);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_token_formats_write_the_expected_values() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("token");

    let random = c.token_lock(&name);
    assert_eq!(random.format(), TokenFormat::Random);
    let g1 = random.lock().await.unwrap();
    assert!(is_random_token(g1.token()));
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(g1.token()));
    let t1 = g1.token().to_owned();
    g1.unlock().await.unwrap();
    let g2 = random.lock().await.unwrap();
    assert!(is_random_token(g2.token()));
    assert_ne!(g2.token(), t1);
    g2.unlock().await.unwrap();

    let by_client = c.token_lock(&name).with_format(TokenFormat::ClientId);
    assert_eq!(by_client.format(), TokenFormat::ClientId);
    let g = by_client.lock().await.unwrap();
    assert_eq!(g.token(), c.id());
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(c.id()));
    g.unlock().await.unwrap();

    let by_owner = c
        .token_lock(&name)
        .with_format(TokenFormat::ClientIdAndOwner);
    let g = by_owner
        .lock_with_options(&LockOptions::new().owner(Owner::new(57)))
        .await
        .unwrap();
    let want = format!("{}:57", c.id());
    assert_eq!(g.token(), want);
    assert_eq!(value(&mut raw, &name).await, Some(want));
    g.unlock().await.unwrap();
    // The default owner is the current task, as for the locks.
    let (token, task) = tokio::spawn(async move {
        let g = by_owner.lock().await.unwrap();
        let token = g.token().to_owned();
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
        .with_format(TokenFormat::ClientIdAndOwner);
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
    // The same value is the same holder: not reentrant, Redis unchanged.
    match lock.try_lock_with_options(Duration::ZERO, &owner(7)).await {
        Err(Error::NotReentrant { name: n, holder }) => {
            assert_eq!(n, name);
            assert_eq!(holder, service_value);
        }
        other => panic!("expected NotReentrant, got {other:?}"),
    }
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
    assert_eq!(guard.token(), ours);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_acquire_by_the_same_token_is_not_reentrant_and_changes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("token");
    let opts = LockOptions::new().owner(Owner::new(3)).lease(ms(20_000));
    let lock = c
        .token_lock(&name)
        .with_format(TokenFormat::ClientIdAndOwner);
    let guard = lock
        .try_lock_with_options(Duration::ZERO, &opts)
        .await
        .unwrap()
        .unwrap();
    let before = pttl(&mut raw, &name).await;
    let sets = command_stats(&mut raw, "set").await.calls;
    let writes = ["del", "pexpire", "setex", "psetex", "getset"];
    let mut other_writes = Vec::new();
    for w in writes {
        other_writes.push(command_stats(&mut raw, w).await.calls);
    }

    // A single attempt, a waiting one and an untimed one: all refused at once.
    let started = Instant::now();
    for wait in [Some(Duration::ZERO), Some(ms(2_000)), None] {
        let got = match wait {
            Some(wait) => lock.try_lock_with_options(wait, &opts).await.map(|_| ()),
            None => lock.lock_with_options(&opts).await.map(|_| ()),
        };
        match got {
            Err(Error::NotReentrant { name: n, holder }) => {
                assert_eq!(n, name);
                assert_eq!(holder, guard.token());
            }
            other => panic!("{wait:?}: expected NotReentrant, got {other:?}"),
        }
    }
    assert!(started.elapsed() < ms(1_000), "{:?}", started.elapsed());
    // The ClientId format: every task of the client is the same holder.
    let by_client = c
        .token_lock(unique_name("token"))
        .with_format(TokenFormat::ClientId);
    let held = by_client.lock().await.unwrap();
    let again = by_client.clone();
    let other_task = tokio::spawn(async move { again.try_lock_for(ms(500)).await.map(|_| ()) })
        .await
        .unwrap();
    assert!(matches!(other_task, Err(Error::NotReentrant { .. })));
    held.unlock().await.unwrap();

    // Redis unchanged: value, TTL, and no write command ran.
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some(guard.token()));
    let after = pttl(&mut raw, &name).await;
    assert!(
        after <= before && after > before - 3_000,
        "{before} -> {after}"
    );
    // Exactly one SET NX per refused attempt, none of which wrote (NX found the key); the
    // ClientId lock above added one granted SET.
    let sets_after = command_stats(&mut raw, "set").await.calls;
    assert_eq!(sets_after - sets, 3 + 2, "SET calls");
    for (w, calls) in writes.iter().zip(other_writes) {
        let now = command_stats(&mut raw, w).await.calls;
        // The ClientId lock's unlock is the one DEL.
        let expected = u64::from(*w == "del");
        assert_eq!(now - calls, expected, "{w} calls");
    }
    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_is_wrong_type_and_left_unchanged() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("token");
    // A Redisson lock's hash (a holder field and its count), with a TTL.
    let () = raw.hset(&name, "some-uuid:1", 1).await.unwrap();
    let () = raw.pexpire(&name, 20_000).await.unwrap();
    let lock = c.token_lock(&name);
    for wait in [Some(Duration::ZERO), Some(ms(500)), None] {
        let got = match wait {
            Some(wait) => lock.try_lock_for(wait).await.map(|_| ()),
            None => lock.lock().await.map(|_| ()),
        };
        match got {
            Err(Error::WrongType { key }) => assert_eq!(key, name),
            other => panic!("{wait:?}: expected WrongType, got {other:?}"),
        }
    }
    assert_eq!(key_type(&mut raw, &name).await, "hash");
    assert_eq!(
        common::hash(&mut raw, &name).await,
        vec![("some-uuid:1".to_owned(), "1".to_owned())]
    );
    let ttl = pttl(&mut raw, &name).await;
    assert!((15_000..=20_000).contains(&ttl), "pttl {ttl}");
    // A list too.
    let list = unique_name("token");
    let () = raw.rpush(&list, "x").await.unwrap();
    assert!(matches!(
        c.token_lock(&list).try_lock().await,
        Err(Error::WrongType { .. })
    ));
    let items: Vec<String> = raw.lrange(&list, 0, -1).await.unwrap();
    assert_eq!(items, vec!["x".to_owned()]);
    assert_eq!(dbsize(&mut raw).await, 2);
    c.shutdown().await;
}

#[tokio::test]
async fn an_invalid_lease_is_refused_and_nothing_is_sent() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let lock = c.token_lock(unique_name("token"));
    for bad in [Duration::ZERO, Duration::from_micros(999), Duration::MAX] {
        let opts = lease(bad);
        assert!(
            matches!(
                lock.lock_with_options(&opts).await,
                Err(Error::InvalidArgument(_))
            ),
            "{bad:?}"
        );
        assert!(matches!(
            lock.try_lock_with_options(ms(100), &opts).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    assert_eq!(command_stats(&mut raw, "evalsha").await.calls, 0);
    assert_eq!(command_stats(&mut raw, "eval").await.calls, 0);
    assert_eq!(dbsize(&mut raw).await, 0);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_leases_expire_forget_keeps_the_lock_and_lost_fires_on_time() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("token");
    let lock = c.token_lock(&name);

    let guard = lock.lock_with_options(&lease(ms(500))).await.unwrap();
    let until = guard.valid_until();
    timeout(ms(2_000), guard.lost()).await.unwrap();
    // At the lease's end minus the drift margin (1 % + 2 ms of 500 ms).
    let now = std::time::Instant::now();
    assert!(now + ms(10) >= until, "lost {:?} early", until - now);
    assert!(now <= until + ms(150), "lost {:?} late", now - until);
    wait_absent(&mut raw, &name).await;
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));

    // forget(): nothing released now or on drop; the key expires with its lease.
    let guard = lock.lock_with_options(&lease(ms(400))).await.unwrap();
    let token = guard.token().to_owned();
    guard.forget();
    sleep(ms(150)).await;
    assert_eq!(value(&mut raw, &name).await, Some(token));
    wait_absent(&mut raw, &name).await;
    // Once it expired, the lock is free again.
    lock.try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
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
    wait_absent(&mut raw, &name).await;
    sleep(ms(200)).await;
    assert!(!exists(&mut raw, &name).await, "a late grant was left");
    assert_eq!(dbsize(&mut raw).await, 0);
    c.shutdown().await;
}

/// Loads the token lock's scripts through `client`, so that from then on each call goes out
/// as one EVALSHA (the proxy's trigger then fires on the call itself).
async fn warm_up(client: &Client) {
    let g = client.token_lock(unique_name("warm")).lock().await.unwrap();
    g.unlock().await.unwrap();
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
    warm_up(&c).await;
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
        assert_eq!(value(&mut raw, &name).await.as_deref(), Some(guard.token()));
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
    warm_up(&c).await;
    let name = unique_name("token");
    let guard = c
        .token_lock(&name)
        .lock_with_options(&lease(ms(20_000)))
        .await
        .unwrap();
    let dels = command_stats(&mut raw, "del").await.calls;
    // The release's EVALSHA is the next request carrying the token.
    let trigger = proxy.reset_after(guard.token().as_bytes());
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
    check::<redisson_sync::TokenGuard>();
    check::<TokenFormat>();
    assert_eq!(TokenFormat::default(), TokenFormat::Random);
}

#[tokio::test]
async fn a_handle_is_cheap_debug_and_keeps_its_format() {
    let server = RedisServer::start();
    let c = client(&server);
    let lock = c.token_lock("jobs:1").with_format(TokenFormat::ClientId);
    let copy = lock.clone();
    assert_eq!(copy.name(), "jobs:1");
    assert_eq!(copy.format(), TokenFormat::ClientId);
    let shown = format!("{lock:?}");
    assert!(
        shown.contains("TokenLock") && shown.contains("jobs:1") && shown.contains(c.id()),
        "{shown}"
    );
    c.shutdown().await;
    assert!(matches!(lock.try_lock().await, Err(Error::Shutdown)));
}
