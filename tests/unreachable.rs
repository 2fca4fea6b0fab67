//! Redis unreachable when a wait begins (issue 29, item 7): every waiting acquire (each lock
//! kind, MultiLock and RedLock, both semaphores, the latch) retries refused connections with
//! back-off from its first attempt until its wait ends, and acquires if the server comes back
//! in time; a bounded wait in which Redis never answered ends with `Error::Connection` (what
//! failed, where, for which name), not with "not acquired". Calls that do not wait fail at once
//! with the same contextual error. `Error::is_transient` says a caller may retry it.
//!
//! Each test is bounded by `BOUND` (a hang is a failure, not a stuck CI run) and asserts
//! outcomes: the error's fields, a grant after the restart, what Redis holds.

mod common;

use std::net::TcpListener;
use std::time::Duration;

use common::{RedisServer, exists, queue_key, unique_name};
use redisson_sync::{Client, DistributedLock, Error, LockGuard, MultiLock, RedLock};
use tokio::time::{Instant, timeout};

/// The most any test here may take; far above what it needs, even on a loaded machine.
const BOUND: Duration = Duration::from_secs(60);

/// A loopback port nothing listens on (bound once by the OS, then released).
fn dead_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A client of `url` with short timeouts (the connection is refused at once anyway).
fn client_of(url: &str) -> Client {
    Client::builder()
        .url(url)
        .command_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .recheck_interval(Duration::from_millis(200))
        .build()
        .unwrap()
}

/// Every lock kind the client makes, by label, each on a name of its own starting with
/// `prefix`.
fn every_lock(client: &Client, prefix: &str) -> Vec<(&'static str, Box<dyn DistributedLock>)> {
    let name = || unique_name(prefix);
    vec![
        ("lock", Box::new(client.lock(name()))),
        ("fair", Box::new(client.fair_lock(name()))),
        ("read", Box::new(client.rw_lock(name()).read_lock())),
        ("write", Box::new(client.rw_lock(name()).write_lock())),
        ("fenced", Box::new(client.fenced_lock(name()))),
        ("spin", Box::new(client.spin_lock(name()))),
        ("non-reentrant", Box::new(client.non_reentrant_lock(name()))),
        (
            "non-reentrant fair",
            Box::new(client.non_reentrant_fair_lock(name())),
        ),
        ("token", Box::new(client.token_lock(name()))),
    ]
}

/// One waiting primitive: a lock of any kind (MultiLock and RedLock included), a semaphore, a
/// permit-expirable semaphore, a latch.
enum Waiting {
    Lock(Box<dyn DistributedLock>),
    Semaphore(redisson_sync::Semaphore),
    Expirable(redisson_sync::PermitExpirableSemaphore),
    Latch(redisson_sync::CountDownLatch),
}

/// What a wait got, to be checked and given back.
enum Got {
    Lock(LockGuard),
    Permits(redisson_sync::Permits),
    Ids(Vec<redisson_sync::PermitId>),
    Opened,
}

impl Waiting {
    /// Every waiting primitive of `client`, each on a name of its own starting with `prefix`.
    fn all(client: &Client, prefix: &str) -> Vec<(String, String, Self)> {
        let mut all = Vec::new();
        for (label, lock) in every_lock(client, prefix) {
            let name = lock.name().to_owned();
            all.push((label.to_owned(), name, Self::Lock(lock)));
        }
        let (a, b) = (unique_name(prefix), unique_name(prefix));
        let multi = MultiLock::new([client.lock(&a), client.lock(&b)]).unwrap();
        all.push(("multi".into(), a, Self::Lock(Box::new(multi))));
        let name = unique_name(prefix);
        all.push((
            "semaphore".into(),
            name.clone(),
            Self::Semaphore(client.semaphore(&name)),
        ));
        let name = unique_name(prefix);
        all.push((
            "permit-expirable semaphore".into(),
            name.clone(),
            Self::Expirable(client.permit_expirable_semaphore(&name)),
        ));
        let name = unique_name(prefix);
        all.push((
            "latch".into(),
            name.clone(),
            Self::Latch(client.count_down_latch(&name)),
        ));
        all
    }

    /// Waits at most `wait` (`None`: the untimed form): `Some` when granted.
    async fn wait(&self, wait: Option<Duration>) -> Result<Option<Got>, Error> {
        Ok(match (self, wait) {
            (Self::Lock(l), Some(w)) => l.try_lock_for(w).await?.map(Got::Lock),
            (Self::Lock(l), None) => Some(Got::Lock(l.lock().await?)),
            (Self::Semaphore(s), Some(w)) => s.try_acquire_for(1, w).await?.map(Got::Permits),
            (Self::Semaphore(s), None) => Some(Got::Permits(s.acquire(1).await?)),
            (Self::Expirable(s), Some(w)) => s.try_acquire_for(1, w, None).await?.map(Got::Ids),
            (Self::Expirable(s), None) => Some(Got::Ids(s.acquire(1, None).await?)),
            (Self::Latch(l), Some(w)) => l.await_for(w).await?.then_some(Got::Opened),
            (Self::Latch(l), None) => {
                l.await_open().await?;
                Some(Got::Opened)
            }
        })
    }

    /// A call that does not wait: fails at once when Redis is unreachable.
    async fn no_wait(&self) -> Result<(), Error> {
        match self {
            Self::Lock(l) => l.try_lock().await.map(drop),
            Self::Semaphore(s) => s.try_acquire(1).await.map(drop),
            Self::Expirable(s) => s.try_acquire(1, None).await.map(drop),
            Self::Latch(l) => l.count().await.map(drop),
        }
    }

    /// Inspection: fails at once too.
    async fn inspect(&self) -> Result<(), Error> {
        match self {
            Self::Lock(l) => l.is_locked().await.map(drop),
            Self::Semaphore(s) => s.available_permits().await.map(drop),
            Self::Expirable(s) => s.available_permits().await.map(drop),
            Self::Latch(l) => l.count().await.map(drop),
        }
    }

    /// Once Redis is back (empty): what the wait needs to be granted (a permit for the
    /// semaphores; the locks and the latch are free and open already).
    async fn make_available(&self) {
        match self {
            Self::Semaphore(s) => {
                s.add_permits(1).await.unwrap();
            }
            Self::Expirable(s) => {
                s.add_permits(1).await.unwrap();
            }
            Self::Lock(_) | Self::Latch(_) => {}
        }
    }

    /// Checks what a grant holds in Redis, then gives it back and checks that it is back.
    async fn check_and_return(&self, label: &str, got: Got) {
        match (self, got) {
            (Self::Lock(l), Got::Lock(guard)) => {
                assert!(
                    l.is_locked().await.unwrap(),
                    "{label}: held after the grant"
                );
                guard.unlock().await.unwrap();
                assert!(!l.is_locked().await.unwrap(), "{label}: free after unlock");
            }
            (Self::Semaphore(s), Got::Permits(permits)) => {
                assert_eq!(s.available_permits().await.unwrap(), 0, "{label}");
                permits.release().await.unwrap();
                assert_eq!(s.available_permits().await.unwrap(), 1, "{label}");
            }
            (Self::Expirable(s), Got::Ids(ids)) => {
                assert_eq!(ids.len(), 1, "{label}");
                assert_eq!(s.available_permits().await.unwrap(), 0, "{label}");
                s.release(&ids).await.unwrap();
                assert_eq!(s.available_permits().await.unwrap(), 1, "{label}");
            }
            (Self::Latch(l), Got::Opened) => assert_eq!(l.count().await.unwrap(), 0, "{label}"),
            _ => panic!("{label}: a grant of another primitive"),
        }
    }
}

/// `e` is the refusal of a connection to `server`, for one of `names`, named in its fields and
/// text, transient, and not a timeout.
fn assert_refused(label: &str, e: &Error, server: &str, names: &[&str]) {
    assert_connection(label, e, server, names);
    if let Error::Connection { source, .. } = e {
        assert!(source.is_connection_refusal(), "{label}: {source:?}");
    }
}

/// `e` is a failed connection (refused, reset, dropped) to `server`, for one of `names`, named
/// in its fields and text, transient, and not a timeout.
fn assert_connection(label: &str, e: &Error, server: &str, names: &[&str]) {
    let Error::Connection {
        server: at,
        operation,
        name,
        source,
    } = e
    else {
        panic!("{label}: expected Error::Connection, got {e:?}");
    };
    assert_eq!(at, server, "{label}: {e}");
    assert!(!operation.is_empty(), "{label}: {e:?}");
    assert!(
        names.contains(&name.as_str()),
        "{label}: {name:?} not in {names:?}"
    );
    assert!(
        source.is_io_error() || source.is_connection_dropped(),
        "{label}: {source:?}"
    );
    assert!(e.is_transient(), "{label}: {e}");
    assert!(!e.is_timeout(), "{label}: {e}");
    let text = e.to_string();
    for part in [server, operation, name.as_str()] {
        assert!(text.contains(part), "{label}: {part:?} not in {text:?}");
    }
}

/// Nothing listens at the address for the whole wait: every bounded wait keeps trying until
/// its deadline (it does not end at the first refusal) and then says the server was
/// unreachable, with the address, the operation and the name; the password is never shown.
#[tokio::test]
async fn a_bounded_wait_on_a_dead_server_retries_until_its_deadline_then_names_what_failed() {
    timeout(BOUND, async {
        let port = dead_port();
        let server = format!("127.0.0.1:{port}");
        let client = client_of(&format!("redis://:sekrit@{server}"));
        let wait = Duration::from_millis(300);
        for (label, name, waiting) in Waiting::all(&client, "unreachable-wait") {
            let started = Instant::now();
            let e = match waiting.wait(Some(wait)).await {
                Err(e) => e,
                Ok(got) => panic!("{label}: {:?}", got.is_some()),
            };
            // The deadline is a lower bound a loaded machine cannot break (it only delays).
            assert!(
                started.elapsed() >= wait,
                "{label}: ended before its wait, at {:?}: {e}",
                started.elapsed()
            );
            assert_refused(&label, &e, &server, &[name.as_str()]);
            assert!(!format!("{e} {e:?}").contains("sekrit"), "{label}: {e:?}");
        }
        client.shutdown().await;
    })
    .await
    .expect("bounded");
}

/// Calls that do not wait (a single attempt, an inspection, a release path) fail at once with
/// the same contextual error: they never retry on their own.
#[tokio::test]
async fn calls_that_do_not_wait_fail_at_once_with_the_address_operation_and_name() {
    timeout(BOUND, async {
        let port = dead_port();
        let server = format!("127.0.0.1:{port}");
        let client = client_of(&format!("redis://{server}"));
        for (label, name, waiting) in Waiting::all(&client, "unreachable-now") {
            for (what, result) in [
                ("single attempt", waiting.no_wait().await),
                ("inspection", waiting.inspect().await),
            ] {
                let e = result.expect_err(&label);
                assert_refused(&format!("{label} {what}"), &e, &server, &[name.as_str()]);
            }
        }
        let lock = client.lock("unreachable-force");
        let e = lock.force_unlock().await.unwrap_err();
        assert_refused("force_unlock", &e, &server, &["unreachable-force"]);
        match &e {
            Error::Connection { operation, .. } => assert_eq!(*operation, "force_unlock"),
            other => panic!("{other:?}"),
        }
        client.shutdown().await;
    })
    .await
    .expect("bounded");
}

/// The checked start of the Quick start: `ClientBuilder::connect` against a dead address fails
/// there, naming it, instead of at the first lock call.
#[tokio::test]
async fn connect_on_a_dead_address_fails_at_startup_naming_it() {
    timeout(BOUND, async {
        let server = format!("127.0.0.1:{}", dead_port());
        let e = Client::builder()
            .url(format!("redis://{server}"))
            .connect_timeout(Duration::from_millis(500))
            .connect()
            .await
            .unwrap_err();
        assert_refused("connect", &e, &server, &[""]);
        match &e {
            Error::Connection { operation, .. } => assert_eq!(*operation, "connect"),
            other => panic!("{other:?}"),
        }
    })
    .await
    .expect("bounded");
}

/// Redis stopped before the waits begin and started again while they wait: every wait, bounded
/// and untimed, is granted once it is back, and holds what a grant holds; an untimed one keeps
/// trying meanwhile (none ends while the server is down).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_wait_begun_while_redis_is_down_acquires_when_it_comes_back() {
    timeout(BOUND, async {
        let mut server = RedisServer::start();
        let client = client_of(&server.url());
        // The server knows the client before it goes (the pool has a connection to lose).
        assert!(!client.lock("warm-up").is_locked().await.unwrap());
        server.stop();

        let mut waits = Vec::new();
        for (wait, prefix) in [
            (Some(Duration::from_secs(40)), "down-bounded"),
            (None, "down-untimed"),
        ] {
            for (label, _, waiting) in Waiting::all(&client, prefix) {
                let label = format!("{label} ({prefix})");
                let waiting = std::sync::Arc::new(waiting);
                let task = {
                    let waiting = waiting.clone();
                    tokio::spawn(async move { waiting.wait(wait).await })
                };
                waits.push((label, waiting, task));
            }
        }
        // Long enough for every wait's first attempt to have been refused (a wait that ended
        // there would be finished).
        tokio::time::sleep(Duration::from_millis(500)).await;
        for (label, _, task) in &waits {
            assert!(!task.is_finished(), "{label} ended while Redis was down");
        }
        let server = tokio::task::spawn_blocking(move || {
            server.restart();
            server
        })
        .await
        .unwrap();
        for (_, waiting, _) in &waits {
            waiting.make_available().await;
        }
        for (label, waiting, task) in waits {
            let got = task
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            let got = got.unwrap_or_else(|| panic!("{label}: not granted"));
            waiting.check_and_return(&label, got).await;
        }
        client.shutdown().await;
        drop(server);
    })
    .await
    .expect("bounded");
}

/// A RedLock whose servers are all down when its wait begins: the bounded wait ends with the
/// connection error (no lock was busy); a second wait acquires once they are back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_waits_through_its_servers_being_down() {
    timeout(BOUND, async {
        let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
        let clients: Vec<Client> = servers.iter().map(|s| client_of(&s.url())).collect();
        let name = unique_name("unreachable-red");
        let untimed_name = unique_name("unreachable-red-untimed");
        let redlock = |name: String| {
            let clients = &clients;
            async move {
                std::sync::Arc::new(
                    RedLock::new(clients.iter().map(|c| c.lock(&name)))
                        .await
                        .unwrap(),
                )
            }
        };
        let red = redlock(name.clone()).await;
        let red_untimed = redlock(untimed_name.clone()).await;
        for server in &mut servers {
            server.stop();
        }
        let addrs: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
        let e = red
            .try_lock_for(Duration::from_millis(300))
            .await
            .unwrap_err();
        let Error::Connection { server, .. } = &e else {
            panic!("expected Error::Connection, got {e:?}");
        };
        assert!(addrs.contains(server), "{server} not in {addrs:?}");
        assert_connection("redlock", &e, server, &[name.as_str()]);

        let bounded = {
            let red = red.clone();
            tokio::spawn(async move { red.try_lock_for(Duration::from_secs(40)).await })
        };
        let untimed = tokio::spawn(async move { red_untimed.lock().await });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!bounded.is_finished(), "the bounded wait ended while down");
        assert!(!untimed.is_finished(), "the untimed wait ended while down");
        let servers = tokio::task::spawn_blocking(move || {
            for server in &mut servers {
                server.restart();
            }
            servers
        })
        .await
        .unwrap();
        let bounded = bounded.await.unwrap().unwrap().expect("granted");
        let untimed = untimed.await.unwrap().unwrap();
        let mut raws = Vec::new();
        for server in &servers {
            raws.push(server.conn().await);
        }
        for raw in &mut raws {
            assert!(exists(raw, &name).await, "the RedLock holds every server");
            assert!(
                exists(raw, &untimed_name).await,
                "the RedLock holds every server"
            );
        }
        bounded.unlock().await.unwrap();
        untimed.unlock().await.unwrap();
        for raw in &mut raws {
            assert!(!exists(raw, &name).await, "released on every server");
            assert!(
                !exists(raw, &untimed_name).await,
                "released on every server"
            );
        }
        for client in clients {
            client.shutdown().await;
        }
    })
    .await
    .expect("bounded");
}

/// A fair waiter that failed while Redis was unreachable leaves nothing: no queue entry, no
/// key, no subscription once Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_failed_leaves_nothing_behind() {
    timeout(BOUND, async {
        let mut server = RedisServer::start();
        let client = client_of(&server.url());
        let name = unique_name("unreachable-trace");
        let fair = client.fair_lock(&name);
        assert!(!fair.is_locked().await.unwrap());
        server.stop();
        let e = fair
            .try_lock_for(Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Connection { .. }), "{e:?}");
        let server = tokio::task::spawn_blocking(move || {
            server.restart();
            server
        })
        .await
        .unwrap();
        // Another wait on the same client goes through (its subscriptions work again) ...
        let other = client.lock(unique_name("unreachable-after"));
        other
            .try_lock_for(Duration::from_secs(10))
            .await
            .unwrap()
            .expect("free")
            .unlock()
            .await
            .unwrap();
        // ... and the failed one left no key, no queue entry, no subscription.
        let mut raw = server.conn().await;
        assert!(!exists(&mut raw, &name).await);
        assert!(!exists(&mut raw, &queue_key(&name)).await);
        let pattern = format!("{}*", common::channel(&name));
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg(&pattern)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(channels.is_empty(), "{pattern}: {channels:?}");
        client.shutdown().await;
    })
    .await
    .expect("bounded");
}
