//! S13–S15: scale figures (issue 29), Rust only, each at three sizes, on the run's single
//! server and on a cluster of 3 masters with a replica each (3+3) of its own:
//!
//! - **S13** many locks held in one client: N locks taken in this process by one client with a
//!   short watchdog timeout, then held; over three renewal periods the Redis figures (scripts/s
//!   from `cmdstat_evalsha` + `cmdstat_eval`, renewed locks from `cmdstat_pexpire`, which
//!   `lua/lock/renew.lua` calls once per renewed lock, and CPU from `used_cpu_sys` +
//!   `used_cpu_user`, summed over the masters); over three more periods the renewal lag, from
//!   `PTTL` polled on a sample of the locks (every renewal resets the TTL to the lease, so
//!   `now − (lease − PTTL)` is when the lock was last renewed, to the millisecond; the lag of a
//!   renewal is its interval from the one before minus the period). At the end every lock must
//!   still be held (the guards' `is_lost()` and the keys on the masters).
//! - **S14** fair-lock waiters across 4 processes (`scale-worker fair`): a holder in this
//!   process, N waiters queued at once; once `redisson_lock_queue:{name}` holds all N the
//!   holder releases and each waiter releases as soon as it is granted. Inversions between the
//!   queue order Redis shows and the grant order (pairs, must be 0); handoff = a grant's time −
//!   the previous holder's unlock time, across processes on `CLOCK_REALTIME`.
//! - **S15** N names × 8 processes (`scale-worker pairs`): each process runs one task per name,
//!   taking and releasing that lock in a loop for a fixed time, so every lock has 8 contenders
//!   in 8 processes: pairs/s of all, and the pair latency p50/p99.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redisson_sync::{Client, LockGuard, LockOptions, Owner};
use testkit::RedisCluster;
use testkit::Role;

use crate::drive::{Error, Result};
use crate::env::Env;
use crate::report::Report;
use crate::stats::{percentile, sorted};

/// Processes of S14 and S15.
const FAIR_PROCESSES: u64 = 4;
const PAIR_PROCESSES: u64 = 8;
/// Locks whose `PTTL` S13 polls for the renewal lag (all of them when fewer).
const LAG_SAMPLE: usize = 2_000;

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn failed(what: &str) -> impl Fn(redis::RedisError) -> Error + '_ {
    move |e| Error::Failed(format!("{what}: {e}"))
}

/// Where a scenario runs: the run's server, or the 3+3 cluster.
struct Deploy {
    label: &'static str,
    /// How the crate's client and the workers reach it.
    single: Option<String>,
    seeds: Vec<String>,
    /// One connection per master, and each master's port.
    masters: Vec<redis::Connection>,
    ports: Vec<u16>,
}

impl Deploy {
    fn single(env: &Env) -> Result<Self> {
        let url = env.server.url();
        let con = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection())
            .map_err(failed("connect"))?;
        Ok(Self {
            label: "single server",
            single: Some(url),
            seeds: Vec::new(),
            masters: vec![con],
            ports: vec![env.port],
        })
    }

    fn cluster(cluster: &RedisCluster) -> Result<Self> {
        let mut masters = Vec::new();
        let mut ports = Vec::new();
        for node in cluster
            .nodes()
            .into_iter()
            .filter(|n| n.role == Role::Master)
        {
            masters.push(
                cluster
                    .server(node.index)
                    .try_connect()
                    .map_err(Error::Failed)?,
            );
            ports.push(node.port);
        }
        Ok(Self {
            label: "cluster 3+3",
            single: None,
            seeds: cluster.seed_urls(),
            masters,
            ports,
        })
    }

    fn client(&self, watchdog: Option<Duration>) -> Result<Client> {
        let mut builder = match &self.single {
            Some(url) => Client::builder().url(url.clone()),
            None => Client::builder().cluster(self.seeds.iter().cloned()),
        };
        if let Some(w) = watchdog {
            builder = builder.watchdog_timeout(w);
        }
        builder
            .build()
            .map_err(|e| Error::Failed(format!("client: {e}")))
    }

    fn worker_args(&self) -> Vec<String> {
        match &self.single {
            Some(url) => vec!["--url".into(), url.clone()],
            None => vec!["--cluster".into(), self.seeds.join(",")],
        }
    }

    /// The master (index into `masters`) serving each key.
    fn route(&mut self, keys: &[String]) -> Result<Vec<usize>> {
        if self.masters.len() == 1 {
            return Ok(vec![0; keys.len()]);
        }
        let con = &mut self.masters[0];
        let slots: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(con)
            .map_err(failed("CLUSTER SLOTS"))?;
        let mut ranges = Vec::new();
        for s in &slots {
            let int = |v: &redis::Value| match v {
                redis::Value::Int(i) => Some(*i),
                _ => None,
            };
            let (Some(a), Some(b)) = (int(&s[0]), int(&s[1])) else {
                continue;
            };
            let port = match &s[2] {
                redis::Value::Array(node) => node.get(1).and_then(int).unwrap_or(0),
                _ => 0,
            };
            let master = self
                .ports
                .iter()
                .position(|p| i64::from(*p) == port)
                .ok_or_else(|| Error::Failed(format!("no master on port {port}")))?;
            ranges.push((a, b, master));
        }
        let mut pipe = redis::pipe();
        for k in keys {
            pipe.cmd("CLUSTER").arg("KEYSLOT").arg(k);
        }
        let slots: Vec<i64> = pipe.query(con).map_err(failed("CLUSTER KEYSLOT"))?;
        slots
            .iter()
            .map(|s| {
                ranges
                    .iter()
                    .find(|(a, b, _)| a <= s && s <= b)
                    .map(|r| r.2)
                    .ok_or_else(|| Error::Failed(format!("slot {s} unserved")))
            })
            .collect()
    }

    /// Summed over the masters: CPU seconds (sys + user), script calls, `PEXPIRE` calls.
    fn counters(&mut self) -> Result<(f64, u64, u64)> {
        let mut total = (0.0, 0, 0);
        for con in &mut self.masters {
            let info: String = redis::cmd("INFO")
                .arg("cpu")
                .arg("commandstats")
                .query(con)
                .map_err(failed("INFO"))?;
            let field = |prefix: &str| -> Option<String> {
                info.lines()
                    .find_map(|l| l.strip_prefix(prefix))
                    .map(|v| v.split(',').next().unwrap_or("").trim().to_owned())
            };
            let cpu =
                |name: &str| -> f64 { field(name).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
            let calls = |name: &str| -> u64 {
                field(&format!("cmdstat_{name}:calls="))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            total.0 += cpu("used_cpu_sys:") + cpu("used_cpu_user:");
            total.1 += calls("evalsha") + calls("eval");
            total.2 += calls("pexpire");
        }
        Ok(total)
    }

    /// Keys matching `pattern` on all masters.
    fn count_keys(&mut self, pattern: &str) -> Result<u64> {
        let mut n = 0;
        for con in &mut self.masters {
            let mut cursor = 0u64;
            loop {
                let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query(con)
                    .map_err(failed("SCAN"))?;
                n += keys.len() as u64;
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
        Ok(n)
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Failed(format!("tokio: {e}")))
}

/// Runs whichever of S13–S15 the options select, on the single server, then on a 3+3 cluster
/// started once for all of them.
pub fn run(env: &Env, report: &mut Report) -> Result<()> {
    let ids = ["S13", "S14", "S15"];
    let selected: Vec<&str> = ids.into_iter().filter(|id| env.options.runs(id)).collect();
    let mut tables: HashMap<&str, Vec<String>> = HashMap::new();
    let cluster = RedisCluster::builder()
        .masters(3)
        .replicas(1)
        .try_start()
        .map_err(Error::Failed)?;
    for cluster_leg in [false, true] {
        let mut deploy = if cluster_leg {
            Deploy::cluster(&cluster)?
        } else {
            Deploy::single(env)?
        };
        for id in &selected {
            let rows = match *id {
                "S13" => s13(env, report, &mut deploy)?,
                "S14" => s14(env, report, &mut deploy)?,
                _ => s15(env, report, &mut deploy)?,
            };
            tables.entry(id).or_default().extend(rows);
        }
    }
    drop(cluster);
    let s = &env.sizes;
    for id in selected {
        let mut md = String::new();
        let rows = tables.remove(id).unwrap_or_default();
        match id {
            "S13" => {
                let _ = writeln!(
                    md,
                    "**S13** locks held in one client (watchdog timeout {} ms, renewal period {} ms, batches of 100; lag from `PTTL` of up to {LAG_SAMPLE} of the locks):\n",
                    s.s13_lease.as_millis(),
                    s.s13_lease.as_millis() / 3
                );
                md.push_str(
                    "| where | locks | acquired in | renewal lag p50 / p99 / max | renewal scripts/s | renewed locks/s | Redis CPU per renewed lock | still held at the end |\n|---|--:|--:|--:|--:|--:|--:|--:|\n",
                );
            }
            "S14" => {
                let _ = writeln!(
                    md,
                    "**S14** fair-lock waiters in {FAIR_PROCESSES} processes (queued at once; each releases as soon as it is granted):\n"
                );
                md.push_str(
                    "| where | waiters | all queued in | grant-order inversions | handoff p50 | handoff p99 | all granted in |\n|---|--:|--:|--:|--:|--:|--:|\n",
                );
            }
            _ => {
                let _ = writeln!(
                    md,
                    "**S15** names × {PAIR_PROCESSES} processes, one task per name in each (8 contenders per lock), {} ms:\n",
                    s.s15_millis
                );
                md.push_str(
                    "| where | names | pairs/s | pair p50 | pair p99 |\n|---|--:|--:|--:|--:|\n",
                );
            }
        }
        for r in rows {
            md.push_str(&r);
            md.push('\n');
        }
        report.scale.push(md);
    }
    Ok(())
}

fn ms(v: Option<f64>) -> String {
    // One decimal; adding 0.0 turns a rounded -0.0 into 0.0.
    v.map_or("–".into(), |v| {
        format!("{:.1} ms", (v * 10.0).round() / 10.0 + 0.0)
    })
}

fn us(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v >= 10_000.0 => format!("{:.1} ms", v / 1000.0),
        Some(v) => format!("{v:.0} µs"),
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn thousands(v: f64) -> String {
    let n = v.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// S13: one table row per size.
fn s13(env: &Env, report: &mut Report, deploy: &mut Deploy) -> Result<Vec<String>> {
    let lease = env.sizes.s13_lease;
    let period = lease / 3;
    let period_ms = period.as_secs_f64() * 1e3;
    let lease_ms = lease.as_secs_f64() * 1e3;
    let mut rows = Vec::new();
    for &n in &env.sizes.s13_locks {
        let rt = runtime()?;
        let client = rt.block_on(async { deploy.client(Some(lease)) })?;
        let prefix = env.name(&format!("s13-{n}"));
        let names: Vec<String> = (0..n).map(|i| format!("{prefix}:{i}")).collect();
        let started = Instant::now();
        let guards = rt.block_on(acquire_all(&client, &names))?;
        let acquired_in = started.elapsed();

        // Redis figures over three periods, nothing else running.
        let (cpu0, scripts0, renew0) = deploy.counters()?;
        let t0 = Instant::now();
        std::thread::sleep(period * 3);
        let (cpu1, scripts1, renew1) = deploy.counters()?;
        let window = t0.elapsed().as_secs_f64();
        let renewed = renew1.saturating_sub(renew0);
        let scripts_per_s = scripts1.saturating_sub(scripts0) as f64 / window;
        let renewed_per_s = renewed as f64 / window;
        let cpu_per_renewal_us = (renewed > 0).then(|| (cpu1 - cpu0) * 1e6 / renewed as f64);

        // Renewal lag over three more periods, from PTTL of a sample.
        let step = (names.len() / LAG_SAMPLE).max(1);
        let sample: Vec<String> = names.iter().step_by(step).cloned().collect();
        let routes = deploy.route(&sample)?;
        let mut last: Vec<Option<f64>> = vec![None; sample.len()];
        let mut lags = Vec::new();
        let origin = Instant::now();
        let poll_every = period / 8;
        while origin.elapsed() < period * 3 + poll_every {
            for (m, con) in deploy.masters.iter_mut().enumerate() {
                let idx: Vec<usize> = (0..sample.len()).filter(|&i| routes[i] == m).collect();
                if idx.is_empty() {
                    continue;
                }
                let mut pipe = redis::pipe();
                for &i in &idx {
                    pipe.cmd("PTTL").arg(&sample[i]);
                }
                let sent = origin.elapsed().as_secs_f64() * 1e3;
                let ttls: Vec<i64> = pipe.query(con).map_err(failed("PTTL"))?;
                let mid = (sent + origin.elapsed().as_secs_f64() * 1e3) / 2.0;
                for (&i, &ttl) in idx.iter().zip(&ttls) {
                    if ttl < 0 {
                        continue;
                    }
                    let renewed_at = mid - (lease_ms - ttl as f64);
                    match last[i] {
                        Some(l) if renewed_at - l > period_ms / 4.0 => {
                            lags.push(renewed_at - l - period_ms);
                            last[i] = Some(renewed_at);
                        }
                        Some(_) => {}
                        None => last[i] = Some(renewed_at),
                    }
                }
            }
            std::thread::sleep(poll_every);
        }
        let lags = sorted(lags);

        let lost = guards.iter().filter(|g| g.is_lost()).count();
        let present = deploy.count_keys(&format!("{prefix}:*"))?;
        let held = if lost == 0 {
            present
        } else {
            present.min(n - lost as u64)
        };
        let lost_at_release = rt.block_on(release_all(guards))?;
        rt.block_on(client.shutdown());
        drop(rt);

        let metric = |m: &str| format!("{}, {n} locks, {m}", deploy.label);
        let (p50, p99, max) = (
            percentile(&lags, 50.0),
            percentile(&lags, 99.0),
            lags.last().copied(),
        );
        for (m, v) in [
            ("renewal lag p99 (ms)", p99),
            ("renewal scripts/s", Some(scripts_per_s)),
            ("renewed locks/s", Some(renewed_per_s)),
            ("Redis CPU per renewed lock (µs)", cpu_per_renewal_us),
            ("locks still held", Some(held as f64)),
        ] {
            if let Some(v) = v {
                report.sample("S13", &metric(m), "rust", 0, v);
            }
        }
        if held != n {
            report.notes.push(format!(
                "S13 {}: {} of {n} locks still held after {} s ({lost} guards report a loss, {lost_at_release} releases found the lock lost)",
                deploy.label,
                held,
                (period * 6).as_secs_f64()
            ));
        }
        rows.push(format!(
            "| {} | {} | {} | {} / {} / {} | {} | {} | {} | {} of {} |",
            deploy.label,
            thousands(n as f64),
            secs(acquired_in),
            ms(p50),
            ms(p99),
            ms(max),
            thousands(scripts_per_s),
            thousands(renewed_per_s),
            cpu_per_renewal_us.map_or("–".into(), |v| format!("{v:.2} µs")),
            thousands(held as f64),
            thousands(n as f64)
        ));
        println!("\n  S13 {} {n}: {}", deploy.label, rows.last().unwrap());
    }
    Ok(rows)
}

/// Takes every lock of `names` (64 tasks, one owner), watchdog-renewed.
async fn acquire_all(client: &Client, names: &[String]) -> Result<Vec<LockGuard>> {
    let tasks = 64.min(names.len().max(1));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let mine: Vec<String> = names.iter().skip(t).step_by(tasks).cloned().collect();
        let client = client.clone();
        handles.push(tokio::spawn(async move {
            let mut guards = Vec::new();
            for name in mine {
                let guard = client
                    .lock(&name)
                    .lock_with_options(&LockOptions::new().owner(Owner::new(1)))
                    .await
                    .map_err(|e| format!("lock {name}: {e}"))?;
                guards.push(guard);
            }
            Ok::<_, String>(guards)
        }));
    }
    let mut guards = Vec::new();
    for h in handles {
        guards.extend(h.await.map_err(|e| format!("task: {e}"))??);
    }
    Ok(guards)
}

/// Releases every guard; returns how many releases found their lock already lost
/// (`Error::LeaseLost` or `Error::NotHeld`), which S13 reports instead of failing.
async fn release_all(guards: Vec<LockGuard>) -> Result<u64> {
    let tasks = 64;
    let mut parts: Vec<Vec<LockGuard>> = (0..tasks).map(|_| Vec::new()).collect();
    for (i, g) in guards.into_iter().enumerate() {
        parts[i % tasks].push(g);
    }
    let mut handles = Vec::new();
    for part in parts {
        handles.push(tokio::spawn(async move {
            let mut lost = 0u64;
            for g in part {
                match g.unlock().await {
                    Ok(()) => {}
                    Err(e) if e.is_not_held() => lost += 1,
                    Err(e) => return Err(format!("unlock: {e}")),
                }
            }
            Ok::<_, String>(lost)
        }));
    }
    let mut lost = 0;
    for h in handles {
        lost += h.await.map_err(|e| format!("task: {e}"))??;
    }
    Ok(lost)
}

fn worker(env: &Env, deploy: &Deploy, args: &[String], label: &str) -> Result<Child> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Failed(format!("current_exe: {e}")))?
        .with_file_name("scale-worker");
    let log = std::fs::File::create(env.logs.join(format!("scale-worker-{label}.log")))
        .map_err(|e| Error::Failed(format!("log: {e}")))?;
    Command::new(&exe)
        .args(deploy.worker_args())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| Error::Failed(format!("{}: {e}", exe.display())))
}

fn read_json(out: &mut BufReader<ChildStdout>, what: &str) -> Result<serde_json::Value> {
    let mut line = String::new();
    out.read_line(&mut line)
        .map_err(|e| Error::Failed(format!("{what}: {e}")))?;
    serde_json::from_str(&line).map_err(|e| {
        Error::Failed(format!(
            "{what}: no result ({e}); see target/bench-logs/scale-worker-*.log"
        ))
    })
}

/// S14: one table row per size.
fn s14(env: &Env, report: &mut Report, deploy: &mut Deploy) -> Result<Vec<String>> {
    let mut rows = Vec::new();
    for &n in &env.sizes.s14_waiters {
        let rt = runtime()?;
        let client = rt.block_on(async { deploy.client(None) })?;
        let name = env.name(&format!("s14-{n}"));
        let queue = format!("redisson_lock_queue:{{{name}}}");
        let route = deploy.route(std::slice::from_ref(&queue))?[0];
        let holder = rt
            .block_on(
                client
                    .fair_lock(&name)
                    .lock_with_options(&LockOptions::new().owner(Owner::new(1))),
            )
            .map_err(|e| Error::Failed(format!("holder: {e}")))?;
        let per = n / FAIR_PROCESSES;
        let started = Instant::now();
        let mut children = Vec::new();
        for p in 0..FAIR_PROCESSES {
            let count = if p + 1 == FAIR_PROCESSES {
                n - per * p
            } else {
                per
            };
            let args: Vec<String> = [
                "fair",
                "--name",
                &name,
                "--first",
                &(1_000 + p * per).to_string(),
                "--count",
                &count.to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            children.push(worker(env, deploy, &args, &format!("fair-{p}"))?);
        }
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let len: u64 = redis::cmd("LLEN")
                .arg(&queue)
                .query(&mut deploy.masters[route])
                .map_err(failed("LLEN"))?;
            if len == n {
                break;
            }
            for c in &mut children {
                if let Ok(Some(status)) = c.try_wait() {
                    return Err(Error::Failed(format!(
                        "S14: a worker ended ({status}) with {len} of {n} queued"
                    )));
                }
            }
            if Instant::now() > deadline {
                return Err(Error::Failed(format!("S14: {len} of {n} queued in 600 s")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let queued_in = started.elapsed();
        let order: Vec<String> = redis::cmd("LRANGE")
            .arg(&queue)
            .arg(0)
            .arg(-1)
            .query(&mut deploy.masters[route])
            .map_err(failed("LRANGE"))?;
        let position: HashMap<&str, usize> = order
            .iter()
            .enumerate()
            .map(|(i, f)| (f.as_str(), i))
            .collect();
        let released = now_ns();
        let release_started = Instant::now();
        rt.block_on(holder.unlock())
            .map_err(|e| Error::Failed(format!("holder unlock: {e}")))?;
        // (queue position, acquired, releasing) of every grant
        let mut grants: Vec<(usize, u64, u64)> = Vec::new();
        for (p, c) in children.into_iter().enumerate() {
            let out = c
                .wait_with_output()
                .map_err(|e| Error::Failed(format!("worker: {e}")))?;
            let reply: serde_json::Value =
                serde_json::from_slice(&out.stdout).map_err(|e| {
                    Error::Failed(format!(
                        "S14 worker {p}: no result ({e}); see target/bench-logs/scale-worker-fair-{p}.log"
                    ))
                })?;
            let id = reply["client"].as_str().unwrap_or("");
            for g in reply["grants"].as_array().into_iter().flatten() {
                let owner = g[0].as_u64().unwrap_or(0);
                let field = format!("{id}:{owner}");
                let pos = *position.get(field.as_str()).ok_or_else(|| {
                    Error::Failed(format!("S14: {field} granted but not in {queue}"))
                })?;
                grants.push((pos, g[1].as_u64().unwrap_or(0), g[2].as_u64().unwrap_or(0)));
            }
        }
        let granted_in = release_started.elapsed();
        rt.block_on(client.shutdown());
        drop(rt);
        if grants.len() as u64 != n {
            return Err(Error::Failed(format!(
                "S14: {} grants of {n} waiters",
                grants.len()
            )));
        }
        grants.sort_by_key(|g| g.1);
        let mut inversions = 0u64;
        for i in 0..grants.len() {
            for j in i + 1..grants.len() {
                if grants[i].0 > grants[j].0 {
                    inversions += 1;
                }
            }
        }
        let mut previous = released;
        let mut handoffs = Vec::new();
        for g in &grants {
            handoffs.push(g.1.saturating_sub(previous) as f64 / 1e3);
            previous = g.2;
        }
        let handoffs = sorted(handoffs);
        let (p50, p99) = (percentile(&handoffs, 50.0), percentile(&handoffs, 99.0));
        let metric = |m: &str| format!("{}, {n} fair waiters, {m}", deploy.label);
        report.sample("S14", &metric("inversions"), "rust", 0, inversions as f64);
        for (m, v) in [("handoff p50 (µs)", p50), ("handoff p99 (µs)", p99)] {
            if let Some(v) = v {
                report.sample("S14", &metric(m), "rust", 0, v);
            }
        }
        if inversions > 0 {
            report.notes.push(format!(
                "S14 {}: {inversions} grant-order inversions among {n} waiters",
                deploy.label
            ));
        }
        rows.push(format!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            deploy.label,
            thousands(n as f64),
            secs(queued_in),
            inversions,
            us(p50),
            us(p99),
            secs(granted_in)
        ));
        println!("\n  S14 {} {n}: {}", deploy.label, rows.last().unwrap());
    }
    Ok(rows)
}

/// S15: one table row per size.
fn s15(env: &Env, report: &mut Report, deploy: &mut Deploy) -> Result<Vec<String>> {
    let mut rows = Vec::new();
    let millis = env.sizes.s15_millis;
    for &names in &env.sizes.s15_names {
        let prefix = env.name(&format!("s15-{names}"));
        let mut children = Vec::new();
        let mut outs = Vec::new();
        for p in 0..PAIR_PROCESSES {
            let args: Vec<String> = [
                "pairs",
                "--prefix",
                &prefix,
                "--names",
                &names.to_string(),
                "--millis",
                &millis.to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let mut child = worker(env, deploy, &args, &format!("pairs-{p}"))?;
            let out = child.stdout.take().expect("piped");
            outs.push(BufReader::new(out));
            children.push(child);
        }
        for out in &mut outs {
            let mut line = String::new();
            out.read_line(&mut line)
                .map_err(|e| Error::Failed(format!("S15 worker: {e}")))?;
            if line.trim() != "ready" {
                return Err(Error::Failed(format!(
                    "S15 worker not ready ({line:?}); see target/bench-logs/scale-worker-pairs-*.log"
                )));
            }
        }
        for c in &mut children {
            let stdin = c.stdin.as_mut().expect("piped");
            stdin
                .write_all(b"go\n")
                .and_then(|()| stdin.flush())
                .map_err(|e| Error::Failed(format!("S15 worker: {e}")))?;
        }
        let mut pairs = 0u64;
        let mut elapsed = 0u64;
        let mut lat = Vec::new();
        for out in &mut outs {
            let reply = read_json(out, "S15 worker")?;
            pairs += reply["pairs"].as_u64().unwrap_or(0);
            elapsed = elapsed.max(reply["elapsed_ns"].as_u64().unwrap_or(0));
            lat.extend(
                reply["lat_us"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_f64()),
            );
        }
        for mut c in children {
            let _ = c.wait();
        }
        let rate = pairs as f64 * 1e9 / elapsed.max(1) as f64;
        let lat = sorted(lat);
        let (p50, p99) = (percentile(&lat, 50.0), percentile(&lat, 99.0));
        let metric = |m: &str| format!("{}, {names} names x 8 processes, {m}", deploy.label);
        report.sample("S15", &metric("pairs/s"), "rust", 0, rate);
        for (m, v) in [("pair p50 (µs)", p50), ("pair p99 (µs)", p99)] {
            if let Some(v) = v {
                report.sample("S15", &metric(m), "rust", 0, v);
            }
        }
        rows.push(format!(
            "| {} | {} | {} | {} | {} |",
            deploy.label,
            thousands(names as f64),
            thousands(rate),
            us(p50),
            us(p99)
        ));
        println!("\n  S15 {} {names}: {}", deploy.label, rows.last().unwrap());
    }
    Ok(rows)
}
