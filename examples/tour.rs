//! A tour of the reentrant lock: run with `scripts/demo` (or `cargo run --example tour`).
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server` on a free
//! port of 127.0.0.1 (no persistence) and stops it at the end.

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redisson_sync::{Client, LockOptions, Owner, Ttl};

type Result<T> = std::result::Result<T, support::Error>;

#[tokio::main]
async fn main() -> Result<()> {
    let (url, _server) = support::redis()?;
    println!("Redis: {url}\n");
    let mut raw = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;

    let client = Client::builder()
        .url(&url)
        .watchdog_timeout(Duration::from_millis(1500))
        .build()?;
    println!(
        "client id {} (the first half of every hash field it writes)",
        client.id()
    );

    // 1. lock and look at what Redisson would see
    let lock = client.lock("tour:order:42");
    let guard = lock.lock().await?;
    let fields: Vec<(String, u64)> = raw.hgetall("tour:order:42").await?;
    let pttl: i64 = raw.pttl("tour:order:42").await?;
    println!("\n1. lock(): HGETALL tour:order:42 = {fields:?}, PTTL = {pttl} ms");

    // 2. reentrancy: the same task locks again
    let again = lock.lock().await?;
    println!(
        "2. re-entered: hold count {}",
        lock.hold_count(Owner::current()).await?
    );

    // 3. another task is excluded
    let other = lock.clone();
    let excluded =
        tokio::spawn(async move { other.try_lock().await.map(|g| g.is_none()) }).await??;
    println!("3. another task's try_lock() -> busy = {excluded}");

    // 4. the watchdog keeps the lock past its 1.5 s lease
    tokio::time::sleep(Duration::from_millis(4000)).await;
    let ttl = lock.remaining_ttl().await?;
    println!(
        "4. after 4 s (lease 1.5 s): still locked = {}, remaining {ttl:?}",
        lock.is_locked().await?
    );

    // 5. a waiter wakes on the unlock message, not at lease expiry
    let waiter_lock = lock.clone();
    let waiter = tokio::spawn(async move {
        let g = waiter_lock.lock().await?;
        let woke = Instant::now();
        g.unlock().await?;
        Ok::<_, redisson_sync::Error>(woke)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    again.unlock().await?;
    let released = Instant::now();
    guard.unlock().await?;
    let woke = waiter.await??;
    println!(
        "5. waiter acquired {:?} after the final unlock",
        woke.saturating_duration_since(released)
    );

    // 6. an explicit lease is not renewed
    let leased = lock
        .lock_with_options(&LockOptions::new().lease(Duration::from_millis(500)))
        .await?;
    tokio::time::sleep(Duration::from_millis(700)).await;
    println!(
        "6. lease 500 ms, 700 ms later: remaining {:?} (the key expired)",
        lock.remaining_ttl().await?
    );
    let err = leased.unlock().await.unwrap_err();
    println!("   unlock() of the expired hold -> {err}");

    // 7. the guard learns when its lock is lost
    let guard = lock.lock().await?;
    client.lock("tour:order:42").force_unlock().await?;
    tokio::time::timeout(Duration::from_secs(3), guard.lost()).await?;
    println!(
        "7. after force_unlock(): guard.is_lost() = {}",
        guard.is_lost()
    );
    println!("   unlock() -> {}", guard.unlock().await.unwrap_err());

    assert_eq!(lock.remaining_ttl().await?, Ttl::Absent);
    client.shutdown().await;
    println!("\ndone");
    Ok(())
}
