//! The permit-expirable semaphore (`client.permit_expirable_semaphore(name)`, Redisson's
//! `RPermitExpirableSemaphore`), after Redisson's `RedissonPermitExpirableSemaphoreTest`
//! (its layout: docs/LAYOUT.md §6.5): permit ids as raw 16 bytes in `{name}:timeout` and 32 hex
//! characters in the API, scores, the reclaim of expired permits, waiting for an expiry,
//! all-or-nothing release, leases, and bad input.

mod common;

use std::time::{Duration, Instant};

use common::{
    Primitive, RedisServer, client, client_with, dbsize, exists, ms, now_ms, unique_name, value,
    wait_numsub,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Error, PermitId};

const NO_EXPIRY: f64 = 922_337_203_685_477.0;

/// The members of `{name}:timeout` as (hex id, score), sorted by id.
async fn permits(raw: &mut MultiplexedConnection, name: &str) -> Vec<(String, f64)> {
    let members: Vec<(Vec<u8>, f64)> = raw
        .zrange_withscores(Primitive::timeouts_key(name), 0, -1)
        .await
        .unwrap();
    let mut v: Vec<(String, f64)> = members
        .into_iter()
        .map(|(id, score)| {
            assert_eq!(id.len(), 16, "a member is 16 raw bytes");
            (id.iter().map(|b| format!("{b:02x}")).collect(), score)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[tokio::test]
async fn acquired_permits_are_raw_ids_in_the_timeout_set_and_hex_in_the_api() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("psem");
    let sem = c.permit_expirable_semaphore(&name);
    assert!(sem.try_set_permits(3).await.unwrap());
    assert!(!sem.try_set_permits(9).await.unwrap());

    let forever = sem.acquire(1, None).await.unwrap();
    let before = now_ms();
    let leased = sem.try_acquire(2, Some(ms(10_000))).await.unwrap().unwrap();
    let after = now_ms();
    assert_eq!((forever.len(), leased.len()), (1, 2));
    for id in forever.iter().chain(&leased) {
        let hex = id.to_string();
        assert_eq!(hex.len(), 32);
        assert!(
            hex.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(PermitId::parse(&hex).unwrap(), *id);
    }
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    let members = permits(&mut raw, &name).await;
    assert_eq!(members.len(), 3);
    for (hex, score) in &members {
        if *hex == forever[0].to_string() {
            assert_eq!(*score, NO_EXPIRY);
        } else {
            assert!(leased.iter().any(|id| id.to_string() == *hex), "{hex}");
            let s = *score as i64;
            assert!((before + 10_000..=after + 10_000).contains(&s), "score {s}");
        }
    }
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert_eq!(sem.acquired_permits().await.unwrap(), 3);
    assert_eq!(sem.total_permits().await.unwrap(), 3);
    assert!(sem.try_acquire(1, None).await.unwrap().is_none());

    sem.release(&leased).await.unwrap();
    assert!(sem.try_release(&forever[0]).await.unwrap());
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("3"));
    assert!(!exists(&mut raw, &Primitive::timeouts_key(&name)).await);
    c.shutdown().await;
}

/// `testExpire` / `testReleaseExpired`: an expired permit is reclaimed by the next query, and
/// its old id no longer releases.
#[tokio::test]
async fn expired_permits_are_reclaimed_and_their_ids_are_dead() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("psem");
    let sem = c.permit_expirable_semaphore(&name);
    sem.try_set_permits(2).await.unwrap();
    let short = sem.acquire(1, Some(ms(300))).await.unwrap();
    let long = sem.acquire(1, None).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    tokio::time::sleep(ms(450)).await;
    // Not reclaimed until someone looks.
    assert_eq!(permits(&mut raw, &name).await.len(), 2);
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("1"));
    assert_eq!(
        permits(&mut raw, &name).await,
        vec![(long[0].to_string(), NO_EXPIRY)]
    );
    assert!(!sem.try_release(&short[0]).await.unwrap());
    assert!(matches!(
        sem.release(&short).await,
        Err(Error::PermitNotHeld { ref ids, .. }) if *ids == vec![short[0].to_string()]
    ));
    assert!(matches!(
        sem.lease_time(&short[0]).await,
        Err(Error::PermitNotHeld { .. })
    ));
    assert!(
        !sem.update_lease_time(&short[0], Some(ms(1000)))
            .await
            .unwrap()
    );
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("1"));
    sem.release(&long).await.unwrap();
    c.shutdown().await;
}

/// `testExpireTryAcquire`: a waiter gets the permit of a holder that never releases (a
/// crashed one) when its lease ends, woken by the acquire script's expiry hint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_an_expired_permit_when_its_lease_ends() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let holder = client(&server);
    // Re-check every 30 s: only the hint can explain getting the permit on time.
    let waiter = client_with(&server, Duration::from_secs(30), Duration::from_secs(30));
    let name = unique_name("psem");
    holder
        .permit_expirable_semaphore(&name)
        .try_set_permits(1)
        .await
        .unwrap();
    let dead = holder
        .permit_expirable_semaphore(&name)
        .acquire(1, Some(ms(800)))
        .await
        .unwrap();
    let acquired_at = Instant::now();
    holder.shutdown().await; // the holder is gone and never releases

    let ids = waiter
        .permit_expirable_semaphore(&name)
        .acquire(1, None)
        .await
        .unwrap();
    let waited = acquired_at.elapsed();
    assert!(
        waited >= ms(700) && waited < ms(2_500),
        "got it after {waited:?}"
    );
    assert_ne!(ids, dead);
    assert_eq!(
        permits(&mut raw, &name).await,
        vec![(ids[0].to_string(), NO_EXPIRY)]
    );
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("0"));
    waiter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_another_clients_release() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client(&server);
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(30));
    let name = unique_name("psem");
    a.permit_expirable_semaphore(&name)
        .try_set_permits(1)
        .await
        .unwrap();
    let held = a
        .permit_expirable_semaphore(&name)
        .acquire(1, None)
        .await
        .unwrap();
    let sem_b = b.permit_expirable_semaphore(&name);
    let w = tokio::spawn(async move {
        let ids = sem_b
            .try_acquire_for(1, ms(10_000), Some(ms(5_000)))
            .await
            .unwrap();
        (ids, Instant::now())
    });
    wait_numsub(&mut raw, &format!("redisson_sc:{{{name}}}"), 1).await;
    tokio::time::sleep(ms(300)).await;
    let released = Instant::now();
    a.permit_expirable_semaphore(&name)
        .release(&held)
        .await
        .unwrap();
    let (ids, woke) = w.await.unwrap();
    let latency = woke.saturating_duration_since(released);
    assert!(latency < ms(500), "woken after {latency:?}");
    assert_eq!(ids.unwrap().len(), 1);
    a.shutdown().await;
    b.shutdown().await;
}

/// `testReleaseManyNotExistOrExpired` and the double release of `testRelease`.
#[tokio::test]
async fn release_of_many_is_all_or_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("psem");
    let sem = c.permit_expirable_semaphore(&name);
    sem.try_set_permits(3).await.unwrap();
    let ids = sem.acquire(2, None).await.unwrap();
    let unknown = PermitId::parse("00112233445566778899aabbccddeeff").unwrap();

    let err = sem.release(&[ids[0], unknown]).await.unwrap_err();
    assert!(matches!(err, Error::PermitNotHeld { .. }), "{err}");
    assert_eq!(permits(&mut raw, &name).await.len(), 2, "nothing released");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("1"));

    // The same id twice: refused before anything is sent (Redisson would release it once
    // and report a failure).
    assert!(matches!(
        sem.release(&[ids[0], ids[0]]).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(permits(&mut raw, &name).await.len(), 2);

    sem.release(&ids).await.unwrap();
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("3"));
    assert!(matches!(
        sem.release(&ids).await,
        Err(Error::PermitNotHeld { .. })
    ));
    assert!(!sem.try_release(&ids[0]).await.unwrap());
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("3"));
    c.shutdown().await;
}

/// `testGetLeaseTime` / `testUpdateLeaseTime`.
#[tokio::test]
async fn lease_times_are_read_and_updated() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("psem");
    let sem = c.permit_expirable_semaphore(&name);
    sem.try_set_permits(2).await.unwrap();
    let free = sem.acquire(1, None).await.unwrap()[0];
    let leased = sem.acquire(1, Some(ms(5_000))).await.unwrap()[0];

    assert_eq!(sem.lease_time(&free).await.unwrap(), None);
    let left = sem.lease_time(&leased).await.unwrap().unwrap();
    assert!(left > ms(4_000) && left <= ms(5_000), "{left:?}");

    assert!(
        sem.update_lease_time(&free, Some(ms(60_000)))
            .await
            .unwrap()
    );
    let left = sem.lease_time(&free).await.unwrap().unwrap();
    assert!(left > ms(59_000) && left <= ms(60_000), "{left:?}");
    assert!(sem.update_lease_time(&leased, None).await.unwrap());
    assert_eq!(sem.lease_time(&leased).await.unwrap(), None);
    let scores: Vec<f64> = permits(&mut raw, &name)
        .await
        .into_iter()
        .map(|p| p.1)
        .collect();
    assert!(scores.contains(&NO_EXPIRY));

    let unknown = PermitId::parse("ffeeddccbbaa99887766554433221100").unwrap();
    assert!(
        !sem.update_lease_time(&unknown, Some(ms(1_000)))
            .await
            .unwrap()
    );
    assert!(matches!(
        sem.lease_time(&unknown).await,
        Err(Error::PermitNotHeld { .. })
    ));
    assert!(matches!(
        sem.update_lease_time(&free, Some(Duration::ZERO)).await,
        Err(Error::InvalidArgument(_))
    ));
    sem.release(&[free, leased]).await.unwrap();
    c.shutdown().await;
}

/// `testSetPermits` / `testAddPermits` / `testGetPermits`, negatives included.
#[tokio::test]
async fn set_and_add_permits_count_acquired_ones() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("psem");
    let sem = c.permit_expirable_semaphore(&name);
    assert_eq!(sem.available_permits().await.unwrap(), 0, "testNotExistent");
    assert_eq!(sem.total_permits().await.unwrap(), 0);

    sem.set_permits(4).await.unwrap();
    let ids = sem.acquire(3, None).await.unwrap();
    sem.set_permits(2).await.unwrap();
    // 3 acquired, total 2: available is -1.
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("-1"));
    assert_eq!(sem.total_permits().await.unwrap(), 2);
    assert_eq!(sem.acquired_permits().await.unwrap(), 3);
    assert_eq!(sem.add_permits(-2).await.unwrap(), -3);
    assert_eq!(sem.add_permits(5).await.unwrap(), 2);
    assert_eq!(sem.total_permits().await.unwrap(), 5);
    sem.release(&ids).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 5);
    c.shutdown().await;
}

/// A semaphore with a TTL hands it to the timeout set (`testExpiration`).
#[tokio::test]
async fn the_timeout_set_takes_the_semaphores_ttl() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("psem");
    let sem = c.permit_expirable_semaphore(&name);
    sem.try_set_permits(2).await.unwrap();
    let () = raw.pexpire(&name, 3_000).await.unwrap();
    let ids = sem.acquire(1, None).await.unwrap();
    let ttl: i64 = raw.pttl(Primitive::timeouts_key(&name)).await.unwrap();
    assert!((1..=3_000).contains(&ttl), "pttl {ttl}");
    sem.release(&ids).await.unwrap();
    c.shutdown().await;
}

/// Acquires dropped mid-flight or with tiny waits never keep a permit: afterwards the
/// available plus the acquired permits are the total, and no id is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_and_tiny_timeout_acquires_leave_the_counts_exact() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("psem");
    let sem = c.permit_expirable_semaphore(&name);
    sem.try_set_permits(2).await.unwrap();
    let mut granted = 0;
    for i in 0..2_000u32 {
        let fut = sem.try_acquire_for(1, Duration::from_micros(u64::from(i % 5) * 100), None);
        match tokio::time::timeout(Duration::from_micros(u64::from(i % 3) * 150), fut).await {
            Ok(Ok(Some(ids))) => {
                granted += 1;
                sem.release(&ids).await.unwrap();
            }
            Ok(Ok(None)) | Err(_) => {}
            Ok(Err(e)) => panic!("{e}"),
        }
    }
    assert!(granted > 0);
    let start = Instant::now();
    while value(&mut raw, &name).await.as_deref() != Some("2") {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            value(&mut raw, &name).await
        );
        tokio::time::sleep(ms(10)).await;
    }
    assert!(permits(&mut raw, &name).await.is_empty());
    c.shutdown().await;
}

#[tokio::test]
async fn permit_ids_parse_only_from_32_hex_characters() {
    let id = PermitId::parse("0123456789ABCDEFabcdef0123456789").unwrap();
    assert_eq!(id.to_string(), "0123456789abcdefabcdef0123456789");
    assert_eq!(id.as_bytes()[0], 0x01);
    assert_eq!(
        "0123456789abcdefabcdef0123456789"
            .parse::<PermitId>()
            .unwrap(),
        id
    );
    for bad in [
        "",
        "xyz",
        "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0",
        "g123456789abcdef0123456789abcdef",
        "é123456789abcdef0123456789abcde",
    ] {
        assert!(
            matches!(PermitId::parse(bad), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
}

#[tokio::test]
async fn bad_input_is_a_clear_error_and_changes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let sem = c.permit_expirable_semaphore(unique_name("psem"));
    let before = dbsize(&mut raw).await;
    assert!(matches!(
        sem.acquire(0, None).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        sem.try_acquire(0, None).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        sem.try_acquire(1, Some(Duration::ZERO)).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        sem.try_acquire(u32::MAX, None).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        sem.release(&[]).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(dbsize(&mut raw).await, before);

    // (A key of another type at the name: `tests/errors.rs`, for every primitive.)

    // The timeout set is taken by a string: the acquire refuses before reclaiming anything.
    let wrong = |e: Error| matches!(e, Error::WrongType { .. });
    let name = unique_name("psem");
    let () = raw.set(&name, 2).await.unwrap();
    let () = raw.set(Primitive::timeouts_key(&name), "x").await.unwrap();
    let sem = c.permit_expirable_semaphore(&name);
    assert!(wrong(sem.try_acquire(1, None).await.unwrap_err()));
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("2"));
    c.shutdown().await;
}
