//! What a run shares: options, sizes, the private `redis-server`, the four agents (two per
//! implementation, for the cross-process scenarios) and one connection for looking at Redis.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use interop_scenarios::agent::{Agent, Impl};
use interop_scenarios::server::{self, RedisServer};
use redis::Connection;

/// Command-line options.
#[derive(Debug, Clone)]
pub struct Options {
    /// The repository root (scripts are read from `lua/`, agents run from `interop/`).
    pub root: PathBuf,
    /// Seconds instead of minutes; results go under `target/bench/`; targets not judged.
    pub quick: bool,
    /// Repetitions of each measurement per implementation (alternating A B A B …).
    pub reps: usize,
    /// Redisson version of the Java agent.
    pub redisson: String,
    /// Run only these scenarios (`S1`, `S2`, …); all when empty.
    pub only: Vec<String>,
    /// `--server BUILD`: the server build (docs/servers.md), which `REDISSON_SYNC_SERVER`
    /// must select too (`scripts/bench --server` sets both); results under
    /// `target/bench/<build>/`.
    pub server: Option<String>,
    /// `--instructions`: only count instructions per pair under callgrind (no agents), and
    /// fail when the crate's count exceeds the bound (`bench/src/instructions.rs`).
    pub instructions: bool,
}

pub const USAGE: &str = "usage: redisson-sync-bench [--root DIR] [--quick] [--reps N] \
                         [--redisson VERSION] [--only S1,S3,...] [--server BUILD] [--instructions]";

impl Options {
    /// Parses the arguments after the program name.
    pub fn parse(mut args: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut options = Self {
            root: std::env::current_dir().map_err(|e| e.to_string())?,
            quick: false,
            reps: 0,
            redisson: "4.7.0".into(),
            only: Vec::new(),
            server: None,
            instructions: false,
        };
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--root" => options.root = PathBuf::from(value()?),
                "--quick" => options.quick = true,
                "--reps" => {
                    let text = value()?;
                    options.reps = text
                        .parse()
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| format!("--reps: not a positive number: {text:?}"))?;
                }
                "--redisson" => options.redisson = value()?,
                "--only" => {
                    options.only = value()?
                        .split(',')
                        .map(|s| s.trim().to_ascii_uppercase())
                        .filter(|s| !s.is_empty())
                        .collect();
                }
                "--server" => options.server = Some(value()?),
                "--instructions" => options.instructions = true,
                "-h" | "--help" => return Err(String::new()),
                _ => return Err(format!("unknown argument {arg:?}")),
            }
        }
        let selected = testkit::ServerBuild::current().name().to_string();
        if let Some(build) = &options.server
            && *build != selected
            && !(build == "redis-7.0" && selected == "path")
        {
            return Err(format!(
                "--server {build}, but {} selects {selected:?}: run scripts/bench --server {build}, which sets both",
                testkit::SERVER_ENV
            ));
        }
        if options.reps == 0 {
            options.reps = if options.quick { 1 } else { 3 };
        }
        Ok(options)
    }

    /// Whether scenario `id` (e.g. `S3`) is to run.
    pub fn runs(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| s == id)
    }
}

/// How many times S1's and S2's pairs per task a steady cell runs (S0, S10's peer rows): the
/// S2-sized cells last 0.1-0.2 s, and a single scheduling hiccup moved a ratio by 10 %.
const STEADY_SCALE: u64 = 4;

/// The untimed part a steady cell runs first, of `iterations` pairs per task: a fifth. A cell
/// right after a change of size otherwise runs partly in the previous size's state (in one
/// process, one task after eight, the side measured first lost up to 30 %).
pub fn untimed_part(iterations: u64) -> u64 {
    iterations.div_ceil(5)
}

/// Iteration counts: the full run takes minutes, the quick one seconds.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// JVM warm-up: seconds of `bench` (64 tasks, then 1) and `stress` before measuring.
    pub warmup_secs: u64,
    /// redis-benchmark requests at 1 connection, and at many.
    pub ceiling_requests_c1: usize,
    pub ceiling_requests: usize,
    pub ceiling_requests_pipelined: usize,
    /// S1: pairs of the single task.
    pub s1_pairs: u64,
    /// S2: (tasks, iterations per task).
    pub s2: Vec<(u64, u64)>,
    /// S3: tasks of the single-process `bench` on one key, and its iterations per task.
    pub s3_tasks: u64,
    pub s3_bench_iterations: u64,
    /// S3: critical sections per owner in the `stress` runs.
    pub s3_sections: u64,
    /// S4: tasks, and sections per task.
    pub s4_tasks: u64,
    pub s4_sections: u64,
    /// S5: waiters queued on the fair lock.
    pub s5_waiters: u64,
    /// S6: waiters parked in this process, and in each agent.
    pub s6_in_process: Vec<usize>,
    pub s6_in_agent: usize,
    /// S6: how long the commands of parked waiters are counted.
    pub s6_idle_window: std::time::Duration,
    /// The two pair counts of the callgrind runs (`bench/src/instructions.rs`).
    pub instructions: (u64, u64),
    /// S13: locks held in one client, and the watchdog timeout they are held with.
    pub s13_locks: Vec<u64>,
    pub s13_lease: std::time::Duration,
    /// S14: fair-lock waiters in all (across 4 processes).
    pub s14_waiters: Vec<u64>,
    /// S15: names (each contended by 8 processes), and how long each size runs.
    pub s15_names: Vec<u64>,
    pub s15_millis: u64,
}

impl Sizes {
    /// The steady cells (tasks, pairs per task) of the side-by-side rows (S0, S10's peer rows):
    /// one task at S1's count, then S2's sizes, [`STEADY_SCALE`] times their pairs per task.
    pub fn steady_cells(&self) -> Vec<(u64, u64)> {
        std::iter::once((1, self.s1_pairs))
            .chain(self.s2.iter().copied())
            .map(|(tasks, iterations)| (tasks, iterations * STEADY_SCALE))
            .collect()
    }

    pub fn new(quick: bool) -> Self {
        if quick {
            Self {
                warmup_secs: 0,
                ceiling_requests_c1: 300,
                ceiling_requests: 2_000,
                ceiling_requests_pipelined: 5_000,
                s1_pairs: 20,
                s2: vec![(8, 5), (64, 2), (512, 1)],
                s3_tasks: 8,
                s3_bench_iterations: 3,
                s3_sections: 10,
                s4_tasks: 20,
                s4_sections: 2,
                s5_waiters: 3,
                s6_in_process: vec![100],
                s6_in_agent: 20,
                s6_idle_window: std::time::Duration::from_secs(1),
                instructions: (100, 600),
                s13_locks: vec![10, 30, 100],
                s13_lease: std::time::Duration::from_millis(600),
                s14_waiters: vec![4, 8, 16],
                s15_names: vec![1, 2, 4],
                s15_millis: 200,
            }
        } else {
            Self {
                warmup_secs: 10,
                ceiling_requests_c1: 4_000,
                ceiling_requests: 40_000,
                ceiling_requests_pipelined: 150_000,
                s1_pairs: 2_000,
                s2: vec![(8, 1_500), (64, 250), (512, 30)],
                s3_tasks: 8,
                s3_bench_iterations: 150,
                s3_sections: 400,
                s4_tasks: 64,
                s4_sections: 50,
                s5_waiters: 16,
                s6_in_process: vec![1_000, 10_000],
                s6_in_agent: 1_000,
                s6_idle_window: std::time::Duration::from_secs(3),
                instructions: (200, 1_200),
                s13_locks: vec![1_000, 10_000, 100_000],
                s13_lease: std::time::Duration::from_secs(3),
                s14_waiters: vec![100, 1_000, 10_000],
                s15_names: vec![10, 100, 1_000],
                s15_millis: 3_000,
            }
        }
    }
}

/// The run's server, agents and names.
pub struct Env {
    pub options: Options,
    pub sizes: Sizes,
    pub logs: PathBuf,
    pub server: RedisServer,
    pub port: u16,
    /// Two agents of each implementation; the first one does the single-process scenarios.
    pub rust: [Agent; 2],
    pub java: [Agent; 2],
    /// The bare client (S0, and the bare column of S1 and S2).
    pub bare: crate::bare::Bare,
    con: Mutex<Connection>,
    next_name: AtomicU64,
    next_agent: AtomicU64,
}

impl Env {
    /// Starts the server and the four agents (default options: Redisson's 30 s watchdog).
    pub fn start(options: Options) -> Result<Self, String> {
        let logs = options.root.join("target/bench-logs");
        std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
        let server = server::start(&logs)?;
        let url = server.url();
        let port = server.port();
        let con = Mutex::new(server.try_connect()?);
        let start = |imp, n| start_agent(&options, &logs, &url, imp, &format!("{imp}#{n}"));
        let rust = [start(Impl::Rust, 1)?, start(Impl::Rust, 2)?];
        let java = [start(Impl::Java, 1)?, start(Impl::Java, 2)?];
        let bare = crate::bare::Bare::start(&url)?;
        Ok(Self {
            sizes: Sizes::new(options.quick),
            options,
            logs,
            server,
            port,
            rust,
            java,
            bare,
            con,
            next_name: AtomicU64::new(1),
            next_agent: AtomicU64::new(3),
        })
    }

    /// The two long-lived agents of `imp`.
    pub fn agents(&self, imp: Impl) -> &[Agent; 2] {
        match imp {
            Impl::Rust => &self.rust,
            Impl::Java => &self.java,
        }
    }

    /// A fresh agent of `imp` for one measurement (dropping it ends it).
    pub fn start_agent(&self, imp: Impl) -> Result<Agent, String> {
        let n = self.next_agent.fetch_add(1, Ordering::Relaxed);
        start_agent(
            &self.options,
            &self.logs,
            &self.server.url(),
            imp,
            &format!("{imp}#{n}"),
        )
    }

    /// The harness's one connection to Redis (a fresh one would add its own handshake to
    /// the command counts).
    pub fn con(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.con.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A lock name not used before in this run.
    pub fn name(&self, scenario: &str) -> String {
        let n = self.next_name.fetch_add(1, Ordering::Relaxed);
        format!("bench:{scenario}:{n}")
    }
}

fn start_agent(
    options: &Options,
    logs: &std::path::Path,
    url: &str,
    imp: Impl,
    label: &str,
) -> Result<Agent, String> {
    let mut extra = Vec::new();
    if imp == Impl::Java {
        extra = vec!["--redisson".to_string(), options.redisson.clone()];
    }
    let log = logs.join(format!("agent-{}.log", label.replace('#', "-")));
    Agent::start(&options.root, imp, label.to_string(), url, &extra, &log)
}
