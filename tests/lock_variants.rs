//! The lock variants (Redisson's own tests of its fenced, non-reentrant and spin locks, with
//! their behaviours scaled down): the fenced lock's token sequence (and the paused holder it
//! fences off), the spin lock's polling back-off; and, for every kind (`common::Kind`,
//! `per_kind!`), what a re-entry by the holding owner does (a count, or `NotReentrant` without
//! a command), another handle of the owner, and the message a release publishes with the
//! waiter it wakes (or that polls its way in).

mod common;

use std::time::{Duration, Instant};

use common::{
    FaultProxy, Kind, RedisServer, Reentry, channel, client, client_with, command_stats, exists,
    field, hash, ms, numsub, per_kind, psubscribe, pttl, script_calls, state, token_key,
    unique_name,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner, SpinBackoff};

async fn token_value(raw: &mut MultiplexedConnection, name: &str) -> Option<String> {
    common::value(raw, &token_key(name)).await
}

// -----------------------------------------------------------------------------------------
// Fenced lock
// -----------------------------------------------------------------------------------------

/// `testTokenIncrease`: 1, 2, 3, 4, 5 across `lock_and_get_token`, `lock`, a lease, re-entry
/// and `try_lock_and_get_token`, and on across owners and clients.
#[tokio::test]
async fn fenced_tokens_increase_on_every_acquisition_including_reentry() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client(&server);
    let b = client(&server);
    let name = unique_name("fenced");
    let lock = a.fenced_lock(&name);
    assert_eq!(lock.token().await.unwrap(), 0);

    let (g1, t1) = lock.lock_and_get_token().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    let g3 = lock
        .lock_with_options(&LockOptions::new().lease(ms(10_000)))
        .await
        .unwrap();
    let (g4, t4) = lock.try_lock_and_get_token().await.unwrap().unwrap();
    let (g5, t5) = lock
        .try_lock_and_get_token_for(ms(100))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (t1, g2.token(), g3.token(), t4, t5),
        (1, Some(2), Some(3), 4, 5)
    );
    assert_eq!(g1.token(), Some(1));
    assert_eq!(token_value(&mut raw, &name).await.as_deref(), Some("5"));
    assert_eq!(pttl(&mut raw, &token_key(&name)).await, -1, "no TTL");
    // The lock itself is the RLock hash.
    let f = field(&a, g1.owner());
    assert_eq!(hash(&mut raw, &name).await, vec![(f, "5".to_owned())]);
    assert_eq!(lock.token().await.unwrap(), 5);

    // Another client waits; its grant gets 6.
    let other = b.fenced_lock(&name);
    assert!(other.try_lock().await.unwrap().is_none());
    for g in [g5, g4, g3, g2, g1] {
        g.unlock().await.unwrap();
    }
    assert!(!exists(&mut raw, &name).await);
    let (g6, t6) = other.lock_and_get_token().await.unwrap();
    assert_eq!(t6, 6);
    g6.unlock().await.unwrap();
    // force_unlock leaves the counter.
    let (_g7, t7) = lock.lock_and_get_token().await.unwrap();
    assert_eq!(t7, 7);
    assert!(other.force_unlock().await.unwrap());
    assert_eq!(token_value(&mut raw, &name).await.as_deref(), Some("7"));
    a.shutdown().await;
    b.shutdown().await;
}

/// An acquire whose reply is lost (connection reset after Redis ran it) is resolved, and the
/// guard handed out carries the token that acquisition drew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_grant_whose_reply_is_lost_keeps_its_token() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let c = Client::builder().url(proxy.url()).build().unwrap();
    let warm = c.fenced_lock(unique_name("warm"));
    warm.lock().await.unwrap().unlock().await.unwrap();
    let name = unique_name("fenced");
    let () = raw.set(token_key(&name), 41).await.unwrap();
    let trigger = proxy.reset_after(token_key(&name).as_bytes());
    let (guard, token) = c.fenced_lock(&name).lock_and_get_token().await.unwrap();
    assert!(trigger.fired());
    assert_eq!(token, 42);
    assert_eq!(token_value(&mut raw, &name).await.as_deref(), Some("42"));
    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    c.shutdown().await;
}

/// The Kleppmann scenario, made deterministic: holder A (token 1) pauses past its lease; B
/// takes the lock (token 2) and writes; A wakes and writes with its old token: the storage
/// refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holders_late_write_is_refused_by_its_token() {
    /// A storage that refuses writes carrying a token older than the newest it accepted.
    #[derive(Default)]
    struct Storage {
        newest: u64,
        value: Option<&'static str>,
    }
    impl Storage {
        fn write(&mut self, token: u64, value: &'static str) -> Result<(), u64> {
            if token < self.newest {
                return Err(self.newest);
            }
            self.newest = token;
            self.value = Some(value);
            Ok(())
        }
    }

    let server = RedisServer::start();
    let a = client(&server);
    let b = client(&server);
    let name = unique_name("fenced");
    let mut storage = Storage::default();
    let lease = LockOptions::new().lease(ms(300));

    let guard_a = a
        .fenced_lock(&name)
        .lock_with_options(&lease)
        .await
        .unwrap();
    let token_a = guard_a.token().unwrap();
    // A "pauses" past its lease (a GC pause, SIGSTOP): B gets the lock meanwhile.
    let (guard_b, token_b) = b
        .fenced_lock(&name)
        .try_lock_and_get_token_for(ms(2_000))
        .await
        .unwrap()
        .expect("B gets the lock once A's lease ran out");
    assert!(token_b > token_a);
    assert!(guard_a.is_lost(), "A's guard knows its lease ended");
    storage.write(token_b, "written by B").unwrap();
    // A wakes up and writes with its old token.
    assert_eq!(storage.write(token_a, "late write by A"), Err(token_b));
    assert_eq!(storage.value, Some("written by B"));
    guard_b.unlock().await.unwrap();
    assert!(matches!(guard_a.unlock().await, Err(e) if e.is_not_held()));
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_fenced_token_key_of_another_type_is_a_clear_error_and_nothing_changes() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("fenced");
    let () = raw.hset(token_key(&name), "f", 1).await.unwrap();
    let err = c.fenced_lock(&name).try_lock().await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err}");
    assert!(!exists(&mut raw, &name).await, "no hold left");
    c.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// Spin lock
// -----------------------------------------------------------------------------------------

/// The back-off, measured by commands: over 1.5 s of waiting, Redisson's default (1 ms
/// doubling to 128 ms) polls about 16 times; a constant 250 ms about 6 times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_waiters_poll_by_their_backoff() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    for (backoff, range) in [
        (SpinBackoff::default(), 11..=24),
        (SpinBackoff::constant(ms(250)).unwrap(), 5..=8),
    ] {
        let name = unique_name("spin");
        let holder = c
            .spin_lock(&name)
            .lock_with_options(&LockOptions::new().owner(Owner::new(1)))
            .await
            .unwrap();
        let before = command_stats(&mut raw, "evalsha").await.calls;
        let waited = c
            .spin_lock(&name)
            .with_backoff(backoff)
            .try_lock_with_options(ms(1_500), &LockOptions::new().owner(Owner::new(2)))
            .await
            .unwrap();
        assert!(waited.is_none());
        let polls = command_stats(&mut raw, "evalsha").await.calls - before;
        assert!(
            range.contains(&polls),
            "{backoff:?}: {polls} polls in 1.5 s"
        );
        holder.unlock().await.unwrap();
    }
    c.shutdown().await;
}

/// A spin lock and a `Lock` of one name exclude each other (same hash).
#[tokio::test]
async fn spin_and_reentrant_locks_of_one_name_exclude_each_other() {
    let server = RedisServer::start();
    let c = client(&server);
    let other = client(&server);
    let name = unique_name("spin");
    let g = c.spin_lock(&name).lock().await.unwrap();
    assert!(other.lock(&name).try_lock().await.unwrap().is_none());
    g.unlock().await.unwrap();
    let g = other.lock(&name).lock().await.unwrap();
    assert!(c.spin_lock(&name).try_lock().await.unwrap().is_none());
    g.unlock().await.unwrap();
    c.shutdown().await;
    other.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// Every kind: re-entry, another handle, the unlock message and the waiters
// -----------------------------------------------------------------------------------------

/// Commands a refused re-entry must not run: every write a lock kind's scripts or handles use.
const WRITES: [&str; 10] = [
    "set", "del", "pexpire", "setex", "psetex", "getset", "hset", "hincrby", "incr", "rpush",
];

/// The calls of every command of [`WRITES`], and of the script commands.
async fn write_calls(raw: &mut MultiplexedConnection) -> Vec<u64> {
    let mut calls = vec![command_stats(raw, "evalsha").await.calls];
    calls.push(command_stats(raw, "eval").await.calls);
    for w in WRITES {
        calls.push(command_stats(raw, w).await.calls);
    }
    calls
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn a_re_entry_by_the_holding_owner_counts_or_is_refused_without_touching_redis);

/// `testSameThreadReacquireThrows` (Redisson's non-reentrant lock test) and its reentrant
/// counterpart, for every kind: `lock`, `try_lock` and `try_lock_for` by the owner that holds
/// the lock are each a re-entry (the count goes up, the TTL is the lease again) for the
/// reentrant kinds; for the kinds that refuse a re-entry they are refused at once with
/// `NotReentrant` naming the lock and the holder, no command is sent, and the lock, its TTL
/// and its queue are as they were (for the token lock: the same value, no `SET`).
async fn a_re_entry_by_the_holding_owner_counts_or_is_refused_without_touching_redis(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("reentry");
    let lock = kind.any(&c, &name);
    let owner = Owner::new(1);
    let opts = LockOptions::new().owner(owner).lease(ms(20_000));
    let holder = kind.field(&c, owner);
    let guard = lock.lock_with_options(&opts).await.unwrap();
    assert_eq!(guard.holder(), holder);
    assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
    let before_ttl = pttl(&mut raw, &name).await;
    let before = write_calls(&mut raw).await;

    let started = Instant::now();
    let attempts = [
        lock.lock_with_options(&opts).await.map(Some),
        lock.try_lock_with_options(Duration::ZERO, &opts).await,
        lock.try_lock_with_options(ms(2_000), &opts).await,
    ];
    match kind.reentry() {
        Reentry::Counts => {
            let mut guards = Vec::new();
            for got in attempts {
                let g = got.unwrap().expect("a re-entry is granted at once");
                assert_eq!(g.holder(), holder);
                guards.push(g);
            }
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 4));
            assert_eq!(lock.hold_count(owner).await.unwrap(), 4);
            for g in guards {
                g.unlock().await.unwrap();
            }
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
        }
        Reentry::Refused => {
            for got in attempts {
                match got {
                    Err(Error::NotReentrant { name: n, holder: h }) => {
                        assert_eq!(n, name);
                        assert_eq!(h, holder);
                    }
                    other => panic!("{kind}: expected NotReentrant, got {other:?}"),
                }
            }
            assert!(started.elapsed() < ms(1_000), "{:?}", started.elapsed());
            // Nothing sent: no script, no write.
            assert_eq!(
                write_calls(&mut raw).await,
                before,
                "{kind}: a refused re-entry ran a command ([evalsha, eval, {WRITES:?}])"
            );
            assert_eq!(state(&mut raw, &name).await, kind.state_of(&holder, 1));
            let after_ttl = pttl(&mut raw, &name).await;
            assert!(
                after_ttl <= before_ttl && after_ttl > before_ttl - 3_000,
                "{before_ttl} -> {after_ttl}"
            );
            if kind.counts_holds() {
                assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
            }
            for key in kind.waiter_keys(&name) {
                assert!(!exists(&mut raw, &key).await, "{key}");
            }
        }
    }
    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    c.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn another_handle_of_the_owner_is_the_same_holder_and_another_owner_waits);

/// `testCrossInstanceSameThreadReentryThrows` and `testContendingThreadBlocksAndAcquiresOnRelease`,
/// for every kind: another handle of the same lock and owner is the same holder (a re-entry, or
/// refused), and another owner waits until the release (the waiter of a read hold takes the
/// write half).
async fn another_handle_of_the_owner_is_the_same_holder_and_another_owner_waits(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("handles");
    let one = LockOptions::new().owner(Owner::new(1));
    let guard = kind.any(&c, &name).lock_with_options(&one).await.unwrap();
    let again = kind
        .any(&c, &name)
        .try_lock_with_options(Duration::ZERO, &one)
        .await;
    match kind.reentry() {
        Reentry::Counts => {
            let g = again.unwrap().expect("the same holder re-enters");
            assert_eq!(
                state(&mut raw, &name).await,
                kind.hold_state(&c, Owner::new(1), 2)
            );
            g.unlock().await.unwrap();
        }
        Reentry::Refused => assert!(
            matches!(again, Err(Error::NotReentrant { .. })),
            "{kind}: {again:?}"
        ),
    }

    let rival = kind.rival();
    let polls = script_calls(&mut raw).await;
    let waiter = {
        let lock = rival.any(&c, &name);
        tokio::spawn(async move {
            lock.lock_with_options(&LockOptions::new().owner(Owner::new(2)))
                .await
                .unwrap()
        })
    };
    rival.wait_parked(&mut raw, &name, 1, 1, polls).await;
    assert!(!waiter.is_finished());
    guard.unlock().await.unwrap();
    let g2 = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        state(&mut raw, &name).await,
        rival.hold_state(&c, Owner::new(2), 1)
    );
    g2.unlock().await.unwrap();
    c.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn an_unlock_publishes_the_kinds_message_and_the_waiter_gets_the_lock_at_once);

/// The release of a held lock publishes exactly the kind's message (`0`, the write half's `1`,
/// the fair kinds' on the waiting head's own channel; nothing for the spin and token locks), and
/// a waiter of another client whose re-check is 10 s away gets the lock at once: woken by that
/// message, or by its own polling (the spin and token locks' waiters, which subscribe to
/// nothing). A force unlock then publishes the kind's message again (nothing for the fair
/// kinds, whose queue is empty, nor for the spin and token locks).
async fn an_unlock_publishes_the_kinds_message_and_the_waiter_gets_the_lock_at_once(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client(&server);
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("wake");
    let mut messages = psubscribe(&server, &[Kind::channels_of(&name)]).await;

    let held = kind.any(&a, &name).lock().await.unwrap();
    assert_eq!(
        state(&mut raw, &name).await,
        kind.hold_state(&a, held.owner(), 1)
    );
    // The fenced lock's tokens: 1 for this grant, 2 for the waiter's.
    assert_eq!(held.token(), kind.draws_token().then_some(1));
    let rival = kind.rival();
    let owner = Owner::new(2);
    let polls = script_calls(&mut raw).await;
    let waiter = {
        let lock = rival.any(&b, &name);
        tokio::spawn(async move {
            let g = lock
                .lock_with_options(&LockOptions::new().owner(owner))
                .await
                .unwrap();
            (g, Instant::now())
        })
    };
    rival.wait_parked(&mut raw, &name, 1, 1, polls).await;
    tokio::time::sleep(ms(300)).await;
    assert!(!waiter.is_finished());
    if rival.polls() {
        // Nobody subscribes to the lock's channel: only our own pattern subscription exists.
        assert_eq!(numsub(&mut raw, &channel(&name)).await, 0);
        assert_eq!(
            common::subscriptions(&mut raw).await,
            (Vec::<String>::new(), 1)
        );
    }
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (g, got) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    let latency = got.saturating_duration_since(released);
    let bound = if rival.polls() { ms(400) } else { ms(500) };
    assert!(
        latency < bound,
        "{kind}: got the lock {latency:?} after the unlock"
    );
    assert_eq!(state(&mut raw, &name).await, rival.hold_state(&b, owner, 1));
    assert_eq!(g.token(), kind.draws_token().then_some(2));
    // The release's message, on the channel of the kind (the waiter's own for a fair head).
    let published: Vec<(String, String)> = common::drain(&mut messages).await;
    let expected: Vec<(String, String)> = kind
        .waiter_channel(&name, &rival.field(&b, owner))
        .zip(kind.release_message())
        .map(|(c, m)| (c, m.to_owned()))
        .into_iter()
        .collect();
    assert_eq!(published, expected, "{kind}");

    // A force unlock: deleted, and the kind's message again (no head to wake for the fair
    // kinds; nothing for the kinds that publish nothing).
    assert!(rival.any(&a, &name).force_unlock().await.unwrap());
    assert!(!exists(&mut raw, &name).await);
    let expected: Vec<(String, String)> = if rival.queues_waiters() {
        Vec::new()
    } else {
        rival
            .channel(&name)
            .zip(rival.release_message())
            .map(|(c, m)| (c, m.to_owned()))
            .into_iter()
            .collect()
    };
    assert_eq!(common::drain(&mut messages).await, expected, "{kind}");
    drop(g);
    a.shutdown().await;
    b.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn a_woken_waiter_is_not_overtaken_by_its_releasers_next_acquire; except {
    read: "readers share the lock: a reader's next acquire is granted beside the waiting reader",
    write: "the write half shares its channel with readers and does not yield: its releaser may take it back first (as Redisson's)",
    spin: "spin waiters poll: the releaser's next acquire may come first (as Redisson's)",
    token: "token waiters poll: the releaser's next acquire may come first",
});

/// An owner that releases the lock and at once asks for it again, while another owner of the
/// same client waits for it, does not take it back first (barging), in any of 25 rounds: the
/// waiter the unlock message woke gets it, and the releaser only after that waiter's release.
/// For the unfair kinds the releaser's acquire yields to the parked waiter (it sends nothing
/// until woken); the fair kinds get the order from their queue. The holder's own re-entry
/// never waits for the parked waiter. (Before the unfair kinds yielded, the releaser's acquire,
/// sent before the waiter had heard the message, took the lock back in most rounds. Later it
/// still did in about one run of 100 on a loaded machine, in two ways: the releaser took a
/// wake meant for the waiter, or it yielded to a waiter that had already been granted and
/// released, and waited for that release's message, sent before it had subscribed.)
async fn a_woken_waiter_is_not_overtaken_by_its_releasers_next_acquire(kind: Kind) {
    const ROUNDS: usize = 25;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // No re-check for 30 s: only messages wake the waiters.
    let client = client_with(&server, Duration::from_secs(30), Duration::from_secs(30));
    let name = unique_name("barge");
    let (a, b) = (Owner::new(1), Owner::new(2));
    let lock = kind.any(&client, &name);
    let (order_tx, mut order) = tokio::sync::mpsc::unbounded_channel();
    for round in 0..ROUNDS {
        let calls = script_calls(&mut raw).await;
        let held = lock
            .lock_with_options(&LockOptions::new().owner(a))
            .await
            .unwrap();
        let (release_b, released) = tokio::sync::oneshot::channel::<()>();
        let waiter = {
            let (lock, order_tx) = (kind.any(&client, &name), order_tx.clone());
            tokio::spawn(async move {
                let g = lock
                    .lock_with_options(&LockOptions::new().owner(b))
                    .await
                    .unwrap();
                order_tx.send("b").unwrap();
                released.await.unwrap();
                g.unlock().await.unwrap();
            })
        };
        kind.wait_parked(&mut raw, &name, 1, 1, calls).await;
        if round == 0 && kind.reentrant() {
            // The holder re-enters at once: it never yields to a waiter of the lock it holds.
            let again = tokio::time::timeout(
                Duration::from_secs(5),
                lock.lock_with_options(&LockOptions::new().owner(a)),
            )
            .await
            .expect("the holder's re-entry waited for the waiter")
            .unwrap();
            assert_eq!(state(&mut raw, &name).await, kind.hold_state(&client, a, 2));
            again.unlock().await.unwrap();
        }
        // The releaser: unlock, then at once lock again.
        held.unlock().await.unwrap();
        let again = {
            let (lock, order_tx) = (kind.any(&client, &name), order_tx.clone());
            tokio::spawn(async move {
                let g = lock
                    .lock_with_options(&LockOptions::new().owner(a))
                    .await
                    .unwrap();
                order_tx.send("a").unwrap();
                g.unlock().await.unwrap();
            })
        };
        let first = tokio::time::timeout(Duration::from_secs(5), order.recv())
            .await
            .expect("nobody got the lock within 5 s");
        assert_eq!(
            first,
            Some("b"),
            "{kind}: round {round}: the releaser took the lock back first"
        );
        assert_eq!(
            state(&mut raw, &name).await,
            kind.hold_state(&client, b, 1),
            "{kind}"
        );
        release_b.send(()).unwrap();
        let second = tokio::time::timeout(Duration::from_secs(5), order.recv())
            .await
            .expect("the releaser did not get the lock within 5 s of the waiter's release");
        assert_eq!(second, Some("a"), "{kind}");
        tokio::time::timeout(Duration::from_secs(5), async {
            waiter.await.unwrap();
            again.await.unwrap();
        })
        .await
        .unwrap();
        assert!(common::gone_within(&mut raw, &name, Duration::from_secs(2)).await);
        if let Some(channel) = kind.channel(&name) {
            // Unsubscribed, so that the next round's waiter subscribes anew.
            common::wait_numsub(&mut raw, &channel, 0).await;
        }
    }
    client.shutdown().await;
    kind.assert_nothing_left(&mut raw, &[&name]).await;
}

/// A hold of the owner's own holder that the client has no guard for (its release taken by a
/// master that a failover then demoted, so the hold stays on the new master until its lease
/// ends; a grant whose lost reply could not be settled) is not a re-entry: the kinds that
/// refuse a re-entry, and the write half over such a read hold, treat it as another holder's
/// hold. `try_lock` is not granted (it was `NotReentrant` / `UpgradeRefused`), Redis unchanged;
/// `lock()` waits it out and is granted a fresh hold. (The 164 retried errors of a Sentinel leg
/// of the fault suite: RELIABILITY.md, "Retried errors behind Sentinel".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_of_the_owners_own_holder_without_a_guard_is_waited_out() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client_with(&server, Duration::from_secs(30), ms(100));
    let owner = Owner::new(3);
    let opts = LockOptions::new().owner(owner);
    for kind in [
        Kind::NonReentrant,
        Kind::NonReentrantFair,
        Kind::Token,
        Kind::Write,
    ] {
        let name = unique_name("ghost");
        // The ghost: the owner's own hold, as Redis would keep it, 800 ms left.
        let ghost = match kind {
            Kind::Write => Kind::Read,
            other => other,
        };
        let field = ghost.field(&client, owner);
        if ghost == Kind::Token {
            let () = raw.pset_ex(&name, &field, 800).await.unwrap();
        } else {
            let () = raw.hset(&name, &field, 1).await.unwrap();
            if ghost == Kind::Read {
                let () = raw.hset(&name, "mode", "read").await.unwrap();
            }
            let _: bool = raw.pexpire(&name, 800).await.unwrap();
            for marker in ghost.markers(&name, &field, 1) {
                let () = raw.pset_ex(&marker, 1, 800).await.unwrap();
            }
        }
        let before = state(&mut raw, &name).await;
        let lock = kind.any(&client, &name);
        let tried = lock.try_lock_with_options(Duration::ZERO, &opts).await;
        assert!(
            matches!(tried, Ok(None)),
            "{kind}: try_lock beside its owner's own hold without a guard: {tried:?}"
        );
        assert_eq!(
            state(&mut raw, &name).await,
            before,
            "{kind}: Redis changed"
        );
        let guard = tokio::time::timeout(Duration::from_secs(5), lock.lock_with_options(&opts))
            .await
            .expect("lock() did not get the lock within 5 s")
            .unwrap_or_else(|e| panic!("{kind}: lock() beside the owner's own old hold: {e:?}"));
        // A fresh hold of the owner, with the watchdog's lease.
        assert_eq!(
            state(&mut raw, &name).await,
            kind.hold_state(&client, owner, 1),
            "{kind}"
        );
        assert!(pttl(&mut raw, &name).await > 20_000, "{kind}");
        guard.unlock().await.unwrap();
        assert!(common::gone_within(&mut raw, &name, Duration::from_secs(2)).await);
        for marker in ghost.markers(&name, &field, 1) {
            // Expired with the ghost (a read, so that Redis reclaims it now).
            assert!(!exists(&mut raw, &marker).await, "{kind}: {marker}");
        }
        kind.assert_nothing_left(&mut raw, &[&name]).await;
    }
    client.shutdown().await;
}

/// A release whose outcome could not be settled (every link to Redis black-holed for longer
/// than the settling's retries) spends its guard like any failed release: the client stops
/// counting the hold, so once the link is back and the hold's lease has ended (the watchdog
/// stopped at the release) the owner takes the lock again, and `stats()` counts no hold.
/// Before, the unresolved release kept the hold counted: a non-reentrant kind refused its
/// owner as a re-entry for good (the soak: `counted_holds = 1` after the load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_could_not_be_settled_leaves_no_count_behind() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let client = Client::builder()
        .url(proxy.url())
        .watchdog_timeout(ms(1_000))
        .command_timeout(ms(300))
        .build()
        .unwrap();
    let owner = Owner::new(5);
    let opts = LockOptions::new().owner(owner);
    for kind in [Kind::NonReentrant, Kind::Lock, Kind::Spin] {
        let name = unique_name("unsettled");
        let lock = kind.any(&client, &name);
        let guard = lock.lock_with_options(&opts).await.unwrap();
        proxy.set_mode(common::Mode::Blackhole);
        let released = guard.unlock().await;
        assert!(
            released.is_err(),
            "{kind}: a release through a black hole reported {released:?}"
        );
        // The settling's retries end ((lease + command timeout) x 2 = 2.6 s).
        tokio::time::sleep(ms(3_500)).await;
        proxy.set_mode(common::Mode::Pass);
        let again = tokio::time::timeout(Duration::from_secs(10), lock.lock_with_options(&opts))
            .await
            .expect("lock() did not return within 10 s");
        match again {
            Ok(guard) => guard.unlock().await.unwrap(),
            Err(e) => panic!("{kind}: the owner could not take the lock again: {e:?}"),
        }
        let stats = client.stats();
        assert_eq!(stats.counted_holds, 0, "{kind}: {stats:?}");
    }
    client.shutdown().await;
}
