//! A device pool with the counting semaphore: at most `SLOTS` concurrent users of one device,
//! whichever service (and language) they run in.
//!
//! Run with `cargo run --example device_pool`. Uses the Redis at `REDIS_URL` when set;
//! otherwise starts a throwaway `redis-server` on a free port of 127.0.0.1 (no persistence) and
//! stops it at the end.
//!
//! Three services (three clients) run worker tasks that each use the device a few times. The
//! semaphore `example:device-pool` holds the free slots; a Java service calling Redisson's
//! `getSemaphore("example:device-pool").acquire()` would take its turn in the same pool, and
//! its `release()` would wake a Rust worker within milliseconds (and the other way round).

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redisson_sync::Client;

type Result<T> = std::result::Result<T, support::Error>;

const POOL: &str = "example:device-pool";
/// How many may use the device at once.
const SLOTS: i32 = 2;
const SERVICES: usize = 3;
const WORKERS_PER_SERVICE: usize = 3;
const USES: usize = 4;

#[tokio::main]
async fn main() -> Result<()> {
    let (url, _server) = support::redis()?;
    println!("Redis: {url}");
    let services: Vec<Client> = (0..SERVICES)
        .map(|_| Client::open(&url))
        .collect::<std::result::Result<_, _>>()?;
    // Whoever sets the pool up first sets its size; the others find it there.
    let created = services[0].semaphore(POOL).try_set_permits(SLOTS).await?;
    println!("pool {POOL:?} with {SLOTS} slots (created now: {created})");

    let in_use = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for (s, service) in services.iter().enumerate() {
        for w in 0..WORKERS_PER_SERVICE {
            let pool = service.semaphore(POOL);
            let (in_use, most) = (in_use.clone(), most.clone());
            workers.push(tokio::spawn(async move {
                for _ in 0..USES {
                    let slot = pool.acquire(1).await?;
                    let now = in_use.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    if now > SLOTS as usize {
                        return Err(format!("{now} users at once, pool of {SLOTS}").into());
                    }
                    println!(
                        "{:>6.0?}  service {s} worker {w} uses the device ({now} in use)",
                        started.elapsed()
                    );
                    tokio::time::sleep(Duration::from_millis(15)).await;
                    in_use.fetch_sub(1, Ordering::SeqCst);
                    // Released explicitly here; dropping `slot` would release it too.
                    slot.release().await?;
                }
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            }));
        }
    }
    for worker in workers {
        worker.await??;
    }
    let free = services[0].semaphore(POOL).available_permits().await?;
    println!(
        "\n{} uses by {} workers in {SERVICES} services, at most {} at once (pool of {SLOTS}); \
         {free} slots free at the end; {:?} in all",
        SERVICES * WORKERS_PER_SERVICE * USES,
        SERVICES * WORKERS_PER_SERVICE,
        most.load(Ordering::SeqCst),
        started.elapsed()
    );
    if free != i64::from(SLOTS) {
        return Err(format!("{free} slots free at the end, expected {SLOTS}").into());
    }

    let mut raw = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let () = redis::AsyncCommands::del(&mut raw, POOL).await?;
    for service in &services {
        service.shutdown().await;
    }
    Ok(())
}
