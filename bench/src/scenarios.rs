//! The scenarios of BENCHMARKS.md (shared notes, §B5), each run for both implementations on
//! identical parameters, alternating Rust and Redisson within every repetition (A B A B …),
//! with `redis-benchmark`'s ceiling measured in the same repetition.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use interop_scenarios::agent::{Agent, Impl};
use serde_json::json;

use crate::ceiling::{self, Scripts};
use crate::drive::{self, Error, Result, StressPart};
use crate::env::{Env, untimed_part};
use crate::handoff::{self, Interval};
use crate::memory;
use crate::report::{Better, CeilingLine, CommandCounts, Report, Target};
use crate::stats::{percentile, sorted};

/// Rust first, then Redisson, in every repetition.
const IMPLS: [Impl; 2] = [Impl::Rust, Impl::Java];

fn who(imp: Impl) -> &'static str {
    match imp {
        Impl::Rust => "rust",
        Impl::Java => "java",
    }
}

/// One `redis-benchmark` run on an emptied database (plus the held hash for the release
/// script), kept for the ceiling table.
fn redis_benchmark(
    env: &Env,
    report: &mut Report,
    what: &str,
    (clients, pipeline, requests): (usize, usize, usize),
    args: &[String],
) -> Result<ceiling::Run> {
    ceiling::reset(&mut env.con())?;
    let run = ceiling::run(env.port, clients, pipeline, requests, args)?;
    report.ceilings.push(CeilingLine {
        what: what.to_owned(),
        clients,
        pipeline,
        rps: run.rps,
        p50_us: run.p50_us,
        p99_us: run.p99_us,
    });
    Ok(run)
}

fn ping() -> Vec<String> {
    vec!["PING".into()]
}

/// Warms both implementations the same way; the JVM (JIT) for `warmup_secs` of `bench` and
/// `stress`, the Rust agents for one round of each.
pub fn warm_up(env: &Env) -> Result<()> {
    let s = &env.sizes;
    for imp in IMPLS {
        let agents = env.agents(imp);
        let deadline = Instant::now() + Duration::from_secs(s.warmup_secs);
        loop {
            drive::bench(&agents[0], "lock", &env.name("warm"), 64, 20, false)?;
            drive::bench(&agents[0], "lock", &env.name("warm"), 1, 100, false)?;
            drive::bench(&agents[0], "lock", &env.name("warm"), 8, 20, true)?;
            let name = env.name("warm");
            let parts: Vec<StressPart<'_>> = agents
                .iter()
                .flat_map(|agent| {
                    (1..=2).map(move |owner| StressPart {
                        agent,
                        owner,
                        kind: "lock",
                        iterations: 20,
                    })
                })
                .collect();
            drive::stress(&mut env.con(), &name, &format!("{name}:counter"), &parts)?;
            if imp == Impl::Rust || Instant::now() >= deadline {
                break;
            }
        }
    }
    Ok(())
}

/// S0: the crate against the bare client (`bench/src/bare.rs`: one redis-rs multiplexed
/// connection sending the crate's own two scripts with EVALSHA) at 1, 8, 64 and 512 tasks on
/// distinct keys, alternating the two within every repetition: pairs/s and pair p50. The
/// crate's side is the Rust agent's `bench` op, as in S1 and S2.
pub fn s0(env: &Env, report: &mut Report) -> Result<()> {
    let s = &env.sizes;
    let plural = |tasks: u64| if tasks == 1 { "task" } else { "tasks" };
    let rate = |tasks: u64| {
        format!(
            "pairs/s, {tasks} {} on distinct keys, vs bare",
            plural(tasks)
        )
    };
    let p50 = |tasks: u64| format!("pair p50, {tasks} {}, vs bare", plural(tasks));
    // Steady cells, each after an untimed part on the same side (`env::untimed_part`).
    let sizes = s.steady_cells();
    let crate_run = |tasks: u64, iterations: u64| {
        drive::bench(
            &env.agents(Impl::Rust)[0],
            "lock",
            &env.name("s0"),
            tasks,
            iterations,
            false,
        )
    };
    for rep in 0..env.options.reps {
        for &(tasks, iterations) in &sizes {
            env.bare
                .bench(&env.name("s0"), tasks, untimed_part(iterations), false)?;
            let bare = env.bare.bench(&env.name("s0"), tasks, iterations, false)?;
            report.sample("S0", &rate(tasks), "bare", rep, bare.rate());
            report.sample("S0", &p50(tasks), "bare", rep, bare.p50_us);
            crate_run(tasks, untimed_part(iterations))?;
            let run = crate_run(tasks, iterations)?;
            report.sample("S0", &rate(tasks), "rust", rep, run.rate());
            report.sample("S0", &p50(tasks), "rust", rep, run.p50_us);
        }
    }
    for &(tasks, _) in &sizes {
        let row = report.row("S0", &rate(tasks), "pairs/s", Better::Higher);
        if tasks >= 64
            && let (Some(r), Some(b)) = (row.rust, row.bare)
        {
            row.target = Some(Target {
                text: "≥ 0.9 × the bare client".into(),
                met: r >= 0.9 * b,
            });
        }
    }
    if env.options.quick {
        report.notes.push("S0: no instruction counts in a quick run (scripts/bench --instructions --quick counts them alone)".into());
    } else if crate::instructions::available() {
        let counts = crate::instructions::measure(
            &env.server.url(),
            s.instructions,
            &env.options.root.join("target/bench"),
        )?;
        let metric = "instructions per pair, 1 task (callgrind)";
        use crate::instructions::Mode;
        if let (Some(c), Some(b)) = (counts.of(Mode::Crate), counts.of(Mode::Bare)) {
            report.sample("S0", metric, "rust", 0, c);
            report.sample("S0", metric, "bare", 0, b);
            let row = report.row("S0", metric, "instructions", Better::Lower);
            row.target = Some(Target {
                text: "≤ 1.5 × the bare client's".into(),
                met: c <= 1.5 * b,
            });
        }
        if let Some(blocking) = counts.of(Mode::Blocking) {
            report.notes.push(format!(
                "S0: the blocking API's Lock spends {blocking:.0} instructions per pair under callgrind (the async Lock {:.0}, N = {} and {})",
                counts.of(Mode::Crate).unwrap_or(0.0),
                counts.n.0,
                counts.n.1
            ));
        }
        if let (Some(token), Some(rslock)) = (counts.of(Mode::Token), counts.of(Mode::Rslock)) {
            report.notes.push(format!(
                "S0: the TokenLock spends {token:.0} instructions per pair under callgrind, rslock 0.10 {rslock:.0} ({:.2} ×; S10 compares their pairs/s)",
                token / rslock
            ));
        }
    } else {
        report.notes.push(
            "S0: valgrind is missing: no instruction counts (apt-get install valgrind)".into(),
        );
    }
    for &(tasks, _) in &sizes {
        let row = report.row("S0", &p50(tasks), "µs", Better::Lower);
        if tasks == 1
            && let (Some(r), Some(b)) = (row.rust, row.bare)
        {
            row.target = Some(Target {
                text: "≤ 1.1 × the bare client's pair p50".into(),
                met: r <= 1.1 * b,
            });
        }
    }
    Ok(())
}

/// S1: uncontended latency, one task, one key reused: pair p50/p99, against redis-benchmark's
/// p50 of the two scripts at one connection.
pub fn s1(env: &Env, report: &mut Report, scripts: &Scripts) -> Result<()> {
    let s = &env.sizes;
    let (p50, p99) = (
        "lock+unlock pair p50, 1 task",
        "lock+unlock pair p99, 1 task",
    );
    let one = (1, 1, s.ceiling_requests_c1);
    for rep in 0..env.options.reps {
        let lock = redis_benchmark(
            env,
            report,
            "acquire.lua",
            one,
            &ceiling::acquire_args(scripts),
        )?;
        let unlock = redis_benchmark(
            env,
            report,
            "unlock.lua",
            one,
            &ceiling::unlock_args(scripts),
        )?;
        redis_benchmark(env, report, "PING", one, &ping())?;
        report.sample("S1", p50, "ceiling", rep, lock.p50_us + unlock.p50_us);
        for imp in IMPLS {
            let run = drive::bench(
                &env.agents(imp)[0],
                "lock",
                &env.name("s1"),
                1,
                s.s1_pairs,
                false,
            )?;
            report.sample("S1", p50, who(imp), rep, run.p50_us);
            report.sample("S1", p99, who(imp), rep, run.p99_us);
        }
        let bare = env.bare.bench(&env.name("s1"), 1, s.s1_pairs, true)?;
        report.sample("S1", p50, "bare", rep, bare.p50_us);
        report.sample("S1", p99, "bare", rep, bare.p99_us);
    }
    let row = report.row("S1", p50, "µs", Better::Lower);
    if let (Some(r), Some(c)) = (row.rust, row.ceiling) {
        row.target = Some(Target {
            text: "≤ 1.1 × (redis-benchmark p50 of acquire + of release, -c 1)".into(),
            met: r <= 1.1 * c,
        });
    }
    report.row("S1", p99, "µs", Better::Lower);
    Ok(())
}

/// S2: uncontended throughput on distinct keys at 8, 64 and 512 tasks, against the
/// server-bound ceiling (both scripts at `-c 50 -P 16`); S7's uncontended command counts.
pub fn s2(env: &Env, report: &mut Report, scripts: &Scripts) -> Result<()> {
    let s = &env.sizes;
    let (lock_args, unlock_args) = (
        ceiling::acquire_args(scripts),
        ceiling::unlock_args(scripts),
    );
    let mut commands = CommandCounts {
        label: "S2 uncontended (all task counts)".into(),
        ..CommandCounts::default()
    };
    let metric = |tasks: u64| format!("pairs/s, {tasks} tasks on distinct keys");
    let unpipelined = |tasks: u64| format!("pairs/s, {tasks} tasks, unpipelined ceiling");
    for rep in 0..env.options.reps {
        let piped = (50, 16, s.ceiling_requests_pipelined);
        let lock = redis_benchmark(env, report, "acquire.lua", piped, &lock_args)?;
        let unlock = redis_benchmark(env, report, "unlock.lua", piped, &unlock_args)?;
        let bound = ceiling::pair_rate(lock.rps, unlock.rps);
        for &(tasks, iterations) in &s.s2 {
            let flat = (tasks as usize, 1, s.ceiling_requests);
            let lock = redis_benchmark(env, report, "acquire.lua", flat, &lock_args)?;
            let unlock = redis_benchmark(env, report, "unlock.lua", flat, &unlock_args)?;
            report.sample("S2", &metric(tasks), "ceiling", rep, bound);
            let flat_rate = ceiling::pair_rate(lock.rps, unlock.rps);
            report.sample("S2", &unpipelined(tasks), "ceiling", rep, flat_rate);
            // Each side's cell after an untimed part of its own (`env::untimed_part`, as S0's):
            // a cell right after a change of size otherwise runs partly in the previous size's
            // state, and S2's cells are short (512 tasks: 0.2 s for the crate and the bare
            // client).
            for imp in IMPLS {
                let agent = &env.agents(imp)[0];
                let warm = untimed_part(iterations);
                drive::bench(agent, "lock", &env.name("s2"), tasks, warm, false)?;
                drive::reset_stats(&mut env.con())?;
                let name = env.name("s2");
                let run = drive::bench(agent, "lock", &name, tasks, iterations, false)?;
                commands.add(who(imp), &drive::command_stats(&mut env.con())?, run.ops);
                report.sample("S2", &metric(tasks), who(imp), rep, run.rate());
                report.sample("S2", &unpipelined(tasks), who(imp), rep, run.rate());
                let p99 = format!("pair p99, {tasks} tasks");
                report.sample("S2", &p99, who(imp), rep, run.p99_us);
            }
            env.bare
                .bench(&env.name("s2"), tasks, untimed_part(iterations), false)?;
            let bare = env.bare.bench(&env.name("s2"), tasks, iterations, false)?;
            report.sample("S2", &metric(tasks), "bare", rep, bare.rate());
            report.sample("S2", &unpipelined(tasks), "bare", rep, bare.rate());
            report.sample(
                "S2",
                &format!("pair p99, {tasks} tasks"),
                "bare",
                rep,
                bare.p99_us,
            );
        }
    }
    for &(tasks, _) in &s.s2 {
        let row = report.row("S2", &metric(tasks), "pairs/s", Better::Higher);
        if let (Some(r), Some(c)) = (row.rust, row.ceiling) {
            row.target = Some(Target {
                text: "≥ 0.8 × server-bound ceiling (both scripts at -c 50 -P 16)".into(),
                met: r >= 0.8 * c,
            });
        }
    }
    for &(tasks, _) in &s.s2 {
        report.row("S2", &unpipelined(tasks), "pairs/s", Better::Higher);
    }
    for &(tasks, _) in &s.s2 {
        report.row(
            "S2",
            &format!("pair p99, {tasks} tasks"),
            "µs",
            Better::Lower,
        );
    }
    let mut row = crate::report::Row {
        scenario: "S7",
        metric: "client-sent commands per uncontended lock+unlock".into(),
        unit: "commands",
        better: Better::Lower,
        rust: commands.per_op("rust"),
        java: commands.per_op("java"),
        ceiling: Some(2.0),
        bare: None,
        target: None,
    };
    if let Some(r) = row.rust {
        row.target = Some(Target {
            text: "2: one script each way (≤ 2.01 with amortised connection setup and keep-alives)"
                .into(),
            met: r <= 2.01,
        });
    }
    report.rows.push(row);
    report.commands.push(commands);
    Ok(())
}

/// S3: one contended key. A single-process `bench` on one key (throughput), then `stress`
/// with recorded sections in 1 process × 4 owners and in 2 processes × 2 owners (handoff
/// latency, commands per acquisition).
pub fn s3(env: &Env, report: &mut Report) -> Result<()> {
    let s = &env.sizes;
    let rate = format!(
        "contended pairs/s, {} tasks on one key, 1 process",
        s.s3_tasks
    );
    let layouts: [(usize, u64, &str); 2] = [
        (1, 4, "1 process × 4 owners"),
        (2, 2, "2 processes × 2 owners"),
    ];
    let mut counts: Vec<CommandCounts> = layouts
        .iter()
        .map(|(_, _, label)| CommandCounts {
            label: format!("S3 contended, {label}"),
            ..CommandCounts::default()
        })
        .collect();
    let mut reacquired = [[0usize; 2]; 2];
    let mut steps = [[0usize; 2]; 2];
    for rep in 0..env.options.reps {
        let rtt = redis_benchmark(env, report, "PING", (1, 1, s.ceiling_requests_c1), &ping())?;
        report.sample("S3", "rtt", "ceiling", rep, rtt.p50_us);
        for imp in IMPLS {
            let agents = env.agents(imp);
            let run = drive::bench(
                &agents[0],
                "lock",
                &env.name("s3"),
                s.s3_tasks,
                s.s3_bench_iterations,
                true,
            )?;
            report.sample("S3", &rate, who(imp), rep, run.rate());
            for (li, &(processes, owners, label)) in layouts.iter().enumerate() {
                let parts: Vec<StressPart<'_>> = agents[..processes]
                    .iter()
                    .flat_map(|agent| {
                        (1..=owners).map(move |owner| StressPart {
                            agent,
                            owner,
                            kind: "lock",
                            iterations: s.s3_sections,
                        })
                    })
                    .collect();
                let name = env.name("s3");
                drive::reset_stats(&mut env.con())?;
                let run = drive::stress(&mut env.con(), &name, &format!("{name}:counter"), &parts)?;
                let sections = run.intervals.iter().map(Vec::len).sum::<usize>() as u64;
                counts[li].add(who(imp), &drive::command_stats(&mut env.con())?, sections);
                let h = handoff::analyse(run.intervals.into_iter().flatten().collect());
                if h.overlaps > 0 {
                    return Err(Error::Failed(format!(
                        "S3 {imp} {label}: {} overlapping sections",
                        h.overlaps
                    )));
                }
                reacquired[li][usize::from(imp == Impl::Java)] += h.reacquired;
                steps[li][usize::from(imp == Impl::Java)] +=
                    h.reacquired + h.latencies_us.len() + h.first;
                let lat = sorted(h.latencies_us);
                if let (Some(p50), Some(p99)) = (percentile(&lat, 50.0), percentile(&lat, 99.0)) {
                    report.sample("S3", &format!("handoff p50, {label}"), who(imp), rep, p50);
                    report.sample("S3", &format!("handoff p99, {label}"), who(imp), rep, p99);
                    report.sample(
                        "S3",
                        &format!("handoff p50, {label}"),
                        "ceiling",
                        rep,
                        2.0 * rtt.p50_us + 100.0,
                    );
                }
                if processes == 2 {
                    report.handoffs.entry(who(imp)).or_default().extend(lat);
                }
            }
        }
    }
    report.rtt_us = report.median_of("S3", "rtt", "ceiling");
    report.row("S3", &rate, "pairs/s", Better::Higher);
    for (li, &(processes, _, label)) in layouts.iter().enumerate() {
        let row = report.row("S3", &format!("handoff p50, {label}"), "µs", Better::Lower);
        if let (Some(r), Some(c)) = (row.rust, row.ceiling) {
            row.target = Some(Target {
                text: "≤ 2 × RTT + 100 µs (RTT: redis-benchmark PING p50, -c 1)".into(),
                met: r <= c,
            });
        }
        report.row("S3", &format!("handoff p99, {label}"), "µs", Better::Lower);
        let limit = 2.0 + processes as f64;
        let mut row = crate::report::Row {
            scenario: "S7",
            metric: format!("client-sent commands per contended acquisition, {label}"),
            unit: "commands",
            better: Better::Lower,
            rust: counts[li].per_op("rust"),
            java: counts[li].per_op("java"),
            ceiling: Some(limit),
            bare: None,
            target: None,
        };
        if let Some(r) = row.rust {
            row.target = Some(Target {
                text: format!("≤ 2 + P = {limit}"),
                met: r <= limit + 1e-9,
            });
        }
        report.rows.push(row);
        for (i, imp) in IMPLS.iter().enumerate() {
            if steps[li][i] > 0 {
                report.notes.push(format!(
                    "S3 {label}, {}: {:.0}% of the steps from one section to the next were the same owner taking the lock again (not counted as handoffs).",
                    crate::report::who_name(who(*imp)),
                    100.0 * reacquired[li][i] as f64 / steps[li][i] as f64
                ));
            }
        }
    }
    report.commands.extend(counts);
    Ok(())
}

/// Runs `f` for each implementation that has not answered `unsupported` yet; an
/// `unsupported` answer is recorded once as "not run" for that implementation.
fn per_impl(
    report: &mut Report,
    scenario: &str,
    skip: &mut HashSet<&'static str>,
    mut f: impl FnMut(&mut Report, Impl) -> Result<()>,
) -> Result<()> {
    for imp in IMPLS {
        if skip.contains(who(imp)) {
            continue;
        }
        match f(report, imp) {
            Ok(()) => {}
            Err(Error::Unsupported(reason)) => {
                skip.insert(who(imp));
                report.not_run.push((
                    scenario.to_owned(),
                    format!(
                        "not run for {}: {reason}",
                        crate::report::who_name(who(imp))
                    ),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// S4: read-write lock, read-heavy. `bench` of read locks on one key (100:0), and `stress`
/// with 95% reader owners and 5% writer owners on one key (reads/s, writer cycle p99).
pub fn s4(env: &Env, report: &mut Report) -> Result<()> {
    let s = &env.sizes;
    let tasks = s.s4_tasks;
    let writers = ((tasks as f64 * 0.05).round() as u64).max(1);
    let readers = tasks - writers;
    let read_rate = format!("read pairs/s, {tasks} tasks on one key (100:0)");
    let mix_rate = format!("read sections/s, {readers} readers + {writers} writers");
    let writer_p99 = format!("writer cycle p99, {readers} readers + {writers} writers");
    let mut commands = CommandCounts {
        label: format!("S4 read-write mix {readers}:{writers}"),
        ..CommandCounts::default()
    };
    let mut skip = HashSet::new();
    for rep in 0..env.options.reps {
        per_impl(report, "S4", &mut skip, |report, imp| {
            let agent = &env.agents(imp)[0];
            let run = drive::bench(agent, "read", &env.name("s4"), tasks, s.s4_sections, true)?;
            report.sample("S4", &read_rate, who(imp), rep, run.rate());
            let parts: Vec<StressPart<'_>> = (0..tasks)
                .map(|i| StressPart {
                    agent,
                    owner: 101 + i,
                    kind: if i < writers { "write" } else { "read" },
                    iterations: s.s4_sections,
                })
                .collect();
            let name = env.name("s4");
            drive::reset_stats(&mut env.con())?;
            let run = drive::stress(&mut env.con(), &name, &format!("{name}:counter"), &parts)?;
            let sections = run.intervals.iter().map(Vec::len).sum::<usize>() as u64;
            commands.add(who(imp), &drive::command_stats(&mut env.con())?, sections);
            check_writers_exclusive(&run.intervals, writers as usize)?;
            let reads = (readers * s.s4_sections) as f64 / run.wall.as_secs_f64();
            report.sample("S4", &mix_rate, who(imp), rep, reads);
            let mut gaps = Vec::new();
            for mine in &run.intervals[..writers as usize] {
                for pair in mine.windows(2) {
                    gaps.push(
                        pair[1].acquired_ns.saturating_sub(pair[0].releasing_ns) as f64 / 1000.0,
                    );
                }
            }
            if let Some(p99) = percentile(&sorted(gaps), 99.0) {
                report.sample("S4", &writer_p99, who(imp), rep, p99);
            }
            Ok(())
        })?;
    }
    if skip.len() < 2 {
        report.row("S4", &read_rate, "pairs/s", Better::Higher);
        report.row("S4", &mix_rate, "sections/s", Better::Higher);
        report.row("S4", &writer_p99, "µs", Better::Lower);
        report.commands.push(commands);
    }
    Ok(())
}

/// A write section must not overlap any other section (reads may overlap each other).
fn check_writers_exclusive(intervals: &[Vec<Interval>], writers: usize) -> Result<()> {
    for (w, mine) in intervals[..writers].iter().enumerate() {
        for a in mine {
            for (o, theirs) in intervals.iter().enumerate() {
                if o == w {
                    continue;
                }
                if let Some(b) = theirs
                    .iter()
                    .find(|b| b.acquired_ns < a.releasing_ns && a.acquired_ns < b.releasing_ns)
                {
                    return Err(Error::Failed(format!(
                        "S4: a write section {a:?} overlaps {b:?}"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// S5: fair lock. A holder, then N waiters queued one at a time (each confirmed by
/// `LLEN redisson_lock_queue:{name}`), alternating between the two agents; then each grant
/// is released at once. Grant order against queue order (inversions), handoff latency
/// (waiter's `end_ns` − previous holder's unlock `start_ns`), commands per handoff.
pub fn s5(env: &Env, report: &mut Report) -> Result<()> {
    let n = env.sizes.s5_waiters;
    let mut commands = CommandCounts {
        label: format!("S5 fair lock, {n} queued waiters in 2 processes (release phase)"),
        ..CommandCounts::default()
    };
    let mut skip = HashSet::new();
    for rep in 0..env.options.reps {
        per_impl(report, "S5", &mut skip, |report, imp| {
            let run = fair_queue(env, &env.agents(imp)[..], n)?;
            commands.add(who(imp), &run.commands, n);
            report.sample(
                "S5",
                "grant-order inversions",
                who(imp),
                rep,
                run.inversions as f64,
            );
            let lat = sorted(run.handoffs_us);
            for (p, label) in [(50.0, "handoff p50"), (99.0, "handoff p99")] {
                if let Some(v) = percentile(&lat, p) {
                    report.sample("S5", label, who(imp), rep, v);
                }
            }
            Ok(())
        })?;
    }
    if skip.len() < 2 {
        let row = report.row("S5", "grant-order inversions", "pairs", Better::Lower);
        if let Some(r) = row.rust {
            row.target = Some(Target {
                text: "0".into(),
                met: r == 0.0,
            });
        }
        report.row("S5", "handoff p50", "µs", Better::Lower);
        report.row("S5", "handoff p99", "µs", Better::Lower);
        let mut row = crate::report::Row {
            scenario: "S7",
            metric: "client-sent commands per fair-lock handoff".into(),
            unit: "commands",
            better: Better::Lower,
            rust: commands.per_op("rust"),
            java: commands.per_op("java"),
            ceiling: Some(3.0),
            bare: None,
            target: None,
        };
        if let Some(r) = row.rust {
            row.target = Some(Target {
                text: "about 3 (≤ 3.5)".into(),
                met: r <= 3.5,
            });
        }
        report.rows.push(row);
        report.commands.push(commands);
    }
    Ok(())
}

struct FairRun {
    inversions: usize,
    handoffs_us: Vec<f64>,
    commands: drive::Commands,
}

fn fair_queue(env: &Env, agents: &[Agent], n: u64) -> Result<FairRun> {
    let name = env.name("s5");
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let req =
        |op: &str, owner: u64| json!({"op": op, "kind": "fair", "name": name, "owner": owner});
    let timeout = Duration::from_secs(30);
    drive::call(&agents[0], req("lock", 200), timeout)?;
    // Queue the waiters one at a time: owner 201 + k on agent k % 2.
    let mut waiting = Vec::new();
    for k in 0..n {
        let agent = &agents[(k % 2) as usize];
        let owner = 201 + k;
        let request = req("lock", owner);
        let id = agent.send(request.clone())?;
        waiting.push((k, agent, owner, id, request));
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(reply) = agent.poll(id) {
                drive::check(agent, &waiting[waiting.len() - 1].4, reply)?;
                return Err(Error::Failed(format!(
                    "S5: waiter {k} got the fair lock while it was held"
                )));
            }
            let len: u64 = redis::cmd("LLEN")
                .arg(&queue)
                .query(&mut *env.con())
                .map_err(|e| format!("redis: {e}"))?;
            if len == k + 1 {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Failed(format!(
                    "S5: {queue} has {len} entries, waited for {}",
                    k + 1
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    drive::reset_stats(&mut env.con())?;
    let unlock = drive::call(&agents[0], req("unlock", 200), timeout)?;
    let mut released_ns = unlock["start_ns"].as_u64().unwrap_or(0);
    let mut grants = Vec::new();
    let mut handoffs_us = Vec::new();
    let deadline = Instant::now() + timeout;
    while !waiting.is_empty() {
        let Some(pos) = waiting.iter().position(|w| w.1.poll(w.3).is_some()) else {
            if Instant::now() > deadline {
                return Err(Error::Failed(format!(
                    "S5: {} waiters never got the fair lock",
                    waiting.len()
                )));
            }
            std::thread::sleep(Duration::from_micros(100));
            continue;
        };
        let (k, agent, owner, id, request) = waiting.remove(pos);
        let reply = drive::check(agent, &request, agent.wait(id, timeout)?)?;
        let granted_ns = reply["end_ns"].as_u64().unwrap_or(0);
        handoffs_us.push(granted_ns.saturating_sub(released_ns) as f64 / 1000.0);
        grants.push((granted_ns, k));
        let unlock = drive::call(agent, req("unlock", owner), timeout)?;
        released_ns = unlock["start_ns"].as_u64().unwrap_or(0);
    }
    let commands = drive::command_stats(&mut env.con())?;
    grants.sort_unstable();
    let order: Vec<u64> = grants.iter().map(|g| g.1).collect();
    let inversions = (0..order.len())
        .map(|i| order[i + 1..].iter().filter(|&&b| b < order[i]).count())
        .sum();
    Ok(FairRun {
        inversions,
        handoffs_us,
        commands,
    })
}

/// S6: memory per waiting task, in this process (Rust) and in each agent (both).
pub fn s6(env: &Env, report: &mut Report) -> Result<()> {
    let s = &env.sizes;
    let parked = memory::in_process(env, &s.s6_in_process)?;
    let connections: Vec<usize> = parked.iter().map(|p| p.connections).collect();
    for p in &parked {
        let label = format!("{} tasks parked in this process", p.waiters);
        let figures: [(&str, &'static str, f64); 5] = [
            ("RSS bytes per waiter", "bytes", p.bytes_per_waiter),
            ("heap bytes per waiter", "bytes", p.heap_per_waiter),
            ("Redis connections", "connections", p.connections as f64),
            ("PUBSUB NUMSUB", "subscribers", p.subscribers as f64),
            (
                "commands per waiter per second while parked",
                "commands/s",
                p.idle_rate,
            ),
        ];
        for (metric, unit, value) in figures {
            let metric = format!("{metric}, {label}");
            report.sample("S6", &metric, "rust", 0, value);
            let row = report.row("S6", &metric, unit, Better::Lower);
            if unit == "connections" {
                row.target = Some(Target {
                    text: "O(1): the same for every count".into(),
                    met: connections.iter().all(|&c| c == connections[0]),
                });
            } else if unit == "subscribers" {
                row.target = Some(Target {
                    text: "1".into(),
                    met: p.subscribers == 1,
                });
            }
        }
    }
    let n = s.s6_in_agent;
    let (bytes, conns, subs, idle) = (
        format!("RSS bytes per waiting owner, {n} owners in one agent"),
        format!("connections added, {n} owners waiting in one agent"),
        format!("PUBSUB NUMSUB, {n} owners waiting in one agent"),
        format!("commands per waiter per second while parked, {n} owners in one agent"),
    );
    for imp in IMPLS {
        let p = memory::in_agent(env, imp, n)?;
        report.sample("S6", &bytes, who(imp), 0, p.bytes_per_waiter);
        report.sample("S6", &conns, who(imp), 0, p.connections as f64);
        report.sample("S6", &subs, who(imp), 0, p.subscribers as f64);
        report.sample("S6", &idle, who(imp), 0, p.idle_rate);
    }
    report.row("S6", &bytes, "bytes", Better::Lower);
    report.row("S6", &conns, "connections", Better::Lower);
    report.row("S6", &subs, "subscribers", Better::Lower);
    report.row("S6", &idle, "commands/s", Better::Lower);
    Ok(())
}

/// S8: semaphore acquire+release pairs (Redisson's `RSemaphore` and this crate's `Semaphore`,
/// through the agents' `bench` of kind `semaphore`): uncontended, each task on a semaphore of
/// its own with 1 permit; contended, all tasks on one semaphore of 1 permit.
pub fn s8(env: &Env, report: &mut Report) -> Result<()> {
    let s = &env.sizes;
    let (tasks, iterations) = s.s2[0];
    let uncontended = format!("semaphore pairs/s, {tasks} tasks on distinct semaphores");
    let p50 = format!("semaphore pair p50, {tasks} tasks on distinct semaphores");
    let p99 = format!("semaphore pair p99, {tasks} tasks on distinct semaphores");
    let contended = format!(
        "semaphore pairs/s, {} tasks on one semaphore of 1 permit",
        s.s3_tasks
    );
    for rep in 0..env.options.reps {
        for imp in IMPLS {
            let agent = &env.agents(imp)[0];
            let name = env.name("s8");
            let run = drive::bench(agent, "semaphore", &name, tasks, iterations, false)?;
            report.sample("S8", &uncontended, who(imp), rep, run.rate());
            report.sample("S8", &p50, who(imp), rep, run.p50_us);
            report.sample("S8", &p99, who(imp), rep, run.p99_us);
            let name = env.name("s8");
            let run = drive::bench(
                agent,
                "semaphore",
                &name,
                s.s3_tasks,
                s.s3_bench_iterations,
                true,
            )?;
            report.sample("S8", &contended, who(imp), rep, run.rate());
        }
    }
    report.row("S8", &uncontended, "pairs/s", Better::Higher);
    report.row("S8", &p50, "µs", Better::Lower);
    report.row("S8", &p99, "µs", Better::Lower);
    report.row("S8", &contended, "pairs/s", Better::Higher);
    Ok(())
}

/// S9: acquire+release pairs of the other lock kinds (`fenced`, `spin`, `nonreentrant`),
/// uncontended, each task on keys of its own, with the S2 8-task size: Redisson's
/// `RFencedLock`, `RSpinLock` and `RNonReentrantLock` against this crate's.
pub fn s9(env: &Env, report: &mut Report) -> Result<()> {
    let s = &env.sizes;
    let (tasks, iterations) = s.s2[0];
    let kinds = ["fenced", "spin", "nonreentrant"];
    let metric = |kind: &str| format!("{kind} lock pairs/s, {tasks} tasks on distinct keys");
    for rep in 0..env.options.reps {
        for kind in kinds {
            for imp in IMPLS {
                let agent = &env.agents(imp)[0];
                let name = env.name("s9");
                let run = drive::bench(agent, kind, &name, tasks, iterations, false)?;
                report.sample("S9", &metric(kind), who(imp), rep, run.rate());
            }
        }
    }
    for kind in kinds {
        report.row("S9", &metric(kind), "pairs/s", Better::Higher);
    }
    Ok(())
}
