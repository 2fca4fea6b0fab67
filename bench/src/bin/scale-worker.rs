//! `scale-worker`: one of the several processes of the scale scenarios (S14, S15 of
//! `bench/src/scale.rs`), spawned by the harness; a client of its own, on a single server or a
//! cluster. Not a conformance agent: it speaks only to the harness, in lines on stdin/stdout.
//!
//! ```text
//! scale-worker (--url URL | --cluster URL,URL,...) fair --name NAME --first ID --count N
//! scale-worker (--url URL | --cluster URL,URL,...) pairs --prefix P --names N --millis MS
//! ```
//!
//! `fair`: N tasks, owners ID..ID+N, each waits for the fair lock NAME (`lock()`), and once
//! granted notes the time, notes it again just before sending the unlock, and unlocks. When
//! every task has been granted it prints one JSON line,
//! `{"client": "<client id>", "grants": [[owner, acquired_ns, releasing_ns], ...]}`.
//!
//! `pairs`: one task per name `P:0` .. `P:N-1`, each taking and releasing its lock in a loop.
//! It prints `ready` once connected, waits for a line on stdin, runs MS milliseconds and prints
//! `{"pairs": n, "elapsed_ns": ns, "lat_us": [...]}` (every pair's latency).
//!
//! Times are `CLOCK_REALTIME` in nanoseconds (`SystemTime`), which every process on the
//! machine shares.

use std::io::BufRead as _;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redisson_sync::{Client, LockOptions, Owner};

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("scale-worker: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let value = |flag: &str| -> Option<String> {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let number = |flag: &str| -> Result<u64, String> {
        value(flag)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} takes a number"))
    };
    let mode = args
        .iter()
        .find(|a| *a == "fair" || *a == "pairs")
        .cloned()
        .ok_or("mode fair or pairs missing")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    runtime.block_on(async {
        let client = match (value("--url"), value("--cluster")) {
            (Some(url), None) => Client::builder().url(url).build(),
            (None, Some(nodes)) => Client::builder().cluster(nodes.split(',')).build(),
            _ => return Err("--url or --cluster".to_string()),
        }
        .map_err(|e| format!("client: {e}"))?;
        let result = if mode == "fair" {
            let name = value("--name").ok_or("--name")?;
            fair(&client, &name, number("--first")?, number("--count")?).await
        } else {
            let prefix = value("--prefix").ok_or("--prefix")?;
            pairs(&client, &prefix, number("--names")?, number("--millis")?).await
        };
        client.shutdown().await;
        result
    })
}

async fn fair(client: &Client, name: &str, first: u64, count: u64) -> Result<(), String> {
    let mut tasks = Vec::new();
    for owner in first..first + count {
        let lock = client.fair_lock(name);
        tasks.push(tokio::spawn(async move {
            let guard = lock
                .lock_with_options(&LockOptions::new().owner(Owner::new(owner)))
                .await
                .map_err(|e| format!("fair lock of owner {owner}: {e}"))?;
            let acquired = now_ns();
            let releasing = now_ns();
            guard
                .unlock()
                .await
                .map_err(|e| format!("unlock of owner {owner}: {e}"))?;
            Ok::<_, String>((owner, acquired, releasing))
        }));
    }
    let mut grants = Vec::new();
    for t in tasks {
        let (owner, acquired, releasing) = t.await.map_err(|e| format!("task: {e}"))??;
        grants.push(serde_json::json!([owner, acquired, releasing]));
    }
    println!(
        "{}",
        serde_json::json!({"client": client.id(), "grants": grants})
    );
    Ok(())
}

async fn pairs(client: &Client, prefix: &str, names: u64, millis: u64) -> Result<(), String> {
    // Connections open, scripts loaded, before the harness starts the clock.
    let warm = client.lock(format!("{prefix}:warm:{}", client.id()));
    warm.lock()
        .await
        .map_err(|e| format!("warm-up: {e}"))?
        .unlock()
        .await
        .map_err(|e| format!("warm-up: {e}"))?;
    println!("ready");
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("stdin: {e}"))?;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(millis);
    let mut tasks = Vec::new();
    for i in 0..names {
        let lock = client.lock(format!("{prefix}:{i}"));
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                let guard = lock.lock().await.map_err(|e| format!("lock: {e}"))?;
                guard.unlock().await.map_err(|e| format!("unlock: {e}"))?;
                lat.push(t.elapsed().as_micros() as u64);
            }
            Ok::<_, String>(lat)
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.map_err(|e| format!("task: {e}"))??);
    }
    let elapsed = started.elapsed().as_nanos() as u64;
    println!(
        "{}",
        serde_json::json!({"pairs": lat.len(), "elapsed_ns": elapsed, "lat_us": lat})
    );
    Ok(())
}
