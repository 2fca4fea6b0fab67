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
use redisson_sync::{Client, Error};
use tokio::sync::Barrier;
use tokio::time::timeout;

/// Tasks calling at once, and pairs per task: calls batch from 32 in flight on a server.
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

/// `TASKS` tasks started together, each running `pair` `ROUNDS` times with its task number;
/// every task's results in order.
async fn all_at_once<F, Fut, T>(pair: F) -> Vec<Vec<T>>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = T> + Send,
    T: Send + 'static,
{
    let (pair, start) = (Arc::new(pair), Arc::new(Barrier::new(TASKS)));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (pair, start) = (pair.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                let mut results = Vec::with_capacity(ROUNDS);
                for _ in 0..ROUNDS {
                    results.push(pair(task).await);
                }
                results
            })
        })
        .collect();
    let mut all = Vec::with_capacity(TASKS);
    for task in tasks {
        all.push(timeout(BOUND, task).await.expect("bounded").unwrap());
    }
    all
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
    batches_since();
    let locks: Arc<Vec<_>> = Arc::new((0..TASKS).map(|t| client.lock(key(t))).collect());
    let results = all_at_once({
        let locks = locks.clone();
        move |task| {
            let locks = locks.clone();
            async move {
                match locks[task].lock().await {
                    Ok(guard) => guard.unlock().await.map(|()| "released"),
                    Err(e) => Err(e),
                }
            }
        }
    })
    .await;
    let (batches, calls) = batches_since();
    for (task, results) in results.into_iter().enumerate() {
        for result in results {
            match (wrong(task), result) {
                (false, Ok("released")) => {}
                (true, Err(Error::WrongType { key: named })) => assert_eq!(named, key(task)),
                (wrong, other) => panic!("task {task} (wrong type: {wrong}): {other:?}"),
            }
        }
    }
    assert!(
        batches >= 1 && calls >= 2 * batches,
        "{batches} batches of {calls} calls"
    );
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
    let locks: Arc<Vec<_>> = Arc::new(
        (0..TASKS)
            .map(|t| client.lock(format!("{name}:{t}")))
            .collect(),
    );
    // The scripts loaded, then forgotten.
    locks[0].lock().await.unwrap().unlock().await.unwrap();
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut raw)
        .await
        .unwrap();
    let loads_before = command_stats(&mut raw, "script|load").await.calls
        + command_stats(&mut raw, "script").await.calls;
    batches_since();
    let results = all_at_once({
        let locks = locks.clone();
        move |task| {
            let locks = locks.clone();
            async move { locks[task].lock().await?.unlock().await }
        }
    })
    .await;
    let (batches, calls) = batches_since();
    for (task, results) in results.into_iter().enumerate() {
        for result in results {
            assert!(result.is_ok(), "task {task}: {result:?}");
        }
    }
    assert!(
        batches >= 1 && calls >= 2 * batches,
        "{batches} batches of {calls} calls"
    );
    let loads = command_stats(&mut raw, "script|load").await.calls
        + command_stats(&mut raw, "script").await.calls;
    assert!(
        loads > loads_before,
        "no SCRIPT LOAD after the flush ({loads_before} -> {loads})"
    );
    assert_eq!(dbsize(&mut raw).await, 0);
    client.shutdown().await;
}
