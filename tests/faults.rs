//! Regression tests for the reliability defects found under network faults (issue 18), one per
//! defect, each with the fault proxy (`testkit::FaultProxy`) or a real server fault. Every test
//! failed on the crate before the fixes (the note of the change that fixed them lists the
//! figures before and after) and uses only the API that existed then.
//!
//! Timings are bounds, generous for a loaded 2-core machine; what each test pins is the
//! behaviour (who holds the lock, what the guard says, whether a call fails), not speed.

mod common;

use std::time::Duration;

use common::{
    FaultProxy, Mode, RedisServer, channel, hash, ms, queue_key, unique_name, wait_llen,
    wait_numsub,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, ClientBuilder, Error, LockGuard, LockOptions, Owner};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, timeout};

/// A builder for a client of `url` with a 30 s watchdog.
fn builder(url: String) -> ClientBuilder {
    Client::builder()
        .url(url)
        .watchdog_timeout(Duration::from_secs(30))
}

/// A Java-like foreign hold: another client's field, with a TTL.
async fn foreign_hold(raw: &mut MultiplexedConnection, name: &str, ttl_ms: u64) {
    let () = raw
        .hset(name, "0f0e0d0c-0b0a-4908-8706-050403020100:1", 1)
        .await
        .unwrap();
    let _: bool = raw.pexpire(name, ttl_ms as i64).await.unwrap();
}

async fn hold_count(raw: &mut MultiplexedConnection, name: &str, field: &str) -> u64 {
    let n: Option<u64> = raw.hget(name, field).await.unwrap();
    n.unwrap_or(0)
}

/// Polls (every 20 ms) until `name` is gone; `false` if it is still there after `within`.
async fn gone_within(raw: &mut MultiplexedConnection, name: &str, within: Duration) -> bool {
    let start = Instant::now();
    loop {
        let exists: bool = raw.exists(name).await.unwrap();
        if !exists {
            return true;
        }
        if start.elapsed() > within {
            return false;
        }
        sleep(ms(20)).await;
    }
}

/// The four lock kinds, made by hand (this file keeps to the API that predates `AnyLock`).
#[derive(Clone, Copy, Debug)]
enum Kind {
    Lock,
    Fair,
    Read,
    Write,
}

impl Kind {
    const ALL: [Self; 4] = [Self::Lock, Self::Fair, Self::Read, Self::Write];

    async fn lock(
        self,
        client: &Client,
        name: &str,
        opts: &LockOptions,
    ) -> Result<LockGuard, Error> {
        match self {
            Self::Lock => client.lock(name).lock_with_options(opts).await,
            Self::Fair => client.fair_lock(name).lock_with_options(opts).await,
            Self::Read => {
                client
                    .rw_lock(name)
                    .read_lock()
                    .lock_with_options(opts)
                    .await
            }
            Self::Write => {
                client
                    .rw_lock(name)
                    .write_lock()
                    .lock_with_options(opts)
                    .await
            }
        }
    }

    fn field(self, client: &Client, owner: u64) -> String {
        match self {
            Self::Write => format!("{}:{owner}:write", client.id()),
            _ => format!("{}:{owner}", client.id()),
        }
    }
}

/// Loads `kind`'s acquire and unlock scripts through `client` (a lock and unlock of a
/// throwaway name), so that from then on each goes out as one EVALSHA.
async fn warm_up(client: &Client, kind: Kind) {
    let opts = LockOptions::new().owner(Owner::new(1));
    kind.lock(client, &unique_name("warm"), &opts)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

// -----------------------------------------------------------------------------------------
// 1. A lost unlock message stalls waiters for a whole lease
// -----------------------------------------------------------------------------------------

/// Four waiters of one client on one lock, the client's subscription frozen by the proxy so
/// every unlock message is lost: each release must reach the next waiter within about the
/// re-check interval. Before: only the first re-checker capped its sleep; the others slept
/// until the lock's 30 s TTL once it had acquired (gaps of 28-29 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_1_after_lost_messages_every_waiter_is_rechecked_within_the_interval() {
    const WAITERS: u64 = 4;
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let recheck = ms(300);
    let client = builder(proxy.url())
        .recheck_interval(recheck)
        .build()
        .unwrap();
    let name = unique_name("d1");

    let first = client
        .lock(&name)
        .lock_with_options(&LockOptions::new().owner(Owner::new(100)))
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    for owner in 1..=WAITERS {
        let lock = client.lock(&name);
        let tx = tx.clone();
        tokio::spawn(async move {
            let g = lock
                .lock_with_options(&LockOptions::new().owner(Owner::new(owner)))
                .await
                .unwrap();
            let acquired = Instant::now();
            sleep(ms(50)).await;
            let released = Instant::now();
            g.unlock().await.unwrap();
            tx.send((acquired, released)).unwrap();
        });
    }
    wait_numsub(&mut raw, &channel(&name), 1).await;
    sleep(ms(400)).await;

    // From here on no message reaches the client.
    proxy.set_mode_for(b"SUBSCRIBE", Mode::Freeze);
    let mut previous_release = Instant::now();
    first.unlock().await.unwrap();
    let mut gaps = Vec::new();
    for i in 0..WAITERS {
        let (acquired, released) = timeout(Duration::from_secs(3), rx.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "waiter {i} not served within 3 s of the previous release; gaps so far {gaps:?}"
                )
            })
            .unwrap();
        gaps.push(acquired.saturating_duration_since(previous_release));
        previous_release = released;
    }
    println!("release-to-grant gaps with every message lost: {gaps:?}");
    for gap in &gaps {
        assert!(*gap < recheck + ms(400), "gap {gap:?}: {gaps:?}");
    }
    proxy.clear_modes_for();
    assert!(gone_within(&mut raw, &name, Duration::from_secs(2)).await);
    client.shutdown().await;
}

/// A silently stalled subscription (frozen by the proxy) is noticed by its keep-alive and
/// replaced within a few seconds, and messages reach the waiter again. Before: nothing noticed
/// it; the waiter only ever woke on its own re-check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_1_a_stalled_subscription_is_replaced_within_seconds() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let client = builder(proxy.url())
        .recheck_interval(Duration::from_secs(20))
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let name = unique_name("d1-keepalive");
    foreign_hold(&mut raw, &name, 30_000).await;
    let waiter = {
        let lock = client.lock(&name);
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    wait_numsub(&mut raw, &channel(&name), 1).await;
    sleep(ms(200)).await;

    let before = proxy.connections_accepted();
    let frozen = Instant::now();
    proxy.set_mode_for(b"SUBSCRIBE", Mode::Freeze);
    // The client opens a new connection when the old one stops answering.
    loop {
        if proxy.connections_accepted() > before {
            break;
        }
        assert!(
            frozen.elapsed() < Duration::from_secs(6),
            "the frozen subscription was not replaced within 6 s"
        );
        sleep(ms(50)).await;
    }
    println!("stalled subscription replaced after {:?}", frozen.elapsed());
    proxy.clear_modes_for();

    // A message reaches the waiter again (its re-check is 20 s away).
    let () = raw.del(&name).await.unwrap();
    let start = Instant::now();
    while !waiter.is_finished() {
        let _: i64 = raw.publish(channel(&name), "0").await.unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "no message reached the waiter after the subscription was replaced"
        );
        sleep(ms(100)).await;
    }
    let guard = waiter.await.unwrap();
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 2. `lost()` stays silent for the whole partition
// -----------------------------------------------------------------------------------------

/// Watchdog 1.5 s, the holder's link frozen: another client takes the lock once its lease
/// runs out, and the holder's guard must report the loss no later than that. Before: `lost()`
/// stayed silent until the link healed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_2_a_partitioned_holder_reports_the_loss_before_anyone_else_takes_the_lock() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let holder = Client::builder()
        .url(proxy.url())
        .watchdog_timeout(ms(1500))
        .build()
        .unwrap();
    let other = Client::builder()
        .url(server.url())
        .watchdog_timeout(ms(1500))
        .recheck_interval(ms(100))
        .build()
        .unwrap();
    let name = unique_name("d2");
    let guard = holder.lock(&name).lock().await.unwrap();
    sleep(ms(700)).await; // at least one renewal confirmed

    proxy.set_mode(Mode::Freeze);
    let frozen = Instant::now();
    let taker = {
        let lock = other.lock(&name);
        tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            (g, Instant::now())
        })
    };
    timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("the guard did not report the loss during a 3 s partition");
    let lost_at = Instant::now();
    assert!(guard.is_lost());
    let (g2, taken_at) = timeout(Duration::from_secs(4), taker)
        .await
        .unwrap()
        .unwrap();
    println!(
        "lost reported {:?} after the freeze, the other client took the lock {:?} after it",
        lost_at - frozen,
        taken_at - frozen
    );
    assert!(
        lost_at <= taken_at,
        "another client held the lock {:?} before the holder was told",
        lost_at - taken_at
    );
    proxy.set_mode(Mode::Pass);
    assert!(guard.unlock().await.unwrap_err().is_not_held());
    g2.unlock().await.unwrap();
    holder.shutdown().await;
    other.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 3. A reset after Redis ran the acquire loses the grant
// -----------------------------------------------------------------------------------------

/// The connection is reset right after the acquire was forwarded (Redis ran it, the reply
/// never came). The hold must be handed to the caller or undone, never left; and a retry by
/// the same owner must not end up holding twice. Before: `lock()` failed while Redis kept the
/// hold for its whole lease, and the owner's retry re-entered (count 2) and its unlock left
/// the lock held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_3_an_acquire_reset_after_it_ran_is_handed_out_or_undone_for_every_kind() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let client = builder(proxy.url()).build().unwrap();
    for kind in Kind::ALL {
        let opts = LockOptions::new().owner(Owner::new(1));
        warm_up(&client, kind).await;

        let name = unique_name("d3");
        let field = kind.field(&client, 1);
        let trigger = proxy.reset_after(name.as_bytes());
        let first = kind.lock(&client, &name, &opts).await;
        assert!(trigger.fired(), "{kind:?}: the proxy did not reset");
        match first {
            Ok(guard) => {
                // Handed to the caller: exactly one hold.
                assert_eq!(hold_count(&mut raw, &name, &field).await, 1, "{kind:?}");
                guard.unlock().await.unwrap();
            }
            Err(e) => {
                // Undone: no hold may stay behind.
                assert!(
                    gone_within(&mut raw, &name, Duration::from_secs(2)).await,
                    "{kind:?}: lock() failed ({e}) and left {:?} held",
                    hash(&mut raw, &name).await
                );
            }
        }
        assert!(
            gone_within(&mut raw, &name, Duration::from_secs(2)).await,
            "{kind:?}"
        );

        // The same owner again: one hold, and one unlock frees the lock.
        let guard = kind.lock(&client, &name, &opts).await.unwrap();
        assert_eq!(hold_count(&mut raw, &name, &field).await, 1, "{kind:?}");
        guard.unlock().await.unwrap();
        assert!(
            gone_within(&mut raw, &name, ms(500)).await,
            "{kind:?}: still held after the owner's only unlock: {:?}",
            hash(&mut raw, &name).await
        );
    }
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 4. A guard is handed back after its lease has expired
// -----------------------------------------------------------------------------------------

/// Lease 500 ms, every reply to the holder delayed 800 ms: the grant arrives after its lease,
/// when another client holds the lock. No guard may be handed out for it. Before: the guard
/// arrived at 0.8 s while the other client had held the lock since 0.5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_4_a_grant_arriving_after_its_lease_is_not_handed_out() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let holder = builder(proxy.url()).build().unwrap();
    let other = builder(server.url())
        .recheck_interval(ms(100))
        .build()
        .unwrap();
    let name = unique_name("d4");
    warm_up(&holder, Kind::Lock).await;

    proxy.set_mode(Mode::Delay {
        up: Duration::ZERO,
        down: ms(800),
    });
    let lease = LockOptions::new().lease(ms(500)).owner(Owner::new(1));
    let attempt = {
        let lock = holder.lock(&name);
        tokio::spawn(async move { lock.try_lock_with_options(ms(1000), &lease).await })
    };
    // The holder's acquire reaches Redis at once; the other client then waits for its lease.
    sleep(ms(100)).await;
    let taker = {
        let lock = other.lock(&name);
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    let result = timeout(Duration::from_secs(5), attempt)
        .await
        .unwrap()
        .unwrap();
    let taken = timeout(Duration::from_secs(3), taker)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !matches!(result, Ok(Some(_))),
        "a guard was handed out for a grant that arrived after its lease: {result:?}"
    );
    assert_eq!(
        hold_count(
            &mut raw,
            &name,
            &format!("{}:{}", other.id(), taken.owner())
        )
        .await,
        1
    );
    proxy.set_mode(Mode::Pass);
    taken.unlock().await.unwrap();
    assert!(gone_within(&mut raw, &name, Duration::from_secs(3)).await);
    holder.shutdown().await;
    other.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 5. Dead pooled connections fail lock calls that were never sent
// -----------------------------------------------------------------------------------------

/// Redis restarts with AOF (the lock survives): the holder's unlock right after the restart and
/// every waiting `lock()` must succeed. Before: the unlock failed with "broken pipe" (the
/// restored lock then blocked everyone for its lease) and 1-2 of 4 waiters failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_5_a_restart_with_aof_fails_no_unlock_and_no_waiter() {
    const WAITERS: u64 = 4;
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let make = |recheck: Duration| {
        builder(server.url())
            .recheck_interval(recheck)
            .command_timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_secs(1))
            .build()
            .unwrap()
    };
    let holder = make(Duration::from_secs(1));
    let waiters = make(ms(200));
    let name = unique_name("d5-aof");
    let guard = holder.lock(&name).lock().await.unwrap();
    let tasks: Vec<_> = (1..=WAITERS)
        .map(|owner| {
            let lock = waiters.lock(&name);
            tokio::spawn(async move {
                let g = lock
                    .lock_with_options(&LockOptions::new().owner(Owner::new(owner)))
                    .await?;
                sleep(ms(20)).await;
                g.unlock().await
            })
        })
        .collect();
    let mut raw = server.conn().await;
    wait_numsub(&mut raw, &channel(&name), 1).await;
    sleep(ms(300)).await;

    server.stop();
    server.restart();
    let mut raw = server.conn().await;
    assert!(
        raw.exists::<_, bool>(&name).await.unwrap(),
        "AOF kept the lock"
    );
    guard
        .unlock()
        .await
        .expect("the unlock right after the restart failed");
    for (i, task) in tasks.into_iter().enumerate() {
        timeout(Duration::from_secs(10), task)
            .await
            .unwrap_or_else(|_| panic!("waiter {i} not served within 10 s"))
            .unwrap()
            .unwrap_or_else(|e| panic!("waiter {i} failed: {e}"));
    }
    assert!(gone_within(&mut raw, &name, Duration::from_secs(2)).await);
    holder.shutdown().await;
    waiters.shutdown().await;
}

/// With the common server setting `timeout 2`, a holder idle for 4 s finds its pooled
/// connection closed by Redis: its unlock must still release the lock. Before: "broken pipe"
/// in 0 ms, and the lock stayed for the rest of its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_5_an_idle_holder_unlocks_after_the_server_closed_its_connection() {
    let server = RedisServer::start_with(&["--timeout", "2"]);
    let client = builder(server.url()).build().unwrap();
    let name = unique_name("d5-idle");
    let guard = client.lock(&name).lock().await.unwrap();
    sleep(Duration::from_secs(4)).await;
    guard
        .unlock()
        .await
        .expect("unlock after the server closed the idle connection");
    // (A fresh connection: the server closes idle ones, this test's own included.)
    let mut raw = server.conn().await;
    let exists: bool = raw.exists(&name).await.unwrap();
    assert!(!exists);
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 6. A timed-out unlock that lands late deletes the same owner's new hold
// -----------------------------------------------------------------------------------------

/// Command timeout 1 s, the unlock delayed 1.5 s on its way to Redis: the unlock times out,
/// the same owner re-acquires, then the late unlock lands. It must not delete the new hold
/// while the new guard says it is valid. Before: it did, and another client got in while the
/// new guard reported nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_6_a_late_unlock_never_deletes_the_owners_new_hold() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let client = builder(proxy.url())
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let other = builder(server.url())
        .recheck_interval(ms(50))
        .build()
        .unwrap();
    let name = unique_name("d6");
    let owner = Owner::new(1);
    // Warm up: the scripts are loaded, so the unlock below runs when it lands.
    warm_up(&client, Kind::Lock).await;
    let g1 = client
        .lock(&name)
        .lock_with_options(&LockOptions::new().lease(ms(500)).owner(owner))
        .await
        .unwrap();

    // Only the connection that carries the unlock script is slowed down (by the script's
    // SHA, which its EVALSHA names): the owner's next acquire goes out on a fresh connection.
    let unlock_sha = redis::Script::new(include_str!("../lua/lock/unlock.lua"))
        .get_hash()
        .to_owned();
    proxy.set_mode_for(
        unlock_sha.as_bytes(),
        Mode::Delay {
            up: ms(1500),
            down: Duration::ZERO,
        },
    );
    let unlocked = g1.unlock().await;
    println!("unlock with its request delayed 1.5 s: {unlocked:?}");

    let g2 = client
        .lock(&name)
        .lock_with_options(
            &LockOptions::new()
                .lease(Duration::from_secs(10))
                .owner(owner),
        )
        .await
        .unwrap();
    let rival = {
        let lock = other.lock(&name);
        tokio::spawn(async move { lock.try_lock_for(ms(1500)).await.unwrap() })
    };
    // Well past the moment the delayed unlock reaches Redis.
    sleep(ms(1700)).await;
    let field = format!("{}:1", client.id());
    let count = hold_count(&mut raw, &name, &field).await;
    let rival = timeout(Duration::from_secs(2), rival)
        .await
        .unwrap()
        .unwrap();
    if !g2.is_lost() {
        assert_eq!(
            count, 1,
            "the new hold was deleted while its guard says it is valid"
        );
        assert!(
            rival.is_none(),
            "another client got the lock while the new guard says it is valid"
        );
    }
    if let Some(r) = rival {
        r.unlock().await.unwrap();
    }
    proxy.clear_modes_for();
    let _ = g2.unlock().await;
    client.shutdown().await;
    other.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 7. FairLock::try_lock_for(800 ms) with Redis stalled returns after 3.9 s
// -----------------------------------------------------------------------------------------

/// `try_lock_for(wait)` returns within `wait` plus 100 ms (documented), for the fair lock too,
/// when Redis stalls while the waiter is queued: its give-up cleanup must not be awaited for a
/// whole command timeout. Before: 3.9 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_7_a_fair_try_lock_for_returns_within_its_wait_while_redis_is_stalled() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = builder(server.url()).build().unwrap();
    let name = unique_name("d7");
    foreign_hold(&mut raw, &name, 30_000).await;

    let start = Instant::now();
    let waiter = {
        let lock = client.fair_lock(&name);
        tokio::spawn(async move { lock.try_lock_for(ms(800)).await })
    };
    // Queued, then Redis stalls until after the wait.
    wait_llen(&mut raw, &name, 1).await;
    server.pause();
    let r = timeout(Duration::from_secs(6), waiter)
        .await
        .unwrap()
        .unwrap();
    let elapsed = start.elapsed();
    server.resume();
    println!("fair try_lock_for(800 ms), Redis stalled while queued: {elapsed:?}, {r:?}");
    assert!(!matches!(r, Ok(Some(_))));
    assert!(elapsed < ms(800 + 100 + 300), "took {elapsed:?}");

    // Once Redis is back, the waiter's queue entry is cleaned up.
    let start = Instant::now();
    loop {
        let queued: usize = raw.llen(queue_key(&name)).await.unwrap();
        if queued == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "queue entry left behind"
        );
        sleep(ms(20)).await;
    }
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 8. try_lock_for(Duration::MAX) panics
// -----------------------------------------------------------------------------------------

/// A wait too long for the clock means "no deadline". Before: a panic inside the crate
/// (instant overflow).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_8_try_lock_for_duration_max_waits_without_a_deadline() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = builder(server.url())
        .recheck_interval(ms(100))
        .build()
        .unwrap();
    let name = unique_name("d8");
    foreign_hold(&mut raw, &name, 300).await;
    let g = timeout(
        Duration::from_secs(5),
        client.lock(&name).try_lock_for(Duration::MAX),
    )
    .await
    .expect("acquired once the foreign hold expired")
    .unwrap()
    .expect("a wait without deadline does not give up");
    g.unlock().await.unwrap();
    let g = client
        .fair_lock(&name)
        .try_lock_with_options(Duration::MAX, &LockOptions::new())
        .await
        .unwrap()
        .unwrap();
    g.unlock().await.unwrap();
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 9. A waiting lock() fails at once on a BUSY reply
// -----------------------------------------------------------------------------------------

/// A long script keeps Redis busy; `BUSY` proves the acquire did not run, so a waiting
/// `lock()` retries within its wait and gets the lock once the script ends. Before: it failed
/// at once with the BUSY error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_9_a_waiting_lock_retries_through_busy() {
    let server = RedisServer::start_with(&["--busy-reply-threshold", "100"]);
    let client = builder(server.url()).build().unwrap();
    let name = unique_name("d9");
    warm_up(&client, Kind::Lock).await;

    let busy = {
        let mut con = server.connect();
        std::thread::spawn(move || {
            // Spins for 1.5 s inside Redis.
            let script = "local t = redis.call('TIME') \
                 local start = t[1] * 1000000 + t[2] \
                 while true do \
                   local n = redis.call('TIME') \
                   if n[1] * 1000000 + n[2] - start > 1500000 then break end \
                 end return 1";
            let _: redis::RedisResult<i64> = redis::cmd("EVAL").arg(script).arg(0).query(&mut con);
        })
    };
    sleep(ms(400)).await;
    let start = Instant::now();
    let g = timeout(Duration::from_secs(6), client.lock(&name).lock())
        .await
        .expect("lock() did not return within 6 s")
        .expect("lock() failed on BUSY instead of waiting");
    println!(
        "lock() acquired {:?} after starting against a busy Redis",
        start.elapsed()
    );
    g.unlock().await.unwrap();
    busy.join().unwrap();
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 10. A free fair lock stays unusable after a waiter is cancelled
// -----------------------------------------------------------------------------------------

/// The queue's head is woken by an unlock, but its `lock()` is dropped before it takes the
/// lock: its give-up cleanup must wake the next waiter, so the free lock passes on at once.
/// Before: the next waiter slept until its own re-check (here 10 s) or the old TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_10_a_cancelled_fair_head_wakes_the_next_waiter() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let slow = Duration::from_secs(10);
    let holder = builder(server.url())
        .recheck_interval(slow)
        .build()
        .unwrap();
    let head = builder(proxy.url())
        .recheck_interval(slow)
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let next = builder(server.url())
        .recheck_interval(slow)
        .build()
        .unwrap();
    let name = unique_name("d10");

    let g = holder.fair_lock(&name).lock().await.unwrap();
    let head_task = {
        let lock = head.fair_lock(&name);
        tokio::spawn(async move { lock.lock().await })
    };
    wait_llen(&mut raw, &name, 1).await;
    let next_task = {
        let lock = next.fair_lock(&name);
        tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            (g, Instant::now())
        })
    };
    wait_llen(&mut raw, &name, 2).await;
    sleep(ms(300)).await;

    // The head's link stalls; the unlock wakes it (the message waits in the proxy), and the
    // head's caller gives up before the head could take the lock.
    proxy.set_mode(Mode::Freeze);
    g.unlock().await.unwrap();
    head_task.abort();
    sleep(ms(200)).await;
    proxy.set_mode(Mode::Pass);
    let healed = Instant::now();

    let (g2, acquired) = timeout(Duration::from_secs(3), next_task)
        .await
        .expect("the next waiter was not woken within 3 s of the head leaving")
        .unwrap();
    println!(
        "next waiter served {:?} after the head's link healed",
        acquired - healed
    );
    g2.unlock().await.unwrap();
    assert!(gone_within(&mut raw, &name, Duration::from_secs(2)).await);
    holder.shutdown().await;
    head.shutdown().await;
    next.shutdown().await;
}
