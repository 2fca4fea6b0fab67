//! S10: the primitives without a Redisson counterpart in the agents (the token lock, a
//! multi-lock of three locks), measured in this process against the plain `Lock` in the same
//! run: uncontended acquire+release pairs per second, each task on keys of its own. And the
//! token lock beside its peer outside Redisson, rslock 0.10 (the same `SET NX PX` lock with a
//! compare-and-delete release, on one redis-rs multiplexed connection) at 1, 8, 64 and 512
//! tasks, alternating within each repetition (issue 28's goal: the token lock at least as fast).

use std::time::Instant;

use redisson_sync::{Client, LockOptions, MultiLock, Owner};

use crate::drive::Result;
use crate::env::Env;
use crate::report::{Better, Report};

/// The kinds measured, in report order.
const KINDS: [&str; 3] = ["Lock", "TokenLock", "MultiLock of 3 locks"];

fn metric(kind: &str, tasks: u64) -> String {
    format!("{kind} pairs/s, {tasks} tasks on distinct keys, in process")
}

pub fn s10(env: &Env, report: &mut Report) -> Result<()> {
    let (tasks, iterations) = env.sizes.s2[0];
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    let url = env.server.url();
    runtime.block_on(async {
        let client = Client::open(&url).map_err(|e| format!("client: {e}"))?;
        for rep in 0..env.options.reps {
            for kind in KINDS {
                let prefix = env.name("s10");
                let started = Instant::now();
                let mut loops = Vec::new();
                for task in 0..tasks {
                    let client = client.clone();
                    let name = format!("{prefix}:{task}");
                    loops.push(tokio::spawn(async move {
                        pairs(&client, kind, &name, task, iterations).await
                    }));
                }
                for l in loops {
                    l.await.map_err(|e| format!("task: {e}"))??;
                }
                let rate = (tasks * iterations) as f64 / started.elapsed().as_secs_f64();
                report.sample("S10", &metric(kind, tasks), "rust", rep, rate);
            }
        }
        client.shutdown().await;
        Ok::<_, crate::drive::Error>(())
    })?;
    for kind in KINDS {
        report.row("S10", &metric(kind, tasks), "pairs/s", Better::Higher);
    }
    peer(env, report, &runtime)
}

/// The peer's label in the report.
const RSLOCK: &str = "rslock 0.10 (SET NX PX, compare-and-delete)";

/// The token lock with the lease rslock's holds have: a fixed 30 s TTL, no watchdog.
const TOKEN_LEASED: &str = "TokenLock, 30 s lease";

fn peer_metric(who: &str, tasks: u64) -> String {
    let plural = if tasks == 1 { "task" } else { "tasks" };
    format!("{who} pairs/s, {tasks} {plural} on distinct keys, in process")
}

/// `TokenLock` (watchdog lease), `TokenLock` with a 30 s lease and rslock (a 30 s TTL,
/// Redisson's watchdog lease) at 1, 8, 64 and 512 tasks on keys of their own, alternating in
/// every repetition (in the reverse order every other one). The leased token lock's row
/// carries the target "≥ rslock": it is the same lock (`SET NX PX` with that TTL, released by
/// compare-and-delete); the watchdog's row gives what renewal costs on top.
fn peer(env: &Env, report: &mut Report, runtime: &tokio::runtime::Runtime) -> Result<()> {
    let sizes = env.sizes.steady_cells();
    let url = env.server.url();
    runtime.block_on(async {
        let client = Client::open(&url).map_err(|e| format!("client: {e}"))?;
        let manager = std::sync::Arc::new(rslock::LockManager::new(vec![url.clone()]));
        // One cell: `tasks` tasks of `who`, `iterations` pairs each; its wall time.
        let cell = |who: &'static str, tasks: u64, iterations: u64| {
            let (client, manager) = (client.clone(), manager.clone());
            let prefix = env.name("s10peer");
            async move {
                let started = Instant::now();
                let mut loops = Vec::new();
                for task in 0..tasks {
                    let (client, manager) = (client.clone(), manager.clone());
                    let name = format!("{prefix}:{task}");
                    loops.push(tokio::spawn(async move {
                        if who == RSLOCK {
                            rslock_pairs(&manager, &name, iterations).await
                        } else {
                            pairs(&client, who, &name, task, iterations).await
                        }
                    }));
                }
                for l in loops {
                    l.await.map_err(|e| format!("task: {e}"))??;
                }
                Ok::<_, crate::drive::Error>(started.elapsed())
            }
        };
        for rep in 0..env.options.reps {
            for &(tasks, iterations) in &sizes {
                // The order reversed every other repetition, as bench-ab alternates its
                // builds: whatever the cell before leaves behind falls on each side alike.
                let mut order = ["TokenLock", TOKEN_LEASED, RSLOCK];
                if rep % 2 == 1 {
                    order.reverse();
                }
                for who in order {
                    // Untimed first (`env::untimed_part`): the workers settle into this size.
                    cell(who, tasks, crate::env::untimed_part(iterations)).await?;
                    let took = cell(who, tasks, iterations).await?;
                    let rate = (tasks * iterations) as f64 / took.as_secs_f64();
                    report.sample("S10", &peer_metric(who, tasks), "rust", rep, rate);
                }
            }
        }
        client.shutdown().await;
        Ok::<_, crate::drive::Error>(())
    })?;
    for &(tasks, _) in &sizes {
        let peer_rate = report
            .row(
                "S10",
                &peer_metric(RSLOCK, tasks),
                "pairs/s",
                Better::Higher,
            )
            .rust;
        report.row(
            "S10",
            &peer_metric("TokenLock", tasks),
            "pairs/s",
            Better::Higher,
        );
        let row = report.row(
            "S10",
            &peer_metric(TOKEN_LEASED, tasks),
            "pairs/s",
            Better::Higher,
        );
        if let (Some(ours), Some(theirs)) = (row.rust, peer_rate) {
            row.target = Some(crate::report::Target {
                text: format!("≥ rslock 0.10 in the same run ({theirs:.0})"),
                met: ours >= theirs,
            });
        }
    }
    Ok(())
}

/// `iterations` lock+unlock pairs of rslock on `name`: `lock` (one `SET NX PX` with a 30 s TTL,
/// granted at once on a free key), then `unlock` (its compare-and-delete script).
async fn rslock_pairs(
    manager: &rslock::LockManager,
    name: &str,
    iterations: u64,
) -> std::result::Result<(), String> {
    for _ in 0..iterations {
        let lock = manager
            .lock(name.as_bytes(), std::time::Duration::from_secs(30))
            .await
            .map_err(|e| format!("rslock: {e:?}"))?;
        manager.unlock(&lock).await;
    }
    Ok(())
}

/// `iterations` acquire+release pairs of `kind` on keys named after `name`.
async fn pairs(
    client: &Client,
    kind: &str,
    name: &str,
    task: u64,
    iterations: u64,
) -> std::result::Result<(), String> {
    let opts = LockOptions::new().owner(Owner::new(task + 1));
    let err = |e: redisson_sync::Error| format!("{kind}: {e}");
    match kind {
        "Lock" => {
            let lock = client.lock(name);
            for _ in 0..iterations {
                lock.lock_with_options(&opts)
                    .await
                    .map_err(err)?
                    .unlock()
                    .await
                    .map_err(err)?;
            }
        }
        "TokenLock" | TOKEN_LEASED => {
            let lock = client.token_lock(name);
            let opts = if kind == TOKEN_LEASED {
                opts.lease(std::time::Duration::from_secs(30))
            } else {
                opts
            };
            for _ in 0..iterations {
                lock.lock_with_options(&opts)
                    .await
                    .map_err(err)?
                    .unlock()
                    .await
                    .map_err(err)?;
            }
        }
        _ => {
            let multi =
                MultiLock::new((0..3).map(|i| client.lock(format!("{name}:{i}")))).map_err(err)?;
            for _ in 0..iterations {
                multi
                    .lock_with_options(&opts)
                    .await
                    .map_err(err)?
                    .unlock()
                    .await
                    .map_err(err)?;
            }
        }
    }
    Ok(())
}
