//! Device access control with the read-write lock: many reader tasks poll a device's status at
//! once, one operator at a time changes it, and no reader ever sees a half-made change.
//!
//! Run with `cargo run --example device_access`. Uses the Redis at `REDIS_URL` when set;
//! otherwise starts a throwaway `redis-server` on a free port of 127.0.0.1 (no persistence) and
//! stops it at the end.
//!
//! The device's status is the Redis hash `<device>:status` with two fields the operator writes
//! one after the other, `setpoint` then `applied` (the device confirming it). Under the write
//! lock they differ for a while; a reader holding the read lock must always see them equal. A
//! Java service using Redisson's `getReadWriteLock("example:device:7")` would take part in the
//! same lock.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redisson_sync::Client;

type Result<T> = std::result::Result<T, support::Error>;

const DEVICE: &str = "example:device:7";
/// Two services polling the device, each with this many reader tasks.
const READERS_PER_SERVICE: usize = 4;
const POLLS: usize = 25;
const CHANGES: u64 = 5;

#[tokio::main]
async fn main() -> Result<()> {
    let (url, _server) = support::redis()?;
    println!("Redis: {url}");
    let status = format!("{DEVICE}:status");
    let mut raw = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let () = raw
        .hset_multiple(&status, &[("setpoint", 0), ("applied", 0)])
        .await?;

    // Two dashboard services and one operator console: three clients, three client ids.
    let dashboards = [Client::open(&url)?, Client::open(&url)?];
    let console = Client::open(&url)?;
    let reading_now = Arc::new(AtomicUsize::new(0));
    let most_at_once = Arc::new(AtomicUsize::new(0));

    let started = Instant::now();
    let mut readers = Vec::new();
    for service in &dashboards {
        for _ in 0..READERS_PER_SERVICE {
            let device = service.rw_lock(DEVICE);
            let (mut conn, status) = (raw.clone(), status.clone());
            let (reading_now, most_at_once) = (reading_now.clone(), most_at_once.clone());
            readers.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..POLLS {
                    let guard = device.read_lock().lock().await?;
                    let now = reading_now.fetch_add(1, Ordering::SeqCst) + 1;
                    most_at_once.fetch_max(now, Ordering::SeqCst);
                    // Poll twice, a little apart: both must show one finished change.
                    let first: (u64, u64) = conn.hmget(&status, &["setpoint", "applied"]).await?;
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    let second: (u64, u64) = conn.hmget(&status, &["setpoint", "applied"]).await?;
                    reading_now.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await?;
                    if first.0 != first.1 || first != second {
                        return Err(
                            format!("half-made change seen: {first:?} then {second:?}").into()
                        );
                    }
                    seen.push(first.0);
                    tokio::time::sleep(Duration::from_millis(8)).await;
                }
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(seen)
            }));
        }
    }

    let operator = {
        let device = console.rw_lock(DEVICE);
        let mut conn = raw.clone();
        let status = status.clone();
        let reading_now = reading_now.clone();
        tokio::spawn(async move {
            for setpoint in 1..=CHANGES {
                let guard = device.write_lock().lock().await?;
                assert_eq!(reading_now.load(Ordering::SeqCst), 0, "readers inside");
                let () = conn.hset(&status, "setpoint", setpoint).await?;
                // The device takes a while to apply it; meanwhile the status is half-made.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let () = conn.hset(&status, "applied", setpoint).await?;
                guard.unlock().await?;
                println!(
                    "{:>6.0?}  operator set the setpoint to {setpoint}",
                    started.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        })
    };

    operator.await??;
    let mut polls = 0;
    let mut last_seen = 0;
    for reader in readers {
        let seen = reader.await??;
        polls += seen.len();
        last_seen = last_seen.max(seen.last().copied().unwrap_or(0));
    }
    println!(
        "\n{polls} polls by {} readers in two services, up to {} reading at once; \
         {CHANGES} changes by the operator; no reader saw a half-made change \
         (highest setpoint seen: {last_seen}); {:?} in all",
        2 * READERS_PER_SERVICE,
        most_at_once.load(Ordering::SeqCst),
        started.elapsed()
    );

    let () = raw.del(&status).await?;
    for client in dashboards.iter().chain([&console]) {
        client.shutdown().await;
    }
    Ok(())
}
