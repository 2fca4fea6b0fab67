//! `with_lock` and the Java-style shortcuts: a section run under a lock always releases it,
//! after its value, after its error, after a panic and after cancellation; `stop_on_lost` stops
//! a section whose lock was force-unlocked from outside; `try_with_lock` with a bounded wait;
//! the lease shortcuts' TTLs; the `DistributedLock` trait; `with_lock` on
//! `Box<dyn DistributedLock>` and `MultiLock`; the warning when the last client handle drops
//! with releases pending.
//!
//! Every test of a section runs once per lock kind (`common::Kind`, `per_kind!`), through the
//! kind's inherent `with_lock` methods (`common::AnyLock`). Kind-specific: a nested section of
//! the same owner re-enters a reentrant kind and is refused by the others (`Kind::reentry`);
//! the token lock has no per-owner queries; where a section must find the lock busy, it is held
//! by the kind's rival (the write half for the read half).

mod common;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{
    Kind, RedisServer, Reentry, client, client_with_watchdog, ms, per_kind, pttl, state,
    unique_name,
};
use redisson_sync::{
    Client, DistributedLock, Error, LockOptions, MultiLock, Owner, WithLockOptions,
};
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep, timeout};

/// Polls until `lock` is free; panics if it is still held after `within`. Returns how long it
/// took.
async fn wait_free(lock: &(impl DistributedLock + ?Sized), within: Duration) -> Duration {
    let start = Instant::now();
    while lock.is_locked().await.unwrap() {
        assert!(
            start.elapsed() < within,
            "{} still locked after {within:?}",
            lock.name()
        );
        sleep(ms(10)).await;
    }
    start.elapsed()
}

/// A section's own error type: the lock's errors convert into it.
#[derive(Debug)]
enum AppError {
    Lock(Error),
    Rejected(&'static str),
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        Self::Lock(e)
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lock(e) => write!(f, "lock: {e}"),
            Self::Rejected(why) => write!(f, "rejected: {why}"),
        }
    }
}

/// Sets its flag when dropped: tells whether a section's future was dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn releases_after_the_sections_value);

/// (A nested section of the same owner re-enters a reentrant kind; the kinds that refuse a
/// re-entry refuse it, converted into the section's error: `releases_after_the_sections_error`.)
async fn releases_after_the_sections_value(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("with-ok");
    let lock = kind.any(&client, &name);

    let probe = lock.clone();
    let (mut probe_raw, c, n) = (raw.clone(), client.clone(), name.clone());
    let value = lock
        .with_lock(|| async move {
            // The section runs as the caller's owner, with the lock held.
            if kind.counts_holds() {
                assert!(probe.is_held_by(Owner::current()).await?);
                assert_eq!(probe.hold_count(Owner::current()).await?, 1);
            }
            assert_eq!(
                state(&mut probe_raw, &n).await,
                kind.hold_state(&c, Owner::current(), 1)
            );
            Ok::<_, Error>(42)
        })
        .await
        .unwrap();
    assert_eq!(value, 42);
    // The release was awaited: free at once, not shortly after.
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(pttl(&mut raw, lock.name()).await, -2);

    if kind.reentrant() {
        // Reentrant: a nested section of the same owner re-enters.
        let inner = lock.clone();
        let depth = lock
            .with_lock(|| async move {
                inner
                    .with_lock(|| async { inner.hold_count(Owner::current()).await })
                    .await
            })
            .await
            .unwrap();
        assert_eq!(depth, 2);
    }
    assert!(!lock.is_locked().await.unwrap());
    client.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn releases_after_the_sections_error);

async fn releases_after_the_sections_error(kind: Kind) {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = kind.any(&client, &unique_name("with-err"));

    let ran = AtomicUsize::new(0);
    let result: Result<u32, AppError> = lock
        .with_lock(|| async {
            ran.fetch_add(1, Ordering::SeqCst);
            Err(AppError::Rejected("card declined"))
        })
        .await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    // The section's own error comes back as is.
    match result {
        Err(AppError::Rejected(why)) => assert_eq!(why, "card declined"),
        other => panic!("expected the section's error, got {other:?}"),
    }
    assert!(!lock.is_locked().await.unwrap());

    // A boxed error type works the same; the lock's errors convert into it.
    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    let result: Result<(), BoxError> = lock.with_lock(|| async { Err("boom".into()) }).await;
    assert_eq!(result.unwrap_err().to_string(), "boom");
    assert!(!lock.is_locked().await.unwrap());

    // An acquisition error is the lock's, converted: an invalid lease, and for the kinds that
    // refuse a re-entry a nested section of the same owner.
    let result: Result<(), AppError> = lock
        .with_lock_options(&WithLockOptions::new().lease(Duration::ZERO), || async {
            Ok(())
        })
        .await;
    assert!(
        matches!(result, Err(AppError::Lock(Error::InvalidArgument(_)))),
        "{result:?}"
    );
    if kind.reentry() == Reentry::Refused {
        let inner = lock.clone();
        let result: Result<(), AppError> = lock
            .with_lock(|| async move { inner.with_lock(|| async { Ok(()) }).await })
            .await;
        assert!(
            matches!(result, Err(AppError::Lock(Error::NotReentrant { .. }))),
            "{result:?}"
        );
    }
    assert!(!lock.is_locked().await.unwrap());
    client.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn releases_after_a_panic);

async fn releases_after_a_panic(kind: Kind) {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = kind.any(&client, &unique_name("with-panic"));

    let task = tokio::spawn({
        let lock = lock.clone();
        async move {
            lock.with_lock(|| async {
                let explode = true;
                if explode {
                    panic!("section panicked on purpose");
                }
                Ok::<_, Error>(())
            })
            .await
        }
    });
    let err = task.await.unwrap_err();
    assert!(err.is_panic());
    // The guard was dropped while unwinding: the release runs in the background.
    let took = wait_free(&*lock, Duration::from_secs(2)).await;
    assert!(took < Duration::from_secs(1), "freed after {took:?}");

    // The lock is usable again at once (no poisoning).
    let guard = lock
        .try_lock()
        .await
        .unwrap()
        .expect("free after the panic");
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn releases_after_cancellation);

/// (The blocker of a read section holds the write half.)
async fn releases_after_cancellation(kind: Kind) {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = kind.any(&client, &unique_name("with-cancel"));

    // An aborted task.
    let dropped = Arc::new(AtomicBool::new(false));
    let (entered_tx, entered_rx) = oneshot::channel();
    let task = tokio::spawn({
        let lock = lock.clone();
        let dropped = dropped.clone();
        async move {
            lock.with_lock(|| async move {
                let _flag = SetOnDrop(dropped);
                entered_tx.send(()).unwrap();
                std::future::pending::<()>().await;
                Ok::<_, Error>(())
            })
            .await
        }
    });
    entered_rx.await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert!(dropped.load(Ordering::SeqCst), "the section was dropped");
    wait_free(&*lock, Duration::from_secs(2)).await;

    // A timeout around the call, in the same task.
    let dropped = Arc::new(AtomicBool::new(false));
    let section_dropped = dropped.clone();
    let elapsed = timeout(
        ms(200),
        lock.with_lock(|| async move {
            let _flag = SetOnDrop(section_dropped);
            sleep(Duration::from_secs(30)).await;
            Ok::<_, Error>(())
        }),
    )
    .await;
    assert!(
        elapsed.is_err(),
        "the section should still have been running"
    );
    assert!(dropped.load(Ordering::SeqCst));
    wait_free(&*lock, Duration::from_secs(2)).await;

    // Cancelled while still waiting for the lock: nothing is left behind, the section never ran.
    let other = kind.rival().any(&client, lock.name());
    let blocker = tokio::spawn({
        let other = other.clone();
        async move {
            other
                .lock_with_lease(Duration::from_secs(30))
                .await
                .unwrap()
        }
    })
    .await
    .unwrap();
    let ran = AtomicBool::new(false);
    let waited = timeout(
        ms(200),
        lock.with_lock(|| async {
            ran.store(true, Ordering::SeqCst);
            Ok::<_, Error>(())
        }),
    )
    .await;
    assert!(waited.is_err());
    assert!(!ran.load(Ordering::SeqCst));
    blocker.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    client.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn stop_on_lost_cancels_the_section_when_force_unlocked);

/// The lock is force-unlocked from another client while the section runs: with `stop_on_lost`
/// the watchdog's next renewal (every 200 ms with a 600 ms watchdog timeout) finds it gone, the
/// section is dropped and `LeaseLost` returned.
async fn stop_on_lost_cancels_the_section_when_force_unlocked(kind: Kind) {
    let server = RedisServer::start();
    let holder = client_with_watchdog(&server, ms(600));
    let admin = client(&server);
    let name = unique_name("with-lost");
    let lock = kind.any(&holder, &name);

    let dropped = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let (entered_tx, entered_rx) = oneshot::channel();
    let run = tokio::spawn({
        let (dropped, finished) = (dropped.clone(), finished.clone());
        async move {
            let opts = WithLockOptions::new().stop_on_lost(true);
            lock.with_lock_options(&opts, || async move {
                let _flag = SetOnDrop(dropped);
                entered_tx.send(()).unwrap();
                sleep(Duration::from_secs(10)).await;
                finished.store(true, Ordering::SeqCst);
                Ok::<_, Error>("finished")
            })
            .await
        }
    });
    entered_rx.await.unwrap();
    // Past a renewal or two: the section is not stopped while the lock is held.
    sleep(ms(500)).await;
    assert!(!run.is_finished());

    let forced_at = Instant::now();
    assert!(kind.any(&admin, &name).force_unlock().await.unwrap());
    let result = timeout(Duration::from_secs(3), run)
        .await
        .expect("the section was not stopped")
        .unwrap();
    let after = forced_at.elapsed();
    match result {
        Err(Error::LeaseLost { name: lost }) => assert_eq!(lost, name),
        other => panic!("expected LeaseLost, got {other:?}"),
    }
    // Within about one renewal interval (200 ms), with room for a loaded machine.
    assert!(after < ms(700), "stopped {after:?} after the force unlock");
    assert!(dropped.load(Ordering::SeqCst));
    assert!(!finished.load(Ordering::SeqCst));
    // Nothing was written back.
    assert!(!kind.any(&admin, &name).is_locked().await.unwrap());
    holder.shutdown().await;
    admin.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn without_stop_on_lost_the_release_reports_the_loss);

/// Without `stop_on_lost` the section runs to its end, and the loss is reported by the release:
/// the section's value is replaced by `LeaseLost`.
async fn without_stop_on_lost_the_release_reports_the_loss(kind: Kind) {
    let server = RedisServer::start();
    let holder = client_with_watchdog(&server, ms(600));
    let admin = client(&server);
    let name = unique_name("with-lost-late");
    let lock = kind.any(&holder, &name);

    let finished = Arc::new(AtomicBool::new(false));
    let (entered_tx, entered_rx) = oneshot::channel();
    let run = tokio::spawn({
        let finished = finished.clone();
        async move {
            lock.with_lock(|| async move {
                entered_tx.send(()).unwrap();
                sleep(ms(800)).await;
                finished.store(true, Ordering::SeqCst);
                Ok::<_, Error>("finished")
            })
            .await
        }
    });
    entered_rx.await.unwrap();
    assert!(kind.any(&admin, &name).force_unlock().await.unwrap());
    let result = run.await.unwrap();
    assert!(finished.load(Ordering::SeqCst));
    assert!(
        matches!(&result, Err(Error::LeaseLost { name: lost }) if *lost == name),
        "{result:?}"
    );
    holder.shutdown().await;
    admin.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn stop_on_lost_with_an_explicit_lease);

/// An explicit lease shorter than the section, with `stop_on_lost`: stopped shortly before the
/// lease ends.
async fn stop_on_lost_with_an_explicit_lease(kind: Kind) {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = kind.any(&client, &unique_name("with-lease-lost"));

    let opts = WithLockOptions::new().lease(ms(400)).stop_on_lost(true);
    let start = Instant::now();
    let result = lock
        .with_lock_options(&opts, || async {
            sleep(Duration::from_secs(10)).await;
            Ok::<_, Error>(())
        })
        .await;
    let took = start.elapsed();
    assert!(matches!(result, Err(Error::LeaseLost { .. })), "{result:?}");
    // Validity ends shortly (1 % + 2 ms) before the lease.
    assert!(took >= ms(300) && took < ms(1000), "stopped after {took:?}");
    assert!(!lock.is_locked().await.unwrap());
    client.shutdown().await;
}

per_kind!(at_once multi_thread(2), async fn try_with_lock_waits_at_most_its_wait);

/// (Held elsewhere: by the kind's rival, the write half when the section reads.)
async fn try_with_lock_waits_at_most_its_wait(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (a, b) = (client(&server), client(&server));
    let name = unique_name("with-try");
    let lock = kind.any(&b, &name);

    // Free: runs, with the options' lease and owner.
    let opts = WithLockOptions::new()
        .lease(Duration::from_secs(5))
        .owner(Owner::new(77));
    let probe = lock.clone();
    let (mut probe_raw, holder, n) = (raw.clone(), kind.field(&b, Owner::new(77)), name.clone());
    let ttl = lock
        .try_with_lock(ms(100), &opts, || async move {
            if kind.counts_holds() {
                assert!(probe.is_held_by(Owner::new(77)).await?);
            }
            assert_eq!(state(&mut probe_raw, &n).await, kind.state_of(&holder, 1));
            probe.remaining_ttl().await
        })
        .await
        .unwrap()
        .expect("the lock was free");
    match ttl {
        redisson_sync::Ttl::Remaining(left) => assert!(left <= Duration::from_secs(5), "{left:?}"),
        other => panic!("no TTL: {other:?}"),
    }
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(pttl(&mut raw, &name).await, -2);

    // Held elsewhere: `None` after about the wait, the section never run.
    let held = kind.rival().any(&a, &name).lock().await.unwrap();
    let ran = AtomicBool::new(false);
    let start = Instant::now();
    let outcome = lock
        .try_with_lock(ms(300), &WithLockOptions::new(), || async {
            ran.store(true, Ordering::SeqCst);
            Ok::<_, Error>(())
        })
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(outcome.is_none());
    assert!(!ran.load(Ordering::SeqCst));
    assert!(waited >= ms(290) && waited < ms(800), "waited {waited:?}");

    // Freed during the wait: runs.
    let release = tokio::spawn(async move {
        sleep(ms(100)).await;
        held.unlock().await.unwrap();
    });
    let outcome = lock
        .try_with_lock(Duration::from_secs(3), &WithLockOptions::new(), || async {
            Ok::<_, Error>(7)
        })
        .await
        .unwrap();
    assert_eq!(outcome, Some(7));
    release.await.unwrap();

    // `LockOptions` convert into the section's options.
    let value = lock
        .try_with_lock(
            ms(100),
            &LockOptions::new().lease(Duration::from_secs(5)).into(),
            || async { Ok::<_, Error>(1) },
        )
        .await
        .unwrap();
    assert_eq!(value, Some(1));
    assert_eq!(pttl(&mut raw, &name).await, -2);
    a.shutdown().await;
    b.shutdown().await;
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn lease_shortcuts_set_the_ttl);

/// (Busy: held by the kind's rival, the write half when the shortcut reads.)
async fn lease_shortcuts_set_the_ttl(kind: Kind) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (a, b) = (client(&server), client(&server));
    let name = unique_name("with-lease");

    // Java's lock(10, SECONDS).
    let guard = kind
        .rival()
        .any(&a, &name)
        .lock_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(guard.lease(), Some(Duration::from_secs(10)));
    let p = pttl(&mut raw, &name).await;
    assert!(p > 9_000 && p <= 10_000, "pttl {p}");

    // Java's tryLock(wait, lease, unit): busy, so `None` after the wait.
    let start = Instant::now();
    let none = kind
        .any(&b, &name)
        .try_lock_with_lease(ms(200), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(none.is_none());
    assert!(start.elapsed() >= ms(190));
    guard.unlock().await.unwrap();

    // ...and granted once free, with its lease.
    let guard = kind
        .any(&b, &name)
        .try_lock_with_lease(ms(200), Duration::from_secs(5))
        .await
        .unwrap()
        .expect("free");
    assert_eq!(guard.lease(), Some(Duration::from_secs(5)));
    assert_eq!(guard.token().is_some(), kind.draws_token(), "{kind}");
    let p = pttl(&mut raw, &name).await;
    assert!(p > 4_000 && p <= 5_000, "pttl {p}");
    guard.unlock().await.unwrap();

    // The same through `Box<dyn DistributedLock>`.
    let boxed: Box<dyn DistributedLock> = kind.any(&a, &name).into_dyn();
    let guard = boxed.lock_with_lease(Duration::from_secs(3)).await.unwrap();
    let p = pttl(&mut raw, boxed.name()).await;
    assert!(p > 2_000 && p <= 3_000, "pttl {p}");
    guard.unlock().await.unwrap();

    // A lease under 1 ms is refused, nothing sent.
    assert!(matches!(
        kind.any(&a, &name).lock_with_lease(Duration::ZERO).await,
        Err(Error::InvalidArgument(_))
    ));
    a.shutdown().await;
    b.shutdown().await;
}

/// Generic code over the trait: a counter incremented under whatever lock it is given, by many
/// tasks at once (`tokio::spawn` needs the trait's futures to be `Send`).
async fn exclusive_increments<L>(lock: Arc<L>, tasks: usize) -> usize
where
    L: DistributedLock + ?Sized + 'static,
{
    let counter = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (lock, counter, inside) = (lock.clone(), counter.clone(), inside.clone());
            tokio::spawn(async move {
                lock.with_lock(|| async move {
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two inside");
                    let seen = counter.load(Ordering::SeqCst);
                    sleep(ms(2)).await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, Error>(())
                })
                .await
            })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap().unwrap();
    }
    assert!(!lock.is_locked().await.unwrap());
    counter.load(Ordering::SeqCst)
}

/// The read half through the trait: sections of two tasks are inside at once (readers share).
async fn shared_sections<L>(lock: Arc<L>)
where
    L: DistributedLock + ?Sized + 'static,
{
    let inside = Arc::new(AtomicUsize::new(0));
    let both = Arc::new(tokio::sync::Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (lock, inside, both) = (lock.clone(), inside.clone(), both.clone());
            tokio::spawn(async move {
                lock.with_lock(|| async move {
                    inside.fetch_add(1, Ordering::SeqCst);
                    timeout(Duration::from_secs(5), both.wait())
                        .await
                        .expect("the other reader did not get in");
                    Ok::<_, Error>(())
                })
                .await
            })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap().unwrap();
    }
    assert_eq!(inside.load(Ordering::SeqCst), 2);
    assert!(!lock.is_locked().await.unwrap());
}

per_kind!(#[tokio::test(flavor = "multi_thread", worker_threads = 4)] async fn the_trait_takes_any_kind);

/// Generic code and trait objects over every kind: sections exclude each other (the read half's
/// share, as readers do), and the boxed-future methods and `with_lock` work on `Arc<dyn>` and
/// `&dyn`; the holds' queries through the concrete kinds.
async fn the_trait_takes_any_kind(kind: Kind) {
    let server = RedisServer::start();
    let client = client(&server);

    let any = kind.any(&client, &unique_name("trait"));
    let lock: Arc<dyn DistributedLock> = Arc::from(any.clone().into_dyn());
    if kind == Kind::Read {
        shared_sections(lock.clone()).await;
    } else {
        assert_eq!(exclusive_increments(lock.clone(), 20).await, 20);
    }

    let guard = lock.lock().await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    if kind.counts_holds() {
        assert!(any.is_held_by(Owner::current()).await.unwrap());
        assert_eq!(any.hold_count(Owner::current()).await.unwrap(), 1);
    }
    assert_eq!(guard.holder(), kind.field(&client, Owner::current()));
    guard.unlock().await.unwrap();
    let guard = lock
        .try_lock_with_lease(ms(100), Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(guard.lease(), Some(Duration::from_secs(5)));
    assert!(lock.force_unlock().await.unwrap());
    assert!(guard.unlock().await.unwrap_err().is_not_held());
    let name = lock.name().to_owned();
    let got = lock
        .with_lock(|| async move { Ok::<_, Error>(name) })
        .await
        .unwrap();
    assert_eq!(got, lock.name());
    // On a `&dyn`, through the trait path.
    let plain: &dyn DistributedLock = &*lock;
    DistributedLock::with_lock(&plain, || async { Ok::<_, Error>(()) })
        .await
        .unwrap();
    wait_free(&lock, Duration::from_secs(2)).await;
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_on_a_multi_lock() {
    let server = RedisServer::start();
    let client = client(&server);

    let (one, two) = (unique_name("with-multi"), unique_name("with-multi"));
    let multi = MultiLock::new([client.lock(&one), client.lock(&two)]).unwrap();
    let probe = client.clone();
    let (p1, p2) = (one.clone(), two.clone());
    let both = multi
        .with_lock(|| async move {
            Ok::<_, Error>(probe.lock(&p1).is_locked().await? && probe.lock(&p2).is_locked().await?)
        })
        .await
        .unwrap();
    assert!(both);
    assert!(!client.lock(&one).is_locked().await.unwrap());
    assert!(!client.lock(&two).is_locked().await.unwrap());
    let guard = multi
        .try_lock_with_lease(ms(100), Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert!(
        guard
            .parts()
            .iter()
            .all(|g| g.lease() == Some(Duration::from_secs(5)))
    );
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

/// A `tracing` subscriber that keeps the messages of WARN events.
#[derive(Clone, Default)]
struct Warnings(Arc<std::sync::Mutex<Vec<String>>>);

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap().push(message.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Dropping the last handle of a client while a dropped guard's release is still pending logs
/// a warning naming `shutdown`; after `shutdown` (or with nothing pending) there is none.
#[test]
fn dropping_the_last_client_handle_with_releases_pending_warns() {
    let server = RedisServer::start();
    let warnings = Warnings::default();
    let _default = tracing::subscriber::set_default(warnings.clone());
    // One thread: the release task cannot run before the client is dropped.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let name = unique_name("with-warn");
    runtime.block_on(async {
        let client = Client::open(server.url()).unwrap();
        let clone = client.clone();
        let guard = client.lock(&name).lock().await.unwrap();
        drop(guard); // schedules the release
        drop(clone); // not the last handle: no warning
        assert!(warnings.0.lock().unwrap().is_empty());
        drop(client);
    });
    let logged = warnings.0.lock().unwrap().clone();
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].contains("shutdown()"), "{logged:?}");
    assert!(logged[0].contains("1 background release"), "{logged:?}");

    // The release still runs while the runtime lives; with shutdown, no warning.
    warnings.0.lock().unwrap().clear();
    runtime.block_on(async {
        let client = Client::open(server.url()).unwrap();
        wait_free(&client.lock(&name), Duration::from_secs(2)).await;
        let guard = client.lock(&name).lock().await.unwrap();
        drop(guard);
        client.shutdown().await;
        let mut raw = server.conn().await;
        assert!(
            !common::exists(&mut raw, &name).await,
            "shutdown completed the release"
        );
        drop(client);
        // Nothing pending, never shut down: no warning either.
        let idle = Client::open(server.url()).unwrap();
        drop(idle);
    });
    assert!(warnings.0.lock().unwrap().is_empty());
}
