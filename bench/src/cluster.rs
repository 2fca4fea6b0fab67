//! S11: the same `bench` op on a Redis Cluster (issue 12): a cluster of 3 masters of its own,
//! one Rust and one Java agent in cluster mode with the default pub/sub (`auto`: sharded on
//! Redis 7, as Redisson's default), uncontended pairs at 64 and 512 tasks on distinct keys
//! (spread over the slots), and the contended pair p50, p99 and pairs/s on one key; then how
//! the uncontended scripts spread over the masters (`cmdstat_evalsha` and `cmdstat_eval` calls
//! per master).
//! The single-server figures of the same sizes are S2's rows, in the same run.

use interop_scenarios::agent::{Agent, Impl};
use testkit::RedisCluster;

use crate::drive::{self, Error, Result};
use crate::env::Env;
use crate::report::{Better, Report};

const IMPLS: [Impl; 2] = [Impl::Rust, Impl::Java];

fn who(imp: Impl) -> &'static str {
    match imp {
        Impl::Rust => "rust",
        Impl::Java => "java",
    }
}

pub fn s11(env: &Env, report: &mut Report) -> Result<()> {
    let s = &env.sizes;
    let cluster = RedisCluster::builder()
        .masters(3)
        .try_start()
        .map_err(Error::Failed)?;
    let seed = cluster.seed_urls()[0].clone();
    let start = |imp: Impl| -> Result<Agent> {
        let label = format!("{imp}#cluster");
        let mut extra = vec![
            "--mode".to_string(),
            "cluster".to_string(),
            "--pubsub".to_string(),
            "auto".to_string(),
        ];
        if imp == Impl::Java {
            extra.extend(["--redisson".to_string(), env.options.redisson.clone()]);
        }
        let log = env.logs.join(format!("agent-{imp}-cluster.log"));
        Agent::start(&env.options.root, imp, label, &seed, &extra, &log).map_err(Error::Failed)
    };
    let agents = [start(Impl::Rust)?, start(Impl::Java)?];
    let sizes: Vec<(u64, u64)> =
        s.s2.iter()
            .copied()
            .filter(|(tasks, _)| *tasks >= 64)
            .collect();
    let metric = |tasks: u64| format!("cluster pairs/s, {tasks} tasks on distinct keys");
    let p99 = |tasks: u64| format!("cluster pair p99, {tasks} tasks on distinct keys");
    let contended = format!("cluster pair p50, {} tasks on one key", s.s3_tasks);
    // The contended cell's other two figures: where its pairs wait in line (the crate lets
    // the waiters parked in the client go first, Redisson's releaser often takes the lock
    // back), p50 and p99 move in opposite directions, and its rate says what the order costs.
    let contended_p99 = format!("cluster pair p99, {} tasks on one key", s.s3_tasks);
    let contended_rate = format!("cluster pairs/s, {} tasks on one key", s.s3_tasks);
    let mut spread: Vec<String> = Vec::new();
    for rep in 0..env.options.reps {
        for (imp, agent) in IMPLS.iter().zip(&agents) {
            // Warm-up: scripts loaded on every master, connections open.
            drive::bench(agent, "lock", &env.name("s11-warm"), 16, 5, false)?;
            for &(tasks, iterations) in &sizes {
                let before = per_master(&cluster)?;
                let run = drive::bench(agent, "lock", &env.name("s11"), tasks, iterations, false)?;
                let after = per_master(&cluster)?;
                report.sample("S11", &metric(tasks), who(*imp), rep, run.rate());
                report.sample("S11", &p99(tasks), who(*imp), rep, run.p99_us);
                if rep == 0 {
                    let calls: Vec<u64> = after
                        .iter()
                        .zip(&before)
                        .map(|(a, b)| a.saturating_sub(*b))
                        .collect();
                    let total: u64 = calls.iter().sum::<u64>().max(1);
                    let shares: Vec<String> = calls
                        .iter()
                        .map(|c| format!("{:.0} %", 100.0 * *c as f64 / total as f64))
                        .collect();
                    spread.push(format!(
                        "S11 {} {tasks} tasks: scripts per master {}",
                        who(*imp),
                        shares.join(" / ")
                    ));
                }
            }
            let run = drive::bench(
                agent,
                "lock",
                &env.name("s11-one"),
                s.s3_tasks,
                s.s3_bench_iterations,
                true,
            )?;
            report.sample("S11", &contended, who(*imp), rep, run.p50_us);
            report.sample("S11", &contended_p99, who(*imp), rep, run.p99_us);
            report.sample("S11", &contended_rate, who(*imp), rep, run.rate());
        }
    }
    for &(tasks, _) in &sizes {
        report.row("S11", &metric(tasks), "pairs/s", Better::Higher);
        report.row("S11", &p99(tasks), "µs", Better::Lower);
    }
    report.row("S11", &contended, "µs", Better::Lower);
    report.row("S11", &contended_p99, "µs", Better::Lower);
    report.row("S11", &contended_rate, "pairs/s", Better::Higher);
    report.notes.extend(spread);
    drop(agents);
    drop(cluster);
    Ok(())
}

/// Script calls served so far by each master, in node order.
fn per_master(cluster: &RedisCluster) -> Result<Vec<u64>> {
    let mut calls = Vec::new();
    for node in cluster.nodes() {
        let mut con = cluster
            .server(node.index)
            .try_connect()
            .map_err(Error::Failed)?;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut con)
            .map_err(|e| Error::Failed(format!("INFO commandstats: {e}")))?;
        let count = |name: &str| -> u64 {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        calls.push(count("evalsha") + count("eval"));
    }
    Ok(calls)
}
