//! Scenario runner for the Rust <-> Java (Redisson) lock conformance tests.
//!
//! Starts its own `redis-server` on a free port of 127.0.0.1 and the two conformance agents
//! (`interop/agent rust|java`, see CONFORMANCE_PROTOCOL.md), runs every scenario in both
//! directions (Java holds / Rust waits, and Rust holds / Java waits), prints one line per
//! scenario and a final `N passed, M failed`, and exits non-zero on any failure.
//!
//! ```text
//! interop/run [--redisson VERSION] [--smoke] [--only SUBSTRING] [--handoffs N] [--iterations N]
//! interop/run --mode cluster [--pubsub auto|classic|sharded] [--rust-pubsub both] [--smoke]
//! interop/run --mode sentinel [--smoke]
//! interop/run --server valkey-9.1|redis-6.2|redis-7.0 [any of the above]
//! ```
//!
//! `--server` runs everything on another server build (docs/servers.md); scenarios that need
//! a server feature the build lacks (TLS, probed) are reported as `SKIP`.
//!
//! With `--mode cluster` the scenarios that look at Redis only through keys run on a Redis
//! Cluster of their own (3 masters, 3 replicas), both agents in cluster mode with `--pubsub`
//! (the Rust agent with `--rust-pubsub` when given). With `--mode sentinel` the same scenarios
//! run on a master with two replicas behind three Sentinels, both agents in sentinel mode, and
//! last a Sentinel failover.
//! (`interop/run` builds the agents first; this binary itself never compiles anything.)

mod ctx;
mod scenarios;

use interop_scenarios::{agent, server};

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use ctx::{Ctx, Options};

fn main() -> ExitCode {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("interop-scenarios: {message}");
            eprintln!(
                "usage: interop-scenarios [--root DIR] [--redisson VERSION] [--mode single|cluster|sentinel] \
                 [--pubsub MODE] [--rust-pubsub MODE] [--smoke] [--server BUILD] \
                 [--only SUBSTRING] [--handoffs N] [--iterations N]"
            );
            return ExitCode::from(2);
        }
    };
    let ctx = match Ctx::start(options) {
        Ok(ctx) => ctx,
        Err(message) => {
            eprintln!("interop-scenarios: cannot start: {message}");
            return ExitCode::FAILURE;
        }
    };
    let topology = if ctx.options.cluster {
        format!(
            "cluster (seed {}), pub/sub java {} rust {}",
            ctx.server.url(),
            ctx.options.pubsub,
            ctx.options
                .rust_pubsub
                .as_deref()
                .unwrap_or(&ctx.options.pubsub)
        )
    } else if ctx.options.sentinel {
        format!("sentinel {} (master mymaster)", ctx.server.url())
    } else {
        ctx.server.url()
    };
    let build = testkit::ServerBuild::current();
    println!(
        "server {} ({}) | redis {} | rust agent {} | java agent: Redisson {} | logs in {}",
        build.name(),
        build.version_line().unwrap_or_default(),
        topology,
        ctx.rust.version,
        ctx.java.version,
        relative(&ctx.root, &ctx.logs).display()
    );

    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for run in scenarios::plan(&ctx.options) {
        if run.scenario.tls && !build.supports_tls() {
            skipped += 1;
            println!(
                "SKIP  {:<44}         server build {} has no TLS",
                run.label(),
                build.name()
            );
            continue;
        }
        let started = Instant::now();
        let outcome = (run.scenario.run)(&ctx, run.holder, run.waiter);
        let took = started.elapsed().as_secs_f64();
        match outcome {
            Ok(detail) => {
                passed += 1;
                println!("PASS  {:<44} {took:>5.1} s  {detail}", run.label());
            }
            Err(reason) => {
                failed += 1;
                println!("FAIL  {:<44} {took:>5.1} s  {reason}", run.label());
            }
        }
    }
    if skipped > 0 {
        println!("{passed} passed, {failed} failed, {skipped} skipped");
    } else {
        println!("{passed} passed, {failed} failed");
    }
    if failed == 0 && passed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn relative(root: &std::path::Path, path: &std::path::Path) -> PathBuf {
    path.strip_prefix(root)
        .map(PathBuf::from)
        .unwrap_or_else(|_| path.to_path_buf())
}
