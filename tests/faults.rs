//! Regression tests for the reliability defects found under network faults, one per defect,
//! each with the fault proxy (`testkit::FaultProxy`) or a real server fault. Every test failed
//! on the crate before the fixes (the note of the change that fixed them lists the figures
//! before and after); first written for the reentrant lock (and the fair lock where the defect
//! was its own), they now run once per lock kind (`common::Kind`, `per_kind!`), since every
//! kind shares the engine and the hold layer they exercise.
//!
//! Kind-specific: a read hold does not keep other readers out, so the rival of a read holder
//! (another client taking the lock, waiters behind it) takes the write half (`Kind::rival`);
//! waiters of the fair kinds queue, the spin and token locks' poll instead of subscribing, so
//! "the waiters are parked" is seen in the queue, the subscriptions or the polls
//! (`Kind::wait_parked`); a foreign hold is written as the kind would see it held
//! (`Kind::foreign_hold`).
//!
//! Timings are bounds, generous for a loaded 2-core machine; what each test pins is the
//! behaviour (who holds the lock, what the guard says, whether a call fails), not speed. The
//! tests mostly wait (for leases, partitions, stalls, idle timeouts): the nine kinds of each run
//! at once (`per_kind!(at_once ...)`, each on a server, client and runtime of its own).

mod common;

use std::time::Duration;

use common::{
    FaultProxy, Kind, Mode, RedisServer, builder, busy_for, busy_server, gone_within, ms, per_kind,
    script_calls, state, unique_name,
};
use redis::AsyncCommands;
use redisson_sync::{Client, LockOptions, Owner};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, timeout};

// -----------------------------------------------------------------------------------------
// 1. A lost unlock message stalls waiters for a whole lease
// -----------------------------------------------------------------------------------------

per_kind!(at_once multi_thread(2), async fn defect_1_after_lost_messages_every_waiter_is_rechecked_within_the_interval);

/// Four waiters of one client on one lock, the client's subscription frozen by the proxy so
/// every unlock message is lost: each release must reach the next waiter within about the
/// re-check interval. Before: only the first re-checker capped its sleep; the others slept
/// until the lock's 30 s TTL once it had acquired (gaps of 28-29 s). (The spin and token locks'
/// waiters poll: no message to lose, and the same bound holds.)
async fn defect_1_after_lost_messages_every_waiter_is_rechecked_within_the_interval(kind: Kind) {
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

    // (Behind a read holder a writer, so that the readers wait.)
    let first = kind
        .rival()
        .any(&client, &name)
        .lock_with_options(&LockOptions::new().owner(Owner::new(100)))
        .await
        .unwrap();
    let polls = script_calls(&mut raw).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    for owner in 1..=WAITERS {
        let lock = kind.any(&client, &name);
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
    kind.wait_parked(&mut raw, &name, 1, WAITERS as usize, polls)
        .await;
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
                    "{kind}: waiter {i} not served within 3 s of the previous release; gaps so \
                     far {gaps:?}"
                )
            })
            .unwrap();
        gaps.push(acquired.saturating_duration_since(previous_release));
        previous_release = released;
    }
    println!("{kind}: release-to-grant gaps with every message lost: {gaps:?}");
    for gap in &gaps {
        assert!(*gap < recheck + ms(400), "{kind}: gap {gap:?}: {gaps:?}");
    }
    proxy.clear_modes_for();
    assert!(gone_within(&mut raw, &name, Duration::from_secs(2)).await);
    client.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn defect_1_a_stalled_subscription_is_replaced_within_seconds; except {
    spin: "not applicable: spin waiters poll, they have no subscription to stall",
    token: "not applicable: token lock waiters poll, they have no subscription to stall",
});

/// A silently stalled subscription (frozen by the proxy) is noticed by its keep-alive and
/// replaced within a few seconds, and messages reach the waiter again. Before: nothing noticed
/// it; the waiter only ever woke on its own re-check. (A fair waiter's messages come on its
/// own channel.)
async fn defect_1_a_stalled_subscription_is_replaced_within_seconds(kind: Kind) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let client = builder(proxy.url())
        .recheck_interval(Duration::from_secs(20))
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let name = unique_name("d1-keepalive");
    kind.foreign_hold(&mut raw, &name, 30_000).await;
    let owner = Owner::new(9);
    let channel = kind
        .waiter_channel(&name, &kind.field(&client, owner))
        .expect("a waiter that subscribes");
    let waiter = {
        let lock = kind.any(&client, &name);
        tokio::spawn(async move {
            lock.lock_with_options(&LockOptions::new().owner(owner))
                .await
                .unwrap()
        })
    };
    common::wait_numsub(&mut raw, &channel, 1).await;
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
            "{kind}: the frozen subscription was not replaced within 6 s"
        );
        sleep(ms(50)).await;
    }
    println!(
        "{kind}: stalled subscription replaced after {:?}",
        frozen.elapsed()
    );
    proxy.clear_modes_for();

    // A message reaches the waiter again (its re-check is 20 s away).
    let () = raw.del(&name).await.unwrap();
    let start = Instant::now();
    while !waiter.is_finished() {
        let _: i64 = raw.publish(&channel, "0").await.unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "{kind}: no message reached the waiter after the subscription was replaced"
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

per_kind!(at_once multi_thread(2), async fn defect_2_a_partitioned_holder_reports_the_loss_before_anyone_else_takes_the_lock);

/// Watchdog 1.5 s, the holder's link frozen: another client takes the lock once its lease
/// runs out, and the holder's guard must report the loss no later than that. Before: `lost()`
/// stayed silent until the link healed.
async fn defect_2_a_partitioned_holder_reports_the_loss_before_anyone_else_takes_the_lock(
    kind: Kind,
) {
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
    let guard = kind.any(&holder, &name).lock().await.unwrap();
    sleep(ms(700)).await; // at least one renewal confirmed

    proxy.set_mode(Mode::Freeze);
    let frozen = Instant::now();
    let taker = {
        let lock = kind.rival().any(&other, &name);
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
        "{kind}: lost reported {:?} after the freeze, the other client took the lock {:?} after it",
        lost_at - frozen,
        taken_at - frozen
    );
    assert!(
        lost_at <= taken_at,
        "{kind}: another client held the lock {:?} before the holder was told",
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

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn defect_3_an_acquire_reset_after_it_ran_is_handed_out_or_undone);

/// The connection is reset right after the acquire was forwarded (Redis ran it, the reply
/// never came). The hold must be handed to the caller or undone, never left; and a retry by
/// the same owner must not end up holding twice. Before: `lock()` failed while Redis kept the
/// hold for its whole lease, and the owner's retry re-entered (count 2) and its unlock left
/// the lock held.
async fn defect_3_an_acquire_reset_after_it_ran_is_handed_out_or_undone(kind: Kind) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let client = builder(proxy.url()).build().unwrap();
    let owner = Owner::new(1);
    let opts = LockOptions::new().owner(owner);
    kind.warm_up(&client).await;

    let name = unique_name("d3");
    let field = kind.field(&client, owner);
    let lock = kind.any(&client, &name);
    let trigger = proxy.reset_after(name.as_bytes());
    let first = lock.lock_with_options(&opts).await;
    assert!(trigger.fired(), "{kind}: the proxy did not reset");
    match first {
        Ok(guard) => {
            // Handed to the caller: exactly one hold.
            assert_eq!(
                kind.count_in_redis(&mut raw, &name, &field).await,
                1,
                "{kind}"
            );
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&field, 1));
            guard.unlock().await.unwrap();
        }
        Err(e) => {
            // Undone: no hold may stay behind.
            assert!(
                gone_within(&mut raw, &name, Duration::from_secs(2)).await,
                "{kind}: lock() failed ({e}) and left {:?} held",
                state(&mut raw, &name).await
            );
        }
    }
    assert!(
        gone_within(&mut raw, &name, Duration::from_secs(2)).await,
        "{kind}"
    );

    // The same owner again: one hold, and one unlock frees the lock.
    let guard = lock.lock_with_options(&opts).await.unwrap();
    assert_eq!(
        kind.count_in_redis(&mut raw, &name, &field).await,
        1,
        "{kind}"
    );
    guard.unlock().await.unwrap();
    assert!(
        gone_within(&mut raw, &name, ms(500)).await,
        "{kind}: still held after the owner's only unlock: {:?}",
        state(&mut raw, &name).await
    );
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 4. A guard is handed back after its lease has expired
// -----------------------------------------------------------------------------------------

per_kind!(at_once multi_thread(2), async fn defect_4_a_grant_arriving_after_its_lease_is_not_handed_out);

/// Lease 500 ms, every reply to the holder delayed 800 ms: the grant arrives after its lease,
/// when another client holds the lock. No guard may be handed out for it. Before: the guard
/// arrived at 0.8 s while the other client had held the lock since 0.5 s.
async fn defect_4_a_grant_arriving_after_its_lease_is_not_handed_out(kind: Kind) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let holder = builder(proxy.url()).build().unwrap();
    let other = builder(server.url())
        .recheck_interval(ms(100))
        .build()
        .unwrap();
    let name = unique_name("d4");
    kind.warm_up(&holder).await;

    proxy.set_mode(Mode::Delay {
        up: Duration::ZERO,
        down: ms(800),
    });
    let lease = LockOptions::new().lease(ms(500)).owner(Owner::new(1));
    let attempt = {
        let lock = kind.any(&holder, &name);
        tokio::spawn(async move { lock.try_lock_with_options(ms(1000), &lease).await })
    };
    // The holder's acquire reaches Redis at once; the other client then waits for its lease.
    sleep(ms(100)).await;
    let rival = kind.rival();
    let taker = {
        let lock = rival.any(&other, &name);
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
        "{kind}: a guard was handed out for a grant that arrived after its lease: {result:?}"
    );
    let taker_field = rival.field(&other, taken.owner());
    assert_eq!(
        state(&mut raw, &name).await,
        rival.state_of(&taker_field, 1),
        "{kind}"
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

per_kind!(at_once multi_thread(2), async fn defect_5_a_restart_with_aof_fails_no_unlock_and_no_waiter);

/// Redis restarts with AOF (the lock survives): the holder's unlock right after the restart and
/// every waiting `lock()` must succeed. Before: the unlock failed with "broken pipe" (the
/// restored lock then blocked everyone for its lease) and 1-2 of 4 waiters failed. (The waiters
/// of a read holder take the write half.)
async fn defect_5_a_restart_with_aof_fails_no_unlock_and_no_waiter(kind: Kind) {
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
    let guard = kind.any(&holder, &name).lock().await.unwrap();
    let mut raw = server.conn().await;
    let polls = script_calls(&mut raw).await;
    let tasks: Vec<_> = (1..=WAITERS)
        .map(|owner| {
            let lock = kind.rival().any(&waiters, &name);
            tokio::spawn(async move {
                let g = lock
                    .lock_with_options(&LockOptions::new().owner(Owner::new(owner)))
                    .await?;
                sleep(ms(20)).await;
                g.unlock().await
            })
        })
        .collect();
    kind.rival()
        .wait_parked(&mut raw, &name, 1, WAITERS as usize, polls)
        .await;
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
            .unwrap_or_else(|_| panic!("{kind}: waiter {i} not served within 10 s"))
            .unwrap()
            .unwrap_or_else(|e| panic!("{kind}: waiter {i} failed: {e}"));
    }
    assert!(gone_within(&mut raw, &name, Duration::from_secs(2)).await);
    holder.shutdown().await;
    waiters.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn defect_5_an_idle_holder_unlocks_after_the_server_closed_its_connection);

/// With the common server setting `timeout 2`, a holder idle for 4 s finds its pooled
/// connection closed by Redis: its unlock must still release the lock. Before: "broken pipe"
/// in 0 ms, and the lock stayed for the rest of its lease.
async fn defect_5_an_idle_holder_unlocks_after_the_server_closed_its_connection(kind: Kind) {
    let server = RedisServer::start_with(&["--timeout", "2"]);
    let client = builder(server.url()).build().unwrap();
    let name = unique_name("d5-idle");
    let guard = kind.any(&client, &name).lock().await.unwrap();
    sleep(Duration::from_secs(4)).await;
    guard
        .unlock()
        .await
        .expect("unlock after the server closed the idle connection");
    // (A fresh connection: the server closes idle ones, this test's own included.)
    let mut raw = server.conn().await;
    let exists: bool = raw.exists(&name).await.unwrap();
    assert!(!exists, "{kind}");
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 6. A timed-out unlock that lands late deletes the same owner's new hold
// -----------------------------------------------------------------------------------------

per_kind!(at_once multi_thread(2), async fn defect_6_a_late_unlock_never_deletes_the_owners_new_hold);

/// Command timeout 1 s, the unlock delayed 1.5 s on its way to Redis: the unlock times out,
/// the same owner re-acquires, then the late unlock lands. It must not delete the new hold
/// while the new guard says it is valid. Before: it did, and another client got in while the
/// new guard reported nothing.
async fn defect_6_a_late_unlock_never_deletes_the_owners_new_hold(kind: Kind) {
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
    kind.warm_up(&client).await;
    let lock = kind.any(&client, &name);
    let g1 = lock
        .lock_with_options(&LockOptions::new().lease(ms(500)).owner(owner))
        .await
        .unwrap();

    // Only the connection that carries the unlock script is slowed down (by the script's
    // SHA, which its EVALSHA names): the owner's next acquire goes out on a fresh connection.
    let unlock_sha = redis::Script::new(kind.unlock_script())
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
    println!("{kind}: unlock with its request delayed 1.5 s: {unlocked:?}");

    let g2 = lock
        .lock_with_options(
            &LockOptions::new()
                .lease(Duration::from_secs(10))
                .owner(owner),
        )
        .await
        .unwrap();
    let rival = {
        let lock = kind.rival().any(&other, &name);
        tokio::spawn(async move { lock.try_lock_for(ms(1500)).await.unwrap() })
    };
    // Well past the moment the delayed unlock reaches Redis.
    sleep(ms(1700)).await;
    let field = kind.field(&client, owner);
    let count = kind.count_in_redis(&mut raw, &name, &field).await;
    let rival = timeout(Duration::from_secs(2), rival)
        .await
        .unwrap()
        .unwrap();
    if !g2.is_lost() {
        assert_eq!(
            count, 1,
            "{kind}: the new hold was deleted while its guard says it is valid"
        );
        assert!(
            rival.is_none(),
            "{kind}: another client got the lock while the new guard says it is valid"
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

per_kind!(at_once multi_thread(2), async fn defect_7_a_try_lock_for_returns_within_its_wait_while_redis_is_stalled);

/// `try_lock_for(wait)` returns within `wait` plus 100 ms (documented), when Redis stalls
/// while the waiter waits: for the fair kinds, queued, whose give-up cleanup must not be
/// awaited for a whole command timeout (before: 3.9 s); the other kinds have no cleanup, and
/// the same bound holds. Once Redis is back the waiter leaves no queue entry.
async fn defect_7_a_try_lock_for_returns_within_its_wait_while_redis_is_stalled(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = builder(server.url()).build().unwrap();
    let name = unique_name("d7");
    kind.foreign_hold(&mut raw, &name, 30_000).await;

    let polls = script_calls(&mut raw).await;
    let start = Instant::now();
    let waiter = {
        let lock = kind.any(&client, &name);
        tokio::spawn(async move { lock.try_lock_for(ms(800)).await })
    };
    // Waiting (queued, subscribed or polling), then Redis stalls until after the wait.
    kind.wait_parked(&mut raw, &name, 1, 1, polls).await;
    server.pause();
    let r = timeout(Duration::from_secs(6), waiter)
        .await
        .unwrap()
        .unwrap();
    let elapsed = start.elapsed();
    server.resume();
    println!("{kind}: try_lock_for(800 ms), Redis stalled while waiting: {elapsed:?}, {r:?}");
    assert!(!matches!(r, Ok(Some(_))));
    assert!(elapsed < ms(800 + 100 + 300), "{kind}: took {elapsed:?}");

    // Once Redis is back, the waiter's queue entry (and deadline) is cleaned up.
    kind.wait_no_waiters(&mut raw, &name).await;
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 8. try_lock_for(Duration::MAX) panics
// -----------------------------------------------------------------------------------------

per_kind!(at_once multi_thread(2), async fn defect_8_try_lock_for_duration_max_waits_without_a_deadline);

/// A wait too long for the clock means "no deadline". Before: a panic inside the crate
/// (instant overflow).
async fn defect_8_try_lock_for_duration_max_waits_without_a_deadline(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = builder(server.url())
        .recheck_interval(ms(100))
        .build()
        .unwrap();
    let name = unique_name("d8");
    kind.foreign_hold(&mut raw, &name, 300).await;
    let lock = kind.any(&client, &name);
    let g = timeout(Duration::from_secs(5), lock.try_lock_for(Duration::MAX))
        .await
        .expect("acquired once the foreign hold expired")
        .unwrap()
        .expect("a wait without deadline does not give up");
    g.unlock().await.unwrap();
    let g = lock
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

per_kind!(at_once multi_thread(2), async fn defect_9_a_waiting_lock_retries_through_busy);

/// A long script keeps Redis busy; `BUSY` proves the acquire did not run, so a waiting
/// `lock()` retries within its wait and gets the lock once the script ends. Before: it failed
/// at once with the BUSY error.
async fn defect_9_a_waiting_lock_retries_through_busy(kind: Kind) {
    let server = busy_server();
    let client = builder(server.url()).build().unwrap();
    let name = unique_name("d9");
    kind.warm_up(&client).await;

    let busy = busy_for(&server, ms(1500));
    sleep(ms(400)).await;
    let start = Instant::now();
    let g = timeout(Duration::from_secs(6), kind.any(&client, &name).lock())
        .await
        .expect("lock() did not return within 6 s")
        .expect("lock() failed on BUSY instead of waiting");
    println!(
        "{kind}: lock() acquired {:?} after starting against a busy Redis",
        start.elapsed()
    );
    g.unlock().await.unwrap();
    busy.join().unwrap();
    client.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// 10. A free fair lock stays unusable after a waiter is cancelled
// -----------------------------------------------------------------------------------------

per_kind!(at_once multi_thread(2), async fn defect_10_a_cancelled_head_wakes_the_next_waiter);

/// The fair queue's head is woken by an unlock, but its `lock()` is dropped before it takes
/// the lock: its give-up cleanup must wake the next waiter, so the free lock passes on at once.
/// Before: the next waiter slept until its own re-check (here 10 s) or the old TTL. (The other
/// kinds wake a waiter of every client, or poll: the next waiter, on a client of its own, is
/// served as promptly. The waiters of a read holder take the write half.)
async fn defect_10_a_cancelled_head_wakes_the_next_waiter(kind: Kind) {
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
    let waiting = kind.rival();

    let g = kind.any(&holder, &name).lock().await.unwrap();
    let polls = script_calls(&mut raw).await;
    let head_task = {
        let lock = waiting.any(&head, &name);
        tokio::spawn(async move { lock.lock().await })
    };
    waiting.wait_parked(&mut raw, &name, 1, 1, polls).await;
    let polls = script_calls(&mut raw).await;
    let next_task = {
        let lock = waiting.any(&next, &name);
        tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            (g, Instant::now())
        })
    };
    waiting.wait_parked(&mut raw, &name, 2, 2, polls).await;
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
        "{kind}: next waiter served {:?} after the head's link healed",
        acquired - healed
    );
    g2.unlock().await.unwrap();
    assert!(gone_within(&mut raw, &name, Duration::from_secs(2)).await);
    holder.shutdown().await;
    head.shutdown().await;
    next.shutdown().await;
}
