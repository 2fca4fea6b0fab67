//! A starved runtime (issue 29): code that blocks the threads of the client's runtime (a sync
//! call, a long CPU loop) for longer than a hold's lease, on a `current_thread` runtime and on a
//! multi-thread one with every worker blocked, while another client, on its own thread and
//! runtime, is granted the lock meanwhile.
//!
//! - The moment the blocking section ends, before any await, the guard tells the truth:
//!   `valid_until()` is past, `is_lost()` is true and `lost()` is ready when first polled.
//! - Running again, the watchdog does not renew the lapsed hold: by its own clock it drops it
//!   without a renewal; a renewal it had already begun when its thread was blocked (a blocking
//!   call inside the watchdog's own task, as a blocking log writer makes) goes out late, and
//!   Redis refuses it, because every renewal script names the holder it renews (the holder
//!   field, a token lock's value, a permit's id).
//! - Either way, the new holder's keys, fields and TTLs stay exactly as they were, no renewal
//!   extends anything (`INFO commandstats`), and the stale guard's release returns `LeaseLost`
//!   or `NotHeld` (`PermitNotHeld` for the permit) without touching them.
//!
//! Every lock kind and the renewing permits, from one list (`tests/common/leased.rs`). The
//! tests watch the crate through a tracing layer installed once for this binary: it records
//! spans and events, and can block the thread that opens a given span.

mod common;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::mpsc as std_mpsc;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use common::leased::{Guard, Leased, RivalHold, per_leased};
use common::{RedisServer, command_stats, ms, unique_name};
use futures_util::FutureExt;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, WithLockOptions};
use tokio::runtime::{Builder, Runtime};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::{LookupSpan, Registry};

/// The lease of the starved client's holds (its watchdog timeout; the renewing permit's
/// lease): renewed every third of it while its runtime runs.
const LEASE: Duration = Duration::from_secs(1);

/// The rival's explicit lease: nothing renews it, and it outlasts every test.
const RIVAL_LEASE: Duration = Duration::from_secs(60);

/// The bound on every wait of these tests (a rival's grant, an event, a blocked section).
const BOUND: Duration = Duration::from_secs(30);

// -----------------------------------------------------------------------------------------
// The probe: a tracing layer for the whole binary
// -----------------------------------------------------------------------------------------

/// What the probe saw, and what it is to do.
#[derive(Default)]
struct Probe {
    /// Every span opened: its name and fields.
    spans: Vec<(&'static str, BTreeMap<String, String>)>,
    /// Every event with a lock name (its own `lock` field, or its spans').
    events: Vec<Seen>,
    /// What to run on the thread that opens a matching span (once each).
    hooks: Vec<Hook>,
}

/// One event.
#[derive(Clone, Debug)]
struct Seen {
    message: String,
    lock: String,
    holder: Option<String>,
}

/// Runs `run` on the thread that opens the next span named `span` whose field `field` is
/// `value`, before that span's code goes on.
struct Hook {
    span: &'static str,
    field: &'static str,
    value: String,
    run: Box<dyn FnOnce() + Send>,
}

fn probe() -> MutexGuard<'static, Probe> {
    static PROBE: OnceLock<Mutex<Probe>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            tracing::subscriber::set_global_default(Registry::default().with(ProbeLayer))
                .expect("the only subscriber");
            Mutex::default()
        })
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Installs the probe (before the test's clients start).
fn init_probe() {
    drop(probe());
}

/// Arms a [`Hook`].
fn hook(span: &'static str, field: &'static str, value: &str, run: impl FnOnce() + Send + 'static) {
    probe().hooks.push(Hook {
        span,
        field,
        value: value.to_owned(),
        run: Box::new(run),
    });
}

/// How many watchdog script calls (`renewal_batch` spans) the client `client_id` began.
fn renewal_batches(client_id: &str) -> usize {
    probe()
        .spans
        .iter()
        .filter(|(name, fields)| {
            *name == "renewal_batch"
                && fields.get("client_id").map(String::as_str) == Some(client_id)
        })
        .count()
}

/// Waits (bounded) for an event `message` about `lock` (and `holder`, when given).
async fn seen(lock: &str, holder: Option<&str>, message: &str) {
    let start = Instant::now();
    loop {
        let found = {
            let probe = probe();
            let found = probe.events.iter().any(|e| {
                e.lock == lock
                    && e.message == message
                    && holder.is_none_or(|h| e.holder.as_deref() == Some(h))
            });
            assert!(
                found || start.elapsed() < BOUND,
                "no {message:?} about {lock} ({holder:?}); its events: {:?}",
                probe
                    .events
                    .iter()
                    .filter(|e| e.lock == lock)
                    .collect::<Vec<_>>()
            );
            found
        };
        if found {
            return;
        }
        tokio::time::sleep(ms(10)).await;
    }
}

struct ProbeLayer;

/// The fields of a span, kept in its extensions for the events inside it.
struct SpanFields(BTreeMap<String, String>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for ProbeLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name();
        let hook = {
            let mut probe = probe();
            probe.spans.push((name, fields.clone()));
            let at = probe.hooks.iter().position(|h| {
                h.span == name && fields.get(h.field).map(String::as_str) == Some(&h.value)
            });
            at.map(|at| probe.hooks.remove(at))
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields));
        }
        // Outside the probe's lock: the hook may block this thread for a while.
        if let Some(hook) = hook {
            (hook.run)();
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let lock = fields.get("lock").cloned().or_else(|| {
            ctx.event_scope(event)?.find_map(|span| {
                span.extensions()
                    .get::<SpanFields>()
                    .and_then(|f| f.0.get("lock").cloned())
            })
        });
        if let Some(lock) = lock {
            probe().events.push(Seen {
                message: fields.remove("message").unwrap_or_default(),
                lock,
                holder: fields.remove("holder"),
            });
        }
    }
}

// -----------------------------------------------------------------------------------------
// What Redis holds
// -----------------------------------------------------------------------------------------

/// One key: its type, its content, its PTTL.
#[derive(Clone, Debug, PartialEq)]
struct Key {
    kind: String,
    content: Vec<Vec<u8>>,
    pttl: i64,
}

/// Every key of the server (each test has its own).
async fn keys(raw: &mut MultiplexedConnection) -> BTreeMap<String, Key> {
    let names: Vec<String> = raw.keys("*").await.unwrap();
    let mut all = BTreeMap::new();
    for name in names {
        let kind: String = redis::cmd("TYPE")
            .arg(&name)
            .query_async(raw)
            .await
            .unwrap();
        let content: Vec<Vec<u8>> = match kind.as_str() {
            "hash" => {
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = raw.hgetall(&name).await.unwrap();
                pairs.sort();
                pairs.into_iter().flat_map(|(f, v)| [f, v]).collect()
            }
            "string" => vec![raw.get(&name).await.unwrap()],
            "zset" => raw.zrange_withscores(&name, 0, -1).await.unwrap(),
            "list" => raw.lrange(&name, 0, -1).await.unwrap(),
            other => panic!("{name}: unexpected type {other}"),
        };
        let pttl: i64 = raw.pttl(&name).await.unwrap();
        all.insert(
            name,
            Key {
                kind,
                content,
                pttl,
            },
        );
    }
    all
}

/// `now` has the keys of `then` with the same content, none of whose TTLs was refreshed.
fn untouched(then: &BTreeMap<String, Key>, now: &BTreeMap<String, Key>, when: &str) {
    let names = |m: &BTreeMap<String, Key>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(now), names(then), "{when}: the keys changed");
    for (name, before) in then {
        let after = &now[name];
        assert_eq!(
            (&after.kind, &after.content),
            (&before.kind, &before.content),
            "{when}: {name} changed"
        );
        if before.pttl < 0 {
            assert_eq!(after.pttl, before.pttl, "{when}: {name}'s expiry changed");
        } else {
            assert!(
                after.pttl > 0 && after.pttl <= before.pttl,
                "{when}: {name}'s TTL went from {} to {} ms",
                before.pttl,
                after.pttl
            );
        }
    }
}

/// How many times anything extended a lease: `PEXPIRE` (the lock renewals) and `ZADD` (the
/// permits'), scripts' calls included.
async fn extensions(raw: &mut MultiplexedConnection) -> u64 {
    command_stats(raw, "pexpire").await.calls + command_stats(raw, "zadd").await.calls
}

// -----------------------------------------------------------------------------------------
// The rival: another client, on its own thread and runtime
// -----------------------------------------------------------------------------------------

/// What the rival reports once granted, read before anyone else could act: its holder and
/// what the server held then.
#[derive(Debug)]
struct Granted {
    holder: String,
    keys: BTreeMap<String, Key>,
    extensions: u64,
}

struct Rival {
    granted: Option<std_mpsc::Receiver<Granted>>,
    release: tokio::sync::mpsc::UnboundedSender<()>,
    thread: thread::JoinHandle<()>,
}

impl Rival {
    /// Starts waiting for `name` (the hold that keeps `leased` out, with [`RIVAL_LEASE`]) in
    /// a client of its own, on a thread and runtime of its own.
    fn start(url: String, leased: Leased, name: String) -> Self {
        let (granted_tx, granted) = std_mpsc::channel();
        let (release, mut released) = tokio::sync::mpsc::unbounded_channel();
        let thread = thread::spawn(move || {
            let runtime = Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let client = Client::builder().url(&url).build().unwrap();
                let mut raw = redis::Client::open(url)
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap();
                let hold = leased
                    .rival(&client, &name, RIVAL_LEASE, BOUND)
                    .await
                    .unwrap()
                    .expect("the rival was not granted within the bound");
                let holder = match &hold {
                    RivalHold::Lock(g) => g.holder().to_owned(),
                    RivalHold::Permits(_, ids) => ids[0].to_string(),
                };
                let keys = keys(&mut raw).await;
                let extensions = extensions(&mut raw).await;
                granted_tx
                    .send(Granted {
                        holder,
                        keys,
                        extensions,
                    })
                    .unwrap();
                tokio::time::timeout(BOUND, released.recv())
                    .await
                    .expect("the rival was never let go");
                hold.release().await;
                client.shutdown().await;
            });
        });
        Self {
            granted: Some(granted),
            release,
            thread,
        }
    }

    /// Waits, blocking this thread, for the rival's grant.
    fn wait_granted(receiver: &std_mpsc::Receiver<Granted>) -> Option<Granted> {
        receiver.recv_timeout(BOUND).ok()
    }

    /// Lets the rival release and end; its panic, if it had one, is this one.
    fn finish(self) {
        let _ = self.release.send(());
        if let Err(panic) = self.thread.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

// -----------------------------------------------------------------------------------------
// The runtimes, and a section that blocks all of one
// -----------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Flavor {
    CurrentThread,
    /// Two workers.
    MultiThread,
}

impl Flavor {
    fn runtime(self) -> Runtime {
        match self {
            Self::CurrentThread => Builder::new_current_thread(),
            Self::MultiThread => {
                let mut b = Builder::new_multi_thread();
                b.worker_threads(2);
                b
            }
        }
        .enable_all()
        .build()
        .unwrap()
    }

    /// Runs `section` while it blocks every thread that runs tasks: inline on the
    /// `current_thread` runtime; on the multi-thread one in a task, once another task blocks
    /// the other worker, until the section ends.
    async fn block<T: Send + 'static>(self, section: impl FnOnce() -> T + Send + 'static) -> T {
        match self {
            Self::CurrentThread => section(),
            Self::MultiThread => {
                let (blocking_tx, blocking) = std_mpsc::channel();
                let (end, ended) = std_mpsc::channel::<()>();
                let blocker = tokio::spawn(async move {
                    blocking_tx.send(thread::current().id()).unwrap();
                    let _ = ended.recv_timeout(BOUND);
                });
                let section = tokio::spawn(async move {
                    let other = blocking
                        .recv_timeout(BOUND)
                        .expect("no other worker ran the blocker");
                    assert_ne!(other, thread::current().id());
                    let out = section();
                    let _ = end.send(());
                    out
                });
                let out = section
                    .await
                    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
                blocker.await.unwrap();
                out
            }
        }
    }
}

/// What a guard says of itself, read at one instant without polling the runtime.
#[derive(Debug)]
struct Truth {
    now: Instant,
    valid_until: Instant,
    lost: bool,
    /// Whether `lost()` was ready at its first poll.
    signalled: bool,
}

impl Truth {
    fn of(guard: &Guard) -> Self {
        let now = Instant::now();
        Self {
            valid_until: guard.valid_until(),
            lost: guard.is_lost(),
            signalled: guard.lost().now_or_never().is_some(),
            now,
        }
    }

    /// The hold lapsed and was granted to another: the guard must say so.
    fn assert_lost(&self, leased: Leased) {
        assert!(
            self.valid_until <= self.now,
            "{leased}: valid_until is {:?} ahead after the lease lapsed",
            self.valid_until - self.now
        );
        assert!(
            self.lost,
            "{leased}: is_lost() is false after the lease lapsed"
        );
        assert!(self.signalled, "{leased}: lost() was not ready at once");
    }
}

/// A client of `server` whose holds have [`LEASE`].
fn starved_client(server: &RedisServer) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_timeout(LEASE)
        .build()
        .unwrap()
}

/// The release of a hold that lapsed and went to another: refused.
fn assert_refused(leased: Leased, released: redisson_sync::Result<()>) {
    let err = released.expect_err("the release of a lapsed hold succeeded");
    assert!(
        err.is_not_held() || matches!(err, Error::PermitNotHeld { .. }),
        "{leased}: {err}"
    );
}

// -----------------------------------------------------------------------------------------
// The tests
// -----------------------------------------------------------------------------------------

/// User code blocks the runtime until the rival holds the lock: the guard tells the truth at
/// once; the watchdog drops the hold without a renewal; the release is refused; the rival's
/// hold stays exactly as it was.
fn a_blocking_section(leased: Leased, flavor: Flavor) {
    let server = RedisServer::start();
    flavor.runtime().block_on(async {
        init_probe();
        let mut raw = server.conn().await;
        let client = starved_client(&server);
        let name = unique_name(&format!("starved-{leased}"));
        leased.prepare(&client, &name).await;
        let guard = leased.acquire(&client, &name).await.unwrap();
        let holder = guard.holder();
        let mut rival = Rival::start(server.url(), leased, name.clone());
        let granted_rx = rival.granted.take().unwrap();
        let client_id = client.id().to_owned();

        // The section: a sync call that returns once another client holds the lock.
        let (guard, granted, truth, batches) = flavor
            .block(move || {
                let batches = renewal_batches(&client_id);
                let granted = Rival::wait_granted(&granted_rx);
                let truth = Truth::of(&guard);
                (guard, granted, truth, batches)
            })
            .await;
        let granted = granted.expect("the rival was not granted while the runtime was blocked");
        truth.assert_lost(leased);
        assert_ne!(granted.holder, holder);

        // Running again, the watchdog drops the hold by its own clock: nothing is sent.
        seen(
            &name,
            Some(&holder),
            "lock lost: no renewal was confirmed within its lease",
        )
        .await;
        assert_eq!(
            renewal_batches(client.id()),
            batches,
            "{leased}: a renewal went out"
        );
        untouched(
            &granted.keys,
            &keys(&mut raw).await,
            "after the watchdog ran",
        );
        assert_eq!(extensions(&mut raw).await, granted.extensions);

        assert_refused(leased, guard.release().await);
        untouched(
            &granted.keys,
            &keys(&mut raw).await,
            "after the stale release",
        );
        assert_eq!(extensions(&mut raw).await, granted.extensions);
        rival.finish();
        client.shutdown().await;
    });
}

fn current_thread(leased: Leased) {
    a_blocking_section(leased, Flavor::CurrentThread);
}

fn multi_thread(leased: Leased) {
    a_blocking_section(leased, Flavor::MultiThread);
}

per_leased!(#[test] fn current_thread);
per_leased!(#[test] fn multi_thread);

/// The watchdog's own task blocks its thread as it begins a renewal (a blocking call in a
/// tracing subscriber, say) until the rival holds the lock: the renewal, built before the
/// block, goes out after it, and Redis refuses it (the script checks the holder); the guard
/// reports the loss, its release sends nothing and says `LeaseLost`, and the rival's hold
/// stays exactly as it was.
fn a_blocked_watchdog(leased: Leased, flavor: Flavor) {
    let server = RedisServer::start();
    flavor.runtime().block_on(async {
        init_probe();
        let mut raw = server.conn().await;
        let client = starved_client(&server);
        let name = unique_name(&format!("starved-watchdog-{leased}"));
        leased.prepare(&client, &name).await;
        let guard = leased.acquire(&client, &name).await.unwrap();
        let holder = guard.holder();
        let mut rival = Rival::start(server.url(), leased, name.clone());
        let granted_rx = rival.granted.take().unwrap();
        let (granted_tx, granted) = tokio::sync::oneshot::channel();
        hook("renewal_batch", "client_id", client.id(), move || {
            let _ = granted_tx.send(Rival::wait_granted(&granted_rx));
        });
        let granted = tokio::time::timeout(BOUND, granted)
            .await
            .expect("the watchdog began no renewal")
            .unwrap()
            .expect("the rival was not granted while the watchdog was blocked");
        // The first step of user code after the block.
        Truth::of(&guard).assert_lost(leased);

        // The renewal goes out now; Redis refuses it.
        seen(
            &name,
            Some(&holder),
            "lock lost: the watchdog found its holder gone",
        )
        .await;
        untouched(
            &granted.keys,
            &keys(&mut raw).await,
            "after the late renewal",
        );
        assert_eq!(extensions(&mut raw).await, granted.extensions);

        // Redis showed the hold gone: the release sends nothing.
        let err = guard.release().await.unwrap_err();
        assert!(matches!(err, Error::LeaseLost { .. }), "{leased}: {err}");
        untouched(
            &granted.keys,
            &keys(&mut raw).await,
            "after the stale release",
        );
        assert_eq!(extensions(&mut raw).await, granted.extensions);
        rival.finish();
        client.shutdown().await;
    });
}

fn watchdog_current_thread(leased: Leased) {
    a_blocked_watchdog(leased, Flavor::CurrentThread);
}

fn watchdog_multi_thread(leased: Leased) {
    a_blocked_watchdog(leased, Flavor::MultiThread);
}

per_leased!(#[test] fn watchdog_current_thread);
per_leased!(#[test] fn watchdog_multi_thread);

/// A renewal Redis ran, whose confirmation is held up on a blocked worker past the lease's
/// deadline, while the guard (read on another thread) reports the loss: once confirmed, it moves
/// nothing. `valid_until` stays where it was when the loss was reported (it used to jump a
/// renewal period ahead, a guard both lost and valid), and the release, which still finds the
/// hold in Redis, frees it and says `LeaseLost`.
fn a_late_confirmation(leased: Leased) {
    let server = RedisServer::start();
    Flavor::MultiThread.runtime().block_on(async {
        init_probe();
        let mut raw = server.conn().await;
        let client = starved_client(&server);
        let name = unique_name(&format!("late-confirmation-{leased}"));
        leased.prepare(&client, &name).await;
        let guard = leased.acquire(&client, &name).await.unwrap();
        let (go_tx, go) = std_mpsc::channel::<()>();
        hook("renewal", "lock", &name, move || {
            let _ = go.recv_timeout(BOUND);
        });
        // User code on another thread looks at the guard by the clock: with a worker blocked,
        // tokio may drive no timer at all (seen: a 100 ms sleep taking the whole block), so
        // `lost()` can only fire once the runtime runs again; `is_lost()` needs no runtime.
        let start = Instant::now();
        while !guard.is_lost() {
            assert!(start.elapsed() < BOUND, "the guard never reported the loss");
            thread::sleep(ms(5));
        }
        // Lost from the drift margin before `valid_until` on (Redis still has the hold).
        let truth = Truth::of(&guard);
        assert!(truth.lost && truth.signalled, "{leased}: {truth:?}");
        go_tx.send(()).unwrap();
        seen(&name, None, "lease renewed").await;
        assert_eq!(
            guard.valid_until(),
            truth.valid_until,
            "{leased}: a renewal confirmed after the loss moved valid_until"
        );
        assert!(guard.is_lost());

        let err = guard.release().await.unwrap_err();
        assert!(matches!(err, Error::LeaseLost { .. }), "{leased}: {err}");
        let left: Vec<String> = raw.keys(format!("*{name}*")).await.unwrap();
        match leased {
            // The count, back to its one permit.
            Leased::Permits => {
                assert_eq!(left, vec![name.clone()]);
                let permits: String = raw.get(&name).await.unwrap();
                assert_eq!(permits, "1");
            }
            _ => assert_eq!(left, Vec::<String>::new()),
        }
        client.shutdown().await;
    });
}

#[test]
fn a_late_confirmation_moves_nothing_for_a_lock() {
    a_late_confirmation(Leased::Lock);
}

#[test]
fn a_late_confirmation_moves_nothing_for_permits() {
    a_late_confirmation(Leased::Permits);
}

/// `with_lock` whose section blocks the runtime until the rival holds the lock: the call
/// returns the loss, not the section's value, with or without `stop_on_lost` (a section that
/// blocks inside one poll cannot be stopped, but its result is not vouched for).
#[test]
fn a_with_lock_section_that_blocks_past_its_lease_returns_the_loss() {
    let server = RedisServer::start();
    Flavor::CurrentThread.runtime().block_on(async {
        init_probe();
        let client = starved_client(&server);
        for stop_on_lost in [false, true] {
            let name = unique_name("starved-with-lock");
            let rival = std::sync::Arc::new(Mutex::new(None));
            let section = {
                let (rival, url, name) = (rival.clone(), server.url(), name.clone());
                move || async move {
                    let mut started = Rival::start(url, Leased::Lock, name);
                    let granted = Rival::wait_granted(&started.granted.take().unwrap());
                    *rival.lock().unwrap() = Some(started);
                    granted.expect("the rival was not granted");
                    Ok::<_, Error>(42)
                }
            };
            let result = client
                .lock(&name)
                .with_lock_options(&WithLockOptions::new().stop_on_lost(stop_on_lost), section)
                .await;
            let err = result.expect_err("a section past its lease returned its value");
            assert!(err.is_not_held(), "stop_on_lost {stop_on_lost}: {err}");
            let rival = rival.lock().unwrap().take().unwrap();
            rival.finish();
        }
        client.shutdown().await;
    });
}
