//! The Lua scripts under `lua/lock/`: each loads, its sha is what redis-rs
//! sends with EVALSHA, its header documents KEYS, ARGV, the reply and the Redisson method it
//! mirrors, every reply in that header holds when the file is run with a raw EVAL, and the
//! library keeps working after `SCRIPT FLUSH` (the NOSCRIPT fallback).

mod common;

use std::time::Duration;

use common::lua::{self, eval, script_exists, script_flush};
use common::{
    RedisServer, assert_no_message, channel, client_with_watchdog, exists, field, hash, ms,
    next_message, pttl, subscribe, unique_name,
};
use redis::{AsyncCommands, Value};
use redisson_sync::{LockOptions, Owner};
use tokio::time::timeout;

/// The scripts the lock uses, with the Redisson name each header must cite.
const EXPECTED: [(&str, &str); 4] = [
    ("acquire.lua", "tryLockInnerAsync"),
    ("unlock.lua", "unlockInnerAsync"),
    ("force_unlock.lua", "forceUnlockAsync"),
    ("renew.lua", "LockRenewalScheduler"),
];

/// The text of `lua/lock/<file>`.
fn script(file: &str) -> String {
    lua::script("lock", file)
}

#[test]
fn the_lock_scripts_are_all_there() {
    lua::assert_files("lock", &EXPECTED);
}

#[test]
fn every_script_starts_with_a_header_naming_keys_argv_reply_and_redisson() {
    lua::assert_headers("lock", &EXPECTED, &["KEYS[", "ARGV[", "Reply", "Redisson"]);
}

#[tokio::test]
async fn every_script_loads_and_its_sha_is_the_evalsha_hash() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    for (file, text) in lua::scripts("lock") {
        let sha = lua::script_load(&mut raw, &file, &text).await;
        assert_eq!(sha.len(), 40, "{file}: {sha}");
        assert!(script_exists(&mut raw, &sha).await, "{file}");
    }
}

#[tokio::test]
async fn acquire_replies_nil_nil_then_pttl_as_its_header_says() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let acquire = script("acquire.lua");
    let name = unique_name("scripts-acquire");
    let (a, b) = ("uuid-a:1", "uuid-b:2");

    assert_eq!(
        eval(&mut raw, &acquire, &[&name], &["30000", a]).await,
        Value::Nil
    );
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(a.to_owned(), "1".to_owned())]
    );
    assert!((29_000..=30_000).contains(&pttl(&mut raw, &name).await));

    // Re-entry: nil again, count 2, TTL reset to ARGV[1].
    let () = raw.pexpire(&name, 5_000).await.unwrap();
    assert_eq!(
        eval(&mut raw, &acquire, &[&name], &["30000", a]).await,
        Value::Nil
    );
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(a.to_owned(), "2".to_owned())]
    );
    assert!((29_000..=30_000).contains(&pttl(&mut raw, &name).await));

    // Another field: the PTTL, nothing changed.
    match eval(&mut raw, &acquire, &[&name], &["30000", b]).await {
        Value::Int(ms) => assert!((29_000..=30_000).contains(&ms), "pttl {ms}"),
        other => panic!("expected the PTTL, got {other:?}"),
    }
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(a.to_owned(), "2".to_owned())]
    );

    // A lock without expiry: -1.
    let () = raw.persist(&name).await.unwrap();
    assert_eq!(
        eval(&mut raw, &acquire, &[&name], &["30000", b]).await,
        Value::Int(-1)
    );
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(a.to_owned(), "2".to_owned())]
    );
}

#[tokio::test]
async fn unlock_replies_nil_0_1_and_publishes_one_zero() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (acquire, unlock) = (script("acquire.lua"), script("unlock.lua"));
    let name = unique_name("scripts-unlock");
    let chan = channel(&name);
    let mut messages = subscribe(&server, &[&chan]).await;
    let (a, stranger) = ("uuid-a:1", "uuid-x:9");
    let unlock_args = |field| ["0", "10000", field, "PUBLISH"];

    // Nobody holds it: nil.
    assert_eq!(
        eval(&mut raw, &unlock, &[&name, &chan], &unlock_args(a)).await,
        Value::Nil
    );
    assert!(
        !exists(&mut raw, &name).await,
        "unlock of an absent lock must not create it"
    );

    eval(&mut raw, &acquire, &[&name], &["30000", a]).await;
    eval(&mut raw, &acquire, &[&name], &["30000", a]).await;

    // A stranger: nil, nothing changed.
    assert_eq!(
        eval(&mut raw, &unlock, &[&name, &chan], &unlock_args(stranger)).await,
        Value::Nil
    );
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(a.to_owned(), "2".to_owned())]
    );
    assert!(pttl(&mut raw, &name).await > 20_000);

    // First of two holds: 0, count 1, TTL reset to ARGV[2], no message.
    assert_eq!(
        eval(&mut raw, &unlock, &[&name, &chan], &unlock_args(a)).await,
        Value::Int(0)
    );
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(a.to_owned(), "1".to_owned())]
    );
    assert!((9_000..=10_000).contains(&pttl(&mut raw, &name).await));

    // Last hold: 1, key deleted, "0" published once.
    assert_eq!(
        eval(&mut raw, &unlock, &[&name, &chan], &unlock_args(a)).await,
        Value::Int(1)
    );
    assert!(!exists(&mut raw, &name).await);
    let msg = next_message(&mut messages).await;
    assert_eq!(msg.get_channel_name(), chan);
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    assert_no_message(
        &mut messages,
        ms(300),
        "exactly one message: the partial release and the nil replies publish nothing",
    )
    .await;
}

#[tokio::test]
async fn force_unlock_replies_1_then_0() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (acquire, force) = (script("acquire.lua"), script("force_unlock.lua"));
    let name = unique_name("scripts-force");
    let chan = channel(&name);
    let mut messages = subscribe(&server, &[&chan]).await;

    eval(&mut raw, &acquire, &[&name], &["30000", "uuid-a:1"]).await;
    eval(&mut raw, &acquire, &[&name], &["30000", "uuid-a:1"]).await;
    assert_eq!(
        eval(&mut raw, &force, &[&name, &chan], &["0", "PUBLISH"]).await,
        Value::Int(1)
    );
    assert!(
        !exists(&mut raw, &name).await,
        "force unlock deletes every hold"
    );
    assert_eq!(
        eval(&mut raw, &force, &[&name, &chan], &["0", "PUBLISH"]).await,
        Value::Int(0)
    );
    let msg = next_message(&mut messages).await;
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    assert_no_message(&mut messages, ms(300), "the 0 reply publishes nothing").await;
}

#[tokio::test]
async fn renew_replies_one_flag_per_key() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let (acquire, renew) = (script("acquire.lua"), script("renew.lua"));
    let held = unique_name("scripts-renew-held");
    let missing = unique_name("scripts-renew-missing");
    let taken = unique_name("scripts-renew-taken");
    let string = unique_name("scripts-renew-string");
    eval(&mut raw, &acquire, &[&held], &["1000", "uuid-a:1"]).await;
    eval(&mut raw, &acquire, &[&taken], &["1000", "uuid-b:2"]).await;
    let () = raw.set(&string, "not a lock").await.unwrap();

    let reply = eval(
        &mut raw,
        &renew,
        &[&held, &missing, &taken, &string],
        &["30000", "uuid-a:1", "uuid-a:1", "uuid-a:1", "uuid-a:1"],
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
        "held, missing, held by another field, another type"
    );
    assert!(
        (29_000..=30_000).contains(&pttl(&mut raw, &held).await),
        "renewed"
    );
    assert!(pttl(&mut raw, &taken).await <= 1_000, "not renewed");
    assert!(
        !exists(&mut raw, &missing).await,
        "renew must not create a missing lock"
    );
    let s: String = raw.get(&string).await.unwrap();
    assert_eq!(s, "not a lock");
    assert_eq!(pttl(&mut raw, &string).await, -1);
    assert_eq!(
        hash(&mut raw, &held).await,
        vec![("uuid-a:1".to_owned(), "1".to_owned())]
    );

    // The exact example of the brief: a held and a missing key.
    assert_eq!(
        eval(
            &mut raw,
            &renew,
            &[&held, &missing],
            &["30000", "uuid-a:1", "uuid-a:1"]
        )
        .await,
        Value::Array(vec![Value::Int(1), Value::Int(0)])
    );
}

/// After `SCRIPT FLUSH` every operation still works: redis-rs gets NOSCRIPT, loads the script
/// and retries. Checked for acquire, re-entry, unlock (partial and full), force unlock and the
/// watchdog's renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_survives_script_flush() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // Renewal every 300 ms, lease 900 ms.
    let client = client_with_watchdog(&server, Duration::from_millis(900));
    let name = unique_name("scripts-flush");
    let lock = client.lock(&name);
    let sha = |file| redis::Script::new(&script(file)).get_hash().to_owned();

    // Warm up: every script loaded once through the library.
    let warm = client.lock(unique_name("scripts-warm"));
    let g = warm.lock().await.unwrap();
    g.unlock().await.unwrap();
    assert!(script_exists(&mut raw, &sha("acquire.lua")).await);
    assert!(script_exists(&mut raw, &sha("unlock.lua")).await);

    script_flush(&mut raw).await;
    let g1 = lock.lock().await.unwrap();
    let field = field(&client, g1.owner());
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field.clone(), "1".to_owned())]
    );
    assert!(
        script_exists(&mut raw, &sha("acquire.lua")).await,
        "reloaded"
    );

    script_flush(&mut raw).await;
    let g2 = lock.lock().await.unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field.clone(), "2".to_owned())]
    );

    script_flush(&mut raw).await;
    g2.unlock().await.unwrap();
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field.clone(), "1".to_owned())]
    );
    assert!(
        script_exists(&mut raw, &sha("unlock.lua")).await,
        "reloaded"
    );

    // Renewal after a flush: stretch the TTL far beyond the lease; the next renewal puts it
    // back to the 900 ms lease, which only the renew script does.
    script_flush(&mut raw).await;
    let () = raw.pexpire(&name, 60_000).await.unwrap();
    timeout(Duration::from_secs(5), async {
        loop {
            let ms = pttl(&mut raw, &name).await;
            if (0..=900).contains(&ms) {
                break;
            }
            assert!(ms > 0, "the lock vanished: pttl {ms}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the watchdog renewed the lock after SCRIPT FLUSH");
    assert!(script_exists(&mut raw, &sha("renew.lua")).await, "reloaded");
    // And it keeps renewing: held well past several leases.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert_eq!(
        hash(&mut raw, &name).await,
        vec![(field.clone(), "1".to_owned())]
    );
    assert!(!g1.is_lost());

    script_flush(&mut raw).await;
    g1.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);

    // Force unlock after a flush.
    let g = lock
        .lock_with_options(&LockOptions::new().owner(Owner::new(7)))
        .await
        .unwrap();
    script_flush(&mut raw).await;
    assert!(lock.force_unlock().await.unwrap());
    assert!(!exists(&mut raw, &name).await);
    script_flush(&mut raw).await;
    assert!(!lock.force_unlock().await.unwrap());
    assert!(
        script_exists(&mut raw, &sha("force_unlock.lua")).await,
        "reloaded"
    );
    g.forget();

    client.shutdown().await;
}
