//! S10: the primitives without a Redisson counterpart in the agents (the token lock, a
//! multi-lock of three locks), measured in this process against the plain `Lock` in the same
//! run: uncontended acquire+release pairs per second, each task on keys of its own.

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
        "TokenLock" => {
            let lock = client.token_lock(name);
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
