//! Missed wake-ups, counted (issue 29, item 5): the same handoff repeated `--repeat` times,
//! every waiter's wake-up recorded, and for any waiter not woken by the release's message the
//! evidence of which side missed it. A child module of `scenarios`, whose helpers and macros
//! it uses.
//!
//! Each iteration: the holder side takes the lock, the waiter side's waiters block on it, the
//! runner waits until their subscription is on the server (and, but in the racing case, 30 ms
//! more, as `rw write wakes readers` does), snapshots every data node (subscribers of the
//! channel, classic and sharded; `PUBLISH` and `SPUBLISH` calls from `INFO commandstats`),
//! releases, and times each waiter's grant from the release's start. A grant within
//! [`WAKE_BOUND_MS`] counts as woken; a waiter that took longer (a Rust waiter's re-check) or
//! is not granted within [`MISS_AFTER`] (a Redisson waiter sleeps for the lock's TTL, ten
//! minutes here) is a miss, diagnosed at once: the subscribers of every node before the release
//! and now, the publications the release made (node and verb), what a subscriber of the
//! runner's own on the channel received, the pub/sub clients of the nodes, and, for a Java
//! waiter, `jstack` of its JVM (kept beside the agent logs); then the runner publishes the
//! same message again, with the waiter's verb, and sees whether that wakes it.
//!
//! A miss by a Redisson waiter with the evidence of Redisson's own race (RELIABILITY.md, "What
//! the suite found in Redisson": its waiter got the message before it had parked, and
//! `LockPubSub` released the wake-up only to those already parked) is counted and reported;
//! anything else fails the scenario. One line per iteration goes to
//! `missed-wakes-<holder>-holds.jsonl` in the agent log directory.
//!
//! ```text
//! interop/run --mode cluster --pubsub auto --only "missed wakes" --repeat 300
//! interop/run --mode cluster --pubsub classic --only "missed wakes" --repeat 300
//! ```

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::rwlock::{expect_readers, rw_channel};
use super::*;
use crate::server::{Backend, node_subscribers};
use testkit::{FaultProxy, Mode};

/// How long a waiter may take before it counts as not woken at all: the bound of the
/// read-write lock scenario that missed one (`woken` in `rwlock.rs`).
const MISS_AFTER: Duration = Duration::from_secs(5);
/// How long a waiter missed by the release may take to be granted after the runner's second
/// message.
const SECOND_MESSAGE_BOUND: Duration = Duration::from_secs(3);

/// When the holder releases, once the waiters' subscription shows on the server.
#[derive(Clone, Copy, PartialEq)]
enum Release {
    /// This long after: 30 ms, as in `rw write wakes readers`, or at once (the release races
    /// the waiters' attempt after subscribing).
    After(Duration),
    /// As soon as no script has reached the server for this long: the waiters' last attempts
    /// ran, and their replies are on the way (delayed by the proxy in `reply delayed`).
    ScriptsQuiet(Duration),
}

/// One kind of handoff.
struct Case {
    label: &'static str,
    /// The kind the holder side takes.
    held: &'static str,
    /// The kind the waiters take.
    waits: &'static str,
    waiters: u64,
    /// The message the release publishes (Redisson `LockPubSub`: `1` wakes every waiter,
    /// `0` one).
    message: &'static str,
    /// When the release comes.
    release: Release,
    /// Runs `--repeat` / `share` iterations.
    share: usize,
    channel: fn(&str) -> String,
}

const CASES: &[Case] = &[
    Case {
        label: "write wakes 3 readers",
        held: "write",
        waits: "read",
        waiters: 3,
        message: "1",
        release: Release::After(Duration::from_millis(30)),
        share: 1,
        channel: rw_channel,
    },
    Case {
        label: "write wakes 3 readers at once",
        held: "write",
        waits: "read",
        waiters: 3,
        message: "1",
        release: Release::After(Duration::ZERO),
        share: 5,
        channel: rw_channel,
    },
    Case {
        label: "write wakes a writer at once",
        held: "write",
        waits: "write",
        waiters: 1,
        message: "1",
        release: Release::After(Duration::ZERO),
        share: 5,
        channel: rw_channel,
    },
    Case {
        label: "read wakes a writer",
        held: "read",
        waits: "write",
        waiters: 1,
        message: "0",
        release: Release::After(Duration::from_millis(30)),
        share: 5,
        channel: rw_channel,
    },
    Case {
        label: "lock wakes a lock",
        held: "lock",
        waits: "lock",
        waiters: 1,
        message: "0",
        release: Release::After(Duration::from_millis(30)),
        share: 5,
        channel,
    },
];

/// How long the proxy holds back every reply to a connection that sent a script, in the
/// reply-delayed scenario: far longer than the release and its message take, so the message
/// reaches the waiter's client before the reply to its last attempt does.
const REPLY_DELAY: Duration = Duration::from_millis(300);

/// The reply-delayed scenario's cases: Redisson's race made certain, for each message.
const DELAYED_CASES: &[Case] = &[
    Case {
        label: "write wakes 3 readers, reply delayed",
        held: "write",
        waits: "read",
        waiters: 3,
        message: "1",
        release: Release::ScriptsQuiet(Duration::from_millis(80)),
        share: 10,
        channel: rw_channel,
    },
    Case {
        label: "write wakes a writer, reply delayed",
        held: "write",
        waits: "write",
        waiters: 1,
        message: "1",
        release: Release::ScriptsQuiet(Duration::from_millis(80)),
        share: 10,
        channel: rw_channel,
    },
    Case {
        label: "lock wakes a lock, reply delayed",
        held: "lock",
        waits: "lock",
        waiters: 1,
        message: "0",
        release: Release::ScriptsQuiet(Duration::from_millis(80)),
        share: 10,
        channel,
    },
];

/// Every case across languages, `holder` holding and `waiter` waiting.
pub(super) fn missed_wakes(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    run_cases(ctx, holder, waiter, CASES.iter())
}

/// The control: the racing case within one language, Java holds and Java waits, then Rust
/// holds and Rust waits. Redisson's race needs no Rust side to show; the crate's waiters
/// register before their attempt and cannot miss.
pub(super) fn missed_wakes_alone(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let mut parts = Vec::new();
    for side in [Impl::Java, Impl::Rust] {
        let racing = CASES
            .iter()
            .filter(|c| c.release == Release::After(Duration::ZERO));
        parts.push(format!(
            "{side} only: {}",
            run_cases(ctx, side, side, racing)?
        ));
    }
    Ok(parts.join("; "))
}

/// Redisson's race made certain, on demand (`--repeat`; one server): a waiter of each side
/// reaches Redis through a fault proxy that holds back every reply to a connection that sent
/// a script by [`REPLY_DELAY`] (not its subscription's messages), and both sides' holders
/// release once the waiters' last attempts have run: the release's message reaches the
/// waiter's client before the reply to its attempt. Redisson's readers and writers then miss
/// a write unlock's `1` every time (they were not parked yet), its lock waiter not `0` (a
/// permit is kept for it); the crate's waiters, registered before their attempt, miss
/// neither.
pub(super) fn missed_wakes_reply_delayed(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    if !ctx.options.repeat_given {
        return Ok("not run: on demand (--repeat N)".into());
    }
    let Backend::Single(server) = &ctx.server else {
        return Err("needs one server (a proxy in front of it)".into());
    };
    let bounds = Bounds {
        woken_ms: WAKE_BOUND_MS + 2.0 * REPLY_DELAY.as_secs_f64() * 1e3,
        missed: Duration::from_secs(2),
    };
    let mut parts = Vec::new();
    for waiter_side in [Impl::Java, Impl::Rust] {
        let proxy = FaultProxy::start(server.addr());
        let waiter = ctx.start_agent_at(waiter_side, &proxy.url(), &[])?;
        proxy.set_mode_for(
            b"EVAL",
            Mode::Delay {
                up: Duration::ZERO,
                down: REPLY_DELAY,
            },
        );
        for holder_side in [Impl::Java, Impl::Rust] {
            let log = format!("missed-wakes-delayed-{holder_side}-to-{waiter_side}.jsonl");
            let h = ctx.agent(holder_side);
            let detail = run_cases_with(ctx, h, &waiter, DELAYED_CASES.iter(), bounds, &log)?;
            parts.push(format!(
                "{holder_side} holds, {waiter_side} waits behind the proxy: {detail}"
            ));
        }
        drop(waiter);
    }
    Ok(parts.join("; "))
}

fn run_cases<'c>(
    ctx: &Ctx,
    holder: Impl,
    waiter: Impl,
    cases: impl Iterator<Item = &'c Case>,
) -> Result<String, String> {
    let (h, w) = (ctx.agent(holder), ctx.agent(waiter));
    let log = format!("missed-wakes-{holder}-to-{waiter}.jsonl");
    run_cases_with(ctx, h, w, cases, Bounds::MESSAGE, &log)
}

/// When a waiter counts as woken by the release, and when as not woken at all.
#[derive(Clone, Copy)]
struct Bounds {
    /// Granted within this many ms of the release's start: woken by its message.
    woken_ms: f64,
    /// Not granted this long after the release: missed (a Redisson waiter sleeps for the
    /// lock's TTL).
    missed: Duration,
}

impl Bounds {
    /// Replies as fast as the machine gives them.
    const MESSAGE: Self = Self {
        woken_ms: WAKE_BOUND_MS,
        missed: MISS_AFTER,
    };
}

fn run_cases_with<'c>(
    ctx: &Ctx,
    h: &Agent,
    w: &Agent,
    cases: impl Iterator<Item = &'c Case>,
    bounds: Bounds,
    log: &str,
) -> Result<String, String> {
    let path = ctx.logs.join(log);
    let mut log = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut summary = Vec::new();
    for case in cases {
        let iterations = ctx.options.repeat.div_ceil(case.share);
        let (name, owner, mut con) = (ctx.name("missed-wakes"), ctx.owner(), ctx.con()?);
        let mut watch = Watch::start(ctx, (case.channel)(&name))?;
        let run = Run {
            case,
            holder: h,
            waiter: w,
            name: &name,
            owner,
            bounds,
        };
        let mut delays = Vec::new();
        let mut missed = Vec::new();
        for i in 0..iterations {
            let record = run
                .iteration(&mut con, &mut watch, i)
                .map_err(|e| format!("{}, iteration {i}: {e}", case.label))?;
            writeln!(log, "{}", record.json).map_err(|e| e.to_string())?;
            delays.extend(record.woken);
            missed.extend(record.missed);
        }
        expect_free(&mut con, &name)?;
        delays.sort_by(f64::total_cmp);
        summary.push(format!(
            "{}, {iterations} iterations: {}/{} woken ({}){}",
            case.label,
            delays.len(),
            iterations as u64 * case.waiters,
            figures(&delays),
            if missed.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} missed by Redisson's race, each woken by a second message \
                     (iteration/owner {})",
                    missed.len(),
                    missed.join(", ")
                )
            }
        ));
    }
    Ok(summary.join("; "))
}

/// p50, p99 and max of sorted delays in ms.
pub(super) fn figures(sorted: &[f64]) -> String {
    match sorted.last() {
        Some(max) => format!(
            "p50 {:.1}, p99 {:.1}, max {max:.1} ms",
            percentile(sorted, 50.0),
            percentile(sorted, 99.0)
        ),
        None => "none".into(),
    }
}

/// One case on one name.
struct Run<'a> {
    case: &'a Case,
    holder: &'a Agent,
    waiter: &'a Agent,
    name: &'a str,
    owner: u64,
    bounds: Bounds,
}

/// What one iteration found.
struct Record {
    /// One line for the log.
    json: Value,
    /// The delays of the waiters woken by the release, in ms.
    woken: Vec<f64>,
    /// The waiters Redisson's race missed (`iteration/owner`).
    missed: Vec<String>,
}

impl Run<'_> {
    fn iteration(
        &self,
        con: &mut Connection,
        watch: &mut Watch,
        i: usize,
    ) -> Result<Record, String> {
        let (case, h, w) = (self.case, self.holder, self.waiter);
        // The runner's subscriber alone: the last iteration's waiters have left the channel (a
        // waiter that was granted unsubscribes soon after), so the subscription seen next is
        // the new waiters'.
        let left = watch.wait_subscribers(|n| n <= 1, ms(2_000))?;
        lock(h, case.held, self.name, self.owner)?;
        let owners: Vec<u64> = (1..=case.waiters).map(|k| self.owner + k).collect();
        let mut pending = Vec::new();
        for o in &owners {
            let id = w.send(lock_request(case.waits, self.name, *o, None))?;
            pending.push((*o, id));
        }
        ensure!(
            watch.wait_subscribers(|n| n > 1, ms(10_000))?,
            "{}'s waiters did not subscribe to {} within 10 s",
            w.label,
            watch.channel
        );
        match case.release {
            Release::After(pause) => thread::sleep(pause),
            Release::ScriptsQuiet(quiet) => {
                ensure!(
                    watch.wait_scripts_quiet(quiet, ms(10_000))?,
                    "scripts kept reaching the server for 10 s"
                );
            }
        }
        if case.release != Release::After(Duration::ZERO) {
            for (o, id) in &pending {
                ensure!(
                    w.poll(*id).is_none(),
                    "{}'s waiter {o} was granted while {} held the lock: {:?}",
                    w.label,
                    h.label,
                    w.poll(*id)
                );
            }
        }
        watch.before_release()?;
        let released = unlock(h, case.held, self.name, self.owner)?;
        let released_ns = ns_field(h, &released, "start_ns")?;
        watch.after_release()?;
        let wakes = wakes(w, &pending, released_ns, self.bounds)?;
        let mut json = json!({
            "case": case.label,
            "iteration": i,
            "holder": h.label,
            "waiter": w.label,
            "old_subscribers_left": left,
            "waiters": wakes.outcomes,
        });
        let mut missed = Vec::new();
        if !wakes.slow.is_empty() {
            let label: String = case
                .label
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let tag = format!("{}-{i}", label.replace("--", "-"));
            let diagnosis = watch.explain(w, case.message, &wakes.slow, &tag)?;
            json["diagnosis"] = diagnosis.json.clone();
            diagnosis.accept()?;
            missed.extend(wakes.slow.iter().map(|s| format!("{i}/{}", s.owner)));
        }
        self.expect_granted(con, &owners)?;
        for o in &owners {
            unlock(w, case.waits, self.name, *o)?;
        }
        expect_free(con, self.name)?;
        Ok(Record {
            json,
            woken: wakes.woken,
            missed,
        })
    }

    /// After the grants: the waiters hold the lock, and nobody else.
    fn expect_granted(&self, con: &mut Connection, owners: &[u64]) -> Result<(), String> {
        let w = self.waiter;
        match self.case.waits {
            "read" => {
                let readers: Vec<&Agent> = owners.iter().map(|_| w).collect();
                expect_readers(con, self.name, &readers).map(drop)
            }
            "write" => {
                let state = key_state(con, self.name)?;
                ensure!(
                    state.fields.len() == 2
                        && state.fields.contains(&("mode".into(), "write".into())),
                    "{}: after the writer's grant: {:?}",
                    self.name,
                    state.fields
                );
                Ok(())
            }
            _ => expect_holder(con, self.name, w, 1).map(drop),
        }
    }
}

/// A waiter not woken by the release's message.
pub(super) struct Slow {
    owner: u64,
    id: u64,
    /// When it was granted after all, in ms after the release's start (a Rust waiter's
    /// re-check); `None`: not granted.
    delay: Option<f64>,
}

/// How the waiters of one release fared.
pub(super) struct Wakes {
    /// `{owner, ms}` per waiter (`ms` null: not granted at all).
    pub(super) outcomes: Vec<Value>,
    /// The delays of those woken by the release's message.
    pub(super) woken: Vec<f64>,
    pub(super) slow: Vec<Slow>,
}

/// Waits for the grants of `pending` (owner, request), at most [`MISS_AFTER`] in all, and
/// times each from `released_ns`. A failed request is an error.
pub(super) fn woken(
    waiter: &Agent,
    pending: &[(u64, u64)],
    released_ns: u64,
) -> Result<Wakes, String> {
    wakes(waiter, pending, released_ns, Bounds::MESSAGE)
}

fn wakes(
    waiter: &Agent,
    pending: &[(u64, u64)],
    released_ns: u64,
    bounds: Bounds,
) -> Result<Wakes, String> {
    let deadline = Instant::now() + bounds.missed;
    let mut wakes = Wakes {
        outcomes: Vec::new(),
        woken: Vec::new(),
        slow: Vec::new(),
    };
    for &(owner, id) in pending {
        let within = deadline.saturating_duration_since(Instant::now());
        let delay = match waiter.wait(id, within) {
            Ok(reply) => {
                ensure!(
                    reply["ok"] == true && reply["acquired"] != false,
                    "{}'s waiter {owner}: {reply}",
                    waiter.label
                );
                Some(millis_between(
                    released_ns,
                    ns_field(waiter, &reply, "end_ns")?,
                ))
            }
            Err(_) => None,
        };
        wakes.outcomes.push(json!({"owner": owner, "ms": delay}));
        match delay {
            Some(ms) if ms > 0.0 && ms < bounds.woken_ms => wakes.woken.push(ms),
            _ => wakes.slow.push(Slow { owner, id, delay }),
        }
    }
    Ok(wakes)
}

/// What the runner watches of one channel around a release: the data nodes (subscribers,
/// publications) and a subscriber of its own, in the flavour of the Java side.
pub(super) struct Watch<'a> {
    ctx: &'a Ctx,
    channel: String,
    nodes: Nodes,
    observer: Subscriber,
    /// Messages the runner's subscriber had received before the release.
    heard: usize,
    before: Vec<NodeState>,
    after: Vec<NodeState>,
}

impl<'a> Watch<'a> {
    /// Connects to every data node and subscribes to `channel`: one more subscriber of it
    /// from now on.
    pub(super) fn start(ctx: &'a Ctx, channel: String) -> Result<Self, String> {
        let observer = Subscriber::start(ctx, std::slice::from_ref(&channel))?;
        Ok(Self {
            ctx,
            nodes: Nodes::connect(ctx)?,
            observer,
            channel,
            heard: 0,
            before: Vec::new(),
            after: Vec::new(),
        })
    }

    /// Waits (bounded by `limit`) until the subscribers of the channel on all nodes, classic
    /// and sharded, the runner's own included, satisfy `enough`; `false` if they never did.
    pub(super) fn wait_subscribers(
        &mut self,
        enough: impl Fn(i64) -> bool,
        limit: Duration,
    ) -> Result<bool, String> {
        let deadline = Instant::now() + limit;
        loop {
            let total: i64 = self
                .nodes
                .subscribers(&self.channel)?
                .iter()
                .map(|(n, s)| n + s)
                .sum();
            if enough(total) {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            thread::sleep(ms(2));
        }
    }

    /// Waits (bounded by `limit`) until no script has reached any node for `quiet`; `false`
    /// if scripts kept coming. Polls every 5 ms.
    fn wait_scripts_quiet(&mut self, quiet: Duration, limit: Duration) -> Result<bool, String> {
        let deadline = Instant::now() + limit;
        let mut last = None;
        let mut since = Instant::now();
        while Instant::now() < deadline {
            let scripts: u64 = self
                .nodes
                .snapshot(&self.channel)?
                .iter()
                .map(|s| s.scripts)
                .sum();
            if last != Some(scripts) {
                last = Some(scripts);
                since = Instant::now();
            } else if since.elapsed() >= quiet {
                return Ok(true);
            }
            thread::sleep(ms(5));
        }
        Ok(false)
    }

    /// Right before the release: what the nodes and the runner's subscriber show.
    pub(super) fn before_release(&mut self) -> Result<(), String> {
        self.heard = self.observer.payloads(Duration::ZERO).len();
        self.before = self.nodes.snapshot(&self.channel)?;
        Ok(())
    }

    /// Right after the release returned.
    pub(super) fn after_release(&mut self) -> Result<(), String> {
        self.after = self.nodes.snapshot(&self.channel)?;
        Ok(())
    }

    /// Why the waiters in `slow` were not woken by the release (`message`, published by it
    /// with the holder's verb); for those not granted at all, the same message once more from
    /// the runner, with the waiter's verb. `tag` names the `jstack` file of a Java waiter.
    /// See [`Diagnosis::redissons_race`].
    pub(super) fn explain(
        &mut self,
        waiter: &Agent,
        message: &str,
        slow: &[Slow],
        tag: &str,
    ) -> Result<Diagnosis, String> {
        let received: Vec<String> = self.observer.payloads(Duration::ZERO)[self.heard..].to_vec();
        let now = self.nodes.snapshot(&self.channel)?;
        let published = published(&self.before, &self.after);
        let sharded = listens_sharded(self.ctx, waiter);
        let verb = if sharded { "spublish" } else { "publish" };
        let with_verb: u64 = published
            .iter()
            .filter(|(_, v, _)| *v == verb)
            .map(|(.., n)| n)
            .sum();
        let clients = self.nodes.pubsub_clients();
        let java = waiter.label.starts_with("java");
        let stack = match waiter.pid() {
            Some(pid) if java => {
                let file = self.ctx.logs.join(format!("missed-wakes-jstack-{tag}.txt"));
                Some(parked_in_redisson(pid, &file))
            }
            _ => None,
        };
        let not_granted: Vec<&Slow> = slow.iter().filter(|s| s.delay.is_none()).collect();
        let mut second = Vec::new();
        if !not_granted.is_empty() {
            self.nodes.publish(&self.channel, message, sharded)?;
            let sent = Instant::now();
            for s in &not_granted {
                let within =
                    (sent + SECOND_MESSAGE_BOUND).saturating_duration_since(Instant::now());
                let granted = waiter.wait(s.id, within).is_ok_and(|r| r["ok"] == true);
                second.push(json!({
                    "owner": s.owner,
                    "granted": granted,
                    "ms": granted.then(|| sent.elapsed().as_secs_f64() * 1e3),
                }));
            }
        }
        let parked = stack
            .as_ref()
            .and_then(|s| s["threads_parked_in_a_lock_wait"].as_u64())
            .unwrap_or(0);
        let redissons_race = java
            && not_granted.len() == slow.len()
            && with_verb == 1
            && received.iter().any(|p| p == message)
            && parked >= slow.len() as u64
            && second.iter().all(|s| s["granted"] == true);
        let json = json!({
            "waiter_listens": if sharded { "sharded" } else { "classic" },
            "subscribers_before": states_json(&self.before),
            "subscribers_now": states_json(&now),
            "published_by_the_release": published
                .iter()
                .map(|(node, verb, n)| json!({"node": node, "verb": verb, "count": n}))
                .collect::<Vec<_>>(),
            "runner_subscriber_received": received,
            "pubsub_clients": clients,
            "jstack": stack,
            "second_message": second,
            "redissons_race": redissons_race,
        });
        Ok(Diagnosis {
            json,
            redissons_race,
        })
    }
}

/// Whether `agent` listens with `SSUBSCRIBE`: in a cluster of servers with sharded pub/sub,
/// unless its flavour is classic (`both` listens both ways: sharded counts).
fn listens_sharded(ctx: &Ctx, agent: &Agent) -> bool {
    let options = &ctx.options;
    let flavour = if agent.label.starts_with("rust") {
        options.rust_pubsub.as_deref().unwrap_or(&options.pubsub)
    } else {
        options.pubsub.as_str()
    };
    ctx.server.is_cluster() && flavour != "classic" && ctx.server.has_sharded_pubsub()
}

/// What [`Watch::explain`] found.
pub(super) struct Diagnosis {
    pub(super) json: Value,
    /// The miss is Redisson's race (RELIABILITY.md, "What the suite found in Redisson"):
    /// every waiter missed is Redisson's and was not granted at all (it sleeps for the lock's
    /// TTL), the release published the message once with the verb the waiter listens with,
    /// the runner's own subscriber of that flavour received it, `jstack` shows at least as
    /// many of the JVM's threads parked in a lock's wait for a message, and a second message
    /// granted every one of them.
    pub(super) redissons_race: bool,
}

impl Diagnosis {
    /// `Ok` for Redisson's race; otherwise the error the scenario fails with.
    pub(super) fn accept(&self) -> Result<(), String> {
        if self.redissons_race {
            Ok(())
        } else {
            Err(format!(
                "waiters not woken by the release within {WAKE_BOUND_MS} ms, and not by \
                 Redisson's race: {}",
                self.json
            ))
        }
    }
}

/// What one data node shows of the channel and of publishing.
#[derive(Clone)]
struct NodeState {
    node: String,
    /// `PUBSUB NUMSUB`, `PUBSUB SHARDNUMSUB` (0 without sharded pub/sub).
    numsub: i64,
    shardnumsub: i64,
    /// `INFO commandstats` calls of `PUBLISH` and `SPUBLISH` (scripts' calls included).
    publish: u64,
    spublish: u64,
    /// Calls of `EVAL`, `EVALSHA` and their read-only forms.
    scripts: u64,
}

fn states_json(states: &[NodeState]) -> Value {
    Value::Array(
        states
            .iter()
            .filter(|s| s.numsub > 0 || s.shardnumsub > 0)
            .map(|s| json!({"node": s.node, "numsub": s.numsub, "shardnumsub": s.shardnumsub}))
            .collect(),
    )
}

/// The publications between two snapshots: (node, verb, count).
fn published(before: &[NodeState], after: &[NodeState]) -> Vec<(String, &'static str, u64)> {
    let mut out = Vec::new();
    for (b, a) in before.iter().zip(after) {
        for (verb, n) in [
            ("publish", a.publish.saturating_sub(b.publish)),
            ("spublish", a.spublish.saturating_sub(b.spublish)),
        ] {
            if n > 0 {
                out.push((b.node.clone(), verb, n));
            }
        }
    }
    out
}

/// The data nodes, each on a connection of its own: every node of a cluster, the server, or
/// the master behind Sentinel.
struct Nodes {
    nodes: Vec<(String, redis::Connection)>,
    cluster: bool,
}

impl Nodes {
    fn connect(ctx: &Ctx) -> Result<Self, String> {
        let mut nodes = Vec::new();
        match &ctx.server {
            Backend::Single(server) => {
                nodes.push((format!("server {}", server.port()), server.try_connect()?));
            }
            Backend::Sentinel(setup) => {
                let addr = setup.current_master_addr()?;
                let master = setup
                    .server_at(addr)
                    .ok_or_else(|| format!("no data node at {addr}"))?;
                nodes.push((format!("master {}", master.port()), master.try_connect()?));
            }
            Backend::Cluster(cluster) => {
                for node in cluster.nodes() {
                    let server = cluster.server(node.index);
                    let mut con = server.try_connect()?;
                    let role: Vec<redis::Value> = redis::cmd("ROLE")
                        .query(&mut con)
                        .map_err(|e| format!("ROLE: {e}"))?;
                    let role = match role.first() {
                        Some(redis::Value::BulkString(r)) => {
                            String::from_utf8_lossy(r).into_owned()
                        }
                        other => format!("{other:?}"),
                    };
                    nodes.push((format!("{role} {}", server.port()), con));
                }
            }
        }
        Ok(Self {
            nodes,
            cluster: ctx.server.is_cluster(),
        })
    }

    /// `PUBSUB NUMSUB` and `PUBSUB SHARDNUMSUB` of `channel` on every node (sharded: 0
    /// without sharded pub/sub, before 7.0).
    fn subscribers(&mut self, channel: &str) -> Result<Vec<(i64, i64)>, String> {
        let mut counts = Vec::new();
        for (node, con) in &mut self.nodes {
            let mut count = |verb: &str| {
                node_subscribers(con, verb, channel).map_err(|e| format!("{node}: {e}"))
            };
            counts.push((count("NUMSUB")?, count("SHARDNUMSUB")?));
        }
        Ok(counts)
    }

    /// Every node's subscribers of `channel` and its publish calls so far.
    fn snapshot(&mut self, channel: &str) -> Result<Vec<NodeState>, String> {
        let counts = self.subscribers(channel)?;
        let mut states = Vec::new();
        for ((node, con), (numsub, shardnumsub)) in self.nodes.iter_mut().zip(counts) {
            let stats: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(con)
                .map_err(|e| format!("{node}: INFO commandstats: {e}"))?;
            states.push(NodeState {
                node: node.clone(),
                numsub,
                shardnumsub,
                publish: calls(&stats, "publish"),
                spublish: calls(&stats, "spublish"),
                scripts: ["eval", "evalsha", "eval_ro", "evalsha_ro"]
                    .iter()
                    .map(|c| calls(&stats, c))
                    .sum(),
            });
        }
        Ok(states)
    }

    /// `CLIENT LIST TYPE pubsub` of every node with a pub/sub client: address, subscription
    /// counts, age and name of each.
    fn pubsub_clients(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for (node, con) in &mut self.nodes {
            let Ok(list) = redis::cmd("CLIENT")
                .arg("LIST")
                .arg("TYPE")
                .arg("pubsub")
                .query::<String>(con)
            else {
                continue;
            };
            for line in list.lines() {
                let keep: Vec<&str> = line
                    .split(' ')
                    .filter(|kv| {
                        [
                            "addr=",
                            "age=",
                            "sub=",
                            "ssub=",
                            "psub=",
                            "name=",
                            "lib-name=",
                        ]
                        .iter()
                        .any(|k| kv.starts_with(k))
                    })
                    .collect();
                out.push(format!("{node}: {}", keep.join(" ")));
            }
        }
        out
    }

    /// Publishes `message` on `channel` once, as a release would: `SPUBLISH` on the master of
    /// the channel's slot, or `PUBLISH` there (which a cluster forwards to every node).
    fn publish(&mut self, channel: &str, message: &str, sharded: bool) -> Result<(), String> {
        let verb = if sharded { "SPUBLISH" } else { "PUBLISH" };
        let index = self.master_of(channel)?;
        let (node, con) = &mut self.nodes[index];
        redis::cmd(verb)
            .arg(channel)
            .arg(message)
            .query::<i64>(con)
            .map(drop)
            .map_err(|e| format!("{node}: {verb}: {e}"))
    }

    /// The index of the node serving `channel`'s slot: the only node but in a cluster, where
    /// it is the one node that answers a key query about it (the others redirect).
    fn master_of(&mut self, channel: &str) -> Result<usize, String> {
        if !self.cluster {
            return Ok(0);
        }
        self.nodes
            .iter_mut()
            .position(|(_, con)| redis::cmd("EXISTS").arg(channel).query::<i64>(con).is_ok())
            .ok_or_else(|| format!("no node serves the slot of {channel}"))
    }
}

/// `calls=` of `cmdstat_<command>` in an `INFO commandstats` reply (0 if never called).
fn calls(stats: &str, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `jstack` of the JVM `pid`, written to `file`; how many of its threads are parked in a
/// lock's wait for a message (`Semaphore.tryAcquire` under `RedissonLock.lock`). Bounded:
/// `jstack` is ended (by its pid) after 20 s.
fn parked_in_redisson(pid: u32, file: &std::path::Path) -> Value {
    let out = match std::fs::File::create(file) {
        Ok(out) => out,
        Err(e) => return json!({"error": format!("{}: {e}", file.display())}),
    };
    let child = Command::new("jstack")
        .arg(pid.to_string())
        .stdout(out)
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return json!({"error": format!("jstack: {e}")}),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => thread::sleep(ms(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return json!({"error": "jstack did not finish within 20 s"});
            }
        }
    }
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let parked = text
        .split("\n\n")
        .filter(|thread| {
            thread.contains("Semaphore.tryAcquire") && thread.contains("RedissonLock.lock")
        })
        .count();
    json!({
        "file": file.file_name().map(|f| f.to_string_lossy().into_owned()),
        "threads_parked_in_a_lock_wait": parked,
    })
}

/// `writer_side` holds the write lock while three readers of the other side wait; its release
/// (`1`) wakes all of them at once, each within [`WAKE_BOUND_MS`]; they then hold together.
/// Repeated a few times for the latency figures. A Redisson reader that misses the message by
/// Redisson's own race (`LockPubSub` wakes only the readers already parked: RELIABILITY.md,
/// "What the suite found in Redisson") is reported, with the evidence [`Watch`] takes,
/// and woken by a second message; any other miss fails.
pub(super) fn write_wakes_readers(
    ctx: &Ctx,
    writer_side: Impl,
    reader_side: Impl,
) -> Result<String, String> {
    const READERS: u64 = 3;
    let (w, r) = (ctx.agent(writer_side), ctx.agent(reader_side));
    let (name, owner, mut con) = (ctx.name("rw-wake"), ctx.owner(), ctx.con()?);
    let channel = rw_channel(&name);
    let mut watch = Watch::start(ctx, channel.clone())?;
    let rounds = if ctx.options.smoke { 3 } else { 10 };
    let mut latencies = Vec::new();
    let mut missed = Vec::new();
    for round in 0..rounds {
        lock(w, "write", &name, owner)?;
        let readers: Vec<u64> = (1..=READERS).map(|i| owner + i).collect();
        let mut pending = Vec::new();
        for o in &readers {
            pending.push((*o, r.send(lock_request("read", &name, *o, None))?));
        }
        let waiting: Vec<(&Agent, u64)> = pending.iter().map(|(_, id)| (r, *id)).collect();
        // Two subscribers: the readers' agent's, and the runner's.
        wait_waiting(&mut con, &channel, 2, &waiting)?;
        watch.before_release()?;
        let released = unlock(w, "write", &name, owner)?;
        let released_ns = ns_field(w, &released, "start_ns")?;
        watch.after_release()?;
        let wakes = woken(r, &pending, released_ns)?;
        latencies.extend(&wakes.woken);
        if !wakes.slow.is_empty() {
            let tag = format!("rw-wake-{}-{round}", r.label.replace('#', ""));
            watch
                .explain(r, "1", &wakes.slow, &tag)?
                .accept()
                .map_err(|e| format!("round {round}: {e}"))?;
            missed.push(format!("round {round}: {}", wakes.slow.len()));
        }
        let holders: Vec<&Agent> = readers.iter().map(|_| r).collect();
        expect_readers(&mut con, &name, &holders)?;
        for o in &readers {
            unlock(r, "read", &name, *o)?;
        }
        expect_free(&mut con, &name)?;
    }
    latencies.sort_by(f64::total_cmp);
    Ok(format!(
        "{rounds} rounds x {READERS} readers, write unlock start -> each reader acquired: {}{}",
        figures(&latencies),
        if missed.is_empty() {
            String::new()
        } else {
            format!(
                "; missed by Redisson's race, woken by a second message: {}",
                missed.join(", ")
            )
        }
    ))
}

/// How long a read-write lock under `stress` may be free, with no message on its channel, while
/// workers still wait, before [`StallWatch`] looks for Redisson's race: far longer than a
/// handoff (a few ms) and than the crate's waiters' re-check (1 s).
const STALL_AFTER: Duration = Duration::from_secs(3);
/// The stalls one `stress` run may show; one more fails it.
const MAX_STALLS: usize = 5;

/// One `stress` worker still waiting for its reply: its agent, kind, owner and request.
pub(super) struct Waiting<'a> {
    pub(super) agent: &'a Agent,
    pub(super) kind: &'static str,
    pub(super) owner: u64,
    pub(super) id: u64,
}

impl Waiting<'_> {
    fn answered(&self) -> bool {
        self.agent.poll(self.id).is_some()
    }

    /// `<agent> <kind> owner <owner>`.
    pub(super) fn describe(&self) -> String {
        format!("{} {} owner {}", self.agent.label, self.kind, self.owner)
    }
}

/// Watches a read-write lock through a `stress` run for Redisson's race (RELIABILITY.md, "What
/// the suite found in Redisson"): a Redisson waiter, reader or writer, that gets the lock's TTL
/// and has not parked yet when a write unlock's `1` arrives gets no permit from `LockPubSub`
/// and sleeps for that TTL (a long-lived agent's lease: ten minutes here), with the lock free.
///
/// A stall is the lock free and its channel silent for [`STALL_AFTER`] since its last message
/// while workers wait. It is Redisson's race when every waiting worker is Java, the last
/// message on the channel was `1`, `jstack` shows at least as many threads of each waiting JVM
/// parked in a lock's wait for a message, and a `1` the runner publishes (the waiters' verb)
/// ends the stall at once (a new release on the channel, or a reply, within
/// [`SECOND_MESSAGE_BOUND`]). Anything else fails the run: a Rust worker waiting on a free lock
/// that long is the crate's fault.
pub(super) struct StallWatch<'a> {
    watch: Watch<'a>,
    name: String,
    /// Messages heard so far, and since when no new one came.
    heard: usize,
    quiet_since: Instant,
    /// One line per stall explained.
    stalls: Vec<String>,
}

impl<'a> StallWatch<'a> {
    /// Subscribes the runner to the channel of the read-write lock `name`.
    pub(super) fn start(ctx: &'a Ctx, name: &str) -> Result<Self, String> {
        Ok(Self {
            watch: Watch::start(ctx, rw_channel(name))?,
            name: name.to_string(),
            heard: 0,
            quiet_since: Instant::now(),
            stalls: Vec::new(),
        })
    }

    /// Called while `waiting` wait: `Ok` unless a stall is not Redisson's race.
    pub(super) fn check(
        &mut self,
        con: &mut Connection,
        waiting: &[Waiting<'_>],
    ) -> Result<(), String> {
        let heard = self.watch.observer.payloads(Duration::ZERO);
        if heard.len() != self.heard {
            self.heard = heard.len();
            self.quiet_since = Instant::now();
            return Ok(());
        }
        let quiet = self.quiet_since.elapsed();
        // Before the first message there is no release to have missed (a slow start is the
        // run's time bound's to report).
        if quiet < STALL_AFTER || waiting.is_empty() || heard.is_empty() {
            return Ok(());
        }
        let state = key_state(con, &self.name)?;
        if state.kind != "none" {
            // Held: a holder that does not come back is the run's time bound's to report.
            return Ok(());
        }
        let who: Vec<String> = waiting.iter().map(Waiting::describe).collect();
        let stall = format!(
            "{} free and its channel silent for {:.1} s while {who:?} wait",
            self.name,
            quiet.as_secs_f64()
        );
        ensure!(
            waiting.iter().all(|w| w.agent.label.starts_with("java")),
            "{stall}: a Rust worker waits on a free lock (the crate re-checks every second)"
        );
        let last = heard.last().cloned();
        ensure!(
            last.as_deref() == Some("1"),
            "{stall}; the last message was {last:?}, and Redisson's race misses a 1 only"
        );
        let n = self.stalls.len() + 1;
        let mut stacks = Vec::new();
        let mut agents: Vec<&Agent> = Vec::new();
        for w in waiting {
            if !agents.iter().any(|a| a.label == w.agent.label) {
                agents.push(w.agent);
            }
        }
        for agent in &agents {
            let count = waiting
                .iter()
                .filter(|w| w.agent.label == agent.label)
                .count();
            let tag = agent.label.replace('#', "");
            let file = self
                .watch
                .ctx
                .logs
                .join(format!("stress-stall-{n}-{tag}-jstack.txt"));
            let stack = match agent.pid() {
                Some(pid) => parked_in_redisson(pid, &file),
                None => json!({"error": "exited"}),
            };
            let parked = stack["threads_parked_in_a_lock_wait"].as_u64().unwrap_or(0);
            ensure!(
                parked >= count as u64,
                "{stall}; {} has {count} waiting but jstack shows {parked} threads parked in a \
                 lock's wait: {stack}",
                agent.label
            );
            stacks.push(format!(
                "{}: {parked} parked, {} in the logs",
                agent.label,
                file.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
        let sharded = listens_sharded(self.watch.ctx, agents[0]);
        let channel = self.watch.channel.clone();
        self.watch.nodes.publish(&channel, "1", sharded)?;
        let sent = Instant::now();
        // The runner hears its own 1; a release after it, or a reply, is progress.
        let progressed = loop {
            let more = self.watch.observer.payloads(Duration::ZERO).len() > self.heard + 1;
            if more || waiting.iter().any(|w| w.answered()) {
                break true;
            }
            if sent.elapsed() >= SECOND_MESSAGE_BOUND {
                break false;
            }
            thread::sleep(ms(5));
        };
        ensure!(
            progressed,
            "{stall}; {stacks:?}; a 1 from the runner did not end it within {SECOND_MESSAGE_BOUND:?}"
        );
        self.stalls.push(format!(
            "{who:?} after {:.1} s quiet, woken {:.0} ms after the runner's 1 ({})",
            quiet.as_secs_f64(),
            sent.elapsed().as_secs_f64() * 1e3,
            stacks.join(", ")
        ));
        ensure!(
            self.stalls.len() <= MAX_STALLS,
            "more than {MAX_STALLS} stalls by Redisson's race: {:?}",
            self.stalls
        );
        self.heard = self.watch.observer.payloads(Duration::ZERO).len();
        self.quiet_since = Instant::now();
        Ok(())
    }

    /// The stalls explained, for the scenario's line: empty when there were none.
    pub(super) fn report(&self) -> String {
        if self.stalls.is_empty() {
            return String::new();
        }
        format!(
            "; {} stall(s) by Redisson's race, each ended by a 1 from the runner: {}",
            self.stalls.len(),
            self.stalls.join("; ")
        )
    }
}
