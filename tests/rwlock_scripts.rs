//! The Lua scripts under `lua/rwlock/`: each loads, its sha is what redis-rs
//! sends with EVALSHA, its header documents KEYS, ARGV, the reply and the Redisson method it
//! mirrors; the replies of the watchdog's read renewal and of the refused upgrade hold when run
//! with a raw EVAL; and the read-write lock keeps working after `SCRIPT FLUSH`.

mod common;

use std::time::Duration;

use common::lua::{self, eval, script_flush};
use common::{RedisServer, client_with_watchdog, exists, field, hash, pttl, unique_name};
use redis::{AsyncCommands, Value};
use redisson_sync::{LockOptions, Owner};
use tokio::time::timeout;

/// The scripts of the read-write lock, with the Redisson name each header must cite.
const EXPECTED: [(&str, &str); 7] = [
    ("force_unlock.lua", "forceUnlockAsync"),
    ("read_acquire.lua", "RedissonReadLock.tryLockInnerAsync"),
    ("read_is_locked.lua", "RedissonReadLock.isLocked"),
    ("read_unlock.lua", "RedissonReadLock.unlockInnerAsync"),
    ("renew_read.lua", "ReadLockTask"),
    ("write_acquire.lua", "RedissonWriteLock.tryLockInnerAsync"),
    ("write_unlock.lua", "RedissonWriteLock.unlockInnerAsync"),
];

/// The text of `lua/rwlock/<file>`.
fn script(file: &str) -> String {
    lua::script("rwlock", file)
}

#[test]
fn the_rwlock_scripts_are_all_there() {
    lua::assert_files("rwlock", &EXPECTED);
}

#[test]
fn every_script_starts_with_a_header_naming_keys_argv_reply_and_redisson() {
    lua::assert_headers(
        "rwlock",
        &EXPECTED,
        &["KEYS[", "Reply", "Redisson", "docs/LAYOUT.md §5"],
    );
}

#[tokio::test]
async fn every_script_loads_and_its_sha_is_the_evalsha_hash() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    for (file, text) in lua::scripts("rwlock") {
        lua::script_load(&mut raw, &file, &text).await;
    }
}

/// docs/LAYOUT.md §5.8, 4.4+: only the given reader's markers and the hash are renewed; 0 for a
/// reader gone, a missing key and a key of another type, without failing the batch.
#[tokio::test]
async fn renew_read_extends_the_callers_markers_and_the_hash_only() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (acquire, renew) = (script("read_acquire.lua"), script("renew_read.lua"));
    let name = unique_name("scripts-renew-read");
    let missing = unique_name("scripts-renew-missing");
    let string = unique_name("scripts-renew-string");
    let prefix = |f: &str| format!("{{{name}}}:{f}:rwlock_timeout");
    let (a, b) = ("uuid-a:1", "uuid-b:2");
    for (f, lease) in [(a, "1000"), (a, "1000"), (b, "1000")] {
        let reply = eval(
            &mut raw,
            &acquire,
            &[&name, &prefix(f)],
            &[lease, f, &format!("{f}:write")],
        )
        .await;
        assert_eq!(reply, Value::Nil);
    }
    let () = raw.set(&string, "not a lock").await.unwrap();

    let reply = eval(
        &mut raw,
        &renew,
        &[&name, &missing, &string, &name],
        &[
            "30000",
            a,
            &prefix(a),
            a,
            &prefix(a),
            a,
            &prefix(a),
            "uuid-c:3",
            &prefix("uuid-c:3"),
        ],
    )
    .await;
    assert_eq!(
        reply,
        Value::Array(vec![
            Value::Int(1),
            Value::Int(0),
            Value::Int(0),
            Value::Int(0)
        ]),
        "held, missing key, another type, a reader not in the hash"
    );
    for k in [1, 2] {
        let t = pttl(&mut raw, &format!("{}:{k}", prefix(a))).await;
        assert!((29_000..=30_000).contains(&t), "a's marker {k}: {t}");
    }
    assert!((29_000..=30_000).contains(&pttl(&mut raw, &name).await));
    let t = pttl(&mut raw, &format!("{}:1", prefix(b))).await;
    assert!(t > 0 && t <= 1_000, "b's marker is not ours to renew: {t}");
    assert!(!exists(&mut raw, &missing).await);
    assert_eq!(pttl(&mut raw, &string).await, -1);
}

/// The refused upgrade: "upgrade", and the hash, its TTL and the markers are untouched; a
/// writer holding read re-enters as usual.
#[tokio::test]
async fn write_acquire_replies_upgrade_for_a_reader_and_changes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (read, write) = (script("read_acquire.lua"), script("write_acquire.lua"));
    let name = unique_name("scripts-upgrade");
    let a = "uuid-a:1";
    let aw = "uuid-a:1:write";
    let prefix = format!("{{{name}}}:{a}:rwlock_timeout");
    eval(&mut raw, &read, &[&name, &prefix], &["5000", a, aw]).await;
    let before = hash(&mut raw, &name).await;
    let reply = eval(&mut raw, &write, &[&name], &["30000", aw, a]).await;
    assert_eq!(reply, Value::BulkString(b"upgrade".to_vec()));
    assert_eq!(hash(&mut raw, &name).await, before);
    assert!(pttl(&mut raw, &name).await <= 5_000);
    // Another owner gets the PTTL.
    match eval(
        &mut raw,
        &write,
        &[&name],
        &["30000", "uuid-b:2:write", "uuid-b:2"],
    )
    .await
    {
        Value::Int(t) => assert!(t > 0 && t <= 5_000, "{t}"),
        other => panic!("{other:?}"),
    }
    let () = raw.del(&name).await.unwrap();
    // A writer that holds read too re-enters.
    assert_eq!(
        eval(&mut raw, &write, &[&name], &["5000", aw, a]).await,
        Value::Nil
    );
    assert_eq!(
        eval(&mut raw, &read, &[&name, &prefix], &["5000", a, aw]).await,
        Value::Nil
    );
    assert_eq!(
        eval(&mut raw, &write, &[&name], &["5000", aw, a]).await,
        Value::Nil
    );
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![
            ("mode".to_owned(), "write".to_owned()),
            (a.to_owned(), "1".to_owned()),
            (aw.to_owned(), "2".to_owned()),
        ]
    );
}

/// After `SCRIPT FLUSH` every read-write operation still works (NOSCRIPT fallback), the
/// read watchdog's renewal included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rwlock_operation_survives_script_flush() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = client_with_watchdog(&server, Duration::from_millis(900));
    let name = unique_name("scripts-rw-flush");
    let rw = client.rw_lock(&name);
    let me = LockOptions::new().owner(Owner::new(1));
    let reader = field(&client, Owner::new(1));

    script_flush(&mut raw).await;
    let r = rw.read_lock().lock_with_options(&me).await.unwrap();
    script_flush(&mut raw).await;
    assert!(rw.read_lock().is_locked().await.unwrap());
    // The read renewal after a flush: stretch the TTL; the renewal puts it back to 900 ms.
    script_flush(&mut raw).await;
    let () = raw.pexpire(&name, 60_000).await.unwrap();
    timeout(Duration::from_secs(5), async {
        while pttl(&mut raw, &name).await > 900 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("renewed after SCRIPT FLUSH");
    script_flush(&mut raw).await;
    r.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);

    script_flush(&mut raw).await;
    let w = rw.write_lock().lock_with_options(&me).await.unwrap();
    script_flush(&mut raw).await;
    let err = rw
        .write_lock()
        .try_lock_with_options(Duration::ZERO, &LockOptions::new().owner(Owner::new(2)))
        .await
        .unwrap();
    assert!(err.is_none());
    script_flush(&mut raw).await;
    w.unlock().await.unwrap();
    let _r = rw.read_lock().lock_with_options(&me).await.unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![
            (reader, "1".to_owned()),
            ("mode".to_owned(), "read".to_owned())
        ]
    );
    script_flush(&mut raw).await;
    assert!(rw.read_lock().force_unlock().await.unwrap());
    script_flush(&mut raw).await;
    assert!(!rw.write_lock().force_unlock().await.unwrap());
    client.shutdown().await;
}
