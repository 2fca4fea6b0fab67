//! The nemesis: a bounded loop that injects one fault at a time, chosen and timed from the
//! seed, heals it, and logs its monotonic start and end.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use interop_scenarios::agent::Agent;
use testkit::history::{Eviction, Fault, FaultClass};
use testkit::memory::{Evictions, Fill, Policy};
use testkit::{FaultProxy, Mode, RedisCluster, RedisSentinel, RedisServer};

use crate::rng::Rng;
use crate::{now_ns, reseed};

/// Relative weights of the fault classes, in [`FaultClass::ALL`] order, on one server (every
/// agent behind a proxy of its own; memory full under `noeviction`, and an evicting policy at
/// the memory limit)...
const WEIGHTS: [u64; 16] = [3, 2, 2, 1, 2, 2, 2, 3, 1, 1, 0, 0, 0, 0, 1, 1];
/// ...on a cluster (the agents reach the nodes directly: no link faults; no restarts, but
/// failovers, manual and by a killed master)...
const CLUSTER_WEIGHTS: [u64; 16] = [3, 0, 0, 0, 0, 2, 0, 3, 0, 0, 2, 1, 0, 0, 0, 0];
/// ...and behind Sentinel (the agents reach the master directly: faults on the master, and
/// `SENTINEL FAILOVER`). A failover the Sentinels start on their own is never picked: the
/// nemesis records one when a stall of the master leads to it.
const SENTINEL_WEIGHTS: [u64; 16] = [3, 0, 0, 0, 0, 2, 1, 3, 0, 0, 0, 0, 2, 0, 0, 0];

/// The filler of the memory faults: keys `faults:filler:*`, without TTL.
const FILLER: &str = "faults:filler";
/// The longest a memory fault holds the server full.
const MEMORY_HOLD_MAX_MS: u64 = 3000;

/// What the nemesis can hit besides the agents.
pub enum Topology<'a> {
    /// One server, and one proxy per agent (in agent order).
    Single {
        server: &'a Mutex<RedisServer>,
        proxies: &'a [FaultProxy],
    },
    Cluster(&'a Mutex<RedisCluster>),
    /// A master with two replicas and three Sentinels.
    Sentinel(&'a Mutex<RedisSentinel>),
}

/// Everything the nemesis can hit.
pub struct Targets<'a> {
    pub topology: Topology<'a>,
    pub agents: &'a [Agent],
    /// The `*_try_set` op, name and permits of each semaphore, to set again after a wipe
    /// (as an application would).
    pub semaphores: &'a [(&'static str, String, u32)],
    /// The agents' watchdog lease: a lock whose release Redis refused for memory is held
    /// until it runs out.
    pub lease: Duration,
    /// Whether one of the given families (`"semaphore"`, `"psem"`, ...) is under load at any
    /// time within `[at, at + within]`, give or take a batch: the faults that would starve a
    /// semaphore are not injected then (see [`spared`]).
    pub families_due: &'a (dyn Fn(Instant, Duration, &[&str]) -> bool + Sync),
}

/// Whether `class` is not injected now, for a semaphore under load that it would starve: a
/// permit lost is gone for good, since neither semaphore's permits have a lease in the suite.
/// Memory full under `noeviction` is not, while the counting semaphore is under load (for as
/// long as the fault and one lease last): a release Redis refuses for memory loses its permit.
///
/// A cluster master kill spares nothing: it ends only when the killed node has rejoined and
/// caught up with its successor ([`inject_cluster`]), so the next kill finds every shard with
/// a replica in sync, and a release the crate's `WAIT` saw acknowledged survives it.
fn spared(targets: &Targets<'_>, class: FaultClass) -> bool {
    match class {
        FaultClass::MemoryFull => (targets.families_due)(
            Instant::now(),
            Duration::from_millis(MEMORY_HOLD_MAX_MS) + targets.lease,
            &["semaphore"],
        ),
        _ => false,
    }
}

/// Runs until `stop` is set (or `deadline`), returns the faults it injected, each healed, and
/// the keys the server evicted meanwhile; `log` gets each fault with its evictions.
pub fn run(
    targets: &Targets<'_>,
    seed: u64,
    deadline: Instant,
    stop: &AtomicBool,
    every_ms: (u64, u64),
    log: &mut dyn FnMut(&Fault, &[Eviction]),
) -> (Vec<Fault>, Vec<Eviction>) {
    let mut rng = Rng::new(seed ^ 0x006e_656d_6573_6973);
    let mut faults = Vec::new();
    let mut evictions = Vec::new();
    // At most one fault every `every_ms.0` ms: the loop is bounded by the run's length.
    let bound = 1 + deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        / u128::from(every_ms.0.max(1));
    for _ in 0..bound {
        sleep_until_stop(
            Duration::from_millis(rng.range(every_ms.0, every_ms.1)),
            stop,
        );
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            break;
        }
        let weights = match targets.topology {
            Topology::Single { .. } => &WEIGHTS,
            Topology::Cluster(_) => &CLUSTER_WEIGHTS,
            Topology::Sentinel(_) => &SENTINEL_WEIGHTS,
        };
        let class = FaultClass::ALL[rng.weighted(weights)];
        // Behind Sentinel, the master before a stall that may make the Sentinels fail over.
        let master_before = match targets.topology {
            Topology::Sentinel(setup) if stalls_master(class) => {
                setup.lock().unwrap().current_master_addr().ok()
            }
            _ => None,
        };
        if spared(targets, class) {
            continue;
        }
        let injected = match class {
            FaultClass::MemoryFull | FaultClass::Eviction => memory_fault(targets, class, &mut rng),
            _ => inject(targets, class, &mut rng).map(|f| (f, Vec::new())),
        };
        match injected {
            Ok((fault, evicted)) => {
                log(&fault, &evicted);
                evictions.extend(evicted);
                let followed = match (&targets.topology, master_before) {
                    (Topology::Sentinel(setup), Some(before)) => {
                        auto_failover(setup, before, &fault)
                    }
                    _ => None,
                };
                faults.push(fault);
                if let Some(auto) = followed {
                    log(&auto, &[]);
                    faults.push(auto);
                }
            }
            Err(e) => eprintln!("nemesis: {} failed: {e}", class.name()),
        }
    }
    (faults, evictions)
}

/// The memory faults, on one server:
///
/// - [`FaultClass::MemoryFull`]: `noeviction`, the server filled and held over its limit for
///   0.5–3 s (`testkit::memory::Fill::over_limit`): Redis refuses every write that may grow
///   memory. After healing, the fault lasts one more lease: a lock whose release was refused
///   stays until its lease runs out.
/// - [`FaultClass::Eviction`]: one of the seven evicting policies, the server filled with data
///   without TTL and held at its limit (0–64 KiB of headroom) for 0.5–3 s while the nemesis
///   writes 4 KiB more every 20 ms: each write that takes it over makes it evict what the
///   policy may (with a `volatile-*` policy: the locks, the only keys with a TTL), or refuse
///   writes once nothing is left. Every key evicted (but the filler) is heard from the
///   server's keyspace notifications and returned; a semaphore evicted is set again, as after
///   a wipe.
///
/// Both heal by giving the server its `maxmemory` and policy back and deleting the filler.
fn memory_fault(
    targets: &Targets<'_>,
    class: FaultClass,
    rng: &mut Rng,
) -> Result<(Fault, Vec<Eviction>), String> {
    let Topology::Single { server, .. } = targets.topology else {
        return Err(format!("{} needs a single server", class.name()));
    };
    let hold = ms(rng, 500, MEMORY_HOLD_MAX_MS);
    let (url, mut con) = {
        let server = server.lock().unwrap();
        (server.url(), server.try_connect()?)
    };
    if class == FaultClass::MemoryFull {
        let start_ns = now_ns();
        let fill = Fill::over_limit(&mut con, Policy::NoEviction, FILLER)?;
        thread::sleep(hold);
        fill.heal(&mut con)?;
        thread::sleep(targets.lease);
        return Ok((fault(class, None, start_ns), Vec::new()));
    }
    let policy = Policy::EVICTING[rng.below(Policy::EVICTING.len() as u64) as usize];
    let headroom = rng.range(0, 64 * 1024);
    let watch = Evictions::start(&url)?;
    let start_ns = now_ns();
    let fill = Fill::at_limit(&mut con, policy, FILLER, headroom)?;
    // Bounded by the hold: one write every 20 ms.
    let until = Instant::now() + hold;
    let mut pushed = Ok(());
    for n in 0.. {
        if Instant::now() >= until {
            break;
        }
        if let Err(e) = fill.push(&mut con, n) {
            pushed = Err(e);
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let healed = fill.heal(&mut con);
    let heard = watch.stop()?;
    healed?;
    pushed?;
    // The listener's instants on CLOCK_MONOTONIC (std's `Instant` reads the same clock).
    let (now, now_mono) = (Instant::now(), now_ns());
    let evicted: Vec<Eviction> = heard
        .into_iter()
        .filter(|(_, key)| !key.starts_with(FILLER))
        .map(|(at, key)| Eviction {
            key,
            at_ns: now_mono.saturating_sub((now - at).as_nanos() as u64),
        })
        .collect();
    eprintln!(
        "nemesis: {} with {} ({headroom} bytes of headroom, {:.1} s): {} keys evicted",
        class.name(),
        policy.name(),
        hold.as_secs_f64(),
        evicted.len()
    );
    let semaphore_evicted = evicted
        .iter()
        .any(|e| targets.semaphores.iter().any(|(_, name, _)| e.hits(name)));
    let mut fault = fault(class, None, start_ns);
    if semaphore_evicted {
        reseed(&targets.agents[0], targets.semaphores)?;
        fault.end_ns = now_ns();
    }
    Ok((fault, evicted))
}

fn sleep_until_stop(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(20).min(until - Instant::now()));
    }
}

fn inject(targets: &Targets<'_>, class: FaultClass, rng: &mut Rng) -> Result<Fault, String> {
    match targets.topology {
        Topology::Single { server, proxies } => inject_single(targets, server, proxies, class, rng),
        Topology::Cluster(cluster) => inject_cluster(targets, cluster, class, rng),
        Topology::Sentinel(setup) => inject_sentinel(targets, setup, class, rng),
    }
}

fn inject_sentinel(
    targets: &Targets<'_>,
    setup: &Mutex<RedisSentinel>,
    class: FaultClass,
    rng: &mut Rng,
) -> Result<Fault, String> {
    let agent = rng.below(targets.agents.len() as u64) as usize;
    // The data node the Sentinels name as master now.
    let master = |setup: &RedisSentinel| -> Result<redis::Connection, String> {
        let addr = setup.current_master_addr()?;
        setup
            .server_at(addr)
            .ok_or_else(|| format!("no data node at {addr}"))?
            .try_connect()
    };
    Ok(match class {
        FaultClass::Pause => pause(targets, agent, rng)?,
        FaultClass::KillPubsub => {
            // The lock users' subscriptions, not the Sentinels' own (named `sentinel-<id>-
            // pubsub`): with a down-after of 1 s, a Sentinel whose link was cut can call the
            // master down at once, and two of them fail it over (seen in a run's Sentinel
            // events: `+sdown` 0.2 s after a `CLIENT KILL TYPE pubsub`).
            let mut con = master(&setup.lock().unwrap())?;
            let list: String = redis::cmd("CLIENT")
                .arg("LIST")
                .arg("TYPE")
                .arg("pubsub")
                .query(&mut con)
                .map_err(|e| format!("CLIENT LIST TYPE pubsub: {e}"))?;
            let start_ns = now_ns();
            for id in clients_not_named(&list, "sentinel-") {
                // A client gone meanwhile is no error.
                let _ = send(&mut con, &["CLIENT", "KILL", "ID", id]);
            }
            fault(class, None, start_ns)
        }
        FaultClass::ClientPauseWrite => {
            let mut con = master(&setup.lock().unwrap())?;
            let d = ms(rng, 200, 2500);
            let start_ns = now_ns();
            send(
                &mut con,
                &["CLIENT", "PAUSE", &d.as_millis().to_string(), "WRITE"],
            )?;
            thread::sleep(d);
            fault(class, None, start_ns)
        }
        FaultClass::DebugSleep => {
            // Shorter than the Sentinels' down-after (1 s): a stall, not a failover.
            let mut con = master(&setup.lock().unwrap())?;
            let d = ms(rng, 200, 800);
            let start_ns = now_ns();
            send(
                &mut con,
                &["DEBUG", "SLEEP", &format!("{:.3}", d.as_secs_f64())],
            )?;
            fault(class, None, start_ns)
        }
        FaultClass::SentinelFailover => {
            let setup = setup.lock().unwrap();
            // The Sentinels refuse a failover while the last one is still being completed
            // (INPROG, up to their failover-timeout): wait for it, bounded.
            let old = setup.current_master_addr()?;
            let mut tries = 0;
            let start_ns = loop {
                let start_ns = now_ns();
                match setup.failover() {
                    Ok(_) => break start_ns,
                    Err(e) if e.contains("INPROG") && tries < 20 => {
                        tries += 1;
                        thread::sleep(Duration::from_millis(500));
                    }
                    Err(e) => return Err(e),
                }
            };
            // Until the old master is a replica, it still takes writes from the clients that
            // have not moved yet, while the new one takes the others': two masters. The fault
            // lasts until the Sentinels have demoted it.
            wait_demoted(&setup, old)?;
            fault(class, None, start_ns)
        }
        other => return Err(format!("{} is not injected behind Sentinel", other.name())),
    })
}

/// Waits (bounded) until the data node at `old` reports `ROLE slave`.
fn wait_demoted(setup: &RedisSentinel, old: SocketAddr) -> Result<(), String> {
    let node = setup
        .server_at(old)
        .ok_or_else(|| format!("no data node at {old}"))?;
    wait_for(Duration::from_secs(15), || {
        node.try_connect()
            .ok()
            .and_then(|mut con| redis::cmd("ROLE").query::<Vec<redis::Value>>(&mut con).ok())
            .is_some_and(
                |role| matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"slave"),
            )
    });
    Ok(())
}

/// The stalls behind Sentinel that can make the Sentinels fail over on their own: they miss
/// their `PING` replies for `down-after-milliseconds` (1 s). A `CLIENT PAUSE WRITE` holds up
/// their `PUBLISH` of hello messages, and the `PING`s queued behind it, for the whole pause.
const STALL_WATCHED: Duration = Duration::from_millis(700);
/// The longest the nemesis watches the Sentinels after such a stall. A failover the stall
/// set off keeps a Sentinel's flags up (`failover_in_progress` on the leader) until it ends
/// in a switch; a failed election is retried only after twice the failover timeout (6 s), so
/// 10 s sees one retry through.
const WATCH_BOUND: Duration = Duration::from_secs(10);
/// The watch ends once no Sentinel has called the master down (or been failing it over) for
/// this long.
const WATCH_QUIET: Duration = Duration::from_secs(2);
/// How often the watch asks every Sentinel.
const WATCH_POLL: Duration = Duration::from_millis(100);

/// What one Sentinel says of the master (`SENTINEL MASTER`), or `None` when it did not
/// answer (counted as not quiet).
#[derive(Clone, Debug, PartialEq, Eq)]
struct View {
    /// The master's address (`ip`, `port`).
    master: SocketAddr,
    /// Its flags say `s_down`, `o_down` or `failover_in_progress`.
    down: bool,
}

impl View {
    /// From the fields of a `SENTINEL MASTER` reply.
    fn parse(fields: &std::collections::HashMap<String, String>) -> Result<Self, String> {
        let get = |k: &str| {
            fields
                .get(k)
                .ok_or_else(|| format!("SENTINEL MASTER: no {k}"))
        };
        let master = format!("{}:{}", get("ip")?, get("port")?)
            .parse()
            .map_err(|e| format!("SENTINEL MASTER: address: {e}"))?;
        let down = get("flags")?
            .split(',')
            .any(|f| matches!(f, "s_down" | "o_down" | "failover_in_progress"));
        Ok(Self { master, down })
    }
}

/// What the watch concludes after a look at every Sentinel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Look again in [`WATCH_POLL`].
    Watching,
    /// No Sentinel has called the master down for [`WATCH_QUIET`]: no failover follows.
    Quiet,
    /// A Sentinel names another master: the stall led to a failover.
    Moved,
    /// [`WATCH_BOUND`] passed with a Sentinel still calling the master down (or silent); the
    /// run's check of the switches catches a failover that comes later.
    Bound,
}

/// The decision of the watch after a stall of the master at `before`, one look at a time.
struct FailoverWatch {
    before: SocketAddr,
    /// Since when (on the watch's clock) no Sentinel has called the master down.
    quiet_since: Option<Duration>,
}

impl FailoverWatch {
    fn new(before: SocketAddr) -> Self {
        Self {
            before,
            quiet_since: None,
        }
    }

    /// The verdict after the look `at` (time since the watch began) found `views`, one per
    /// Sentinel.
    fn look(&mut self, at: Duration, views: &[Option<View>]) -> Verdict {
        if views.iter().flatten().any(|v| v.master != self.before) {
            return Verdict::Moved;
        }
        let quiet = views.iter().all(|v| v.as_ref().is_some_and(|v| !v.down));
        if !quiet {
            self.quiet_since = None;
        } else if self.quiet_since.is_none() {
            self.quiet_since = Some(at);
        }
        match self.quiet_since {
            Some(since) if at.saturating_sub(since) >= WATCH_QUIET => Verdict::Quiet,
            _ if at >= WATCH_BOUND => Verdict::Bound,
            _ => Verdict::Watching,
        }
    }
}

/// The faults that stall the master behind Sentinel: `CLIENT PAUSE WRITE`, `DEBUG SLEEP`.
fn stalls_master(class: FaultClass) -> bool {
    matches!(class, FaultClass::ClientPauseWrite | FaultClass::DebugSleep)
}

/// After a stall of the master (`fault`) of at least [`STALL_WATCHED`], watches the Sentinels
/// (every one's `SENTINEL MASTER`, bounded: [`FailoverWatch`]) for a failover the stall set
/// off; if one came, waits until the old master is demoted and returns it as a fault from the
/// stall's start: the old master took writes after the stall that its successor never saw.
fn auto_failover(setup: &Mutex<RedisSentinel>, before: SocketAddr, fault: &Fault) -> Option<Fault> {
    if !stalls_master(fault.class)
        || fault.end_ns - fault.start_ns < STALL_WATCHED.as_nanos() as u64
    {
        return None;
    }
    let setup = setup.lock().unwrap();
    let mut watch = FailoverWatch::new(before);
    let mut cons: Vec<Option<redis::Connection>> = setup.sentinels().iter().map(|_| None).collect();
    let began = Instant::now();
    let mut called_down = false;
    // Bounded by WATCH_BOUND: `look` says `Bound` past it.
    let verdict = loop {
        let views: Vec<Option<View>> = setup
            .sentinels()
            .iter()
            .zip(&mut cons)
            .map(|(sentinel, con)| sentinel_view(sentinel, setup.master_name(), con))
            .collect();
        called_down |= views.iter().flatten().any(|v| v.down);
        match watch.look(began.elapsed(), &views) {
            Verdict::Watching => thread::sleep(WATCH_POLL),
            verdict => break verdict,
        }
    };
    eprintln!(
        "nemesis: watched the Sentinels {:.1} s after a {:.2} s {}: {verdict:?}{}",
        began.elapsed().as_secs_f64(),
        (fault.end_ns - fault.start_ns) as f64 / 1e9,
        fault.class.name(),
        if called_down {
            " (a Sentinel called the master down meanwhile)"
        } else {
            ""
        }
    );
    match verdict {
        Verdict::Moved => {}
        Verdict::Bound => {
            eprintln!(
                "nemesis: a Sentinel still called the master down {} s after a stall",
                WATCH_BOUND.as_secs()
            );
            return None;
        }
        _ => return None,
    }
    if let Err(e) = wait_demoted(&setup, before) {
        eprintln!("nemesis: after an automatic failover: {e}");
    }
    Some(Fault {
        class: FaultClass::AutoFailover,
        target: None,
        start_ns: fault.start_ns,
        end_ns: now_ns(),
    })
}

/// One Sentinel's view of the master `name`, on `con` (opened again when missing or broken).
fn sentinel_view(
    sentinel: &RedisServer,
    name: &str,
    con: &mut Option<redis::Connection>,
) -> Option<View> {
    if con.is_none() {
        let fresh = sentinel.try_connect().ok()?;
        fresh.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        *con = Some(fresh);
    }
    let reply = redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(name)
        .query::<std::collections::HashMap<String, String>>(con.as_mut()?);
    match reply
        .map_err(|e| e.to_string())
        .and_then(|f| View::parse(&f))
    {
        Ok(view) => Some(view),
        Err(e) => {
            eprintln!("nemesis: Sentinel {}: {e}", sentinel.port());
            *con = None;
            None
        }
    }
}

/// One event a Sentinel published (`+sdown`, `+odown`, `+switch-master`, ...): when it was
/// heard, its channel, its text.
pub struct SentinelEvent {
    pub at_ns: u64,
    pub channel: String,
    pub text: String,
}

/// Records every event the Sentinel at `url` publishes, until `stop`: the run's log of what
/// the Sentinels did, and the check that every failover of the run is among the recorded
/// faults (one the nemesis did not see would leave two masters unaccounted for).
pub fn watch_sentinel(url: &str, stop: &AtomicBool) -> Result<Vec<SentinelEvent>, String> {
    let client = redis::Client::open(url).map_err(|e| format!("{url}: {e}"))?;
    let mut con = client.get_connection().map_err(|e| format!("{url}: {e}"))?;
    con.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let mut pubsub = con.as_pubsub();
    pubsub
        .psubscribe("*")
        .map_err(|e| format!("PSUBSCRIBE *: {e}"))?;
    let mut events = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match pubsub.get_message() {
            Ok(msg) => events.push(SentinelEvent {
                at_ns: now_ns(),
                channel: msg.get_channel_name().to_owned(),
                text: msg.get_payload().unwrap_or_default(),
            }),
            Err(e) if e.is_timeout() => {}
            Err(e) => return Err(format!("the Sentinel's events: {e}")),
        }
    }
    Ok(events)
}

/// The `id`s of the clients in a `CLIENT LIST` reply whose name does not start with `prefix`.
fn clients_not_named<'a>(list: &'a str, prefix: &str) -> Vec<&'a str> {
    list.lines()
        .filter_map(|line| {
            let field = |key: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            };
            let named = field("name").is_some_and(|name| name.starts_with(prefix));
            field("id").filter(|_| !named)
        })
        .collect()
}

fn ms(rng: &mut Rng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.range(lo, hi))
}

/// SIGSTOP .. SIGCONT of one agent.
fn pause(targets: &Targets<'_>, agent: usize, rng: &mut Rng) -> Result<Fault, String> {
    let d = ms(rng, 300, 4000);
    let start_ns = now_ns();
    targets.agents[agent].pause()?;
    thread::sleep(d);
    targets.agents[agent].resume()?;
    Ok(fault(
        FaultClass::Pause,
        Some(targets.agents[agent].label.clone()),
        start_ns,
    ))
}

fn inject_single(
    targets: &Targets<'_>,
    server: &Mutex<RedisServer>,
    proxies: &[FaultProxy],
    class: FaultClass,
    rng: &mut Rng,
) -> Result<Fault, String> {
    let agent = rng.below(targets.agents.len() as u64) as usize;
    let label = targets.agents[agent].label.clone();
    let proxy = &proxies[agent];
    let link = |mode: Mode, d: Duration| -> Fault {
        let start_ns = now_ns();
        proxy.set_mode(mode);
        thread::sleep(d);
        proxy.set_mode(Mode::Pass);
        fault(class, Some(label.clone()), start_ns)
    };
    let command = |args: &[&str]| -> Result<(), String> {
        let mut con = server.lock().unwrap().try_connect()?;
        send(&mut con, args)
    };
    Ok(match class {
        FaultClass::Pause => pause(targets, agent, rng)?,
        FaultClass::LinkDelay => {
            let mode = Mode::Delay {
                up: ms(rng, 0, 300),
                down: ms(rng, 0, 500),
            };
            link(mode, ms(rng, 500, 3000))
        }
        FaultClass::LinkFreeze => link(Mode::Freeze, ms(rng, 200, 4000)),
        FaultClass::LinkBlackhole => link(Mode::Blackhole, ms(rng, 200, 4000)),
        FaultClass::LinkReset => link(Mode::Reset, ms(rng, 50, 1000)),
        FaultClass::ClientPauseWrite => {
            let d = ms(rng, 200, 2500);
            let start_ns = now_ns();
            command(&["CLIENT", "PAUSE", &d.as_millis().to_string(), "WRITE"])?;
            thread::sleep(d);
            fault(class, None, start_ns)
        }
        FaultClass::DebugSleep => {
            let d = ms(rng, 200, 1500);
            let start_ns = now_ns();
            let seconds = format!("{:.3}", d.as_secs_f64());
            command(&["DEBUG", "SLEEP", &seconds])?;
            fault(class, None, start_ns)
        }
        FaultClass::KillPubsub => {
            let start_ns = now_ns();
            command(&["CLIENT", "KILL", "TYPE", "pubsub"])?;
            fault(class, None, start_ns)
        }
        FaultClass::RestartAof | FaultClass::RestartWiped => {
            let down = ms(rng, 100, 1500);
            let mut server = server.lock().unwrap();
            let start_ns = now_ns();
            server.stop();
            if class == FaultClass::RestartWiped {
                let aof = server.dir().join("appendonlydir");
                remove_dir(&aof)?;
            }
            thread::sleep(down);
            server.try_restart()?;
            let mut fault = fault(class, None, start_ns);
            if class == FaultClass::RestartWiped {
                drop(server);
                reseed(&targets.agents[0], targets.semaphores)?;
                fault.end_ns = now_ns();
            }
            fault
        }
        FaultClass::Failover
        | FaultClass::MasterKill
        | FaultClass::SentinelFailover
        | FaultClass::AutoFailover => {
            return Err(format!("{} needs a cluster or Sentinel", class.name()));
        }
        FaultClass::MemoryFull | FaultClass::Eviction => {
            return Err(format!("{} is injected by memory_fault", class.name()));
        }
    })
}

fn inject_cluster(
    targets: &Targets<'_>,
    cluster: &Mutex<RedisCluster>,
    class: FaultClass,
    rng: &mut Rng,
) -> Result<Fault, String> {
    let agent = rng.below(targets.agents.len() as u64) as usize;
    Ok(match class {
        FaultClass::Pause => pause(targets, agent, rng)?,
        FaultClass::KillPubsub => {
            let cluster = cluster.lock().unwrap();
            let start_ns = now_ns();
            for node in cluster.nodes() {
                if let Ok(mut con) = cluster.server(node.index).try_connect() {
                    let _ = send(&mut con, &["CLIENT", "KILL", "TYPE", "pubsub"]);
                }
            }
            fault(class, None, start_ns)
        }
        FaultClass::ClientPauseWrite => {
            let cluster = cluster.lock().unwrap();
            let masters = masters(&cluster);
            let node = masters[rng.below(masters.len() as u64) as usize];
            let d = ms(rng, 200, 2500);
            let start_ns = now_ns();
            let mut con = cluster.server(node).try_connect()?;
            send(
                &mut con,
                &["CLIENT", "PAUSE", &d.as_millis().to_string(), "WRITE"],
            )?;
            drop(cluster);
            thread::sleep(d);
            fault(class, None, start_ns)
        }
        FaultClass::Failover => {
            let cluster = cluster.lock().unwrap();
            let replicas: Vec<usize> = cluster
                .nodes()
                .iter()
                .map(|n| n.index)
                .filter(|&i| role(&cluster, i).as_deref() == Some("slave"))
                .collect();
            if replicas.is_empty() {
                return Err("no replica to fail over to".into());
            }
            let replica = replicas[rng.below(replicas.len() as u64) as usize];
            let start_ns = now_ns();
            let mut con = cluster.server(replica).try_connect()?;
            send(&mut con, &["CLUSTER", "FAILOVER"])?;
            wait_for(Duration::from_secs(15), || {
                role(&cluster, replica).as_deref() == Some("master")
            });
            fault(class, None, start_ns)
        }
        FaultClass::MasterKill => {
            let mut cluster = cluster.lock().unwrap();
            let masters = masters(&cluster);
            let victim = masters[rng.below(masters.len() as u64) as usize];
            let start = Instant::now();
            let start_ns = now_ns();
            cluster.stop(victim);
            // A replica takes over after the node timeout (2 s) and an election.
            let promoted = wait_for(Duration::from_secs(20), || {
                masters_up(&cluster) == masters.len()
            });
            cluster.restart(victim);
            // The old master rejoins as a replica of its successor: it says so at once, from
            // its nodes.conf, but it restarts empty (no persistence) and holds its successor's
            // data only once a full sync is done, about a second later (Valkey 9.1.2: link
            // still down at that point in all 32 kills of two 300 s legs). Until then the
            // shard has no replica to fail over to, so the fault lasts until the sync: a kill
            // before it would be a second fault on one shard, which can lose its data.
            let rejoined = wait_for(Duration::from_secs(20), || {
                role(&cluster, victim).as_deref() == Some("slave")
            });
            let synced = wait_for(Duration::from_secs(20), || {
                replica_in_sync(&cluster, victim)
            });
            eprintln!(
                "nemesis: master-kill of node {}: promoted {}, rejoined {}, in sync {}",
                cluster.server(victim).port(),
                after(start, promoted),
                after(start, rejoined),
                after(start, synced),
            );
            fault(class, None, start_ns)
        }
        other => return Err(format!("{} is not injected on a cluster", other.name())),
    })
}

/// The nodes that are masters now.
fn masters(cluster: &RedisCluster) -> Vec<usize> {
    cluster
        .nodes()
        .iter()
        .map(|n| n.index)
        .filter(|&i| role(cluster, i).as_deref() == Some("master"))
        .collect()
}

/// How many running nodes are masters with slots (the cluster serves every slot again when
/// this is back to the number of shards).
fn masters_up(cluster: &RedisCluster) -> usize {
    cluster
        .nodes()
        .iter()
        .filter(|n| cluster.server(n.index).is_running())
        .filter(|n| role(cluster, n.index).as_deref() == Some("master"))
        .count()
}

fn role(cluster: &RedisCluster, index: usize) -> Option<String> {
    if !cluster.server(index).is_running() {
        return None;
    }
    let mut con = cluster.server(index).try_connect().ok()?;
    let reply: Vec<redis::Value> = redis::cmd("ROLE").query(&mut con).ok()?;
    match reply.first() {
        Some(redis::Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// Whether node `index`, a replica, has its master's data: its link to the master is up,
/// which a replica reports only once a sync has completed.
fn replica_in_sync(cluster: &RedisCluster, index: usize) -> bool {
    let Ok(mut con) = cluster.server(index).try_connect() else {
        return false;
    };
    redis::cmd("INFO")
        .arg("replication")
        .query::<String>(&mut con)
        .is_ok_and(|info| testkit::replica_link_up(&info))
}

/// Polls `done` every 100 ms for up to `limit`; the instant it held, or `None`.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> Option<Instant> {
    let until = Instant::now() + limit;
    loop {
        if done() {
            return Some(Instant::now());
        }
        if Instant::now() >= until {
            return None;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// `"after 2.41 s"` from `start` to `at`, or `"not within 20 s"`.
fn after(start: Instant, at: Option<Instant>) -> String {
    match at {
        Some(at) => format!("after {:.2} s", at.duration_since(start).as_secs_f64()),
        None => "not within 20 s".to_owned(),
    }
}

fn fault(class: FaultClass, target: Option<String>, start_ns: u64) -> Fault {
    Fault {
        class,
        target,
        start_ns,
        end_ns: now_ns(),
    }
}

fn remove_dir(dir: &PathBuf) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", dir.display())),
    }
}

/// Sends one command.
fn send(con: &mut redis::Connection, args: &[&str]) -> Result<(), String> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<redis::Value>(con)
        .map(drop)
        .map_err(|e| format!("{}: {e}", args.join(" ")))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::net::SocketAddr;
    use std::time::Duration;

    use super::{FailoverWatch, Verdict, View, clients_not_named};

    const OLD: &str = "127.0.0.1:7001";
    const NEW: &str = "127.0.0.1:7002";

    fn view(master: &str, down: bool) -> Option<View> {
        Some(View {
            master: master.parse().unwrap(),
            down,
        })
    }

    fn at(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn watch() -> FailoverWatch {
        FailoverWatch::new(OLD.parse::<SocketAddr>().unwrap())
    }

    #[test]
    fn sentinel_master_flags_say_down_or_failing_over() {
        let fields = |flags: &str| -> HashMap<String, String> {
            [
                ("name", "mymaster"),
                ("ip", "127.0.0.1"),
                ("port", "7001"),
                ("flags", flags),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
        };
        for (flags, down) in [
            ("master", false),
            ("s_down,master", true),
            ("s_down,o_down,master", true),
            ("master,failover_in_progress", true),
            ("master,disconnected", false),
        ] {
            assert_eq!(
                View::parse(&fields(flags)),
                Ok(View {
                    master: OLD.parse().unwrap(),
                    down
                }),
                "{flags}"
            );
        }
        let mut no_port = fields("master");
        no_port.remove("port");
        assert!(View::parse(&no_port).is_err());
    }

    #[test]
    fn quiet_sentinels_end_the_watch_after_two_seconds_of_quiet() {
        let mut w = watch();
        let quiet = [view(OLD, false), view(OLD, false), view(OLD, false)];
        assert_eq!(w.look(at(0), &quiet), Verdict::Watching);
        assert_eq!(w.look(at(1_900), &quiet), Verdict::Watching);
        assert_eq!(w.look(at(2_000), &quiet), Verdict::Quiet);
    }

    #[test]
    fn one_sentinel_calling_the_master_down_starts_the_quiet_over() {
        let mut w = watch();
        let quiet = [view(OLD, false), view(OLD, false), view(OLD, false)];
        let one_down = [view(OLD, false), view(OLD, true), view(OLD, false)];
        assert_eq!(w.look(at(0), &quiet), Verdict::Watching);
        assert_eq!(w.look(at(1_500), &one_down), Verdict::Watching);
        assert_eq!(w.look(at(1_600), &quiet), Verdict::Watching);
        assert_eq!(w.look(at(3_500), &quiet), Verdict::Watching);
        assert_eq!(w.look(at(3_600), &quiet), Verdict::Quiet);
    }

    #[test]
    fn a_silent_sentinel_is_not_quiet() {
        let mut w = watch();
        let silent = [view(OLD, false), None, view(OLD, false)];
        assert_eq!(w.look(at(0), &silent), Verdict::Watching);
        assert_eq!(w.look(at(5_000), &silent), Verdict::Watching);
        assert_eq!(w.look(at(10_000), &silent), Verdict::Bound);
    }

    #[test]
    fn a_failover_outlasting_four_seconds_is_seen() {
        // The leader keeps failover_in_progress through a slow election, then every Sentinel
        // names the promoted replica: the old 4 s window had ended before.
        let mut w = watch();
        let electing = [view(OLD, false), view(OLD, true), view(OLD, false)];
        for ms in (0..6_000).step_by(100) {
            assert_eq!(w.look(at(ms), &electing), Verdict::Watching, "{ms} ms");
        }
        let switched = [view(OLD, false), view(NEW, false), view(OLD, false)];
        assert_eq!(w.look(at(6_100), &switched), Verdict::Moved);
    }

    #[test]
    fn a_switch_counts_even_when_every_sentinel_is_quiet() {
        let mut w = watch();
        let switched = [view(NEW, false), view(NEW, false), view(NEW, false)];
        assert_eq!(w.look(at(0), &switched), Verdict::Moved);
    }

    #[test]
    fn the_watch_is_bounded_while_a_sentinel_calls_the_master_down() {
        let mut w = watch();
        let down = [view(OLD, true), view(OLD, true), view(OLD, false)];
        assert_eq!(w.look(at(9_900), &down), Verdict::Watching);
        assert_eq!(w.look(at(10_000), &down), Verdict::Bound);
    }

    #[test]
    fn the_sentinels_subscriptions_are_spared() {
        let list = "id=4 addr=127.0.0.1:57978 fd=8 name=sentinel-8521b2af-pubsub flags=P sub=1\n\
                    id=7 addr=127.0.0.1:57990 fd=9 name= flags=P sub=3\n\
                    id=9 addr=127.0.0.1:57991 fd=10 name=app flags=P ssub=1\n";
        assert_eq!(clients_not_named(list, "sentinel-"), ["7", "9"]);
    }
}
