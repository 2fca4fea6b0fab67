//! What every scenario shares: options, the Redis server, the two long-lived agents, fresh
//! names and owner numbers, and the request helpers.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::server::Connection;
use serde_json::{Value, json};

use crate::agent::{Agent, Impl};
use crate::server::{self, Backend};

/// The watchdog of the long-lived agents: far longer than any scenario, so a lock is never
/// freed by expiry unless a scenario asks for a lease.
pub const LONG_WATCHDOG_MS: i64 = 600_000;

pub struct Options {
    pub root: PathBuf,
    pub redisson: String,
    /// `--mode cluster`: the scenarios that can run on a Redis Cluster, on one.
    pub cluster: bool,
    /// `--mode sentinel`: the same scenarios on a master behind three Sentinels (two
    /// replicas), both agents in sentinel mode, plus the Sentinel failover scenario.
    pub sentinel: bool,
    /// `--pubsub`: the Java agent's (and, unless `--rust-pubsub`, the Rust agent's) pub/sub
    /// flavour in cluster mode.
    pub pubsub: String,
    /// `--rust-pubsub`: the Rust agent's, when it differs (e.g. `both`).
    pub rust_pubsub: Option<String>,
    pub smoke: bool,
    /// `--server BUILD`: the server build the scenarios run on (`valkey-9.1`, `redis-6.2`,
    /// `redis-7.0`); it must be the one `REDISSON_SYNC_SERVER` selects for the testkit
    /// (`interop/run --server` sets both). Unset: the testkit's default, `redis-server` on PATH.
    pub server: Option<String>,
    pub only: Option<String>,
    pub handoffs: usize,
    pub iterations: u64,
    /// `--repeat`: the iterations of the main case of the repeated wake-up scenario
    /// ("missed wakes"; its other cases run a fifth of it).
    pub repeat: usize,
    /// `--repeat` was given: the on-demand scenarios ("missed wakes, reply delayed") run.
    pub repeat_given: bool,
}

impl Options {
    pub fn parse(mut args: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut options = Self {
            root: std::env::current_dir().map_err(|e| e.to_string())?,
            redisson: "4.7.0".into(),
            cluster: false,
            sentinel: false,
            pubsub: "auto".into(),
            rust_pubsub: None,
            smoke: false,
            server: None,
            only: None,
            handoffs: 50,
            iterations: 50,
            repeat: 20,
            repeat_given: false,
        };
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--root" => options.root = PathBuf::from(value()?),
                "--redisson" => options.redisson = value()?,
                "--mode" => {
                    let mode = value()?;
                    (options.cluster, options.sentinel) = match mode.as_str() {
                        "cluster" => (true, false),
                        "sentinel" => (false, true),
                        "single" => (false, false),
                        other => {
                            return Err(format!("--mode single|cluster|sentinel, not {other:?}"));
                        }
                    }
                }
                "--pubsub" => options.pubsub = value()?,
                "--rust-pubsub" => options.rust_pubsub = Some(value()?),
                "--smoke" => options.smoke = true,
                "--server" => options.server = Some(value()?),
                "--only" => options.only = Some(value()?),
                "--handoffs" => options.handoffs = number(&arg, &value()?)?,
                "--iterations" => options.iterations = number(&arg, &value()?)?,
                "--repeat" => {
                    options.repeat = number(&arg, &value()?)?;
                    options.repeat_given = true;
                }
                _ => return Err(format!("unknown argument {arg:?}")),
            }
        }
        let selected = testkit::ServerBuild::current().name().to_string();
        match &options.server {
            Some(build) if *build != selected && !(build == "redis-7.0" && selected == "path") => {
                return Err(format!(
                    "--server {build}, but {} selects {selected:?}: run interop/run --server {build}, which sets both",
                    testkit::SERVER_ENV
                ));
            }
            _ => {}
        }
        if options.handoffs == 0 || options.iterations == 0 || options.repeat == 0 {
            return Err("--handoffs, --iterations and --repeat must be at least 1".into());
        }
        Ok(options)
    }
}

fn number<T: std::str::FromStr>(arg: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{arg}: not a positive number: {text:?}"))
}

pub struct Ctx {
    pub options: Options,
    pub root: PathBuf,
    pub logs: PathBuf,
    pub server: Backend,
    /// Long-lived agents (watchdog [`LONG_WATCHDOG_MS`]) most scenarios share.
    pub rust: Agent,
    pub java: Agent,
    next_owner: AtomicU64,
    next_agent: AtomicU64,
    next_name: AtomicU64,
    run_tag: String,
}

impl Ctx {
    pub fn start(options: Options) -> Result<Self, String> {
        let root = options.root.clone();
        let mut logs = root.join("target/interop-logs");
        if let Some(build) = &options.server {
            logs = logs.join(build);
        }
        let logs = logs.join(if options.cluster {
            format!(
                "{}-cluster-{}{}",
                options.redisson,
                options.pubsub,
                options
                    .rust_pubsub
                    .as_ref()
                    .map(|r| format!("-rust-{r}"))
                    .unwrap_or_default()
            )
        } else if options.sentinel {
            format!("{}-sentinel", options.redisson)
        } else {
            options.redisson.clone()
        });
        std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
        let server = if options.cluster {
            Backend::Cluster(server::start_cluster()?)
        } else if options.sentinel {
            Backend::Sentinel(server::start_sentinel()?)
        } else {
            Backend::Single(server::start(&logs)?)
        };
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let long = ["--watchdog-ms".to_string(), LONG_WATCHDOG_MS.to_string()];
        let url = server.url();
        let start =
            |imp: Impl, n: u64| start_agent(&root, &logs, (&server, &url), &options, imp, n, &long);
        let rust = start(Impl::Rust, 1)?;
        let java = start(Impl::Java, 1)?;
        Ok(Self {
            root: root.clone(),
            logs,
            rust,
            java,
            server,
            next_owner: AtomicU64::new(1),
            next_agent: AtomicU64::new(2),
            next_name: AtomicU64::new(1),
            run_tag: format!("{:x}", (nanos as u64) ^ u64::from(std::process::id())),
            options,
        })
    }

    /// The long-lived agent of this implementation.
    pub fn agent(&self, imp: Impl) -> &Agent {
        match imp {
            Impl::Rust => &self.rust,
            Impl::Java => &self.java,
        }
    }

    /// A fresh agent with these extra options (e.g. `--watchdog-ms 1500`).
    pub fn start_agent(&self, imp: Impl, extra: &[&str]) -> Result<Agent, String> {
        self.start_agent_at(imp, &self.server.url(), extra)
    }

    /// A fresh agent that reaches Redis at `url` (e.g. through a fault proxy), with these
    /// extra options.
    pub fn start_agent_at(&self, imp: Impl, url: &str, extra: &[&str]) -> Result<Agent, String> {
        let n = self.next_agent.fetch_add(1, Ordering::Relaxed);
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        start_agent(
            &self.root,
            &self.logs,
            (&self.server, url),
            &self.options,
            imp,
            n,
            &extra,
        )
    }

    /// A connection for looking at what Redis holds.
    pub fn con(&self) -> Result<Connection, String> {
        self.server.try_connect()
    }

    /// An owner number no earlier scenario used, so an owner left blocked by a failed
    /// scenario never delays a later one. Each scenario takes a block of ten.
    pub fn owner(&self) -> u64 {
        self.next_owner.fetch_add(10, Ordering::Relaxed)
    }

    /// A lock name no other scenario or run uses.
    pub fn name(&self, scenario: &str) -> String {
        let n = self.next_name.fetch_add(1, Ordering::Relaxed);
        format!("interop:{scenario}:{}:{n}", self.run_tag)
    }
}

/// Starts agent `n` of `imp` on `server`, reached at `url`.
fn start_agent(
    root: &std::path::Path,
    logs: &std::path::Path,
    (server, url): (&Backend, &str),
    options: &Options,
    imp: Impl,
    n: u64,
    extra: &[String],
) -> Result<Agent, String> {
    let label = format!("{imp}#{n}");
    let mut args = extra.to_vec();
    if imp == Impl::Java {
        args.extend(["--redisson".to_string(), options.redisson.clone()]);
    }
    if server.is_cluster() {
        let pubsub = match imp {
            Impl::Rust => options.rust_pubsub.as_ref().unwrap_or(&options.pubsub),
            Impl::Java => &options.pubsub,
        };
        args.extend([
            "--mode".to_string(),
            "cluster".to_string(),
            "--pubsub".to_string(),
            pubsub.clone(),
        ]);
    }
    if let Backend::Sentinel(setup) = server {
        args.extend([
            "--mode".to_string(),
            "sentinel".to_string(),
            "--master".to_string(),
            setup.master_name().to_string(),
        ]);
    }
    let log = logs.join(format!("agent-{imp}-{n}.log"));
    Agent::start(root, imp, label, url, &args, &log)
}

/// `redisson_lock__channel:{N}` (prefixName of REDISSON_LAYOUT §1.2).
pub fn channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

/// CLOCK_MONOTONIC in ns, the clock of the agents' `start_ns` / `end_ns`.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---- requests (each takes the protocol's lock kind: "lock", "fair", "read", "write") -----

pub fn lock_request(kind: &str, name: &str, owner: u64, lease_ms: Option<i64>) -> Value {
    let mut request = json!({"op": "lock", "kind": kind, "name": name, "owner": owner});
    if let Some(lease) = lease_ms {
        request["lease_ms"] = json!(lease);
    }
    request
}

/// `lock` (watchdog lease), which must succeed; the response.
pub fn lock(agent: &Agent, kind: &str, name: &str, owner: u64) -> Result<Value, String> {
    agent.call(lock_request(kind, name, owner, None))
}

pub fn try_lock(
    agent: &Agent,
    kind: &str,
    name: &str,
    owner: u64,
    wait_ms: i64,
) -> Result<bool, String> {
    let reply = agent.call(json!({"op": "try_lock", "kind": kind, "name": name,
                                  "owner": owner, "wait_ms": wait_ms}))?;
    bool_field(agent, &reply, "acquired")
}

/// `unlock`, which must succeed; the response.
pub fn unlock(agent: &Agent, kind: &str, name: &str, owner: u64) -> Result<Value, String> {
    agent.call(json!({"op": "unlock", "kind": kind, "name": name, "owner": owner}))
}

/// `unlock` that must fail; the error code.
pub fn unlock_error(agent: &Agent, kind: &str, name: &str, owner: u64) -> Result<String, String> {
    let reply = agent.reply(json!({"op": "unlock", "kind": kind, "name": name, "owner": owner}))?;
    if reply["ok"] == true {
        return Err(format!(
            "{}: unlock by owner {owner} succeeded",
            agent.label
        ));
    }
    Ok(reply["error"].as_str().unwrap_or_default().to_string())
}

pub fn force_unlock(agent: &Agent, kind: &str, name: &str) -> Result<(bool, Value), String> {
    let reply = agent.call(json!({"op": "force_unlock", "kind": kind, "name": name}))?;
    Ok((bool_field(agent, &reply, "released")?, reply))
}

pub fn is_locked(agent: &Agent, kind: &str, name: &str) -> Result<bool, String> {
    let reply = agent.call(json!({"op": "is_locked", "kind": kind, "name": name}))?;
    bool_field(agent, &reply, "locked")
}

pub fn is_held(agent: &Agent, kind: &str, name: &str, owner: u64) -> Result<bool, String> {
    let reply = agent.call(json!({"op": "is_held", "kind": kind, "name": name, "owner": owner}))?;
    bool_field(agent, &reply, "held")
}

pub fn hold_count(agent: &Agent, kind: &str, name: &str, owner: u64) -> Result<i64, String> {
    let reply =
        agent.call(json!({"op": "hold_count", "kind": kind, "name": name, "owner": owner}))?;
    int_field(agent, &reply, "count")
}

pub fn remaining_ttl(agent: &Agent, kind: &str, name: &str) -> Result<i64, String> {
    let reply = agent.call(json!({"op": "remaining_ttl", "kind": kind, "name": name}))?;
    int_field(agent, &reply, "ttl_ms")
}

pub fn bool_field(agent: &Agent, reply: &Value, field: &str) -> Result<bool, String> {
    reply[field]
        .as_bool()
        .ok_or_else(|| format!("{}: no bool {field:?} in {reply}", agent.label))
}

pub fn int_field(agent: &Agent, reply: &Value, field: &str) -> Result<i64, String> {
    reply[field]
        .as_i64()
        .ok_or_else(|| format!("{}: no integer {field:?} in {reply}", agent.label))
}

pub fn ns_field(agent: &Agent, reply: &Value, field: &str) -> Result<u64, String> {
    reply[field]
        .as_u64()
        .ok_or_else(|| format!("{}: no {field:?} timestamp in {reply}", agent.label))
}
