//! S6: memory per waiting task, and the Redis connections and subscriptions the waiters use.
//!
//! In this process: one [`redisson_sync::Client`] holds a lock, a second one parks N tasks in
//! `lock().await` on it; the resident set grows by the waiters' futures, their registrations
//! and whatever the client keeps per waiter. In each agent (both languages, same method): a
//! fresh agent holds the lock with owner 1 and gets `lock` requests for N more owners; the
//! Rust agent runs each owner as a Tokio task, the Java agent as a platform thread, which is
//! what Redisson's blocking `lock()` needs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use interop_scenarios::agent::Impl;
use redis::Connection;
use serde_json::json;

use redisson_sync::{LockOptions, Owner};

use crate::drive::{self, Error, Result};
use crate::env::Env;

/// The system allocator, counting the bytes live on the heap of this process, so that the
/// in-process measurement also has an exact heap figure (RSS moves in pages and keeps memory
/// freed by earlier rounds).
struct Counting;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only a counter is updated besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What N parked waiters cost.
#[derive(Debug, Clone)]
pub struct Parked {
    pub waiters: usize,
    /// Resident set growth divided by the waiters.
    pub bytes_per_waiter: f64,
    /// Heap growth divided by the waiters (in this process only; 0 for an agent).
    pub heap_per_waiter: f64,
    /// Connections the waiting side had open while they waited (`CLIENT LIST`).
    pub connections: usize,
    /// `PUBSUB NUMSUB` of the lock's channel.
    pub subscribers: i64,
    /// Client-sent commands per waiter per second while they wait (re-checks without any
    /// unlock), over `Sizes::s6_idle_window`.
    pub idle_rate: f64,
}

/// Parks each count of tasks in this process and measures them (a warm-up round of 100
/// first, not reported). One client: the holder is an explicit owner, each waiter is its own
/// task (the default owner).
pub fn in_process(env: &Env, counts: &[usize]) -> Result<Vec<Parked>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    let url = env.server.url();
    let base_connections = client_ids(&mut env.con())?;
    runtime.block_on(async {
        let client = redisson_sync::Client::open(&url).map_err(|e| format!("client: {e}"))?;
        let holder = LockOptions::new().owner(Owner::new(u64::from(u32::MAX)));
        let mut results = Vec::new();
        for (round, &n) in std::iter::once(&100).chain(counts).enumerate() {
            let name = env.name("s6");
            let lock = client.lock(&name);
            let guard = lock
                .lock_with_options(&holder)
                .await
                .map_err(|e| format!("holder lock: {e}"))?;
            let before_heap = LIVE_BYTES.load(Ordering::Relaxed);
            let before = Before {
                commands: sent_total(&mut env.con())?,
                rss: rss_bytes("self")?,
                connections: &base_connections,
            };
            let waiters: Vec<_> = (0..n)
                .map(|_| {
                    let lock = lock.clone();
                    tokio::spawn(async move { lock.lock().await })
                })
                .collect();
            // The waiters run on the runtime's workers; this thread only watches.
            let registered = || Ok(Some(client.stats().waiters as u64));
            let parked = measure(env, &name, n, "self", before, registered)?;
            let heap = LIVE_BYTES.load(Ordering::Relaxed) - before_heap;
            let parked = Parked {
                heap_per_waiter: heap as f64 / n as f64,
                ..parked
            };
            if let Some(done) = waiters.iter().find(|w| w.is_finished()) {
                return Err(Error::Failed(format!(
                    "a waiter finished while the lock was held ({done:?})"
                )));
            }
            for waiter in &waiters {
                waiter.abort();
            }
            for waiter in waiters {
                let _ = waiter.await;
            }
            guard
                .unlock()
                .await
                .map_err(|e| format!("holder unlock: {e}"))?;
            if round > 0 {
                results.push(parked);
            }
        }
        client.shutdown().await;
        Ok(results)
    })
}

/// What was there before the waiters: the client-sent commands counted so far, the resident
/// set of the waiting process, and the connections open before its client opened them.
struct Before<'a> {
    commands: u64,
    rss: u64,
    connections: &'a HashSet<u64>,
}

/// Waits for `n` waiters to settle, then reads RSS of the waiting process (`pid`, or `self`),
/// the connections opened since `before` and the subscribers of the lock `name`'s channel.
fn measure(
    env: &Env,
    name: &str,
    n: usize,
    pid: &str,
    before: Before<'_>,
    registered: impl FnMut() -> Result<Option<u64>>,
) -> Result<Parked> {
    let mut con = env.con();
    settle(&mut con, before.commands, n as u64, registered)?;
    let after_rss = rss_bytes(pid)?;
    Ok(Parked {
        waiters: n,
        bytes_per_waiter: (after_rss as f64 - before.rss as f64) / n as f64,
        heap_per_waiter: 0.0,
        connections: client_ids(&mut con)?.difference(before.connections).count(),
        subscribers: numsub(&mut con, &channel(name))?,
        idle_rate: idle_rate(&mut con, n, env.sizes.s6_idle_window)?,
    })
}

/// Parks `n` owners of a fresh agent of `imp` on a lock its owner 1 holds.
pub fn in_agent(env: &Env, imp: Impl, n: usize) -> Result<Parked> {
    let before_children = children();
    let agent = env.start_agent(imp)?;
    let pid = match children()
        .difference(&before_children)
        .copied()
        .collect::<Vec<_>>()[..]
    {
        [pid] => pid,
        ref others => {
            return Err(Error::Failed(format!(
                "{}: cannot tell its pid among new children {others:?}",
                agent.label
            )));
        }
    };
    let name = env.name("s6-agent");
    let lock = |owner: u64| json!({"op": "lock", "kind": "lock", "name": name, "owner": owner});
    drive::call(&agent, lock(1), Duration::from_secs(20))?;
    std::thread::sleep(Duration::from_millis(300));
    let pid = pid.to_string();
    let before_connections = client_ids(&mut env.con())?;
    let before = Before {
        commands: sent_total(&mut env.con())?,
        rss: rss_bytes(&pid)?,
        connections: &before_connections,
    };
    let mut ids = Vec::new();
    for owner in 2..(n as u64 + 2) {
        ids.push(agent.send(lock(owner))?);
    }
    // The Rust agent tells how many waits its client registered (`stats`, an op of its own).
    let registered = || match imp {
        Impl::Rust => {
            let stats = drive::call(&agent, json!({"op": "stats"}), Duration::from_secs(20))?;
            match stats["waiters"].as_u64() {
                Some(waits) => Ok(Some(waits)),
                None => Err(Error::Failed(format!("stats without waiters: {stats}"))),
            }
        }
        Impl::Java => Ok(None),
    };
    let parked = measure(env, &name, n, &pid, before, registered)?;
    if let Some(failed) = ids.iter().find_map(|&id| agent.poll(id)) {
        return Err(Error::Failed(format!(
            "{}: a waiter answered while the lock was held: {failed}",
            agent.label
        )));
    }
    // Dropping the agent closes its input; it exits with its waiters still waiting.
    drop(agent);
    Ok(parked)
}

/// Client-sent commands counted so far.
fn sent_total(con: &mut Connection) -> Result<u64> {
    Ok(drive::command_stats(con)?.sent_total())
}

/// Waits until the `n` waiters are parked, then half a second more.
///
/// Redisson's waiters each try, subscribe (one `SUBSCRIBE` per channel and connection) and try
/// again before they sleep: at least `2 n` client-sent commands since `base`. This crate's do
/// not all send commands (a waiter on a name its client already waits for parks on the same
/// subscription; 4 to `2 n` commands were seen for `n` = 100), so where `registered` can tell
/// how many waits the waiting client has registered (`Client::stats`, the Rust agent's
/// `stats`), the waiters are parked once all `n` are and the count of commands has then moved
/// by less than [`quiet_bound`] over [`QUIET`].
fn settle(
    con: &mut Connection,
    base: u64,
    n: u64,
    mut registered: impl FnMut() -> Result<Option<u64>>,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut now = base;
    // Since when, and from what count, the count has moved less than the bound.
    let mut quiet: Option<(Instant, u64)> = None;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        now = sent_total(con)?;
        let parked = match registered()? {
            None => now >= base + 2 * n,
            Some(waits) if waits < n => false,
            Some(_) => match quiet {
                Some((since, from)) if now - from < quiet_bound(n) => since.elapsed() >= QUIET,
                _ => {
                    quiet = Some((Instant::now(), now));
                    false
                }
            },
        };
        if parked {
            std::thread::sleep(Duration::from_millis(500));
            return Ok(());
        }
    }
    Err(Error::Failed(format!(
        "{n} waiters did not park within 120 s ({} commands)",
        now - base
    )))
}

/// How long the command count must stay (nearly) still for registered waiters to count as
/// parked.
const QUIET: Duration = Duration::from_millis(300);

/// New commands that still count as still over [`QUIET`] for `n` waiters: a twentieth of
/// them (at least 3), against the 0.03 per waiter parked waiters re-check in that time at
/// most (S6's idle rates: 0.02 and 0.1 per waiter per second).
fn quiet_bound(n: u64) -> u64 {
    (n / 20).max(3)
}

/// Client-sent commands per waiter per second over `window`.
fn idle_rate(con: &mut Connection, n: usize, window: Duration) -> Result<f64> {
    let before = sent_total(con)?;
    std::thread::sleep(window);
    let after = sent_total(con)?;
    // The two INFO calls are excluded from the counts already.
    Ok(after.saturating_sub(before) as f64 / window.as_secs_f64() / n as f64)
}

/// `VmRSS` of `/proc/<pid>/status`, in bytes (`pid` may be `self`).
fn rss_bytes(pid: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| Error::Failed(format!("no VmRSS in /proc/{pid}/status")))
}

/// Pids of this process's children.
fn children() -> HashSet<u32> {
    let me = std::process::id();
    let mut pids = HashSet::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After "pid (comm) ": state, then ppid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) {
            pids.insert(pid);
        }
    }
    pids
}

/// The ids of the connections open on the server (`CLIENT LIST`). The connections a client
/// opened are those whose ids were not there before it: a difference of counts would also
/// take in the connections others closed meanwhile (Redisson's pools close idle ones).
fn client_ids(con: &mut Connection) -> Result<HashSet<u64>> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(con)
        .map_err(|e| format!("redis: {e}"))?;
    list.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split(' ')
                .find_map(|field| field.strip_prefix("id="))
                .and_then(|id| id.parse().ok())
                .ok_or_else(|| Error::Failed(format!("CLIENT LIST: no id in {l:?}")))
        })
        .collect()
}

/// `redisson_lock__channel:{name}`.
pub fn channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

/// `PUBSUB NUMSUB channel` on the bench's single server.
fn numsub(con: &mut Connection, channel: &str) -> Result<i64> {
    let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(con)
        .map_err(|e| Error::Failed(format!("PUBSUB NUMSUB {channel}: {e}")))?;
    match reply.get(1) {
        Some(redis::Value::Int(n)) => Ok(*n),
        other => Err(Error::Failed(format!(
            "PUBSUB NUMSUB {channel}: unexpected reply {other:?}"
        ))),
    }
}
