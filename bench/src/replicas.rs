//! S12: the cost of replica sync (issue 13): a master with two replicas and three Sentinels of
//! its own (`testkit::RedisSentinel`), agents in Sentinel mode, the uncontended lock+unlock
//! pair of one task (as S1), with `WAIT` after each write (Rust `sync_replicas = auto`,
//! Redisson's default `checkLockSyncedSlaves`), and Rust again with `sync_replicas = off`;
//! then, with `WAIT`, S2's 64 tasks on distinct keys (pairs/s), where the crate writes the
//! synced calls in flight together before one `WAIT` (src/conn/sync_batch.rs). Redisson cannot
//! be measured without `WAIT` here: `checkLockSyncedSlaves = false` only ignores its answer.

use interop_scenarios::agent::{Agent, Impl};
use testkit::RedisSentinel;

use crate::drive::{self, Error, Result};
use crate::env::Env;
use crate::report::{Better, Report};

pub fn s12(env: &Env, report: &mut Report) -> Result<()> {
    let setup = RedisSentinel::try_start().map_err(Error::Failed)?;
    let sentinel = setup.sentinel_urls()[0].clone();
    let start = |imp: Impl, sync: Option<&str>| -> Result<Agent> {
        let label = format!("{imp}#sentinel-{}", sync.unwrap_or("default"));
        let mut extra = vec!["--mode".to_string(), "sentinel".to_string()];
        extra.extend(["--master".to_string(), setup.master_name().to_string()]);
        if let Some(sync) = sync {
            extra.extend(["--sync-replicas".to_string(), sync.to_string()]);
        }
        if imp == Impl::Java {
            extra.extend(["--redisson".to_string(), env.options.redisson.clone()]);
        }
        let log = env.logs.join(format!(
            "agent-{imp}-sentinel-{}.log",
            sync.unwrap_or("default")
        ));
        Agent::start(&env.options.root, imp, label, &sentinel, &extra, &log).map_err(Error::Failed)
    };
    let synced = [
        ("rust", start(Impl::Rust, Some("auto"))?),
        ("java", start(Impl::Java, None)?),
    ];
    let unsynced = start(Impl::Rust, Some("off"))?;
    let pairs = env.sizes.s1_pairs;
    let on_p50 = "sentinel pair p50, 1 task, replica sync on (WAIT after each write)";
    let on_p99 = "sentinel pair p99, 1 task, replica sync on (WAIT after each write)";
    let off_p50 = "sentinel pair p50, 1 task, replica sync off";
    let many = "sentinel pairs/s, 64 tasks on distinct keys, replica sync on";
    let many_pairs = env
        .sizes
        .s2
        .iter()
        .find(|&&(tasks, _)| tasks == 64)
        .map_or(1, |&(_, pairs)| pairs);
    for rep in 0..env.options.reps {
        for (who, agent) in &synced {
            // Warm-up: scripts loaded, connections open, replica count read.
            drive::bench(agent, "lock", &env.name("s12-warm"), 1, 20, false)?;
            let run = drive::bench(agent, "lock", &env.name("s12"), 1, pairs, false)?;
            report.sample("S12", on_p50, who, rep, run.p50_us);
            report.sample("S12", on_p99, who, rep, run.p99_us);
            drive::bench(agent, "lock", &env.name("s12-warm"), 64, 2, false)?;
            let run = drive::bench(agent, "lock", &env.name("s12"), 64, many_pairs, false)?;
            report.sample("S12", many, who, rep, run.rate());
        }
        drive::bench(&unsynced, "lock", &env.name("s12-warm"), 1, 20, false)?;
        let run = drive::bench(&unsynced, "lock", &env.name("s12"), 1, pairs, false)?;
        report.sample("S12", off_p50, "rust", rep, run.p50_us);
    }
    report.row("S12", on_p50, "µs", Better::Lower);
    report.row("S12", on_p99, "µs", Better::Lower);
    report.row("S12", off_p50, "µs", Better::Lower);
    report.row("S12", many, "pairs/s", Better::Higher);
    if let (Some(on), Some(off)) = (
        report.median_of("S12", on_p50, "rust"),
        report.median_of("S12", off_p50, "rust"),
    ) {
        report.notes.push(format!(
            "S12 Rust replica sync cost: pair p50 {on:.0} µs with WAIT vs {off:.0} µs without ({:.2}x, +{:.0} µs)",
            on / off.max(1e-9),
            on - off
        ));
    }
    drop(synced);
    drop(unsynced);
    drop(setup);
    Ok(())
}
