//! The spans (see `redisson_sync::observe`): a subscriber that records every span's name and
//! fields sees the acquire, release, renewal, renewal batch and give-up spans carry the lock's
//! name, kind, client id and owner.
//!
//! One subscriber is installed globally (the client's background tasks, the watchdog's
//! included, run on other tasks); tests run in parallel and each reads only the spans of its
//! own lock names and client ids.

mod common;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use common::{RedisServer, ms, unique_name};
use redisson_sync::{Client, LockOptions, Owner};
use tokio::time::{Instant, sleep};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::{LookupSpan, Registry};

/// One span: its name and every field recorded on it.
#[derive(Clone, Debug)]
struct SpanRecord {
    name: &'static str,
    fields: BTreeMap<String, String>,
}

impl SpanRecord {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Records every span into [`SPANS`], indexed by id while open.
struct Recorder;

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// Every span seen, in the order they were opened, and the index of each open span.
#[derive(Default)]
struct Spans {
    all: Vec<SpanRecord>,
    open: BTreeMap<u64, usize>,
}

fn spans() -> &'static Mutex<Spans> {
    static SPANS: OnceLock<Mutex<Spans>> = OnceLock::new();
    SPANS.get_or_init(|| {
        let subscriber = Registry::default().with(Recorder);
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        Mutex::default()
    })
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut spans = spans().lock().unwrap();
        let index = spans.all.len();
        spans.all.push(SpanRecord {
            name: attrs.metadata().name(),
            fields,
        });
        spans.open.insert(id.into_u64(), index);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = spans().lock().unwrap();
        if let Some(&index) = spans.open.get(&id.into_u64()) {
            values.record(&mut Fields(&mut spans.all[index].fields));
        }
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        spans().lock().unwrap().open.remove(&id.into_u64());
    }
}

/// The spans named `name` whose field `key` is `value`.
fn find(name: &str, key: &str, value: &str) -> Vec<SpanRecord> {
    spans()
        .lock()
        .unwrap()
        .all
        .iter()
        .filter(|s| s.name == name && s.field(key) == Some(value))
        .cloned()
        .collect()
}

/// Polls until some span named `name` has `key` = `value` (5 s at most).
async fn eventually(name: &str, key: &str, value: &str) -> Vec<SpanRecord> {
    let start = Instant::now();
    loop {
        let found = find(name, key, value);
        if !found.is_empty() {
            return found;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no {name} span with {key} = {value}"
        );
        sleep(ms(10)).await;
    }
}

fn assert_fields(span: &SpanRecord, fields: &[(&str, &str)]) {
    for (key, value) in fields {
        assert_eq!(span.field(key), Some(*value), "{key} of {span:?}");
    }
}

#[tokio::test]
async fn acquire_release_and_renewal_spans_name_the_lock_kind_client_and_owner() {
    spans();
    let server = RedisServer::start();
    let client = Client::builder()
        .url(server.url())
        .watchdog_timeout(ms(300))
        .build()
        .unwrap();
    let name = unique_name("tracing:lock");
    let owner = LockOptions::new().owner(Owner::new(4242));
    let lock = client.lock(&name);
    let expected = [
        ("lock", name.as_str()),
        ("kind", "lock"),
        ("client_id", client.id()),
        ("owner", "4242"),
    ];

    let guard = lock.lock_with_options(&owner).await.unwrap();
    // Held past a renewal (every 100 ms), then released.
    let renewals = eventually("renewal", "lock", &name).await;
    assert_fields(&renewals[0], &expected);
    let batches = eventually("renewal_batch", "client_id", client.id()).await;
    assert_fields(&batches[0], &[("kind", "hash")]);
    assert!(batches[0].field("size").is_some(), "{:?}", batches[0]);
    guard.unlock().await.unwrap();

    let acquires = find("acquire", "lock", &name);
    assert_eq!(acquires.len(), 1, "{acquires:?}");
    assert_fields(&acquires[0], &expected);
    assert_fields(&acquires[0], &[("outcome", "acquired")]);
    assert_eq!(acquires[0].field("wait_ms"), None, "no deadline");
    let releases = find("release", "lock", &name);
    assert_eq!(releases.len(), 1, "{releases:?}");
    assert_fields(&releases[0], &expected);

    // A timed-out try: its outcome and wait are on its span.
    let guard = lock.lock_with_options(&owner).await.unwrap();
    let other = LockOptions::new().owner(Owner::new(7));
    assert!(
        lock.try_lock_with_options(ms(30), &other)
            .await
            .unwrap()
            .is_none()
    );
    let tried = find("acquire", "owner", "7");
    let tried: Vec<_> = tried
        .iter()
        .filter(|s| s.field("lock") == Some(&name))
        .collect();
    assert_eq!(tried.len(), 1, "{tried:?}");
    assert_fields(tried[0], &[("outcome", "timed_out"), ("wait_ms", "30")]);
    // Released on drop, in the background: in a release span all the same.
    drop(guard);
    let start = Instant::now();
    while find("release", "lock", &name).len() < 2 {
        assert!(start.elapsed() < Duration::from_secs(5), "release on drop");
        sleep(ms(10)).await;
    }
    client.shutdown().await;
}

#[tokio::test]
async fn give_up_and_unowned_primitives() {
    spans();
    let server = RedisServer::start();
    let client = Client::open(server.url()).unwrap();

    // A fair lock's waiter leaves the queue when its wait ends: a give-up span.
    let name = unique_name("tracing:fair");
    let fair = client.fair_lock(&name);
    let guard = fair
        .lock_with_options(&LockOptions::new().owner(Owner::new(1)))
        .await
        .unwrap();
    let waiter = LockOptions::new().owner(Owner::new(2));
    assert!(
        fair.try_lock_with_options(ms(50), &waiter)
            .await
            .unwrap()
            .is_none()
    );
    let give_ups = eventually("give_up", "lock", &name).await;
    assert_fields(
        &give_ups[0],
        &[
            ("lock", name.as_str()),
            ("kind", "fair"),
            ("client_id", client.id()),
            ("owner", "2"),
        ],
    );
    guard.unlock().await.unwrap();

    // Permits have no owner: the field is absent.
    let sem = unique_name("tracing:sem");
    let semaphore = client.semaphore(&sem);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    semaphore.acquire(1).await.unwrap().release().await.unwrap();
    for span in ["acquire", "release"] {
        let found = find(span, "lock", &sem);
        assert_eq!(found.len(), 1, "{span}: {found:?}");
        assert_fields(
            &found[0],
            &[("kind", "semaphore"), ("client_id", client.id())],
        );
        assert_eq!(found[0].field("owner"), None, "{span}");
    }

    // The token lock has an owner, as the locks do.
    let token = unique_name("tracing:token");
    let guard = client
        .token_lock(&token)
        .lock_with_options(&LockOptions::new().owner(Owner::new(3)))
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    for span in ["acquire", "release"] {
        let found = find(span, "lock", &token);
        assert_eq!(found.len(), 1, "{span}: {found:?}");
        assert_fields(&found[0], &[("kind", "token"), ("owner", "3")]);
    }
    client.shutdown().await;
}
