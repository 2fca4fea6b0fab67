//! Renewing permits of the permit-expirable semaphore (`acquire_renewing`, `PermitGuard`):
//! their leases are renewed every third of the lease, in one script per batch, while the
//! guard lives; a renewal that finds an id gone reports the loss; a partition longer than the
//! lease is reported lost before another holder can take the permit; dropping the guard
//! releases, and a cancelled acquire leaves nothing.

mod common;

use std::time::{Duration, Instant};

use common::{FaultProxy, Mode, RedisServer, client, command_stats, ms, unique_name};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, PermitId};

/// The lease end of one permit (its score in `{name}:timeout`), in epoch ms; `None` if gone.
async fn lease_end(raw: &mut MultiplexedConnection, name: &str, id: &PermitId) -> Option<f64> {
    raw.zscore(format!("{{{name}}}:timeout"), &id.as_bytes()[..])
        .await
        .unwrap()
}

fn epoch_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewing_permits_outlive_their_lease_and_come_back_on_release() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("renew");
    let psem = c.permit_expirable_semaphore(&name);
    assert!(psem.try_set_permits(3).await.unwrap());
    let lease = ms(600);
    let guard = psem.acquire_renewing(2, lease).await.unwrap();
    assert_eq!(guard.ids().len(), 2);
    assert_eq!(guard.lease(), lease);
    assert_eq!(psem.available_permits().await.unwrap(), 1);
    let first_valid = guard.valid_until();

    // Four leases later the permits are still held, each lease end a lease or less away.
    tokio::time::sleep(lease * 4).await;
    assert!(!guard.is_lost());
    assert!(guard.valid_until() > first_valid + lease * 2);
    for id in guard.ids() {
        let end = lease_end(&mut raw, &name, id).await.expect("still held");
        let left = end - epoch_ms();
        assert!(left > 0.0 && left <= 600.0, "{left}");
    }
    assert_eq!(psem.available_permits().await.unwrap(), 1);
    assert_eq!(psem.acquired_permits().await.unwrap(), 2);

    let ids = guard.ids().to_vec();
    guard.release().await.unwrap();
    assert_eq!(psem.available_permits().await.unwrap(), 3);
    for id in &ids {
        assert_eq!(lease_end(&mut raw, &name, id).await, None);
    }
    c.shutdown().await;
}

/// Batched like the lock watchdog: the permits of many guards of one lease renew in one
/// script call per period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_are_one_script_per_period_for_many_guards() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let lease = ms(900);
    let mut guards = Vec::new();
    for i in 0..10 {
        let psem = c.permit_expirable_semaphore(unique_name(&format!("batch-{i}")));
        assert!(psem.try_set_permits(2).await.unwrap());
        guards.push(psem.acquire_renewing(2, lease).await.unwrap());
    }
    // Warm: the renewal script is loaded at its first call.
    tokio::time::sleep(lease / 3 + ms(100)).await;
    let before = command_stats(&mut raw, "evalsha").await.calls;
    let started = Instant::now();
    tokio::time::sleep(lease * 2).await;
    let elapsed = started.elapsed();
    let scripts = command_stats(&mut raw, "evalsha").await.calls - before;
    let periods = (elapsed.as_millis() / (lease / 3).as_millis()) as u64;
    // 20 permits of 10 guards: one script per period (plus one for a period cut by the
    // measurement's ends).
    assert!(
        scripts <= periods + 1 && scripts + 1 >= periods,
        "{scripts} scripts in {periods} periods"
    );
    for g in &guards {
        assert!(!g.is_lost());
    }
    drop(guards);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_released_elsewhere_is_reported_lost_and_its_guard_sends_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let other = client(&server);
    let name = unique_name("renew-gone");
    let psem = c.permit_expirable_semaphore(&name);
    assert!(psem.try_set_permits(2).await.unwrap());
    let lease = ms(900);
    let guard = psem.acquire_renewing(2, lease).await.unwrap();
    // Another client releases one of the ids (as a Java service could).
    other
        .permit_expirable_semaphore(&name)
        .release(&guard.ids()[..1])
        .await
        .unwrap();
    tokio::time::timeout(lease, guard.lost())
        .await
        .expect("lost at the next renewal");
    let before = command_stats(&mut raw, "evalsha").await.calls;
    let err = guard.release().await.unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
    assert_eq!(command_stats(&mut raw, "evalsha").await.calls, before);
    c.shutdown().await;
    other.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_releases_and_a_cancelled_acquire_leaves_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("renew-drop");
    let psem = c.permit_expirable_semaphore(&name);
    assert!(psem.try_set_permits(1).await.unwrap());
    let guard = psem.acquire_renewing(1, ms(900)).await.unwrap();
    let id = guard.ids()[0];
    drop(guard);
    let deadline = Instant::now() + Duration::from_secs(3);
    while psem.available_permits().await.unwrap() != 1 {
        assert!(
            Instant::now() < deadline,
            "the dropped guard's permit came back"
        );
        tokio::time::sleep(ms(10)).await;
    }
    assert_eq!(lease_end(&mut raw, &name, &id).await, None);

    // A waiting acquire cancelled (the only permit is held): nothing taken, nothing renewed.
    let held = psem.acquire(1, None).await.unwrap();
    let cancelled = tokio::time::timeout(ms(200), psem.acquire_renewing(1, ms(900))).await;
    assert!(cancelled.is_err());
    psem.release(&held).await.unwrap();
    tokio::time::sleep(ms(300)).await;
    assert_eq!(psem.available_permits().await.unwrap(), 1);
    let acquired: i64 = raw.zcard(format!("{{{name}}}:timeout")).await.unwrap();
    assert_eq!(acquired, 0);

    // Bad input: a lease too short to renew.
    assert!(matches!(
        psem.acquire_renewing(1, ms(10)).await,
        Err(Error::InvalidArgument(_))
    ));
    c.shutdown().await;
}

/// The lock watchdog's fault-proxy promise, for permits: a partition longer than the lease is
/// reported lost before another holder can take the permit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_longer_than_the_lease_is_lost_before_another_holder_gets_the_permit() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let holder = Client::builder()
        .url(proxy.url())
        .command_timeout(ms(500))
        .connect_timeout(ms(500))
        .build()
        .unwrap();
    let other = client(&server);
    let name = unique_name("renew-partition");
    let psem = holder.permit_expirable_semaphore(&name);
    assert!(psem.try_set_permits(1).await.unwrap());
    let lease = ms(1_200);
    let guard = psem.acquire_renewing(1, lease).await.unwrap();
    // Renewed at least once before the fault.
    let first = guard.valid_until();
    let deadline = Instant::now() + Duration::from_secs(3);
    while guard.valid_until() < first + ms(200) {
        assert!(Instant::now() < deadline, "not renewed before the fault");
        tokio::time::sleep(ms(20)).await;
    }

    proxy.set_mode(Mode::Freeze);
    let waiter = other.permit_expirable_semaphore(&name);
    let taken = tokio::spawn(async move {
        let ids = waiter
            .try_acquire_for(1, Duration::from_secs(10), None)
            .await
            .unwrap()
            .expect("the other client gets the permit once its lease ends");
        (Instant::now(), ids)
    });
    tokio::time::timeout(lease * 2, guard.lost())
        .await
        .expect("lost within the lease");
    let lost_at = Instant::now();
    let (taken_at, _) = taken.await.unwrap();
    assert!(
        lost_at < taken_at,
        "the guard reported the loss {:?} after another holder took the permit",
        lost_at - taken_at
    );
    proxy.set_mode(Mode::Pass);
    drop(guard);
    holder.shutdown().await;
    other.shutdown().await;
}
