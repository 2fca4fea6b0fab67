//! `RedLock` (Redisson's deprecated `RedissonRedLock`, docs/LAYOUT.md §6.7): a majority of
//! locks on independent servers. Each test starts its own servers, one client per server
//! with a 300 ms command timeout, and stops servers with SIGSTOP (`pause`) to play a server
//! that does not answer; it asserts which keys and hash fields exist on the live servers.

mod common;

use std::time::{Duration, Instant};

use common::{Kind, RedisServer, exists, ms, pttl, state, unique_name};
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockGuard, LockOptions, Owner, RedLock};

/// The command timeout of the tests' clients: a stopped server costs this much per call.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(300);

/// A client of `url` that gives up on a command after [`COMMAND_TIMEOUT`].
fn quick_client(url: &str) -> Client {
    Client::builder()
        .url(url)
        .command_timeout(COMMAND_TIMEOUT)
        .connect_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap()
}

/// `n` servers, a raw connection to each, and one client per server.
struct Cluster {
    servers: Vec<RedisServer>,
    raws: Vec<MultiplexedConnection>,
    clients: Vec<Client>,
}

impl Cluster {
    async fn start(n: usize) -> Self {
        let servers: Vec<RedisServer> = (0..n).map(|_| RedisServer::start()).collect();
        let mut raws = Vec::new();
        for s in &servers {
            raws.push(s.conn().await);
        }
        let clients = servers.iter().map(|s| quick_client(&s.url())).collect();
        Self {
            servers,
            raws,
            clients,
        }
    }

    /// A RedLock over the lock `name` of every client.
    async fn redlock(&self, name: &str) -> RedLock {
        RedLock::new(self.clients.iter().map(|c| c.lock(name)))
            .await
            .unwrap()
    }

    /// Asserts that the servers `held` hold `name` for `owner` alone, and that the others
    /// that are not `stopped` do not have the key.
    async fn assert_held(&mut self, name: &str, owner: Owner, held: &[usize], stopped: &[usize]) {
        for i in 0..self.servers.len() {
            if stopped.contains(&i) {
                continue;
            }
            if held.contains(&i) {
                assert_eq!(
                    state(&mut self.raws[i], name).await,
                    Kind::Lock.hold_state(&self.clients[i], owner, 1),
                    "server {i}"
                );
            } else {
                assert!(!exists(&mut self.raws[i], name).await, "server {i}");
            }
        }
    }

    /// Resumes every server (stopped ones included: SIGCONT is harmless) and shuts the
    /// clients down.
    async fn finish(self) {
        for s in &self.servers {
            s.resume();
        }
        for c in &self.clients {
            c.shutdown().await;
        }
    }
}

/// The guards' server indexes, by their position in `clients`.
fn holders(guard: &LockGuard, clients: &[Client], name: &str) -> usize {
    assert!(guard.parts().iter().all(|g| g.name() == name));
    assert!(guard.parts().len() <= clients.len());
    guard.parts().len()
}

async fn acquires_with_every_server_up(n: usize) {
    let mut cluster = Cluster::start(n).await;
    let name = unique_name("redlock");
    let redlock = cluster.redlock(&name).await;
    assert_eq!(redlock.quorum(), n / 2 + 1);

    let opts = LockOptions::new().lease(Duration::from_secs(10));
    let guard = redlock
        .try_lock_with_options(Duration::from_secs(1), &opts)
        .await
        .unwrap()
        .expect("every server is up");
    assert_eq!(holders(&guard, &cluster.clients, &name), n);
    assert_eq!(guard.needed(), n / 2 + 1);
    let all: Vec<usize> = (0..n).collect();
    cluster.assert_held(&name, guard.owner(), &all, &[]).await;
    for raw in &mut cluster.raws {
        let ttl = pttl(raw, &name).await;
        assert!((9_000..=10_000).contains(&ttl), "pttl {ttl}");
    }
    // Held: another RedLock over the same servers gets nothing, and leaves nothing.
    let others: Vec<Client> = cluster
        .servers
        .iter()
        .map(|s| quick_client(&s.url()))
        .collect();
    let rival = RedLock::new(others.iter().map(|c| c.lock(&name)))
        .await
        .unwrap();
    assert!(rival.try_lock().await.unwrap().is_none());
    assert!(rival.try_lock_for(ms(200)).await.unwrap().is_none());
    cluster.assert_held(&name, guard.owner(), &all, &[]).await;

    guard.unlock().await.unwrap();
    cluster.assert_held(&name, Owner::new(0), &[], &[]).await;
    let guard = rival.lock().await.unwrap();
    guard.unlock().await.unwrap();
    for c in &others {
        c.shutdown().await;
    }
    cluster.finish().await;
}

#[tokio::test]
async fn three_servers_all_up() {
    acquires_with_every_server_up(3).await;
}

#[tokio::test]
async fn five_servers_all_up() {
    acquires_with_every_server_up(5).await;
}

/// Stops the servers `stopped` of `n` and tries the RedLock for `wait`: `Some` holders
/// expected on the others when they are a majority, nothing left anywhere live otherwise.
async fn with_stopped_servers(n: usize, stopped: &[usize], wait: Duration) {
    let mut cluster = Cluster::start(n).await;
    let name = unique_name("redlock");
    let redlock = cluster.redlock(&name).await;
    for &i in stopped {
        cluster.servers[i].pause();
    }
    let live: Vec<usize> = (0..n).filter(|i| !stopped.contains(i)).collect();
    let opts = LockOptions::new().lease(Duration::from_secs(5));
    let start = Instant::now();
    let result = redlock.try_lock_with_options(wait, &opts).await;
    let took = start.elapsed();
    assert!(
        took < wait + Duration::from_secs(1),
        "took {took:?} for a wait of {wait:?}"
    );
    if live.len() >= redlock.quorum() {
        let guard = result.unwrap().expect("a majority is up");
        assert_eq!(holders(&guard, &cluster.clients, &name), live.len());
        assert!(!guard.is_lost());
        cluster
            .assert_held(&name, guard.owner(), &live, stopped)
            .await;
        guard.unlock().await.unwrap();
        cluster
            .assert_held(&name, Owner::new(0), &[], stopped)
            .await;
    } else {
        // Only servers failed, nobody else holds the lock: their error is reported.
        match result {
            Err(e) => assert!(e.is_timeout(), "{e:?}"),
            Ok(g) => panic!("no majority, yet {g:?}"),
        }
        cluster
            .assert_held(&name, Owner::new(0), &[], stopped)
            .await;
    }
    cluster.finish().await;
}

#[tokio::test]
async fn one_of_three_stopped_acquires_with_two() {
    with_stopped_servers(3, &[1], Duration::from_secs(1)).await;
}

#[tokio::test]
async fn two_of_three_stopped_fails_and_leaves_nothing() {
    with_stopped_servers(3, &[0, 2], Duration::from_secs(1)).await;
}

#[tokio::test]
async fn two_of_five_stopped_acquires_with_three() {
    with_stopped_servers(5, &[1, 3], Duration::from_secs(2)).await;
}

#[tokio::test]
async fn three_of_five_stopped_fails_and_leaves_nothing() {
    with_stopped_servers(5, &[0, 2, 4], Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_minority_held_elsewhere_still_gives_a_quorum() {
    let mut cluster = Cluster::start(3).await;
    let name = unique_name("redlock");
    let redlock = cluster.redlock(&name).await;
    let stranger = quick_client(&cluster.servers[0].url());
    let held = stranger.lock(&name).lock().await.unwrap();

    let guard = redlock
        .try_lock_for(ms(500))
        .await
        .unwrap()
        .expect("2 of 3");
    assert_eq!(guard.parts().len(), 2);
    cluster
        .assert_held(&name, guard.owner(), &[1, 2], &[0])
        .await;
    assert_eq!(
        state(&mut cluster.raws[0], &name).await,
        Kind::Lock.hold_state(&stranger, held.owner(), 1)
    );
    guard.unlock().await.unwrap();

    // A majority held elsewhere: `None` (contention, not an error), nothing left.
    let held2 = quick_client(&cluster.servers[1].url());
    let h2 = held2.lock(&name).lock().await.unwrap();
    assert!(redlock.try_lock_for(ms(300)).await.unwrap().is_none());
    assert!(!exists(&mut cluster.raws[2], &name).await);
    h2.unlock().await.unwrap();
    held.unlock().await.unwrap();
    stranger.shutdown().await;
    held2.shutdown().await;
    cluster.finish().await;
}

#[tokio::test]
async fn bad_input_is_refused() {
    let cluster = Cluster::start(3).await;
    let name = unique_name("redlock");
    let invalid = |r: &Result<RedLock, Error>| matches!(r, Err(Error::InvalidArgument(_)));

    // Fewer than 3 locks.
    let r = RedLock::new(cluster.clients[..2].iter().map(|c| c.lock(&name))).await;
    assert!(invalid(&r), "{r:?}");
    // Two locks of one client (a clone is the same client).
    let c0 = &cluster.clients[0];
    let r = RedLock::new([
        c0.lock(&name),
        c0.clone().lock(unique_name("redlock")),
        cluster.clients[1].lock(&name),
    ])
    .await;
    assert!(invalid(&r), "{r:?}");
    // Two clients of one server.
    let twin = quick_client(&cluster.servers[0].url());
    let r = RedLock::new([
        c0.lock(&name),
        twin.lock(&name),
        cluster.clients[1].lock(&name),
    ])
    .await;
    assert!(invalid(&r), "{r:?}");
    // One server under two names (another database of it is still that server).
    let other_db = quick_client(&format!("{}/1", cluster.servers[2].url()));
    let r = RedLock::new([
        c0.lock(&name),
        cluster.clients[2].lock(&name),
        other_db.lock(&name),
        cluster.clients[1].lock(&name),
    ])
    .await;
    assert!(invalid(&r), "{r:?}");
    // A server that cannot tell its identity: its error.
    let down = {
        let s = RedisServer::start();
        s.url()
    };
    let gone = quick_client(&down);
    let r = RedLock::new([
        c0.lock(&name),
        cluster.clients[1].lock(&name),
        gone.lock(&name),
    ])
    .await;
    assert!(
        matches!(
            r,
            Err(Error::Redis(_) | Error::Connection { .. } | Error::Timeout { .. })
        ),
        "{r:?}"
    );
    // Independent servers: accepted.
    assert!(
        RedLock::new(cluster.clients.iter().map(|c| c.lock(&name)))
            .await
            .is_ok()
    );
    for c in [twin, other_db, gone] {
        c.shutdown().await;
    }
    cluster.finish().await;
}
