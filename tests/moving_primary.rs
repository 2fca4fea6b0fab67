//! A primary endpoint whose server becomes a replica (issue 13: a managed endpoint during a
//! failover, before it points at the new primary): lock writes answered `READONLY` ran
//! nothing, so the client retires its connections, tries again on new ones, and an acquire
//! waiting with `try_lock_for` is granted as soon as the endpoint is a primary again; nothing
//! is written meanwhile. Two `redis-server`s of the test's own.

mod common;

use std::time::{Duration, Instant};

use common::{RedisServer, exists, unique_name};
use redisson_sync::Client;

async fn role(con: &mut redis::aio::MultiplexedConnection) -> String {
    let reply: Vec<redis::Value> = redis::cmd("ROLE").query_async(con).await.unwrap();
    match reply.first() {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("ROLE: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_refused_by_a_demoted_endpoint_are_retried_until_it_is_a_primary_again() {
    let endpoint = RedisServer::start();
    let other = RedisServer::start();
    let mut raw = endpoint.conn().await;
    let client = Client::builder()
        .url(endpoint.url())
        .command_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap();
    let name = unique_name("moving");
    client
        .lock(&name)
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();

    // The endpoint's server becomes a replica of another one.
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(other.port())
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(role(&mut raw).await, "slave");

    // An acquire now meets READONLY, again and again, and keeps trying within its wait.
    let waiting = {
        let lock = client.lock(&name);
        tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(15)).await })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !waiting.is_finished(),
        "the acquire gave up on a read-only endpoint"
    );
    assert!(!exists(&mut raw, &name).await);

    // The endpoint is a primary again: the acquire is granted on it.
    let promoted = Instant::now();
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async(&mut raw)
        .await
        .unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("granted once the endpoint is a primary")
        .unwrap()
        .unwrap()
        .expect("granted");
    println!(
        "moving primary: granted {:.0} ms after the endpoint was a primary again",
        promoted.elapsed().as_secs_f64() * 1e3
    );
    assert!(exists(&mut raw, &name).await);
    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await);
    client.shutdown().await;
}
