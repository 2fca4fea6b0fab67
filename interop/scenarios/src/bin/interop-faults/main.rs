//! The fault suite: 2 Rust and 2 Java (Redisson) agents, two owners each, run `stress` with
//! `keep_going` over every lock kind (and the Rust agents over both semaphores, which
//! Redisson's waiters cannot survive a lost message on) while a nemesis injects faults; then
//! the history checker (`testkit::history`) judges every recorded hold, and the final Redis
//! state is checked for leftovers.
//!
//! ```text
//! scripts/faults [--seed N] [--duration SECS] [--slice SECS] [--redisson VERSION]
//!                [--server valkey-9.1|redis-6.2|redis-7.0]   (another server build)
//! interop-faults --recheck target/faults/seed-N   (judge a recorded run again)
//! ```
//!
//! Every agent reaches Redis through its own fault proxy, so a link fault hits one process.
//! Redis runs with `appendonly yes, appendfsync always` and `DEBUG` enabled. The memory faults
//! (memory full under `noeviction`, an evicting policy at the limit) record the keys the
//! server evicted in `evictions.jsonl`, which the checker judges per key. The kind under
//! load changes every `--slice` seconds (all eight owners then contend on one name); the
//! nemesis picks a fault every 200–800 ms, holds it for its duration and heals it. The same
//! `--seed` gives the same fault schedule. Output: the checker's table, and under
//! `target/faults/seed-N/` the holds, the faults, the report and the agents' logs. The exit
//! status is non-zero on any violation, lost wake-up, leftover key or stuck agent.

mod nemesis;
mod rng;
mod soak;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use interop_scenarios::agent::{Agent, Impl};
use interop_scenarios::server::Connection;
use serde_json::{Value, json};
use testkit::history::{self, Access, Eviction, Fault, FaultClass, Hold, Params, Unanswered};
use testkit::{FaultProxy, RedisCluster, RedisSentinel, RedisServer};

use rng::Rng;

/// The kinds under load, one per slice, in this order.
const KINDS: [&str; 9] = [
    "lock",
    "fair",
    "rw",
    "fenced",
    "spin",
    "nonreentrant",
    "nonreentrant_fair",
    "semaphore",
    "psem",
];
/// Permits of the two semaphores.
const PERMITS: u32 = 2;
/// The agents' watchdog lease (renewed every third) and fair-lock waiter slot.
const WATCHDOG_MS: u64 = 3000;
const FAIR_WAIT_MS: u64 = 5000;
/// Iterations of one `stress` request.
const BATCH: u64 = 5;
/// How long one `stress` request may take before its agent counts as stuck.
const STRESS_TIMEOUT: Duration = Duration::from_secs(180);
/// Owners per agent.
const OWNERS: u64 = 2;

struct Options {
    root: PathBuf,
    /// Judge the run recorded in this directory again instead of running one.
    recheck: Option<PathBuf>,
    /// Run on a Redis Cluster (3 masters, 3 replicas) instead of one server.
    cluster: bool,
    /// Run behind Redis Sentinel (a master, two replicas, three Sentinels).
    sentinel: bool,
    seed: u64,
    duration: Duration,
    slice: Duration,
    redisson: String,
    /// `--server BUILD`: the server build, which `REDISSON_SYNC_SERVER` must select too
    /// (`scripts/faults --server` sets both); output under `target/faults/<build>-...`.
    server: Option<String>,
    /// `--soak`: the soak (`scripts/soak`, module `soak`): one server, a fault every 5-15 s,
    /// each owner pausing 20 ms between batches, sampled every `sample`; output under
    /// `target/soak/`.
    soak: bool,
    sample: Duration,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut options = Self {
            root: std::env::current_dir().map_err(|e| e.to_string())?,
            recheck: None,
            cluster: false,
            sentinel: false,
            seed: 1,
            duration: Duration::from_secs(120),
            slice: Duration::from_secs(8),
            redisson: "4.7.0".into(),
            server: None,
            soak: false,
            sample: Duration::from_secs(60),
        };
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--root" => options.root = PathBuf::from(value()?),
                "--recheck" => options.recheck = Some(PathBuf::from(value()?)),
                "--mode" => {
                    (options.cluster, options.sentinel) = match value()?.as_str() {
                        "cluster" => (true, false),
                        "sentinel" => (false, true),
                        "single" => (false, false),
                        other => {
                            return Err(format!("--mode single|cluster|sentinel, not {other:?}"));
                        }
                    }
                }
                "--seed" => options.seed = number(&arg, &value()?)?,
                "--duration" => options.duration = Duration::from_secs(number(&arg, &value()?)?),
                "--slice" => options.slice = Duration::from_secs(number(&arg, &value()?)?),
                "--redisson" => options.redisson = value()?,
                "--server" => options.server = Some(value()?),
                "--soak" => options.soak = true,
                "--sample" => options.sample = Duration::from_secs(number(&arg, &value()?)?),
                _ => return Err(format!("unknown argument {arg:?}")),
            }
        }
        let selected = testkit::ServerBuild::current().name().to_string();
        if let Some(build) = &options.server
            && *build != selected
            && !(build == "redis-7.0" && selected == "path")
        {
            return Err(format!(
                "--server {build}, but {} selects {selected:?}: run scripts/faults --server {build}, which sets both",
                testkit::SERVER_ENV
            ));
        }
        if options.duration.is_zero() || options.slice.is_zero() || options.sample.is_zero() {
            return Err("--duration, --slice and --sample must be at least 1".into());
        }
        if options.soak && (options.cluster || options.sentinel) {
            return Err("--soak runs on one server: leave out --mode".into());
        }
        Ok(options)
    }
}

fn number(arg: &str, text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("{arg}: not a non-negative integer: {text:?}"))
}

fn main() -> ExitCode {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("interop-faults: {message}");
            eprintln!(
                "usage: interop-faults [--root DIR] [--seed N] [--duration SECS] [--slice SECS] \
                 [--redisson VERSION] [--mode single|cluster|sentinel] [--server BUILD] \
                 [--soak [--sample SECS]] | --recheck DIR"
            );
            return ExitCode::from(2);
        }
    };
    let outcome = match &options.recheck {
        Some(dir) => recheck(dir),
        None => run(&options),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("interop-faults: {message}");
            ExitCode::FAILURE
        }
    }
}

/// CLOCK_MONOTONIC in ns, the clock of the agents' records.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always available.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec.unsigned_abs() * 1_000_000_000 + ts.tv_nsec.unsigned_abs()
}

/// Sets each semaphore's permits if it has none (after a start or a wipe).
pub fn reseed(agent: &Agent, semaphores: &[(&'static str, String, u32)]) -> Result<(), String> {
    for (op, name, permits) in semaphores {
        agent.call(json!({"op": op, "name": name, "permits": permits}))?;
    }
    Ok(())
}

/// What one worker (one owner of one agent) saw.
#[derive(Default)]
struct WorkerLog {
    holds: Vec<Hold>,
    requests: u64,
    errors: u64,
    samples: Vec<String>,
    /// The requests that counted errors, for `errors.jsonl` and the report's breakdown.
    errored: Vec<Errored>,
    /// A request that failed outright or never answered.
    failures: Vec<String>,
}

/// One `stress` request that counted errors (each retried within it, `keep_going`).
struct Errored {
    agent: String,
    /// The owner (logical thread) that sent it; 0 when unknown (an older `errors.jsonl`).
    owner: u64,
    kind: String,
    /// When the driver sent it and had its reply (CLOCK_MONOTONIC).
    start_ns: u64,
    end_ns: u64,
    errors: u64,
    /// Up to five distinct messages.
    samples: Vec<String>,
}

/// The stress requests whose errors may have come from an acquire (any error but one of the
/// counter the section increments), as failed acquires of their lock for the history checker:
/// Redis may have granted what the agent never read. A request is a batch of sections, so its
/// whole span counts.
fn unanswered(errored: &[&Errored], holds: &[Hold]) -> Vec<Unanswered> {
    let names: BTreeMap<&str, &str> = holds
        .iter()
        .map(|h| (h.kind.as_str(), h.name.as_str()))
        .collect();
    errored
        .iter()
        .filter(|e| e.samples.iter().any(|s| !s.starts_with("counter \"")))
        .filter_map(|e| {
            Some(Unanswered {
                name: (*names.get(e.kind.as_str())?).to_owned(),
                holder: (e.owner > 0).then(|| (e.agent.clone(), e.owner)),
                start_ns: e.start_ns,
                end_ns: e.end_ns,
            })
        })
        .collect()
}

impl Errored {
    fn from_json(v: &Value) -> Self {
        Self {
            agent: v["agent"].as_str().unwrap_or_default().to_owned(),
            owner: v["owner"].as_u64().unwrap_or(0),
            kind: v["kind"].as_str().unwrap_or_default().to_owned(),
            start_ns: v["start_ns"].as_u64().unwrap_or(0),
            end_ns: v["end_ns"].as_u64().unwrap_or(0),
            errors: v["errors"].as_u64().unwrap_or(0),
            samples: v["samples"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect(),
        }
    }

    fn json(&self) -> Value {
        json!({
            "agent": self.agent,
            "owner": self.owner,
            "kind": self.kind,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "errors": self.errors,
            "samples": self.samples,
        })
    }

    /// The classes of the faults that overlapped the request, `+`-joined in the order of
    /// [`FaultClass::ALL`] (`none` if no fault did).
    fn cause(&self, faults: &[Fault]) -> String {
        let classes: Vec<&str> = FaultClass::ALL
            .iter()
            .filter(|class| {
                faults.iter().any(|f| {
                    f.class == **class && f.start_ns <= self.end_ns && self.start_ns <= f.end_ns
                })
            })
            .map(|class| class.name())
            .collect();
        if classes.is_empty() {
            "none".into()
        } else {
            classes.join("+")
        }
    }
}

/// A message with its client UUIDs replaced by `<uuid>`, its hexadecimal words with a digit
/// (script SHAs, Java identity hashes as in `CompletableFuture@1b2c3d`, netty's `0x…` channel
/// ids) and its other numbers (ports, ids, durations) by `N`, so that messages of one cause
/// count together.
fn message_shape(message: &str) -> String {
    let mut shape = String::new();
    let mut rest = message;
    while let Some(c) = rest.chars().next() {
        let token_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        if token_len == 0 {
            shape.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let token = &rest[..token_len];
        if is_uuid(token) {
            shape.push_str("<uuid>");
        } else if is_hex_word(token) {
            shape.push('N');
        } else {
            let mut in_number = false;
            for c in token.chars() {
                if c.is_ascii_digit() {
                    if !in_number {
                        shape.push('N');
                    }
                } else {
                    shape.push(c);
                }
                in_number = c.is_ascii_digit();
            }
        }
        rest = &rest[token_len..];
    }
    shape
}

/// Hex digits only (after an optional `0x`), at least one of them a letter and one a digit:
/// an identifier printed in hexadecimal, not a word.
fn is_hex_word(token: &str) -> bool {
    let digits = token.strip_prefix("0x").unwrap_or(token);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_hexdigit())
        && digits.bytes().any(|b| b.is_ascii_digit())
        && digits.bytes().any(|b| b.is_ascii_alphabetic())
}

/// `8-4-4-4-12` hex digits.
fn is_uuid(token: &str) -> bool {
    let groups: Vec<&str> = token.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The report's breakdown of one agent's retried errors: by the faults their requests
/// overlapped, by kind, and by the shape of their messages (a request's errors count under
/// each distinct message it quoted, so the shapes may add up to more).
fn error_breakdown(errored: &[&Errored], faults: &[Fault]) -> String {
    let mut by_cause: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    let mut by_shape: BTreeMap<String, u64> = BTreeMap::new();
    for e in errored {
        let cause = by_cause.entry(e.cause(faults)).or_default();
        cause.0 += e.errors;
        cause.1 += 1;
        *by_kind.entry(&e.kind).or_default() += e.errors;
        for sample in &e.samples {
            *by_shape.entry(message_shape(sample)).or_default() += e.errors;
        }
    }
    let mut text = String::new();
    let causes: Vec<String> = by_cause
        .iter()
        .map(|(cause, (errors, requests))| format!("{cause} {errors} ({requests} requests)"))
        .collect();
    let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let _ = writeln!(text, "    during: {}", causes.join(", "));
    let _ = writeln!(text, "    by kind: {}", kinds.join(", "));
    for (shape, n) in &by_shape {
        let _ = writeln!(text, "    {n:>5}  {shape}");
    }
    text
}

/// The checker's parameters for the agents' settings.
fn params() -> Params {
    Params {
        lease_ns: WATCHDOG_MS * 1_000_000,
        lease_loss_ns: WATCHDOG_MS * 1_000_000 / 2,
        rust_wakeup_ns: 2_500_000_000,
        java_wakeup_ns: (WATCHDOG_MS + 1500) * 1_000_000,
        fair_wait_ns: FAIR_WAIT_MS * 1_000_000,
    }
}

/// Judges a recorded run again (`holds.jsonl`, `faults.jsonl` and, if there is one,
/// `evictions.jsonl` of its directory).
fn recheck(dir: &Path) -> Result<bool, String> {
    let read = |name: &str| -> Result<Vec<Value>, String> {
        let path = dir.join(name);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| format!("{}: {e}", path.display())))
            .collect()
    };
    let holds: Vec<Hold> = read("holds.jsonl")?
        .iter()
        .map(|h| {
            let kind = h["kind"].as_str().unwrap_or_default().to_owned();
            let process = h["process"].as_str().unwrap_or_default().to_owned();
            Hold {
                crate_side: process.starts_with("rust"),
                process,
                owner: h["owner"].as_u64().unwrap_or(0),
                access: access(&kind),
                name: h["name"].as_str().unwrap_or_default().to_owned(),
                requested_ns: h["requested_ns"].as_u64().unwrap_or(0),
                acquired_ns: h["acquired_ns"].as_u64().unwrap_or(0),
                releasing_ns: h["releasing_ns"].as_u64().unwrap_or(0),
                token: h["token"].as_u64(),
                lost_ns: h["lost_ns"].as_u64(),
                released_ok: h["released_ok"] == true,
                kind,
            }
        })
        .collect();
    let faults: Vec<Fault> = read("faults.jsonl")?
        .iter()
        .map(|f| {
            Ok(Fault {
                class: FaultClass::from_name(f["class"].as_str().unwrap_or_default())
                    .ok_or_else(|| format!("unknown fault class in {f}"))?,
                target: f["target"].as_str().map(str::to_owned),
                start_ns: f["start_ns"].as_u64().unwrap_or(0),
                end_ns: f["end_ns"].as_u64().unwrap_or(0),
            })
        })
        .collect::<Result<_, String>>()?;
    let evictions: Vec<Eviction> = if dir.join("evictions.jsonl").exists() {
        read("evictions.jsonl")?
            .iter()
            .map(|e| Eviction {
                key: e["key"].as_str().unwrap_or_default().to_owned(),
                at_ns: e["at_ns"].as_u64().unwrap_or(0),
            })
            .collect()
    } else {
        Vec::new()
    };
    let errored: Vec<Errored> = if dir.join("errors.jsonl").exists() {
        read("errors.jsonl")?
            .iter()
            .map(Errored::from_json)
            .collect()
    } else {
        Vec::new()
    };
    let errored: Vec<&Errored> = errored.iter().collect();
    let unanswered = unanswered(&errored, &holds);
    let report = history::check_all(&holds, &faults, &evictions, &unanswered, &params());
    println!(
        "{}: {} holds, {} faults, judged again",
        dir.display(),
        holds.len(),
        faults.len()
    );
    print!("{}", report.table());
    Ok(report.is_clean())
}

fn access(kind: &str) -> Access {
    match kind {
        "read" => Access::Read,
        "semaphore" | "psem" => Access::Permits(PERMITS),
        _ => Access::Exclusive,
    }
}

fn run(options: &Options) -> Result<bool, String> {
    let out = options
        .root
        .join(if options.soak {
            "target/soak"
        } else {
            "target/faults"
        })
        .join(format!(
            "{}{}seed-{}",
            options
                .server
                .as_ref()
                .map(|b| format!("{b}-"))
                .unwrap_or_default(),
            if options.cluster {
                "cluster-"
            } else if options.sentinel {
                "sentinel-"
            } else {
                ""
            },
            options.seed
        ));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    // One server behind a proxy per agent, or a cluster the agents reach directly.
    let mut server = None;
    let mut cluster = None;
    let mut sentinel = None;
    let mut proxies = Vec::new();
    if options.cluster {
        cluster = Some(RedisCluster::builder().masters(3).replicas(1).try_start()?);
    } else if options.sentinel {
        sentinel = Some(RedisSentinel::try_start()?);
    } else {
        server = Some(
            RedisServer::builder()
                .dir_in(&out)
                .args(&["--appendonly", "yes", "--appendfsync", "always"])
                .try_start()?,
        );
    }
    let redis_url = match (&server, &cluster, &sentinel) {
        (Some(server), _, _) => server.url(),
        (_, Some(cluster), _) => cluster.seed_urls()[0].clone(),
        (_, _, Some(setup)) => setup.sentinel_urls()[0].clone(),
        _ => unreachable!("a server, a cluster or Sentinel"),
    };
    let mut agents = Vec::new();
    for (i, imp) in [Impl::Rust, Impl::Rust, Impl::Java, Impl::Java]
        .into_iter()
        .enumerate()
    {
        let n = i % 2 + 1;
        let mut extra = vec![
            "--watchdog-ms".to_string(),
            WATCHDOG_MS.to_string(),
            "--fair-wait-ms".into(),
            FAIR_WAIT_MS.to_string(),
        ];
        if imp == Impl::Java {
            extra.extend(["--redisson".to_string(), options.redisson.clone()]);
        }
        let url = match &server {
            Some(server) => {
                let proxy = FaultProxy::start(server.addr());
                let url = proxy.url();
                proxies.push(proxy);
                url
            }
            None if options.sentinel => {
                let setup = sentinel.as_ref().expect("Sentinel");
                extra.extend([
                    "--mode".into(),
                    "sentinel".into(),
                    "--master".into(),
                    setup.master_name().to_string(),
                ]);
                // Each agent asks its own Sentinel.
                let urls = setup.sentinel_urls();
                urls[i % urls.len()].clone()
            }
            None => {
                extra.extend([
                    "--mode".into(),
                    "cluster".into(),
                    "--pubsub".into(),
                    "auto".into(),
                ]);
                redis_url.clone()
            }
        };
        let log = out.join(format!("agent-{imp}-{n}.log"));
        agents.push(Agent::start(
            &options.root,
            imp,
            format!("{imp}#{n}"),
            &url,
            &extra,
            &log,
        )?);
    }
    let prefix = format!("faults:{}", options.seed);
    let name_of = |kind: &str| format!("{prefix}:{kind}");
    let semaphores = vec![
        ("sem_try_set", name_of("semaphore"), PERMITS),
        ("psem_try_set", name_of("psem"), PERMITS),
    ];
    reseed(&agents[0], &semaphores)?;
    println!(
        "{}: seed {} | {} s, a kind every {} s | redis {} | rust agent {} | \
         java agent: Redisson {} | watchdog {WATCHDOG_MS} ms, fair wait {FAIR_WAIT_MS} ms | \
         output in {}",
        if options.soak {
            "soak (a fault every 5-15 s, sampled every minute or --sample)"
        } else {
            "fault suite"
        },
        options.seed,
        options.duration.as_secs(),
        options.slice.as_secs(),
        if options.cluster {
            format!("cluster of 3 masters and 3 replicas, seed {redis_url}, pub/sub auto")
        } else if options.sentinel {
            format!("a master, 2 replicas and 3 Sentinels ({redis_url}, ...), replica sync on")
        } else {
            format!("{redis_url} (AOF always)")
        },
        agents[0].version,
        agents[2].version,
        out.strip_prefix(&options.root).unwrap_or(&out).display()
    );

    let started = Instant::now();
    let started_ns = now_ns();
    let deadline = started + options.duration;
    let server = server.map(Mutex::new);
    let cluster = cluster.map(Mutex::new);
    let sentinel = sentinel.map(Mutex::new);
    let stop = AtomicBool::new(false);
    let fault_log =
        Mutex::new(std::fs::File::create(out.join("faults.jsonl")).map_err(|e| e.to_string())?);
    let eviction_log =
        Mutex::new(std::fs::File::create(out.join("evictions.jsonl")).map_err(|e| e.to_string())?);
    // Whether one of `families` is under load at any time within `[at, at + within]`, by the
    // workers' schedule (`work`), give or take 5 s (a batch).
    let families_due = |at: Instant, within: Duration, families: &[&str]| {
        let margin = Duration::from_secs(5);
        let from = at.saturating_duration_since(started).saturating_sub(margin);
        let to = at.saturating_duration_since(started) + within + margin;
        (slot_at(from, options.slice)..=slot_at(to, options.slice))
            .any(|slot| families.contains(&family_of(slot)))
    };
    let sentinel_url = sentinel
        .as_ref()
        .map(|setup| setup.lock().unwrap().sentinel_urls()[0].clone());
    let (faults, evictions, logs, sentinel_events, samples) = thread::scope(|scope| {
        let sentinel_events = sentinel_url.as_deref().map(|url| {
            let stop = &stop;
            scope.spawn(move || nemesis::watch_sentinel(url, stop))
        });
        let nemesis = scope.spawn(|| {
            let topology = match (&server, &cluster, &sentinel) {
                (Some(server), _, _) => nemesis::Topology::Single {
                    server,
                    proxies: &proxies,
                },
                (_, Some(cluster), _) => nemesis::Topology::Cluster(cluster),
                (_, _, Some(setup)) => nemesis::Topology::Sentinel(setup),
                _ => unreachable!("a server, a cluster or Sentinel"),
            };
            let targets = nemesis::Targets {
                topology,
                agents: &agents,
                semaphores: &semaphores,
                lease: Duration::from_millis(WATCHDOG_MS),
                families_due: &families_due,
            };
            nemesis::run(
                &targets,
                options.seed,
                deadline,
                &stop,
                if options.soak {
                    (5000, 15000)
                } else {
                    (200, 800)
                },
                &mut |fault, evicted| {
                    let line = fault_json(fault);
                    let _ = writeln!(fault_log.lock().unwrap(), "{line}");
                    let mut log = eviction_log.lock().unwrap();
                    for e in evicted {
                        let _ = writeln!(log, "{}", json!({"key": e.key, "at_ns": e.at_ns}));
                    }
                },
            )
        });
        let workers: Vec<_> = (0..agents.len())
            .flat_map(|a| (1..=OWNERS).map(move |owner| (a, owner)))
            .map(|(a, owner)| {
                let agent = &agents[a];
                let name_of = &name_of;
                let plan = Plan {
                    seed: options.seed,
                    started,
                    slice: options.slice,
                    deadline,
                    sentinel: options.sentinel,
                    pace: if options.soak {
                        Duration::from_millis(20)
                    } else {
                        Duration::ZERO
                    },
                };
                scope.spawn(move || work(agent, owner, plan, name_of))
            })
            .collect();
        let sampler = match (&server, options.soak) {
            (Some(server), true) => {
                let (agents, proxies, stop) = (&agents, &proxies, &stop);
                let every = options.sample;
                Some(scope.spawn(move || {
                    soak::sampler(agents, proxies, server, every, started, deadline, stop)
                }))
            }
            _ => None,
        };
        let (faults, evictions) = nemesis.join().expect("nemesis panicked");
        let logs: Vec<WorkerLog> = workers
            .into_iter()
            .map(|w| w.join().expect("worker panicked"))
            .collect();
        stop.store(true, Ordering::Relaxed);
        let samples = sampler.map(|s| s.join().expect("sampler panicked"));
        let sentinel_events =
            sentinel_events.map(|w| w.join().expect("Sentinel event watcher panicked"));
        (faults, evictions, logs, sentinel_events, samples)
    });
    let ran = started.elapsed();
    // The soak: the Rust clients settle once the load ends (background releases,
    // unsubscriptions); what they still hold then is judged.
    let settled = samples
        .as_ref()
        .map(|_| soak::settle(&agents, Duration::from_secs(20)));

    let holds: Vec<Hold> = logs.iter().flat_map(|l| l.holds.iter().cloned()).collect();
    write_holds(&out.join("holds.jsonl"), &holds)?;
    let errored: Vec<&Errored> = logs.iter().flat_map(|l| &l.errored).collect();
    let unanswered = unanswered(&errored, &holds);
    let report = history::check_all(&holds, &faults, &evictions, &unanswered, &params());
    // A semaphore wiped or evicted was set again: its permits cannot be judged.
    let wiped = faults.iter().any(|f| f.class.may_lose_data())
        || evictions
            .iter()
            .any(|e| semaphores.iter().any(|(_, name, _)| e.hits(name)));
    let con = match (server.map(|s| s.into_inner().unwrap()), &cluster) {
        (Some(server), _) => {
            let con = server.try_connect()?;
            (Some(server), Connection::Single(con))
        }
        (None, None) if sentinel.is_some() => {
            let setup = sentinel.as_ref().expect("Sentinel").lock().unwrap();
            let addr = setup.current_master_addr()?;
            let con = setup
                .server_at(addr)
                .ok_or_else(|| format!("no data node at {addr}"))?
                .try_connect()?;
            (None, Connection::Single(con))
        }
        (None, Some(cluster)) => {
            let seeds = cluster.lock().unwrap().seed_urls();
            let con = redis::cluster::ClusterClient::new(seeds.clone())
                .and_then(|c| c.get_connection())
                .map_err(|e| format!("cluster connection: {e}"))?;
            (None, Connection::Cluster(Box::new(con), seeds))
        }
        _ => unreachable!("a server or a cluster"),
    };
    let (_server, mut con) = con;
    let leftovers = final_state(&mut con, &prefix, &semaphores, wiped, &agents)?;

    let mut text = String::new();
    let _ = writeln!(
        text,
        "ran {:.1} s; {} holds recorded; {} faults injected",
        ran.as_secs_f64(),
        holds.len(),
        faults.len()
    );
    text.push_str(&report.table());
    let mut errored_lines = String::new();
    for (a, agent) in agents.iter().enumerate() {
        let mine = &logs[a * OWNERS as usize..(a + 1) * OWNERS as usize];
        let requests: u64 = mine.iter().map(|l| l.requests).sum();
        let errors: u64 = mine.iter().map(|l| l.errors).sum();
        let samples: Vec<&String> = mine.iter().flat_map(|l| &l.samples).take(3).collect();
        let _ = writeln!(
            text,
            "{}: {} stress requests, {} errors within them (retried){}",
            agent.label,
            requests,
            errors,
            if samples.is_empty() {
                String::new()
            } else {
                format!(", e.g. {samples:?}")
            }
        );
        let errored: Vec<&Errored> = mine.iter().flat_map(|l| &l.errored).collect();
        if !errored.is_empty() {
            text.push_str(&error_breakdown(&errored, &faults));
        }
        for e in errored {
            let _ = writeln!(errored_lines, "{}", e.json());
        }
    }
    std::fs::write(out.join("errors.jsonl"), errored_lines).map_err(|e| e.to_string())?;
    let mut failures: Vec<String> = logs.iter().flat_map(|l| l.failures.clone()).collect();
    for f in &failures {
        let _ = writeln!(text, "FAILED REQUEST {f}");
    }
    if let Some(events) = sentinel_events {
        if let Ok(events) = &events {
            let mut lines = format!(
                "# seconds after the start (CLOCK_MONOTONIC {started_ns} ns), channel, message\n"
            );
            lines += &events
                .iter()
                .map(|e| {
                    format!(
                        "{:.3} {} {}\n",
                        e.at_ns.saturating_sub(started_ns) as f64 / 1e9,
                        e.channel,
                        e.text
                    )
                })
                .collect::<String>();
            std::fs::write(out.join("sentinel-events.log"), lines).map_err(|e| e.to_string())?;
        }
        let switches = events.map(|events| {
            events
                .iter()
                .filter(|e| e.channel == "+switch-master")
                .map(|e| e.at_ns)
                .collect()
        });
        let unrecorded = unrecorded_failovers(switches, &faults, started_ns);
        for u in &unrecorded {
            let _ = writeln!(text, "UNRECORDED FAILOVER {u}");
        }
        failures.extend(unrecorded);
    }
    let _ = writeln!(
        text,
        "leftovers after the run: {}",
        if leftovers.is_empty() {
            "none".to_string()
        } else {
            leftovers.join("; ")
        }
    );
    if let (Some(samples), Some(settled)) = (&samples, &settled) {
        let labels: Vec<String> = agents.iter().map(|a| a.label.clone()).collect();
        let title = format!(
            "soak: seed {}, {:.0} min, a fault every 5-15 s, sampled every {} s",
            options.seed,
            ran.as_secs_f64() / 60.0,
            options.sample.as_secs()
        );
        let (grown, lines) = soak::finish(&out, &labels, samples, &holds, settled, &title)?;
        text.push_str(&lines);
        for g in &grown {
            let _ = writeln!(text, "GROWTH {g}");
        }
        failures.extend(grown);
    }
    let clean = report.is_clean() && leftovers.is_empty() && failures.is_empty();
    let _ = writeln!(
        text,
        "{}",
        if clean {
            "PASS: nothing unexplained"
        } else {
            "FAIL"
        }
    );
    print!("{text}");
    std::fs::write(out.join("report.txt"), &text).map_err(|e| e.to_string())?;
    drop(agents);
    Ok(clean)
}

/// The Sentinels' master switches (`+switch-master`, as seen by one Sentinel) that no recorded
/// failover covers, described; or why they could not be watched.
fn unrecorded_failovers(
    switches: Result<Vec<u64>, String>,
    faults: &[Fault],
    started_ns: u64,
) -> Vec<String> {
    let switches = match switches {
        Ok(switches) => switches,
        Err(e) => return vec![format!("the switches could not be watched: {e}")],
    };
    switches
        .into_iter()
        .filter(|&t| {
            !faults.iter().any(|f| {
                matches!(
                    f.class,
                    FaultClass::SentinelFailover | FaultClass::AutoFailover
                ) && f.start_ns <= t
                    && t <= f.end_ns
            })
        })
        .map(|t| {
            format!(
                "the Sentinels switched master {:.2} s into the run, outside every recorded failover",
                t.saturating_sub(started_ns) as f64 / 1e9
            )
        })
        .collect()
}

/// One owner's loop: `stress` batches of the current slice's kind until the deadline.
/// When and how the workers load the kinds.
#[derive(Clone, Copy)]
struct Plan {
    seed: u64,
    started: Instant,
    slice: Duration,
    deadline: Instant,
    /// Behind Sentinel (no semaphore kinds).
    sentinel: bool,
    /// A pause between batches (the soak's lower load).
    pace: Duration,
}

/// The workers' schedule: the slice of the run `elapsed` falls in...
fn slot_at(elapsed: Duration, slice: Duration) -> u128 {
    elapsed.as_millis() / slice.as_millis().max(1)
}

/// ...and the family of kinds every worker loads in it: one per slice, in [`KINDS`] order,
/// round and round. The nemesis reads the same schedule (`families_due`).
fn family_of(slot: u128) -> &'static str {
    KINDS[(slot % KINDS.len() as u128) as usize]
}

fn work(agent: &Agent, owner: u64, plan: Plan, name_of: &dyn Fn(&str) -> String) -> WorkerLog {
    let Plan {
        seed,
        started,
        slice,
        deadline,
        sentinel,
        pace,
    } = plan;
    let mut log = WorkerLog::default();
    let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(owner) ^ hash(&agent.label));
    let crate_side = agent.label.starts_with("rust");
    // Bounded: a batch takes at least a millisecond.
    for batch in 0..(deadline - started).as_millis() as u64 {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let family = family_of(slot_at(now - started, slice));
        if (!crate_side || sentinel) && matches!(family, "semaphore" | "psem") {
            // Redisson's untimed semaphore acquires (RSemaphore and RPermitExpirableSemaphore)
            // wait for a release message without ever looking again: after a lost message
            // they wait for good with permits free (seen: two Java psem acquires still
            // waiting 180 s later; see RELIABILITY.md). Only the crate's agents load them.
            // Behind Sentinel none do: a failover loses what the old master took after the
            // promotion, and a lost release is a permit gone for good (the counting semaphore
            // has no lease, the suite's expirable permits none either): the kind starves.
            thread::sleep(Duration::from_millis(100));
            continue;
        }
        let kind = match family {
            "rw" if (batch + owner).is_multiple_of(2) => "write",
            "rw" => "read",
            other => other,
        };
        if !pace.is_zero() {
            thread::sleep(pace);
        }
        let name = name_of(family);
        let request = json!({
            "op": "stress",
            "kind": kind,
            "name": name,
            "owner": owner,
            "iterations": BATCH,
            "counter": name_of(&format!("counter:{family}")),
            "hold_us": rng.range(200, 3000),
            "keep_going": true,
        });
        log.requests += 1;
        let start_ns = now_ns();
        let reply = agent
            .send(request)
            .and_then(|id| agent.wait(id, STRESS_TIMEOUT));
        let end_ns = now_ns();
        let reply = match reply {
            Ok(reply) if reply["ok"] == true => reply,
            Ok(reply) => {
                log.failures
                    .push(format!("{} {kind}: {reply}", agent.label));
                continue;
            }
            Err(e) => {
                log.failures.push(format!("{} {kind}: {e}", agent.label));
                break;
            }
        };
        let errors = reply["errors"].as_u64().unwrap_or(0);
        log.errors += errors;
        let samples: Vec<String> = reply["error_samples"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| s.as_str().unwrap_or_default().to_owned())
            .collect();
        for sample in &samples {
            if log.samples.len() < 3 {
                log.samples.push(sample.clone());
            }
        }
        if errors > 0 {
            log.errored.push(Errored {
                agent: agent.label.clone(),
                owner,
                kind: kind.to_owned(),
                start_ns,
                end_ns,
                errors,
                samples,
            });
        }
        for record in reply["records"].as_array().into_iter().flatten() {
            let field = |f: &str| record[f].as_u64().unwrap_or(0);
            log.holds.push(Hold {
                process: agent.label.clone(),
                crate_side,
                owner,
                kind: kind.to_owned(),
                name: name.clone(),
                access: access(kind),
                requested_ns: field("requested_ns"),
                acquired_ns: field("acquired_ns"),
                releasing_ns: field("releasing_ns"),
                token: record["token"].as_u64(),
                lost_ns: record["lost_ns"].as_u64(),
                released_ok: record["unlock"] == "ok",
            });
        }
    }
    log
}

fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn fault_json(fault: &Fault) -> Value {
    json!({
        "class": fault.class.name(),
        "target": fault.target,
        "start_ns": fault.start_ns,
        "end_ns": fault.end_ns,
    })
}

fn write_holds(path: &Path, holds: &[Hold]) -> Result<(), String> {
    let mut text = String::new();
    for h in holds {
        let line = json!({
            "process": h.process, "owner": h.owner, "kind": h.kind, "name": h.name,
            "requested_ns": h.requested_ns, "acquired_ns": h.acquired_ns,
            "releasing_ns": h.releasing_ns, "token": h.token, "lost_ns": h.lost_ns,
            "released_ok": h.released_ok,
        });
        let _ = writeln!(text, "{line}");
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// What Redis still holds once every worker has finished: nothing but the counters, the
/// fenced token counter and the semaphores' permit counts (back at [`PERMITS`] unless a wipe
/// lost them), after at most a fair-wait slot plus a lease for what expires on its own. After
/// a wipe, a fair lock's queue whose waiters' slots all ran out is pruned by an acquire and not
/// judged ([`prune_stale_fair_queues`]).
fn final_state(
    con: &mut Connection,
    prefix: &str,
    semaphores: &[(&'static str, String, u32)],
    wiped: bool,
    agents: &[Agent],
) -> Result<Vec<String>, String> {
    let allowed = |key: &str| {
        key.starts_with(&format!("{prefix}:counter:"))
            || key == format!("redisson_lock_token:{{{prefix}:fenced}}")
            || semaphores.iter().any(|(_, name, _)| name == key)
    };
    let settle = Duration::from_millis(FAIR_WAIT_MS + WATCHDOG_MS + 3000);
    let until = Instant::now() + settle;
    let mut left: Vec<String>;
    loop {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(con)
            .map_err(|e| format!("KEYS: {e}"))?;
        left = keys.into_iter().filter(|k| !allowed(k)).collect();
        if left.is_empty() || Instant::now() >= until {
            break;
        }
        thread::sleep(Duration::from_millis(250));
    }
    if wiped {
        for line in prune_stale_fair_queues(con, prefix, &mut left, agents)? {
            println!("{line}");
        }
    }
    let mut leftovers: Vec<String> = Vec::new();
    for key in left {
        let kind: String = redis::cmd("TYPE").arg(&key).query(con).unwrap_or_default();
        let pttl: i64 = redis::cmd("PTTL").arg(&key).query(con).unwrap_or(-2);
        leftovers.push(format!("{key} ({kind}, pttl {pttl})"));
    }
    let mut permits = BTreeMap::new();
    for (_, name, expected) in semaphores {
        let value: Option<String> = redis::cmd("GET").arg(name).query(con).ok().flatten();
        permits.insert(name.clone(), (value, *expected));
    }
    for (name, (value, expected)) in permits {
        if value.as_deref() != Some(&expected.to_string()) {
            if wiped {
                println!("{name}: {value:?} permits after a wipe (not judged)");
            } else {
                leftovers.push(format!("{name} has {value:?} permits, not {expected}"));
            }
        }
    }
    Ok(leftovers)
}

/// The owner number of the acquire that [`prune_stale_fair_queues`] sends, unused by the load.
const PRUNER_OWNER: u64 = 99;
/// How long [`prune_stale_fair_queues`] waits at most for the last waiter slot of a queue to
/// run out.
const STALE_SLOT_WAIT: Duration = Duration::from_secs(60);

/// Redis's `TIME` in ms.
fn redis_now_ms(con: &mut Connection) -> Result<f64, String> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query(con)
        .map_err(|e| format!("TIME: {e}"))?;
    Ok((secs * 1000 + micros / 1000) as f64)
}

/// After a fault that may lose writes (a failover, a restart without the last writes), the
/// queue and timeout set of a fair lock can keep the entries of waiters whose removal, by
/// their grant or their give-up, was lost with those writes. Redisson's fair lock sets no
/// expiry on either key: the next acquire of the lock prunes every entry whose waiter slot has
/// run out. So the two keys of a fair lock in `left` are not leftovers when every entry's slot
/// runs out within [`STALE_SLOT_WAIT`] (its score in the timeout set passes Redis's `TIME`; no
/// live waiter is behind it) and then a `try_lock` with no wait by a fresh owner of the first
/// Rust agent gets the lock, and its `unlock` leaves neither key behind. Those keys leave
/// `left`; one line per lock says what was pruned and whose entries they were. Anything else
/// stays a leftover.
fn prune_stale_fair_queues(
    con: &mut Connection,
    prefix: &str,
    left: &mut Vec<String>,
    agents: &[Agent],
) -> Result<Vec<String>, String> {
    let Some(pruner) = agents.iter().find(|a| a.label.starts_with("rust")) else {
        return Ok(Vec::new());
    };
    let mut lines = Vec::new();
    for kind in ["fair", "nonreentrant_fair"] {
        let name = format!("{prefix}:{kind}");
        let keys = [
            format!("redisson_lock_queue:{{{name}}}"),
            format!("redisson_lock_timeout:{{{name}}}"),
        ];
        if !left.iter().any(|k| keys.contains(k)) {
            continue;
        }
        let entries: Vec<String> = redis::cmd("LRANGE")
            .arg(&keys[0])
            .arg(0)
            .arg(-1)
            .query(con)
            .map_err(|e| format!("LRANGE {}: {e}", keys[0]))?;
        let slots: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(&keys[1])
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(con)
            .map_err(|e| format!("ZRANGE {}: {e}", keys[1]))?;
        // Each waiter's slot ends a fair wait after the one before it: the last may end after
        // the settling time. Wait for it, within a bound.
        let last_slot = slots.iter().map(|(_, at)| *at).fold(0.0, f64::max);
        let wait_ms = last_slot - redis_now_ms(con)? + 100.0;
        if wait_ms > STALE_SLOT_WAIT.as_millis() as f64 {
            continue;
        }
        if wait_ms > 0.0 {
            thread::sleep(Duration::from_millis(wait_ms as u64));
        }
        let now_ms = redis_now_ms(con)?;
        if slots.iter().any(|(_, at)| *at >= now_ms) {
            continue;
        }
        let whose: Vec<String> = entries
            .iter()
            .map(|entry| {
                agents
                    .iter()
                    .find(|a| entry.starts_with(&format!("{}:", a.client_id)))
                    .map_or_else(|| entry.clone(), |a| a.label.clone())
            })
            .collect();
        let reply = pruner.call(json!({"op": "try_lock", "kind": kind, "name": name,
                                       "owner": PRUNER_OWNER, "wait_ms": 0}))?;
        if reply["acquired"] != true {
            continue;
        }
        pruner.call(json!({"op": "unlock", "kind": kind, "name": name, "owner": PRUNER_OWNER}))?;
        let remaining: u64 = redis::cmd("EXISTS")
            .arg(&keys[0])
            .arg(&keys[1])
            .query(con)
            .map_err(|e| format!("EXISTS: {e}"))?;
        if remaining > 0 {
            continue;
        }
        left.retain(|k| !keys.contains(k));
        lines.push(format!(
            "{name}: after a fault that may lose writes, its queue kept {} entries, of {whose:?}, \
             whose waiter slots had all run out (the last {} ms before this check); {}'s \
             try_lock pruned them and took the lock, and its unlock left no queue (not judged)",
            entries.len(),
            slots
                .iter()
                .map(|(_, at)| now_ms - at)
                .fold(f64::INFINITY, f64::min)
                .round(),
            pruner.label
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Errored, KINDS, family_of, message_shape, slot_at};
    use testkit::history::{Fault, FaultClass};

    #[test]
    fn the_schedule_gives_each_slice_the_next_family_round_and_round() {
        let slice = Duration::from_secs(8);
        let at = |ms: u64| family_of(slot_at(Duration::from_millis(ms), slice));
        assert_eq!(at(0), KINDS[0]);
        assert_eq!(at(7_999), KINDS[0]);
        assert_eq!(at(8_000), KINDS[1]);
        assert_eq!(at(8_000 * KINDS.len() as u64), KINDS[0]);
        assert_eq!(at(8_000 * (KINDS.len() as u64 + 2) + 5), KINDS[2]);
        // A zero slice (never given) reads as one millisecond rather than dividing by zero.
        assert_eq!(
            family_of(slot_at(Duration::from_millis(3), Duration::ZERO)),
            KINDS[3]
        );
    }

    #[test]
    fn messages_of_one_cause_share_a_shape() {
        assert_eq!(
            message_shape("connection to 127.0.0.1:41235 lost after 1500 ms: broken pipe"),
            "connection to N.N.N.N:N lost after N ms: broken pipe"
        );
        assert_eq!(message_shape("no digits"), "no digits");
        assert_eq!(
            message_shape(
                "4d5ce4c5-0ec7-49c1-b93c-f9a362c8425d:1 already holds \"faults:4:nonreentrant\""
            ),
            "<uuid>:N already holds \"faults:N:nonreentrant\""
        );
        assert_eq!(message_shape("é 12-ab x7y"), "é N-ab xNy");
        // Hexadecimal ids, as Redisson's exceptions print them, are numbers too; words made of
        // hex letters alone are not.
        assert_eq!(
            message_shape(
                "script: 8b6e2b0f7c, channel: [id: 0x5f3a9c1e], CompletableFuture@6d1e7b2a[Not completed]"
            ),
            "script: N, channel: [id: N], CompletableFuture@N[Not completed]"
        );
        assert_eq!(message_shape("added a bad face"), "added a bad face");
    }

    #[test]
    fn a_request_is_put_down_to_the_faults_it_overlapped() {
        let fault = |class, start_ns, end_ns| Fault {
            class,
            target: None,
            start_ns,
            end_ns,
        };
        let faults = [
            fault(FaultClass::SentinelFailover, 100, 200),
            fault(FaultClass::KillPubsub, 150, 150),
            fault(FaultClass::ClientPauseWrite, 300, 400),
        ];
        let request = |start_ns, end_ns| Errored {
            agent: "rust#1".into(),
            owner: 1,
            kind: "lock".into(),
            start_ns,
            end_ns,
            errors: 1,
            samples: Vec::new(),
        };
        assert_eq!(
            request(120, 160).cause(&faults),
            "kill-pubsub+sentinel-failover"
        );
        assert_eq!(
            request(200, 300).cause(&faults),
            "client-pause-write+sentinel-failover"
        );
        assert_eq!(request(201, 299).cause(&faults), "none");
    }
}
