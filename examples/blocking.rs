//! The blocking API from plain threads: `cargo run --example blocking`.
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server` on a free
//! port of 127.0.0.1 (no persistence) and stops it at the end. No async runtime in sight: the
//! blocking client owns one.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redisson_sync::redis::Commands;
use redisson_sync::{Error, Owner, blocking};

type Result<T> = std::result::Result<T, support::Error>;

fn main() -> Result<()> {
    let (url, _server) = support::redis()?;
    println!("Redis: {url}\n");
    let mut raw = redisson_sync::redis::Client::open(url.as_str())?.get_connection()?;

    let client = blocking::Client::builder()
        .url(&url)
        .watchdog_timeout(Duration::from_millis(1500))
        .connect()?;
    let lock = client.lock("blocking:order:42");

    // 1. This thread is the owner: the hash field is <client id>:<thread owner id>.
    let guard = lock.lock()?;
    let fields: Vec<(String, u64)> = raw.hgetall("blocking:order:42")?;
    println!("1. lock() on the main thread: HGETALL = {fields:?}");
    println!(
        "   Owner::current() = {} (a thread owner)",
        Owner::current()
    );

    // 2. The same thread re-enters; another thread is excluded.
    let again = lock.lock()?;
    println!(
        "2. re-entered: hold count {}",
        lock.hold_count(Owner::current())?
    );
    let other = thread::scope(|s| s.spawn(|| lock.try_lock()).join().expect("no panic"))?;
    println!(
        "   another thread's try_lock() -> busy = {}",
        other.is_none()
    );

    // 3. A waiting thread wakes on the unlock message.
    let waiter = {
        let lock = lock.clone();
        thread::spawn(move || -> std::result::Result<Instant, Error> {
            let g = lock.lock()?;
            let woke = Instant::now();
            g.unlock()?;
            Ok(woke)
        })
    };
    thread::sleep(Duration::from_millis(300));
    again.unlock()?;
    let released = Instant::now();
    guard.unlock()?;
    let woke = waiter.join().expect("no panic")?;
    println!(
        "3. the waiting thread acquired {:?} after the final unlock",
        woke.saturating_duration_since(released)
    );

    // 4. Eight threads share a counter under the lock: read, pause, write, never a lost update.
    let counter = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (lock, counter) = (lock.clone(), counter.clone());
            thread::spawn(move || {
                for _ in 0..10 {
                    lock.with_lock(|| {
                        let v = counter.load(Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(1));
                        counter.store(v + 1, Ordering::SeqCst);
                        Ok::<_, Error>(())
                    })?;
                }
                Ok::<_, Error>(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic")?;
    }
    println!(
        "4. 8 threads x 10 sections: counter = {}",
        counter.load(Ordering::SeqCst)
    );

    // 5. A semaphore of 2 permits and a latch, from threads.
    let slots = client.semaphore("blocking:slots");
    slots.delete()?;
    slots.try_set_permits(2)?;
    let start = client.count_down_latch("blocking:start");
    start.delete()?;
    start.try_set_count(3)?;
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let (slots, start) = (slots.clone(), start.clone());
            thread::spawn(move || -> std::result::Result<(), Error> {
                start.count_down()?;
                start.await_open()?;
                let permit = slots.acquire(1)?;
                println!("   worker {i} holds a permit");
                thread::sleep(Duration::from_millis(50));
                permit.release()
            })
        })
        .collect();
    for w in workers {
        w.join().expect("no panic")?;
    }
    println!(
        "5. semaphore back to {} permits",
        slots.available_permits()?
    );

    // 6. A guard dropped without unlock: released in the background, at once.
    drop(lock.lock()?);
    let started = Instant::now();
    let other = thread::scope(|s| {
        s.spawn(|| lock.try_lock_for(Duration::from_secs(5)))
            .join()
            .expect("no panic")
    })?;
    println!(
        "6. after dropping a guard, another thread's try_lock_for(5 s) -> acquired = {} in {:?}",
        other.is_some(),
        started.elapsed()
    );
    drop(other);

    // 7. From async code the blocking API refuses instead of blocking a runtime thread.
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let refused = runtime.block_on(async { lock.is_locked() });
    println!("7. called inside async code -> {}", refused.unwrap_err());

    client.shutdown()?; // completes the releases of dropped guards
    println!("\ndone");
    Ok(())
}
