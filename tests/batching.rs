//! Concurrent calls written together (src/conn/batch.rs): while several calls are in flight,
//! their requests go as one pipeline per write, and each call still gets its own reply, its own
//! error naming its own key, and the same effects in Redis as when sent alone. The batches are
//! read from the `redisson_sync_batches_total` / `_batched_calls_total` counters, so that a
//! test here fails if nothing was batched.

#![cfg(feature = "metrics")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::recorder::snapshotter;
use common::{RedisServer, command_stats, dbsize, unique_name, value};
use metrics_util::debugging::DebugValue;
use redis::AsyncCommands;
use redisson_sync::observe::{BATCHED_CALLS, BATCHES};
use redisson_sync::{Client, Error, Lock};
use tokio::sync::Barrier;
use tokio::time::timeout;

/// Tasks calling at once (one lock each), and pairs per task: calls batch from 32 in flight on
/// a server.
const TASKS: usize = 128;
const ROUNDS: usize = 10;
/// Bounds each test's load (it takes well under a second).
const BOUND: Duration = Duration::from_secs(30);

/// The two counters' increase since the last call (a snapshot swaps counters to 0).
fn batches_since() -> (u64, u64) {
    let (mut batches, mut calls) = (0, 0);
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        if let DebugValue::Counter(n) = value {
            match key.key().name() {
                BATCHES => batches += n,
                BATCHED_CALLS => calls += n,
                _ => {}
            }
        }
    }
    (batches, calls)
}

/// The counters are the process's: one test at a time reads them.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// One task per lock, started together, each running `ROUNDS` lock+unlock pairs on its lock;
/// every task's results in order. Asserts that the counters saw batches written meanwhile.
async fn pairs_at_once(locks: &[Lock]) -> Vec<Vec<redisson_sync::Result<()>>> {
    batches_since();
    let start = Arc::new(Barrier::new(locks.len()));
    let tasks: Vec<_> = locks
        .iter()
        .map(|lock| {
            let (lock, start) = (lock.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                let mut results = Vec::with_capacity(ROUNDS);
                for _ in 0..ROUNDS {
                    let pair = async { lock.lock().await?.unlock().await };
                    results.push(pair.await);
                }
                results
            })
        })
        .collect();
    let mut all = Vec::with_capacity(tasks.len());
    for task in tasks {
        all.push(timeout(BOUND, task).await.expect("bounded").unwrap());
    }
    let (batches, calls) = batches_since();
    assert!(
        batches >= 1 && calls >= 2 * batches,
        "{batches} batches of {calls} calls"
    );
    all
}

/// `SCRIPT LOAD`s the server has run (`script|load` from Redis 7 on, `script` before).
async fn script_loads(raw: &mut redis::aio::MultiplexedConnection) -> u64 {
    command_stats(raw, "script|load").await.calls + command_stats(raw, "script").await.calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_share_writes_and_each_gets_its_own_reply_and_error() {
    let _serial = serial().await;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = Client::open(server.url()).unwrap();
    let name = unique_name("batch");
    // Every fourth task's key holds a string: its acquires are refused with WRONGTYPE in the
    // same writes as the others' grants and releases.
    let wrong = |task: usize| task % 4 == 3;
    let key = move |task: usize| format!("{name}:{task}");
    for task in (0..TASKS).filter(|&t| wrong(t)) {
        let () = raw.set(key(task), "not a lock").await.unwrap();
    }
    let locks: Vec<Lock> = (0..TASKS).map(|t| client.lock(key(t))).collect();
    let results = pairs_at_once(&locks).await;
    for (task, results) in results.into_iter().enumerate() {
        for result in results {
            match (wrong(task), result) {
                (false, Ok(())) => {}
                (true, Err(Error::WrongType { key: named })) => assert_eq!(named, key(task)),
                (wrong, other) => panic!("task {task} (wrong type: {wrong}): {other:?}"),
            }
        }
    }
    // The refused keys are as they were; every lock was released.
    for task in (0..TASKS).filter(|&t| wrong(t)) {
        assert_eq!(
            value(&mut raw, &key(task)).await.as_deref(),
            Some("not a lock")
        );
    }
    assert_eq!(dbsize(&mut raw).await, (TASKS / 4) as u64);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_the_server_forgot_is_loaded_again_for_calls_in_a_batch() {
    let _serial = serial().await;
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = Client::open(server.url()).unwrap();
    let name = unique_name("batch-noscript");
    let locks: Vec<Lock> = (0..TASKS)
        .map(|t| client.lock(format!("{name}:{t}")))
        .collect();
    // The scripts loaded, then forgotten.
    locks[0].lock().await.unwrap().unlock().await.unwrap();
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut raw)
        .await
        .unwrap();
    let loads_before = script_loads(&mut raw).await;
    let results = pairs_at_once(&locks).await;
    for (task, results) in results.into_iter().enumerate() {
        for result in results {
            assert!(result.is_ok(), "task {task}: {result:?}");
        }
    }
    let loads = script_loads(&mut raw).await;
    assert!(
        loads > loads_before,
        "no SCRIPT LOAD after the flush ({loads_before} -> {loads})"
    );
    assert_eq!(dbsize(&mut raw).await, 0);
    client.shutdown().await;
}
