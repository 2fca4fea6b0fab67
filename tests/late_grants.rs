//! Late grants (issue 29): every reply slower than the lease, through a fault proxy delaying
//! what Redis sends back. Each grant arrives after its lease, so it is not handed out but given
//! back (as before); the third in a row ends a waiting acquire, `lock()` included, with
//! `Error::LateGrants`, naming the lock, the measured reply latency and the lease, within a few
//! seconds, instead of trying for ever. Nothing is left: no key (but the fenced lock's token
//! counter), no queue entry, no subscription, no hold in the client's own count. Every lock
//! kind, from one list (`tests/common/leased.rs`).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::leased::{Leased, per_leased};
use common::{AnyLock, FaultProxy, Mode, RedisServer, exists, ms, unique_name};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The lease of every grant: the watchdog timeout, or the explicit lease.
const LEASE: Duration = Duration::from_millis(150);

/// How late every reply comes: longer than the lease, so every grant is late however loaded
/// the machine is (it arrives a delay or more after it was sent).
const DELAY: Duration = Duration::from_millis(250);

/// The lease of the holds taken while replies are fast (nothing renews them, and no stalled
/// renewal can end them early).
const LONG: Duration = Duration::from_secs(60);

/// The bound on the waits of these tests: a late-grant failure comes well within it (three
/// rounds of an acquire and its release, about six delays).
const BOUND: Duration = Duration::from_secs(20);

/// A client of the server behind `proxy`, with [`LEASE`] as its watchdog timeout, its pooled
/// and pub/sub connections opened while the proxy still passes everything at once.
async fn client(proxy: &FaultProxy) -> Client {
    let client = Client::builder()
        .url(proxy.url())
        .watchdog_timeout(LEASE)
        .build()
        .unwrap();
    let warm = client.lock(unique_name("warm"));
    let held = warm.lock_with_lease(LONG).await.unwrap();
    // A second owner waits by subscription: the pub/sub connection opens.
    let other = LockOptions::new().owner(Owner::new(2));
    assert!(
        warm.try_lock_with_options(ms(50), &other)
            .await
            .unwrap()
            .is_none()
    );
    held.unlock().await.unwrap();
    client
}

/// Every key whose name contains `name`, with its value when it is a string.
async fn keys_of(raw: &mut MultiplexedConnection, name: &str) -> Vec<(String, Option<String>)> {
    let mut keys: Vec<String> = raw.keys(format!("*{name}*")).await.unwrap();
    keys.sort();
    let mut all = Vec::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(raw).await.unwrap();
        let value = match kind.as_str() {
            "string" => Some(raw.get(&key).await.unwrap()),
            _ => None,
        };
        all.push((key, value));
    }
    all
}

/// The channels with a subscriber whose name contains `name`.
async fn channels_of(raw: &mut MultiplexedConnection, name: &str) -> Vec<String> {
    redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg(format!("*{name}*"))
        .query_async(raw)
        .await
        .unwrap()
}

/// What `leased` keeps of `name` once nothing is held: the fenced lock's token counter, at
/// the number of grants it drew; nothing for the other kinds.
fn leftovers(leased: Leased, name: &str, grants: u32) -> Vec<(String, Option<String>)> {
    match leased {
        Leased::Fenced => vec![(
            format!("redisson_lock_token:{{{name}}}"),
            Some(grants.to_string()),
        )],
        _ => Vec::new(),
    }
}

/// Polls (every 10 ms, bounded) until no key but `leftovers` and no channel of `name` is
/// left: the waiter's give-up cleanup and unsubscribe run in the background after an error.
async fn nothing_left(
    raw: &mut MultiplexedConnection,
    name: &str,
    left: &[(String, Option<String>)],
) {
    let start = Instant::now();
    loop {
        let keys = keys_of(raw, name).await;
        let channels = channels_of(raw, name).await;
        if keys == left && channels.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < BOUND,
            "left behind: keys {keys:?}, channels {channels:?}"
        );
        tokio::time::sleep(ms(10)).await;
    }
}

/// The error's fields, checked: the lock, three grants, a latency of at least the delay, the
/// lease; and its message names them and the fix.
fn assert_late_grants(err: &Error, name: &str, lease: Duration) -> u32 {
    let Error::LateGrants {
        name: of,
        grants,
        latency,
        lease: leased_for,
    } = err
    else {
        panic!("not LateGrants: {err}");
    };
    assert_eq!(of, name);
    assert_eq!(*grants, 3);
    assert!(*latency >= DELAY, "{latency:?}");
    assert_eq!(*leased_for, lease);
    let text = err.to_string();
    for part in [
        format!("{name:?}"),
        format!("took {latency:?}"),
        format!("the lease is {lease:?}"),
        "longer lease".to_owned(),
        "watchdog timeout".to_owned(),
    ] {
        assert!(text.contains(&part), "{part:?} not in {text:?}");
    }
    *grants
}

/// `lock()` (no wait bound, the watchdog's lease) with every reply later than the lease:
/// `LateGrants` within the bound, and nothing left; with replies fast again the owner's next
/// acquire is its first hold.
async fn lock_ends_after_late_grants(leased: Leased) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let client = client(&proxy).await;
    let name = unique_name(&format!("late-{leased}"));
    let lock = leased.any(&client, &name).unwrap();
    let owner = LockOptions::new().owner(Owner::new(7));

    proxy.set_mode(Mode::Delay {
        up: Duration::ZERO,
        down: DELAY,
    });
    let err = tokio::time::timeout(BOUND, lock.lock_with_options(&owner))
        .await
        .expect("lock() spun on late grants")
        .expect_err("a late grant was handed out");
    let grants = assert_late_grants(&err, &name, LEASE);
    // Every grant was given back before the call returned; the waiter's traces (a queue
    // entry, the subscription) go right after.
    assert!(!exists(&mut raw, &name).await, "a grant was left held");
    nothing_left(&mut raw, &name, &leftovers(leased, &name, grants)).await;

    proxy.set_mode(Mode::Pass);
    let guard = lock
        .lock_with_options(&owner.clone().lease(LONG))
        .await
        .unwrap();
    match &lock {
        AnyLock::Token(_) => {}
        _ => assert_eq!(lock.hold_count(Owner::new(7)).await.unwrap(), 1),
    }
    guard.unlock().await.unwrap();
    nothing_left(&mut raw, &name, &leftovers(leased, &name, grants + 1)).await;
    client.shutdown().await;
}

per_leased!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn lock_ends_after_late_grants: locks);

/// A bounded wait longer than three rounds ends the same way, long before its end; an
/// explicit lease is the one named; a single attempt gives the grant back and reports "not
/// acquired", as it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_wait_and_a_single_attempt() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let client = client(&proxy).await;
    let name = unique_name("late-bounded");
    let lock = client.lock(&name);
    proxy.set_mode(Mode::Delay {
        up: Duration::ZERO,
        down: DELAY,
    });

    let lease = ms(200);
    let started = Instant::now();
    let err = lock
        .try_lock_with_options(Duration::from_secs(600), &LockOptions::new().lease(lease))
        .await
        .expect_err("a late grant was handed out");
    assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
    assert_late_grants(&err, &name, lease);
    nothing_left(&mut raw, &name, &[]).await;

    let single = lock.try_lock().await.unwrap();
    assert!(single.is_none(), "a late grant was handed out");
    nothing_left(&mut raw, &name, &[]).await;
    client.shutdown().await;
}

/// The first late grant of an acquire is a warning (with the latency and the lease); the
/// later ones are not repeated as warnings, and the acquire's error says the rest.
#[tokio::test(flavor = "current_thread")]
async fn the_first_late_grant_is_a_warning() {
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let _default = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(Warnings(warnings.clone())),
    );
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let client = client(&proxy).await;
    let name = unique_name("late-warning");
    proxy.set_mode(Mode::Delay {
        up: Duration::ZERO,
        down: DELAY,
    });
    let err = client.lock(&name).lock().await.unwrap_err();
    assert_late_grants(&err, &name, LEASE);
    let late: Vec<_> = warnings
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.contains("arrived after its lease"))
        .cloned()
        .collect();
    assert_eq!(late.len(), 1, "{late:?}");
    for part in [
        format!("lock={name}"),
        format!("lease={LEASE:?}"),
        "latency=".to_owned(),
    ] {
        assert!(late[0].contains(&part), "{part:?} not in {:?}", late[0]);
    }
    proxy.set_mode(Mode::Pass);
    client.shutdown().await;
}

/// Records every `WARN` event as `message field=value ...`.
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Line<'a>(&'a mut String);

impl Visit for Line<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut line = String::new();
            event.record(&mut Line(&mut line));
            self.0.lock().unwrap().push(line);
        }
    }
}
