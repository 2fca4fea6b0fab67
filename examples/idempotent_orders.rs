//! The idempotent request pattern: one order submitted 50 times at once, by two processes,
//! with one idempotency key, is processed exactly once; every submission gets the same
//! receipt.
//!
//! Run with `cargo run --example idempotent_orders`. Uses the Redis at `REDIS_URL` when set;
//! otherwise starts a throwaway `redis-server` on a free port of 127.0.0.1 (no persistence) and
//! stops it at the end.
//!
//! The example is two real processes: it starts a second copy of its own executable
//! (`idempotent_orders --worker <url> <key>`), waits until that one is connected, then tells it
//! to go and submits its own 25 requests at the same moment. Each process is one service
//! instance with its own `Client` (its own client id, as two machines would have) and 25
//! concurrent requests, each in its own task, as a web server would run them. The pattern itself
//! (result record, lock, re-check inside the lock) is in `examples/support/orders.rs`, which
//! `tests/idempotent.rs` uses to prove it under concurrency.

#[path = "support/mod.rs"]
mod support;

#[path = "support/orders.rs"]
mod orders;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use orders::{BoxError, Orders};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

type Result<T> = std::result::Result<T, BoxError>;

/// Submissions per process.
const REQUESTS: usize = 25;

/// How long processing an order takes.
const WORK: Duration = Duration::from_millis(200);

/// What the order is.
const ORDER: &str = "2 x espresso beans, 1 kg";

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, url, key] = args.as_slice()
        && flag == "--worker"
    {
        return worker(url, key).await;
    }

    let (url, _server) = support::redis()?;
    println!("Redis: {url}");
    let key = uuid::Uuid::new_v4().simple().to_string();
    println!("Idempotency key: {key}; {REQUESTS} submissions in each of two processes\n");

    // The second process: this executable again, as a worker.
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--worker", &url, &key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let child_pid = child.id().unwrap_or_default();
    let mut child_out = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut child_in = child.stdin.take().ok_or("no stdin")?;
    match child_out.next_line().await? {
        Some(line) if line == "ready" => {}
        other => return Err(format!("worker did not start: {other:?}").into()),
    }

    let orders = Orders::connect(&format!("process {}", std::process::id()), &url, WORK).await?;
    // Both processes go at once.
    child_in.write_all(b"go\n").await?;
    child_in.flush().await?;
    let mine = submit_all(&orders, &key).await?;

    let mut theirs = Vec::new();
    while let Some(line) = child_out.next_line().await? {
        if let Some(receipt) = line.strip_prefix("receipt\t") {
            theirs.push(receipt.to_owned());
        }
    }
    let status = child.wait().await?;
    if !status.success() {
        return Err(format!("worker failed: {status}").into());
    }

    let mut data = redisson_sync::redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let processed = orders::processed(&mut data, &key).await?;
    orders.client().shutdown().await;

    let mut receipts: BTreeMap<&str, usize> = BTreeMap::new();
    for receipt in mine.iter().chain(&theirs) {
        *receipts.entry(receipt.as_str()).or_default() += 1;
    }
    println!(
        "this process ({}): {} submissions answered",
        std::process::id(),
        mine.len()
    );
    println!(
        "worker process ({child_pid}): {} submissions answered",
        theirs.len()
    );
    for (receipt, count) in &receipts {
        println!("  {count} x \"{receipt}\"");
    }
    println!("order processed {processed} time(s)");
    if processed != 1 || receipts.len() != 1 || mine.len() + theirs.len() != 2 * REQUESTS {
        return Err("not exactly once".into());
    }
    println!(
        "\nexactly once: one processing, one receipt for all {} submissions",
        2 * REQUESTS
    );
    Ok(())
}

/// The second process: connects, says `ready`, waits for `go` on stdin, submits, prints one
/// `receipt\t<receipt>` line per submission, and shuts its client down.
async fn worker(url: &str, key: &str) -> Result<()> {
    let orders = Orders::connect(&format!("process {}", std::process::id()), url, WORK).await?;
    let mut stdout = tokio::io::stdout();
    stdout.write_all(b"ready\n").await?;
    stdout.flush().await?;
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    if stdin.next_line().await?.as_deref() != Some("go") {
        return Err("expected `go`".into());
    }
    let receipts = submit_all(&orders, key).await?;
    for receipt in receipts {
        stdout
            .write_all(format!("receipt\t{receipt}\n").as_bytes())
            .await?;
    }
    stdout.flush().await?;
    // Before exit: completes any release still scheduled (none here: `with_lock` awaits them).
    orders.client().shutdown().await;
    Ok(())
}

/// [`REQUESTS`] concurrent submissions of the order, each in its own task (its own lock
/// owner); their receipts.
async fn submit_all(orders: &Orders, key: &str) -> Result<Vec<String>> {
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let (orders, key) = (orders.clone(), key.to_owned());
            tokio::spawn(async move { orders.submit(&key, ORDER).await })
        })
        .collect();
    let mut receipts = Vec::with_capacity(REQUESTS);
    for task in tasks {
        receipts.push(task.await??);
    }
    Ok(receipts)
}
