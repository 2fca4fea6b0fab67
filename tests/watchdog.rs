//! The lease watchdog: renewal of locks taken without an explicit lease, no renewal of explicit
//! leases, no renewal after unlock, lost-lock detection, batching and reentrant holds.
//!
//! Every test uses a short watchdog timeout (renewal period = timeout / 3) and checks the Redis
//! state with a raw connection: PTTL ranges, hash contents and `INFO commandstats` counters of the
//! script commands (EVALSHA/EVAL), which only the clients under test send.
//!
//! Every test runs once per lock kind (`common::Kind`, `per_kind!`). Kind-specific: the
//! watchdog renews a read hold with its own script (`lua/rwlock/renew_read.lua`), which renews
//! the hold's marker keys too (their PTTLs are checked with the hash's), and a token lock's
//! value by compare-and-`PEXPIRE` (`lua/token/renew.lua`); a read hold does not keep other
//! readers out, so the contender of a read hold takes the write half; the non-reentrant kinds
//! and the token lock refuse a re-entry (`Kind::reentry`), so their holds are single; the
//! fenced lock's token counter stays after every release (`Kind::lasting_keys`).

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    Kind, RedisServer, Reentry, assert_pttls_within, client_with_watchdog, command_stats, dbsize,
    exists, ms, per_kind, pttl, state, unique_name,
};
use futures_util::StreamExt;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner};

use tokio::time::{Instant, sleep, timeout};

/// `calls + rejected_calls` of one command in `INFO commandstats` (0 if never called).
async fn command_calls(raw: &mut MultiplexedConnection, command: &str) -> u64 {
    let stats = command_stats(raw, command).await;
    stats.calls + stats.rejected_calls
}

/// Script calls of every kind (the renewal, acquire, unlock scripts), and PEXPIRE calls (made
/// only from inside scripts here).
async fn script_and_pexpire_calls(raw: &mut MultiplexedConnection) -> (u64, u64) {
    let mut scripts = 0;
    for cmd in ["evalsha", "eval", "evalsha_ro", "eval_ro"] {
        scripts += command_calls(raw, cmd).await;
    }
    (scripts, command_calls(raw, "pexpire").await)
}

per_kind!(at_once current_thread, async fn watchdog_keeps_lock_alive_past_three_timeouts);

async fn watchdog_keeps_lock_alive_past_three_timeouts(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let timeout_ms = 600;
    let client = client_with_watchdog(&server, ms(timeout_ms));
    let other = client_with_watchdog(&server, ms(timeout_ms));
    let name = unique_name("wd-alive");

    let guard = kind.any(&client, &name).lock().await.unwrap();
    assert_eq!(guard.lease(), None);
    let holder = kind.field(&client, guard.owner());
    // The read half's marker key is renewed with the hash.
    let markers = kind.markers(&name, &holder, 1);
    let start = Instant::now();
    let mut previous = pttl(&mut raw, &name).await;
    assert!(previous > 0 && previous <= 600, "pttl {previous}");
    let mut renewals_seen = 0;
    let mut samples = 0;
    while start.elapsed() < ms(3 * timeout_ms + 300) {
        sleep(ms(70)).await;
        let p = pttl(&mut raw, &name).await;
        assert!(p > 0 && p <= 600, "pttl {p} after {:?}", start.elapsed());
        assert_pttls_within(&mut raw, &markers, 600, start.elapsed()).await;
        if p > previous {
            renewals_seen += 1;
        }
        previous = p;
        // (Readers share the lock: the other client tries the write half.)
        assert!(
            kind.rival()
                .any(&other, &name)
                .try_lock()
                .await
                .unwrap()
                .is_none(),
            "another client got the lock after {:?}",
            start.elapsed()
        );
        assert!(!guard.is_lost());
        samples += 1;
    }
    assert!(samples >= 3, "only {samples} samples");
    // The key outlived its 600 ms lease three times over: it was renewed, and PTTL went up.
    assert!(renewals_seen >= 1, "no renewal observed");
    assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
    assert!(!guard.is_lost());

    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    other.shutdown().await;
    client.shutdown().await;
}

per_kind!(at_once current_thread, async fn explicit_lease_expires_on_time_and_is_never_renewed);

async fn explicit_lease_expires_on_time_and_is_never_renewed(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client_with_watchdog(&server, ms(600));
    let other = client_with_watchdog(&server, ms(600));
    let name = unique_name("wd-lease");
    let lock = kind.any(&client, &name);

    let guard = lock
        .lock_with_options(&LockOptions::new().lease(ms(300)))
        .await
        .unwrap();
    assert_eq!(guard.lease(), Some(ms(300)));
    let holder = kind.field(&client, guard.owner());
    assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
    let mut previous = pttl(&mut raw, &name).await;
    assert!(previous > 0 && previous <= 300, "pttl {previous}");

    // Sample until the key is gone: PTTL never goes up (no renewal, though the watchdog ticks
    // every 200 ms), and the key expires with its 300 ms lease.
    let start = Instant::now();
    loop {
        let p = pttl(&mut raw, &name).await;
        if p == -2 {
            break;
        }
        // (0: less than a millisecond left, the key not yet expired.)
        assert!(p >= 0 && p <= previous, "pttl went from {previous} to {p}");
        previous = p;
        assert!(
            start.elapsed() < ms(2000),
            "key still present {:?} after a 300 ms lease",
            start.elapsed()
        );
        sleep(ms(30)).await;
    }

    // Two more renewal periods: explicit leases are never renewed, so the key stays gone, and
    // the guard reports the hold lost from the end of its lease on (it can no longer vouch
    // for it: `valid_until` is the acquire's send time plus the 300 ms lease).
    sleep(ms(450)).await;
    assert!(!exists(&mut raw, &name).await);
    // (The read half's marker key expired with the hash.)
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    assert!(guard.is_lost());
    assert!(timeout(ms(10), guard.lost()).await.is_ok());
    assert!(guard.valid_until() <= std::time::Instant::now());

    let g2 = kind
        .any(&other, &name)
        .try_lock_with_options(Duration::ZERO, &LockOptions::new().owner(Owner::new(5)))
        .await
        .unwrap()
        .expect("lock free after the lease expired");
    let other_holder = kind.field(&other, Owner::new(5));
    let err = guard.unlock().await.unwrap_err();
    match &err {
        Error::NotHeld { name: n, holder: h } => {
            assert_eq!(n, &name);
            assert_eq!(h, &holder);
        }
        e => panic!("expected NotHeld, got {e:?}"),
    }
    assert_eq!(
        state(&mut raw, &name).await,
        kind.state_of(&other_holder, 1)
    );
    g2.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    other.shutdown().await;
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn never_renews_after_unlock_over_1000_cycles);

async fn never_renews_after_unlock_over_1000_cycles(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let period = ms(100);
    let client = client_with_watchdog(&server, period * 3);

    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                let names: Vec<String> = (0..3)
                    .map(|i| unique_name(&format!("wd-cycle{t}-{i}")))
                    .collect();
                for i in 0..250 {
                    let lock = kind.any(&client, &names[i % names.len()]);
                    let guard = lock.lock().await.unwrap();
                    assert!(!guard.is_lost());
                    match i % 4 {
                        // Reentrant hold released first, then the outer one (a refused
                        // re-entry for the kinds that refuse it).
                        0 => {
                            let inner = lock.lock().await;
                            match kind.reentry() {
                                Reentry::Counts => inner.unwrap().unlock().await.unwrap(),
                                Reentry::Refused => assert!(
                                    matches!(inner, Err(Error::NotReentrant { .. })),
                                    "{kind}: {inner:?}"
                                ),
                            }
                            guard.unlock().await.unwrap();
                        }
                        // Release on drop (in the background).
                        1 => drop(guard),
                        _ => guard.unlock().await.unwrap(),
                    }
                }
                names
            })
        })
        .collect();
    let mut names = Vec::new();
    for t in tasks {
        names.extend(timeout(Duration::from_secs(20), t).await.unwrap().unwrap());
    }
    assert_eq!(names.len(), 12);

    // Releases on drop finish in the background; then no lock key remains (but the fenced
    // lock's token counters).
    let lasting: u64 = names
        .iter()
        .map(|n| kind.lasting_keys(n).len() as u64)
        .sum();
    let start = Instant::now();
    while dbsize(&mut raw).await != lasting {
        assert!(
            start.elapsed() < ms(2000),
            "lock keys remain after all releases"
        );
        sleep(ms(20)).await;
    }
    for name in &names {
        assert!(!exists(&mut raw, name).await, "{name}");
    }

    // Let a renewal tick that started before the last unlock finish, then watch an idle window
    // of more than three renewal periods: the watchdog must not call any script.
    sleep(period * 2).await;
    let before = script_and_pexpire_calls(&mut raw).await;
    sleep(period * 4).await;
    let after = script_and_pexpire_calls(&mut raw).await;
    assert_eq!(
        before, after,
        "(scripts, pexpire) calls during the idle window"
    );
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    kind.assert_nothing_left(&mut raw, &all).await;

    // Positive control: with one lock held, the same window shows the watchdog at work.
    let guard = kind.any(&client, &names[0]).lock().await.unwrap();
    let before = script_and_pexpire_calls(&mut raw).await;
    sleep(period * 4).await;
    let after = script_and_pexpire_calls(&mut raw).await;
    assert!(
        after.0 >= before.0 + 2,
        "renewal scripts {before:?} -> {after:?}"
    );
    assert!(after.1 >= before.1 + 2, "pexpire {before:?} -> {after:?}");

    // A hold released right after a renewal tick is not renewed by any later tick. Made
    // visible by taking the same lock again for the same owner with an explicit lease, which
    // the watchdog must leave alone: a stale renewal would cut its PTTL to 300 ms (for the
    // read half, the PTTL of its marker key too).
    let marker = names[0].clone();
    let reused = names[1].clone();
    let owner = LockOptions::new().owner(Owner::new(1));
    let mut previous = pttl(&mut raw, &marker).await;
    let start = Instant::now();
    loop {
        sleep(ms(3)).await;
        let p = pttl(&mut raw, &marker).await;
        assert!(p > 0, "marker lock lost");
        if p > previous {
            break; // the watchdog just renewed: the next tick is ~100 ms away
        }
        previous = p;
        assert!(start.elapsed() < ms(2000), "no renewal tick observed");
    }
    let lock = kind.any(&client, &reused);
    lock.lock_with_options(&owner)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let leased = lock
        .lock_with_options(&owner.clone().lease(Duration::from_secs(10)))
        .await
        .unwrap();
    let leased_keys = kind.hold_keys(&reused, &kind.field(&client, Owner::new(1)), 1);
    let mut previous = Vec::new();
    for key in &leased_keys {
        previous.push(pttl(&mut raw, key).await);
    }
    let start = Instant::now();
    while start.elapsed() < period * 4 {
        sleep(ms(20)).await;
        for (key, previous) in leased_keys.iter().zip(previous.iter_mut()) {
            let p = pttl(&mut raw, key).await;
            assert!(
                p > 9_000 && p <= *previous,
                "pttl of {key} went from {previous} to {p}"
            );
            *previous = p;
        }
    }
    leased.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    kind.assert_nothing_left(&mut raw, &all).await;
    client.shutdown().await;
}

/// How the lock disappears behind its holder's back.
#[derive(Clone, Copy, Debug)]
enum Removal {
    RawDel,
    ForceUnlock,
}

async fn lost_lock_is_signalled_and_unlock_reports_it(removal: Removal, kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let period = ms(200);
    let client = client_with_watchdog(&server, period * 3);
    let other = client_with_watchdog(&server, period * 3);
    let name = unique_name("wd-lost");

    let guard = kind.any(&client, &name).lock().await.unwrap();
    assert!(!guard.is_lost());
    // A renewal period passes without the guard being reported lost.
    assert!(timeout(period + ms(100), guard.lost()).await.is_err());
    assert!(!guard.is_lost());

    match removal {
        Removal::RawDel => {
            let n: u64 = raw.del(&name).await.unwrap();
            assert_eq!(n, 1);
        }
        Removal::ForceUnlock => assert!(kind.any(&other, &name).force_unlock().await.unwrap()),
    }
    // Detected at the next renewal (one period, 200 ms); generous bound for a loaded machine.
    timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost signal after the key was removed");
    assert!(guard.is_lost());
    assert!(
        !exists(&mut raw, &name).await,
        "renewal must not recreate the key"
    );

    // A new holder with an explicit lease (not watched by its client).
    let new_opts = LockOptions::new()
        .owner(Owner::new(9))
        .lease(Duration::from_secs(10));
    let g2 = kind
        .any(&other, &name)
        .try_lock_with_options(Duration::ZERO, &new_opts)
        .await
        .unwrap()
        .expect("lock is free");
    let new_holder = kind.field(&other, Owner::new(9));

    // The lost hold was dropped from renewal, and its unlock does not touch Redis: no script
    // runs from here on.
    let before = script_and_pexpire_calls(&mut raw).await;
    let err = guard.unlock().await.unwrap_err();
    match &err {
        Error::LeaseLost { name: n } => assert_eq!(n, &name),
        e => panic!("expected LeaseLost, got {e:?}"),
    }
    assert!(err.is_not_held());
    sleep(period * 3 + ms(100)).await;
    let after = script_and_pexpire_calls(&mut raw).await;
    assert_eq!(
        before, after,
        "(scripts, pexpire) calls after the lock was lost"
    );

    assert_eq!(state(&mut raw, &name).await, kind.state_of(&new_holder, 1));
    let p = pttl(&mut raw, &name).await;
    assert!(p > 8_500 && p < 10_000, "new holder's pttl {p}");
    g2.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    other.shutdown().await;
    client.shutdown().await;
}

per_kind!(at_once current_thread, async fn key_deleted_behind_holders_back_is_signalled_lost);

/// (For the read half, `DEL` removes the hash only: the hold's marker key is left to expire,
/// which it does within a watchdog timeout as nothing renews it any more.)
async fn key_deleted_behind_holders_back_is_signalled_lost(kind: Kind) {
    lost_lock_is_signalled_and_unlock_reports_it(Removal::RawDel, kind).await;
}

per_kind!(at_once current_thread, async fn force_unlock_by_another_client_is_signalled_lost);

/// (The halves force-unlock a lock in their own mode only: the holder's own half here.)
async fn force_unlock_by_another_client_is_signalled_lost(kind: Kind) {
    lost_lock_is_signalled_and_unlock_reports_it(Removal::ForceUnlock, kind).await;
}

per_kind!(at_once current_thread, async fn key_taken_over_by_another_owner_is_lost_and_not_extended);

async fn key_taken_over_by_another_owner_is_lost_and_not_extended(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let period = ms(200);
    let client = client_with_watchdog(&server, period * 3);
    let other = client_with_watchdog(&server, period * 3);
    let name = unique_name("wd-takeover");

    let guard = kind.any(&client, &name).lock().await.unwrap();
    let old_holder = kind.field(&client, guard.owner());
    assert_eq!(state(&mut raw, &name).await, kind.state_of(&old_holder, 1));

    // Delete and take over at once, before the old holder's next renewal.
    let n: u64 = raw.del(&name).await.unwrap();
    assert_eq!(n, 1);
    let new_opts = LockOptions::new().owner(Owner::new(3)).lease(ms(5_000));
    let g2 = kind
        .any(&other, &name)
        .try_lock_with_options(Duration::ZERO, &new_opts)
        .await
        .unwrap()
        .expect("lock is free after DEL");
    let new_holder = kind.field(&other, Owner::new(3));

    timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("old guard reported lost");
    assert!(guard.is_lost());

    // Over three more renewal periods the new holder's PTTL only goes down: nobody extends it.
    let start = Instant::now();
    let first = pttl(&mut raw, &name).await;
    assert!(first > 0 && first <= 5_000, "pttl {first}");
    let mut previous = first;
    while start.elapsed() < period * 3 + ms(100) {
        sleep(ms(50)).await;
        let p = pttl(&mut raw, &name).await;
        assert!(
            p > 0 && p <= previous,
            "new holder's pttl went from {previous} to {p}"
        );
        previous = p;
    }
    assert!(
        previous <= first - 500,
        "pttl {first} -> {previous} over {:?}",
        start.elapsed()
    );

    let err = guard.unlock().await.unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err:?}");
    assert_eq!(state(&mut raw, &name).await, kind.state_of(&new_holder, 1));
    g2.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    other.shutdown().await;
    client.shutdown().await;
}

/// One renewal script call seen by MONITOR: when the server ran it (seconds), its keys and
/// ARGV.
#[derive(Debug)]
struct RenewCall {
    at: f64,
    keys: Vec<String>,
    argv: Vec<String>,
}

/// Parses a MONITOR line such as
/// `1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" "<sha>" "2" "k1" "k2" "600" "f1" "f2"`
/// into a renewal call, if it is an EVALSHA of `sha`. Our names and fields contain no quotes
/// or spaces.
fn parse_renew(line: &str, sha: &str) -> Option<RenewCall> {
    let (stamp, _) = line.split_once(' ')?;
    let at: f64 = stamp.parse().ok()?;
    let (_, command) = line.split_once("] ")?;
    let tokens: Vec<&str> = command.split(' ').map(|t| t.trim_matches('"')).collect();
    if !tokens.first()?.eq_ignore_ascii_case("evalsha") || *tokens.get(1)? != sha {
        return None;
    }
    let numkeys: usize = tokens.get(2)?.parse().ok()?;
    let keys = tokens
        .get(3..3 + numkeys)?
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let argv = tokens[3 + numkeys..]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    Some(RenewCall { at, keys, argv })
}

per_kind!(at_once current_thread, async fn renewals_are_batched_by_watchdog_batch_size);

async fn renewals_are_batched_by_watchdog_batch_size(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let timeout_ms = 600;
    let client = Client::builder()
        .url(server.url())
        .watchdog_timeout(ms(timeout_ms))
        .watchdog_batch_size(3)
        .build()
        .unwrap();
    // Read holds have their own renewal script, and so has the token lock; every other kind
    // renews its hash field.
    let renew_sha = redis::Script::new(kind.renew_script())
        .get_hash()
        .to_owned();

    let names: Vec<String> = (0..10)
        .map(|i| unique_name(&format!("wd-batch{i}")))
        .collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(kind.any(&client, name).lock().await.unwrap());
    }
    let holder = kind.field(&client, guards[0].owner());
    let all: BTreeSet<String> = names.iter().cloned().collect();

    // Wait one period so that every tick from here on sees all 10 holds, then record every
    // renewal script call.
    sleep(ms(timeout_ms / 3)).await;
    let monitor = server.redis_client().get_async_monitor().await.unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let collector = tokio::spawn({
        let lines = lines.clone();
        async move {
            let mut stream = monitor.into_on_message::<String>();
            while let Some(line) = stream.next().await {
                lines.lock().unwrap().push(line);
            }
        }
    });

    let start = Instant::now();
    while start.elapsed() < ms(3 * timeout_ms + 300) {
        sleep(ms(100)).await;
        for name in &names {
            let p = pttl(&mut raw, name).await;
            assert!(
                p > 0 && p <= 600,
                "{name}: pttl {p} after {:?}",
                start.elapsed()
            );
        }
    }
    collector.abort();
    for g in &guards {
        assert!(!g.is_lost());
    }

    let calls: Vec<RenewCall> = lines
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| parse_renew(l, &renew_sha))
        .collect();
    // Every call: at most 3 keys, ARGV = [lease, field of KEYS[1], field of KEYS[2], ...]; for
    // read holds each field is followed by the prefix of its marker keys in that lock,
    // `{KEYS[i]}:<field>:rwlock_timeout`.
    for call in &calls {
        assert!((1..=3).contains(&call.keys.len()), "{call:?}");
        let mut expected_argv = vec![timeout_ms.to_string()];
        for key in &call.keys {
            expected_argv.push(holder.clone());
            if kind == Kind::Read {
                expected_argv.push(format!("{{{key}}}:{holder}:rwlock_timeout"));
            }
        }
        assert_eq!(call.argv, expected_argv, "{call:?}");
        assert!(call.keys.iter().all(|k| all.contains(k)), "{call:?}");
    }
    // A tick renews the 10 holds in chunks of 3, 3, 3 and 1, sent at once (over the client's
    // connections, so in no fixed order at the server); ticks are a period (200 ms) apart.
    // Calls less than half a period apart are one tick; the first and last tick seen may be
    // cut by the recording, every other one is 4 calls that partition the 10 keys.
    let mut ticks: Vec<Vec<&RenewCall>> = Vec::new();
    for call in &calls {
        match ticks.last_mut() {
            Some(tick) if call.at - tick.last().unwrap().at < (timeout_ms / 6) as f64 / 1000.0 => {
                tick.push(call);
            }
            _ => ticks.push(vec![call]),
        }
    }
    let complete: Vec<&Vec<&RenewCall>> = ticks
        .iter()
        .skip(1)
        .take(ticks.len().saturating_sub(2))
        .collect();
    assert!(
        complete.len() >= 3,
        "only {} complete ticks: {calls:?}",
        complete.len()
    );
    for tick in complete {
        let mut sizes: Vec<usize> = tick.iter().map(|c| c.keys.len()).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, vec![1, 3, 3, 3], "{tick:?}");
        let keys: Vec<&String> = tick.iter().flat_map(|c| &c.keys).collect();
        let distinct: BTreeSet<String> = keys.iter().map(|k| (*k).clone()).collect();
        assert_eq!(keys.len(), 10, "{tick:?}");
        assert_eq!(distinct, all, "{tick:?}");
    }

    for g in guards {
        g.unlock().await.unwrap();
    }
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    kind.assert_nothing_left(&mut raw, &all).await;
    client.shutdown().await;
}

per_kind!(at_once current_thread, async fn reentrant_holds_keep_renewal_until_the_last_is_released);

/// (The kinds that refuse a re-entry: the two re-entries are refused, and the one hold is
/// renewed as the last of several is.)
async fn reentrant_holds_keep_renewal_until_the_last_is_released(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let timeout_ms = 600;
    let client = client_with_watchdog(&server, ms(timeout_ms));
    let name = unique_name("wd-reentrant");
    let lock = kind.any(&client, &name);
    let owner = Owner::new(77);
    let opts = LockOptions::new().owner(owner);
    let holder = kind.field(&client, owner);

    let g1 = lock.lock_with_options(&opts).await.unwrap();
    let g3 = match kind.reentry() {
        Reentry::Counts => {
            let g2 = lock.lock_with_options(&opts).await.unwrap();
            let g3 = lock.lock_with_options(&opts).await.unwrap();
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 3));
            // A read hold per marker key.
            for key in kind.markers(&name, &holder, 3) {
                assert!(exists(&mut raw, &key).await, "{key}");
            }

            // Release one hold explicitly and one on drop.
            g1.unlock().await.unwrap();
            drop(g2);
            let start = Instant::now();
            while lock.hold_count(owner).await.unwrap() != 1 {
                assert!(start.elapsed() < ms(2000), "dropped hold not released");
                sleep(ms(20)).await;
            }

            // The released holds' marker keys went with them (the read half).
            for key in kind.markers(&name, &holder, 3).iter().skip(1) {
                assert!(!exists(&mut raw, key).await, "{key}");
            }
            g3
        }
        Reentry::Refused => {
            for _ in 0..2 {
                let again = lock.lock_with_options(&opts).await;
                assert!(
                    matches!(again, Err(Error::NotReentrant { .. })),
                    "{kind}: {again:?}"
                );
            }
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
            g1
        }
    };

    // The remaining hold is still renewed past three watchdog timeouts (with its marker key).
    let markers = kind.markers(&name, &holder, 1);
    let start = Instant::now();
    while start.elapsed() < ms(3 * timeout_ms + 300) {
        sleep(ms(100)).await;
        let p = pttl(&mut raw, &name).await;
        assert!(p > 0 && p <= 600, "pttl {p} after {:?}", start.elapsed());
        assert_pttls_within(&mut raw, &markers, 600, start.elapsed()).await;
    }
    assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
    assert!(!g3.is_lost());

    g3.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    kind.assert_nothing_left(&mut raw, &[&name]).await;
    // Nothing is renewed any more.
    sleep(ms(timeout_ms / 3 * 2)).await;
    let before = script_and_pexpire_calls(&mut raw).await;
    sleep(ms(timeout_ms + 100)).await;
    assert_eq!(before, script_and_pexpire_calls(&mut raw).await);
    assert!(!exists(&mut raw, &name).await);
    client.shutdown().await;
}
