//! How long a guard vouches for its hold (`LockGuard::valid_until`) and when it reports the
//! hold lost without any help from Redis: for an explicit lease at its end, for a watchdog
//! hold when no renewal is confirmed in time; and how the client's count of its own holds
//! keeps stale guards from releasing newer holds.

mod common;

use std::time::{Duration, Instant};

use common::{FaultProxy, Mode, RedisServer, ms, unique_name};
use redisson_sync::{Client, LockOptions};
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_lease_is_vouched_for_until_it_ends_and_then_reported_lost() {
    let server = RedisServer::start();
    let client = Client::open(server.url()).unwrap();
    let lease = ms(600);
    for make in [
        |c: &Client, n: &str| redisson_sync::AnyLock::from(c.lock(n)),
        |c: &Client, n: &str| c.fair_lock(n).into(),
        |c: &Client, n: &str| c.rw_lock(n).read_lock().into(),
        |c: &Client, n: &str| c.rw_lock(n).write_lock().into(),
    ] {
        let lock = make(&client, &unique_name("validity-lease"));
        let before = Instant::now();
        let guard = lock
            .lock_with_options(&LockOptions::new().lease(lease))
            .await
            .unwrap();
        let after = Instant::now();
        // The send time of the acquire plus the lease.
        let valid_until = guard.valid_until();
        assert!(
            valid_until >= before + lease && valid_until <= after + lease,
            "{lock:?}"
        );
        assert!(!guard.is_lost());
        timeout(lease + ms(500), guard.lost())
            .await
            .unwrap_or_else(|_| panic!("{lock:?}: lost() did not fire after the lease"));
        let lost_at = Instant::now();
        // Reported shortly before the end (a drift margin: 1 % + 2 ms), never after it.
        assert!(
            lost_at <= valid_until + ms(50),
            "{lock:?}: {:?}",
            lost_at - valid_until
        );
        assert!(lost_at + ms(100) >= valid_until, "{lock:?}: too early");
        assert!(guard.is_lost());
        // Redis let the key expire too: the release says so.
        tokio::time::sleep(ms(50)).await;
        assert!(guard.unlock().await.unwrap_err().is_not_held(), "{lock:?}");
    }
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_move_validity_forward_and_a_partition_stops_it() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let watchdog = ms(900);
    let client = Client::builder()
        .url(proxy.url())
        .watchdog_timeout(watchdog)
        .build()
        .unwrap();
    let guard = client
        .lock(unique_name("validity-renew"))
        .lock()
        .await
        .unwrap();
    let first = guard.valid_until();
    // Three renewal periods: each confirmed renewal moves `valid_until` forward.
    tokio::time::sleep(ms(1000)).await;
    let renewed = guard.valid_until();
    assert!(renewed > first + ms(500), "{:?}", renewed - first);
    assert!(!guard.is_lost());

    proxy.set_mode(Mode::Freeze);
    let frozen = Instant::now();
    timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("no loss reported during the partition");
    let last = guard.valid_until();
    // Lost from just before the end of the last confirmed lease, within one lease of the
    // freeze; `valid_until` stopped moving.
    assert!(Instant::now() <= last + ms(50));
    assert!(
        frozen.elapsed() <= watchdog + ms(100),
        "{:?}",
        frozen.elapsed()
    );
    proxy.set_mode(Mode::Pass);
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_not_held(), "{err}");
    client.shutdown().await;
}

/// A hold given up with `forget` still counts in Redis: the same owner's next acquire is a
/// re-entry (count 2), as in Redisson, and its guard is valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_hold_still_counts_and_the_owner_re_enters() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = Client::open(server.url()).unwrap();
    let name = unique_name("validity-forget");
    let opts = LockOptions::new().owner(redisson_sync::Owner::new(3));
    let lock = client.lock(&name);
    lock.lock_with_options(&opts).await.unwrap().forget();
    let g = lock.lock_with_options(&opts).await.unwrap();
    assert!(!g.is_lost());
    let field = format!("{}:3", client.id());
    assert_eq!(
        common::hash(&mut raw, &name).await,
        vec![(field.clone(), "2".to_owned())]
    );
    g.unlock().await.unwrap();
    assert_eq!(
        common::hash(&mut raw, &name).await,
        vec![(field, "1".to_owned())]
    );
    lock.force_unlock().await.unwrap();
    client.shutdown().await;
}

/// A hold force-unlocked behind the client's back: the owner's next acquire finds the real
/// count (0) and takes the lock anew; the old guard reports lost, and its unlock does not
/// release the new hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_guard_never_releases_the_owners_new_hold() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = Client::open(server.url()).unwrap();
    let name = unique_name("validity-stale");
    let opts = LockOptions::new()
        .owner(redisson_sync::Owner::new(4))
        .lease(Duration::from_secs(60));
    let lock = client.lock(&name);
    let old = lock.lock_with_options(&opts).await.unwrap();
    let () = redis::AsyncCommands::del(&mut raw, &name).await.unwrap();
    let new = lock.lock_with_options(&opts).await.unwrap();
    assert!(old.is_lost());
    assert!(!new.is_lost());
    let err = old.unlock().await.unwrap_err();
    assert!(
        matches!(err, redisson_sync::Error::LeaseLost { .. }),
        "{err}"
    );
    let field = format!("{}:4", client.id());
    assert_eq!(
        common::hash(&mut raw, &name).await,
        vec![(field, "1".to_owned())],
        "the new hold is intact"
    );
    new.unlock().await.unwrap();
    assert!(!common::exists(&mut raw, &name).await);
    client.shutdown().await;
}
