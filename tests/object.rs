//! The object and expiry methods of every primitive (Redisson's `RObject` / `RExpirable`):
//! which keys each acts on (a fair lock's queue and deadlines, a fenced lock's counter, a
//! permit-expirable semaphore's `{name}:timeout`), the exact TTLs on each key, how each kind
//! deletes (a lock is force-unlocked, a fair or fenced lock's keys are deleted without a
//! message, the halves of a read-write lock only in their mode, the latch publishes), the
//! conditional forms, `expire_at` / `expire_time`, the watchdog taking back an expiry set on a
//! lock it renews (as Redisson's does), and `try_release_many`.

mod common;

use std::time::{Duration, SystemTime};

use common::{
    RedisServer, client, client_with_watchdog, exists, ms, pttl, queue_key, timeouts_key,
    unique_name,
};
use futures_util::StreamExt;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, Expirable, ExpireTime, LockGuard, LockOptions, PermitId, Ttl};

/// One primitive made for the test, with what it holds and the keys its methods act on.
struct Made {
    object: Box<dyn Expirable>,
    /// The keys `expire` and `clear_expire` must act on, the name first.
    keys: Vec<String>,
    /// Keys of the primitive the methods must leave alone (a read hold's marker).
    untouched: Vec<String>,
    /// What keeps it held while the test runs.
    _guards: Vec<LockGuard>,
}

/// The kinds of objects, by the protocol's `okind` names.
const OKINDS: [&str; 12] = [
    "lock",
    "fair",
    "read",
    "write",
    "fenced",
    "spin",
    "nonreentrant",
    "nonreentrant_fair",
    "token",
    "semaphore",
    "psem",
    "latch",
];

/// An explicit lease long enough for every test: the watchdog does not touch these holds.
fn leased() -> LockOptions {
    LockOptions::new().lease(Duration::from_secs(120))
}

/// Makes a held (or set) `okind` named `name`; for the fair kinds a waiter of `other` queues
/// behind the holder, so that the queue keys exist.
async fn make(
    okind: &str,
    c: &Client,
    other: &Client,
    raw: &mut MultiplexedConnection,
    name: &str,
) -> Made {
    let n = name.to_owned();
    let mut keys = vec![n.clone()];
    let mut untouched = Vec::new();
    let mut guards = Vec::new();
    let object: Box<dyn Expirable> = match okind {
        "lock" | "spin" | "nonreentrant" | "token" | "write" => {
            let (object, guard): (Box<dyn Expirable>, LockGuard) = match okind {
                "lock" => {
                    let l = c.lock(name);
                    let g = l.lock_with_options(&leased()).await.unwrap();
                    (Box::new(l), g)
                }
                "spin" => {
                    let l = c.spin_lock(name);
                    let g = l.lock_with_options(&leased()).await.unwrap();
                    (Box::new(l), g)
                }
                "nonreentrant" => {
                    let l = c.non_reentrant_lock(name);
                    let g = l.lock_with_options(&leased()).await.unwrap();
                    (Box::new(l), g)
                }
                "token" => {
                    let l = c.token_lock(name);
                    let g = l.lock_with_options(&leased()).await.unwrap();
                    (Box::new(l), g)
                }
                _ => {
                    let l = c.rw_lock(name).write_lock();
                    let g = l.lock_with_options(&leased()).await.unwrap();
                    (Box::new(l), g)
                }
            };
            guards.push(guard);
            object
        }
        "read" => {
            let l = c.rw_lock(name).read_lock();
            let g = l.lock_with_options(&leased()).await.unwrap();
            untouched.push(format!("{{{name}}}:{}:rwlock_timeout:1", g.holder()));
            guards.push(g);
            Box::new(l)
        }
        "fair" | "nonreentrant_fair" => {
            let g = if okind == "fair" {
                c.fair_lock(name)
                    .lock_with_options(&leased())
                    .await
                    .unwrap()
            } else {
                c.non_reentrant_fair_lock(name)
                    .lock_with_options(&leased())
                    .await
                    .unwrap()
            };
            guards.push(g);
            // A waiter of another client queues behind the holder.
            let waiter = other.fair_lock(name);
            tokio::spawn(async move {
                let _ = waiter.try_lock_for(Duration::from_secs(60)).await;
            });
            common::wait_llen(raw, name, 1).await;
            keys.push(queue_key(name));
            keys.push(timeouts_key(name));
            if okind == "fair" {
                Box::new(c.fair_lock(name))
            } else {
                Box::new(c.non_reentrant_fair_lock(name))
            }
        }
        "fenced" => {
            let l = c.fenced_lock(name);
            guards.push(l.lock_with_options(&leased()).await.unwrap());
            keys.push(format!("redisson_lock_token:{{{name}}}"));
            Box::new(l)
        }
        "semaphore" => {
            let s = c.semaphore(name);
            assert!(s.try_set_permits(3).await.unwrap());
            Box::new(s)
        }
        "psem" => {
            let s = c.permit_expirable_semaphore(name);
            assert!(s.try_set_permits(3).await.unwrap());
            s.acquire(1, Some(Duration::from_secs(120))).await.unwrap();
            keys.push(format!("{{{name}}}:timeout"));
            Box::new(s)
        }
        "latch" => {
            let l = c.count_down_latch(name);
            assert!(l.try_set_count(2).await.unwrap());
            Box::new(l)
        }
        other => panic!("no such okind {other}"),
    };
    for key in &keys {
        assert!(exists(raw, key).await, "{okind}: {key} exists");
    }
    Made {
        object,
        keys,
        untouched,
        _guards: guards,
    }
}

/// Every okind: `is_exists`, `expire` (each key's exact TTL), `remaining_ttl`, `clear_expire`
/// (every key persistent), `delete` (every key gone), and the same calls on what is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_expires_clears_and_deletes_all_of_its_keys() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let other = client(&server);
    for okind in OKINDS {
        let name = unique_name(&format!("obj-{okind}"));
        let made = make(okind, &c, &other, &mut raw, &name).await;
        let object = &made.object;
        assert_eq!(object.name(), name);
        assert!(object.is_exists().await.unwrap(), "{okind}");
        let untouched_before: Vec<i64> = {
            let mut v = Vec::new();
            for key in &made.untouched {
                v.push(pttl(&mut raw, key).await);
            }
            v
        };

        assert!(object.expire(ms(50_000)).await.unwrap(), "{okind}");
        for key in &made.keys {
            let ttl = pttl(&mut raw, key).await;
            assert!((49_000..=50_000).contains(&ttl), "{okind}: {key} ttl {ttl}");
        }
        for (key, before) in made.untouched.iter().zip(&untouched_before) {
            let ttl = pttl(&mut raw, key).await;
            assert!(
                ttl <= *before && ttl > before - 5_000,
                "{okind}: {key} {before} -> {ttl}"
            );
        }
        match object.remaining_ttl().await.unwrap() {
            Ttl::Remaining(left) => {
                assert!(left <= ms(50_000) && left > ms(49_000), "{okind}: {left:?}");
            }
            other => panic!("{okind}: {other:?}"),
        }
        match object.expire_time().await.unwrap() {
            ExpireTime::At(at) => {
                let left = at.duration_since(SystemTime::now()).unwrap_or_default();
                assert!(left <= ms(50_100) && left > ms(48_000), "{okind}: {left:?}");
            }
            other => panic!("{okind}: {other:?}"),
        }

        assert!(object.clear_expire().await.unwrap(), "{okind}");
        for key in &made.keys {
            assert_eq!(pttl(&mut raw, key).await, -1, "{okind}: {key}");
        }
        assert_eq!(object.remaining_ttl().await.unwrap(), Ttl::Persistent);
        assert_eq!(object.expire_time().await.unwrap(), ExpireTime::Persistent);
        assert!(
            !object.clear_expire().await.unwrap(),
            "{okind}: nothing left to clear"
        );

        assert!(object.delete().await.unwrap(), "{okind}");
        for key in &made.keys {
            assert!(!exists(&mut raw, key).await, "{okind}: {key} deleted");
        }
        assert!(!object.is_exists().await.unwrap(), "{okind}");
        assert_eq!(object.remaining_ttl().await.unwrap(), Ttl::Absent);
        assert_eq!(object.expire_time().await.unwrap(), ExpireTime::Absent);
        assert!(!object.delete().await.unwrap(), "{okind}: deleted twice");
        assert!(!object.expire(ms(1_000)).await.unwrap(), "{okind}");
        assert!(!object.clear_expire().await.unwrap(), "{okind}");
        for key in &made.untouched {
            let _: () = raw.del(key).await.unwrap();
        }
        // A fair waiter still queued re-creates the queue keys: let it go.
        let _: () = raw.del(queue_key(&name)).await.unwrap();
        let _: () = raw.del(timeouts_key(&name)).await.unwrap();
    }
    c.shutdown().await;
    other.shutdown().await;
}

/// How each kind deletes, exactly as Redisson's `delete()`: a reentrant lock is force-unlocked
/// (its waiter woken by the unlock message), a fair lock's and a fenced lock's keys are deleted
/// without a message (the fenced counter starts again at 1), a half of a read-write lock only
/// deletes in its own mode, and the latch publishes its new-count message `1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_deletes_as_redisson_does() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let other = client(&server);

    // The reentrant lock: a force unlock, which wakes the waiter at once.
    let name = unique_name("del-lock");
    let _held = c.lock(&name).lock_with_options(&leased()).await.unwrap();
    let waiter = other.lock(&name);
    let waiting = tokio::spawn(async move { waiter.try_lock_for(Duration::from_secs(20)).await });
    common::wait_numsub(&mut raw, &common::channel(&name), 1).await;
    let started = std::time::Instant::now();
    assert!(c.lock(&name).delete().await.unwrap());
    let got = waiting
        .await
        .unwrap()
        .unwrap()
        .expect("the waiter got the lock");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by the message"
    );
    got.unlock().await.unwrap();

    // The fair lock: its three keys, and no message on the head's channel.
    let name = unique_name("del-fair");
    let _held = c
        .fair_lock(&name)
        .lock_with_options(&leased())
        .await
        .unwrap();
    let waiter = other.fair_lock(&name);
    let waiting = tokio::spawn(async move { waiter.try_lock_for(Duration::from_secs(2)).await });
    common::wait_llen(&mut raw, &name, 1).await;
    let head: Vec<String> = raw.lrange(queue_key(&name), 0, -1).await.unwrap();
    let head_channel = format!("{}:{}", common::channel(&name), head[0]);
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(&head_channel).await.unwrap();
    assert!(c.fair_lock(&name).delete().await.unwrap());
    for key in [name.clone(), queue_key(&name), timeouts_key(&name)] {
        assert!(!exists(&mut raw, &key).await, "{key}");
    }
    let mut messages = pubsub.into_on_message();
    let message = tokio::time::timeout(ms(300), messages.next()).await;
    assert!(
        message.is_err(),
        "a fair lock's delete publishes nothing: {message:?}"
    );
    drop(waiting.await.unwrap());

    // The fenced lock: the lock and its counter; the next acquisition draws token 1.
    let name = unique_name("del-fenced");
    let fenced = c.fenced_lock(&name);
    fenced.lock().await.unwrap().unlock().await.unwrap();
    let held = fenced.lock_with_options(&leased()).await.unwrap();
    assert_eq!(held.token(), Some(2));
    assert!(fenced.delete().await.unwrap());
    assert!(!exists(&mut raw, &format!("redisson_lock_token:{{{name}}}")).await);
    assert!(held.unlock().await.unwrap_err().is_not_held());
    let again = fenced.lock().await.unwrap();
    assert_eq!(again.token(), Some(1));
    again.unlock().await.unwrap();

    // The halves of a read-write lock delete only in their own mode.
    let name = unique_name("del-rw");
    let rw = c.rw_lock(&name);
    let writing = rw.write_lock().lock_with_options(&leased()).await.unwrap();
    assert!(
        !rw.read_lock().delete().await.unwrap(),
        "mode write: the read half leaves it"
    );
    assert!(exists(&mut raw, &name).await);
    assert!(rw.write_lock().delete().await.unwrap());
    assert!(!exists(&mut raw, &name).await);
    assert!(writing.unlock().await.unwrap_err().is_not_held());
    let reading = rw.read_lock().lock_with_options(&leased()).await.unwrap();
    assert!(
        !rw.write_lock().delete().await.unwrap(),
        "mode read: the write half leaves it"
    );
    assert!(rw.read_lock().delete().await.unwrap());
    assert!(!exists(&mut raw, &name).await);
    drop(reading);

    // The latch: deleted, and `1` published on its channel.
    let name = unique_name("del-latch");
    let latch = c.count_down_latch(&name);
    assert!(latch.try_set_count(3).await.unwrap());
    let mut pubsub = server.redis_client().get_async_pubsub().await.unwrap();
    let latch_channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    pubsub.subscribe(&latch_channel).await.unwrap();
    assert!(latch.delete().await.unwrap());
    let mut messages = pubsub.into_on_message();
    let message = tokio::time::timeout(ms(2_000), messages.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(message.get_payload::<String>().unwrap(), "1");
    assert!(!exists(&mut raw, &name).await);

    c.shutdown().await;
    other.shutdown().await;
}

/// The conditional forms (`PEXPIRE .. NX|XX|GT|LT`, Redis 7.0+) on every key of the object, or
/// a clear refusal on a server without them; `expire_at` sets an instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_expires_and_expire_at() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("obj-cond");
    let psem = c.permit_expirable_semaphore(&name);
    assert!(psem.try_set_permits(2).await.unwrap());
    psem.acquire(1, Some(Duration::from_secs(120)))
        .await
        .unwrap();
    let keys = [name.clone(), format!("{{{name}}}:timeout")];

    // Does the server know the options? Ask it directly on a scratch key.
    let _: () = raw.set("obj-cond-probe", 1).await.unwrap();
    let probe: redis::RedisResult<i64> = redis::cmd("PEXPIRE")
        .arg("obj-cond-probe")
        .arg(10_000)
        .arg("NX")
        .query_async(&mut raw)
        .await;
    if probe.is_err() {
        let err = psem.expire_if_not_set(ms(5_000)).await.unwrap_err();
        assert!(matches!(err, Error::Unsupported(_)), "{err}");
        assert!(err.to_string().contains("7.0"), "{err}");
        for key in &keys {
            assert_eq!(pttl(&mut raw, key).await, -1, "{key}: nothing changed");
        }
        c.shutdown().await;
        return;
    }

    // No expiry yet: XX does nothing, NX sets it.
    assert!(!psem.expire_if_set(ms(5_000)).await.unwrap());
    for key in &keys {
        assert_eq!(pttl(&mut raw, key).await, -1, "{key}");
    }
    assert!(psem.expire_if_not_set(ms(30_000)).await.unwrap());
    for key in &keys {
        let ttl = pttl(&mut raw, key).await;
        assert!((29_000..=30_000).contains(&ttl), "{key}: {ttl}");
    }
    // Now NX does nothing, XX does.
    assert!(!psem.expire_if_not_set(ms(5_000)).await.unwrap());
    assert!(psem.expire_if_set(ms(40_000)).await.unwrap());
    // GT only raises, LT only lowers.
    assert!(!psem.expire_if_greater(ms(10_000)).await.unwrap());
    assert!(psem.expire_if_greater(ms(60_000)).await.unwrap());
    for key in &keys {
        let ttl = pttl(&mut raw, key).await;
        assert!((59_000..=60_000).contains(&ttl), "{key}: {ttl}");
    }
    assert!(!psem.expire_if_less(ms(90_000)).await.unwrap());
    assert!(psem.expire_if_less(ms(20_000)).await.unwrap());
    for key in &keys {
        let ttl = pttl(&mut raw, key).await;
        assert!((19_000..=20_000).contains(&ttl), "{key}: {ttl}");
    }

    // expire_at: an instant, read back by expire_time.
    let at = SystemTime::now() + Duration::from_secs(45);
    assert!(psem.expire_at(at).await.unwrap());
    match psem.expire_time().await.unwrap() {
        ExpireTime::At(read) => {
            let diff = read.duration_since(at).unwrap_or_else(|e| e.duration());
            assert!(diff <= ms(1), "{diff:?}");
        }
        other => panic!("{other:?}"),
    }
    // Bad input is refused before anything is sent.
    assert!(matches!(
        psem.expire(Duration::ZERO).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        psem.expire_at(SystemTime::UNIX_EPOCH - Duration::from_secs(1))
            .await,
        Err(Error::InvalidArgument(_))
    ));
    c.shutdown().await;
}

/// As in Redisson: an expiry set on a lock the watchdog renews lasts until the next renewal,
/// which sets the lease again (and so does a cleared one); keys beyond the name keep it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_takes_back_an_expiry_set_on_a_lock_it_renews() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let watchdog = ms(3_000);
    let c = client_with_watchdog(&server, watchdog);
    let name = unique_name("obj-wd");
    let fenced = c.fenced_lock(&name);
    let guard = fenced.lock().await.unwrap();
    let counter = format!("redisson_lock_token:{{{name}}}");

    assert!(fenced.expire(ms(60_000)).await.unwrap());
    assert!(pttl(&mut raw, &name).await > 50_000);
    // Within a renewal period (a third of the watchdog) plus slack, the lease is back.
    let deadline = std::time::Instant::now() + watchdog;
    loop {
        let ttl = pttl(&mut raw, &name).await;
        if ttl <= 3_000 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never renewed back: {ttl}"
        );
        tokio::time::sleep(ms(50)).await;
    }
    // The counter is not renewed: it keeps the expiry set on it.
    let counter_ttl = pttl(&mut raw, &counter).await;
    assert!(counter_ttl > 50_000, "{counter_ttl}");

    assert!(fenced.clear_expire().await.unwrap());
    assert_eq!(pttl(&mut raw, &counter).await, -1);
    let deadline = std::time::Instant::now() + watchdog;
    loop {
        let ttl = pttl(&mut raw, &name).await;
        if (1..=3_000).contains(&ttl) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never renewed back: {ttl}"
        );
        tokio::time::sleep(ms(50)).await;
    }
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    c.shutdown().await;
}

/// `try_release_many`: as Redisson's `tryRelease(List)`, all or nothing, with a count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_release_many_counts_and_is_all_or_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("obj-many");
    let psem = c.permit_expirable_semaphore(&name);
    assert!(psem.try_set_permits(5).await.unwrap());
    let ids = psem.acquire(3, None).await.unwrap();
    assert_eq!(psem.available_permits().await.unwrap(), 2);

    // An unknown id among them: none is released.
    let unknown = PermitId::parse("0123456789abcdef0123456789abcdef").unwrap();
    assert_eq!(psem.try_release_many(&[ids[0], unknown]).await.unwrap(), 0);
    assert_eq!(psem.available_permits().await.unwrap(), 2);
    let held: i64 = raw.zcard(format!("{{{name}}}:timeout")).await.unwrap();
    assert_eq!(held, 3);

    // Two held ones: both, counted.
    assert_eq!(psem.try_release_many(&ids[..2]).await.unwrap(), 2);
    assert_eq!(psem.available_permits().await.unwrap(), 4);
    // The same id twice: released and counted once.
    assert_eq!(psem.try_release_many(&[ids[2], ids[2]]).await.unwrap(), 1);
    assert_eq!(psem.available_permits().await.unwrap(), 5);
    // Released already: 0.
    assert_eq!(psem.try_release_many(&ids).await.unwrap(), 0);
    // An expired lease: 0, and the permit is reclaimed all the same.
    let short = psem.acquire(1, Some(ms(50))).await.unwrap();
    tokio::time::sleep(ms(150)).await;
    assert_eq!(psem.try_release_many(&short).await.unwrap(), 0);
    assert_eq!(psem.available_permits().await.unwrap(), 5);
    // An empty list is refused before anything is sent.
    assert!(matches!(
        psem.try_release_many(&[]).await,
        Err(Error::InvalidArgument(_))
    ));
    c.shutdown().await;
}
