//! `MultiLock` (Redisson's `RedissonMultiLock`, docs/LAYOUT.md §6.7), after Redisson's
//! `RedissonMultiLockTest`: all or nothing in list order, held and released as a
//! whole, a second multi-lock waiting for the first, one winner among contenders, locks of
//! mixed kinds and on separate servers, and bad input. Every test asserts which keys and hash
//! fields exist on the servers.

mod common;

use std::time::{Duration, Instant};

use common::{Kind, RedisServer, State, client, exists, ms, pttl, state, unique_name, wait_gone};
use redisson_sync::{Client, DistributedLock, Error, LockOptions, MultiLock, Owner};

/// Upper bound of every poll loop of this file.
const POLL_LIMIT: Duration = Duration::from_secs(5);

/// `n` fresh lock names.
fn names(n: usize) -> Vec<String> {
    (0..n).map(|_| unique_name("multi")).collect()
}

/// A multi-lock over reentrant locks `names` of `client`.
fn multi(client: &Client, names: &[String]) -> MultiLock {
    MultiLock::new(names.iter().map(|n| client.lock(n))).unwrap()
}

/// The lock hash of one reentrant-lock hold of `owner` through `client`.
fn held_by(client: &Client, owner: Owner) -> State {
    Kind::Lock.hold_state(client, owner, 1)
}

#[tokio::test]
async fn all_or_nothing_when_another_client_holds_the_second_lock() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (c, other) = (client(&server), client(&server));
    let n = names(3);
    let ml = multi(&c, &n);

    let stranger = Owner::new(99);
    let held = other
        .lock(&n[1])
        .lock_with_options(&LockOptions::new().owner(stranger))
        .await
        .unwrap();

    let start = Instant::now();
    assert!(ml.try_lock_for(ms(300)).await.unwrap().is_none());
    let took = start.elapsed();
    assert!(took >= ms(250) && took < ms(1500), "took {took:?}");
    // Nothing of the attempt is left: the first lock was released, the third never taken.
    assert!(!exists(&mut raw, &n[0]).await, "first lock released");
    assert!(!exists(&mut raw, &n[2]).await, "third lock never taken");
    assert_eq!(state(&mut raw, &n[1]).await, held_by(&other, stranger));

    // One attempt each, no wait: the same.
    assert!(ml.try_lock().await.unwrap().is_none());
    assert!(!exists(&mut raw, &n[0]).await);
    assert!(!exists(&mut raw, &n[2]).await);

    // Once the second lock is free, the whole list is taken.
    held.unlock().await.unwrap();
    let guard = ml.try_lock_for(ms(300)).await.unwrap().expect("all free");
    let owner = guard.owner();
    for name in &n {
        assert_eq!(state(&mut raw, name).await, held_by(&c, owner));
    }
    guard.unlock().await.unwrap();
    c.shutdown().await;
    other.shutdown().await;
}

#[tokio::test]
async fn held_and_released_as_a_whole() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (c, other) = (client(&server), client(&server));
    let n = names(3);
    let ml = multi(&c, &n);
    assert_eq!(ml.locks().len(), 3);

    let guard = ml.lock().await.unwrap();
    let owner = guard.owner();
    assert_eq!(guard.parts().len(), 3);
    assert_eq!(guard.needed(), 3);
    assert!(!guard.is_lost());
    assert!(guard.valid_until() > std::time::Instant::now() + Duration::from_secs(25));
    for (name, g) in n.iter().zip(guard.parts()) {
        assert_eq!(g.name(), name, "guards in list order");
        assert_eq!(state(&mut raw, name).await, held_by(&c, owner));
        let ttl = pttl(&mut raw, name).await;
        assert!(
            (25_000..=30_000).contains(&ttl),
            "watchdog lease, pttl {ttl}"
        );
        assert!(other.lock(name).try_lock().await.unwrap().is_none());
    }
    // Another multi-lock of the same locks, by another owner, gets none of them.
    let rival = multi(&other, &n);
    assert!(rival.try_lock().await.unwrap().is_none());

    guard.unlock().await.unwrap();
    for name in &n {
        assert!(!exists(&mut raw, name).await, "{name} released");
    }

    // With an explicit lease: each lock is taken with that lease, and no TTL is changed later.
    let opts = LockOptions::new().lease(Duration::from_secs(10));
    let guard = ml.lock_with_options(&opts).await.unwrap();
    for (name, g) in n.iter().zip(guard.parts()) {
        assert_eq!(g.lease(), Some(Duration::from_secs(10)));
        let ttl = pttl(&mut raw, name).await;
        assert!((9_000..=10_000).contains(&ttl), "pttl {ttl}");
    }
    // Dropped: released as a whole, in the background.
    drop(guard);
    for name in &n {
        wait_gone(&mut raw, name, POLL_LIMIT).await;
    }
    c.shutdown().await;
    other.shutdown().await;
}

#[tokio::test]
async fn a_second_multi_lock_waits_until_the_first_releases() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let n = names(4);
    let first = multi(&c, &n[..3]);
    let second = multi(&c, &n[1..]);

    let guard = first.lock().await.unwrap();
    let waiter = tokio::spawn(async move {
        let guard = second.lock().await.unwrap();
        (guard, Instant::now())
    });
    tokio::time::sleep(ms(300)).await;
    assert!(!waiter.is_finished(), "the second waits for the overlap");
    assert!(
        !exists(&mut raw, &n[3]).await,
        "it stopped at its first lock"
    );

    let released = Instant::now();
    guard.unlock().await.unwrap();
    let (guard2, got) = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the second gets the locks soon after the release")
        .unwrap();
    assert!(got >= released);
    let owner2 = guard2.owner();
    assert!(!exists(&mut raw, &n[0]).await);
    for name in &n[1..] {
        assert_eq!(state(&mut raw, name).await, held_by(&c, owner2));
    }
    guard2.unlock().await.unwrap();
    for name in &n {
        assert!(!exists(&mut raw, name).await);
    }
    c.shutdown().await;
}

#[tokio::test]
async fn one_of_ten_contenders_wins_with_a_lease() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let n = names(3);
    let ml = multi(&c, &n);

    let opts = LockOptions::new().lease(Duration::from_secs(10));
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (ml, opts) = (ml.clone(), opts.clone());
            tokio::spawn(async move { ml.try_lock_with_options(Duration::ZERO, &opts).await })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        if let Some(guard) = task.await.unwrap().unwrap() {
            winners.push(guard);
        }
    }
    assert_eq!(winners.len(), 1, "exactly one contender wins");
    let winner = winners.pop().unwrap();
    for name in &n {
        assert_eq!(
            state(&mut raw, name).await,
            held_by(&c, winner.owner()),
            "only the winner holds {name}"
        );
        let ttl = pttl(&mut raw, name).await;
        assert!((9_000..=10_000).contains(&ttl), "pttl {ttl}");
    }
    winner.unlock().await.unwrap();
    for name in &n {
        assert!(!exists(&mut raw, name).await);
    }
    c.shutdown().await;
}

#[tokio::test]
async fn locks_of_mixed_kinds() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (c, other) = (client(&server), client(&server));
    let n = names(3);
    let kinds = [Kind::Lock, Kind::Fair, Kind::Write];
    let ml = MultiLock::new(
        kinds
            .iter()
            .zip(&n)
            .map(|(k, name)| k.any(&c, name).into_dyn()),
    )
    .unwrap();

    let guard = ml.lock().await.unwrap();
    let owner = guard.owner();
    for (kind, name) in kinds.iter().zip(&n) {
        assert_eq!(
            state(&mut raw, name).await,
            kind.hold_state(&c, owner, 1),
            "{kind} {name}"
        );
    }
    // Each kind keeps its rivals out: a reader of the write-locked name, a fair waiter.
    assert!(
        other
            .rw_lock(&n[2])
            .read_lock()
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        other
            .fair_lock(&n[1])
            .try_lock_for(ms(100))
            .await
            .unwrap()
            .is_none()
    );
    Kind::Fair.wait_no_waiters(&mut raw, &n[1]).await;
    guard.unlock().await.unwrap();
    for name in &n {
        assert!(!exists(&mut raw, name).await);
    }

    // All or nothing across kinds: another client holds the read half of the third name.
    let reader = other.rw_lock(&n[2]).read_lock().lock().await.unwrap();
    assert!(ml.try_lock_for(ms(200)).await.unwrap().is_none());
    assert!(!exists(&mut raw, &n[0]).await);
    assert!(!exists(&mut raw, &n[1]).await);
    Kind::Fair.wait_no_waiters(&mut raw, &n[1]).await;
    assert_eq!(
        state(&mut raw, &n[2]).await,
        Kind::Read.hold_state(&other, reader.owner(), 1)
    );
    reader.unlock().await.unwrap();
    c.shutdown().await;
    other.shutdown().await;
}

#[tokio::test]
async fn locks_on_three_separate_servers() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let mut raws = Vec::new();
    for s in &servers {
        raws.push(s.conn().await);
    }
    let clients: Vec<Client> = servers.iter().map(client).collect();
    let others: Vec<Client> = servers.iter().map(client).collect();
    let name = unique_name("multi");
    let ml = MultiLock::new(clients.iter().map(|c| c.lock(&name))).unwrap();
    let rival = MultiLock::new(others.iter().map(|c| c.lock(&name))).unwrap();

    let guard = ml.lock().await.unwrap();
    let owner = guard.owner();
    for (raw, c) in raws.iter_mut().zip(&clients) {
        assert_eq!(state(raw, &name).await, held_by(c, owner));
    }
    assert!(rival.try_lock().await.unwrap().is_none());
    assert!(rival.try_lock_for(ms(200)).await.unwrap().is_none());
    for (raw, c) in raws.iter_mut().zip(&clients) {
        assert_eq!(
            state(raw, &name).await,
            held_by(c, owner),
            "rival left nothing"
        );
    }

    guard.unlock().await.unwrap();
    for raw in &mut raws {
        assert!(!exists(raw, &name).await);
    }
    let guard = rival.try_lock().await.unwrap().expect("free now");
    guard.unlock().await.unwrap();
    for c in clients.iter().chain(&others) {
        c.shutdown().await;
    }
}

#[tokio::test]
async fn a_dropped_acquisition_leaves_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (c, other) = (client(&server), client(&server));
    let n = names(3);
    let ml = multi(&c, &n);
    let held = other.lock(&n[2]).lock().await.unwrap();

    let attempt = tokio::time::timeout(ms(200), ml.try_lock_for(Duration::from_secs(5))).await;
    assert!(attempt.is_err(), "still waiting for the third lock");
    wait_gone(&mut raw, &n[0], POLL_LIMIT).await;
    wait_gone(&mut raw, &n[1], POLL_LIMIT).await;
    assert_eq!(state(&mut raw, &n[2]).await, held_by(&other, held.owner()));
    held.unlock().await.unwrap();
    c.shutdown().await;
    other.shutdown().await;
}

#[tokio::test]
async fn a_short_lease_is_lost_as_a_whole() {
    let server = RedisServer::start();
    let c = client(&server);
    let ml = multi(&c, &names(2));
    let opts = LockOptions::new().lease(ms(300));
    let guard = ml.lock_with_options(&opts).await.unwrap();
    assert!(!guard.is_lost());
    let earliest = guard.parts().iter().map(|g| g.valid_until()).min().unwrap();
    assert_eq!(guard.valid_until(), earliest);
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost with its lease");
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost { .. })));
    c.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (c, other) = (client(&server), client(&server));
    let name = unique_name("multi");

    let empty = MultiLock::new(Vec::<Box<dyn DistributedLock>>::new());
    assert!(matches!(empty, Err(Error::InvalidArgument(_))), "{empty:?}");

    let twice = MultiLock::new([c.lock(&name), c.lock(&name)]);
    assert!(matches!(twice, Err(Error::InvalidArgument(_))), "{twice:?}");
    // One client (a clone is the same client), one name: one Redis key, whatever the kinds.
    let kinds = MultiLock::new([
        Box::new(c.lock(&name)) as Box<dyn DistributedLock>,
        c.clone().rw_lock(&name).write_lock().into(),
    ]);
    assert!(matches!(kinds, Err(Error::InvalidArgument(_))), "{kinds:?}");
    // Two clients are two holders: allowed.
    assert!(MultiLock::new([c.lock(&name), other.lock(&name)]).is_ok());

    // A lease under 1 ms: refused by the lock, nothing held.
    let ml = MultiLock::new([c.lock(&name), c.lock(unique_name("multi"))]).unwrap();
    let zero = LockOptions::new().lease(Duration::ZERO);
    let r = ml.try_lock_with_options(ms(100), &zero).await;
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let r = ml.lock_with_options(&zero).await;
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    assert!(!exists(&mut raw, &name).await);
    c.shutdown().await;
    other.shutdown().await;
}
