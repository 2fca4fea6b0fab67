//! Benchmark harness of redisson-sync: this crate against Redisson (Java) and against the
//! Redis server's own limit, side by side in one run (issue 6; scenarios S1–S7 of
//! BENCHMARKS.md in the project's shared notes).
//!
//! ```text
//! scripts/bench [--quick] [--reps N] [--redisson VERSION] [--only S1,S3,...] [--server BUILD]
//! ```
//!
//! One run:
//! 1. starts its own `redis-server` (no persistence) on a free port of 127.0.0.1 and four
//!    conformance agents (`interop/agent rust|java`, two of each, default options);
//! 2. loads the crate's `lua/lock/acquire.lua` and `lua/lock/unlock.lua` and measures the
//!    ceiling with `redis-benchmark` running them (EVALSHA), unpipelined at the scenario's
//!    concurrency and pipelined (`-c 50 -P 16`), inside every repetition ([`ceiling`]);
//! 3. warms the JVM, then runs every scenario on identical parameters for Rust and Redisson,
//!    alternating A B A B within each repetition ([`scenarios`]), counting the Redis commands
//!    of each run with `CONFIG RESETSTAT` / `INFO commandstats` ([`drive`]);
//! 4. prints the table of medians, ratios Rust/Redisson and Rust/ceiling and targets, and
//!    writes `BENCHMARKS.md`, `bench/handoff.svg` (CDF of contended handoff latency) and
//!    `bench/results.csv` (every repetition) at the repository root ([`report`], [`svg`]).
//!
//! S13–S15 ([`scale`]) are the scale figures of issue 29: many locks held in one client, many
//! fair-lock waiters across 4 processes, many names contended by 8 processes, each at three
//! sizes on the run's server and on a 3+3 cluster; Rust only, their own tables in
//! `BENCHMARKS.md` ("Scale"). The processes are `bench/src/bin/scale-worker.rs`.
//!
//! `--quick` takes seconds (tiny counts, one repetition), judges no target but fails on any
//! protocol error, and writes under `target/bench/` instead; so does a run with `--only` or
//! fewer than 3 repetitions, so the committed results always come from a full run.
//! `scripts/bench` builds the agents and this binary first; the binary compiles nothing.

mod bare;
mod ceiling;
mod cluster;
mod composed;
mod drive;
mod env;
mod handoff;
mod instructions;
mod memory;
mod replicas;
mod report;
mod scale;
mod scenarios;
mod stats;
mod svg;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use env::{Env, Options};
use report::Report;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match Options::parse(args.clone().into_iter()) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("redisson-sync-bench: {message}");
            }
            eprintln!("{}", env::USAGE);
            return ExitCode::from(2);
        }
    };
    if options.instructions {
        return match instructions_only(&options) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("redisson-sync-bench: {message}");
                ExitCode::FAILURE
            }
        };
    }
    let started = Instant::now();
    let env = match Env::start(options) {
        Ok(env) => env,
        Err(message) => {
            eprintln!("redisson-sync-bench: cannot start: {message}");
            return ExitCode::FAILURE;
        }
    };
    match run(&env, &args, started) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("redisson-sync-bench: {message}");
            eprintln!("agent logs: target/bench-logs/");
            ExitCode::FAILURE
        }
    }
}

/// `--instructions`: callgrind's instructions per pair on a server of its own, the table on
/// stdout and in `target/bench/instructions.md`, and the bound checked.
fn instructions_only(options: &Options) -> Result<(), String> {
    if !instructions::available() {
        return Err("--instructions needs valgrind (apt-get install valgrind)".into());
    }
    let logs = options.root.join("target/bench-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let server = interop_scenarios::server::start(&logs)?;
    let n = env::Sizes::new(options.quick).instructions;
    let counts = instructions::measure(&server.url(), n, &options.root.join("target/bench"))?;
    let table = counts.table();
    println!("{table}");
    let ratio = counts.ratio().ok_or("no bare count")?;
    let verdict = format!(
        "crate / bare = {ratio:.3} (bound {:.2}; N = {} and {})",
        instructions::BOUND,
        n.0,
        n.1
    );
    println!("{verdict}");
    write(
        &options.root.join("target/bench/instructions.md"),
        &format!("{table}\n{verdict}\n"),
    )?;
    if ratio > instructions::BOUND {
        return Err(format!(
            "instructions per pair: the crate spends {ratio:.3} x the bare client's, over the bound {:.2} (bench/src/instructions.rs)",
            instructions::BOUND
        ));
    }
    Ok(())
}

type Step = fn(&Env, &mut Report, &ceiling::Scripts) -> drive::Result<()>;

fn run(env: &Env, args: &[String], started: Instant) -> Result<(), String> {
    let info = RunInfo::gather(env, args)?;
    println!(
        "redis {} ({}) | rust agent {} | java agent: Redisson {} | {}",
        env.server.url(),
        info.redis,
        env.rust[0].version,
        env.java[0].version,
        if env.options.quick { "quick" } else { "full" }
    );
    let scripts = ceiling::load(&mut env.con(), &env.options.root)?;
    let mut report = Report {
        judge: !env.options.quick,
        ..Report::default()
    };
    step("warm-up", || scenarios::warm_up(env)).map_err(|e| format!("warm-up: {e}"))?;
    let plan: [(&str, Step); 13] = [
        ("S0", |e, r, _| scenarios::s0(e, r)),
        ("S1", scenarios::s1),
        ("S2", scenarios::s2),
        ("S3", |e, r, _| scenarios::s3(e, r)),
        ("S4", |e, r, _| scenarios::s4(e, r)),
        ("S5", |e, r, _| scenarios::s5(e, r)),
        ("S6", |e, r, _| scenarios::s6(e, r)),
        ("S8", |e, r, _| scenarios::s8(e, r)),
        ("S9", |e, r, _| scenarios::s9(e, r)),
        ("S10", |e, r, _| composed::s10(e, r)),
        ("S11", |e, r, _| cluster::s11(e, r)),
        ("S12", |e, r, _| replicas::s12(e, r)),
        ("S13-S15", |e, r, _| scale::run(e, r)),
    ];
    for (id, f) in plan {
        let scale = ["S13", "S14", "S15"];
        let selected = if id == "S13-S15" {
            scale.iter().any(|s| env.options.runs(s))
        } else {
            env.options.runs(id)
        };
        if !selected {
            continue;
        }
        match step(id, || f(env, &mut report, &scripts)) {
            Ok(()) => {}
            Err(drive::Error::Unsupported(reason)) => {
                report.not_run.push((id.to_owned(), reason));
            }
            Err(e) => {
                println!("\nso far (nothing written):\n{}", report.table());
                return Err(format!("{id}: {e}"));
            }
        }
    }
    let took = started.elapsed().as_secs();

    println!("\n{}", report.table());
    for (id, reason) in &report.not_run {
        println!("{id}: {reason}");
    }
    for note in &report.notes {
        println!("{note}");
    }
    for table in &report.scale {
        println!("\n{table}");
    }
    let out = Outputs::choose(&env.options);
    std::fs::create_dir_all(out.svg.parent().unwrap_or(Path::new(".")))
        .map_err(|e| format!("{}: {e}", out.svg.display()))?;
    let svg = handoff_svg(&report);
    write(&out.svg, &svg)?;
    write(&out.csv, &report.csv())?;
    let previous = std::fs::read_to_string(&out.markdown).unwrap_or_default();
    let markdown = markdown(env, &info, &report, &out, took, &previous);
    write(&out.markdown, &markdown)?;
    println!(
        "\nwrote {}, {}, {} ({took} s)",
        relative(&env.options.root, &out.markdown),
        relative(&env.options.root, &out.svg),
        relative(&env.options.root, &out.csv)
    );
    Ok(())
}

/// Runs one step, printing its name and time.
fn step<T, E>(name: &str, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    let started = Instant::now();
    print!("{name} ...");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let result = f();
    println!(" {:.1} s", started.elapsed().as_secs_f64());
    result
}

/// Where the results go.
struct Outputs {
    markdown: PathBuf,
    svg: PathBuf,
    csv: PathBuf,
    /// The SVG's path as BENCHMARKS.md links it.
    svg_link: String,
}

impl Outputs {
    fn choose(options: &Options) -> Self {
        let root = &options.root;
        if let Some(build) = &options.server {
            let dir = root.join("target/bench").join(build);
            Self {
                markdown: dir.join("BENCHMARKS.md"),
                svg: dir.join("handoff.svg"),
                csv: dir.join("results.csv"),
                svg_link: "handoff.svg".into(),
            }
        } else if options.quick || !options.only.is_empty() || options.reps < 3 {
            let dir = root.join("target/bench");
            Self {
                markdown: dir.join("BENCHMARKS.md"),
                svg: dir.join("handoff.svg"),
                csv: dir.join("results.csv"),
                svg_link: "handoff.svg".into(),
            }
        } else {
            Self {
                markdown: root.join("BENCHMARKS.md"),
                svg: root.join("bench/handoff.svg"),
                csv: root.join("bench/results.csv"),
                svg_link: "bench/handoff.svg".into(),
            }
        }
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// What the run ran on.
struct RunInfo {
    cpu: String,
    cpus: usize,
    kernel: String,
    date: String,
    redis: String,
    java: String,
    command: String,
}

impl RunInfo {
    fn gather(env: &Env, args: &[String]) -> Result<Self, String> {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
            .unwrap_or_else(|| "unknown CPU".into());
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut *env.con())
            .map_err(|e| format!("redis: {e}"))?;
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_owned())
        };
        // Valkey reports its own version beside the Redis version it is compatible with.
        let redis = match (field("valkey_version:"), field("redis_version:")) {
            (Some(v), _) => format!("valkey-server {v}"),
            (None, Some(v)) => format!("redis-server {v}"),
            _ => "?".into(),
        };
        // The command as a user types it: scripts/bench passes --root itself.
        let mut shown = Vec::new();
        let mut skip = false;
        for a in args {
            if skip {
                skip = false;
            } else if a == "--root" {
                skip = true;
            } else {
                shown.push(a.as_str());
            }
        }
        Ok(Self {
            cpu,
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel: output("uname", &["-sr"]),
            date: output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            redis,
            java: output("java", &["-version"])
                .lines()
                .next()
                .unwrap_or("?")
                .to_owned(),
            command: format!("scripts/bench {}", shown.join(" "))
                .trim_end()
                .to_owned(),
        })
    }
}

/// First line of stdout, else of stderr, of a command; `?` when it cannot run.
fn output(program: &str, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(o) => {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("?")
                .trim()
                .to_owned()
        }
        Err(_) => "?".into(),
    }
}

fn handoff_svg(report: &Report) -> String {
    let series: Vec<svg::Series> = [
        ("rust", "Rust (redisson-sync)", "#c0392b"),
        ("java", "Redisson", "#2471a3"),
    ]
    .iter()
    .map(|(who, label, colour)| svg::Series {
        label: (*label).to_owned(),
        colour,
        samples_us: report.handoffs.get(who).cloned().unwrap_or_default(),
    })
    .collect();
    let marker = report.rtt_us.map(|rtt| 2.0 * rtt + 100.0);
    let label = marker.map(|m| format!("target: 2 × RTT + 100 µs = {}", svg::format_us(m)));
    svg::cdf(
        "Contended handoff latency, one lock, 2 processes × 2 owners",
        &series,
        marker.zip(label.as_deref()),
    )
}

/// Markers around the hand-written analysis that a new run keeps.
const ANALYSIS_BEGIN: &str =
    "<!-- analysis:begin (hand-written; kept when the file is regenerated) -->";
const ANALYSIS_END: &str = "<!-- analysis:end -->";

fn markdown(
    env: &Env,
    info: &RunInfo,
    report: &Report,
    out: &Outputs,
    took: u64,
    previous: &str,
) -> String {
    let s = &env.sizes;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Benchmarks: redisson-sync vs Redisson vs the Redis server's own limit\n"
    );
    let _ = writeln!(
        md,
        "Generated by `{}` ({}; {} s). Every figure below was measured in this one run, on one \
         `redis-server`, Rust and Redisson alternating (A B A B …) within each of {} repetition(s); \
         figures are medians over the repetitions. These machines are shared and noisy: compare \
         the ratios, not the absolute times.\n",
        info.command,
        if env.options.quick {
            "quick mode: tiny counts, targets not meaningful"
        } else {
            "full run"
        },
        took,
        env.options.reps
    );
    let _ = writeln!(md, "| | |\n|---|---|");
    let _ = writeln!(md, "| date | {} |", info.date);
    let _ = writeln!(
        md,
        "| machine | {}, {} CPUs (`nproc`), {} |",
        info.cpu, info.cpus, info.kernel
    );
    let _ = writeln!(
        md,
        "| server | {}, loopback, `--save '' --appendonly no` |",
        info.redis
    );
    let _ = writeln!(
        md,
        "| Rust | redisson-sync {} (conformance agent `interop/rust-agent`: pool of 64 connections, 30 s watchdog) |",
        env.rust[0].version
    );
    let _ = writeln!(
        md,
        "| Redisson | {} on {} (agent `interop/java`: connectionPoolSize 64, connectionMinimumIdleSize 8, subscriptionConnectionPoolSize 64, lockWatchdogTimeout 30000, every other setting Redisson's default — e.g. useScriptCache, threads, nettyThreads; JVM `-Xss512k -Xms64m -Xmx512m -XX:+UseG1GC`, one platform thread per owner/task) |",
        env.java[0].version, info.java
    );
    let _ = writeln!(
        md,
        "| ceiling | `redis-benchmark` ({}) against {}, running the crate's `lua/lock/acquire.lua` and `lua/lock/unlock.lua` with EVALSHA |",
        output("redis-benchmark", &["--version"]).trim(),
        info.redis
    );
    let _ = writeln!(
        md,
        "| sizes | S1 {} pairs; S2 (tasks × pairs) {}; S3 bench {} tasks × {}, stress {} sections per owner; S4 {} tasks × {}; S5 {} waiters; S6 {:?} tasks in process, {} owners per agent; JVM warm-up {} s |\n",
        s.s1_pairs,
        s.s2.iter()
            .map(|(t, i)| format!("{t} × {i}"))
            .collect::<Vec<_>>()
            .join(", "),
        s.s3_tasks,
        s.s3_bench_iterations,
        s.s3_sections,
        s.s4_tasks,
        s.s4_sections,
        s.s5_waiters,
        s.s6_in_process,
        s.s6_in_agent,
        s.warmup_secs
    );

    let _ = writeln!(md, "## Results\n");
    let _ = writeln!(
        md,
        "Rust/Redisson below 1 is better for times, bytes and command counts, above 1 for rates. \
         \"Rust ≥ Redisson\" says whether Rust is at least as good as Redisson on that figure. \
         Targets are the issue's, judged on the Rust figure.\n"
    );
    md.push_str(&report.table());
    md.push('\n');
    if !report.not_run.is_empty() {
        let _ = writeln!(md, "Not run:\n");
        for (id, reason) in &report.not_run {
            let _ = writeln!(md, "- {id}: {reason}");
        }
        md.push('\n');
    }
    let missed: Vec<String> = report
        .rows
        .iter()
        .filter_map(|r| {
            let t = r.target.as_ref()?;
            (!t.met).then(|| format!("{} {}: {}", r.scenario, r.metric, t.text))
        })
        .collect();
    let behind: Vec<String> = report
        .rows
        .iter()
        .filter(|r| r.rust_ahead() == Some(false))
        .map(|r| format!("{} {}", r.scenario, r.metric))
        .collect();
    let judged = report.rows.iter().filter(|r| r.target.is_some()).count();
    if !report.judge {
        let _ = writeln!(md, "**Targets:** not judged in quick mode.\n");
    } else {
        let _ = writeln!(
            md,
            "**Targets:** {} of {judged} met{}.  \n**Rust ≥ Redisson:** {}.\n",
            judged - missed.len(),
            if missed.is_empty() {
                String::new()
            } else {
                format!("; missed: {}", missed.join("; "))
            },
            if behind.is_empty() {
                "on every figure".to_owned()
            } else {
                format!("not on {}", behind.join("; "))
            }
        );
    }

    let _ = writeln!(md, "## Contended handoff latency\n");
    let _ = writeln!(
        md,
        "![CDF of handoff latency, Rust vs Redisson]({})\n",
        out.svg_link
    );
    for note in &report.notes {
        let _ = writeln!(md, "- {note}");
    }
    md.push('\n');

    if !report.scale.is_empty() {
        let _ = writeln!(md, "## Scale (S13–S15)\n");
        let _ = writeln!(
            md,
            "Rust only, one repetition, each at three sizes, on the run's server and on a Redis \
             Cluster of 3 masters with one replica each (3+3; the client's default replica sync: \
             `WAIT` after every lock write in a cluster). How the cost grows with the count is \
             read down each table.\n"
        );
        for table in &report.scale {
            let _ = writeln!(md, "{table}");
        }
    }

    let _ = writeln!(md, "## The ceiling: redis-benchmark on the same server\n");
    md.push_str(&report.ceiling_table());
    let _ = writeln!(
        md,
        "\nacquire.lua runs on a fresh random key per request (`-r 1000000`: creates the hash); unlock.lua \
         on one hash whose holder count stays above zero (`hexists`, `hincrby -1`, `pexpire`), about \
         the cost of a full release (`hexists`, `hincrby -1`, `del`, `PUBLISH` to no subscriber), \
         which cannot be repeated on one key. Pair ceiling = 1 / (1/R_acquire + 1/R_release).\n"
    );

    let _ = writeln!(md, "## Redis commands per operation (S7)\n");
    let _ = writeln!(
        md,
        "From `CONFIG RESETSTAT` before and `INFO commandstats` after each run, summed over repetitions, \
         divided by the acquisitions. *Client-sent* commands are what the client sends (EVALSHA, EVAL, \
         SUBSCRIBE, PING, connection setup …); the data commands the scripts run (and the `stress` \
         counter's GET/SET) are counted apart. The harness's own INFO/CONFIG/LLEN are excluded. \
         The few PINGs are keep-alives of idle Redisson connections (every 30 s), counted in \
         whichever run is going.\n"
    );
    md.push_str(&report.commands_table());

    let _ = writeln!(md, "\n## How each figure is measured\n");
    md.push_str(METHOD);
    let _ = writeln!(
        md,
        "\nEvery repetition's figure is in `{}`.\n",
        if out.svg_link.starts_with("bench/") {
            "bench/results.csv"
        } else {
            "results.csv"
        }
    );

    let analysis = previous
        .split_once(ANALYSIS_BEGIN)
        .and_then(|(_, rest)| rest.split_once(ANALYSIS_END))
        .map(|(kept, _)| kept.trim().to_owned())
        .unwrap_or_else(|| "## Analysis\n\n(none yet)".into());
    let _ = writeln!(md, "{ANALYSIS_BEGIN}\n{analysis}\n{ANALYSIS_END}");
    md
}

const METHOD: &str = "\
- **S0** the crate against the bare client: the Rust agent's `bench` op and, in this process, a bare \
redis-rs `MultiplexedConnection` (one, shared by every task, two runtime workers like the agent) sending \
the crate's own `lua/lock/acquire.lua` and `lua/lock/unlock.lua` with EVALSHA (`bench/src/bare.rs`), \
alternating, at 1, 8, 64 and 512 tasks on distinct keys, four times S1's and S2's pairs per task, each \
cell after an untimed fifth of itself: pairs/s and pair p50. The bare client is also \
the `bare` column of S1 and S2, run in the same repetitions. Targets: ≥ 0.9 × bare at 64 and 512 tasks, \
p50 ≤ 1.1 × bare at 1 task.
- **S1** uncontended latency: the agents' `bench` op, 1 task, one key, lock+unlock pairs; p50/p99 per \
pair. Ceiling: redis-benchmark p50 of acquire.lua + p50 of unlock.lua at `-c 1 -P 1`.
- **S2** uncontended throughput: `bench` with 8, 64, 512 tasks, each on its own key; pairs/s = pairs / \
elapsed, each side's cell (Rust, Redisson, bare) right after an untimed fifth of it on the same side (since \
2026-12-06; before, 512-task rows were 0.2 s cells right after the previous size). Ceilings: server-bound = both scripts at `-c 50 -P 16` (the issue's target: ≥ 80 %); unpipelined = \
both scripts at `-c N -P 1`.
- **S3** contended single key: `bench` with all tasks on one key (pairs/s), then `stress` (critical \
section: GET counter, SET counter+1) with recorded sections, in 1 agent × 4 owners and in 2 agents × 2 \
owners. All sections sorted by acquisition time form a chain; a *handoff* is a step to another owner that \
had already held the lock once (so it was waiting), latency = its `acquired_ns` − the previous section's \
`releasing_ns` (unlock sent → acquire returned, on CLOCK_MONOTONIC across processes). Steps where the same \
owner takes the lock again, and each owner's first section, are not handoffs. Target: p50 ≤ 2 × RTT + \
100 µs, RTT = redis-benchmark PING p50 at `-c 1`.
- **S4** read-write lock: `bench` of `read` on one key (100:0), and `stress` with 95 % `read` owners and \
5 % `write` owners on one key (read sections/s; writer cycle = a writer's release → its next acquire).
- **S5** fair lock: a holder, then N waiters queued one by one (alternating between two agents, each \
confirmed by `LLEN redisson_lock_queue:{name}`), then each grant released as soon as it is seen; \
inversions between queue order and grant order, handoff = waiter's `end_ns` − previous unlock's \
`start_ns`, commands counted over the release phase only.
- **S6** memory per waiting task: RSS growth (`VmRSS`) divided by the waiters, once they are parked: \
this crate's, when its client has registered all N waits and the commands have stopped (a waiter on a \
name its client already waits for sends none), before their first re-check (until d1ba2c2 each \
re-check left a hold record entry: about 2 % more heap after 40 s in a quick run); Redisson's, once they have sent 2 N \
commands (try, subscribe, try). In this process: one `redisson_sync::Client`, the holder an explicit \
owner, N tasks in `lock().await`; the `CLIENT LIST` connections opened since before that client (ids, \
not counts: Redisson's pools close idle ones meanwhile) and `PUBSUB NUMSUB` of the lock's channel. In \
each agent: N owners blocked in `lock` (Rust: a Tokio task each; Java: a platform thread each, as \
Redisson's blocking `lock()` needs).
- **S7** commands per operation: see above; uncontended from S2, contended from S3, fair handoff from S5.
- **S8** semaphore: `bench` of kind `semaphore` (acquire 1 permit + release): uncontended with the \
S2 8-task size, each task on a semaphore of its own set to 1 permit; contended with the S3 size, all \
tasks on one semaphore of 1 permit (`RSemaphore` in Redisson, `Semaphore` here).
- **S9** the other lock kinds: `bench` of kinds `fenced`, `spin` and `nonreentrant` with the S2 8-task \
size, each task on keys of its own (Redisson's `RFencedLock`, `RSpinLock`, `RNonReentrantLock`).
- **S10** Rust only, in this process (one client, 8 tasks on keys of their own): `Lock`, `TokenLock` \
(not a Redisson structure) and a `MultiLock` of three `Lock`s, acquire+release pairs/s side by side; \
then `TokenLock` (watchdog lease), `TokenLock` with a 30 s lease (rslock's TTL, no watchdog: the same \
lock, which carries the target) and rslock 0.10 (`SET NX PX`, a 30 s TTL) at 1, 8, 64 and 512 tasks, alternating (the order reversed every other repetition), with four times S1's and S2's pairs per task, each cell after an \
untimed fifth of itself (a cell right after a change of size otherwise ran partly in the previous \
size's state: the side measured first lost up to 30 % at one task).
- **S11** Redis Cluster: a cluster of 3 masters of its own, one Rust and one Java agent with `--mode cluster --pubsub auto` (sharded on Redis 7); `bench` of kind `lock` at the S2 64- and 512-task sizes on distinct keys (spread over the slots), and the S3 size on one key (pair p50 and p99, pairs/s); the scripts each master served (`cmdstat_evalsha` + `cmdstat_eval`) show the spread. The single-server figures of the same sizes are S2's.
- **S12** replica sync: a master with two replicas and three Sentinels of its own, agents in Sentinel mode; the S1 size (one task, lock+unlock pairs) with `WAIT` after each write (Rust `--sync-replicas auto`, Redisson's default `checkLockSyncedSlaves`), and Rust with `--sync-replicas off`; the notes give Rust's cost of `WAIT` as a ratio of the two p50s. Then, with `WAIT`, S2's 64 tasks on distinct keys (pairs/s), where the crate writes the synced calls in flight together before one `WAIT`.
- **S13** many locks held in one client (Rust only, `bench/src/scale.rs`): N locks (1,000, 10,000, \
100,000) taken by one client of this process with a 3 s watchdog timeout (renewal period 1 s, batches of \
100), then held for six periods. Over the first three, from `INFO` of every master: renewal scripts/s \
(`cmdstat_evalsha` + `cmdstat_eval`), renewed locks/s (`cmdstat_pexpire`: `lua/lock/renew.lua` runs one \
`PEXPIRE` per renewed lock) and Redis CPU per renewed lock (`used_cpu_sys` + `used_cpu_user` over renewed \
locks). Over the last three, the renewal lag: `PTTL` of up to 2,000 of the locks polled every period / 8; \
a renewal resets the TTL to the lease, so `now − (lease − PTTL)` dates the last renewal to the \
millisecond, and a renewal's lag is its interval from the previous one minus the period (negative when a \
lock taken between two ticks is renewed at the next one). At the end the guards' `is_lost()` and the keys \
left on the masters (`SCAN`) count the locks still held: all must be.
- **S14** fair-lock waiters across 4 processes (`bench/src/bin/scale-worker.rs fair`): a holder in this \
process, then N waiters (100, 1,000, 10,000, a quarter in each process, each an owner of its own) queued at \
once; once `redisson_lock_queue:{name}` holds N the holder unlocks and every waiter unlocks as soon as it \
is granted. Grant-order inversions = pairs of waiters granted in the opposite order to the queue Redis \
showed (must be 0); handoff = a grant's time − the previous holder's time just before its unlock, across \
processes on `CLOCK_REALTIME`.
- **S15** N names × 8 processes (`scale-worker pairs`): each process runs one task per name (10, 100, \
1,000 names), each taking and releasing its lock in a loop for 3 s, so every lock has 8 contenders in \
8 processes: pairs/s of all processes, and the pair latency p50/p99 (lock call to unlock return).
- S13–S15 run on the run's server and on a 3+3 cluster of their own (3 masters, one replica each; \
default client settings there: `WAIT` for the replica after every lock write, as Redisson in a cluster); \
one repetition, Rust only (Redisson's agents are one process each and are not part of these figures).
";
