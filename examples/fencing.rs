//! Fencing tokens: a holder paused past its lease tries to write after another holder took
//! over, and the storage refuses it (the scenario of Martin Kleppmann's "How to do distributed
//! locking").
//!
//! Run with `cargo run --example fencing`. Uses the Redis at `REDIS_URL` when set; otherwise
//! starts a throwaway `redis-server` on a free port of 127.0.0.1 (no persistence) and stops it
//! at the end.
//!
//! Two services (two clients) update one record through a storage that remembers the highest
//! fencing token it has accepted and refuses older ones. Service A takes the fenced lock with a
//! 500 ms lease and then "pauses" (a long GC pause, SIGSTOP, a slow network) for 800 ms. Its
//! lease runs out; service B takes the lock with a higher token and writes. When A resumes it
//! still believes it holds the lock and writes: the storage refuses the late write by its token.
//! A Java service using Redisson's `getFencedLock("example:ledger")` draws tokens from the same
//! counter.

#[path = "support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redisson_sync::{Client, LockOptions};

type Result<T> = std::result::Result<T, support::Error>;

const LOCK: &str = "example:ledger";

/// The protected resource: refuses writes whose token is older than the newest it accepted.
#[derive(Default)]
struct Storage {
    newest_token: u64,
    record: String,
}

impl Storage {
    fn write(&mut self, token: u64, record: &str) -> std::result::Result<(), String> {
        if token < self.newest_token {
            return Err(format!(
                "refused: token {token} is older than {} (a newer holder has written)",
                self.newest_token
            ));
        }
        self.newest_token = token;
        self.record = record.to_owned();
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let (url, _server) = support::redis()?;
    println!("Redis: {url}");
    let storage = Arc::new(Mutex::new(Storage::default()));
    let (a, b) = (Client::open(&url)?, Client::open(&url)?);
    let started = Instant::now();
    let at = || format!("{:>6.0?}", started.elapsed());

    let lease = LockOptions::new().lease(Duration::from_millis(500));
    let guard_a = a.fenced_lock(LOCK).lock_with_options(&lease).await?;
    let token_a = guard_a.token().ok_or("a fenced guard carries a token")?;
    println!(
        "{}  A holds the lock with token {token_a} (lease 500 ms), then pauses",
        at()
    );

    let service_b = {
        let storage = storage.clone();
        let lock = b.fenced_lock(LOCK);
        tokio::spawn(async move {
            let (guard, token) = lock.lock_and_get_token().await?;
            let outcome = storage.lock().unwrap().write(token, "balance = 70 (by B)");
            guard.unlock().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((token, outcome))
        })
    };
    let (token_b, written_b) = service_b.await??;
    println!(
        "{}  B got the lock with token {token_b} and wrote: {written_b:?}",
        at()
    );

    // A resumes, 800 ms after it took the lock: its lease ended long ago.
    tokio::time::sleep(Duration::from_millis(800).saturating_sub(started.elapsed())).await;
    println!(
        "{}  A resumes; its guard says lost = {} (A should check it, but here it writes anyway)",
        at(),
        guard_a.is_lost()
    );
    let late = storage
        .lock()
        .unwrap()
        .write(token_a, "balance = 100 (by A, stale)");
    println!("{}  A's late write with token {token_a}: {late:?}", at());
    let record = storage.lock().unwrap().record.clone();
    println!("\nthe record is {record:?}; the stale write was refused by its token");
    if late.is_ok() || record != "balance = 70 (by B)" {
        return Err("the storage accepted a stale write".into());
    }
    let unlocked = guard_a.unlock().await;
    println!("A's unlock: {unlocked:?} (the lock was no longer A's)");
    a.shutdown().await;
    b.shutdown().await;
    Ok(())
}
