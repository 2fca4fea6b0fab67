//! TLS (issue 13, the `tls` feature): `rediss://` to a `redis-server` listening with
//! `--tls-port` and a certificate the test makes (`testkit::TlsFiles`, the `openssl`
//! command): locks, their unlock messages (the pub/sub connection is TLS too) and the
//! watchdog work; a server certificate the client does not trust is refused; a server that
//! asks for client certificates gets the configured one; a Redis Cluster over TLS (nodes and
//! bus) and a Sentinel setup over TLS (Sentinels, data nodes, replication) serve locks, wake
//! waiters by message and, behind Sentinel, follow a failover. Keys are checked through the
//! servers' plain ports.
#![cfg(feature = "tls")]

mod common;

use std::time::{Duration, Instant};

use common::{exists, unique_name};
use redisson_sync::{BuildError, Client, Config, Owner};
use testkit::{RedisServer, TlsFiles};

/// `true` (and a note) when the server build has no TLS (`testkit::ServerBuild::supports_tls`,
/// probed): the test is skipped.
fn no_tls() -> bool {
    let build = testkit::ServerBuild::current();
    let none = !build.supports_tls();
    if none {
        eprintln!("skipped: server build {} has no TLS", build.name());
    }
    none
}

fn tls_url(port: u16) -> String {
    format!("rediss://127.0.0.1:{port}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_work_over_tls_and_an_untrusted_certificate_is_refused() {
    if no_tls() {
        return;
    }
    let files = TlsFiles::generate();
    let (server, tls_port) = RedisServer::start_tls(&files, &[]);
    let mut plain = server.conn().await;
    let ca = files.ca_cert().to_string_lossy().into_owned();
    let client = Client::builder()
        .url(tls_url(tls_port))
        .tls_ca_cert(&ca)
        .watchdog_timeout(Duration::from_secs(3))
        .recheck_interval(Duration::from_secs(60))
        .connect()
        .await
        .unwrap();
    let name = unique_name("tls");
    let lock = client.lock(&name);
    let guard = lock.lock().await.unwrap();
    assert!(exists(&mut plain, &name).await);
    // A waiter of another client is woken by the unlock message (its re-check is a minute
    // away), over its own TLS pub/sub connection.
    let other = Client::builder()
        .url(tls_url(tls_port))
        .tls_ca_cert(&ca)
        .recheck_interval(Duration::from_secs(60))
        .build()
        .unwrap();
    let waiter = {
        let lock = other.lock(&name);
        tokio::spawn(async move {
            lock.lock_with_options(&redisson_sync::LockOptions::new().owner(Owner::new(9)))
                .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let subscribers: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(format!("redisson_lock__channel:{{{name}}}"))
            .query_async(&mut plain)
            .await
            .unwrap();
        if subscribers[0].1 == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the waiter never subscribed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Past the lease: the watchdog renews over TLS.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(!guard.is_lost());
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let woken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken")
        .unwrap()
        .unwrap();
    assert!(released.elapsed() < Duration::from_secs(5));
    woken.unlock().await.unwrap();
    assert!(!exists(&mut plain, &name).await);
    client.shutdown().await;
    other.shutdown().await;

    // Without the CA: the system's roots do not know the test's CA.
    let err = Client::builder()
        .url(tls_url(tls_port))
        .connect()
        .await
        .unwrap_err();
    let text = err.to_string().to_lowercase();
    assert!(
        text.contains("certificate") || text.contains("issuer"),
        "{err}"
    );
    // A CA file that is not there: refused when the client is built.
    let mut config = Config::from_url(tls_url(tls_port));
    config.tls_ca_cert = Some("/nonexistent/ca.crt".into());
    let err = config.create_client().unwrap_err();
    assert!(matches!(err, BuildError::InvalidConfig(_)), "{err}");
    assert!(err.to_string().contains("tls_ca_cert"), "{err}");
}

#[tokio::test]
async fn a_server_that_asks_for_client_certificates_gets_the_configured_one() {
    if no_tls() {
        return;
    }
    let files = TlsFiles::generate();
    let (_server, tls_port) = RedisServer::start_tls(&files, &["--tls-auth-clients", "yes"]);
    let ca = files.ca_cert().to_string_lossy().into_owned();
    // Without a client certificate the server closes the connection.
    let refused = Client::builder()
        .url(tls_url(tls_port))
        .tls_ca_cert(&ca)
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await;
    assert!(refused.is_err(), "connected without a client certificate");
    // The server's own certificate is also a client certificate (clientAuth) of the CA.
    let client = Client::builder()
        .url(tls_url(tls_port))
        .tls_ca_cert(&ca)
        .tls_client_cert(
            files.server_cert().to_string_lossy(),
            files.server_key().to_string_lossy(),
        )
        .connect()
        .await
        .unwrap();
    let guard = client.lock(unique_name("mtls")).lock().await.unwrap();
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_serves_every_master() {
    if no_tls() {
        return;
    }
    let files = TlsFiles::generate();
    let cluster = tls_cluster(&files, 0).await;
    let client = tls_cluster_client(&cluster, &files).await;
    let waiters = tls_cluster_client(&cluster, &files).await;
    // A name on each master (found through the plain ports).
    let mut names: Vec<(String, u16)> = Vec::new();
    for i in 0..200 {
        let name = format!("{}:{i}", unique_name("tls-cluster"));
        let port = cluster.node_for_key(&name).port;
        if !names.iter().any(|(_, p)| *p == port) {
            names.push((name, port));
        }
        if names.len() == 3 {
            break;
        }
    }
    assert_eq!(names.len(), 3, "names on every master: {names:?}");
    for (name, port) in &names {
        let guard = client.lock(name).lock().await.unwrap();
        let mut plain = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        assert!(exists(&mut plain, name).await, "{name} not on its master");
        // A waiter of another client is woken by the unlock message (sharded pub/sub over
        // TLS); its re-check is a minute away.
        let waiter = {
            let lock = waiters.lock(name);
            tokio::spawn(async move { lock.lock().await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let released = Instant::now();
        guard.unlock().await.unwrap();
        let woken = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter was not woken")
            .unwrap()
            .unwrap();
        assert!(released.elapsed() < Duration::from_secs(5));
        woken.unlock().await.unwrap();
        assert!(!exists(&mut plain, name).await);
    }
    client.shutdown().await;
    waiters.shutdown().await;
}

/// Three masters with `replicas` each, over TLS with `files`.
async fn tls_cluster(files: &TlsFiles, replicas: usize) -> testkit::RedisCluster {
    let builder = testkit::RedisCluster::builder()
        .masters(3)
        .replicas(replicas)
        .tls(files);
    tokio::task::spawn_blocking(move || builder.start())
        .await
        .unwrap()
}

/// A client of `cluster` over TLS, trusting `files`' CA; re-checks of waiters a minute apart.
async fn tls_cluster_client(cluster: &testkit::RedisCluster, files: &TlsFiles) -> Client {
    Client::builder()
        .cluster(cluster.tls_seed_urls())
        .tls_ca_cert(files.ca_cert().to_string_lossy())
        .recheck_interval(Duration::from_secs(60))
        .connect()
        .await
        .unwrap()
}

/// A cluster's synced calls in flight together go in rounds on connections of their own to the
/// node (cluster_rounds.rs), opened over TLS with the client's CA like its other connections:
/// 8 acquires on one master in flight together run 8 scripts under fewer `WAIT`s there, and
/// the master lists the rounds' connection (opened by the first synced call) beside the
/// cluster client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_clusters_synced_calls_go_in_rounds_over_tls() {
    if no_tls() {
        return;
    }
    const CALLS: usize = 8;
    let files = TlsFiles::generate();
    let cluster = tls_cluster(&files, 1).await;
    // Replica sync is on by default in a cluster.
    let client = tls_cluster_client(&cluster, &files).await;
    let base = unique_name("tls-rounds");
    let port = cluster.node_for_key(&base).port;
    let names: Vec<String> = (0..1000)
        .map(|i| format!("{base}:{i}"))
        .filter(|name| cluster.node_for_key(name).port == port)
        .take(CALLS)
        .collect();
    assert_eq!(names.len(), CALLS);
    let mut plain = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // The replica acknowledges writes; then, one call at a time, every slot's connection
    // identity and replica count are read and the scripts loaded.
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query_async(&mut plain)
        .await
        .unwrap();
    assert_eq!(acked, 1, "the replica of {port} is not acknowledging");
    let clients_before = common::client_list(&mut plain, &["TYPE", "normal"])
        .await
        .len();
    for name in &names {
        let guard = client.lock(name).try_lock().await.unwrap().unwrap();
        guard.unlock().await.unwrap();
    }
    common::reset_stats(&mut plain).await;
    let guards = tokio::spawn({
        let client = client.clone();
        let names = names.clone();
        async move {
            let tries = names.iter().map(|name| {
                let lock = client.lock(name);
                async move { lock.try_lock().await }
            });
            futures_util::future::join_all(tries).await
        }
    })
    .await
    .unwrap();
    let waited = common::command_stats(&mut plain, "wait").await.calls;
    assert_eq!(common::script_calls(&mut plain).await, CALLS as u64);
    assert!(
        (1..CALLS as u64).contains(&waited),
        "{waited} WAITs for {CALLS} acquires in flight together"
    );
    let clients_after = common::client_list(&mut plain, &["TYPE", "normal"])
        .await
        .len();
    assert!(
        clients_after > clients_before,
        "no connection of the rounds: {clients_before} clients before, {clients_after} after"
    );
    for (name, guard) in names.iter().zip(guards) {
        let guard = guard.unwrap().unwrap_or_else(|| panic!("{name} not taken"));
        assert!(exists(&mut plain, name).await, "{name} not on its master");
        guard.unlock().await.unwrap();
    }
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_over_tls_finds_the_master_and_follows_a_failover() {
    if no_tls() {
        return;
    }
    let files = TlsFiles::generate();
    let setup = tokio::task::block_in_place(|| testkit::RedisSentinel::start_tls(&files));
    let ca = files.ca_cert().to_string_lossy().into_owned();
    let client = || {
        Client::builder()
            .sentinel(setup.tls_sentinel_urls(), setup.master_name())
            .tls_ca_cert(&ca)
            .watchdog_timeout(Duration::from_secs(5))
            .recheck_interval(Duration::from_secs(60))
            .connect()
    };
    let holder = client().await.unwrap();
    let waiters = client().await.unwrap();
    let name = unique_name("tls-sentinel");
    let guard = holder.lock(&name).lock().await.unwrap();
    let mut plain = setup.master().conn().await;
    assert!(exists(&mut plain, &name).await, "{name} not on the master");
    let waiter = {
        let lock = waiters.lock(&name);
        tokio::spawn(async move { lock.lock().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A failover: both clients follow it over TLS; the holder keeps its lock.
    let new = tokio::task::block_in_place(|| setup.failover()).unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let mut master = setup.server_at(new).expect("a data node").conn().await;
    assert!(exists(&mut master, &name).await, "the hold did not survive");
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    let woken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken")
        .unwrap()
        .unwrap();
    woken.unlock().await.unwrap();
    assert!(!exists(&mut master, &name).await);
    holder.shutdown().await;
    waiters.shutdown().await;
}
