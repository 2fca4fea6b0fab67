//! A start barrier with the count-down latch: workers in several services get ready at their
//! own pace, and nobody starts until all of them are ready.
//!
//! Run with `cargo run --example barrier`. Uses the Redis at `REDIS_URL` when set; otherwise
//! starts a throwaway `redis-server` on a free port of 127.0.0.1 (no persistence) and stops it
//! at the end.
//!
//! The latch `example:batch:ready` starts at the number of workers; each counts down when its
//! warm-up is done, then waits for the latch to open. The last `count_down` publishes `0` on
//! `redisson_countdownlatch__channel__{example:batch:ready}`, which wakes every waiter at once.
//! A Java worker using Redisson's `getCountDownLatch("example:batch:ready")` would count down
//! and wait the same way. The latch can then be set again for the next batch.

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use redisson_sync::Client;

type Result<T> = std::result::Result<T, support::Error>;

const LATCH: &str = "example:batch:ready";
const SERVICES: usize = 2;
const WORKERS_PER_SERVICE: usize = 3;
const BATCHES: u64 = 2;

#[tokio::main]
async fn main() -> Result<()> {
    let (url, _server) = support::redis()?;
    println!("Redis: {url}");
    let services: Vec<Client> = (0..SERVICES)
        .map(|_| Client::open(&url))
        .collect::<std::result::Result<_, _>>()?;
    let workers = (SERVICES * WORKERS_PER_SERVICE) as u64;

    for batch in 1..=BATCHES {
        let coordinator = services[0].count_down_latch(LATCH);
        if !coordinator.try_set_count(workers).await? {
            return Err("the latch of the previous batch is still closed".into());
        }
        println!("batch {batch}: latch set to {workers}");
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (s, service) in services.iter().enumerate() {
            for w in 0..WORKERS_PER_SERVICE {
                let latch = service.count_down_latch(LATCH);
                // Warm-ups of different lengths: the last worker is ready after ~100 ms.
                let warm_up =
                    Duration::from_millis(20 * (1 + (s * WORKERS_PER_SERVICE + w) as u64));
                tasks.push(tokio::spawn(async move {
                    tokio::time::sleep(warm_up).await;
                    latch.count_down().await?;
                    let ready_at = started.elapsed();
                    latch.await_open().await?;
                    let go_at = started.elapsed();
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>((s, w, ready_at, go_at))
                }));
            }
        }
        let mut last_ready = Duration::ZERO;
        let mut starts = Vec::new();
        for task in tasks {
            let (s, w, ready_at, go_at) = task.await??;
            println!(
                "  service {s} worker {w}: ready at {ready_at:>4.0?}, started at {go_at:>4.0?}"
            );
            last_ready = last_ready.max(ready_at);
            starts.push(go_at);
        }
        let first_start = starts.iter().min().copied().unwrap_or_default();
        if first_start < last_ready {
            return Err(format!(
                "a worker started at {first_start:?}, before the last was ready at {last_ready:?}"
            )
            .into());
        }
        println!(
            "batch {batch}: all {workers} started within {:?} of the last one being ready",
            starts.iter().max().copied().unwrap_or_default() - last_ready
        );
        if coordinator.count().await? != 0 {
            return Err("the latch did not open".into());
        }
    }
    for service in &services {
        service.shutdown().await;
    }
    Ok(())
}
