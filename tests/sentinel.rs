//! Sentinel mode (issue 13): the client asks the Sentinels for the master and follows their
//! failovers. Every test starts its own master, two replicas and three Sentinels
//! (`testkit::RedisSentinel`, loopback, free ports) and tears them down.
//!
//! - Locks go to the master the Sentinels name, through a client that was only given the
//!   Sentinels; bad setups (an unknown master name, a replica given as the server) are clear
//!   errors at `connect`.
//! - `SENTINEL FAILOVER` while a holder holds on the watchdog and waiters wait: the holder's
//!   renewals and its unlock reach the new master, the waiters are woken by the unlock message
//!   (their re-check interval is far longer than the test), and the time from the failover to
//!   the first acquire on the new master is printed.
//! - Tasks that take, count under and give back one lock across a failover: every overlap of
//!   two holds is one whose earlier hold was lost (its guard says so, or its unlock found it
//!   gone: a write the old master took in the instant before its demotion is lost with it,
//!   asynchronous replication); two holds that both were still there never overlap.
//!
//! Every loop is bounded in count and time; timings are bounds, generous for a loaded 2-core
//! machine.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{hash, pttl, unique_name};
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner};
use testkit::RedisSentinel;
use tokio::time::{sleep, timeout};

/// A raw connection to the data node the Sentinels name as master now.
async fn master_con(setup: &RedisSentinel) -> MultiplexedConnection {
    let addr = setup.current_master_addr().expect("a master");
    setup
        .server_at(addr)
        .expect("the master is one of the data nodes")
        .conn()
        .await
}

/// A client of the setup's master, found through its Sentinels.
async fn sentinel_client(setup: &RedisSentinel, watchdog: Duration, recheck: Duration) -> Client {
    Client::builder()
        .sentinel(setup.sentinel_urls(), setup.master_name())
        .watchdog_timeout(watchdog)
        .recheck_interval(recheck)
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect through the Sentinels")
}

/// Runs the blocking `RedisSentinel` setup off the runtime's worker.
async fn start_setup() -> RedisSentinel {
    tokio::task::spawn_blocking(RedisSentinel::start)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_go_to_the_master_the_sentinels_name_and_bad_setups_are_refused() {
    let setup = start_setup().await;
    let client = sentinel_client(&setup, Duration::from_secs(30), Duration::from_secs(30)).await;
    let name = unique_name("sentinel-basic");
    let owner = Owner::new(7);
    let guard = client
        .lock(&name)
        .lock_with_options(&LockOptions::new().owner(owner))
        .await
        .unwrap();
    let mut master = master_con(&setup).await;
    let field = format!("{}:{}", client.id(), owner.id());
    assert_eq!(
        hash(&mut master, &name).await,
        vec![(field, "1".to_owned())]
    );
    let ttl = pttl(&mut master, &name).await;
    assert!((29_000..=30_000).contains(&ttl), "pttl {ttl}");

    // A waiter through a second client is woken by the unlock message.
    let other = sentinel_client(&setup, Duration::from_secs(30), Duration::from_secs(30)).await;
    let waiter = {
        let lock = other.lock(&name);
        tokio::spawn(async move {
            let guard = lock.lock().await?;
            let at = Instant::now();
            guard.unlock().await?;
            Ok::<_, Error>(at)
        })
    };
    sleep(Duration::from_millis(300)).await;
    let unlocked = Instant::now();
    guard.unlock().await.unwrap();
    let woken = timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter is woken by the message, not the 30 s re-check")
        .unwrap()
        .unwrap();
    println!(
        "sentinel: waiter woken {:.1} ms after the unlock",
        woken.duration_since(unlocked).as_secs_f64() * 1e3
    );
    assert!(!common::exists(&mut master, &name).await);

    // An unknown master name: a clear error at connect, not a hang.
    let started = Instant::now();
    let err = Client::builder()
        .sentinel(setup.sentinel_urls(), "no-such-master")
        .connect()
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(15), "{err}");
    assert!(
        err.to_string().to_lowercase().contains("master"),
        "unknown master name: {err}"
    );

    // A replica given as the server: refused at connect, naming the fix.
    let replica = setup.replicas()[0].url();
    let err = Client::builder().url(&replica).connect().await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("read-only replica"), "{text}");
    assert!(text.contains("sentinel"), "{text}");

    // The Sentinels' login and the data nodes' are separate: an ACL user of the Sentinels in
    // their URLs, another user of the data nodes in the configuration.
    let acl = |user: &str, password: &str| {
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER")
            .arg(user)
            .arg("on")
            .arg(format!(">{password}"))
            .arg("~*")
            .arg("&*")
            .arg("+@all");
        cmd
    };
    for sentinel in setup.sentinels() {
        let _: () = acl("watcher", "watch-secret")
            .query_async(&mut sentinel.conn().await)
            .await
            .unwrap();
    }
    let _: () = acl("app", "app-secret")
        .query_async(&mut master)
        .await
        .unwrap();
    let urls: Vec<String> = setup
        .sentinels()
        .iter()
        .map(|s| format!("redis://watcher:watch-secret@127.0.0.1:{}", s.port()))
        .collect();
    let logged_in = Client::builder()
        .sentinel(urls.clone(), setup.master_name())
        .username("app")
        .password("app-secret")
        .connect()
        .await
        .unwrap();
    let guard = logged_in
        .lock(unique_name("sentinel-acl"))
        .lock()
        .await
        .unwrap();
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut master)
        .await
        .unwrap();
    assert!(clients.contains("user=app"), "{clients}");
    let mut watchers = 0;
    for sentinel in setup.sentinels() {
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut sentinel.conn().await)
            .await
            .unwrap();
        watchers += clients.matches("user=watcher").count();
    }
    assert!(watchers > 0, "no Sentinel connection logged in as watcher");
    guard.unlock().await.unwrap();
    logged_in.shutdown().await;
    // The data nodes' password given to the Sentinels instead: refused at connect.
    let wrong: Vec<String> = urls
        .iter()
        .map(|u| u.replace("watch-secret", "app-secret"))
        .collect();
    let err = Client::builder()
        .sentinel(wrong, setup.master_name())
        .username("app")
        .password("app-secret")
        .connect()
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("secret"), "{err}");

    client.shutdown().await;
    other.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_keeps_the_holder_and_its_waiters_are_woken_by_message() {
    let setup = start_setup().await;
    // Between the promotion and the `+switch-master` announcement (about a second) renewals
    // still reach the old master only: the lease must outlast that, as Redisson's 30 s does.
    let watchdog = Duration::from_secs(4);
    // Re-checks far apart: a waiter that gets the lock soon after the unlock was woken by the
    // message (or by the re-check every waiter does once its subscription moved).
    let recheck = Duration::from_secs(60);
    let holder = sentinel_client(&setup, watchdog, recheck).await;
    let waiters = sentinel_client(&setup, watchdog, recheck).await;
    let name = unique_name("sentinel-failover");
    let owner = Owner::new(7);
    let guard = holder
        .lock(&name)
        .lock_with_options(&LockOptions::new().owner(owner))
        .await
        .unwrap();
    let mut handles = Vec::new();
    for _ in 0..2 {
        let lock = waiters.lock(&name);
        handles.push(tokio::spawn(async move {
            let guard = lock.lock().await?;
            let at = Instant::now();
            sleep(Duration::from_millis(20)).await;
            guard.unlock().await?;
            Ok::<_, Error>(at)
        }));
    }
    sleep(Duration::from_millis(300)).await;
    let old = setup.current_master_addr().unwrap();

    // The failover, and the first acquire on the new master (a fresh lock, retried until it
    // is granted there).
    let failover_at = Instant::now();
    let new = {
        let setup = &setup;
        tokio::task::block_in_place(|| setup.failover()).unwrap()
    };
    assert_ne!(old, new);
    let probe = unique_name("sentinel-probe");
    let first_acquire = loop {
        assert!(
            failover_at.elapsed() < Duration::from_secs(30),
            "no acquire on the new master"
        );
        if let Ok(Some(g)) = holder.lock(&probe).try_lock().await {
            let mut master = master_con(&setup).await;
            if common::exists(&mut master, &probe).await {
                g.unlock().await.unwrap();
                break failover_at.elapsed();
            }
            g.unlock().await.ok();
        }
        sleep(Duration::from_millis(10)).await;
    };
    println!(
        "sentinel: SENTINEL FAILOVER to the first acquire on the new master: {:.0} ms",
        first_acquire.as_secs_f64() * 1e3
    );

    // More than a lease after the failover the hold is still there, renewed on the new master.
    sleep(watchdog + Duration::from_secs(1)).await;
    let mut master = master_con(&setup).await;
    let field = format!("{}:{}", holder.id(), owner.id());
    assert_eq!(
        hash(&mut master, &name).await,
        vec![(field, "1".to_owned())]
    );
    let ttl = pttl(&mut master, &name).await;
    assert!(ttl > 0 && ttl <= 4000, "pttl {ttl}");
    assert!(!guard.is_lost());

    let unlocked = Instant::now();
    guard.unlock().await.unwrap();
    for handle in handles {
        let at = timeout(Duration::from_secs(10), handle)
            .await
            .expect("a waiter is woken")
            .unwrap()
            .unwrap();
        let after = at.duration_since(unlocked);
        println!(
            "sentinel: waiter got the lock {:.1} ms after the unlock on the new master",
            after.as_secs_f64() * 1e3
        );
        assert!(after < Duration::from_secs(5), "{after:?}");
    }
    assert!(!common::exists(&mut master, &name).await);
    holder.shutdown().await;
    waiters.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_across_a_failover_overlap_only_when_the_earlier_guard_is_lost() {
    let setup = start_setup().await;
    let watchdog = Duration::from_millis(1500);
    let clients = [
        sentinel_client(&setup, watchdog, Duration::from_millis(200)).await,
        sentinel_client(&setup, watchdog, Duration::from_millis(200)).await,
    ];
    let name = unique_name("sentinel-stress");
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..4 {
        let lock = clients[t % 2].lock(&name);
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            // (acquired, releasing, lost by then)
            let mut holds: Vec<(Instant, Instant, bool)> = Vec::new();
            let mut errors = 0u32;
            for _ in 0..100_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                match lock.try_lock_for(Duration::from_secs(3)).await {
                    Ok(Some(guard)) => {
                        let acquired = Instant::now();
                        sleep(Duration::from_millis(2)).await;
                        let releasing = Instant::now();
                        let lost = guard.is_lost();
                        // An unlock that finds the hold gone shows it was lost (taken away
                        // with a write the failover dropped) while it was held.
                        let gone = matches!(guard.unlock().await, Err(Error::NotHeld { .. }));
                        holds.push((acquired, releasing, lost || gone));
                    }
                    Ok(None) => {}
                    Err(_) => {
                        errors += 1;
                        sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            (holds, errors)
        }));
    }
    sleep(Duration::from_secs(2)).await;
    let setup_ref = &setup;
    tokio::task::block_in_place(|| setup_ref.failover()).unwrap();
    sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (holds, e) = timeout(Duration::from_secs(20), task)
            .await
            .unwrap()
            .unwrap();
        all.extend(holds);
        errors += e;
    }
    all.sort_by_key(|h| h.0);
    let mut overlaps = 0;
    let mut unexplained = Vec::new();
    for pair in all.windows(2) {
        let (earlier, later) = (pair[0], pair[1]);
        if later.0 < earlier.1 {
            overlaps += 1;
            if !earlier.2 {
                unexplained.push(format!(
                    "a hold began {:?} before the earlier one (not lost) was released",
                    earlier.1 - later.0
                ));
            }
        }
    }
    println!(
        "sentinel stress: {} holds, {overlaps} overlaps, {errors} transient errors across the failover",
        all.len()
    );
    assert!(all.len() > 100, "only {} holds", all.len());
    assert!(unexplained.is_empty(), "{unexplained:?}");
    for client in &clients {
        client.shutdown().await;
    }
}
