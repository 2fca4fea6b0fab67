//! A fair job queue: several workers, each in its own task, take jobs from a Redis list under
//! a fair lock, so they are served strictly in the order they asked (`cargo run --example
//! fair_jobs`). A Java service using Redisson's `getFairLock("fair_jobs:lock")` on the same
//! Redis would take its turns in the same queue.
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server` on a free
//! port of 127.0.0.1 (no persistence) and stops it at the end.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redisson_sync::Client;

type Result<T> = std::result::Result<T, support::Error>;

const LOCK: &str = "fair_jobs:lock";
const JOBS: &str = "fair_jobs:pending";
const WORKERS: usize = 4;
const JOB_COUNT: usize = 16;

#[tokio::main]
async fn main() -> Result<()> {
    let (url, _server) = support::redis()?;
    println!("Redis: {url}\n");
    let mut raw = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let client = Client::open(&url)?;
    let lock = client.fair_lock(LOCK);

    // The jobs, in arrival order.
    let _: () = raw.del(JOBS).await?;
    for n in 1..=JOB_COUNT {
        let _: () = raw.rpush(JOBS, format!("job-{n}")).await?;
    }

    // Hold the lock while the workers line up, one after another, so their order is known.
    let gate = lock.lock().await?;
    let turn = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for id in 0..WORKERS {
        let lock = lock.clone();
        let turn = turn.clone();
        let mut conn = raw.clone();
        workers.push(tokio::spawn(async move {
            let mut taken = Vec::new();
            loop {
                let asked = Instant::now();
                // Served in arrival order: the worker that asked first gets the lock first.
                let guard = lock.lock().await?;
                let job: Option<String> = conn.lpop(JOBS, None).await?;
                let t = turn.fetch_add(1, Ordering::SeqCst);
                guard.unlock().await?;
                let Some(job) = job else { break };
                println!(
                    "turn {t:>2}: worker {id} took {job:<6} after waiting {:>3} ms",
                    asked.elapsed().as_millis()
                );
                taken.push(job);
                // "Process" the job (outside the lock), then line up again: at the tail, behind
                // the workers already waiting, so turns go round-robin. (With a plain `Lock`,
                // whichever worker's retry reaches Redis first would win.)
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(taken)
        }));
        // Wait until this worker is in the fair lock's queue before starting the next.
        let queue = format!("redisson_lock_queue:{{{LOCK}}}");
        while raw.llen::<_, usize>(&queue).await? < id + 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let queue: Vec<String> = raw
        .lrange(format!("redisson_lock_queue:{{{LOCK}}}"), 0, -1)
        .await?;
    println!("waiters queued (hash fields, in order):");
    for field in &queue {
        println!("  {field}");
    }
    println!();
    gate.unlock().await?;

    let mut all = Vec::new();
    for (id, worker) in workers.into_iter().enumerate() {
        let taken = worker.await??;
        println!("worker {id}: {taken:?}");
        all.extend(taken);
    }
    assert_eq!(all.len(), JOB_COUNT, "every job taken exactly once");
    client.shutdown().await;
    Ok(())
}
