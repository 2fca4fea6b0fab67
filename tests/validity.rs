//! How long a guard vouches for its hold (`LockGuard::valid_until`) and when it reports the
//! hold lost without any help from Redis: for an explicit lease at its end, for a watchdog
//! hold when no renewal is confirmed in time; and how the client's count of its own holds
//! keeps stale guards from releasing newer holds.
//!
//! Every test runs once per lock kind (`common::Kind`, `per_kind!`). A re-entry by the owner
//! is a second hold for the reentrant kinds and refused (`NotReentrant`) for the others
//! (`Kind::reentry`), which changes what the owner's next acquire does after a `forget` or
//! behind a stale guard.

mod common;

use std::time::{Duration, Instant};

use common::{
    FaultProxy, Kind, Mode, RedisServer, Reentry, exists, ms, per_kind, state, unique_name,
};
use redisson_sync::{Client, Error, LockOptions, Owner};
use tokio::time::timeout;

per_kind!(at_once multi_thread(2), async fn an_explicit_lease_is_vouched_for_until_it_ends_and_then_reported_lost);

async fn an_explicit_lease_is_vouched_for_until_it_ends_and_then_reported_lost(kind: Kind) {
    let server = RedisServer::start();
    let client = Client::open(server.url()).unwrap();
    let lease = ms(600);
    let lock = kind.any(&client, &unique_name("validity-lease"));
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
    client.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn renewals_move_validity_forward_and_a_partition_stops_it);

async fn renewals_move_validity_forward_and_a_partition_stops_it(kind: Kind) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let watchdog = ms(900);
    let client = Client::builder()
        .url(proxy.url())
        .watchdog_timeout(watchdog)
        .build()
        .unwrap();
    let guard = kind
        .any(&client, &unique_name("validity-renew"))
        .lock()
        .await
        .unwrap();
    let first = guard.valid_until();
    // Three renewal periods: each confirmed renewal moves `valid_until` forward.
    tokio::time::sleep(ms(1000)).await;
    let renewed = guard.valid_until();
    assert!(renewed > first + ms(500), "{kind}: {:?}", renewed - first);
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
        "{kind}: {:?}",
        frozen.elapsed()
    );
    proxy.set_mode(Mode::Pass);
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_not_held(), "{err}");
    client.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn a_forgotten_hold_still_counts_and_the_owner_re_enters);

/// A hold given up with `forget` still counts in Redis: the same owner's next acquire is a
/// re-entry (count 2), as in Redisson, and its guard is valid. The kinds that refuse a re-entry
/// wait the forgotten hold out as another holder's (no guard of the client vouches for it any
/// more): not granted while it lasts, Redis unchanged, and granted once it is gone.
async fn a_forgotten_hold_still_counts_and_the_owner_re_enters(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = Client::open(server.url()).unwrap();
    let name = unique_name("validity-forget");
    let opts = LockOptions::new().owner(Owner::new(3));
    let lock = kind.any(&client, &name);
    lock.lock_with_options(&opts).await.unwrap().forget();
    let field = kind.field(&client, Owner::new(3));
    match kind.reentry() {
        Reentry::Counts => {
            let g = lock.lock_with_options(&opts).await.unwrap();
            assert!(!g.is_lost());
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&field, 2));
            g.unlock().await.unwrap();
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&field, 1));
            lock.force_unlock().await.unwrap();
        }
        Reentry::Refused => {
            let again = lock.try_lock_with_options(ms(300), &opts).await;
            assert!(matches!(&again, Ok(None)), "{kind}: {again:?}");
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&field, 1));
            // Once the forgotten hold is gone, the owner takes the lock.
            assert!(lock.force_unlock().await.unwrap());
            let g = lock.lock_with_options(&opts).await.unwrap();
            assert!(!g.is_lost());
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&field, 1));
            g.unlock().await.unwrap();
        }
    }
    assert!(!exists(&mut raw, &name).await);
    client.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn a_stale_guard_never_releases_the_owners_new_hold);

/// A hold force-unlocked behind the client's back: the owner's next acquire finds the real
/// count (0) and takes the lock anew; the old guard reports lost, and its unlock does not
/// release the new hold. The kinds that refuse a re-entry refuse the owner's acquire while it
/// keeps the old guard (the client counts it, and does not ask Redis); once that guard is
/// unlocked (`NotHeld`: the hold was gone) the owner takes the lock.
async fn a_stale_guard_never_releases_the_owners_new_hold(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = Client::open(server.url()).unwrap();
    let name = unique_name("validity-stale");
    let opts = LockOptions::new()
        .owner(Owner::new(4))
        .lease(Duration::from_secs(60));
    let lock = kind.any(&client, &name);
    let old = lock.lock_with_options(&opts).await.unwrap();
    let () = redis::AsyncCommands::del(&mut raw, &name).await.unwrap();
    let field = kind.field(&client, Owner::new(4));
    let new = match kind.reentry() {
        Reentry::Counts => {
            let new = lock.lock_with_options(&opts).await.unwrap();
            assert!(old.is_lost());
            assert!(!new.is_lost());
            let err = old.unlock().await.unwrap_err();
            assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
            new
        }
        Reentry::Refused => {
            let again = lock.lock_with_options(&opts).await;
            assert!(
                matches!(&again, Err(Error::NotReentrant { holder, .. }) if *holder == field),
                "{kind}: {again:?}"
            );
            assert!(!common::exists(&mut raw, &name).await, "nothing was sent");
            assert!(!old.is_lost());
            match old.unlock().await {
                Err(Error::NotHeld { name: n, holder }) => {
                    assert_eq!(n, name);
                    assert_eq!(holder, field);
                }
                other => panic!("{kind}: expected NotHeld, got {other:?}"),
            }
            let new = lock.lock_with_options(&opts).await.unwrap();
            assert!(!new.is_lost());
            new
        }
    };
    assert_eq!(
        state(&mut raw, &name).await,
        kind.state_of(&field, 1),
        "the new hold is intact"
    );
    new.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    client.shutdown().await;
}
