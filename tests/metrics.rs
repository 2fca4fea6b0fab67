//! The metrics (`metrics` feature): a recorder installed for this test binary sees the counts,
//! gauges and histogram samples of known sequences of operations.
//!
//! One [`DebuggingRecorder`] is installed globally (the client's background tasks record from
//! other tasks, so a per-thread recorder would miss them). Tests run in parallel: each uses
//! clients with `metrics_name_label` on and lock names of its own, and reads only the series
//! labelled with its names. Every snapshot drains what it reads (counters and gauges swapped to
//! 0, histograms emptied), so snapshots are merged into one store ([`Store`]) all tests read.

#![cfg(feature = "metrics")]

mod common;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use common::recorder::snapshotter;
use common::{RedisServer, ms, unique_name};
use metrics_util::debugging::DebugValue;
use redis::AsyncCommands;
use redisson_sync::observe::{
    ACQUISITIONS, HELD, HOLD_SECONDS, LOST_LEASES, PUBSUB_RECONNECTS, RECHECKS, RENEWALS,
    WAIT_SECONDS, WAITING,
};
use redisson_sync::{Client, Error, LockOptions, Owner};
use tokio::time::{Instant, sleep, timeout};

/// One series: metric name and its labels, sorted.
type Series = (String, Vec<(String, String)>);

/// Every value seen so far: counters and gauges at their current value, histograms with
/// every sample.
#[derive(Default)]
struct Store {
    values: HashMap<Series, f64>,
    samples: HashMap<Series, Vec<f64>>,
}

/// Takes a snapshot, merges it into the store, and returns what the store has for the series
/// labelled `name = <name>`, or without a `name` label when `name` is `None`.
fn read(name: Option<&str>) -> Store {
    static STORE: OnceLock<Mutex<Store>> = OnceLock::new();
    let store = STORE.get_or_init(Mutex::default);
    let mut store = store.lock().unwrap();
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        let key = key.key();
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        labels.sort();
        let series = (key.name().to_owned(), labels);
        match value {
            // A snapshot swaps counters and gauges to 0: their values are what changed since
            // the last one (the crate only increments and decrements gauges).
            DebugValue::Counter(n) => *store.values.entry(series).or_default() += n as f64,
            DebugValue::Gauge(g) => *store.values.entry(series).or_default() += g.into_inner(),
            DebugValue::Histogram(samples) => store
                .samples
                .entry(series)
                .or_default()
                .extend(samples.into_iter().map(|s| s.into_inner())),
        }
    }
    let mine = |labels: &[(String, String)]| {
        let label = labels
            .iter()
            .find(|(k, _)| k == "name")
            .map(|(_, v)| v.as_str());
        label == name
    };
    Store {
        values: store
            .values
            .iter()
            .filter(|((_, l), _)| mine(l))
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        samples: store
            .samples
            .iter()
            .filter(|((_, l), _)| mine(l))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

impl Store {
    /// The value of `metric` whose labels include every pair of `labels` (0 when none).
    fn value(&self, metric: &str, labels: &[(&str, &str)]) -> f64 {
        self.values
            .iter()
            .filter(|((m, l), _)| m == metric && has(l, labels))
            .map(|(_, v)| *v)
            .sum()
    }

    /// The samples of `metric` whose labels include every pair of `labels`.
    fn samples(&self, metric: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.samples
            .iter()
            .filter(|((m, l), _)| m == metric && has(l, labels))
            .flat_map(|(_, v)| v.iter().copied())
            .collect()
    }
}

fn has(labels: &[(String, String)], want: &[(&str, &str)]) -> bool {
    want.iter()
        .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
}

/// A client of `server` recording the name label, with this watchdog timeout and re-check
/// interval.
fn labelled_client(server: &RedisServer, watchdog: Duration, recheck: Duration) -> Client {
    snapshotter();
    Client::builder()
        .url(server.url())
        .watchdog_timeout(watchdog)
        .recheck_interval(recheck)
        .metrics_name_label(true)
        .build()
        .unwrap()
}

/// Polls `read(name)` until `check` holds (5 s at most).
async fn eventually(name: Option<&str>, what: &str, check: impl Fn(&Store) -> bool) -> Store {
    let start = Instant::now();
    loop {
        let store = read(name);
        if check(&store) {
            return store;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{what} {:?}",
            store.values
        );
        sleep(ms(10)).await;
    }
}

#[tokio::test]
async fn a_lock_sequence_is_counted_exactly() {
    let server = RedisServer::start();
    let client = labelled_client(&server, ms(300), ms(50));
    let outsider = Client::open(server.url()).unwrap();
    let name = unique_name("metrics:lock");
    let lock = client.lock(&name);
    let other = LockOptions::new().owner(Owner::new(999_999));
    let kind = ("kind", "lock");

    // 1: acquired, held past a few renewals (every 100 ms).
    let guard = lock.lock().await.unwrap();
    let store = read(Some(&name));
    assert_eq!(store.value(HELD, &[kind]), 1.0);
    // 2: another owner waits 120 ms in vain (it is counted waiting meanwhile).
    let waiter = {
        let lock = lock.clone();
        let other = other.clone();
        tokio::spawn(async move { lock.try_lock_with_options(ms(120), &other).await })
    };
    eventually(Some(&name), "a waiter", |s| {
        s.value(WAITING, &[kind]) == 1.0
    })
    .await;
    assert!(waiter.await.unwrap().unwrap().is_none());
    // 3: another owner's wait is cancelled: its future dropped.
    assert!(
        timeout(ms(60), lock.lock_with_options(&other))
            .await
            .is_err()
    );
    sleep(ms(250)).await;
    guard.unlock().await.unwrap();

    // 4: acquired again, then force-unlocked from outside: the watchdog finds it gone.
    let guard = lock.lock().await.unwrap();
    assert!(outsider.lock(&name).force_unlock().await.unwrap());
    timeout(Duration::from_secs(2), guard.lost()).await.unwrap();
    drop(guard);

    // 5: the name holds a string: the acquire fails.
    let mut raw = server.conn().await;
    let _: () = raw.set(&name, "not a lock").await.unwrap();
    assert!(matches!(lock.lock().await, Err(Error::WrongType { .. })));

    let store = read(Some(&name));
    let outcome = |o| store.value(ACQUISITIONS, &[kind, ("outcome", o)]);
    assert_eq!(outcome("acquired"), 2.0);
    assert_eq!(outcome("timed_out"), 1.0);
    assert_eq!(outcome("cancelled"), 1.0);
    assert_eq!(outcome("error"), 1.0);
    assert_eq!(store.value(ACQUISITIONS, &[]), 5.0, "nothing else counted");

    let waits = store.samples(WAIT_SECONDS, &[kind]);
    assert_eq!(waits.len(), 5, "one wait sample per acquisition: {waits:?}");
    assert!(
        waits.iter().any(|w| (0.12..5.0).contains(w)),
        "the 120 ms wait: {waits:?}"
    );
    let holds = store.samples(HOLD_SECONDS, &[kind]);
    assert_eq!(holds.len(), 2, "one hold sample per guard: {holds:?}");
    assert!(
        holds.iter().any(|h| (0.3..5.0).contains(h)),
        "the first guard was held over 300 ms: {holds:?}"
    );
    assert_eq!(store.value(HELD, &[kind]), 0.0);
    assert_eq!(store.value(WAITING, &[kind]), 0.0);
    let renewals = store.value(RENEWALS, &[kind]);
    assert!(renewals >= 2.0, "renewed every 100 ms: {renewals}");
    assert_eq!(store.value(LOST_LEASES, &[kind]), 1.0);
    assert!(
        store.value(RECHECKS, &[kind]) >= 1.0,
        "the waiters re-checked on their timer (50 ms)"
    );
    client.shutdown().await;
    outsider.shutdown().await;
}

#[tokio::test]
async fn kinds_are_labelled_and_permits_are_holds() {
    let server = RedisServer::start();
    let client = labelled_client(&server, Duration::from_secs(30), ms(50));

    let fair = unique_name("metrics:fair");
    let guard = client.fair_lock(&fair).lock().await.unwrap();
    guard.unlock().await.unwrap();
    let rw = unique_name("metrics:rw");
    let read_guard = client.rw_lock(&rw).read_lock().lock().await.unwrap();
    drop(read_guard);
    let token = unique_name("metrics:token");
    let guard = client.token_lock(&token).lock().await.unwrap();
    guard.unlock().await.unwrap();

    let sem = unique_name("metrics:sem");
    let semaphore = client.semaphore(&sem);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let permits = semaphore.acquire(1).await.unwrap();
    assert_eq!(read(Some(&sem)).value(HELD, &[("kind", "semaphore")]), 1.0);
    assert!(semaphore.try_acquire(1).await.unwrap().is_none());
    permits.release().await.unwrap();

    let latch = unique_name("metrics:latch");
    assert!(
        client
            .count_down_latch(&latch)
            .await_for(ms(0))
            .await
            .unwrap()
    );

    for (name, kind, acquired, timed_out, holds) in [
        (&fair, "fair", 1.0, 0.0, 1),
        (&rw, "read", 1.0, 0.0, 1),
        (&token, "token", 1.0, 0.0, 1),
        (&sem, "semaphore", 1.0, 1.0, 1),
        (&latch, "latch", 1.0, 0.0, 0),
    ] {
        let store = read(Some(name));
        let k = ("kind", kind);
        assert_eq!(
            store.value(ACQUISITIONS, &[k, ("outcome", "acquired")]),
            acquired,
            "{kind}"
        );
        assert_eq!(
            store.value(ACQUISITIONS, &[k, ("outcome", "timed_out")]),
            timed_out,
            "{kind}"
        );
        assert_eq!(
            store.value(ACQUISITIONS, &[]),
            acquired + timed_out,
            "{kind}"
        );
        assert_eq!(store.samples(HOLD_SECONDS, &[k]).len(), holds, "{kind}");
        assert_eq!(store.value(HELD, &[k]), 0.0, "{kind}");
    }
    client.shutdown().await;
}

#[tokio::test]
async fn without_the_option_no_name_label_and_reconnects_are_counted() {
    let server = RedisServer::start();
    snapshotter();
    // The default: the metrics are labelled by kind only.
    let client = Client::builder()
        .url(server.url())
        .recheck_interval(ms(50))
        .build()
        .unwrap();
    let holder = Client::open(server.url()).unwrap();
    let name = unique_name("metrics:nolabel");
    let before = read(None).value(ACQUISITIONS, &[("kind", "spin")]);
    let guard = client.spin_lock(&name).lock().await.unwrap();
    guard.unlock().await.unwrap();
    let after = read(None).value(ACQUISITIONS, &[("kind", "spin"), ("outcome", "acquired")]);
    assert!(after >= before + 1.0, "{before} -> {after}");
    assert!(
        read(Some(&name)).values.is_empty(),
        "no series with the name"
    );

    // A waiter's pub/sub connection is killed: it is re-established and counted.
    let reconnects = read(None).value(PUBSUB_RECONNECTS, &[]);
    let held = holder.lock(&name).lock().await.unwrap();
    let waiter = {
        let lock = client.lock(&name);
        tokio::spawn(async move { lock.lock().await })
    };
    let mut raw = server.conn().await;
    common::wait_numsub(&mut raw, &common::channel(&name), 1).await;
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut raw)
        .await
        .unwrap();
    eventually(None, "a reconnect counted", |s| {
        s.value(PUBSUB_RECONNECTS, &[]) > reconnects
    })
    .await;
    held.unlock().await.unwrap();
    waiter.await.unwrap().unwrap().unlock().await.unwrap();
    client.shutdown().await;
    holder.shutdown().await;
}
