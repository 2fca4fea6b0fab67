//! `pairs`: N uncontended lock+unlock pairs against one Redis, in one task of a
//! current-thread runtime, for counting instructions under `valgrind --tool=callgrind`
//! (`scripts/bench --instructions`): the crate's `Lock`, or (`--bare`) a bare redis-rs
//! multiplexed connection sending the crate's own `lua/lock/acquire.lua` and
//! `lua/lock/unlock.lua` with EVALSHA, the honest limit of a Rust client with these scripts, or
//! (`--blocking`) the blocking API's `Lock` (`redisson_sync::blocking`) from the main thread, or
//! (`--token`) the crate's `TokenLock`, or (`--rslock`) its peer rslock 0.10 (the same `SET NX
//! PX` lock, a 30 s TTL, compare-and-delete).
//!
//! ```text
//! pairs --url redis://127.0.0.1:PORT --pairs N [--bare | --blocking | --token | --rslock]
//! pairs --url redis://127.0.0.1:PORT --pairs N --latency [--rounds R]
//! pairs --url redis://127.0.0.1:PORT --pairs N --throughput --tasks T [--rounds R] [--connections C] [--versus-rslock] [--cluster]
//! ```
//!
//! Every mode warms up first (one pair: connections opened, scripts loaded), so two runs with
//! different N differ only by the pairs: (I(N2) - I(N1)) / (N2 - N1) is the cost of one pair.
//!
//! `--latency` times each pair instead, of the async `Lock` (one task of the current-thread
//! runtime) and of the blocking `Lock` (the main thread, outside any runtime) in the same run:
//! R rounds (default 10) alternate N / R async pairs and N / R blocking pairs on two keys, so
//! that drift of the machine falls on both alike; it prints each mode's mean, p50, p90 and p99
//! in microseconds, and the blocking / async ratios.
//!
//! `--throughput` runs T tasks on distinct keys in a two-worker runtime (the agents' runtime on
//! this machine), N pairs in all per round, the crate's `Lock` and the bare client alternating in
//! R rounds (default 10) against the same server: pairs/s and this process's CPU time per pair
//! (user + system, from `/proc/self/stat`) of each, and crate / bare. CPU time per pair is what
//! bounds throughput once the client's core is the limit, and it is less disturbed than pairs/s
//! by whatever else the machine runs. `--connections C` sets the crate's client's
//! `Config::connections` (default 1). `--versus-rslock` runs the crate's `TokenLock` with rslock's
//! lease (30 s, no watchdog) against rslock 0.10 (one `LockManager`) instead of the `Lock` against the bare client.
//! `--cluster` takes `--url` as a cluster's seed: the crate's client in cluster mode against
//! redis-rs's own cluster connection sending the same scripts (the release publishing with
//! `PUBLISH`, where the crate on Redis 7 uses `SPUBLISH`).

use std::process::ExitCode;

/// The harness's bare client; only its pair is used here.
#[path = "../bare.rs"]
#[allow(dead_code)]
mod bare;
/// The harness's percentiles, which `bare` uses.
#[path = "../stats.rs"]
#[allow(dead_code)]
mod stats;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut url = None;
    let mut pairs = None;
    let mut mode = Mode::Crate;
    let mut rounds = 10;
    let mut tasks = 1;
    let mut connections = 1;
    let mut versus_rslock = false;
    let mut cluster = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--url" => url = args.get(i + 1).cloned(),
            "--pairs" => pairs = args.get(i + 1).and_then(|n| n.parse::<u64>().ok()),
            "--rounds" => match args.get(i + 1).and_then(|n| n.parse::<u64>().ok()) {
                Some(r) if r > 0 => rounds = r,
                _ => {
                    eprintln!("pairs: --rounds takes a positive number");
                    return ExitCode::from(2);
                }
            },
            "--connections" => match args.get(i + 1).and_then(|n| n.parse::<usize>().ok()) {
                Some(c) if c > 0 => connections = c,
                _ => {
                    eprintln!("pairs: --connections takes a positive number");
                    return ExitCode::from(2);
                }
            },
            "--tasks" => match args.get(i + 1).and_then(|n| n.parse::<u64>().ok()) {
                Some(t) if t > 0 => tasks = t,
                _ => {
                    eprintln!("pairs: --tasks takes a positive number");
                    return ExitCode::from(2);
                }
            },
            "--versus-rslock" => {
                versus_rslock = true;
                i += 1;
                continue;
            }
            "--cluster" => {
                cluster = true;
                i += 1;
                continue;
            }
            flag @ ("--bare" | "--blocking" | "--token" | "--rslock" | "--latency"
            | "--throughput") => {
                mode = match flag {
                    "--bare" => Mode::Bare,
                    "--token" => Mode::Token,
                    "--rslock" => Mode::Rslock,
                    "--blocking" => Mode::Blocking,
                    "--throughput" => Mode::Throughput,
                    _ => Mode::Latency,
                };
                i += 1;
                continue;
            }
            other => {
                eprintln!("pairs: unknown argument {other:?}");
                return ExitCode::from(2);
            }
        }
        i += 2;
    }
    let (Some(url), Some(pairs)) = (url, pairs) else {
        eprintln!(
            "usage: pairs --url redis://HOST:PORT --pairs N \
             [--bare | --blocking | --token | --rslock | --latency [--rounds R] \
             | --throughput --tasks T [--rounds R] [--connections C] [--versus-rslock] [--cluster]]"
        );
        return ExitCode::from(2);
    };
    if matches!(mode, Mode::Latency | Mode::Throughput) && pairs < rounds {
        eprintln!("pairs: --latency needs at least as many pairs as rounds");
        return ExitCode::from(2);
    }
    if matches!(mode, Mode::Blocking) {
        // From this thread, outside any runtime: the blocking client has its own.
        return exit(blocking_pairs(&url, pairs));
    }
    let runtime = match mode {
        Mode::Throughput => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("pairs: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match mode {
        Mode::Latency => latency(&runtime, &url, pairs, rounds),
        Mode::Throughput => throughput(
            &runtime,
            &url,
            pairs,
            (tasks, rounds),
            connections,
            versus_rslock,
            cluster,
        ),
        Mode::Bare => runtime.block_on(bare_pairs(&url, pairs)),
        Mode::Token => runtime.block_on(crate_pairs(&url, pairs, true)),
        Mode::Rslock => runtime.block_on(rslock_pairs(&url, pairs)),
        _ => runtime.block_on(crate_pairs(&url, pairs, false)),
    };
    exit(result)
}

/// What to run.
#[derive(Clone, Copy)]
enum Mode {
    /// The crate's async `Lock`.
    Crate,
    /// The bare scripts on one connection.
    Bare,
    /// The blocking API's `Lock`.
    Blocking,
    /// The crate's `TokenLock` (watchdog lease).
    Token,
    /// rslock 0.10's lock (`SET NX PX`, a 30 s TTL) and unlock (compare-and-delete).
    Rslock,
    /// Both APIs' pairs timed, in one run.
    Latency,
    /// The crate and the bare client at T tasks, alternating, in one run.
    Throughput,
}

fn exit(result: Result<(), Error>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pairs: {e}");
            ExitCode::FAILURE
        }
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The blocking API's `Lock`: `lock()?.unlock()?` from this thread, its owner.
fn blocking_pairs(url: &str, pairs: u64) -> Result<(), Error> {
    let client = redisson_sync::blocking::Client::open(url)?;
    let lock = client.lock("pairs:blocking");
    for _ in 0..=pairs {
        lock.lock()?.unlock()?;
    }
    client.shutdown()?;
    Ok(())
}

/// Times `pairs` pairs of each API, alternating in `rounds`, and prints the figures.
fn latency(
    runtime: &tokio::runtime::Runtime,
    url: &str,
    pairs: u64,
    rounds: u64,
) -> Result<(), Error> {
    use std::time::Instant;

    let async_client = runtime.block_on(async { redisson_sync::Client::open(url) })?;
    let async_lock = async_client.lock("pairs:latency:async");
    let sync_client = redisson_sync::blocking::Client::open(url)?;
    let sync_lock = sync_client.lock("pairs:latency:blocking");
    // Warm-up: connections opened, scripts loaded, on both.
    runtime.block_on(async {
        for _ in 0..100 {
            async_lock.lock().await?.unlock().await?;
        }
        Ok::<_, Error>(())
    })?;
    for _ in 0..100 {
        sync_lock.lock()?.unlock()?;
    }
    let per_round = pairs.div_ceil(rounds);
    let mut async_ns = Vec::with_capacity(pairs as usize);
    let mut sync_ns = Vec::with_capacity(pairs as usize);
    for _ in 0..rounds {
        runtime.block_on(async {
            for _ in 0..per_round {
                let start = Instant::now();
                async_lock.lock().await?.unlock().await?;
                async_ns.push(start.elapsed().as_nanos() as u64);
            }
            Ok::<_, Error>(())
        })?;
        for _ in 0..per_round {
            let start = Instant::now();
            sync_lock.lock()?.unlock()?;
            sync_ns.push(start.elapsed().as_nanos() as u64);
        }
    }
    runtime.block_on(async_client.shutdown());
    sync_client.shutdown()?;
    let a = Figures::of(&mut async_ns);
    let b = Figures::of(&mut sync_ns);
    println!(
        "lock+unlock pair latency, uncontended, one caller, {} pairs each in {rounds} alternating rounds",
        a.n
    );
    println!(
        "{:<9} {:>9} {:>9} {:>9} {:>9}",
        "api", "mean_us", "p50_us", "p90_us", "p99_us"
    );
    for (name, f) in [("async", &a), ("blocking", &b)] {
        println!(
            "{name:<9} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            f.mean, f.p50, f.p90, f.p99
        );
    }
    println!(
        "blocking / async: mean {:.2}, p50 {:.2}, p99 {:.2}",
        b.mean / a.mean,
        b.p50 / a.p50,
        b.p99 / a.p99
    );
    Ok(())
}

/// This process's CPU time so far (user + system), from `/proc/self/stat` (clock ticks of
/// 10 ms: runs of seconds make the error small).
fn cpu_time() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Fields 14 and 15 of the line are the 12th and 13th after the parenthesis.
    std::time::Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// T tasks on distinct keys, `pairs` pairs per round in all, the crate's `Lock` and the bare
/// client alternating in `rounds`: pairs/s and CPU time per pair of each.
fn throughput(
    runtime: &tokio::runtime::Runtime,
    url: &str,
    pairs: u64,
    (tasks, rounds): (u64, u64),
    connections: usize,
    versus_rslock: bool,
    cluster: bool,
) -> Result<(), Error> {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let client = runtime.block_on(async {
        let builder = redisson_sync::Client::builder();
        let builder = if cluster {
            builder.cluster([url])
        } else {
            builder.url(url)
        };
        builder.connections(connections).build()
    })?;
    let bare_conn = runtime.block_on(async {
        let conn = if cluster {
            BareConn::Cluster(
                redis::cluster::ClusterClient::new(vec![url])?
                    .get_async_connection()
                    .await?,
            )
        } else {
            BareConn::Single(
                redis::Client::open(url)?
                    .get_multiplexed_async_connection()
                    .await?,
            )
        };
        Ok::<_, redis::RedisError>(conn)
    })?;
    let scripts = Arc::new(bare::Scripts::new());
    let manager = Arc::new(rslock::LockManager::new(vec![url.to_owned()]));
    let per_task = pairs.div_ceil(tasks).max(1);
    // One round of one side: wall time and CPU time.
    let crate_round = |round: u64| -> Result<(Duration, Duration), Error> {
        let (cpu, wall) = (cpu_time(), Instant::now());
        runtime.block_on(async {
            let mut loops = tokio::task::JoinSet::new();
            for task in 0..tasks {
                let name = format!("pairs:tp:crate:{round}:{task}");
                if versus_rslock {
                    // rslock's lease: a 30 s TTL, no watchdog (S10's row with the target).
                    let lock = Leased(client.token_lock(name));
                    loops.spawn(async move { repeat(&lock, per_task).await });
                } else {
                    let lock = client.lock(name);
                    loops.spawn(async move { repeat(&lock, per_task).await });
                }
            }
            while let Some(joined) = loops.join_next().await {
                joined??;
            }
            Ok::<_, Error>(())
        })?;
        Ok((wall.elapsed(), cpu_time().saturating_sub(cpu)))
    };
    let bare_round = |round: u64| -> Result<(Duration, Duration), Error> {
        let (cpu, wall) = (cpu_time(), Instant::now());
        runtime.block_on(async {
            let mut loops = tokio::task::JoinSet::new();
            for task in 0..tasks {
                let key = format!("pairs:tp:bare:{round}:{task}");
                let (channel, field) = (bare::channel(&key), bare::field(task));
                let (mut conn, scripts) = (bare_conn.clone(), scripts.clone());
                let manager = manager.clone();
                loops.spawn(async move {
                    for _ in 0..per_task {
                        if versus_rslock {
                            let lock = manager
                                .lock(key.as_bytes(), Duration::from_secs(30))
                                .await
                                .map_err(|e| format!("rslock: {e:?}"))?;
                            manager.unlock(&lock).await;
                        } else {
                            match &mut conn {
                                BareConn::Single(c) => {
                                    scripts.pair(c, &key, &channel, &field).await?
                                }
                                BareConn::Cluster(c) => {
                                    scripts.pair(c, &key, &channel, &field).await?
                                }
                            }
                        }
                    }
                    Ok::<_, String>(())
                });
            }
            while let Some(joined) = loops.join_next().await {
                joined??;
            }
            Ok::<_, Error>(())
        })?;
        Ok((wall.elapsed(), cpu_time().saturating_sub(cpu)))
    };
    // PAIRS_ONLY=crate|bare runs one side alone, its warm-up included (for strace or perf on
    // one client).
    let only = std::env::var("PAIRS_ONLY").unwrap_or_default();
    // Warm-up: connections opened, scripts loaded, on both.
    if only != "bare" {
        crate_round(u64::MAX)?;
    }
    if only != "crate" {
        bare_round(u64::MAX)?;
    }
    let (mut crate_rates, mut bare_rates) = (Vec::new(), Vec::new());
    let (mut crate_cpu, mut bare_cpu) = (Duration::ZERO, Duration::ZERO);
    let done = (per_task * tasks) as f64;
    for round in 0..rounds {
        if only != "bare" {
            let (wall, cpu) = crate_round(round)?;
            crate_rates.push(done / wall.as_secs_f64());
            crate_cpu += cpu;
        }
        if only != "crate" {
            let (wall, cpu) = bare_round(round)?;
            bare_rates.push(done / wall.as_secs_f64());
            bare_cpu += cpu;
        }
    }
    if !only.is_empty() {
        runtime.block_on(client.shutdown());
        return Ok(());
    }
    runtime.block_on(client.shutdown());
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (c, b) = (median(&mut crate_rates), median(&mut bare_rates));
    let per_pair = |cpu: Duration| cpu.as_secs_f64() * 1e6 / (done * rounds as f64);
    let (cc, bc) = (per_pair(crate_cpu), per_pair(bare_cpu));
    println!(
        "{tasks} tasks on distinct keys, {} pairs per round, {rounds} alternating rounds (median pairs/s; CPU µs per pair over all rounds)",
        done as u64
    );
    println!("{:<7} {:>10} {:>12}", "client", "pairs/s", "cpu_us/pair");
    let (ours, theirs) = if versus_rslock {
        ("token", "rslock")
    } else {
        ("crate", "bare")
    };
    println!("{:<7} {c:>10.0} {cc:>12.2}", ours);
    println!("{:<7} {b:>10.0} {bc:>12.2}", theirs);
    println!(
        "{ours} / {theirs}: pairs/s {:.2}, cpu per pair {:.2}",
        c / b,
        cc / bc
    );
    Ok(())
}

/// The bare client's connection: one multiplexed connection, or (`--cluster`) redis-rs's
/// cluster connection (a multiplexed connection per master behind its own routing task).
#[derive(Clone)]
enum BareConn {
    Single(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

/// Mean and percentiles of pair times, in microseconds.
struct Figures {
    n: usize,
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
}

impl Figures {
    fn of(ns: &mut [u64]) -> Self {
        ns.sort_unstable();
        let us = |v: u64| v as f64 / 1000.0;
        let at = |q: f64| us(ns[((ns.len() - 1) as f64 * q).round() as usize]);
        Self {
            n: ns.len(),
            mean: us(ns.iter().sum::<u64>()) / ns.len() as f64,
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
        }
    }
}

/// The crate's lock kinds measured here, for one loop over either (static dispatch: the same
/// code as calling the kind's own methods).
trait Pair: Send + Sync + 'static {
    /// One uncontended `lock().await?.unlock().await?`.
    fn pair(&self) -> impl std::future::Future<Output = Result<(), redisson_sync::Error>> + Send;
}

impl Pair for redisson_sync::Lock {
    async fn pair(&self) -> Result<(), redisson_sync::Error> {
        self.lock().await?.unlock().await
    }
}

impl Pair for redisson_sync::TokenLock {
    async fn pair(&self) -> Result<(), redisson_sync::Error> {
        self.lock().await?.unlock().await
    }
}

/// The `TokenLock` with rslock's lease: a fixed 30 s TTL, no watchdog.
struct Leased(redisson_sync::TokenLock);

impl Pair for Leased {
    async fn pair(&self) -> Result<(), redisson_sync::Error> {
        let opts = redisson_sync::LockOptions::new().lease(std::time::Duration::from_secs(30));
        self.0.lock_with_options(&opts).await?.unlock().await
    }
}

/// `n` pairs of `lock`, one after another.
async fn repeat(lock: &impl Pair, n: u64) -> Result<(), redisson_sync::Error> {
    for _ in 0..n {
        lock.pair().await?;
    }
    Ok(())
}

/// The crate's `Lock`, or with `token` its `TokenLock`: `lock().await?.unlock().await?`, one
/// owner, watchdog lease.
async fn crate_pairs(url: &str, pairs: u64, token: bool) -> Result<(), Error> {
    let client = redisson_sync::Client::open(url)?;
    if token {
        repeat(&client.token_lock("pairs:token"), pairs + 1).await?;
    } else {
        repeat(&client.lock("pairs:crate"), pairs + 1).await?;
    }
    client.shutdown().await;
    Ok(())
}

/// rslock 0.10, the token lock's peer outside Redisson: `lock` with a 30 s TTL, then `unlock`.
async fn rslock_pairs(url: &str, pairs: u64) -> Result<(), Error> {
    let manager = rslock::LockManager::new(vec![url.to_owned()]);
    for _ in 0..=pairs {
        let lock = manager
            .lock(b"pairs:rslock", std::time::Duration::from_secs(30))
            .await
            .map_err(|e| format!("rslock: {e:?}"))?;
        manager.unlock(&lock).await;
    }
    Ok(())
}

/// The same two scripts by hand on one multiplexed connection: the harness's bare client
/// (`bench/src/bare.rs`), pair for pair.
async fn bare_pairs(url: &str, pairs: u64) -> Result<(), Error> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let scripts = bare::Scripts::new();
    let (key, field) = ("pairs:bare", bare::field(0));
    let channel = bare::channel(key);
    for _ in 0..=pairs {
        scripts.pair(&mut conn, key, &channel, &field).await?;
    }
    Ok(())
}
