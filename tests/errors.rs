//! Every error case, each with the exact error and the exact Redis state it leaves: unlock by a
//! non-holder, a lock name holding another Redis type, zero durations and invalid settings,
//! Redis unreachable or stalled, and use after shutdown. Contention is not an error
//! (`Ok(None)`), which the tests of the lock itself cover.
//!
//! Every test of a lock operation runs once per lock kind (`common::Kind`, `per_kind!`); the
//! tests of errors, settings and URLs alone do not take a lock. Kind-specific: the halves of a
//! read-write lock read the `mode` field in `is_locked` and `force_unlock`, so on a key of
//! another type those report `WrongType` where the other kinds run `EXISTS` / `DEL`; "another
//! type" is a string or a list for the hash kinds, a hash or a list for the token lock (a
//! string is its own type), and a token lock whose key became a hash finds its value gone
//! (`NotHeld`) rather than a wrong type; only the hash kinds have the per-owner queries
//! (`hold_count`, `is_held_by`); the grants and releases the stalled-Redis tests count are made
//! of different commands per kind (`common::Writes`); waiters behind a holder wait behind the
//! kind's rival (`Kind::rival`: a writer when they read); the fenced lock's token counter stays
//! (`Kind::lasting_keys`).
//!
//! The semaphores and the latch (`common::Primitive`, `per_primitive!`): every operation on a
//! key of another type, against an unreachable server and after shutdown fails the same way as
//! the locks' do.

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{
    Foreign, Kind, Paused, Primitive, RedisServer, State, Writes, client, command_stats, dbsize,
    dead_port, describe_keys, exists, hash, per_kind, per_primitive, pttl, reset_stats, state,
    unique_name,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{BuildError, Client, Error, LockOptions, Owner, Ttl};
use tokio::time::timeout;

/// Generous bound for anything that should be prompt (2 cores, tests in parallel).
const PROMPT: Duration = Duration::from_secs(5);

#[test]
fn errors_are_std_errors_that_cross_threads() {
    fn require<T: std::error::Error + Send + Sync + 'static>() {}
    require::<Error>();
    require::<BuildError>();
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(Error::Shutdown);
    assert_eq!(boxed.to_string(), "the client has been shut down");
    assert!(boxed.source().is_none());
}

// ---------------------------------------------------------------------------------------------
// Unlock by a non-holder
// ---------------------------------------------------------------------------------------------

per_kind!(#[tokio::test] async fn unlock_by_a_non_holder_is_not_held_and_changes_nothing);

/// A guard whose hold was taken over (force-unlocked, then locked by another client) fails to
/// unlock with `NotHeld` naming the lock and its own holder field, and leaves the new holder's
/// hold exactly as it was.
async fn unlock_by_a_non_holder_is_not_held_and_changes_nothing(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = client(&server);
    let b = client(&server);
    let name = unique_name("errors-notheld");

    let guard_a = kind.any(&a, &name).lock().await.unwrap();
    let holder_a = kind.field(&a, guard_a.owner());
    assert!(kind.any(&b, &name).force_unlock().await.unwrap());
    let guard_b = kind
        .any(&b, &name)
        .lock_with_options(&LockOptions::new().lease(Duration::from_secs(20)))
        .await
        .unwrap();
    let holder_b = kind.field(&b, guard_b.owner());
    let before = state(&mut raw, &name).await;
    assert_eq!(before, kind.state_of(&holder_b, 1));
    let ttl_before = pttl(&mut raw, &name).await;

    let err = guard_a.unlock().await.unwrap_err();
    match &err {
        Error::NotHeld { name: n, holder } => {
            assert_eq!(n, &name);
            assert_eq!(holder, &holder_a);
        }
        other => panic!("expected NotHeld, got {other:?}"),
    }
    assert!(err.is_not_held());
    assert!(!err.is_timeout() && !err.is_shutdown());
    let text = err.to_string();
    assert!(text.contains(&name), "{text}");
    assert!(text.contains(&holder_a), "{text}");

    // B's hold is untouched: same field, same count, TTL not reset or removed.
    assert_eq!(state(&mut raw, &name).await, before);
    let ttl_after = pttl(&mut raw, &name).await;
    assert!(
        ttl_after <= ttl_before && ttl_after > ttl_before - 2_000,
        "TTL {ttl_before} -> {ttl_after}"
    );
    guard_b.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    a.shutdown().await;
    b.shutdown().await;
}

per_kind!(#[tokio::test] async fn unlock_after_the_lease_expired_is_not_held);

/// A hold whose explicit lease expired: `NotHeld`, and the release does not recreate the key.
async fn unlock_after_the_lease_expired_is_not_held(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("errors-expired");
    let guard = kind
        .any(&client, &name)
        .lock_with_options(&LockOptions::new().lease(Duration::from_millis(100)))
        .await
        .unwrap();
    let holder = kind.field(&client, guard.owner());
    timeout(PROMPT, async {
        while exists(&mut raw, &name).await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the lease expires");
    match guard.unlock().await {
        Err(Error::NotHeld { name: n, holder: h }) => {
            assert_eq!(n, name);
            assert_eq!(h, holder);
        }
        other => panic!("expected NotHeld, got {other:?}"),
    }
    assert!(!exists(&mut raw, &name).await);
    client.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// A lock name holding another Redis type
// ---------------------------------------------------------------------------------------------

fn assert_wrong_type<T: std::fmt::Debug>(op: &str, r: Result<T, Error>, name: &str) {
    match r {
        Err(Error::WrongType { key }) => {
            assert_eq!(key, name, "{op}");
            let text = Error::WrongType { key }.to_string();
            assert!(text.contains(name), "{op}: {text}");
        }
        other => panic!("{op}: expected WrongType, got {other:?}"),
    }
}

per_kind!(#[tokio::test] async fn a_key_of_another_type_is_wrong_type_naming_the_key);

async fn a_key_of_another_type_is_wrong_type_naming_the_key(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let foreign = kind.foreign_types();
    let names = foreign.map(|f| unique_name(&format!("errors-{f:?}")));
    for (f, name) in foreign.iter().zip(&names) {
        f.write(&mut raw, name).await;
    }
    let opts = LockOptions::new()
        .lease(Duration::from_secs(5))
        .owner(Owner::new(3));

    for (f, name) in foreign.iter().zip(&names) {
        let lock = kind.any(&client, name);
        assert_wrong_type("lock", lock.lock().await, name);
        assert_wrong_type(
            "lock_with_options",
            lock.lock_with_options(&opts).await,
            name,
        );
        assert_wrong_type("try_lock", lock.try_lock().await, name);
        assert_wrong_type(
            "try_lock_for",
            lock.try_lock_for(Duration::from_millis(500)).await,
            name,
        );
        assert_wrong_type(
            "try_lock_with_options",
            lock.try_lock_with_options(Duration::ZERO, &opts).await,
            name,
        );
        // (The token lock has no per-owner queries.)
        if kind.counts_holds() {
            assert_wrong_type("is_held_by", lock.is_held_by(Owner::current()).await, name);
            assert_wrong_type("hold_count", lock.hold_count(Owner::current()).await, name);
        }
        // EXISTS and PTTL work on any type, as with Redisson's isLocked/remainTimeToLive. The
        // halves' `is_locked` reads the `mode` field instead (a script for the read half,
        // `HGET` for the write half, as Redisson's): WRONGTYPE.
        if kind.reads_mode() {
            assert_wrong_type("is_locked", lock.is_locked().await, name);
        } else {
            assert!(lock.is_locked().await.unwrap(), "{kind}");
        }
        match (f, lock.remaining_ttl().await.unwrap()) {
            (Foreign::String | Foreign::List, ttl) => assert_eq!(ttl, Ttl::Persistent),
            (Foreign::Hash, Ttl::Remaining(left)) => {
                assert!(left <= Duration::from_secs(20), "{left:?}");
            }
            (Foreign::Hash, other) => panic!("{kind}: the foreign hash's TTL: {other:?}"),
        }
    }

    // Both keys are exactly as they were.
    for (f, name) in foreign.iter().zip(&names) {
        f.assert_unchanged(&mut raw, name).await;
    }
    assert_eq!(dbsize(&mut raw).await, 2, "nothing else was written");
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn force_unlock_deletes_a_key_of_any_type_like_redisson);

/// `force_unlock` is a plain `DEL`, like Redisson's `forceUnlock()`: it deletes a key of any
/// type (and publishes the unlock message). Documented here so a change is noticed. The fair
/// kinds' is a `DEL` too (after their stale-waiter purge), and so is the spin and the token
/// lock's. The halves of a read-write lock delete the lock only in their own mode, which they
/// read first (`HGET mode`, as Redisson's scripts do): on a key of another type that is
/// WRONGTYPE, and the key stays.
async fn force_unlock_deletes_a_key_of_any_type_like_redisson(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("errors-force-foreign");
    let [foreign, _] = kind.foreign_types();
    foreign.write(&mut raw, &name).await;
    if kind.reads_mode() {
        let r = kind.any(&client, &name).force_unlock().await;
        assert_wrong_type("force_unlock", r, &name);
        foreign.assert_unchanged(&mut raw, &name).await;
    } else {
        assert!(kind.any(&client, &name).force_unlock().await.unwrap());
        assert!(!exists(&mut raw, &name).await);
    }
    client.shutdown().await;
}

per_kind!(#[tokio::test] async fn releasing_a_lock_whose_key_changed_type_is_wrong_type);

/// The key of a held lock is replaced by another type behind the holder's back: the release
/// reports `WrongType` and leaves the foreign value alone. (The token lock's release is a
/// compare-and-delete that takes a key of another type for another holder's: `NotHeld`, and the
/// foreign key is left alone too.)
async fn releasing_a_lock_whose_key_changed_type_is_wrong_type(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("errors-replaced");
    let guard = kind
        .any(&client, &name)
        .lock_with_options(&LockOptions::new().lease(Duration::from_secs(10)))
        .await
        .unwrap();
    let holder = guard.holder().to_owned();
    let () = raw.del(&name).await.unwrap();
    let [foreign, _] = kind.foreign_types();
    foreign.write(&mut raw, &name).await;
    if kind.counts_holds() {
        assert_wrong_type("unlock", guard.unlock().await, &name);
    } else {
        match guard.unlock().await {
            Err(Error::NotHeld { name: n, holder: h }) => {
                assert_eq!(n, name);
                assert_eq!(h, holder);
            }
            other => panic!("expected NotHeld, got {other:?}"),
        }
    }
    foreign.assert_unchanged(&mut raw, &name).await;
    client.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Zero durations and invalid settings
// ---------------------------------------------------------------------------------------------

per_kind!(#[tokio::test] async fn zero_and_sub_millisecond_leases_are_invalid_arguments);

async fn zero_and_sub_millisecond_leases_are_invalid_arguments(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("errors-lease");
    let lock = kind.any(&client, &name);
    // Zero, under a millisecond, and past what Redis's PEXPIRE accepts (it would fail after the
    // HINCRBY and leave a hash without TTL), up to the longest `Duration`.
    let too_long = Duration::from_millis((1 << 62) + 1);
    for lease in [
        Duration::ZERO,
        Duration::from_micros(500),
        Duration::from_micros(999),
        too_long,
        Duration::MAX,
    ] {
        let opts = LockOptions::new().lease(lease);
        let results = [
            lock.lock_with_options(&opts).await.map(|_| ()),
            lock.try_lock_with_options(Duration::ZERO, &opts)
                .await
                .map(|_| ()),
            lock.try_lock_with_options(Duration::from_secs(1), &opts)
                .await
                .map(|_| ()),
        ];
        for r in results {
            match r {
                Err(Error::InvalidArgument(msg)) => {
                    assert!(msg.contains("lease"), "{msg}");
                    assert!(msg.contains(&format!("{lease:?}")), "{msg}");
                }
                other => panic!("lease {lease:?}: expected InvalidArgument, got {other:?}"),
            }
        }
    }
    assert!(!exists(&mut raw, &name).await);
    assert_eq!(dbsize(&mut raw).await, 0, "nothing written to Redis");
    // Refused before anything was sent: no script ran.
    assert_eq!(command_stats(&mut raw, "evalsha").await.calls, 0);
    assert_eq!(command_stats(&mut raw, "eval").await.calls, 0);
    // 1 ms is the smallest lease, 2^62 ms the longest.
    let g = lock
        .lock_with_options(&LockOptions::new().lease(Duration::from_millis(1 << 62)))
        .await
        .unwrap();
    // (The read half's marker key carries the lease too.)
    for key in kind.hold_keys(&name, &kind.field(&client, g.owner()), 1) {
        assert!(pttl(&mut raw, &key).await > 1 << 61, "{key}");
    }
    g.unlock().await.unwrap();
    // A 1 ms lease is accepted: granted, or (on a loaded machine, where the reply takes longer
    // than the lease) every grant given back as late, never refused as an invalid argument.
    match lock
        .lock_with_options(&LockOptions::new().lease(Duration::from_millis(1)))
        .await
    {
        Ok(g) => g.forget(),
        Err(Error::LateGrants { lease, .. }) => assert_eq!(lease, Duration::from_millis(1)),
        Err(e) => panic!("a 1 ms lease: {e:?}"),
    }
    client.shutdown().await;
}

#[tokio::test]
async fn the_builder_rejects_zero_settings_naming_the_field() {
    type Setter = fn(redisson_sync::ClientBuilder) -> redisson_sync::ClientBuilder;
    let cases: [(&str, Setter); 6] = [
        ("watchdog_timeout", |b| b.watchdog_timeout(Duration::ZERO)),
        ("recheck_interval", |b| b.recheck_interval(Duration::ZERO)),
        ("command_timeout", |b| b.command_timeout(Duration::ZERO)),
        ("connect_timeout", |b| b.connect_timeout(Duration::ZERO)),
        ("pool_size", |b| b.pool_size(0)),
        ("watchdog_batch_size", |b| b.watchdog_batch_size(0)),
    ];
    for (field, set) in cases {
        let builder = set(Client::builder().url("redis://127.0.0.1:1"));
        match builder.build() {
            Err(BuildError::InvalidConfig(msg)) => {
                assert!(msg.contains(field), "{field}: {msg}");
                // The other fields are fine: the message names only the bad one.
                for (other, _) in cases.iter().filter(|(f, _)| *f != field) {
                    if !field.contains(other) && !other.contains(field) {
                        assert!(!msg.contains(other), "{field}: {msg}");
                    }
                }
            }
            other => panic!("{field}: expected InvalidConfig, got {other:?}"),
        }
    }
    // A watchdog timeout too short to renew (under 3 ms: renewal every timeout / 3).
    match Client::builder()
        .watchdog_timeout(Duration::from_millis(2))
        .build()
    {
        Err(BuildError::InvalidConfig(msg)) => assert!(msg.contains("watchdog_timeout"), "{msg}"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unparsable_url_is_a_url_error() {
    for url in ["not a url", "http://127.0.0.1:6379", ""] {
        match Client::open(url) {
            Err(e @ BuildError::Url(_)) => {
                assert!(e.to_string().contains("URL"), "{e}");
                assert!(std::error::Error::source(&e).is_some());
            }
            other => panic!("{url:?}: expected BuildError::Url, got {other:?}"),
        }
    }
}

#[test]
fn building_outside_a_runtime_is_no_runtime() {
    match Client::open("redis://127.0.0.1:6379") {
        Err(e @ BuildError::NoRuntime) => assert!(e.to_string().contains("runtime"), "{e}"),
        other => panic!("expected NoRuntime, got {other:?}"),
    }
    // With an explicit runtime handle, building outside it works.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = Client::builder()
        .url("redis://127.0.0.1:6379")
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    rt.block_on(client.shutdown());
}

// ---------------------------------------------------------------------------------------------
// Redis unreachable
// ---------------------------------------------------------------------------------------------

fn assert_unreachable<T: std::fmt::Debug>(op: &str, r: Result<T, Error>) -> Error {
    match r {
        Err(e @ Error::Connection { .. }) => {
            let source = std::error::Error::source(&e).expect("connection errors have a source");
            assert!(!source.to_string().is_empty());
            assert!(
                e.to_string().contains("connection to Redis at"),
                "{op}: {e}"
            );
            assert!(e.is_transient(), "{op}: {e}");
            e
        }
        Err(e @ Error::Timeout { .. }) => {
            assert!(e.is_timeout());
            e
        }
        other => panic!("{op}: expected Connection or Timeout, got {other:?}"),
    }
}

per_kind!(#[tokio::test] async fn unreachable_redis_fails_within_bounds);

/// Nothing listens on the port: every operation that does not wait fails (it does not hang,
/// and contention is not reported), within its bound. (Waiting ones retry until their wait
/// ends: tests/unreachable.rs.)
async fn unreachable_redis_fails_within_bounds(kind: Kind) {
    let command_timeout = Duration::from_millis(1_000);
    let connect_timeout = Duration::from_millis(500);
    let client = Client::builder()
        .url(format!("redis://127.0.0.1:{}", dead_port()))
        .command_timeout(command_timeout)
        .connect_timeout(connect_timeout)
        .build()
        .unwrap();
    let lock = kind.any(&client, &unique_name("errors-unreachable"));
    let bound = command_timeout + connect_timeout + Duration::from_millis(500);

    let t = Instant::now();
    let e = assert_unreachable("try_lock", lock.try_lock().await);
    assert!(t.elapsed() < bound, "try_lock took {:?}", t.elapsed());
    // A refused connection is reported as such (with the driver's error as the source), not as
    // a timeout or as contention.
    match &e {
        Error::Connection { source, .. } => {
            assert!(source.is_connection_refusal(), "{source:?}");
        }
        other => panic!("expected the connection refusal, got {other:?}"),
    }
    assert!(!e.is_timeout());

    let t = Instant::now();
    assert_unreachable("is_locked", lock.is_locked().await);
    assert_unreachable("force_unlock", lock.force_unlock().await);
    if kind.counts_holds() {
        assert_unreachable("hold_count", lock.hold_count(Owner::current()).await);
    }
    assert_unreachable("remaining_ttl", lock.remaining_ttl().await);
    assert!(t.elapsed() < bound * 4, "queries took {:?}", t.elapsed());

    // Shutdown is not held up by the failed operations.
    timeout(PROMPT, client.shutdown()).await.unwrap();
}

per_kind!(at_once current_thread, async fn a_server_that_never_answers_times_out_within_bounds);

/// Something accepts connections but never answers (a listener that never reads): the
/// operations time out instead of hanging.
async fn a_server_that_never_answers_times_out_within_bounds(kind: Kind) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let client = Client::builder()
        .url(format!("redis://127.0.0.1:{port}"))
        .command_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let lock = kind.any(&client, &unique_name("errors-blackhole"));

    let t = Instant::now();
    let r = lock.try_lock_for(Duration::from_millis(300)).await;
    let elapsed = t.elapsed();
    assert!(matches!(&r, Err(e) if e.is_timeout()), "{r:?}");
    assert!(
        elapsed < Duration::from_secs(1),
        "try_lock_for took {elapsed:?}"
    );

    let t = Instant::now();
    let r = lock.lock().await;
    let elapsed = t.elapsed();
    assert!(matches!(&r, Err(e) if e.is_timeout()), "{r:?}");
    assert!(elapsed < Duration::from_secs(2), "lock took {elapsed:?}");

    let t = Instant::now();
    let r = lock.is_locked().await;
    assert!(matches!(&r, Err(e) if e.is_timeout()), "{r:?}");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "is_locked took {:?}",
        t.elapsed()
    );

    timeout(PROMPT, client.shutdown()).await.unwrap();
    drop(listener);
}

// ---------------------------------------------------------------------------------------------
// Redis stalled (SIGSTOP)
// ---------------------------------------------------------------------------------------------

/// Waits (bounded) until Redis has run the acquire that was queued while it was stalled (its
/// grant shows in `INFO commandstats`, reset before the stall: see `common::Writes`), then
/// requires
/// the lock key to be gone within a bounded time: the client must undo a grant nobody received.
async fn assert_no_stale_hold(kind: Kind, raw: &mut MultiplexedConnection, name: &str) {
    timeout(PROMPT, async {
        while !Writes::read(kind, raw).await.granted(1) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("Redis ran the queued acquire after resuming");
    let gone = timeout(Duration::from_secs(3), async {
        while exists(raw, name).await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "stale hold: {:?} (pttl {} ms); an acquire that timed out on the client was granted by \
         Redis after it resumed and never undone",
        state(raw, name).await,
        pttl(raw, name).await
    );
}

per_kind!(at_once multi_thread(2), async fn try_lock_for_returns_within_its_wait_while_redis_is_stalled);

/// A `try_lock_for` against a stalled Redis returns `Err(Timeout)` within its wait plus a small
/// bound, with a pooled connection and with a fresh client alike. The acquires that Redis runs
/// once it resumes are undone: no stale hold remains, and the lock is usable again.
async fn try_lock_for_returns_within_its_wait_while_redis_is_stalled(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let pooled = Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    // Warm up: a pooled connection exists and the scripts are loaded (the fair lock's
    // `try_lock` has a script of its own: an attempt whose EVALSHA met NOSCRIPT after the
    // stall never ran, and its fence would stay for its TTL).
    let warm = kind.any(&pooled, &unique_name("errors-warm"));
    let g = warm.lock().await.unwrap();
    g.unlock().await.unwrap();
    let g = warm.try_lock().await.unwrap().expect("free");
    g.unlock().await.unwrap();
    let fresh = Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let (n1, n2, n3) = (
        unique_name("errors-stall-pooled"),
        unique_name("errors-stall-fresh"),
        unique_name("errors-stall-try"),
    );
    reset_stats(&mut raw).await;

    {
        let _paused = Paused::pause(&server);
        let wait = Duration::from_millis(300);

        let t = Instant::now();
        let r = kind.any(&pooled, &n1).try_lock_for(wait).await;
        let elapsed = t.elapsed();
        match &r {
            Err(e @ Error::Timeout { operation, .. }) => {
                assert_eq!(*operation, "acquire");
                assert!(e.is_timeout());
                assert!(e.to_string().contains("acquire"), "{e}");
            }
            other => panic!("expected Timeout, got {other:?}"),
        }
        assert!(elapsed >= wait, "gave up early: {elapsed:?}");
        assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");

        let t = Instant::now();
        let r = kind.any(&fresh, &n2).try_lock_for(wait).await;
        let elapsed = t.elapsed();
        assert!(matches!(&r, Err(Error::Timeout { .. })), "fresh: {r:?}");
        assert!(elapsed < Duration::from_secs(1), "fresh took {elapsed:?}");

        // try_lock() has no wait: its one attempt is bounded by the command timeout (3 s).
        let t = Instant::now();
        let r = kind.any(&pooled, &n3).try_lock().await;
        let elapsed = t.elapsed();
        assert!(matches!(&r, Err(Error::Timeout { .. })), "try_lock: {r:?}");
        assert!(
            elapsed >= Duration::from_secs(3) && elapsed < Duration::from_secs(4),
            "try_lock took {elapsed:?}"
        );
    }

    // Redis runs the queued acquires now; each grant is undone by the client. The acquire sent
    // on the pooled connection runs for sure; the others needed a new connection, whose
    // handshake stalled too and may have timed out (then their script was never sent). Wait
    // until the first acquire and its undo ran (for the lock, two HINCRBY: see `Writes`), let
    // the rest settle, then check that every acquire that ran was undone and nothing is held.
    timeout(PROMPT, async {
        while !Writes::read(kind, &mut raw).await.granted_and_undone() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("Redis ran the queued acquire and the client undid its grant");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let writes = Writes::read(kind, &mut raw).await;
    assert!(writes.all_undone(), "every grant undone: {writes:?}");
    for name in [&n1, &n2, &n3] {
        assert!(!exists(&mut raw, name).await, "stale hold on {name}");
    }
    // Only the fenced lock's token counters stay: the warm-up's and the pooled acquire's for
    // sure, the others' if their acquire was sent.
    let keys = common::all_keys(&mut raw).await;
    let sure: Vec<String> = [warm.name(), &n1]
        .iter()
        .flat_map(|n| kind.lasting_keys(n))
        .collect();
    let maybe: Vec<String> = [&n2, &n3]
        .iter()
        .flat_map(|n| kind.lasting_keys(n))
        .collect();
    assert!(
        sure.iter().all(|k| keys.contains(k))
            && keys.iter().all(|k| sure.contains(k) || maybe.contains(k)),
        "keys left: {:?}",
        describe_keys(&mut raw).await
    );

    // Usable again, by both clients.
    let g = kind
        .any(&pooled, &n1)
        .try_lock()
        .await
        .unwrap()
        .expect("free");
    assert_eq!(
        state(&mut raw, &n1).await,
        kind.hold_state(&pooled, g.owner(), 1)
    );
    g.unlock().await.unwrap();
    let g = kind.any(&fresh, &n2).lock().await.unwrap();
    g.unlock().await.unwrap();
    pooled.shutdown().await;
    fresh.shutdown().await;
}

/// A client with a short command timeout, a pooled connection and the scripts of `kind` loaded,
/// with the server's command statistics reset.
async fn warm_client(
    kind: Kind,
    server: &RedisServer,
    raw: &mut MultiplexedConnection,
    command_timeout: Duration,
) -> Client {
    let client = Client::builder()
        .url(server.url())
        .command_timeout(command_timeout)
        .watchdog_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let g = kind
        .any(&client, &unique_name("errors-warm"))
        .lock()
        .await
        .unwrap();
    g.unlock().await.unwrap();
    reset_stats(raw).await;
    client
}

/// A stalled call fails with `Error::Timeout` naming the operation and the command timeout,
/// whichever timer fires first (the crate's own or the driver's response timeout).
fn assert_command_timeout<T: std::fmt::Debug>(
    op: &'static str,
    r: &Result<T, Error>,
    command_timeout: Duration,
) {
    match r {
        Err(e @ Error::Timeout { operation, after }) => {
            assert_eq!(*operation, op);
            assert_eq!(*after, command_timeout);
            assert!(e.is_timeout());
        }
        other => panic!("{op}: expected Error::Timeout, got {other:?}"),
    }
}

per_kind!(at_once multi_thread(2), async fn lock_times_out_while_redis_is_stalled);

/// `lock()` (no wait limit) and the queries against a stalled Redis fail with a timeout after
/// the command timeout instead of hanging; the client works again once Redis resumes.
async fn lock_times_out_while_redis_is_stalled(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let command_timeout = Duration::from_millis(500);
    let client = warm_client(kind, &server, &mut raw, command_timeout).await;
    let lock = kind.any(&client, &unique_name("errors-stall-lock"));

    {
        let _paused = Paused::pause(&server);
        let t = Instant::now();
        let r = lock.lock().await;
        let elapsed = t.elapsed();
        assert_command_timeout("acquire", &r, command_timeout);
        assert!(elapsed >= command_timeout, "gave up early: {elapsed:?}");
        assert!(elapsed < Duration::from_millis(1_500), "took {elapsed:?}");

        for (op, r) in [
            ("is_locked", lock.is_locked().await.map(|_| ())),
            ("remaining_ttl", lock.remaining_ttl().await.map(|_| ())),
            ("force_unlock", lock.force_unlock().await.map(|_| ())),
        ] {
            assert_command_timeout(
                if op == "force_unlock" {
                    "force_unlock"
                } else {
                    op
                },
                &r,
                command_timeout,
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(4),
            "took {:?}",
            t.elapsed()
        );
    }

    // The client recovers: another lock works at once (a grant of the timed-out acquire is
    // undone, see the next test).
    let other = kind.any(&client, &unique_name("errors-stall-other"));
    let g = timeout(PROMPT, other.lock()).await.unwrap().unwrap();
    if kind.counts_holds() {
        assert!(other.is_held_by(g.owner()).await.unwrap());
    }
    assert_eq!(
        state(&mut raw, other.name()).await,
        kind.hold_state(&client, g.owner(), 1)
    );
    g.unlock().await.unwrap();
    timeout(PROMPT, lock.is_locked()).await.unwrap().unwrap();
    client.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn a_timed_out_lock_leaves_no_stale_hold);

/// The acquire of a `lock()` that timed out during the stall is run by Redis once it resumes.
/// Nobody received that grant, so the client must undo it; otherwise the lock stays held by a
/// phantom holder for a whole lease (here 30 s), and a re-entrant attempt would leave the
/// owner's count one too high.
async fn a_timed_out_lock_leaves_no_stale_hold(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let command_timeout = Duration::from_millis(500);
    let client = warm_client(kind, &server, &mut raw, command_timeout).await;
    let name = unique_name("errors-stale-lock");
    let lock = kind.any(&client, &name);
    {
        let _paused = Paused::pause(&server);
        let r = lock.lock().await;
        assert_command_timeout("acquire", &r, command_timeout);
    }
    assert_no_stale_hold(kind, &mut raw, &name).await;

    // Usable again, at once.
    let g = timeout(PROMPT, lock.lock()).await.unwrap().unwrap();
    assert_eq!(
        state(&mut raw, &name).await,
        kind.hold_state(&client, g.owner(), 1)
    );
    g.unlock().await.unwrap();
    client.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn an_abandoned_try_lock_for_leaves_no_stale_hold_after_a_long_stall);

/// Same for a `try_lock_for` that gave up at its deadline while the stall outlasted the command
/// timeout: the attempt's task keeps waiting for the reply (up to the lease), so a grant Redis
/// makes after the stall is still undone.
async fn an_abandoned_try_lock_for_leaves_no_stale_hold_after_a_long_stall(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let command_timeout = Duration::from_millis(400);
    let client = warm_client(kind, &server, &mut raw, command_timeout).await;
    let name = unique_name("errors-stale-try");
    let lock = kind.any(&client, &name);
    {
        let _paused = Paused::pause(&server);
        let t = Instant::now();
        let r = lock.try_lock_for(Duration::from_millis(200)).await;
        assert!(matches!(&r, Err(e) if e.is_timeout()), "{r:?}");
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "took {:?}",
            t.elapsed()
        );
        // Stall well past the command timeout.
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
    assert_no_stale_hold(kind, &mut raw, &name).await;
    let g = timeout(PROMPT, lock.lock()).await.unwrap().unwrap();
    g.unlock().await.unwrap();
    client.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Use after shutdown
// ---------------------------------------------------------------------------------------------

fn assert_shutdown<T: std::fmt::Debug>(op: &str, r: Result<T, Error>) {
    match r {
        Err(e @ Error::Shutdown) => {
            assert!(e.is_shutdown(), "{op}");
            assert!(!e.is_timeout() && !e.is_not_held(), "{op}");
        }
        other => panic!("{op}: expected Shutdown, got {other:?}"),
    }
}

per_kind!(#[tokio::test] async fn every_operation_after_shutdown_is_shutdown);

async fn every_operation_after_shutdown_is_shutdown(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("errors-shutdown");
    let lock = kind.any(&client, &name);
    let held = lock
        .lock_with_options(&LockOptions::new().lease(Duration::from_secs(20)))
        .await
        .unwrap();
    let before = state(&mut raw, &name).await;
    assert_eq!(before, kind.hold_state(&client, held.owner(), 1));
    assert!(!client.is_shut_down());
    client.shutdown().await;
    assert!(client.is_shut_down());
    assert!(client.clone().is_shut_down(), "clones share the state");

    let opts = LockOptions::new().lease(Duration::from_secs(1));
    assert_shutdown("lock", lock.lock().await);
    assert_shutdown("lock_with_options", lock.lock_with_options(&opts).await);
    assert_shutdown("try_lock", lock.try_lock().await);
    assert_shutdown(
        "try_lock_for",
        lock.try_lock_for(Duration::from_secs(1)).await,
    );
    assert_shutdown(
        "try_lock_with_options",
        lock.try_lock_with_options(Duration::ZERO, &opts).await,
    );
    assert_shutdown("force_unlock", lock.force_unlock().await);
    assert_shutdown("is_locked", lock.is_locked().await);
    if kind.counts_holds() {
        assert_shutdown("is_held_by", lock.is_held_by(Owner::current()).await);
        assert_shutdown("hold_count", lock.hold_count(Owner::current()).await);
    }
    assert_shutdown("remaining_ttl", lock.remaining_ttl().await);
    assert_shutdown(
        "new lock handle",
        kind.any(&client, "other").try_lock().await,
    );
    // A guard taken before the shutdown cannot release any more; as documented, its lock stays
    // until its lease expires.
    assert_shutdown("guard.unlock", held.unlock().await);
    assert_eq!(state(&mut raw, &name).await, before);
    let ttl = pttl(&mut raw, &name).await;
    assert!((0..=20_000).contains(&ttl), "{ttl}");
    // Shutting down twice is fine.
    timeout(PROMPT, client.shutdown()).await.unwrap();
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn waiters_return_shutdown_when_the_client_shuts_down);

/// Waiters blocked when the client shuts down return `Shutdown` promptly.
async fn waiters_return_shutdown_when_the_client_shuts_down(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let holder = client(&server);
    let name = unique_name("errors-shutdown-waiters");
    // Readers share the lock: the read half's waiters wait behind a writer.
    let held = kind.rival().any(&holder, &name).lock().await.unwrap();

    let client = client(&server);
    let lock = kind.any(&client, &name);
    let blocking = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    let bounded = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock_for(Duration::from_secs(60)).await }
    });
    // Both are waiting (subscribed, asleep): give them time to get there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!blocking.is_finished() && !bounded.is_finished());

    let t = Instant::now();
    timeout(PROMPT, client.shutdown()).await.expect("shutdown");
    assert_shutdown(
        "blocked lock()",
        timeout(PROMPT, blocking).await.unwrap().unwrap(),
    );
    assert_shutdown(
        "try_lock_for(60 s)",
        timeout(PROMPT, bounded).await.unwrap().unwrap(),
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );

    // The holder (another client) is unaffected.
    assert_eq!(
        state(&mut raw, &name).await,
        kind.rival().hold_state(&holder, held.owner(), 1)
    );
    // The fair kinds' waiters left the queue (a waiter that leaves without the lock, also on
    // shutdown, runs the give-up cleanup).
    kind.wait_no_waiters(&mut raw, &name).await;
    held.unlock().await.unwrap();
    holder.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn shutdown_while_redis_is_stalled_returns_within_a_command_timeout);

/// `shutdown()` while Redis is stalled returns within about one command timeout, although an
/// abandoned acquire's task waits up to its lease (30 s here) for the reply it must undo.
async fn shutdown_while_redis_is_stalled_returns_within_a_command_timeout(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let command_timeout = Duration::from_millis(500);
    let client = warm_client(kind, &server, &mut raw, command_timeout).await;
    let lock = kind.any(&client, &unique_name("errors-stalled-shutdown"));
    let _paused = Paused::pause(&server);
    let r = lock.lock().await;
    assert_command_timeout("acquire", &r, command_timeout);
    let t = Instant::now();
    timeout(PROMPT, client.shutdown())
        .await
        .expect("shutdown returned");
    let took = t.elapsed();
    assert!(
        took < Duration::from_millis(1_500),
        "shutdown took {took:?} with a 500 ms command timeout"
    );
}

// ---------------------------------------------------------------------------------------------
// The semaphores and the latch
// ---------------------------------------------------------------------------------------------

per_primitive!(#[tokio::test] async fn a_key_of_another_type_fails_every_primitive_operation);

/// The name holds a lock hash: every operation of the primitive (its waiting acquire
/// included) fails at once with `WrongType` naming the key, which is left as it was.
async fn a_key_of_another_type_fails_every_primitive_operation(p: Primitive) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("errors-primitive-hash");
    let () = raw.hset(&name, "f", 1).await.unwrap();
    for (op, call) in p.operations(&client, &name) {
        let r = timeout(PROMPT, call)
            .await
            .unwrap_or_else(|_| panic!("{p}: {op} did not return"));
        assert_wrong_type(op, r, &name);
    }
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![("f".to_owned(), "1".to_owned())]
    );
    assert_eq!(pttl(&mut raw, &name).await, -1);
    assert_eq!(dbsize(&mut raw).await, 1, "nothing else was written");
    client.shutdown().await;
}

per_primitive!(#[tokio::test] async fn an_unreachable_redis_fails_every_primitive_operation_within_bounds);

/// Nothing listens on the port: every operation that does not wait fails (not as contention)
/// with a connection error or a timeout, within its bound. The waiting ones (`acquire`,
/// `try_acquire_for`, `await_open`, `await_for`) retry until their wait ends:
/// tests/unreachable.rs.
async fn an_unreachable_redis_fails_every_primitive_operation_within_bounds(p: Primitive) {
    let command_timeout = Duration::from_millis(1_000);
    let connect_timeout = Duration::from_millis(500);
    let client = Client::builder()
        .url(format!("redis://127.0.0.1:{}", dead_port()))
        .command_timeout(command_timeout)
        .connect_timeout(connect_timeout)
        .build()
        .unwrap();
    let name = unique_name("errors-primitive-unreachable");
    let bound = command_timeout + connect_timeout + Duration::from_millis(500);
    const WAITING: [&str; 4] = ["acquire", "try_acquire_for", "await_open", "await_for"];
    let operations = p.operations(&client, &name);
    assert!(operations.iter().any(|(op, _)| !WAITING.contains(op)));
    for (op, call) in operations {
        if WAITING.contains(&op) {
            continue;
        }
        let t = Instant::now();
        assert_unreachable(op, call.await);
        assert!(t.elapsed() < bound, "{p}: {op} took {:?}", t.elapsed());
    }
    timeout(PROMPT, client.shutdown()).await.unwrap();
}

per_primitive!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn every_primitive_operation_after_shutdown_is_shutdown);

/// Waiters of a closed primitive return `Shutdown` promptly when their client shuts down; from
/// then on every operation is `Shutdown`, and the primitive is left as it was.
async fn every_primitive_operation_after_shutdown_is_shutdown(p: Primitive) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("errors-primitive-shutdown");
    p.close(&client, &name).await;
    let waiting = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { p.acquire(&client, &name).await.map(drop) })
    };
    let bounded = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move {
            p.try_acquire_for(&client, &name, Duration::from_secs(60))
                .await
                .map(drop)
        })
    };
    p.wait_parked(&mut raw, &name, 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished() && !bounded.is_finished());

    let t = Instant::now();
    timeout(PROMPT, client.shutdown()).await.expect("shutdown");
    assert_shutdown(
        "waiting acquire",
        timeout(PROMPT, waiting).await.unwrap().unwrap(),
    );
    assert_shutdown(
        "bounded acquire",
        timeout(PROMPT, bounded).await.unwrap().unwrap(),
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );

    for (op, call) in p.operations(&client, &name) {
        assert_shutdown(op, call.await);
    }
    p.assert_only(&mut raw, &name, &p.closed_state()).await;
    assert_ne!(p.closed_state(), State::Absent);
}
