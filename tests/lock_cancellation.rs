//! Cancel safety: acquire futures dropped at any moment (tiny timeouts, aborted tasks,
//! `select!` losers), including while their acquire script is in flight, never leave a lock
//! held without a guard. Afterwards the key is gone and a fresh lock succeeds at once.
//!
//! Leases here are 30 s on purpose: a leaked hold would outlive the test instead of expiring
//! quietly, so the "key absent" checks catch it.
//!
//! Every test runs once per lock kind (`common::Kind`, `per_kind!`). "No key left" covers what
//! each kind writes: the read half's marker keys, and the fair kinds' waiter queue and
//! deadlines, which a waiter that is cancelled must leave; the only keys that stay are the
//! fenced lock's token counters, which outlive every hold by design (`Kind::lasting_keys`).
//! Where waiters need a holder to wait behind, the holder takes the kind's rival
//! (`Kind::rival`: the write half when the waiters read, as readers share the lock). A
//! non-reentrant kind's re-entry is refused (`Kind::reentry`), so a dropped re-entry of a
//! holder is a refused one there.
//!
//! The semaphores and the latch (`common::Primitive`, `per_primitive!`): waiting acquires
//! cancelled in every way leave their key exactly as it was, no grant marker, no acquired
//! permit and no subscription, and the next acquire succeeds at once.

mod common;

use std::time::{Duration, Instant};

use common::{
    Kind, Primitive, RedisServer, Reentry, State, client_with, describe_keys, lock_keys, per_kind,
    per_primitive, script_calls, state, unique_name, wait_no_subscriptions, wait_numsub,
};
use rand::Rng;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner};

/// How long background undo/release tasks get to finish before leftovers count as leaks.
const SETTLE: Duration = Duration::from_secs(5);

/// The client of every test here: 30 s leases (see above) and a 200 ms re-check interval.
fn new_client(server: &RedisServer) -> Client {
    client_with(server, Duration::from_secs(30), Duration::from_millis(200))
}

/// Polls until the server (private to the test) has had no lock key (`common::lock_keys`: all
/// but the fenced token counters, whose exact set `shutdown_and_assert_empty` checks) for 300 ms
/// in a row: background acquire attempts and their undos may still be queued when the loops end.
async fn wait_no_keys(raw: &mut MultiplexedConnection) {
    let start = Instant::now();
    let mut empty_since: Option<Instant> = None;
    loop {
        if lock_keys(raw).await.is_empty() {
            let since = *empty_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_millis(300) {
                return;
            }
        } else {
            empty_since = None;
        }
        if start.elapsed() > SETTLE {
            panic!(
                "lock keys leaked after {SETTLE:?}: {:?}",
                describe_keys(raw).await
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Shuts `client` down (which waits for every background attempt and release it spawned)
/// and asserts that nothing at all is left in Redis but the lasting keys of `kind` on `names`,
/// nor in the client's record of its holds: no slot of a hold, operation or wait that ended.
async fn shutdown_and_assert_empty(
    kind: Kind,
    client: &Client,
    raw: &mut MultiplexedConnection,
    names: &[&str],
) {
    tokio::time::timeout(Duration::from_secs(10), client.shutdown())
        .await
        .expect("shutdown did not finish the background tasks");
    kind.assert_lasting_keys(raw, names, true).await;
    let stats = client.stats();
    assert_eq!(
        (stats.record_slots, stats.counted_holds),
        (0, 0),
        "{kind}: {stats:?}"
    );
}

/// Polls until the server (private to the test) has run no script for 100 ms: background
/// attempts and their undos are done.
async fn wait_scripts_idle(raw: &mut MultiplexedConnection) {
    let start = Instant::now();
    let mut before = script_calls(raw).await;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let after = script_calls(raw).await;
        if after == before {
            return;
        }
        assert!(
            start.elapsed() < SETTLE,
            "scripts still running after {SETTLE:?}"
        );
        before = after;
    }
}

/// The options of one acquire attempt of the loops below: the task's own owner for the
/// reentrant kinds (a cancelled grant still being undone in the background is then re-entered,
/// and the count comes back right); a fresh owner per attempt for the kinds that refuse a
/// re-entry, whose retry by the same owner right after a cancelled acquire may be refused while
/// that grant is being undone (the crate bug that
/// `a_retry_right_after_a_dropped_acquire_is_never_refused_as_a_re_entry` shows).
fn attempt_options(kind: Kind) -> LockOptions {
    match kind.reentry() {
        Reentry::Counts => LockOptions::new(),
        Reentry::Refused => {
            LockOptions::new().owner(Owner::new(rand::thread_rng().gen_range(1 << 40..1 << 41)))
        }
    }
}

/// A fresh owner (never used by the cancelled acquisitions, so a leaked hold cannot be
/// re-entered) gets the lock with a single attempt, and holds it alone.
async fn assert_fresh_lock_succeeds(
    kind: Kind,
    client: &Client,
    raw: &mut MultiplexedConnection,
    name: &str,
) {
    let owner = Owner::new(rand::thread_rng().gen_range(1_000_000..2_000_000));
    let opts = LockOptions::new().owner(owner);
    let guard = tokio::time::timeout(
        Duration::from_secs(1),
        kind.any(client, name)
            .try_lock_with_options(Duration::ZERO, &opts),
    )
    .await
    .expect("try_lock did not answer")
    .unwrap()
    .unwrap_or_else(|| panic!("{name} still held after the cancellations"));
    assert_eq!(state(raw, name).await, kind.hold_state(client, owner, 1));
    assert_eq!(guard.holder(), kind.field(client, owner));
    assert_eq!(guard.token().is_some(), kind.draws_token(), "{kind}");
    guard.unlock().await.unwrap();
    assert!(!common::exists(raw, name).await);
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn tiny_timeouts_on_free_locks_leave_nothing_behind);

async fn tiny_timeouts_on_free_locks_leave_nothing_behind(kind: Kind) {
    const TASKS: usize = 8;
    const ITERATIONS: usize = 250;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let names: Vec<String> = (0..TASKS).map(|_| unique_name("cancel-free")).collect();

    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let lock = kind.any(&client, name);
            tokio::spawn(async move {
                let (mut completed, mut cancelled) = (0usize, 0usize);
                for i in 0..ITERATIONS {
                    // Mostly 0-300 µs (cut short with the script in flight); every fourth
                    // up to 3 ms, so some complete.
                    let max = if i % 4 == 3 { 3_000 } else { 300 };
                    let limit = Duration::from_micros(rand::thread_rng().gen_range(0..max));
                    let opts = attempt_options(kind);
                    match tokio::time::timeout(limit, lock.lock_with_options(&opts)).await {
                        Ok(guard) => {
                            let guard = guard.unwrap();
                            completed += 1;
                            // Half explicit unlocks, half releases on drop.
                            if i % 2 == 0 {
                                guard.unlock().await.unwrap();
                            } else {
                                drop(guard);
                            }
                        }
                        Err(_) => cancelled += 1,
                    }
                }
                (completed, cancelled)
            })
        })
        .collect();
    let (mut completed, mut cancelled) = (0, 0);
    for t in tasks {
        let (c, x) = tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("iterations took over 20 s")
            .unwrap();
        completed += c;
        cancelled += x;
    }
    println!("{completed} acquisitions completed, {cancelled} cut short");
    assert_eq!(completed + cancelled, TASKS * ITERATIONS);

    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    wait_no_keys(&mut raw).await;
    for name in &names {
        assert_fresh_lock_succeeds(kind, &client, &mut raw, name).await;
    }
    assert_eq!(lock_keys(&mut raw).await, Vec::<String>::new());
    wait_no_subscriptions(&mut raw).await;
    shutdown_and_assert_empty(kind, &client, &mut raw, &names).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn tiny_timeouts_on_one_shared_lock_leave_nothing_behind);

async fn tiny_timeouts_on_one_shared_lock_leave_nothing_behind(kind: Kind) {
    const TASKS: usize = 8;
    const ITERATIONS: usize = 150;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let clients = [new_client(&server), new_client(&server)];
    let name = unique_name("cancel-shared");

    // Tasks of two clients race for one lock: some time out while waiting, some while their
    // attempt is in flight, some get it.
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let lock = kind.any(&clients[t % 2], &name);
            tokio::spawn(async move {
                let mut completed = 0usize;
                for _ in 0..ITERATIONS {
                    let limit = Duration::from_micros(rand::thread_rng().gen_range(0..1_000));
                    let opts = attempt_options(kind);
                    if let Ok(guard) =
                        tokio::time::timeout(limit, lock.lock_with_options(&opts)).await
                    {
                        completed += 1;
                        guard.unwrap().unlock().await.unwrap();
                    }
                }
                completed
            })
        })
        .collect();
    let mut completed = 0;
    for t in tasks {
        completed += tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("iterations took over 20 s")
            .unwrap();
    }
    println!(
        "{completed} of {} contended acquisitions completed",
        TASKS * ITERATIONS
    );

    wait_no_keys(&mut raw).await;
    wait_no_subscriptions(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &clients[0], &mut raw, &name).await;
    assert_fresh_lock_succeeds(kind, &clients[1], &mut raw, &name).await;
    for c in &clients {
        shutdown_and_assert_empty(kind, c, &mut raw, &[&name]).await;
    }
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn waiters_timing_out_behind_a_holder_leave_nothing_behind);

async fn waiters_timing_out_behind_a_holder_leave_nothing_behind(kind: Kind) {
    const TASKS: usize = 6;
    const ITERATIONS: usize = 60;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let holder_client = new_client(&server);
    let waiter_client = new_client(&server);
    let name = unique_name("cancel-held");
    // (The fair kinds' waiters each have a channel of their own, and the spin and token
    // locks' waiters poll: `wait_no_subscriptions` below covers them all.)
    let ch = kind.channel(&name);

    // Readers share the lock: the read half's waiters wait behind a writer.
    let holder = kind
        .rival()
        .any(&holder_client, &name)
        .lock()
        .await
        .unwrap();
    let holder_field = kind.rival().field(&holder_client, holder.owner());
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let lock = kind.any(&waiter_client, &name);
            tokio::spawn(async move {
                for i in 0..ITERATIONS {
                    // Mostly tiny timeouts (cut short in the first attempt or while
                    // subscribing), some long enough to be parked on the message.
                    let limit = if i % 5 == 0 {
                        Duration::from_millis(rand::thread_rng().gen_range(5..40))
                    } else {
                        Duration::from_micros(rand::thread_rng().gen_range(0..500))
                    };
                    if t % 2 == 0 {
                        let r = tokio::time::timeout(limit, lock.lock()).await;
                        assert!(r.is_err(), "acquired a lock that is held");
                    } else {
                        let r = lock.try_lock_for(limit).await.unwrap();
                        assert!(r.is_none(), "acquired a lock that is held");
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("waiters took over 20 s")
            .unwrap();
    }
    // Nothing changed while the holder held it.
    assert_eq!(
        state(&mut raw, &name).await,
        kind.rival().state_of(&holder_field, 1)
    );
    // The fair kinds' waiters left the queue already, while the lock is still held.
    kind.wait_no_waiters(&mut raw, &name).await;

    holder.unlock().await.unwrap();
    wait_no_keys(&mut raw).await;
    if let Some(ch) = &ch {
        wait_numsub(&mut raw, ch, 0).await;
    }
    wait_no_subscriptions(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &waiter_client, &mut raw, &name).await;
    assert_fresh_lock_succeeds(kind, &holder_client, &mut raw, &name).await;
    shutdown_and_assert_empty(kind, &holder_client, &mut raw, &[&name]).await;
    shutdown_and_assert_empty(kind, &waiter_client, &mut raw, &[&name]).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn aborted_tasks_release_what_they_held);

async fn aborted_tasks_release_what_they_held(kind: Kind) {
    const ROUNDS: usize = 10;
    const TASKS_PER_ROUND: usize = 8;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let names = [unique_name("abort-a"), unique_name("abort-b")];

    let (mut finished, mut aborted) = (0, 0);
    for _ in 0..ROUNDS {
        let handles: Vec<_> = (0..TASKS_PER_ROUND)
            .map(|t| {
                let lock = kind.any(&client, &names[t % 2]);
                tokio::spawn(async move {
                    let guard = lock.lock().await.unwrap();
                    let hold = Duration::from_micros(rand::thread_rng().gen_range(0..5_000));
                    tokio::time::sleep(hold).await;
                    if t % 3 == 0 {
                        guard.unlock().await.unwrap();
                    } else {
                        drop(guard);
                    }
                })
            })
            .collect();
        for h in &handles {
            let pause = Duration::from_micros(rand::thread_rng().gen_range(0..3_000));
            tokio::time::sleep(pause).await;
            h.abort();
        }
        for h in handles {
            match tokio::time::timeout(Duration::from_secs(5), h)
                .await
                .expect("aborted task did not end")
            {
                Ok(()) => finished += 1,
                Err(e) => {
                    assert!(e.is_cancelled(), "task failed: {e}");
                    aborted += 1;
                }
            }
        }
    }
    println!("{finished} tasks finished, {aborted} aborted");
    assert_eq!(finished + aborted, ROUNDS * TASKS_PER_ROUND);

    let names = [names[0].as_str(), names[1].as_str()];
    wait_no_keys(&mut raw).await;
    wait_no_subscriptions(&mut raw).await;
    for name in names {
        assert_fresh_lock_succeeds(kind, &client, &mut raw, name).await;
    }
    shutdown_and_assert_empty(kind, &client, &mut raw, &names).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn acquire_dropped_on_its_first_poll_is_undone);

async fn acquire_dropped_on_its_first_poll_is_undone(kind: Kind) {
    const ITERATIONS: usize = 500;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("select");
    let lock = kind.any(&client, &name);

    let mut won = 0;
    for _ in 0..ITERATIONS {
        // `biased`: the acquire is polled first (its script is sent), then the ready branch
        // wins and the acquire future is dropped with its script in flight.
        let opts = attempt_options(kind);
        tokio::select! {
            biased;
            g = lock.lock_with_options(&opts) => {
                won += 1;
                g.unwrap().unlock().await.unwrap();
            }
            () = std::future::ready(()) => {}
        }
    }
    println!("{won} of {ITERATIONS} acquisitions completed on their first poll");
    wait_no_keys(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &client, &mut raw, &name).await;

    // Same with an explicit owner that holds the lock meanwhile: dropped re-entries must
    // not change the hold count. (A non-reentrant kind refuses the re-entry at once: those
    // that complete on their first poll are the refusals.)
    let owner = Owner::new(42);
    let opts = LockOptions::new().owner(owner);
    let held = lock.lock_with_options(&opts).await.unwrap();
    let mut refused = 0;
    for _ in 0..ITERATIONS {
        tokio::select! {
            biased;
            g = lock.lock_with_options(&opts) => match kind.reentry() {
                Reentry::Counts => g.unwrap().unlock().await.unwrap(),
                Reentry::Refused => {
                    assert!(matches!(g, Err(Error::NotReentrant { .. })), "{kind}: {g:?}");
                    refused += 1;
                }
            },
            () = std::future::ready(()) => {}
        }
    }
    if kind.reentry() == Reentry::Refused {
        println!("{refused} of {ITERATIONS} re-entries refused on their first poll");
    }
    let field = kind.field(&client, owner);
    let start = Instant::now();
    loop {
        let count = kind.count_in_redis(&mut raw, &name, &field).await;
        if count == 1 {
            break;
        }
        assert!(
            start.elapsed() < SETTLE,
            "hold count {count} after dropped re-entries, expected 1"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The dropped attempts finish in tasks of the client, one at a time per holder field: a
    // late one may still take the count to 2 and back. Once no script has run for 100 ms they
    // are all done, and the count stays 1 (no undo arrives late).
    wait_scripts_idle(&mut raw).await;
    assert_eq!(state(&mut raw, &name).await, kind.state_of(&field, 1));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(state(&mut raw, &name).await, kind.state_of(&field, 1));
    if kind.counts_holds() {
        assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
    }
    held.unlock().await.unwrap();
    assert_eq!(lock_keys(&mut raw).await, Vec::<String>::new());
    assert_fresh_lock_succeeds(kind, &client, &mut raw, &name).await;
    shutdown_and_assert_empty(kind, &client, &mut raw, &[&name]).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn acquire_dropped_after_its_reply_arrived_is_undone);

/// Deterministic reproduction of the window behind the aborted-task leak: the acquire future
/// is driven by hand until its script has run in Redis (granting the lock), then it is dropped
/// without being polled again, with the reply delivered but unread (what `JoinHandle::abort`,
/// a losing `select!` branch or a timeout firing at that moment do). The grant must be undone.
async fn acquire_dropped_after_its_reply_arrived_is_undone(kind: Kind) {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("reply-dropped");
    let lock = kind.any(&client, &name);

    let mut cx = Context::from_waker(Waker::noop());
    let mut exercised = false;
    // Up to 20 tries: on a loaded machine the reply may come (and be read by the next poll)
    // before the check below sees the grant.
    for _ in 0..20 {
        let mut acquire = Box::pin(lock.lock());
        let start = Instant::now();
        // Poll (which makes progress: connect, send), then look whether the script ran.
        let completed = loop {
            if let Poll::Ready(r) = acquire.as_mut().poll(&mut cx) {
                break Some(r);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            if common::exists(&mut raw, &name).await {
                break None;
            }
            assert!(start.elapsed() < SETTLE, "the acquire script never ran");
        };
        match completed {
            // Polled once more after the reply came: the window was missed; release, retry.
            Some(r) => {
                r.unwrap().unlock().await.unwrap();
                continue;
            }
            None => {
                // Granted in Redis; let the reply reach the future, then drop it unread.
                tokio::time::sleep(Duration::from_millis(100)).await;
                drop(acquire);
                exercised = true;
                break;
            }
        }
    }
    assert!(
        exercised,
        "never caught the acquire between its grant and its reply"
    );

    wait_no_keys(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &client, &mut raw, &name).await;
    shutdown_and_assert_empty(kind, &client, &mut raw, &[&name]).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn try_lock_for_a_millisecond_never_errors_on_a_healthy_server);

async fn try_lock_for_a_millisecond_never_errors_on_a_healthy_server(kind: Kind) {
    const ITERATIONS: usize = 300;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);

    // Uncontended: the first attempt always answers, so a free lock is always acquired.
    let name = unique_name("try-1ms");
    let lock = kind.any(&client, &name);
    for i in 0..ITERATIONS {
        match lock.try_lock_for(Duration::from_millis(1)).await {
            Ok(Some(g)) => g.unlock().await.unwrap(),
            Ok(None) => panic!("iteration {i}: a free lock was reported busy"),
            Err(e) => panic!("iteration {i}: {e}"),
        }
    }
    assert_eq!(lock_keys(&mut raw).await, Vec::<String>::new());

    // Contended: four tasks race with 1 ms waits; every call returns Ok.
    let shared = unique_name("try-1ms-shared");
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let lock = kind.any(&client, &shared);
            tokio::spawn(async move {
                let mut got = 0usize;
                for i in 0..ITERATIONS / 4 {
                    match lock.try_lock_for(Duration::from_millis(1)).await {
                        Ok(Some(g)) => {
                            got += 1;
                            g.unlock().await.unwrap();
                        }
                        Ok(None) => {}
                        Err(e) => panic!("iteration {i}: {e}"),
                    }
                }
                got
            })
        })
        .collect();
    let mut got = 0;
    for t in tasks {
        got += tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("try_lock_for loops took over 20 s")
            .unwrap();
    }
    println!("{got} of {ITERATIONS} contended 1 ms tries acquired");
    assert!(got > 0);
    wait_no_keys(&mut raw).await;
    wait_no_subscriptions(&mut raw).await;
    assert_fresh_lock_succeeds(kind, &client, &mut raw, &shared).await;
    shutdown_and_assert_empty(kind, &client, &mut raw, &[&name, &shared]).await;
}

per_primitive!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn cancelled_waiting_acquires_leave_nothing_behind);

/// A closed primitive (a semaphore without permits, a latch not counted down): waiting
/// acquires of two clients cut short in every way (tiny timeouts, bounded waits, a losing
/// `select!` branch on the first poll, aborted tasks) leave its key exactly as it was and no
/// subscription; opened, the next acquire gets in at once, and giving back what it took
/// leaves nothing but the key.
async fn cancelled_waiting_acquires_leave_nothing_behind(p: Primitive) {
    const TASKS: usize = 6;
    const ITERATIONS: usize = 60;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let clients = [new_client(&server), new_client(&server)];
    let name = unique_name("cancel-primitive");
    p.close(&clients[0], &name).await;

    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (client, name) = (clients[t % 2].clone(), name.clone());
            tokio::spawn(async move {
                for i in 0..ITERATIONS {
                    // Mostly tiny waits (cut short in the first attempt or while subscribing),
                    // some long enough to be parked on the message.
                    let limit = if i % 5 == 0 {
                        Duration::from_millis(rand::thread_rng().gen_range(5..40))
                    } else {
                        Duration::from_micros(rand::thread_rng().gen_range(0..500))
                    };
                    match (t + i) % 4 {
                        0 => {
                            let r = tokio::time::timeout(limit, p.acquire(&client, &name)).await;
                            assert!(r.is_err(), "{p}: acquired while closed: {r:?}");
                        }
                        1 => {
                            let r = p.try_acquire_for(&client, &name, limit).await.unwrap();
                            assert!(r.is_none(), "{p}: acquired while closed: {r:?}");
                        }
                        2 => tokio::select! {
                            biased;
                            r = p.acquire(&client, &name) => panic!("{p}: acquired while closed: {r:?}"),
                            () = std::future::ready(()) => {}
                        },
                        _ => {
                            let (c, n) = (client.clone(), name.clone());
                            let handle =
                                tokio::spawn(async move { p.acquire(&c, &n).await.map(drop) });
                            tokio::time::sleep(limit).await;
                            handle.abort();
                            let ended = tokio::time::timeout(Duration::from_secs(5), handle)
                                .await
                                .expect("an aborted acquire's task did not end");
                            assert!(ended.unwrap_err().is_cancelled(), "{p}");
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("waiters took over 20 s")
            .unwrap();
    }

    // Nothing changed, nothing left behind.
    p.assert_only(&mut raw, &name, &p.closed_state()).await;
    wait_no_subscriptions(&mut raw).await;
    // Still so once the clients' background work is done.
    tokio::time::sleep(Duration::from_millis(200)).await;
    p.assert_only(&mut raw, &name, &p.closed_state()).await;

    // Opened: a fresh acquire of either client gets in with a single attempt.
    for client in &clients {
        p.open(client, &name).await;
        let taken = tokio::time::timeout(
            Duration::from_secs(1),
            p.try_acquire_for(client, &name, Duration::ZERO),
        )
        .await
        .expect("the acquire did not answer")
        .unwrap()
        .unwrap_or_else(|| panic!("{p}: not let in after the cancellations"));
        p.give_back(client, &name, taken).await;
        p.assert_only(&mut raw, &name, &p.opened_state()).await;
        if p != Primitive::Latch {
            // Closed again for the next client.
            assert_eq!(
                clients[0].semaphore(&name).drain_permits().await.unwrap(),
                1
            );
        }
    }
    for client in &clients {
        tokio::time::timeout(Duration::from_secs(10), client.shutdown())
            .await
            .expect("shutdown did not finish the background tasks");
    }
    let after = if p == Primitive::Latch {
        State::Absent
    } else {
        p.closed_state()
    };
    p.assert_only(&mut raw, &name, &after).await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn a_retry_right_after_a_dropped_acquire_is_never_refused_as_a_re_entry; except {}; bug {
    nonreentrant: "bug: a retry by the same owner right after its acquire was dropped is refused with NotReentrant while the dropped grant is being undone",
    nonreentrant_fair: "bug: a retry by the same owner right after its acquire was dropped is refused with NotReentrant while the dropped grant is being undone",
    token: "bug: a retry by the same owner right after its acquire was dropped is refused with NotReentrant while the dropped grant is being undone",
});

/// An acquire dropped with its script in flight (a losing `select!` branch on its first poll)
/// is finished in a task of the client, which gives back the grant nobody received. The
/// owner's retry right after must not see that grant as its own hold: it is granted (a
/// reentrant kind may re-enter the grant being undone, which then leaves the count right), and
/// once released nothing is left. The non-reentrant kinds refuse it with `NotReentrant`
/// although the owner holds no guard: the client counts the dropped grant from its reply until
/// its undo runs, and a refused kind refuses any acquire of a holder it counts.
async fn a_retry_right_after_a_dropped_acquire_is_never_refused_as_a_re_entry(kind: Kind) {
    const ITERATIONS: usize = 300;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = new_client(&server);
    let name = unique_name("retry");
    let lock = kind.any(&client, &name);
    let opts = LockOptions::new().owner(Owner::new(7));
    let mut refused = Vec::new();
    for i in 0..ITERATIONS {
        tokio::select! {
            biased;
            g = lock.lock_with_options(&opts) => match g {
                Ok(g) => g.unlock().await.unwrap(),
                // (An acquire that completes on its first poll: refused at once too.)
                Err(e) => refused.push(format!("iteration {i}, first poll: {e}")),
            },
            () = std::future::ready(()) => {}
        }
        match tokio::time::timeout(
            Duration::from_secs(5),
            lock.try_lock_with_options(Duration::from_secs(2), &opts),
        )
        .await
        .expect("the retry did not answer")
        {
            Ok(Some(g)) => g.unlock().await.unwrap(),
            Ok(None) => panic!("{kind}: iteration {i}: the retry was not granted within 2 s"),
            Err(e) => refused.push(format!("iteration {i}: {e}")),
        }
    }
    assert!(
        refused.is_empty(),
        "{kind}: {} of {ITERATIONS} retries refused: {:?}",
        refused.len(),
        &refused[..refused.len().min(3)]
    );
    wait_no_keys(&mut raw).await;
    shutdown_and_assert_empty(kind, &client, &mut raw, &[&name]).await;
}
