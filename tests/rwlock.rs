//! The read-write lock (docs/LAYOUT.md §5): Redisson's own `RedissonReadWriteLockTest`
//! behaviours with timings scaled down, the exact Redis layout and channel messages,
//! the refused upgrade, wake-ups by message, the read watchdog, and a mixed concurrency run.

mod common;

use std::time::{Duration, Instant};

use common::{
    RedisServer, assert_no_message, client, client_with, client_with_watchdog, exists, field, hash,
    key_type, ms, next_payload, pttl, subscribe, unique_name, wait_gone, wait_numsub,
};
use rand::Rng;
use redis::AsyncCommands;
use redisson_sync::{Client, Error, LockGuard, LockOptions, Owner, RwLock, Ttl};
use tokio::time::{sleep, timeout};

/// The writer field of `owner` through `client`: `<client id>:<owner id>:write`.
fn writer(client: &Client, owner: Owner) -> String {
    format!("{}:write", field(client, owner))
}

/// The k-th read-hold marker of `reader` on the lock `name` (a name without `{`).
fn marker(name: &str, reader: &str, k: u64) -> String {
    format!("{{{name}}}:{reader}:rwlock_timeout:{k}")
}

/// The channel of the read-write lock `name` (a name without `{`).
fn rw_channel(name: &str) -> String {
    format!("redisson_rwlock:{{{name}}}")
}

fn owner(n: u64) -> LockOptions {
    LockOptions::new().owner(Owner::new(n))
}

fn leased(n: u64, lease_ms: u64) -> LockOptions {
    owner(n).lease(ms(lease_ms))
}

/// `(field, value)` pairs, sorted, for comparing with [`hash`].
fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = items
        .iter()
        .map(|(f, c)| ((*f).to_owned(), (*c).to_owned()))
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn readers_share_the_lock_with_redissons_exact_layout() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (a, b) = (client(&server), client(&server));
    let name = unique_name("rw-layout");
    let chan = rw_channel(&name);
    let mut messages = subscribe(&server, &[&chan]).await;
    let (ra, rb) = (a.rw_lock(&name), b.rw_lock(&name));
    assert_eq!(ra.name(), name);
    let (fa, fb) = (field(&a, Owner::new(1)), field(&b, Owner::new(2)));

    let ga = ra.read_lock().lock_with_options(&owner(1)).await.unwrap();
    assert_eq!(ga.lease(), None);
    assert_eq!(key_type(&mut raw, &name).await, "hash");
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "read"), (&fa, "1")])
    );
    let t = pttl(&mut raw, &name).await;
    assert!((29_000..=30_000).contains(&t), "pttl {t}");
    assert_eq!(key_type(&mut raw, &marker(&name, &fa, 1)).await, "string");
    let v: String = raw.get(marker(&name, &fa, 1)).await.unwrap();
    assert_eq!(v, "1");
    let t = pttl(&mut raw, &marker(&name, &fa, 1)).await;
    assert!((29_000..=30_000).contains(&t), "marker pttl {t}");

    // A reader of another client joins with an explicit lease: its marker has that lease, the
    // hash keeps the longer TTL (max(PTTL, lease)).
    let gb = rb
        .read_lock()
        .try_lock_with_options(Duration::ZERO, &leased(2, 5_000))
        .await
        .unwrap()
        .expect("readers share the lock");
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "read"), (&fa, "1"), (&fb, "1")])
    );
    let t = pttl(&mut raw, &marker(&name, &fb, 1)).await;
    assert!((4_000..=5_000).contains(&t), "marker pttl {t}");
    let t = pttl(&mut raw, &name).await;
    assert!((29_000..=30_000).contains(&t), "pttl {t}");

    // Re-entry: count 2, a second marker.
    let ga2 = ra
        .read_lock()
        .lock_with_options(&leased(1, 8_000))
        .await
        .unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "read"), (&fa, "2"), (&fb, "1")])
    );
    let t = pttl(&mut raw, &marker(&name, &fa, 2)).await;
    assert!((7_000..=8_000).contains(&t), "marker pttl {t}");
    assert_eq!(ra.read_lock().hold_count(Owner::new(1)).await.unwrap(), 2);
    assert!(ra.read_lock().is_held_by(Owner::new(1)).await.unwrap());
    assert!(!ra.write_lock().is_held_by(Owner::new(1)).await.unwrap());
    assert_eq!(ra.write_lock().hold_count(Owner::new(1)).await.unwrap(), 0);
    assert!(ra.read_lock().is_locked().await.unwrap());
    assert!(!ra.write_lock().is_locked().await.unwrap());
    assert!(matches!(
        ra.read_lock().remaining_ttl().await.unwrap(),
        Ttl::Remaining(_)
    ));

    // Releasing one of a's two holds drops its newest marker; the lock stays, its TTL the
    // longest marker left (a's first, about 30 s). No message.
    ga2.unlock().await.unwrap();
    assert!(!exists(&mut raw, &marker(&name, &fa, 2)).await);
    assert!(exists(&mut raw, &marker(&name, &fa, 1)).await);
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "read"), (&fa, "1"), (&fb, "1")])
    );
    // a releases: b's marker now bounds the hash TTL.
    ga.unlock().await.unwrap();
    assert!(!exists(&mut raw, &marker(&name, &fa, 1)).await);
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "read"), (&fb, "1")])
    );
    let t = pttl(&mut raw, &name).await;
    assert!((3_000..=5_000).contains(&t), "pttl {t}");
    assert_no_message(
        &mut messages,
        ms(300),
        "releases that leave readers publish nothing",
    )
    .await;

    // The last reader frees it: hash and marker gone, "0" published once.
    gb.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    assert!(!exists(&mut raw, &marker(&name, &fb, 1)).await);
    assert_eq!(next_payload(&mut messages, &chan).await, "0");
    assert_no_message(&mut messages, ms(300), "exactly one message").await;
    assert!(!ra.read_lock().is_locked().await.unwrap());
    a.shutdown().await;
    b.shutdown().await;
}

/// Redisson's `testName`: a name with a hash tag and colons keeps its own tag.
#[tokio::test]
async fn a_name_with_a_hash_tag_keeps_it_in_every_key_and_channel() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let tag = unique_name("rw-tag");
    let name = format!("{{{tag}}}:abc:key");
    let chan = format!("redisson_rwlock:{name}");
    let mut messages = subscribe(&server, &[&chan]).await;
    let rw = client.rw_lock(&name);
    let reader = field(&client, Owner::new(1));

    let g = rw.read_lock().lock_with_options(&owner(1)).await.unwrap();
    assert!(exists(&mut raw, &format!("{name}:{reader}:rwlock_timeout:1")).await);
    g.unlock().await.unwrap();
    assert_eq!(next_payload(&mut messages, &chan).await, "0");
    assert!(!exists(&mut raw, &format!("{name}:{reader}:rwlock_timeout:1")).await);

    let g = rw.write_lock().lock_with_options(&owner(1)).await.unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "write"), (&writer(&client, Owner::new(1)), "1")])
    );
    g.unlock().await.unwrap();
    assert_eq!(next_payload(&mut messages, &chan).await, "1");
    client.shutdown().await;
}

#[tokio::test]
async fn write_lock_layout_reentry_adds_its_lease_and_release_publishes_one() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (a, b) = (client(&server), client(&server));
    let name = unique_name("rw-write");
    let chan = rw_channel(&name);
    let mut messages = subscribe(&server, &[&chan]).await;
    let w = a.rw_lock(&name).write_lock();
    let wf = writer(&a, Owner::new(1));

    let g1 = w.lock_with_options(&leased(1, 1_000)).await.unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "write"), (&wf, "1")])
    );
    assert!(w.is_locked().await.unwrap());
    assert!(!a.rw_lock(&name).read_lock().is_locked().await.unwrap());
    // Redisson's testWriteLockExpiration: a re-entry ADDS its lease to the remaining TTL.
    let g2 = w.lock_with_options(&leased(1, 1_000)).await.unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!(
        (1_800..=2_000).contains(&t),
        "pttl {t}: 1 s remaining + 1 s added"
    );
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "write"), (&wf, "2")])
    );
    // Another owner (same client, then another client) is excluded from both halves.
    for c in [&a, &b] {
        let rw = c.rw_lock(&name);
        assert!(
            rw.write_lock()
                .try_lock_with_options(ms(200), &owner(2))
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            rw.read_lock()
                .try_lock_with_options(Duration::ZERO, &owner(2))
                .await
                .unwrap()
                .is_none()
        );
    }
    // A partial release re-applies the hold's lease and publishes nothing.
    g2.unlock().await.unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!((900..=1_000).contains(&t), "pttl {t}");
    assert_no_message(
        &mut messages,
        ms(300),
        "a partial write release publishes nothing",
    )
    .await;
    g1.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    assert_eq!(next_payload(&mut messages, &chan).await, "1");
    assert_no_message(&mut messages, ms(300), "exactly one message").await;
    a.shutdown().await;
    b.shutdown().await;
}

/// Redisson's `testReadLockExpiration`: readers with leases of different length; a writer gets
/// in only once the longest has ended.
#[tokio::test]
async fn writer_waits_for_the_longest_read_lease() {
    let server = RedisServer::start();
    let (a, b, w) = (client(&server), client(&server), client(&server));
    let name = unique_name("rw-expire");
    let start = Instant::now();
    let ra = a
        .rw_lock(&name)
        .read_lock()
        .lock_with_options(&leased(1, 1_200))
        .await
        .unwrap();
    let rb = b
        .rw_lock(&name)
        .read_lock()
        .lock_with_options(&leased(1, 400))
        .await
        .unwrap();
    let gw = w
        .rw_lock(&name)
        .write_lock()
        .try_lock_with_options(ms(3_000), &leased(1, 1_000))
        .await
        .unwrap()
        .expect("the writer gets in after the read leases");
    let waited = start.elapsed();
    assert!(
        waited >= ms(1_150) && waited < ms(2_000),
        "writer got in after {waited:?}, the longest read lease is 1.2 s"
    );
    gw.unlock().await.unwrap();
    ra.forget();
    rb.forget();
    for c in [a, b, w] {
        c.shutdown().await;
    }
}

/// Redisson's `testReadLockLeaseTimeoutDiffThreadsRRW`: two readers of different owners; one
/// releases early, the writer gets in when the other's lease ends, not before.
#[tokio::test]
async fn writer_gets_in_when_the_remaining_read_leases_end() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("rw-rrw");
    let rw = client.rw_lock(&name);
    let start = Instant::now();
    let r1 = rw
        .read_lock()
        .lock_with_options(&leased(1, 3_000))
        .await
        .unwrap();
    let r2 = rw
        .read_lock()
        .lock_with_options(&leased(2, 1_000))
        .await
        .unwrap();
    let writer = {
        let w = rw.write_lock();
        tokio::spawn(async move {
            let g = w
                .try_lock_with_options(ms(4_000), &leased(3, 1_000))
                .await
                .unwrap();
            (g, Instant::now())
        })
    };
    sleep(ms(200)).await;
    // The long reader leaves: the hash TTL shrinks to r2's remaining marker TTL.
    r1.unlock().await.unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!(t > 0 && t <= 800, "pttl {t}: r2's remaining lease");
    let (g, at) = writer.await.unwrap();
    let g = g.expect("writer acquired");
    let waited = at - start;
    assert!(
        waited >= ms(950) && waited < ms(1_600),
        "writer got in after {waited:?}; r2's lease ends at 1 s"
    );
    g.unlock().await.unwrap();
    r2.forget();
    client.shutdown().await;
}

/// Redisson's `testReadLockLeaseTimeout`: one owner reads twice, the second 600 ms later;
/// releasing one hold drops the newer marker, so the hash TTL shrinks to the older hold's
/// remaining lease and a writer gets in when that ends.
#[tokio::test]
async fn releasing_the_newer_read_hold_shrinks_the_ttl_to_the_older_one() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("rw-lease");
    let rw = client.rw_lock(&name);
    let reader = field(&client, Owner::new(1));
    let start = Instant::now();
    let g1 = rw
        .read_lock()
        .lock_with_options(&leased(1, 1_200))
        .await
        .unwrap();
    sleep(ms(600)).await;
    let g2 = rw
        .read_lock()
        .lock_with_options(&leased(1, 1_200))
        .await
        .unwrap();
    let t = pttl(&mut raw, &name).await;
    assert!(t > 1_000, "pttl {t}: the newer lease");
    g2.unlock().await.unwrap();
    assert!(!exists(&mut raw, &marker(&name, &reader, 2)).await);
    let t = pttl(&mut raw, &name).await;
    assert!(
        t > 0 && t <= 650,
        "pttl {t}: the older hold's remaining lease"
    );
    let g = rw
        .write_lock()
        .try_lock_with_options(ms(3_000), &leased(2, 1_000))
        .await
        .unwrap()
        .expect("writer acquired");
    let waited = start.elapsed();
    assert!(
        waited >= ms(1_150) && waited < ms(1_700),
        "writer got in after {waited:?}; the older hold ends at 1.2 s"
    );
    g.unlock().await.unwrap();
    g1.forget();
    client.shutdown().await;
}

/// Redisson's `testWriteLock` / `testWR` / `testWriteReadReentrancy`: a writer takes read, its
/// write release leaves the lock in mode read, publishing nothing; other readers then join and
/// writers stay out until every read hold is gone.
#[tokio::test]
async fn downgrade_write_then_read_then_write_release_leaves_mode_read() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (a, b) = (client(&server), client(&server));
    let name = unique_name("rw-down");
    let chan = rw_channel(&name);
    let mut messages = subscribe(&server, &[&chan]).await;
    let rw = a.rw_lock(&name);
    let (rf, wf) = (field(&a, Owner::new(1)), writer(&a, Owner::new(1)));

    let gw = rw.write_lock().lock_with_options(&owner(1)).await.unwrap();
    assert!(!rw.read_lock().is_locked().await.unwrap());
    // Another owner cannot read while the write is held.
    assert!(
        b.rw_lock(&name)
            .read_lock()
            .try_lock_with_options(Duration::ZERO, &owner(2))
            .await
            .unwrap()
            .is_none()
    );
    let gr = rw
        .read_lock()
        .try_lock_with_options(Duration::ZERO, &owner(1))
        .await
        .unwrap()
        .expect("a writer may take read");
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "write"), (&wf, "1"), (&rf, "1")])
    );
    assert!(exists(&mut raw, &marker(&name, &rf, 1)).await);
    assert!(rw.read_lock().is_locked().await.unwrap());
    assert!(rw.write_lock().is_locked().await.unwrap());
    // Still write mode: other readers stay out.
    assert!(
        b.rw_lock(&name)
            .read_lock()
            .try_lock_with_options(Duration::ZERO, &owner(2))
            .await
            .unwrap()
            .is_none()
    );

    gw.unlock().await.unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "read"), (&rf, "1")])
    );
    assert!(!rw.write_lock().is_locked().await.unwrap());
    assert!(rw.read_lock().is_locked().await.unwrap());
    assert_no_message(&mut messages, ms(300), "a downgrade publishes nothing").await;

    let gb = b
        .rw_lock(&name)
        .read_lock()
        .try_lock_with_options(Duration::ZERO, &owner(2))
        .await
        .unwrap()
        .expect("other readers join after the downgrade");
    assert!(
        b.rw_lock(&name)
            .write_lock()
            .try_lock_with_options(Duration::ZERO, &owner(3))
            .await
            .unwrap()
            .is_none()
    );
    gr.unlock().await.unwrap();
    assert_no_message(&mut messages, ms(300), "b still reads").await;
    gb.unlock().await.unwrap();
    assert_eq!(next_payload(&mut messages, &chan).await, "0");
    assert!(!exists(&mut raw, &name).await);
    a.shutdown().await;
    b.shutdown().await;
}

/// No upgrade: an owner holding read gets `UpgradeRefused` at once from every way of asking
/// for the write half, and Redis is left exactly as it was.
#[tokio::test]
async fn a_reader_asking_for_the_write_lock_is_refused_at_once() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("rw-up");
    let rw = client.rw_lock(&name);
    let rf = field(&client, Owner::new(1));
    let gr = rw
        .read_lock()
        .lock_with_options(&leased(1, 20_000))
        .await
        .unwrap();
    let before = hash(&mut raw, &name).await;
    let write = rw.write_lock();

    let check = |err: Error| {
        let text = err.to_string();
        match &err {
            Error::UpgradeRefused { name: n, holder } => {
                assert_eq!(n, &name);
                assert_eq!(holder, &rf);
            }
            other => panic!("expected UpgradeRefused, got {other:?}"),
        }
        assert!(
            text.contains(&name) && text.contains("release the read"),
            "{text}"
        );
        assert!(!err.is_not_held());
    };
    let start = Instant::now();
    check(write.lock_with_options(&owner(1)).await.unwrap_err());
    check(
        write
            .try_lock_with_options(ms(5_000), &leased(1, 1_000))
            .await
            .unwrap_err(),
    );
    check(
        write
            .try_lock_with_options(Duration::ZERO, &owner(1))
            .await
            .unwrap_err(),
    );
    // The current-task owner too.
    let gr_me = rw.read_lock().lock().await.unwrap();
    check_current(write.lock().await.unwrap_err(), &client);
    check_current(write.try_lock().await.unwrap_err(), &client);
    check_current(write.try_lock_for(ms(5_000)).await.unwrap_err(), &client);
    gr_me.unlock().await.unwrap();
    assert!(
        start.elapsed() < ms(500),
        "refused after {:?}",
        start.elapsed()
    );
    assert_eq!(hash(&mut raw, &name).await, before, "nothing changed");
    let t = pttl(&mut raw, &name).await;
    assert!(t > 19_000 && t <= 20_000, "pttl {t}");

    // Another owner is not refused, only excluded.
    assert!(
        write
            .try_lock_with_options(ms(100), &owner(2))
            .await
            .unwrap()
            .is_none()
    );
    // Once the read hold is gone, the same owner takes the write lock.
    gr.unlock().await.unwrap();
    let gw = write.lock_with_options(&owner(1)).await.unwrap();
    // A writer holding read is not refused its write re-entry.
    let gr = rw.read_lock().lock_with_options(&owner(1)).await.unwrap();
    let gw2 = write
        .try_lock_with_options(Duration::ZERO, &owner(1))
        .await
        .unwrap();
    assert!(gw2.is_some(), "write re-entry of a writer holding read");
    drop(gw2);
    gr.unlock().await.unwrap();
    gw.unlock().await.unwrap();
    wait_gone(&mut raw, &name, ms(2_000)).await;
    client.shutdown().await;
}

fn check_current(err: Error, client: &Client) {
    match err {
        Error::UpgradeRefused { holder, .. } => {
            assert!(holder.starts_with(client.id()), "{holder}");
        }
        other => panic!("expected UpgradeRefused, got {other:?}"),
    }
}

/// Redisson's `testWriteRead`: readers blocked by a writer all enter at once when it releases
/// (the `1` message wakes every waiter of every client). A long re-check interval and a long
/// watchdog lease leave the message as the only wake-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_release_wakes_every_waiting_reader_at_once() {
    const PER_CLIENT: u64 = 4;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let slow = |s: &RedisServer| client_with(s, Duration::from_secs(30), Duration::from_secs(60));
    let (w, a, b) = (slow(&server), slow(&server), slow(&server));
    let name = unique_name("rw-wake");
    let chan = rw_channel(&name);
    let gw = w
        .rw_lock(&name)
        .write_lock()
        .lock_with_options(&owner(1))
        .await
        .unwrap();

    let mut readers = Vec::new();
    for (i, c) in [&a, &b].into_iter().enumerate() {
        for n in 0..PER_CLIENT {
            let read = c.rw_lock(&name).read_lock();
            let id = 10 * (i as u64 + 1) + n;
            readers.push(tokio::spawn(async move {
                let g = read.lock_with_options(&owner(id)).await.unwrap();
                (g, Instant::now())
            }));
        }
    }
    // Both reader clients subscribed, and every reader past its first attempts.
    wait_numsub(&mut raw, &chan, 2).await;
    sleep(ms(300)).await;
    assert!(readers.iter().all(|r| !r.is_finished()));

    let released = Instant::now();
    gw.unlock().await.unwrap();
    let mut latencies = Vec::new();
    let mut guards: Vec<LockGuard> = Vec::new();
    for r in readers {
        let (g, at) = timeout(Duration::from_secs(5), r)
            .await
            .expect("reader woken by the write release")
            .unwrap();
        latencies.push(at - released);
        guards.push(g);
    }
    latencies.sort();
    println!(
        "write release -> {} waiting readers (2 clients) acquired: min {:?}, median {:?}, max {:?}",
        latencies.len(),
        latencies[0],
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );
    assert!(
        latencies[latencies.len() - 1] < ms(500),
        "slowest reader woke after {:?}",
        latencies[latencies.len() - 1]
    );
    // They hold together.
    let fields = hash(&mut raw, &name).await;
    assert_eq!(fields.len(), 1 + 2 * PER_CLIENT as usize, "{fields:?}");
    assert!(fields.contains(&("mode".to_owned(), "read".to_owned())));
    for g in guards {
        g.unlock().await.unwrap();
    }
    assert!(!exists(&mut raw, &name).await);
    for c in [w, a, b] {
        c.shutdown().await;
    }
}

/// A read release that frees the lock publishes `0`, which wakes a writer waiting in another
/// client (long re-check interval: only the message can wake it).
#[tokio::test]
async fn last_read_release_wakes_a_waiting_writer() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let slow = |s: &RedisServer| client_with(s, Duration::from_secs(30), Duration::from_secs(60));
    let (r, w) = (slow(&server), slow(&server));
    let name = unique_name("rw-wake-w");
    let chan = rw_channel(&name);
    let g1 = r
        .rw_lock(&name)
        .read_lock()
        .lock_with_options(&owner(1))
        .await
        .unwrap();
    let g2 = r
        .rw_lock(&name)
        .read_lock()
        .lock_with_options(&owner(2))
        .await
        .unwrap();
    let write = w.rw_lock(&name).write_lock();
    let waiter = tokio::spawn(async move {
        let g = write.lock_with_options(&owner(1)).await.unwrap();
        (g, Instant::now())
    });
    wait_numsub(&mut raw, &chan, 1).await;
    sleep(ms(200)).await;
    g1.unlock().await.unwrap();
    sleep(ms(300)).await;
    assert!(!waiter.is_finished(), "one reader still holds");
    let released = Instant::now();
    g2.unlock().await.unwrap();
    let (g, at) = timeout(Duration::from_secs(5), waiter)
        .await
        .expect("writer woken by the read release")
        .unwrap();
    println!(
        "last read release -> waiting writer acquired after {:?}",
        at - released
    );
    assert!(at - released < ms(500), "{:?}", at - released);
    g.unlock().await.unwrap();
    r.shutdown().await;
    w.shutdown().await;
}

/// Redisson's `testMultiInstanceReadLockZombieCleanup`: a reader of a dead client (its marker
/// expired, its field still in the hash) does not keep a writer out once the live reader
/// releases.
#[tokio::test]
async fn a_dead_clients_reader_does_not_keep_the_writer_out() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (zombie, live, w) = (client(&server), client(&server), client(&server));
    let name = unique_name("rw-zombie");
    let chan = rw_channel(&name);
    let mut messages = subscribe(&server, &[&chan]).await;
    let zf = field(&zombie, Owner::new(1));
    zombie
        .rw_lock(&name)
        .read_lock()
        .lock_with_options(&leased(1, 300))
        .await
        .unwrap()
        .forget();
    zombie.shutdown().await;
    let g = live
        .rw_lock(&name)
        .read_lock()
        .lock_with_options(&owner(1))
        .await
        .unwrap();
    wait_gone(&mut raw, &marker(&name, &zf, 1), ms(2_000)).await;
    assert!(
        hash(&mut raw, &name)
            .await
            .contains(&(zf.clone(), "1".to_owned())),
        "the zombie's field is still there"
    );
    let write = w.rw_lock(&name).write_lock();
    assert!(
        write
            .try_lock_with_options(Duration::ZERO, &owner(1))
            .await
            .unwrap()
            .is_none()
    );
    g.unlock().await.unwrap();
    assert!(
        !exists(&mut raw, &name).await,
        "the zombie's field went with the hash"
    );
    assert_eq!(next_payload(&mut messages, &chan).await, "0");
    let gw = write
        .try_lock_with_options(Duration::ZERO, &owner(1))
        .await
        .unwrap()
        .expect("the writer gets in");
    gw.unlock().await.unwrap();
    live.shutdown().await;
    w.shutdown().await;
}

/// Redisson's `testForceUnlock`: each half's force unlock acts only in its own mode, publishes
/// its own message, and leaves the read markers to expire.
#[tokio::test]
async fn force_unlock_acts_only_in_its_own_mode() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (a, b) = (client(&server), client(&server));
    let name = unique_name("rw-force");
    let chan = rw_channel(&name);
    let mut messages = subscribe(&server, &[&chan]).await;
    let rw = a.rw_lock(&name);
    let other = b.rw_lock(&name);
    let rf = field(&a, Owner::new(1));

    assert!(!other.read_lock().force_unlock().await.unwrap());
    assert!(!other.write_lock().force_unlock().await.unwrap());

    let gr = rw
        .read_lock()
        .lock_with_options(&leased(1, 10_000))
        .await
        .unwrap();
    assert!(!other.write_lock().force_unlock().await.unwrap());
    assert!(exists(&mut raw, &name).await);
    assert_no_message(
        &mut messages,
        ms(300),
        "a force unlock that did nothing publishes nothing",
    )
    .await;
    assert!(other.read_lock().force_unlock().await.unwrap());
    assert!(!exists(&mut raw, &name).await);
    assert!(
        exists(&mut raw, &marker(&name, &rf, 1)).await,
        "markers are left to expire"
    );
    assert_eq!(next_payload(&mut messages, &chan).await, "0");
    let err = gr.unlock().await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
    // The unlock of a missing lock publishes "0" as Redisson's does (waiters re-check).
    assert_eq!(next_payload(&mut messages, &chan).await, "0");

    let gw = rw
        .write_lock()
        .lock_with_options(&leased(1, 10_000))
        .await
        .unwrap();
    assert!(!other.read_lock().force_unlock().await.unwrap());
    assert!(exists(&mut raw, &name).await);
    assert!(other.write_lock().force_unlock().await.unwrap());
    assert!(!exists(&mut raw, &name).await);
    assert_eq!(next_payload(&mut messages, &chan).await, "1");
    let err = gw.unlock().await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
    assert_eq!(next_payload(&mut messages, &chan).await, "1");
    assert_no_message(&mut messages, ms(300), "nothing else").await;
    a.shutdown().await;
    b.shutdown().await;
}

/// docs/LAYOUT.md §5.7 and Redisson's `testReadLockIsLocked` / `testIsLocked*`.
#[tokio::test]
async fn is_locked_answers_per_half() {
    let server = RedisServer::start();
    let client = client(&server);
    let rw = client.rw_lock(unique_name("rw-locked"));
    let (read, write) = (rw.read_lock(), rw.write_lock());
    let both = async || {
        (
            read.is_locked().await.unwrap(),
            write.is_locked().await.unwrap(),
        )
    };

    assert_eq!(both().await, (false, false));
    let g = read.lock_with_options(&owner(1)).await.unwrap();
    assert_eq!(both().await, (true, false));
    g.unlock().await.unwrap();
    assert_eq!(both().await, (false, false));

    let gw = write.lock_with_options(&owner(1)).await.unwrap();
    assert_eq!(
        both().await,
        (false, true),
        "a writer alone: read half not locked"
    );
    let gr = read.lock_with_options(&owner(1)).await.unwrap();
    assert_eq!(both().await, (true, true), "the writer holds read too");
    gw.unlock().await.unwrap();
    assert_eq!(both().await, (true, false), "downgraded");
    gr.unlock().await.unwrap();
    assert_eq!(both().await, (false, false));
    client.shutdown().await;
}

/// Redisson's `testExpireRead` / `testExpireWrite`: short leases expire, a stale unlock is
/// `NotHeld`.
#[tokio::test]
async fn expired_holds_unlock_as_not_held() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client(&server);
    let name = unique_name("rw-stale");
    let rw = client.rw_lock(&name);
    let g = rw
        .read_lock()
        .lock_with_options(&leased(1, 200))
        .await
        .unwrap();
    wait_gone(&mut raw, &name, ms(2_000)).await;
    assert!(matches!(
        g.unlock().await.unwrap_err(),
        Error::NotHeld { .. }
    ));
    let g = rw
        .write_lock()
        .lock_with_options(&leased(1, 200))
        .await
        .unwrap();
    wait_gone(&mut raw, &name, ms(2_000)).await;
    let err = g.unlock().await.unwrap_err();
    match err {
        Error::NotHeld { holder, .. } => assert_eq!(holder, writer(&client, Owner::new(1))),
        other => panic!("{other:?}"),
    }
    // A stale write unlock on a lock now in mode read is NotHeld and changes nothing.
    let gw = rw
        .write_lock()
        .lock_with_options(&leased(3, 10_000))
        .await
        .unwrap();
    assert!(rw.write_lock().force_unlock().await.unwrap());
    let gr = rw.read_lock().lock_with_options(&owner(2)).await.unwrap();
    let before = hash(&mut raw, &name).await;
    assert!(matches!(
        gw.unlock().await.unwrap_err(),
        Error::NotHeld { .. }
    ));
    assert_eq!(hash(&mut raw, &name).await, before);
    assert!(before.contains(&("mode".to_owned(), "read".to_owned())));
    gr.unlock().await.unwrap();
    client.shutdown().await;
}

/// The read watchdog (docs/LAYOUT.md §5.8, Redisson 4.4+): watchdog read holds, reentrant ones
/// included, stay alive past three watchdog timeouts with their markers; another client's reader
/// marker (explicit lease) is never extended by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_watchdog_renews_own_markers_only() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let timeout_ms = 600;
    let a = client_with_watchdog(&server, ms(timeout_ms));
    let b = client_with_watchdog(&server, ms(timeout_ms));
    let name = unique_name("rw-wd");
    let rw = a.rw_lock(&name);
    let (fa, fa2, fb) = (
        field(&a, Owner::new(1)),
        field(&a, Owner::new(2)),
        field(&b, Owner::new(1)),
    );
    let g1 = rw.read_lock().lock_with_options(&owner(1)).await.unwrap();
    let g2 = rw.read_lock().lock_with_options(&owner(1)).await.unwrap();
    let g3 = rw.read_lock().lock_with_options(&owner(2)).await.unwrap();
    let gb = b
        .rw_lock(&name)
        .read_lock()
        .lock_with_options(&leased(1, 1_500))
        .await
        .unwrap();
    let b_marker = marker(&name, &fb, 1);
    let own = [
        marker(&name, &fa, 1),
        marker(&name, &fa, 2),
        marker(&name, &fa2, 1),
    ];

    let start = Instant::now();
    let mut b_previous = pttl(&mut raw, &b_marker).await;
    let mut renewed = 0;
    let mut previous = pttl(&mut raw, &own[0]).await;
    while start.elapsed() < ms(3 * timeout_ms + 300) {
        sleep(ms(50)).await;
        for m in &own {
            let p = pttl(&mut raw, m).await;
            assert!(
                p > 0 && p <= 600,
                "{m}: pttl {p} after {:?}",
                start.elapsed()
            );
        }
        let p = pttl(&mut raw, &own[0]).await;
        if p > previous {
            renewed += 1;
        }
        previous = p;
        let h = pttl(&mut raw, &name).await;
        assert!(h > 0, "hash pttl {h} after {:?}", start.elapsed());
        let pb = pttl(&mut raw, &b_marker).await;
        assert!(
            pb == -2 || pb <= b_previous,
            "b's marker went from {b_previous} to {pb}: renewed by a's watchdog"
        );
        if pb != -2 {
            b_previous = pb;
        }
    }
    assert!(renewed >= 2, "{renewed} renewals seen");
    assert!(
        !exists(&mut raw, &b_marker).await,
        "b's 1.5 s marker expired"
    );
    assert_eq!(
        hash(&mut raw, &name).await,
        pairs(&[("mode", "read"), (&fa, "2"), (&fa2, "1"), (&fb, "1")])
    );
    assert!(!g1.is_lost() && !g2.is_lost() && !g3.is_lost());
    gb.forget();
    g2.unlock().await.unwrap();
    g1.unlock().await.unwrap();
    // b's field is a zombie now (its marker expired): a's last release frees the lock.
    g3.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    a.shutdown().await;
    b.shutdown().await;
}

/// A watched read hold whose lock is force-unlocked is reported lost by the watchdog.
#[tokio::test]
async fn read_watchdog_reports_a_force_unlocked_reader_lost() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, ms(600));
    let rw = client.rw_lock(unique_name("rw-lost"));
    let g = rw.read_lock().lock_with_options(&owner(1)).await.unwrap();
    assert!(rw.read_lock().force_unlock().await.unwrap());
    timeout(Duration::from_secs(2), g.lost())
        .await
        .expect("lost signal");
    assert!(matches!(
        g.unlock().await.unwrap_err(),
        Error::LeaseLost { .. }
    ));
    client.shutdown().await;
}

/// One critical section as seen from outside: [acquired, releasing], and whether it wrote.
type Interval = (Instant, Instant, bool);

/// Readers and writers on several clients: a writer does a non-atomic GET, pause, SET of a
/// counter and of a "state" pair; a reader reads the pair twice with a pause between and must
/// see it whole and unchanged. Write intervals overlap nothing; read intervals overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_on_several_clients_exclude_correctly() {
    const CLIENTS: usize = 3;
    const WRITERS_PER_CLIENT: usize = 1;
    const READERS_PER_CLIENT: usize = 2;
    const WRITES: usize = 15;
    const READS: usize = 25;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let clients: Vec<Client> = (0..CLIENTS)
        .map(|_| client_with(&server, Duration::from_secs(3), ms(200)))
        .collect();
    let name = unique_name("rw-mixed");
    let (counter, state_a, state_b) = (
        format!("{name}:counter"),
        format!("{name}:a"),
        format!("{name}:b"),
    );
    let () = raw.set(&state_a, 0).await.unwrap();
    let () = raw.set(&state_b, 0).await.unwrap();

    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in &clients {
        for _ in 0..WRITERS_PER_CLIENT {
            let (rw, mut conn) = (c.rw_lock(&name), raw.clone());
            let (counter, state_a, state_b) = (counter.clone(), state_a.clone(), state_b.clone());
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::new();
                for _ in 0..WRITES {
                    let g = rw.write_lock().lock().await.unwrap();
                    let acquired = Instant::now();
                    let v: Option<u64> = conn.get(&counter).await.unwrap();
                    let v = v.unwrap_or(0) + 1;
                    // A half-made change: a first, then b.
                    let () = conn.set(&state_a, v).await.unwrap();
                    let pause = Duration::from_micros(rand::thread_rng().gen_range(0..2_000));
                    sleep(pause).await;
                    let () = conn.set(&state_b, v).await.unwrap();
                    let () = conn.set(&counter, v).await.unwrap();
                    let releasing = Instant::now();
                    g.unlock().await.unwrap();
                    out.push((acquired, releasing, true));
                    let pause = ms(rand::thread_rng().gen_range(0..10));
                    sleep(pause).await;
                }
                out
            }));
        }
        for _ in 0..READERS_PER_CLIENT {
            let (rw, mut conn) = (c.rw_lock(&name), raw.clone());
            let (state_a, state_b) = (state_a.clone(), state_b.clone());
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::new();
                for _ in 0..READS {
                    let g = rw.read_lock().lock().await.unwrap();
                    let acquired = Instant::now();
                    let (a1, b1): (u64, u64) = redis::pipe()
                        .get(&state_a)
                        .get(&state_b)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    let pause = ms(rand::thread_rng().gen_range(2..6));
                    sleep(pause).await;
                    let (a2, b2): (u64, u64) = redis::pipe()
                        .get(&state_a)
                        .get(&state_b)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    assert_eq!(a1, b1, "a reader saw a half-made change");
                    assert_eq!((a1, b1), (a2, b2), "the state changed under a reader");
                    let releasing = Instant::now();
                    g.unlock().await.unwrap();
                    out.push((acquired, releasing, false));
                    let pause = ms(rand::thread_rng().gen_range(2..15));
                    sleep(pause).await;
                }
                out
            }));
        }
    }
    let mut intervals: Vec<Interval> = Vec::new();
    for t in tasks {
        let mine = timeout(Duration::from_secs(40), t)
            .await
            .expect("the mixed run did not finish in time")
            .unwrap();
        intervals.extend(mine);
    }
    println!(
        "{} critical sections ({} writes) in {:?}",
        intervals.len(),
        CLIENTS * WRITERS_PER_CLIENT * WRITES,
        started.elapsed()
    );
    let count: u64 = raw.get(&counter).await.unwrap();
    assert_eq!(
        count,
        (CLIENTS * WRITERS_PER_CLIENT * WRITES) as u64,
        "lost updates"
    );

    let overlaps = |x: &Interval, y: &Interval| x.0 < y.1 && y.0 < x.1;
    let mut read_overlaps = 0;
    for (i, x) in intervals.iter().enumerate() {
        for y in &intervals[i + 1..] {
            if overlaps(x, y) {
                assert!(
                    !x.2 && !y.2,
                    "a write overlapped another hold: {x:?} and {y:?}"
                );
                read_overlaps += 1;
            }
        }
    }
    println!("{read_overlaps} overlapping read pairs");
    assert!(read_overlaps > 0, "no two reads ever overlapped");
    assert!(!exists(&mut raw, &name).await);
    for c in &clients {
        c.shutdown().await;
    }
}

#[tokio::test]
async fn handles_are_cheap_and_debug_prints_the_name() {
    let server = RedisServer::start();
    let client = client(&server);
    let rw: RwLock = client.rw_lock("device:7");
    let text = format!("{rw:?} {:?} {:?}", rw.read_lock(), rw.write_lock());
    assert!(text.contains("RwLock") && text.contains("ReadLock") && text.contains("WriteLock"));
    assert!(text.contains("device:7"), "{text}");
    assert_eq!(rw.read_lock().name(), "device:7");
    assert_eq!(rw.write_lock().name(), "device:7");
    client.shutdown().await;
}

/// Compile-time: the handles are `Send + Sync + 'static` and their futures are `Send`, so they
/// can be moved into and awaited in spawned tasks (like tests/bounds.rs for `Lock`).
#[allow(dead_code)]
fn bounds(rw: RwLock) {
    fn check_static<T: Send + Sync + 'static>(_: &T) {}
    fn check_send<T: Send>(_: &T) {}
    check_static(&rw);
    let (read, write) = (rw.read_lock(), rw.write_lock());
    check_static(&read);
    check_static(&write);
    check_send(&read.lock());
    check_send(&read.try_lock_for(Duration::ZERO));
    check_send(&write.lock());
    check_send(&write.try_lock());
    check_send(&write.force_unlock());
    check_send(&read.is_locked());
}
