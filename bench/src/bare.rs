//! The bare client (S0, and the "bare" column of S1 and S2): one redis-rs
//! `MultiplexedConnection` sending the crate's own `lua/lock/acquire.lua` and
//! `lua/lock/unlock.lua` with `EVALSHA`, nothing else: no pool, no watchdog, no wait engine, no
//! unknown-outcome bookkeeping. It is the honest limit of a Rust client with these scripts on
//! this machine, measured against the same server in the same run as the crate.
//!
//! `bench/src/bin/pairs.rs` (the callgrind pairs) includes this file too, so both measure the
//! very same bare pair.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

/// The crate's scripts, as the crate ships them.
const ACQUIRE: &str = include_str!("../../lua/lock/acquire.lua");
const UNLOCK: &str = include_str!("../../lua/lock/unlock.lua");

/// The watchdog lease the crate's `lock()` asks for (Redisson's default, 30 s), in ms.
const LEASE_MS: u64 = 30_000;

/// The two scripts, hashed once.
pub struct Scripts {
    acquire: redis::Script,
    unlock: redis::Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Self::new()
    }
}

impl Scripts {
    pub fn new() -> Self {
        Self {
            acquire: redis::Script::new(ACQUIRE),
            unlock: redis::Script::new(UNLOCK),
        }
    }

    /// One uncontended lock+unlock of `key` by the hash field `field`: the acquire must grant
    /// (nil), the release must release fully (1) and publish Redisson's unlock message (0)
    /// on the lock's channel, as the crate's release does.
    pub async fn pair<C: redis::aio::ConnectionLike + Send + Sync>(
        &self,
        conn: &mut C,
        key: &str,
        channel: &str,
        field: &str,
    ) -> Result<(), String> {
        let granted: Option<i64> = self
            .acquire
            .key(key)
            .arg(LEASE_MS)
            .arg(field)
            .invoke_async(conn)
            .await
            .map_err(|e| format!("bare acquire: {e}"))?;
        if let Some(ttl) = granted {
            return Err(format!(
                "bare acquire of {key} not granted (held, {ttl} ms)"
            ));
        }
        let released: Option<i64> = self
            .unlock
            .key(key)
            .key(channel)
            .arg(0)
            .arg(LEASE_MS)
            .arg(field)
            .arg("PUBLISH")
            .invoke_async(conn)
            .await
            .map_err(|e| format!("bare unlock: {e}"))?;
        if released != Some(1) {
            return Err(format!(
                "bare unlock of {key} did not release: {released:?}"
            ));
        }
        Ok(())
    }
}

/// Redisson's channel of lock `key`.
pub fn channel(key: &str) -> String {
    format!("redisson_lock__channel:{{{key}}}")
}

/// A hash field for `task`'s owner (a fixed client id: the bare client has no other).
pub fn field(task: u64) -> String {
    format!("00000000-0000-4000-8000-000000000001:{}", task + 1)
}

/// One bare-client run as the agents' `bench` op runs one: `tasks` tasks of `iterations` pairs,
/// each on key `name:<task>` (or all on `name` when `same_key`), on one multiplexed connection
/// shared by every task, in a two-worker runtime (the agents' runtime on this machine).
/// Latencies per pair; p50 and p99 are nearest-rank (`stats::percentile`), as the agents report them.
pub struct Bare {
    runtime: tokio::runtime::Runtime,
    conn: MultiplexedConnection,
    scripts: std::sync::Arc<Scripts>,
}

/// What one run measured, as the agents' `bench` reply has it.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub ops: u64,
    pub elapsed: Duration,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Run {
    /// Pairs per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl Bare {
    /// Connects to `url` and loads both scripts (one warm pair), outside any measurement.
    pub fn start(url: &str) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("bare client: tokio: {e}"))?;
        let scripts = std::sync::Arc::new(Scripts::new());
        let conn = runtime.block_on(async {
            let mut conn = redis::Client::open(url)
                .map_err(|e| format!("bare client: {e}"))?
                .get_multiplexed_async_connection()
                .await
                .map_err(|e| format!("bare client: connect: {e}"))?;
            let key = "bench:bare:warm";
            scripts
                .pair(&mut conn, key, &channel(key), &field(0))
                .await?;
            Ok::<_, String>(conn)
        })?;
        Ok(Self {
            runtime,
            conn,
            scripts,
        })
    }

    /// Runs the pairs; the first failure ends the run with its error. `same_key` is for one
    /// task (S1): tasks on one key would contend, which the bare client does not handle.
    pub fn bench(
        &self,
        name: &str,
        tasks: u64,
        iterations: u64,
        same_key: bool,
    ) -> Result<Run, String> {
        self.runtime.block_on(async {
            let started = Instant::now();
            let mut loops = tokio::task::JoinSet::new();
            for task in 0..tasks {
                let key = if same_key {
                    name.to_owned()
                } else {
                    format!("{name}:{task}")
                };
                let (channel, field) = (channel(&key), field(task));
                let (mut conn, scripts) = (self.conn.clone(), self.scripts.clone());
                loops.spawn(async move {
                    let mut latencies = Vec::with_capacity(iterations as usize);
                    for _ in 0..iterations {
                        let started = Instant::now();
                        scripts.pair(&mut conn, &key, &channel, &field).await?;
                        latencies.push(started.elapsed());
                    }
                    Ok::<_, String>(latencies)
                });
            }
            let mut latencies = Vec::with_capacity((tasks * iterations) as usize);
            while let Some(joined) = loops.join_next().await {
                latencies.extend(joined.map_err(|e| format!("bare task: {e}"))??);
            }
            let elapsed = started.elapsed();
            let micros = crate::stats::sorted(
                latencies
                    .iter()
                    .map(|d| d.as_nanos() as f64 / 1000.0)
                    .collect(),
            );
            let at = |p: f64| crate::stats::percentile(&micros, p).unwrap_or(0.0);
            Ok(Run {
                ops: latencies.len() as u64,
                elapsed,
                p50_us: at(50.0),
                p99_us: at(99.0),
            })
        })
    }
}
