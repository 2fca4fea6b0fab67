//! `Client::inspect` (src/inspect/, `lua/inspect/snapshot.lua`): the snapshot of every kind
//! of structure made by the crate (lock, fair lock with its queue, read-write lock with its
//! markers, fenced lock, both semaphores, latch, nothing), fields made by others kept raw,
//! names of another type refused, "this client" marking, and the proof that an inspection
//! changes nothing: `DUMP` and `PEXPIRETIME` of every key are equal before and after.

mod common;

use std::time::Duration;

use common::lua;
use common::{RedisServer, client, fair_client, ms, now_ms, unique_name, wait_llen, wait_numsub};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{
    Client, LockOptions, Owner, Ttl,
    inspect::{CounterHint, HoldMode, Snapshot, StructureKind},
};

/// Every key of the server with its `DUMP` (value and type, byte for byte) and its
/// `PEXPIRETIME` (the absolute expiry, which does not move as time passes), sorted.
async fn state(raw: &mut MultiplexedConnection) -> Vec<(Vec<u8>, Option<Vec<u8>>, i64)> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query_async(raw).await.unwrap();
    keys.sort();
    let mut all = Vec::new();
    for key in keys {
        let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(&key).query_async(raw).await.unwrap();
        // Before 7.0 there is no PEXPIRETIME: whether the key expires (PTTL -1, or > 0 as 1).
        let at: i64 = match redis::cmd("PEXPIRETIME").arg(&key).query_async(raw).await {
            Ok(at) => at,
            Err(_) => redis::cmd("PTTL")
                .arg(&key)
                .query_async::<i64>(raw)
                .await
                .unwrap()
                .min(1),
        };
        all.push((key, dump, at));
    }
    all
}

/// Inspects `name` through `client` and asserts that nothing at all changed on the server.
async fn inspect(raw: &mut MultiplexedConnection, client: &Client, name: &str) -> Snapshot {
    inspect_with(raw, client, name, CounterHint::Auto).await
}

async fn inspect_with(
    raw: &mut MultiplexedConnection,
    client: &Client,
    name: &str,
    hint: CounterHint,
) -> Snapshot {
    let before = state(raw).await;
    let snapshot = client.inspect(name).counter_hint(hint).await.unwrap();
    let after = state(raw).await;
    assert_eq!(before, after, "inspect changed the server's keys");
    snapshot
}

/// A holder as (field, client id, owner, count, this client).
type HolderRow = (String, Option<String>, Option<u64>, i64, bool);

fn owner(n: u64) -> LockOptions {
    LockOptions::new()
        .owner(Owner::new(n))
        .lease(Duration::from_secs(60))
}

/// A TTL set to a minute a moment ago.
fn about_a_minute(ttl: Ttl) -> bool {
    matches!(ttl, Ttl::Remaining(d) if d > Duration::from_secs(50) && d <= Duration::from_secs(60))
}

#[test]
fn the_script_header_names_its_contract_and_it_only_reads() {
    lua::assert_files("inspect", &[("snapshot.lua", "Client::inspect")]);
    lua::assert_headers(
        "inspect",
        &[("snapshot.lua", "Client::inspect")],
        &["KEYS[1]", "KEYS[5]", "ARGV[4]", "Reply", "Read only"],
    );
    let text = lua::script("inspect", "snapshot.lua");
    let called: Vec<String> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .flat_map(|l| l.split("redis.call('").skip(1).map(str::to_owned))
        .map(|rest| rest.split('\'').next().unwrap().to_owned())
        .collect();
    let reads = [
        "type", "pttl", "hlen", "hgetall", "hscan", "hget", "strlen", "get", "llen", "lrange",
        "zscore", "zcard", "zrange", "pubsub",
    ];
    assert!(!called.is_empty());
    for command in &called {
        assert!(reads.contains(&command.as_str()), "{command} is not a read");
    }
}

#[tokio::test]
async fn a_lock_held_twice_by_one_owner() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let other = client(&server);
    let name = unique_name("inspect-lock");
    let lock = c.lock(&name);
    let g1 = lock.lock_with_options(&owner(7)).await.unwrap();
    let g2 = lock.lock_with_options(&owner(7)).await.unwrap();

    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(s.name, name);
    assert_eq!(s.kind, StructureKind::Lock);
    assert!(!s.kind_inferred);
    assert!(about_a_minute(s.ttl), "{:?}", s.ttl);
    assert_eq!(s.holders.len(), 1);
    let h = &s.holders[0];
    assert_eq!(h.field, format!("{}:7", c.id()));
    assert_eq!(h.client_id.as_deref(), Some(c.id()));
    assert_eq!(h.owner, Some(7));
    assert_eq!(h.count, 2);
    assert_eq!(h.mode, None);
    assert!(h.this_client);
    assert!(s.is_held());
    assert!(s.queue.is_empty() && s.read_markers.is_empty() && s.acquired.is_empty());
    assert_eq!(
        (s.token, s.permits, s.count, s.mode),
        (None, None, None, None)
    );
    assert!(!s.truncated);

    let seen_by_other = inspect(&mut raw, &other, &name).await;
    assert!(!seen_by_other.holders[0].this_client);
    assert_eq!(seen_by_other.holders[0].client_id.as_deref(), Some(c.id()));

    g2.unlock().await.unwrap();
    g1.unlock().await.unwrap();
    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(
        (s.kind, s.ttl, s.holders.len()),
        (StructureKind::None, Ttl::Absent, 0)
    );
}

#[tokio::test]
async fn a_fair_lock_with_a_holder_and_two_waiters_in_order() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = fair_client(&server, Duration::from_secs(10), ms(200));
    let name = unique_name("inspect-fair");
    let lock = c.fair_lock(&name);
    let held = lock.lock_with_options(&owner(1)).await.unwrap();
    let mut waiters = Vec::new();
    for (i, n) in [2u64, 3].into_iter().enumerate() {
        let lock = lock.clone();
        waiters.push(tokio::spawn(async move {
            lock.try_lock_with_options(Duration::from_secs(20), &owner(n))
                .await
        }));
        wait_llen(&mut raw, &name, i + 1).await;
    }

    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(s.kind, StructureKind::Fair);
    assert!(about_a_minute(s.ttl), "{:?}", s.ttl);
    assert_eq!(s.holders.len(), 1);
    assert_eq!((s.holders[0].owner, s.holders[0].count), (Some(1), 1));
    assert!(s.holders[0].this_client);
    assert_eq!(s.queue_len, 2);
    let owners: Vec<Option<u64>> = s.queue.iter().map(|w| w.owner).collect();
    assert_eq!(owners, [Some(2), Some(3)]);
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    for w in &s.queue {
        assert_eq!(w.client_id.as_deref(), Some(c.id()));
        assert!(w.this_client);
        let score: f64 = raw.zscore(&timeouts, &w.field).await.unwrap();
        assert_eq!(w.deadline_ms, Some(score as i64), "{}", w.field);
    }
    // Redisson's arithmetic (docs/LAYOUT.md §4.4): the first waiter's deadline is the lock's
    // lease plus its slot from now, the second one slot (its 20 s wait) later.
    let (d2, d3) = (
        s.queue[0].deadline_ms.unwrap(),
        s.queue[1].deadline_ms.unwrap(),
    );
    assert_eq!(d3 - d2, 20_000);
    let expected = now_ms() + 60_000 + 20_000;
    assert!(
        (expected - 5_000..=expected).contains(&d2),
        "{d2} vs {expected}"
    );

    let seen_by_other = inspect(&mut raw, &client(&server), &name).await;
    assert!(seen_by_other.queue.iter().all(|w| !w.this_client));
    assert!(!seen_by_other.holders[0].this_client);

    for w in waiters {
        w.abort();
    }
    held.unlock().await.unwrap();
}

#[tokio::test]
async fn a_fair_queue_without_a_holder_is_still_a_fair_lock() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("inspect-fair-queue");
    // A Java waiter whose turn came while nobody holds the lock.
    let java = "6b1f7e52-3c1a-4d8e-9f00-1a2b3c4d5e6f:57";
    let deadline = now_ms() + 30_000;
    let () = raw
        .rpush(format!("redisson_lock_queue:{{{name}}}"), java)
        .await
        .unwrap();
    let () = raw
        .zadd(format!("redisson_lock_timeout:{{{name}}}"), java, deadline)
        .await
        .unwrap();

    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(s.kind, StructureKind::Fair);
    assert_eq!(s.ttl, Ttl::Absent);
    assert!(s.holders.is_empty());
    assert_eq!(s.queue.len(), 1);
    let w = &s.queue[0];
    assert_eq!(w.client_id.as_deref(), Some(&java[..36]));
    assert_eq!(w.owner, Some(57));
    assert_eq!(w.deadline_ms, Some(deadline));
    assert!(!w.this_client);
}

#[tokio::test]
async fn a_read_write_lock_with_two_readers_and_their_markers() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("inspect-rw");
    let read = c.rw_lock(&name).read_lock();
    let a1 = read.lock_with_options(&owner(1)).await.unwrap();
    let a2 = read.lock_with_options(&owner(1)).await.unwrap();
    let b1 = read.lock_with_options(&owner(2)).await.unwrap();

    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(s.kind, StructureKind::Rw);
    assert_eq!(s.mode, Some(HoldMode::Read));
    assert!(about_a_minute(s.ttl), "{:?}", s.ttl);
    let mut holders: Vec<(Option<u64>, i64, Option<HoldMode>, bool)> = s
        .holders
        .iter()
        .map(|h| (h.owner, h.count, h.mode, h.this_client))
        .collect();
    holders.sort_by_key(|h| h.0);
    assert_eq!(
        holders,
        [
            (Some(1), 2, Some(HoldMode::Read), true),
            (Some(2), 1, Some(HoldMode::Read), true)
        ]
    );
    let mut markers: Vec<(String, u64, String)> = s
        .read_markers
        .iter()
        .map(|m| {
            assert!(about_a_minute(m.ttl), "{m:?}");
            (m.holder.clone(), m.index, m.key.clone())
        })
        .collect();
    markers.sort();
    let f1 = format!("{}:1", c.id());
    let f2 = format!("{}:2", c.id());
    let key = |f: &str, k: u64| format!("{{{name}}}:{f}:rwlock_timeout:{k}");
    assert_eq!(
        markers,
        [
            (f1.clone(), 1, key(&f1, 1)),
            (f1.clone(), 2, key(&f1, 2)),
            (f2.clone(), 1, key(&f2, 1)),
        ]
    );
    for m in &s.read_markers {
        let pttl: i64 = raw.pttl(&m.key).await.unwrap();
        assert!(pttl > 50_000, "{}: {pttl}", m.key);
    }

    a2.unlock().await.unwrap();
    a1.unlock().await.unwrap();
    b1.unlock().await.unwrap();
}

#[tokio::test]
async fn a_write_lock_whose_writer_also_reads_under_a_hash_tag() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = format!("{{{}}}:rw", unique_name("inspect-tag"));
    let rw = c.rw_lock(&name);
    let w = rw.write_lock().lock_with_options(&owner(5)).await.unwrap();
    let r = rw.read_lock().lock_with_options(&owner(5)).await.unwrap();

    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(s.kind, StructureKind::Rw);
    assert_eq!(s.mode, Some(HoldMode::Write));
    let mut holders: Vec<(String, Option<HoldMode>, Option<u64>, i64)> = s
        .holders
        .iter()
        .map(|h| (h.field.clone(), h.mode, h.owner, h.count))
        .collect();
    holders.sort();
    let f = format!("{}:5", c.id());
    assert_eq!(
        holders,
        [
            (f.clone(), Some(HoldMode::Read), Some(5), 1),
            (format!("{f}:write"), Some(HoldMode::Write), Some(5), 1),
        ]
    );
    assert!(s.holders.iter().all(|h| h.this_client));
    assert_eq!(s.read_markers.len(), 1);
    // With a '{' in the name the markers use the name itself as the prefix (docs/LAYOUT.md §5.1).
    assert_eq!(
        s.read_markers[0].key,
        format!("{name}:{f}:rwlock_timeout:1")
    );
    assert!(about_a_minute(s.read_markers[0].ttl));

    r.unlock().await.unwrap();
    w.unlock().await.unwrap();
}

#[tokio::test]
async fn a_fenced_lock_with_its_token() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("inspect-fenced");
    let lock = c.fenced_lock(&name);
    let g1 = lock.lock_with_options(&owner(3)).await.unwrap();
    let g2 = lock.lock_with_options(&owner(3)).await.unwrap();

    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(s.kind, StructureKind::Fenced);
    assert_eq!(s.token, g2.token());
    assert_eq!(s.token, Some(2));
    assert_eq!((s.holders[0].owner, s.holders[0].count), (Some(3), 2));

    g2.unlock().await.unwrap();
    g1.unlock().await.unwrap();
    // A free fenced lock keeps its token counter: still a fenced lock, without holder.
    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(s.kind, StructureKind::Fenced);
    assert_eq!((s.ttl, s.token, s.is_held()), (Ttl::Absent, Some(2), false));
}

#[tokio::test]
async fn a_semaphore_with_its_permits() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("inspect-sem");
    let sem = c.semaphore(&name);
    assert!(sem.try_set_permits(5).await.unwrap());
    let permits = sem.acquire(2).await.unwrap();

    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(s.kind, StructureKind::Semaphore);
    assert!(s.kind_inferred, "a positive count could be a latch");
    assert_eq!(
        (s.permits, s.count, s.ttl),
        (Some(3), None, Ttl::Persistent)
    );
    assert!(s.holders.is_empty());

    let s = inspect_with(&mut raw, &c, &name, CounterHint::Semaphore).await;
    assert_eq!((s.kind, s.kind_inferred), (StructureKind::Semaphore, false));

    // Drained to 0: it cannot be a latch (a latch is deleted at 0), whatever the hint.
    permits.release().await.unwrap();
    sem.drain_permits().await.unwrap();
    let s = inspect_with(&mut raw, &c, &name, CounterHint::Latch).await;
    assert_eq!(
        (s.kind, s.kind_inferred, s.permits),
        (StructureKind::Semaphore, false, Some(0))
    );
}

#[tokio::test]
async fn a_permit_expirable_semaphore_with_its_acquired_ids() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("inspect-psem");
    let sem = c.permit_expirable_semaphore(&name);
    assert!(sem.try_set_permits(3).await.unwrap());
    let leased = sem.acquire(1, Some(Duration::from_secs(60))).await.unwrap();
    let forever = sem.acquire(1, None).await.unwrap();

    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(s.kind, StructureKind::PermitSemaphore);
    assert!(!s.kind_inferred);
    assert_eq!((s.permits, s.acquired_len), (Some(1), 2));
    assert_eq!(s.acquired.len(), 2);
    // Earliest lease end first: the leased permit, then the one without lease.
    assert_eq!(s.acquired[0].id, leased[0].to_string());
    assert_eq!(s.acquired[0].permit_id(), Some(leased[0]));
    let ends = s.acquired[0].expires_ms.unwrap();
    assert!(
        (now_ms() + 50_000..=now_ms() + 60_000).contains(&ends),
        "{ends}"
    );
    assert_eq!(s.acquired[1].id, forever[0].to_string());
    assert_eq!(s.acquired[1].expires_ms, None);

    sem.release(&leased).await.unwrap();
    sem.release(&forever).await.unwrap();
}

#[tokio::test]
async fn a_latch_with_its_count() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("inspect-latch");
    let latch = c.count_down_latch(&name);
    assert!(latch.try_set_count(3).await.unwrap());
    latch.count_down().await.unwrap();

    let s = inspect_with(&mut raw, &c, &name, CounterHint::Latch).await;
    assert_eq!((s.kind, s.kind_inferred), (StructureKind::Latch, false));
    assert_eq!(
        (s.count, s.permits, s.ttl),
        (Some(2), None, Ttl::Persistent)
    );

    // Nobody waiting: Redis cannot tell it from a semaphore, and the rule says semaphore.
    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!((s.kind, s.kind_inferred), (StructureKind::Semaphore, true));

    // A waiter subscribed to the latch's channel tells it apart.
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.await_for(Duration::from_secs(20)).await })
    };
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    wait_numsub(&mut raw, &channel, 1).await;
    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!(
        (s.kind, s.kind_inferred, s.count),
        (StructureKind::Latch, true, Some(2))
    );

    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    assert!(waiter.await.unwrap().unwrap());
}

#[tokio::test]
async fn nothing_at_a_name() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let s = inspect(&mut raw, &c, &unique_name("inspect-none")).await;
    assert_eq!(s.kind, StructureKind::None);
    assert_eq!(s.ttl, Ttl::Absent);
    assert!(s.holders.is_empty() && s.queue.is_empty() && !s.truncated);
    assert_eq!(
        (s.token, s.permits, s.count, s.mode),
        (None, None, None, None)
    );
}

#[tokio::test]
async fn fields_of_other_clients_parse_and_foreign_fields_stay_raw() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("inspect-foreign");
    let java = "6b1f7e52-3c1a-4d8e-9f00-1a2b3c4d5e6f:281474976710655";
    let () = raw
        .hset_multiple(&name, &[(java, "1"), ("not-a-holder-field", "4")])
        .await
        .unwrap();
    let s = inspect(&mut raw, &c, &name).await;
    assert_eq!((s.kind, s.ttl), (StructureKind::Lock, Ttl::Persistent));
    let mut holders: Vec<HolderRow> = s
        .holders
        .iter()
        .map(|h| {
            (
                h.field.clone(),
                h.client_id.clone(),
                h.owner,
                h.count,
                h.this_client,
            )
        })
        .collect();
    holders.sort();
    assert_eq!(
        holders,
        [
            (
                java.to_owned(),
                Some(java[..36].to_owned()),
                Some(281_474_976_710_655),
                1,
                false
            ),
            ("not-a-holder-field".to_owned(), None, None, 4, false),
        ]
    );
}

#[tokio::test]
async fn a_name_of_another_type_is_refused_and_left_alone() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let list = unique_name("inspect-list");
    let () = raw.rpush(&list, "a").await.unwrap();
    let text = unique_name("inspect-text");
    let () = raw.set(&text, "hello").await.unwrap();
    let profile = unique_name("inspect-profile");
    let () = raw.hset(&profile, "name", "Alice").await.unwrap();
    for name in [&list, &text, &profile] {
        let before = state(&mut raw).await;
        let err = c.inspect(name).await.unwrap_err();
        assert!(
            matches!(&err, redisson_sync::Error::WrongType { key } if key == name),
            "{name}: {err:?}"
        );
        assert_eq!(before, state(&mut raw).await);
    }
    assert!(matches!(
        c.inspect(&list).limit(0).await,
        Err(redisson_sync::Error::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn listings_are_cut_at_the_limit() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("inspect-limit");
    let read = c.rw_lock(&name).read_lock();
    let mut guards = Vec::new();
    for n in 1..=4 {
        guards.push(read.lock_with_options(&owner(n)).await.unwrap());
    }
    let before = state(&mut raw).await;
    let s = c.inspect(&name).limit(2).await.unwrap();
    assert_eq!(before, state(&mut raw).await);
    assert!(s.truncated);
    assert_eq!(s.kind, StructureKind::Rw);
    assert!(s.read_markers.len() <= 2, "{:?}", s.read_markers);
    let s = c.inspect(&name).await.unwrap();
    assert!(!s.truncated);
    assert_eq!((s.holders.len(), s.read_markers.len()), (4, 4));
    for g in guards {
        g.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn a_token_lock_shows_its_one_holder_in_each_format() {
    use redisson_sync::ValueFormat;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    for format in [
        ValueFormat::Random,
        ValueFormat::ClientId,
        ValueFormat::ClientIdAndOwner,
    ] {
        let name = unique_name("inspect-token");
        let guard = c
            .token_lock(&name)
            .with_format(format)
            .lock_with_options(&owner(9))
            .await
            .unwrap();
        let s = inspect(&mut raw, &c, &name).await;
        assert_eq!(s.kind, StructureKind::Token, "{format:?}");
        assert_eq!(s.kind.as_str(), "token");
        assert!(matches!(s.ttl, Ttl::Remaining(_)), "{:?}", s.ttl);
        assert_eq!(s.holders.len(), 1);
        let h = &s.holders[0];
        assert_eq!((h.field.as_str(), h.count), (guard.holder(), 1));
        match format {
            ValueFormat::ClientIdAndOwner => {
                assert_eq!((h.client_id.as_deref(), h.owner), (Some(c.id()), Some(9)));
                assert!(h.this_client);
            }
            ValueFormat::ClientId => {
                assert_eq!((h.client_id.as_deref(), h.owner), (Some(c.id()), None));
                assert!(h.this_client);
            }
            _ => assert_eq!((h.client_id.as_deref(), h.this_client), (None, false)),
        }
        guard.unlock().await.unwrap();
    }
    c.shutdown().await;
}
