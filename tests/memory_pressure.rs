//! Memory pressure: a server at its `maxmemory` with `noeviction`, and with each evicting
//! policy (RELIABILITY.md, "Operating Redis for locks: memory").
//!
//! - **noeviction**: Redis refuses a write that may grow memory; the crate reports it as
//!   [`Error::OutOfMemory`] naming the operation and the name, and nothing was changed. Which
//!   operations Redis refuses follows from its rule for scripts (refused at their first write
//!   of a `denyoom` command, never after a first write of another kind): the tables below are
//!   the promise RELIABILITY.md quotes, per primitive and operation. Renewals are `PEXPIRE`
//!   (not `denyoom`): holders keep their locks. A renewal Redis refuses (a renewing permit's
//!   `ZADD`) makes its guard report `lost()` by `valid_until`.
//! - **evicting policies**: a held lock evicted is reported `lost()` by its holder's next
//!   renewal, well before its lease would have lapsed; `valid_until()` then says it is over;
//!   a waiter, which gets no unlock message for an eviction, is granted at its next re-check;
//!   the old holder's unlock touches nothing. Which keys each policy may evict, and what an
//!   evicted semaphore or latch means.
//!
//! The servers are filled and squeezed by `testkit::memory`: [`Fill::over_limit`] holds a
//! server over its limit whatever a connection's buffers do, [`evict_all`] evicts every key
//! its policy may evict at once. Every test starts its own server.

mod common;

use std::time::Duration;

use common::memory::{Primitive, admin, keys_of, wait_unsubscribed};
use common::{AnyLock, RedisServer, ms, unique_name};
use futures_util::future::join_all;
use redis::AsyncCommands;
use redisson_sync::{Client, Error, LockGuard};
use testkit::memory::{Fill, Policy, evict_all, memory};
use tokio::time::{Instant, sleep, timeout};

/// The holders' watchdog lease in the noeviction tests: renewed every 500 ms.
const SHORT_LEASE: Duration = Duration::from_millis(1500);

fn client(server: &RedisServer, watchdog: Duration) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_timeout(watchdog)
        .build()
        .unwrap()
}

/// What one operation did under memory pressure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Refused: `Error::OutOfMemory` for this operation and name, nothing changed.
    Refused,
    /// Ran as without pressure (granted, released, renewed, waited its time out).
    Ran,
}

use Outcome::{Ran, Refused};

/// What each operation of a lock kind does under `noeviction` at the limit (Redis 7.0.15,
/// Valkey 9.1.2 and Redis 6.2.14 alike): RELIABILITY.md's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LockRow {
    /// `try_lock()` of a free lock.
    acquire: Outcome,
    /// `try_lock_for(400 ms)` of a lock someone else holds.
    wait: Outcome,
    /// The watchdog's renewals of a hold.
    renewal: Outcome,
    /// `unlock()` of a hold.
    release: Outcome,
    /// `force_unlock()`.
    force_unlock: Outcome,
}

fn expected(kind: Primitive) -> LockRow {
    use Primitive::*;
    let row = |acquire, wait, release| LockRow {
        acquire,
        wait,
        renewal: Ran,
        release,
        force_unlock: Ran,
    };
    match kind {
        // The grant's first write is `HINCRBY` / `HSET` / `INCR` / `SET`: refused. A contended
        // attempt only reads (`PTTL`): it waits as usual. The release's first write is
        // `HINCRBY -1`: refused.
        Lock | Spin | NonReentrant | Fenced | Read | Write => row(Refused, Ran, Refused),
        // The fair lock's grant starts with `LPOP` of its queue (not `denyoom`): granted; its
        // waiter joins the queue with `ZADD`: refused.
        Fair | NonReentrantFair => row(Ran, Refused, Refused),
        // The token lock's every attempt starts with `SET NX` (refused before it is known
        // whether it would write); its release is `DEL`.
        Token => row(Refused, Refused, Ran),
        Semaphore | PermitSemaphore | Latch => unreachable!("not a lock"),
    }
}

/// Classifies a result: `Ran` for `Ok`, `Refused` for `OutOfMemory` naming `operation` and
/// `name`; panics on anything else.
fn outcome<T>(
    what: &str,
    result: &redisson_sync::Result<T>,
    operation: &str,
    name: &str,
) -> Outcome {
    match result {
        Ok(_) => Ran,
        Err(Error::OutOfMemory {
            operation: op,
            key,
            message,
        }) => {
            assert_eq!((*op, key.as_str()), (operation, name), "{what}: {message}");
            assert!(message.contains("maxmemory"), "{what}: {message}");
            Refused
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

/// The hold of `holder` as Redis has it: its hash field's count, or the token lock's value.
async fn held_by(
    raw: &mut redis::aio::MultiplexedConnection,
    kind: Primitive,
    name: &str,
    holder: &str,
) -> bool {
    if kind == Primitive::Token {
        let value: Option<String> = raw.get(name).await.unwrap();
        value.as_deref() == Some(holder)
    } else {
        let count: Option<u64> = raw.hget(name, holder).await.unwrap();
        count.is_some_and(|c| c > 0)
    }
}

struct KindRun {
    kind: Primitive,
    row: LockRow,
    /// A grant made under pressure, given back after.
    granted: Option<LockGuard>,
    /// The holder whose release was refused and its name, to see its lease run out.
    refused_release: Option<(String, String)>,
}

/// Every lock kind under `noeviction` over its limit: each operation is refused with
/// `OutOfMemory` naming it, or runs, as `expected` says; a refused acquire leaves no key, a
/// refused wait no queue entry and no subscription (the untimed `lock()` of such a kind ends
/// with the error too), a refused release leaves the hold in Redis until its lease runs out,
/// and holders keep their locks (renewals are `PEXPIRE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_noeviction_each_lock_operation_is_refused_or_runs_as_documented() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let holders = client(&server, SHORT_LEASE);
    let others = client(&server, Duration::from_secs(30));
    let prefix = unique_name("oom");
    let name = |kind: Primitive, what: &str| format!("{prefix}:{kind}:{what}");

    // Before the fill: a hold to renew and release, and a rival's hold to wait on.
    let mut held = Vec::new();
    for kind in Primitive::LOCKS {
        let hold = kind
            .lock(&holders, &name(kind, "held"))
            .lock()
            .await
            .unwrap();
        let rival = kind
            .rival()
            .lock(&holders, &name(kind, "contended"))
            .lock()
            .await
            .unwrap();
        held.push((kind, hold, rival));
    }
    let mut admin = admin(&server);
    let fill =
        Fill::over_limit(&mut admin, Policy::NoEviction, &format!("{prefix}:filler")).unwrap();
    let refused_set: redis::RedisResult<()> = raw.set(format!("{prefix}:probe"), 1).await;
    assert_eq!(
        refused_set.unwrap_err().code(),
        Some("OOM"),
        "the fill holds the server over its limit"
    );

    let runs = join_all(held.into_iter().map(|(kind, hold, rival)| {
        let server = &server;
        let others = &others;
        let name = &name;
        async move {
            let mut raw = server.conn().await;
            // A free lock.
            let free = name(kind, "free");
            let lock = kind.lock(others, &free);
            let result = lock.try_lock().await;
            let acquire = outcome("acquire", &result, "acquire", &free);
            let granted = result.ok().flatten();
            if acquire == Refused {
                assert_eq!(
                    keys_of(&mut raw, &free).await,
                    Vec::<String>::new(),
                    "{kind}: a refused acquire left keys"
                );
            }
            // A lock someone else holds.
            let contended = name(kind, "contended");
            let lock = kind.lock(others, &contended);
            let result = lock.try_lock_for(ms(400)).await;
            let wait = outcome("wait", &result, "acquire", &contended);
            assert!(
                matches!(result, Ok(None) | Err(_)),
                "{kind}: granted a held lock"
            );
            if wait == Refused {
                // The untimed wait ends with the error too, instead of retrying it.
                let untimed = timeout(Duration::from_secs(5), lock.lock())
                    .await
                    .expect("lock() ended");
                assert_eq!(outcome("lock()", &untimed, "acquire", &contended), Refused);
            }
            wait_unsubscribed(&mut raw, &contended).await;
            let keys = keys_of(&mut raw, &contended).await;
            if matches!(kind, Primitive::Fair | Primitive::NonReentrantFair) {
                let queue: Vec<String> = raw
                    .lrange(format!("redisson_lock_queue:{{{contended}}}"), 0, -1)
                    .await
                    .unwrap();
                assert_eq!(
                    queue,
                    Vec::<String>::new(),
                    "{kind}: a waiter left its queue entry ({keys:?})"
                );
            }
            // Renewals over three periods.
            let before = hold.valid_until();
            sleep(SHORT_LEASE).await;
            let renewal = if !hold.is_lost() && hold.valid_until() > before {
                Ran
            } else {
                Refused
            };
            // The release.
            let holder = hold.holder().to_owned();
            let held_name = name(kind, "held");
            let result = hold.unlock().await;
            let release = outcome("release", &result, "unlock", &held_name);
            let refused_release = if release == Refused {
                assert!(
                    held_by(&mut raw, kind, &held_name, &holder).await,
                    "{kind}: a refused release changed the hold"
                );
                Some((held_name, holder))
            } else {
                None
            };
            let result = lock.force_unlock().await;
            let force_unlock = outcome("force_unlock", &result, "force_unlock", &contended);
            drop(rival);
            KindRun {
                kind,
                row: LockRow {
                    acquire,
                    wait,
                    renewal,
                    release,
                    force_unlock,
                },
                granted,
                refused_release,
            }
        }
    }))
    .await;
    fill.heal(&mut admin).unwrap();

    let mut wrong = Vec::new();
    for run in &runs {
        eprintln!("{:<18} {:?}", run.kind, run.row);
        if run.row != expected(run.kind) {
            wrong.push(format!(
                "{}: {:?}, expected {:?}",
                run.kind,
                run.row,
                expected(run.kind)
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    for run in runs {
        if let Some(guard) = run.granted {
            guard.unlock().await.unwrap();
        }
        // A hold whose release was refused is renewed no more: it ends with its lease.
        if let Some((held_name, holder)) = run.refused_release {
            let start = Instant::now();
            while held_by(&mut raw, run.kind, &held_name, &holder).await {
                assert!(
                    start.elapsed() < SHORT_LEASE * 3,
                    "{}: the hold outlived its lease",
                    run.kind
                );
                sleep(ms(50)).await;
            }
            // Its owner (this thread) takes the lock again: the spent hold is not counted as
            // one it still holds (a non-reentrant kind would refuse it as a re-entry).
            let again = run.kind.lock(&holders, &held_name).try_lock().await;
            match again {
                Ok(Some(guard)) => guard.unlock().await.unwrap(),
                other => panic!(
                    "{}: the owner of a hold whose release was refused could not take the lock \
                     again once it ended: {:?}",
                    run.kind,
                    other.map(|g| g.is_some())
                ),
            }
        }
    }
}

/// The semaphores and the latch under `noeviction` over its limit: what would add data or
/// take permits is refused with `OutOfMemory` and changes nothing (a counting semaphore's
/// release too: `INCRBY`), reads and waits without a write run, a permit-expirable
/// semaphore's release runs (its first write is `ZREM`), and a renewing permit, whose renewal
/// (`ZADD`) Redis refuses, is reported `lost()` by its `valid_until`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_noeviction_semaphores_and_the_latch_refuse_what_would_grow_memory() {
    let server = RedisServer::start();
    let c = client(&server, Duration::from_secs(30));
    let prefix = unique_name("oom-sem");
    let sem = c.semaphore(format!("{prefix}:sem"));
    assert!(sem.try_set_permits(2).await.unwrap());
    let taken = sem.acquire(1).await.unwrap();
    let empty = c.semaphore(format!("{prefix}:empty"));
    assert!(empty.try_set_permits(0).await.unwrap());
    let psem = c.permit_expirable_semaphore(format!("{prefix}:psem"));
    assert!(psem.try_set_permits(3).await.unwrap());
    let ids = psem.acquire(1, None).await.unwrap();
    let renewing = psem.acquire_renewing(1, SHORT_LEASE).await.unwrap();
    let latch = c.count_down_latch(format!("{prefix}:latch"));
    assert!(latch.try_set_count(2).await.unwrap());

    let mut admin = admin(&server);
    let fill =
        Fill::over_limit(&mut admin, Policy::NoEviction, &format!("{prefix}:filler")).unwrap();
    let valid_until = renewing.valid_until();

    let fresh = c.semaphore(format!("{prefix}:fresh"));
    assert_eq!(
        outcome(
            "semaphore try_set_permits",
            &fresh.try_set_permits(1).await,
            "try_set_permits",
            fresh.name()
        ),
        Refused
    );
    assert_eq!(
        outcome(
            "semaphore acquire",
            &sem.try_acquire(1).await,
            "acquire",
            sem.name()
        ),
        Refused
    );
    assert_eq!(
        outcome(
            "semaphore release",
            &taken.release().await,
            "release",
            sem.name()
        ),
        Refused
    );
    assert_eq!(
        sem.available_permits().await.unwrap(),
        1,
        "a refused release released nothing"
    );
    assert!(
        empty.try_acquire_for(1, ms(300)).await.unwrap().is_none(),
        "a wait without permits only reads"
    );

    let fresh = c.permit_expirable_semaphore(format!("{prefix}:psem-fresh"));
    assert_eq!(
        outcome(
            "psem try_set_permits",
            &fresh.try_set_permits(1).await,
            "try_set_permits",
            fresh.name()
        ),
        Refused
    );
    assert_eq!(
        outcome(
            "psem acquire",
            &psem.try_acquire(1, None).await,
            "acquire",
            psem.name()
        ),
        Refused
    );
    assert_eq!(psem.available_permits().await.unwrap(), 1);
    psem.release(&ids)
        .await
        .expect("a permit's release starts with ZREM: Redis runs it");
    assert_eq!(psem.available_permits().await.unwrap(), 2);

    let fresh = c.count_down_latch(format!("{prefix}:latch-fresh"));
    assert_eq!(
        outcome(
            "latch try_set_count",
            &fresh.try_set_count(1).await,
            "try_set_count",
            fresh.name()
        ),
        Refused
    );
    assert_eq!(
        outcome(
            "latch count_down",
            &latch.count_down().await,
            "count_down",
            latch.name()
        ),
        Refused
    );
    assert_eq!(latch.count().await.unwrap(), 2);
    assert!(!latch.await_for(ms(200)).await.unwrap());

    // The renewing permit: its renewals are refused, so it is lost by its `valid_until`.
    timeout(SHORT_LEASE * 3, renewing.lost())
        .await
        .expect("lost() fired");
    let lost_at = std::time::Instant::now();
    assert!(
        renewing.valid_until() <= valid_until,
        "no refused renewal moved valid_until"
    );
    assert!(
        lost_at <= valid_until + Duration::from_secs(1),
        "lost {:?} after valid_until",
        lost_at - valid_until
    );

    fill.heal(&mut admin).unwrap();
    // The permit the refused release kept is given back by hand, as an application would.
    sem.release(1).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 2);
}

/// Which keys each evicting policy may evict: with a `volatile-*` policy the locks' keys (all
/// with a TTL) and nothing without one (semaphores, latches, permit sets, the application's
/// data); with an `allkeys-*` policy everything. An evicted counting semaphore reads as 0
/// permits, and an evicted latch as count 0, which opens it: no lease lock can prevent that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_policy_evicts_what_it_may() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let mut admin = admin(&server);
    let c = client(&server, Duration::from_secs(30));
    for policy in Policy::EVICTING {
        let prefix = unique_name(policy.name());
        let mut guards = Vec::new();
        for kind in Primitive::LOCKS {
            let guard = kind
                .lock(&c, &format!("{prefix}:{kind}"))
                .lock()
                .await
                .unwrap();
            guards.push((kind, guard));
        }
        let sem = c.semaphore(format!("{prefix}:sem"));
        assert!(sem.try_set_permits(2).await.unwrap());
        let psem = c.permit_expirable_semaphore(format!("{prefix}:psem"));
        assert!(psem.try_set_permits(2).await.unwrap());
        let latch = c.count_down_latch(format!("{prefix}:latch"));
        assert!(latch.try_set_count(1).await.unwrap());
        let () = raw.set(format!("{prefix}:data"), "no ttl").await.unwrap();
        testkit::memory::config_set(&mut admin, "maxmemory-policy", policy.name()).unwrap();

        let keys: Vec<String> = raw.keys("*").await.unwrap();
        let mut volatile = Vec::new();
        for key in &keys {
            let ttl: i64 = raw.pttl(key).await.unwrap();
            if ttl > 0 {
                volatile.push(key.clone());
            }
        }
        let evicted = evict_all(&mut admin).unwrap();
        let left: Vec<String> = raw.keys("*").await.unwrap();
        if policy.evicts_persistent_keys() {
            assert_eq!(left, Vec::<String>::new(), "{}", policy.name());
            assert_eq!(evicted, keys.len() as u64, "{}", policy.name());
            // What is gone cannot be told from never set.
            assert_eq!(sem.available_permits().await.unwrap(), 0);
            assert!(sem.try_acquire(1).await.unwrap().is_none());
            assert_eq!(latch.count().await.unwrap(), 0);
            assert!(
                latch.await_for(ms(100)).await.unwrap(),
                "an evicted latch is open"
            );
        } else {
            // Every lock's hash (and its markers, counters with a TTL) went; nothing else.
            for kind in Primitive::LOCKS {
                assert!(
                    !left.contains(&format!("{prefix}:{kind}")),
                    "{}: {kind} kept",
                    policy.name()
                );
            }
            assert_eq!(evicted, volatile.len() as u64, "{}", policy.name());
            for key in &left {
                assert!(!volatile.contains(key), "{}: {key} kept", policy.name());
            }
            assert_eq!(sem.available_permits().await.unwrap(), 2);
            assert_eq!(psem.available_permits().await.unwrap(), 2);
            assert_eq!(latch.count().await.unwrap(), 1);
        }
        testkit::memory::config_set(&mut admin, "maxmemory-policy", "noeviction").unwrap();
        for (kind, guard) in guards {
            match guard.unlock().await {
                // The fair unlock of a lock that is gone reports success, as Redisson's does.
                Ok(()) => assert!(
                    matches!(kind, Primitive::Fair | Primitive::NonReentrantFair),
                    "{kind}"
                ),
                Err(e) => assert!(e.is_not_held(), "{kind}: {e}"),
            }
        }
        let () = redis::cmd("FLUSHALL").query_async(&mut raw).await.unwrap();
    }
}

/// A `volatile-*` policy with an application's data without TTL: the locks are the only keys
/// it may evict, so a held lock is the first thing it evicts when a write takes the server over
/// its limit, and its holder learns it at its next renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volatile_policies_evict_held_locks_before_data_without_ttl() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let mut admin = admin(&server);
    let c = client(&server, SHORT_LEASE);
    for policy in Policy::EVICTING
        .into_iter()
        .filter(|p| !p.evicts_persistent_keys())
    {
        let prefix = unique_name(policy.name());
        let guard = c.lock(format!("{prefix}:lock")).lock().await.unwrap();
        let before = memory(&mut admin).unwrap().evicted_keys;
        let fill = Fill::at_limit(&mut admin, policy, &format!("{prefix}:data"), 0).unwrap();
        let _ = fill.push(&mut admin, 0).unwrap();
        let after = memory(&mut admin).unwrap().evicted_keys;
        assert!(after > before, "{}: nothing evicted", policy.name());
        assert!(
            !raw.exists::<_, bool>(guard.name()).await.unwrap(),
            "{}: the lock was kept",
            policy.name()
        );
        let data: Vec<String> = raw.keys(format!("{prefix}:data:*")).await.unwrap();
        assert!(
            data.len() >= 64,
            "{}: data without TTL evicted",
            policy.name()
        );
        timeout(SHORT_LEASE * 2, guard.lost())
            .await
            .expect("lost() fired");
        fill.heal(&mut admin).unwrap();
        assert!(guard.unlock().await.unwrap_err().is_not_held());
    }
}

/// The lease of the holders in the eviction tests: renewed every 2 s, so that a loss found by
/// a renewal (at most 2 s after the eviction) comes well before the lease could have lapsed
/// (at least 5.6 s after it).
const EVICTION_LEASE: Duration = Duration::from_secs(6);

/// One policy, every lock kind and a renewing permit: each held by one client and waited for by
/// another; then every key the policy may evict is evicted. A hold whose keys went is reported
/// `lost()` by its next renewal (before its lease could have lapsed), its `valid_until()` is
/// no later than that, the waiter is granted and holds it in Redis, and the old holder's
/// unlock touches nothing. A renewing permit the policy may not evict (`volatile-*`) is kept.
async fn evicted_holds_are_lost_and_waiters_granted(policy: Policy) {
    let server = RedisServer::start();
    let mut admin = admin(&server);
    testkit::memory::config_set(&mut admin, "maxmemory-policy", policy.name()).unwrap();
    let holders = client(&server, EVICTION_LEASE);
    let waiters = client(&server, Duration::from_secs(30));
    let prefix = unique_name(policy.name());
    let mut cases = Vec::new();
    for kind in Primitive::LOCKS {
        let name = format!("{prefix}:{kind}");
        let guard = kind.lock(&holders, &name).lock().await.unwrap();
        let waiter = kind.rival().lock(&waiters, &name);
        let waiting = tokio::spawn(async move {
            let guard = waiter.try_lock_for(Duration::from_secs(30)).await;
            (waiter, guard, Instant::now())
        });
        cases.push((kind, name, guard, waiting));
    }
    let psem = holders.permit_expirable_semaphore(format!("{prefix}:psem"));
    assert!(psem.try_set_permits(1).await.unwrap());
    let permit = psem.acquire_renewing(1, EVICTION_LEASE).await.unwrap();
    // Let the waiters start waiting (if one has not, it finds the lock free: the same end).
    sleep(ms(300)).await;

    let valid_before: Vec<_> = cases.iter().map(|(_, _, g, _)| g.valid_until()).collect();
    let permit_valid_before = permit.valid_until();
    let evicted = evict_all(&mut admin).unwrap();
    let evicted_at = Instant::now();
    assert!(evicted > 0, "{}: nothing evicted", policy.name());

    let figures = join_all(cases.into_iter().zip(valid_before).map(|((kind, name, guard, waiting), valid_before)| {
        let server = &server;
        async move {
            let mut raw = server.conn().await;
            timeout(EVICTION_LEASE, guard.lost()).await.expect("lost() fired");
            let lost_at = Instant::now();
            assert!(
                lost_at.into_std() + redisson_margin(EVICTION_LEASE) < valid_before,
                "{kind}: lost {:?} after the eviction, found by the lease running out, not by a renewal",
                lost_at - evicted_at
            );
            assert!(guard.valid_until() <= lost_at.into_std(), "{kind}: valid_until past the renewal that found the key gone");
            let (waiter, granted, granted_at) = waiting.await.unwrap();
            let granted = granted.unwrap().unwrap_or_else(|| panic!("{kind}: the waiter was not granted"));
            let holder = granted.holder().to_owned();
            assert!(held_by(&mut raw, kind.rival(), &name, &holder).await, "{kind}: the waiter's hold is not in Redis");
            assert!(guard.unlock().await.unwrap_err().is_not_held(), "{kind}: the old holder's unlock");
            assert!(held_by(&mut raw, kind.rival(), &name, &holder).await, "{kind}: the old holder's unlock touched the new hold");
            granted.unlock().await.unwrap();
            drop::<AnyLock>(waiter);
            (kind, lost_at - evicted_at, granted_at.saturating_duration_since(evicted_at))
        }
    }))
    .await;
    for (kind, lost, granted) in &figures {
        eprintln!(
            "{} {kind:<18} lost {lost:>10.1?} granted {granted:>10.1?} after the eviction",
            policy.name()
        );
    }

    if policy.evicts_persistent_keys() {
        timeout(EVICTION_LEASE, permit.lost())
            .await
            .expect("the permit's lost() fired");
        assert!(
            std::time::Instant::now() + redisson_margin(EVICTION_LEASE) < permit_valid_before,
            "psem: found by a renewal"
        );
        assert!(permit.valid_until() <= std::time::Instant::now());
    } else {
        // Kept: its next renewal moves valid_until forward.
        let start = Instant::now();
        while permit.valid_until() <= permit_valid_before {
            assert!(!permit.is_lost(), "psem: a permit without TTL was lost");
            assert!(start.elapsed() < EVICTION_LEASE, "psem: not renewed");
            sleep(ms(100)).await;
        }
        permit.release().await.unwrap();
    }
}

/// The lost-signal margin before `valid_until` (1 % of the lease plus 2 ms, at most a quarter
/// of it), as `LockGuard` documents it.
fn redisson_margin(lease: Duration) -> Duration {
    (lease / 100 + ms(2)).min(lease / 4)
}

macro_rules! per_policy {
    ($($name:ident => $policy:expr),* $(,)?) => {
        mod evicted_holds_are_lost_and_waiters_granted {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::evicted_holds_are_lost_and_waiters_granted($policy).await;
                }
            )*
        }
    };
}

per_policy!(
    volatile_lru => testkit::memory::Policy::VolatileLru,
    volatile_lfu => testkit::memory::Policy::VolatileLfu,
    volatile_random => testkit::memory::Policy::VolatileRandom,
    volatile_ttl => testkit::memory::Policy::VolatileTtl,
    allkeys_lru => testkit::memory::Policy::AllkeysLru,
    allkeys_lfu => testkit::memory::Policy::AllkeysLfu,
    allkeys_random => testkit::memory::Policy::AllkeysRandom,
);
