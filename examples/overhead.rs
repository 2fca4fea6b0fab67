//! Client-side overhead of `Lock`: uncontended lock+unlock pairs through the crate, against the
//! same two scripts sent by hand with EVALSHA on one redis-rs connection, alternating A B A B in
//! one run on one Redis. Prints medians and the ratio.
//!
//! `cargo run --release --example overhead` (needs `REDIS_URL`, or starts a throwaway
//! `redis-server` like the tour does).

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use redisson_sync::Client;

const PAIRS: usize = 2_000;
const ROUNDS: usize = 5;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), support::Error> {
    let (url, _server) = support::redis()?;
    let client = Client::open(&url)?;
    let mut raw = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let acquire = redis::Script::new(include_str!("../lua/lock/acquire.lua"));
    let unlock = redis::Script::new(include_str!("../lua/lock/unlock.lua"));
    let field = format!("{}:1", client.id());

    let (mut crate_us, mut raw_us) = (Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        // A: the crate
        let lock = client.lock("overhead:crate");
        let mut lat = Vec::with_capacity(PAIRS);
        for _ in 0..PAIRS {
            let t = Instant::now();
            lock.lock().await?.unlock().await?;
            lat.push(t.elapsed());
        }
        // B: the same scripts by hand
        let mut lat_raw = Vec::with_capacity(PAIRS);
        for _ in 0..PAIRS {
            let t = Instant::now();
            let r: Option<i64> = acquire
                .key("overhead:raw")
                .arg(30_000)
                .arg(&field)
                .invoke_async(&mut raw)
                .await?;
            assert!(r.is_none());
            let r: Option<i64> = unlock
                .key("overhead:raw")
                .key("redisson_lock__channel:{overhead:raw}")
                .arg(0)
                .arg(30_000)
                .arg(&field)
                .arg("PUBLISH")
                .invoke_async(&mut raw)
                .await?;
            assert_eq!(r, Some(1));
            lat_raw.push(t.elapsed());
        }
        if round > 0 {
            // round 0 warms up
            crate_us.push(median(&mut lat));
            raw_us.push(median(&mut lat_raw));
        }
    }
    let c = median_f(&mut crate_us);
    let r = median_f(&mut raw_us);
    println!("lock+unlock pair, p50 over {ROUNDS} rounds x {PAIRS} pairs (alternating, one run):");
    println!("  redisson-sync Lock : {c:8.1} us");
    println!("  raw EVALSHA x2     : {r:8.1} us");
    println!("  ratio crate/raw    : {:8.2}", c / r);
    client.shutdown().await;
    Ok(())
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn median_f(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
