//! Replica sync (issue 13; Redisson's `checkLockSyncedSlaves`, docs/LAYOUT.md §1.7): with
//! `sync_replicas` on, every call Redisson syncs is pipelined with `WAIT <replicas>
//! <replica_sync_timeout>`, seen in the master's `INFO commandstats` once per synced call (calls
//! in flight together share one per round, each still acknowledged before it returns); a
//! grant that no replica acknowledged is given back and reported; renewals that are not
//! acknowledged keep the hold; `off` (and `auto` on a single server) never sends `WAIT`; a
//! server that refuses `WAIT` (here: to the user, NOPERM) turns it off after one refusal.
//!
//! The servers are the tests' own, on loopback and free ports: a master with two replicas and
//! three Sentinels (`testkit::RedisSentinel`), and a plain master-replica pair, once with the
//! replica reaching its master through a fault proxy (`testkit::FaultProxy`: the replication
//! link delayed, frozen, cut). Elsewhere replicas are paused with SIGSTOP, which leaves their
//! connections open: the master still counts them, and its `WAIT` gets no acknowledgement.
//! Every loop is bounded in count and time.

mod common;

use std::time::{Duration, Instant};

use common::{command_stats, hash, pttl, reset_stats, script_calls, unique_name};
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner, config::SyncReplicas};
use testkit::{FaultProxy, Mode, RedisSentinel, RedisServer};
use tokio::time::sleep;

const SYNC_TIMEOUT: Duration = Duration::from_millis(400);

/// `WAIT` calls the master has run since its last `CONFIG RESETSTAT`.
async fn waits(master: &mut MultiplexedConnection) -> u64 {
    command_stats(master, "wait").await.calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_calls_wait_for_replicas_and_an_unacknowledged_grant_is_given_back() {
    let setup = tokio::task::spawn_blocking(RedisSentinel::start)
        .await
        .unwrap();
    let mut master = setup.master().conn().await;
    // Sentinel mode: replica sync is on by default (`auto`), as in Redisson.
    let client = Client::builder()
        .sentinel(setup.sentinel_urls(), setup.master_name())
        .replica_sync_timeout(SYNC_TIMEOUT)
        .watchdog_timeout(Duration::from_secs(3))
        .connect()
        .await
        .unwrap();
    let (a, b) = (Owner::new(1), Owner::new(2));

    // One WAIT per synced call: the acquire, a refused acquire, the unlock. Queries and the
    // latch (Redisson does not sync them) send none.
    // Scripts loaded first (a NOSCRIPT would send the pipeline, and its WAIT, twice).
    lock_and_unlock(&client).await;
    let name = unique_name("sync");
    let lock = client.lock(&name);
    let first = lock
        .try_lock_with_options(Duration::ZERO, &LockOptions::new().owner(a))
        .await
        .unwrap()
        .expect("free");
    reset_stats(&mut master).await;
    let again = lock
        .try_lock_with_options(Duration::ZERO, &LockOptions::new().owner(a))
        .await
        .unwrap()
        .expect("re-entry");
    assert_eq!(waits(&mut master).await, 1, "the acquire");
    assert!(lock.is_locked().await.unwrap());
    assert!(
        lock.try_lock_with_options(Duration::ZERO, &LockOptions::new().owner(b))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        waits(&mut master).await,
        2,
        "a refused acquire is synced too"
    );
    again.unlock().await.unwrap();
    assert_eq!(waits(&mut master).await, 3, "the unlock");
    let latch = client.count_down_latch(unique_name("sync-latch"));
    latch.try_set_count(2).await.unwrap();
    latch.count_down().await.unwrap();
    assert_eq!(waits(&mut master).await, 3, "the latch is not synced");

    // A watchdog hold (lease 3 s, renewed every second) that lives through the pause below.
    let watched_name = unique_name("sync-watched");
    let watched = client.lock(&watched_name).lock().await.unwrap();
    let semaphore = client.semaphore(unique_name("sync-sem"));
    assert!(semaphore.try_set_permits(3).await.unwrap());

    // Both replicas stopped: nothing acknowledges. A new grant is given back and reported.
    for replica in setup.replicas() {
        replica.pause();
    }
    let paused = Instant::now();
    let fresh = unique_name("sync-fresh");
    let started = Instant::now();
    let err = client
        .lock(&fresh)
        .try_lock()
        .await
        .expect_err("no replica acknowledged");
    let took = started.elapsed();
    match &err {
        Error::ReplicasNotSynced {
            operation,
            name,
            replicas,
            after,
        } => {
            assert_eq!(*operation, "acquire");
            assert_eq!(name, &fresh);
            assert_eq!(*replicas, 2);
            assert_eq!(*after, SYNC_TIMEOUT);
        }
        other => panic!("expected ReplicasNotSynced, got {other:?}"),
    }
    assert!(took >= SYNC_TIMEOUT, "returned after {took:?}");
    assert!(err.to_string().contains("none of the master's 2 replicas"));
    assert_eq!(
        pttl(&mut master, &fresh).await,
        -2,
        "the grant was given back"
    );
    // A re-entry that nobody acknowledged gives back that one hold, not the others.
    let err = lock
        .try_lock_with_options(Duration::ZERO, &LockOptions::new().owner(a))
        .await
        .expect_err("no replica acknowledged");
    assert!(matches!(err, Error::ReplicasNotSynced { .. }), "{err:?}");
    let field = format!("{}:{}", client.id(), a.id());
    assert_eq!(
        hash(&mut master, &name).await,
        vec![(field, "1".to_owned())]
    );
    // A waiting acquire tries again (replicas resyncing after a failover catch up), three
    // times, then returns the error too.
    let waited = unique_name("sync-waited");
    let started = Instant::now();
    let err = client
        .lock(&waited)
        .lock()
        .await
        .expect_err("no replica acknowledged");
    assert!(matches!(err, Error::ReplicasNotSynced { .. }), "{err:?}");
    assert!(
        started.elapsed() >= SYNC_TIMEOUT * 4,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(pttl(&mut master, &waited).await, -2);
    // A semaphore acquire likewise gives its permits back.
    let err = semaphore
        .try_acquire(2)
        .await
        .expect_err("not acknowledged");
    assert!(matches!(err, Error::ReplicasNotSynced { .. }), "{err:?}");
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
    // Renewals nobody acknowledges still took effect on the master: the watched hold outlives
    // its lease.
    sleep(Duration::from_millis(3500).saturating_sub(paused.elapsed())).await;
    assert!(
        paused.elapsed() > Duration::from_secs(3),
        "the hold outlived its lease"
    );
    for replica in setup.replicas() {
        replica.resume();
    }
    assert!(!watched.is_lost(), "the watchdog stopped renewing");
    let left = pttl(&mut master, &watched_name).await;
    assert!(left > 0, "the watched hold is gone: pttl {left}");

    // Replicas back: acquires are acknowledged again (the replicas first catch up).
    let deadline = Instant::now() + Duration::from_secs(10);
    let guard = loop {
        match client.lock(&fresh).try_lock().await {
            Ok(Some(guard)) => break guard,
            Ok(None) => panic!("{fresh} is held"),
            Err(Error::ReplicasNotSynced { .. }) if Instant::now() < deadline => {
                sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("acquire after the replicas came back: {e}"),
        }
    };
    guard.unlock().await.unwrap();
    watched.unlock().await.unwrap();
    first.unlock().await.unwrap();
    client.shutdown().await;
}

/// Synced calls in flight together are written in rounds, one `WAIT` after each round's
/// scripts (sync_batch.rs): fewer `WAIT`s than calls, one script per call, and every call still
/// returns only once its own write was acknowledged: each acquired key is on the replica the
/// moment all acquires have returned, each released one gone from it. With the replica
/// stopped, every grant of a round is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_calls_in_flight_together_share_a_wait_and_each_is_acknowledged() {
    const TASKS: usize = 32;
    let (master, replica) = tokio::task::spawn_blocking(|| master_and_replica(&[]))
        .await
        .unwrap();
    let mut raw = master.conn().await;
    let mut on_replica = replica.conn().await;
    let client = synced_client(&master, Duration::from_secs(1));
    // Scripts loaded, the replica count read.
    lock_and_unlock(&client).await;
    let base = unique_name("sync-round");
    let names: Vec<String> = (0..TASKS).map(|i| format!("{base}:{i}")).collect();

    reset_stats(&mut raw).await;
    let guards = try_lock_all(&client, &names).await;
    let guards: Vec<_> = guards
        .into_iter()
        .map(|r| r.expect("acknowledged").expect("free"))
        .collect();
    let waited = waits(&mut raw).await;
    assert_eq!(
        script_calls(&mut raw).await,
        TASKS as u64,
        "one script per acquire"
    );
    assert!(
        (1..TASKS as u64).contains(&waited),
        "{waited} WAITs for {TASKS} acquires in flight together"
    );
    for name in &names {
        let held = hash(&mut raw, name).await;
        assert_eq!(held.len(), 1, "{name}: {held:?}");
        assert_eq!(
            hash(&mut on_replica, name).await,
            held,
            "{name} on the replica"
        );
    }

    let released = futures_util::future::join_all(guards.into_iter().map(|g| g.unlock())).await;
    for r in released {
        r.expect("released");
    }
    let waited = waits(&mut raw).await;
    assert_eq!(script_calls(&mut raw).await, 2 * TASKS as u64);
    assert!(
        waited < 2 * TASKS as u64,
        "{waited} WAITs for {} synced calls",
        2 * TASKS
    );
    for name in &names {
        assert_eq!(
            pttl(&mut on_replica, name).await,
            -2,
            "{name} on the replica"
        );
    }

    // Scripts the server forgot: a round's calls are answered NOSCRIPT (nothing of them ran),
    // and each goes again alone, loading its script first.
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut raw)
        .await
        .unwrap();
    let guards = try_lock_all(&client, &names[..16]).await;
    for (name, r) in names.iter().zip(guards) {
        let guard = r.expect("acknowledged").expect("free");
        assert_eq!(
            hash(&mut on_replica, name).await,
            hash(&mut raw, name).await,
            "{name} on the replica"
        );
        guard.unlock().await.unwrap();
    }

    // The replica stopped: no round is acknowledged, and every grant is given back.
    replica.pause();
    let refused = try_lock_all(&client, &names[..8]).await;
    replica.resume();
    for (name, r) in names.iter().zip(refused) {
        match r {
            Err(Error::ReplicasNotSynced { replicas: 1, .. }) => {}
            other => panic!("{name}: expected ReplicasNotSynced, got {other:?}"),
        }
        assert_eq!(pttl(&mut raw, name).await, -2, "{name} was given back");
    }
    client.shutdown().await;
}

/// A client of `master` alone with replica sync on.
fn synced_client(master: &RedisServer, timeout: Duration) -> Client {
    Client::builder()
        .url(master.url())
        .sync_replicas(SyncReplicas::On)
        .replica_sync_timeout(timeout)
        .build()
        .unwrap()
}

/// `try_lock()` on every name, all in flight together (polled in one pass of one task); the
/// results in order.
async fn try_lock_all(
    client: &Client,
    names: &[String],
) -> Vec<Result<Option<redisson_sync::LockGuard>, Error>> {
    let tries = names
        .iter()
        .map(|name| async move { client.lock(name).try_lock().await });
    futures_util::future::join_all(tries).await
}

/// A master and one replica, without Sentinel.
fn master_and_replica(master_args: &[&str]) -> (RedisServer, RedisServer) {
    let master = RedisServer::start_with(master_args);
    let replica = replica_at(&master, master.port());
    (master, replica)
}

/// A replica of `master` that connects to it at `port` (the master's own, or a proxy's), once
/// the master counts it online.
fn replica_at(master: &RedisServer, port: u16) -> RedisServer {
    let port = port.to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_replicas(master, 1);
    acknowledged(master);
    replica
}

/// Waits (bounded) until a write on `master` is acknowledged by its replica. A replica the
/// master lists as online may still be loading what it was sent (on a loaded machine, for
/// longer than a test's sync timeout), and acknowledges nothing until it is done.
fn acknowledged(master: &RedisServer) {
    let mut con = master.connect();
    let _: () = redis::cmd("SET")
        .arg("replica-sync:probe")
        .arg(1)
        .query(&mut con)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(acked, 1, "the replica acknowledged nothing within 10 s");
    let _: () = redis::cmd("DEL")
        .arg("replica-sync:probe")
        .query(&mut con)
        .unwrap();
}

/// Waits (bounded) until `master` reports `count` connected replicas, every one online.
fn wait_replicas(master: &RedisServer, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut con = master.connect();
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut con)
            .unwrap();
        if info.contains(&format!("connected_slaves:{count}"))
            && info.matches("state=online").count() == count
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not {count} replicas online: {info}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (bounded) until the replica has processed everything the master has sent.
async fn caught_up(master: &mut MultiplexedConnection, replica: &mut MultiplexedConnection) {
    let offset = |info: String| -> i64 {
        info.lines()
            .find_map(|l| l.strip_prefix("master_repl_offset:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(-1)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(master)
            .await
            .unwrap();
        let r: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(replica)
            .await
            .unwrap();
        if offset(m.clone()) == offset(r.clone()) {
            return;
        }
        assert!(Instant::now() < deadline, "replica behind: {m} / {r}");
        sleep(Duration::from_millis(20)).await;
    }
}

/// The replica reaches its master only through a fault proxy, so the proxy's faults are the
/// replication link's: what `WAIT` counts follows them exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_acknowledged_follows_the_replication_link() {
    let (master, proxy, replica) = tokio::task::spawn_blocking(|| {
        let master = RedisServer::start();
        let proxy = FaultProxy::start(master.addr());
        let replica = replica_at(&master, proxy.addr().port());
        (master, proxy, replica)
    })
    .await
    .unwrap();
    let mut raw = master.conn().await;
    let mut on_replica = replica.conn().await;
    let client = synced_client(&master, SYNC_TIMEOUT);
    let a = Owner::new(1);
    let field = format!("{}:{}", client.id(), a.id());
    let take = |name: &str| {
        let lock = client.lock(name);
        async move {
            lock.try_lock_with_options(Duration::ZERO, &LockOptions::new().owner(a))
                .await
        }
    };

    // Pass: an acknowledged grant is on the replica when the call returns.
    let first = unique_name("link-pass");
    let held = take(&first).await.unwrap().expect("free");
    assert_eq!(
        hash(&mut on_replica, &first).await,
        vec![(field.clone(), "1".to_owned())]
    );

    // A delay shorter than the sync timeout: the grant waits for it (the write 100 ms down
    // the link, the acknowledgement 100 ms back up) and is acknowledged.
    proxy.set_mode(Mode::delay(Duration::from_millis(100)));
    let delayed = unique_name("link-delay");
    let started = Instant::now();
    let guard = take(&delayed).await.unwrap().expect("free");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "acknowledged after {:?}",
        started.elapsed()
    );
    assert_eq!(
        hash(&mut on_replica, &delayed).await,
        vec![(field.clone(), "1".to_owned())]
    );
    proxy.set_mode(Mode::Pass);
    guard.unlock().await.unwrap();

    // Frozen: nothing is acknowledged; the grant is given back on the master...
    proxy.set_mode(Mode::Freeze);
    let frozen = unique_name("link-freeze");
    match take(&frozen).await {
        Err(Error::ReplicasNotSynced {
            operation,
            name,
            replicas,
            after,
        }) => {
            assert_eq!((operation, name.as_str()), ("acquire", frozen.as_str()));
            assert_eq!((replicas, after), (1, SYNC_TIMEOUT));
        }
        other => panic!("expected ReplicasNotSynced, got {other:?}"),
    }
    assert_eq!(
        pttl(&mut raw, &frozen).await,
        -2,
        "the grant was given back"
    );
    // ...and once the held bytes are delivered, on the replica too.
    proxy.set_mode(Mode::Pass);
    caught_up(&mut raw, &mut on_replica).await;
    assert_eq!(pttl(&mut on_replica, &frozen).await, -2);
    assert_eq!(
        hash(&mut on_replica, &first).await,
        vec![(field.clone(), "1".to_owned())],
        "the held lock is untouched"
    );

    // The link cut for good: the master counts no replica, and, as in Redisson, locks are
    // then taken without `WAIT` (the count is read again after the one unacknowledged call).
    proxy.set_mode(Mode::Reset);
    tokio::task::block_in_place(|| wait_replicas(&master, 0));
    let alone = unique_name("link-reset");
    let guard = match take(&alone).await {
        Ok(Some(guard)) => guard,
        Err(Error::ReplicasNotSynced { .. }) => take(&alone).await.unwrap().expect("free"),
        other => panic!("acquire with the link cut: {other:?}"),
    };
    reset_stats(&mut raw).await;
    guard.unlock().await.unwrap();
    lock_and_unlock(&client).await;
    assert_eq!(waits(&mut raw).await, 0, "no replica: no WAIT");

    // Healed: the replica resyncs, and once the client reads the count again (within its
    // 5 s), calls are synced again.
    proxy.set_mode(Mode::Pass);
    tokio::task::block_in_place(|| wait_replicas(&master, 1));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        reset_stats(&mut raw).await;
        lock_and_unlock(&client).await;
        if waits(&mut raw).await == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "calls are not synced again");
        sleep(Duration::from_millis(250)).await;
    }
    held.unlock().await.unwrap();
    client.shutdown().await;
}

async fn lock_and_unlock(client: &Client) {
    let guard = client
        .lock(unique_name("sync-single"))
        .try_lock()
        .await
        .unwrap()
        .expect("free");
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn off_and_auto_on_a_single_server_never_wait_and_on_does() {
    let (master, _replica) = tokio::task::spawn_blocking(|| master_and_replica(&[]))
        .await
        .unwrap();
    let mut raw = master.conn().await;
    reset_stats(&mut raw).await;
    for mode in [SyncReplicas::Auto, SyncReplicas::Off] {
        let client = Client::builder()
            .url(master.url())
            .sync_replicas(mode)
            .build()
            .unwrap();
        lock_and_unlock(&client).await;
        client.shutdown().await;
        assert_eq!(waits(&mut raw).await, 0, "{mode:?} sent WAIT");
    }
    let client = Client::builder()
        .url(master.url())
        .sync_replicas(SyncReplicas::On)
        .build()
        .unwrap();
    lock_and_unlock(&client).await;
    assert_eq!(waits(&mut raw).await, 2, "acquire and unlock, synced");
    client.shutdown().await;
}

#[tokio::test]
async fn a_server_that_refuses_wait_turns_replica_sync_off_once() {
    let (master, _replica) = tokio::task::spawn_blocking(|| master_and_replica(&[]))
        .await
        .unwrap();
    let mut raw = master.conn().await;
    // A user that may run everything but WAIT: the server refuses it (NOPERM), as one without
    // the command refuses it (unknown command).
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("nowait")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-wait")
        .query_async(&mut raw)
        .await
        .unwrap();
    let url = format!("redis://nowait:pw@127.0.0.1:{}", master.port());
    // Scripts loaded first (a NOSCRIPT would send the pipeline, and its WAIT, twice).
    let warm = Client::builder()
        .url(&url)
        .sync_replicas(SyncReplicas::Off)
        .build()
        .unwrap();
    lock_and_unlock(&warm).await;
    warm.shutdown().await;
    reset_stats(&mut raw).await;
    let client = Client::builder()
        .url(&url)
        .sync_replicas(SyncReplicas::On)
        .build()
        .unwrap();
    // The first synced call's WAIT is refused; the call itself worked, and no later call is
    // sent with WAIT.
    lock_and_unlock(&client).await;
    for _ in 0..2 {
        lock_and_unlock(&client).await;
    }
    let stats = command_stats(&mut raw, "wait").await;
    assert_eq!(stats.calls, 0);
    assert_eq!(stats.rejected_calls, 1, "WAIT sent after its refusal");
    client.shutdown().await;
}
