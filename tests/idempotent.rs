//! The idempotent request pattern (issue 17, part 7; `examples/idempotent_orders.rs`): many
//! concurrent submissions with one idempotency key, spread over two service instances (two
//! `Client`s with their own client ids and connections: the stand-ins of two processes; the
//! example runs the same code in two real processes), are processed exactly once and all get
//! the same result. A control run without the lock shows the test can tell.

mod common;

#[path = "../examples/support/orders.rs"]
mod orders;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{RedisServer, unique_name};
use orders::{BoxError, Orders};
use redisson_sync::redis::AsyncCommands;
use tokio::sync::Barrier;

/// Submissions per key, over both instances.
const REQUESTS: usize = 50;

/// `REQUESTS` submissions of `key`, alternating between the instances, each in its own task,
/// all released at once by a barrier; their results. `submit` is the request handler.
async fn submit_concurrently<F, Fut>(instances: &[Orders; 2], key: &str, submit: F) -> Vec<String>
where
    F: Fn(Orders, String) -> Fut,
    Fut: Future<Output = Result<String, BoxError>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(REQUESTS));
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let barrier = barrier.clone();
            let request = submit(instances[i % 2].clone(), key.to_owned());
            tokio::spawn(async move {
                barrier.wait().await;
                request.await
            })
        })
        .collect();
    let mut results = Vec::with_capacity(REQUESTS);
    for task in tasks {
        results.push(task.await.unwrap().unwrap());
    }
    results
}

async fn instances(server: &RedisServer, work: Duration) -> [Orders; 2] {
    [
        Orders::connect("instance A", &server.url(), work)
            .await
            .unwrap(),
        Orders::connect("instance B", &server.url(), work)
            .await
            .unwrap(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicates_are_processed_exactly_once() {
    let server = RedisServer::start();
    let mut data = server.conn().await;
    let instances = instances(&server, Duration::from_millis(20)).await;
    for round in 0..5 {
        let key = unique_name(&format!("idem-{round}"));
        let results = submit_concurrently(&instances, &key, |orders, key| async move {
            orders.submit(&key, "one order").await
        })
        .await;
        assert_eq!(results.len(), REQUESTS);
        assert_eq!(
            orders::processed(&mut data, &key).await.unwrap(),
            1,
            "round {round}"
        );
        let distinct: BTreeSet<&String> = results.iter().collect();
        assert_eq!(distinct.len(), 1, "round {round}: {distinct:?}");
        let result = results[0].clone();
        assert!(result.contains("run #1"), "{result}");
        let recorded: String = data.get(orders::result_key(&key)).await.unwrap();
        assert_eq!(recorded, result);
        // The lock is free; a late duplicate is answered from the record, not processed.
        let lock: bool = data.exists(orders::lock_name(&key)).await.unwrap();
        assert!(!lock);
        assert_eq!(
            instances[1].submit(&key, "one order").await.unwrap(),
            result
        );
        assert_eq!(orders::processed(&mut data, &key).await.unwrap(), 1);
    }
    for orders in &instances {
        orders.client().shutdown().await;
    }
}

/// Different keys do not wait for each other, and each is processed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn distinct_keys_are_each_processed_once() {
    let server = RedisServer::start();
    let mut data = server.conn().await;
    let instances = instances(&server, Duration::from_millis(20)).await;
    let keys: Vec<String> = (0..10)
        .map(|i| unique_name(&format!("idem-many-{i}")))
        .collect();
    let tasks: Vec<_> = keys
        .iter()
        .flat_map(|key| (0..10).map(move |i| (key.clone(), i)))
        .map(|(key, i)| {
            let orders = instances[i % 2].clone();
            tokio::spawn(async move {
                let result = orders.submit(&key, "order").await.unwrap();
                (key, result)
            })
        })
        .collect();
    let mut per_key: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for task in tasks {
        let (key, result) = task.await.unwrap();
        per_key.entry(key).or_default().insert(result);
    }
    assert_eq!(per_key.len(), keys.len());
    for (key, results) in &per_key {
        assert_eq!(results.len(), 1, "{key}: {results:?}");
        assert_eq!(orders::processed(&mut data, key).await.unwrap(), 1, "{key}");
    }
    for orders in &instances {
        orders.client().shutdown().await;
    }
}

/// The control: the same check-process-record steps without the lock process the order more
/// than once under the same load, so the test above would catch a lock that did not exclude.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_lock_duplicates_are_processed_more_than_once() {
    let server = RedisServer::start();
    let mut data = server.conn().await;
    let url = server.url();
    let instances = instances(&server, Duration::from_millis(20)).await;
    let key = unique_name("idem-unlocked");
    let results = submit_concurrently(&instances, &key, |orders, key| {
        let url = url.clone();
        async move {
            let mut data = redisson_sync::redis::Client::open(url)?
                .get_multiplexed_async_connection()
                .await?;
            if let Some(done) = data
                .get::<_, Option<String>>(orders::result_key(&key))
                .await?
            {
                return Ok(done);
            }
            let result = orders.process(&mut data, &key, "one order").await?;
            let _: () = data.set(orders::result_key(&key), &result).await?;
            Ok(result)
        }
    })
    .await;
    let processed = orders::processed(&mut data, &key).await.unwrap();
    assert!(
        processed > 1,
        "processed {processed} time(s) without the lock"
    );
    let distinct: BTreeSet<&String> = results.iter().collect();
    assert!(distinct.len() > 1);
    for orders in &instances {
        orders.client().shutdown().await;
    }
}
