//! The lock variants, after Redisson's §10.5-10.7 tests: the fenced lock's token sequence
//! (and the paused holder it fences off), the non-reentrant locks' refused re-entry, the spin
//! lock's silent unlock and polling back-off.

mod common;

use std::time::{Duration, Instant};

use common::{
    FaultProxy, RedisServer, client, client_with, command_stats, exists, field, hash, ms, numsub,
    pttl, queue_key, unique_name, wait_numsub,
};
use futures_util::StreamExt;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner, SpinBackoff};

fn token_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}

async fn token_value(raw: &mut MultiplexedConnection, name: &str) -> Option<String> {
    raw.get(token_key(name)).await.unwrap()
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
    assert_eq!(lock.get_token().await.unwrap(), 0);

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
    assert_eq!(lock.get_token().await.unwrap(), 5);

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

/// A fenced waiter is woken by the unlock message, like a `Lock` waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_waiter_wakes_on_the_unlock_message() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client(&server);
    let b = client_with(&server, Duration::from_secs(30), Duration::from_secs(10));
    let name = unique_name("fenced");
    let (held, t1) = a.fenced_lock(&name).lock_and_get_token().await.unwrap();
    let lock_b = b.fenced_lock(&name);
    let waiter = tokio::spawn(async move {
        let (g, t) = lock_b.lock_and_get_token().await.unwrap();
        (g, t, Instant::now())
    });
    wait_numsub(&mut raw, &common::channel(&name), 1).await;
    tokio::time::sleep(ms(300)).await;
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (g, t2, woke) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(woke.saturating_duration_since(released) < ms(500));
    assert_eq!((t1, t2), (1, 2));
    g.unlock().await.unwrap();
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
// Non-reentrant locks
// -----------------------------------------------------------------------------------------

/// `testSameThreadReacquireThrows`, for both non-reentrant kinds: `lock`, `try_lock` and
/// `try_lock_for` by the owner are refused at once without a command, and the hold stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_entry_is_refused_without_touching_redis() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    for fair in [false, true] {
        let name = unique_name("nonreentrant");
        let lock: redisson_sync::AnyLock = if fair {
            c.non_reentrant_fair_lock(&name).into()
        } else {
            c.non_reentrant_lock(&name).into()
        };
        let opts = LockOptions::new().owner(Owner::new(1));
        let guard = lock.lock_with_options(&opts).await.unwrap();
        let before_hash = hash(&mut raw, &name).await;
        let before = command_stats(&mut raw, "evalsha").await.calls;
        let refused = [
            lock.lock_with_options(&opts).await.map(|_| ()),
            lock.try_lock_with_options(Duration::ZERO, &opts)
                .await
                .map(|_| ()),
            lock.try_lock_with_options(ms(200), &opts).await.map(|_| ()),
        ];
        for r in refused {
            assert!(
                matches!(r, Err(Error::NotReentrant { ref name, .. }) if *name == lock.name()),
                "fair {fair}: {r:?}"
            );
        }
        assert_eq!(
            command_stats(&mut raw, "evalsha").await.calls,
            before,
            "fair {fair}: a refused re-entry sent a script"
        );
        assert_eq!(hash(&mut raw, &name).await, before_hash);
        assert_eq!(lock.hold_count(Owner::new(1)).await.unwrap(), 1);
        if fair {
            let queued: Vec<String> = raw.lrange(queue_key(&name), 0, -1).await.unwrap();
            assert!(queued.is_empty(), "{queued:?}");
        }
        guard.unlock().await.unwrap();
        assert!(!exists(&mut raw, &name).await);
    }
    c.shutdown().await;
}

/// `testCrossInstanceSameThreadReentryThrows` and `testContendingThreadBlocksAndAcquiresOnRelease`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_handle_of_the_owner_is_refused_and_another_owner_waits() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("nonreentrant");
    let one = LockOptions::new().owner(Owner::new(1));
    let guard = c
        .non_reentrant_lock(&name)
        .lock_with_options(&one)
        .await
        .unwrap();
    let again = c
        .non_reentrant_lock(&name)
        .try_lock_with_options(Duration::ZERO, &one)
        .await;
    assert!(
        matches!(again, Err(Error::NotReentrant { .. })),
        "{again:?}"
    );

    let waiter = {
        let lock = c.non_reentrant_lock(&name);
        tokio::spawn(async move {
            lock.lock_with_options(&LockOptions::new().owner(Owner::new(2)))
                .await
                .unwrap()
        })
    };
    wait_numsub(&mut raw, &common::channel(&name), 1).await;
    assert!(!waiter.is_finished());
    guard.unlock().await.unwrap();
    let g2 = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field(&c, Owner::new(2)), "1".to_owned())]
    );
    g2.unlock().await.unwrap();
    c.shutdown().await;
}

// -----------------------------------------------------------------------------------------
// Spin lock
// -----------------------------------------------------------------------------------------

/// The spin lock writes the RLock hash, publishes nothing on unlock or force unlock, and its
/// waiter (with no subscription) gets the lock by polling soon after the unlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_unlock_is_silent_and_waiters_poll() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client(&server);
    let b = client(&server);
    let name = unique_name("spin");
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(common::channel(&name)).await.unwrap();

    let held = a.spin_lock(&name).lock().await.unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field(&a, held.owner()), "1".to_owned())]
    );
    let lock_b = b.spin_lock(&name);
    let waiter = tokio::spawn(async move {
        let g = lock_b.lock().await.unwrap();
        (g, Instant::now())
    });
    tokio::time::sleep(ms(300)).await;
    assert!(!waiter.is_finished());
    assert_eq!(
        numsub(&mut raw, &common::channel(&name)).await,
        1,
        "only our own subscriber"
    );
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (g, got) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    let latency = got.saturating_duration_since(released);
    assert!(latency < ms(400), "polled its way in after {latency:?}");
    assert!(a.spin_lock(&name).force_unlock().await.unwrap());
    assert!(!exists(&mut raw, &name).await);
    let quiet = tokio::time::timeout(ms(200), pubsub.on_message().next()).await;
    assert!(
        quiet.is_err(),
        "a spin lock published {:?}",
        quiet.unwrap().map(|m| m.get_payload::<String>())
    );
    drop(g);
    a.shutdown().await;
    b.shutdown().await;
}

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
