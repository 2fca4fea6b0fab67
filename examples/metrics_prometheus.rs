//! Metrics to Prometheus: installs the `metrics-exporter-prometheus` recorder, takes a few locks
//! and permits (one acquisition times out, one waiter is woken by an unlock), and prints the
//! metrics in Prometheus' text format, as a `/metrics` endpoint would serve them.
//!
//! Run with `cargo run --example metrics_prometheus --features metrics`. Uses the Redis at
//! `REDIS_URL` when set; otherwise starts a throwaway `redis-server` on a free port of
//! 127.0.0.1 (no persistence) and stops it at the end.
//!
//! The crate records through the `metrics` facade and installs no recorder itself: the
//! application picks its exporter. A service would serve the text with
//! `PrometheusBuilder::new().with_http_listener(addr).install()` (the exporter's
//! `http-listener` feature) instead of rendering it by hand. The metric names, types and labels
//! are listed in `redisson_sync::observe`.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redisson_sync::{Client, LockOptions, Owner};

type Result<T> = std::result::Result<T, support::Error>;

#[tokio::main]
async fn main() -> Result<()> {
    let (url, _server) = support::redis()?;
    println!("Redis: {url}");

    // The recorder first (the wait and hold times as Prometheus histograms, with buckets from
    // 1 ms to 1 min; the exporter's default is a summary), then the descriptions (HELP lines)
    // of the crate's metrics.
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".into()),
            &[0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 60.0],
        )?
        .install_recorder()?;
    redisson_sync::observe::describe_metrics();

    let client = Client::builder()
        .url(&url)
        .watchdog_timeout(Duration::from_millis(600))
        .build()?;

    // A lock held across a couple of renewals (every 200 ms), while another owner's try times
    // out and a third owner waits and is woken by the unlock.
    let lock = client.lock("example:metrics:order");
    let guard = lock.lock().await?;
    let other = LockOptions::new().owner(Owner::new(2));
    assert!(
        lock.try_lock_with_options(Duration::from_millis(100), &other)
            .await?
            .is_none()
    );
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let third = LockOptions::new().owner(Owner::new(3));
            lock.lock_with_options(&third).await?.unlock().await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    guard.unlock().await?;
    waiter.await??;

    // A fair lock and a semaphore, for their own `kind` labels.
    client
        .fair_lock("example:metrics:jobs")
        .lock()
        .await?
        .unlock()
        .await?;
    let pool = client.semaphore("example:metrics:pool");
    pool.try_set_permits(2).await?;
    let permits = pool.acquire(2).await?;
    assert!(pool.try_acquire(1).await?.is_none());
    permits.release().await?;

    client.shutdown().await;
    println!("\n{}", prometheus.render());
    Ok(())
}
