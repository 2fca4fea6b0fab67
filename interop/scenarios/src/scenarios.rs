//! The scenarios of issue 3, each a function of (context, holder side, other side).
//!
//! Every scenario checks exact effects in Redis (key type, fields, values, TTL ranges,
//! messages) besides the agents' answers. Latencies are reported; the only time bounds
//! asserted are the ones that tell what woke a waiter (a message, not a lease expiry or a
//! periodic re-check), each far from what the machine needs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::server::Connection;
use serde_json::json;

use crate::agent::{Agent, CALL_TIMEOUT, Impl};
use crate::ctx::*;
use crate::server::{KeyState, all_keys, key_state, numsub, query};

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        let holds: bool = $cond;
        if !holds {
            return Err(format!($($fmt)+));
        }
    };
}

macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($fmt:tt)+) => {{
        match (&$left, &$right) {
            (left, right) => {
                if left != right {
                    return Err(format!("{}: got {:?}, expected {:?}", format!($($fmt)+), left, right));
                }
            }
        }
    }};
}

// The fair-lock scenarios live in their own file, as a child module so that they share this
// module's helpers and macros.
#[path = "fair.rs"]
mod fair;

// The read-write lock's scenarios: a child module, so it shares the helpers and macros above.
#[path = "rwlock.rs"]
mod rwlock;

// The semaphore, permit-expirable semaphore and count-down latch scenarios: a child module, so
// it shares the helpers and macros above.
#[path = "semaphore.rs"]
mod semaphore;

// Inspection of Java-made structures with the CLI: a child module, so it shares the helpers
// and macros above.
#[path = "inspect.rs"]
mod inspect;

// Interop of the lock variants (fenced, spin, non-reentrant, non-reentrant fair): a child
// module, so it shares the helpers and macros above.
#[path = "variants.rs"]
mod variants;

// Key prefixes and Sentinel (issue 13): a child module, like `variants`.
#[path = "topology.rs"]
mod topology;

// The object and expiry ops, psem_try_release_many and renewing permits: a child module, like
// `variants`.
#[path = "object.rs"]
mod object;

// Missed wake-ups counted over repeated handoffs (`--repeat`): a child module, like `variants`.
#[path = "wakeup.rs"]
mod wakeup;

type Run = fn(&Ctx, Impl, Impl) -> Result<String, String>;

pub struct Scenario {
    pub name: &'static str,
    /// Part of the smoke subset run against the older Redisson line.
    pub smoke: bool,
    /// Run twice, once with each side holding; otherwise once, holder/waiter unused.
    pub directed: bool,
    /// Also run on a Redis Cluster (`--mode cluster`): it looks at Redis only through keys,
    /// never through a plain subscriber or `PUBSUB NUMSUB` (sharded channels are not there).
    /// The same scenarios run behind Sentinel (`--mode sentinel`).
    pub cluster: bool,
    /// Only with `--mode sentinel` (a failover of the Sentinels' master).
    pub sentinel_only: bool,
    /// Starts a TLS server of its own: skipped on a server build without TLS.
    pub tls: bool,
    pub run: Run,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "protocol",
        smoke: true,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: protocol,
    },
    Scenario {
        name: "exclusion",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: exclusion,
    },
    Scenario {
        name: "wake-up by message",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: wake_up,
    },
    Scenario {
        name: "reentrancy",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: reentrancy,
    },
    Scenario {
        name: "queries agree",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: queries_agree,
    },
    Scenario {
        name: "not_held",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: not_held,
    },
    Scenario {
        name: "force_unlock",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: force_unlock_wakes,
    },
    Scenario {
        name: "watchdog",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: watchdog,
    },
    Scenario {
        name: "paused holder",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: paused_holder,
    },
    Scenario {
        name: "explicit lease",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: explicit_lease,
    },
    Scenario {
        name: "same bytes in redis",
        smoke: true,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: same_bytes,
    },
    Scenario {
        name: "mixed stress",
        smoke: false,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: mixed_stress,
    },
    Scenario {
        name: "fair order",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: fair::fair_order,
    },
    Scenario {
        name: "fair head-only wake-up",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: fair::fair_head_only,
    },
    Scenario {
        name: "fair dead head",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: fair::fair_dead_head,
    },
    Scenario {
        name: "fair stress",
        smoke: false,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: fair::fair_stress,
    },
    Scenario {
        name: "rw readers share",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: rwlock::readers_share,
    },
    Scenario {
        name: "rw write wakes readers",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: wakeup::write_wakes_readers,
    },
    Scenario {
        name: "rw watchdog",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: rwlock::watchdog_readers,
    },
    Scenario {
        name: "rw mixed stress",
        smoke: false,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: rwlock::mixed_stress,
    },
    Scenario {
        name: "semaphore wake-up",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: semaphore::sem_wake_up,
    },
    Scenario {
        name: "semaphore stress",
        smoke: false,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: semaphore::sem_stress,
    },
    Scenario {
        name: "psem killed holder",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: semaphore::psem_killed_holder,
    },
    Scenario {
        name: "object expiry",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: object::object_expiry,
    },
    Scenario {
        name: "psem try_release_many",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: object::psem_try_release_many,
    },
    Scenario {
        name: "psem renewed for java",
        smoke: false,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: object::psem_renewed_for_java,
    },
    Scenario {
        name: "psem ids cross sides",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: semaphore::psem_ids_cross,
    },
    Scenario {
        name: "latch wake-up",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: semaphore::latch_wake_up,
    },
    Scenario {
        name: "fenced tokens",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: variants::fenced_tokens,
    },
    Scenario {
        name: "fenced wake-up",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: variants::fenced_wake_up,
    },
    Scenario {
        name: "spin polling",
        smoke: true,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: variants::spin_polling,
    },
    // RNonReentrantLock and RNonReentrantFairLock are Redisson 4.4.0+: not in the smoke set,
    // which runs against 3.52.0.
    Scenario {
        name: "nonreentrant",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: variants::nonreentrant,
    },
    Scenario {
        name: "nonreentrant fair",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: variants::nonreentrant_fair,
    },
    // Fenced only, which Redisson 3.52.0 has: part of the smoke set.
    Scenario {
        name: "variants mixed stress",
        smoke: true,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: variants::variants_stress,
    },
    Scenario {
        name: "inspect java structures",
        smoke: false,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: inspect::inspect_java,
    },
    Scenario {
        name: "watch a java handoff",
        smoke: false,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: inspect::watch_java_handoff,
    },
    Scenario {
        name: "lock events of a java holder",
        smoke: true,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: inspect::events_java,
    },
    Scenario {
        name: "cli over tls with a prefix",
        smoke: false,
        directed: false,
        cluster: false,
        sentinel_only: false,
        tls: true,
        run: inspect::cli_tls_prefix,
    },
    Scenario {
        name: "name prefix",
        smoke: true,
        directed: true,
        cluster: false,
        sentinel_only: false,
        tls: false,
        run: topology::name_prefix,
    },
    Scenario {
        name: "acl user",
        smoke: true,
        directed: true,
        cluster: false,
        sentinel_only: false,
        tls: false,
        run: topology::acl_user,
    },
    Scenario {
        name: "tls",
        smoke: true,
        directed: true,
        cluster: false,
        sentinel_only: false,
        tls: true,
        run: topology::tls,
    },
    // Not in the smoke set: the cluster runs of CI with both flavours have "rw write wakes
    // readers" there, and this one runs in the full runs (one server, cluster auto).
    Scenario {
        name: "missed wakes",
        smoke: false,
        directed: true,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: wakeup::missed_wakes,
    },
    Scenario {
        name: "missed wakes within a language",
        smoke: false,
        directed: false,
        cluster: true,
        sentinel_only: false,
        tls: false,
        run: wakeup::missed_wakes_alone,
    },
    // On demand (`--repeat`): several seconds per Redisson miss.
    Scenario {
        name: "missed wakes, reply delayed",
        smoke: false,
        directed: false,
        cluster: false,
        sentinel_only: false,
        tls: false,
        run: wakeup::missed_wakes_reply_delayed,
    },
    Scenario {
        name: "sentinel failover",
        smoke: true,
        directed: false,
        cluster: true,
        sentinel_only: true,
        tls: false,
        run: topology::sentinel_failover,
    },
];

pub struct PlannedRun {
    pub scenario: &'static Scenario,
    pub holder: Impl,
    pub waiter: Impl,
}

impl PlannedRun {
    pub fn label(&self) -> String {
        if self.scenario.directed {
            format!(
                "{} ({} holds, {} waits)",
                self.scenario.name, self.holder, self.waiter
            )
        } else {
            format!("{} (rust and java)", self.scenario.name)
        }
    }
}

pub fn plan(options: &Options) -> Vec<PlannedRun> {
    let mut runs = Vec::new();
    for scenario in SCENARIOS {
        if options.smoke && !scenario.smoke {
            continue;
        }
        if (options.cluster || options.sentinel) && !scenario.cluster {
            continue;
        }
        if scenario.sentinel_only && !options.sentinel {
            continue;
        }
        if options
            .only
            .as_ref()
            .is_some_and(|only| !scenario.name.contains(only.as_str()))
        {
            continue;
        }
        if scenario.directed {
            runs.push(PlannedRun {
                scenario,
                holder: Impl::Java,
                waiter: Impl::Rust,
            });
            runs.push(PlannedRun {
                scenario,
                holder: Impl::Rust,
                waiter: Impl::Java,
            });
        } else {
            runs.push(PlannedRun {
                scenario,
                holder: Impl::Rust,
                waiter: Impl::Java,
            });
        }
    }
    runs
}

/// Upper bound for "woken by the unlock message": far above a local round trip, and below
/// both the Rust agent's 1 s re-check and any lease used here.
const WAKE_BOUND_MS: f64 = 500.0;

// ---- helpers --------------------------------------------------------------------------------

/// The single field of the lock hash, checked to be `agent`'s: `<client_id>:<decimal>`.
fn holder_field(state: &KeyState, agent: &Agent) -> Result<String, String> {
    ensure_eq!(state.kind.as_str(), "hash", "lock key type");
    ensure!(
        state.fields.len() == 1,
        "lock hash should have one field: {:?}",
        state.fields
    );
    let field = &state.fields[0].0;
    let thread = field.strip_prefix(&format!("{}:", agent.client_id));
    ensure!(
        thread.is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())),
        "field {field:?} is not <client_id of {}>:<decimal>",
        agent.label
    );
    Ok(field.clone())
}

/// Checks `agent` holds `name` with `count` holds, and returns the key's state.
fn expect_holder(
    con: &mut Connection,
    name: &str,
    agent: &Agent,
    count: u32,
) -> Result<KeyState, String> {
    let state = key_state(con, name)?;
    holder_field(&state, agent)?;
    ensure_eq!(
        state.fields[0].1,
        count.to_string(),
        "hold count in the hash of {name}"
    );
    ensure!(state.pttl > 0, "{name} should expire, PTTL {}", state.pttl);
    Ok(state)
}

fn expect_free(con: &mut Connection, name: &str) -> Result<(), String> {
    let state = key_state(con, name)?;
    ensure_eq!(state.kind.as_str(), "none", "{name} should be gone");
    Ok(())
}

/// Waits until `channel` has at least `subscribers` (each waiting agent subscribes once),
/// lets the waiters finish their attempt after subscribing, and checks none got the lock.
fn wait_waiting(
    con: &mut Connection,
    channel: &str,
    subscribers: i64,
    pending: &[(&Agent, u64)],
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while numsub(con, channel)? < subscribers {
        ensure!(
            Instant::now() < deadline,
            "no {subscribers} subscriber(s) on {channel} in 10 s"
        );
        for (agent, id) in pending {
            ensure!(
                agent.poll(*id).is_none(),
                "{} answered while the lock was held: {:?}",
                agent.label,
                agent.poll(*id)
            );
        }
        thread::sleep(ms(2));
    }
    thread::sleep(ms(30));
    for (agent, id) in pending {
        ensure!(
            agent.poll(*id).is_none(),
            "{} answered while the lock was held: {:?}",
            agent.label,
            agent.poll(*id)
        );
    }
    Ok(())
}

/// The response to a pending `lock`, which must be a success.
fn acquired(agent: &Agent, id: u64, within: Duration) -> Result<serde_json::Value, String> {
    let reply = agent.wait(id, within)?;
    ensure!(reply["ok"] == true, "{}: lock failed: {reply}", agent.label);
    Ok(reply)
}

/// `releaser` (owner `owner`) unlocks `name`, and `waiter`'s pending `lock` or waiting
/// `try_lock` (request `pending`) must then get it, woken by the unlock message: within
/// [`WAKE_BOUND_MS`] of the unlock's start. Returns that delay in ms.
fn hand_over(
    releaser: &Agent,
    name: &str,
    owner: u64,
    waiter: &Agent,
    pending: u64,
) -> Result<f64, String> {
    let released = unlock(releaser, "lock", name, owner)?;
    let got = waiter.wait(pending, Duration::from_secs(5))?;
    ensure!(
        got["ok"] == true && got["acquired"] != false,
        "{}: did not get the lock {} released: {got}",
        waiter.label,
        releaser.label
    );
    let delay = millis_between(
        ns_field(releaser, &released, "start_ns")?,
        ns_field(waiter, &got, "end_ns")?,
    );
    ensure!(
        delay > 0.0 && delay < WAKE_BOUND_MS,
        "{} got the lock {delay:.3} ms after {}'s unlock started",
        waiter.label,
        releaser.label
    );
    Ok(delay)
}

fn millis_between(earlier_ns: u64, later_ns: u64) -> f64 {
    (later_ns as f64 - earlier_ns as f64) / 1e6
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A plain subscriber on some channels, recording every message's payload in order.
struct Subscriber {
    messages: Arc<Mutex<Vec<(String, String)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Subscriber {
    fn start(ctx: &Ctx, channels: &[String]) -> Result<Self, String> {
        let con = match ctx.con()? {
            Connection::Single(con) => con,
            Connection::Cluster(_, nodes) => {
                // Sharded unless the Java side runs classic (the flavour both sides use), or
                // the servers have no sharded pub/sub (then auto is classic too).
                let sharded = ctx.options.pubsub != "classic" && ctx.server.has_sharded_pubsub();
                return Self::start_cluster(nodes, sharded, channels);
            }
        };
        let mut con = con;
        let messages = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (sink, flag, channels) = (Arc::clone(&messages), Arc::clone(&stop), channels.to_vec());
        let thread = thread::spawn(move || {
            let mut pubsub = con.as_pubsub();
            let subscribed = pubsub
                .subscribe(&channels)
                .and_then(|()| pubsub.set_read_timeout(Some(ms(20))));
            let _ = ready_tx.send(subscribed.map_err(|e| e.to_string()));
            while !flag.load(Ordering::Relaxed) {
                match pubsub.get_message() {
                    Ok(msg) => {
                        let payload: String = msg.get_payload().unwrap_or_default();
                        sink.lock()
                            .unwrap()
                            .push((msg.get_channel_name().to_string(), payload));
                    }
                    Err(e) if e.is_timeout() => {}
                    Err(_) => break,
                }
            }
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|e| e.to_string())??;
        Ok(Self {
            messages,
            stop,
            thread: Some(thread),
        })
    }

    /// On a cluster: a RESP3 cluster connection subscribed with `SSUBSCRIBE` (each channel on
    /// its slot's master) or `SUBSCRIBE`, on a thread of its own.
    fn start_cluster(
        nodes: Vec<String>,
        sharded: bool,
        channels: &[String],
    ) -> Result<Self, String> {
        let messages = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (sink, flag, channels) = (Arc::clone(&messages), Arc::clone(&stop), channels.to_vec());
        let thread = thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            runtime.block_on(async move {
                let (tx, mut pushes) = tokio::sync::mpsc::unbounded_channel();
                let connected = async {
                    let mut conn = redis::cluster::ClusterClient::builder(nodes)
                        .use_protocol(redis::ProtocolVersion::RESP3)
                        .push_sender(tx)
                        .build()?
                        .get_async_connection()
                        .await?;
                    for channel in &channels {
                        if sharded {
                            conn.ssubscribe(channel).await?;
                        } else {
                            conn.subscribe(channel).await?;
                        }
                    }
                    Ok::<_, redis::RedisError>(conn)
                };
                let conn = match connected.await {
                    Ok(conn) => {
                        let _ = ready_tx.send(Ok(()));
                        conn
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                while !flag.load(Ordering::Relaxed) {
                    let Ok(Some(push)) = tokio::time::timeout(ms(20), pushes.recv()).await else {
                        continue;
                    };
                    if !matches!(
                        push.kind,
                        redis::PushKind::Message | redis::PushKind::SMessage
                    ) {
                        continue;
                    }
                    let text = |v: Option<&redis::Value>| match v {
                        Some(redis::Value::BulkString(b)) => {
                            String::from_utf8_lossy(b).into_owned()
                        }
                        Some(other) => format!("{other:?}"),
                        None => String::new(),
                    };
                    sink.lock()
                        .unwrap()
                        .push((text(push.data.first()), text(push.data.get(1))));
                }
                drop(conn);
            });
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|e| e.to_string())??;
        Ok(Self {
            messages,
            stop,
            thread: Some(thread),
        })
    }

    /// The payloads received so far, after giving late messages `settle` to arrive.
    fn payloads(&self, settle: Duration) -> Vec<String> {
        thread::sleep(settle);
        self.messages
            .lock()
            .unwrap()
            .iter()
            .map(|(_, p)| p.clone())
            .collect()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

// ---- scenarios ------------------------------------------------------------------------------

/// Both agents keep the contract other drivers rely on (CONFORMANCE_PROTOCOL.md): answers and
/// error codes, timestamps on the runner's own CLOCK_MONOTONIC, `stress` without `record`,
/// `bench`.
fn protocol(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    for agent in [&ctx.rust, &ctx.java] {
        protocol_of(ctx, agent).map_err(|e| format!("{}: {e}", agent.label))?;
    }
    Ok("ping, error codes, timestamps, stress, bench alike on both agents".into())
}

fn protocol_of(ctx: &Ctx, agent: &Agent) -> Result<(), String> {
    let (name, owner, mut con) = (ctx.name("protocol"), ctx.owner(), ctx.con()?);
    let code = |request: serde_json::Value| -> Result<String, String> {
        let reply = agent.reply(request)?;
        ensure!(reply["ok"] == false, "expected an error, got {reply}");
        ensure!(
            reply["message"].is_string(),
            "error without message: {reply}"
        );
        Ok(reply["error"].as_str().unwrap_or_default().to_string())
    };

    let pong = agent.call(json!({"op": "ping"}))?;
    ensure!(
        pong["ok"] == true && pong.get("error").is_none(),
        "ping: {pong}"
    );
    let rejected = [
        (json!({"op": "frobnicate"}), "unsupported"),
        (
            json!({"op": "lock", "kind": "redlock", "name": name, "owner": owner}),
            "unsupported",
        ),
        (
            json!({"op": "sem_acquire", "name": name, "owner": 0, "permits": 1}),
            "bad_request",
        ),
        (
            json!({"op": "psem_update_lease", "name": name, "permit_id": "xyz",
                   "lease_ms": 1_000}),
            "bad_request",
        ),
        (
            json!({"op": "lock", "kind": "lock", "owner": owner}),
            "bad_request",
        ),
        (
            json!({"op": "lock", "kind": "lock", "name": "", "owner": owner}),
            "bad_request",
        ),
        (
            json!({"op": "lock", "kind": "lock", "name": name, "owner": 0}),
            "bad_request",
        ),
        (
            json!({"op": "lock", "kind": "lock", "name": name, "owner": "1"}),
            "bad_request",
        ),
        (
            json!({"op": "unlock", "kind": "lock", "name": name}),
            "bad_request",
        ),
    ];
    for (request, expected) in rejected {
        ensure_eq!(
            code(request.clone())?.as_str(),
            expected,
            "answer to {request}"
        );
    }
    agent.send_raw("this is not json")?;
    let garbage = agent.wait_unnumbered(CALL_TIMEOUT)?;
    ensure!(
        garbage["ok"] == false && garbage["error"] == "bad_request",
        "answer to a line that is not JSON: {garbage}"
    );
    ensure_eq!(
        key_state(&mut con, &name)?.kind.as_str(),
        "none",
        "keys after rejected requests"
    );

    // Timestamps are CLOCK_MONOTONIC of this host: they fall inside the runner's own readings.
    let before = now_ns();
    let reply = agent.call(json!({"op": "try_lock", "kind": "lock", "name": name,
                                  "owner": owner}))?;
    let after = now_ns();
    ensure_eq!(
        reply["acquired"].as_bool(),
        Some(true),
        "try_lock on a free lock"
    );
    let (start, end) = (
        ns_field(agent, &reply, "start_ns")?,
        ns_field(agent, &reply, "end_ns")?,
    );
    ensure!(
        before <= start && start <= end && end <= after,
        "start_ns {start} / end_ns {end} outside the runner's clock {before}..{after}"
    );
    let reply = unlock(agent, "lock", &name, owner)?;
    ensure!(
        reply["start_ns"].is_u64() && reply["end_ns"].is_u64(),
        "unlock timestamps: {reply}"
    );

    let counter = format!("{name}:counter");
    let reply = agent.call(
        json!({"op": "stress", "kind": "lock", "name": name, "owner": owner,
                                  "iterations": 3, "counter": counter}),
    )?;
    ensure_eq!(reply["done"].as_u64(), Some(3), "stress done");
    ensure!(
        reply.get("intervals").is_none(),
        "stress without record sent intervals: {reply}"
    );
    let value: Option<String> = query(&mut con, redis::cmd("GET").arg(&counter))?;
    ensure_eq!(value.as_deref(), Some("3"), "stress counter");

    for same_key in [false, true] {
        let reply = agent.call(
            json!({"op": "bench", "kind": "lock", "name": name, "tasks": 2,
                                      "iterations": 5, "same_key": same_key}),
        )?;
        ensure_eq!(
            reply["ops"].as_u64(),
            Some(10),
            "bench ops (same_key {same_key})"
        );
        let figures: Vec<Option<f64>> = ["p50_us", "p99_us", "max_us"]
            .iter()
            .map(|f| reply[f].as_f64())
            .collect();
        let [Some(p50), Some(p99), Some(max)] = figures[..] else {
            return Err(format!("bench figures missing: {reply}"));
        };
        ensure!(
            0.0 < p50 && p50 <= p99 && p99 <= max,
            "bench figures out of order: {reply}"
        );
        ensure!(
            reply["elapsed_ns"].as_u64().is_some_and(|ns| ns > 0),
            "bench elapsed: {reply}"
        );
    }
    let left: Vec<String> = query(&mut con, redis::cmd("KEYS").arg(format!("{name}*")))?;
    ensure_eq!(left, vec![counter], "keys left after stress and bench");
    Ok(())
}

/// While one side holds, the other's `try_lock` is false and `is_locked` is true on both.
fn exclusion(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("exclusion"), ctx.owner(), ctx.con()?);

    lock(a, "lock", &name, owner)?;
    let held = expect_holder(&mut con, &name, a, 1)?;
    ensure!(
        !try_lock(b, "lock", &name, owner, 0)?,
        "{} got a lock {} holds (same owner number)",
        b.label,
        a.label
    );
    ensure!(
        !try_lock(b, "lock", &name, owner + 1, 0)?,
        "{} got a lock {} holds",
        b.label,
        a.label
    );
    let waited = Instant::now();
    ensure!(
        !try_lock(b, "lock", &name, owner + 1, 200)?,
        "{} got it by waiting 200 ms",
        b.label
    );
    let waited = waited.elapsed();
    ensure!(
        waited >= ms(190),
        "try_lock with wait_ms 200 returned after {waited:?}"
    );
    ensure!(
        is_locked(a, "lock", &name)? && is_locked(b, "lock", &name)?,
        "is_locked should be true on both"
    );
    ensure_eq!(
        key_state(&mut con, &name)?.fields,
        held.fields,
        "failed attempts changed the hash"
    );

    // A try_lock with a wait gets the lock when the holder lets go, woken by the message.
    let pending = b.send(json!({"op": "try_lock", "kind": "lock", "name": name,
                                "owner": owner, "wait_ms": 20_000}))?;
    wait_waiting(&mut con, &channel(&name), 1, &[(b, pending)])?;
    let woke = hand_over(a, &name, owner, b, pending)?;
    expect_holder(&mut con, &name, b, 1)?;
    ensure!(
        !try_lock(a, "lock", &name, owner, 0)?,
        "{} got the lock {} now holds",
        a.label,
        b.label
    );
    unlock(b, "lock", &name, owner)?;
    expect_free(&mut con, &name)?;
    ensure!(
        !is_locked(a, "lock", &name)? && !is_locked(b, "lock", &name)?,
        "is_locked after the last unlock"
    );
    Ok(format!(
        "try_lock false both ways, is_locked true on both, a 200 ms wait took {} ms; \
         a waiting try_lock got it {woke:.2} ms after the unlock",
        waited.as_millis()
    ))
}

/// A blocked `lock` acquires within milliseconds of the other side's `unlock`, with a
/// watchdog of 10 minutes: p50 over `--handoffs` handoffs.
fn wake_up(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(waiter));
    let (name, owner, mut con) = (ctx.name("wakeup"), ctx.owner(), ctx.con()?);
    let channel = channel(&name);
    let handoffs = if ctx.options.smoke {
        ctx.options.handoffs.min(10)
    } else {
        ctx.options.handoffs
    };
    let mut latencies = Vec::with_capacity(handoffs);
    for i in 0..handoffs {
        lock(a, "lock", &name, owner)?;
        let pending = b.send(lock_request("lock", &name, owner, None))?;
        wait_waiting(&mut con, &channel, 1, &[(b, pending)])?;
        expect_holder(&mut con, &name, a, 1)?;
        let latency =
            hand_over(a, &name, owner, b, pending).map_err(|e| format!("handoff {i}: {e}"))?;
        expect_holder(&mut con, &name, b, 1)?;
        unlock(b, "lock", &name, owner)?;
        latencies.push(latency);
    }
    expect_free(&mut con, &name)?;
    latencies.sort_by(f64::total_cmp);
    Ok(format!(
        "{handoffs} handoffs, unlock start -> acquired: p50 {:.2} ms, p90 {:.2} ms, max {:.2} ms",
        percentile(&latencies, 50.0),
        percentile(&latencies, 90.0),
        latencies[latencies.len() - 1]
    ))
}

/// Lock twice; the other side sees it held; one unlock keeps it held; the second frees it
/// and wakes the waiter.
fn reentrancy(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(waiter));
    let (name, owner, mut con) = (ctx.name("reentrancy"), ctx.owner(), ctx.con()?);

    lock(a, "lock", &name, owner)?;
    ensure!(
        try_lock(a, "lock", &name, owner, 0)?,
        "{} could not re-enter with try_lock",
        a.label
    );
    expect_holder(&mut con, &name, a, 2)?;
    ensure_eq!(
        hold_count(a, "lock", &name, owner)?,
        2,
        "hold_count on {}",
        a.label
    );
    ensure!(
        is_locked(b, "lock", &name)?,
        "{} should see it locked",
        b.label
    );
    ensure!(
        !try_lock(b, "lock", &name, owner, 0)?,
        "{} got a lock held twice",
        b.label
    );

    unlock(a, "lock", &name, owner)?;
    let state = expect_holder(&mut con, &name, a, 1)?;
    ensure!(
        state.pttl > LONG_WATCHDOG_MS - 5_000,
        "a partial unlock re-applies the lease: PTTL {}",
        state.pttl
    );
    ensure_eq!(
        hold_count(a, "lock", &name, owner)?,
        1,
        "hold_count after one unlock"
    );
    ensure!(
        is_locked(b, "lock", &name)?,
        "{} should still see it locked",
        b.label
    );
    ensure!(
        !try_lock(b, "lock", &name, owner, 0)?,
        "{} got a lock still held once",
        b.label
    );

    let pending = b.send(lock_request("lock", &name, owner, None))?;
    wait_waiting(&mut con, &channel(&name), 1, &[(b, pending)])?;
    let latency = hand_over(a, &name, owner, b, pending)?;
    expect_holder(&mut con, &name, b, 1)?;
    ensure_eq!(
        hold_count(a, "lock", &name, owner)?,
        0,
        "hold_count on {} after it let go",
        a.label
    );
    unlock(b, "lock", &name, owner)?;
    expect_free(&mut con, &name)?;
    Ok(format!(
        "counts 2 -> 1 -> 0; waiter woke {latency:.2} ms after the last unlock"
    ))
}

/// `who` answers that `owner` holds none of the lock `name`: `is_held` false, `hold_count` 0.
/// `case` ends the error message.
fn holds_nothing(who: &Agent, name: &str, owner: u64, case: &str) -> Result<(), String> {
    ensure!(
        !is_held(who, "lock", name, owner)?,
        "{}: is_held {case}",
        who.label
    );
    ensure_eq!(
        hold_count(who, "lock", name, owner)?,
        0,
        "{}: hold_count {case}",
        who.label
    );
    Ok(())
}

/// `hold_count`, `is_held`, `remaining_ttl` (and `is_locked`) give the same answers from both
/// agents, about a lock held by `holder`'s side: watchdog lease, explicit lease, no expiry,
/// no key.
fn queries_agree(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("queries"), ctx.owner(), ctx.con()?);

    // Held twice with the watchdog lease.
    lock(a, "lock", &name, owner)?;
    lock(a, "lock", &name, owner)?;
    let (ttl_a, ttl_b) = (
        remaining_ttl(a, "lock", &name)?,
        remaining_ttl(b, "lock", &name)?,
    );
    let pttl = key_state(&mut con, &name)?.pttl;
    for (who, ttl) in [(a, ttl_a), (b, ttl_b)] {
        ensure!(
            ttl > LONG_WATCHDOG_MS - 5_000 && ttl <= LONG_WATCHDOG_MS,
            "{}: remaining_ttl {ttl} for a {LONG_WATCHDOG_MS} ms watchdog lease",
            who.label
        );
        ensure!(is_locked(who, "lock", &name)?, "{}: is_locked", who.label);
        ensure!(
            (ttl - pttl).abs() < 2_000,
            "{}: remaining_ttl {ttl} vs PTTL {pttl}",
            who.label
        );
    }
    ensure!(
        is_held(a, "lock", &name, owner)?,
        "{}: is_held by the holder",
        a.label
    );
    ensure_eq!(
        hold_count(a, "lock", &name, owner)?,
        2,
        "{}: hold_count of the holder",
        a.label
    );
    // The same owner number on the other agent is another client's thread.
    holds_nothing(b, &name, owner, &format!("of its own owner {owner}"))?;
    unlock(a, "lock", &name, owner)?;
    unlock(a, "lock", &name, owner)?;

    // No key at all.
    for who in [a, b] {
        ensure_eq!(
            remaining_ttl(who, "lock", &name)?,
            -2,
            "{}: remaining_ttl without key",
            who.label
        );
        ensure!(
            !is_locked(who, "lock", &name)?,
            "{}: is_locked without key",
            who.label
        );
        holds_nothing(who, &name, owner, "without key")?;
    }

    // An explicit 20 s lease.
    a.call(lock_request("lock", &name, owner, Some(20_000)))?;
    for who in [a, b] {
        let ttl = remaining_ttl(who, "lock", &name)?;
        ensure!(
            ttl > 18_000 && ttl <= 20_000,
            "{}: remaining_ttl {ttl} for a 20 s lease",
            who.label
        );
    }
    unlock(a, "lock", &name, owner)?;

    // A lock hash without expiry (written by hand, as a crashed or odd client could leave).
    let foreign = "00000000-0000-4000-8000-000000000000:7";
    query::<i64>(&mut con, redis::cmd("HSET").arg(&name).arg(foreign).arg(1))?;
    for who in [a, b] {
        ensure_eq!(
            remaining_ttl(who, "lock", &name)?,
            -1,
            "{}: remaining_ttl without expiry",
            who.label
        );
        ensure!(
            is_locked(who, "lock", &name)?,
            "{}: is_locked on a foreign hold",
            who.label
        );
        holds_nothing(who, &name, owner, "on a foreign hold")?;
    }
    query::<i64>(&mut con, redis::cmd("DEL").arg(&name))?;
    Ok(format!(
        "watchdog TTL {ttl_a} vs {ttl_b} ms; explicit lease, no expiry, no key agree"
    ))
}

/// Unlocking a lock held by the other side fails with `not_held` and changes nothing.
fn not_held(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("notheld"), ctx.owner(), ctx.con()?);
    let subscriber = Subscriber::start(ctx, &[channel(&name)])?;

    lock(a, "lock", &name, owner)?;
    let before = expect_holder(&mut con, &name, a, 1)?;
    let keys_before = all_keys(&mut con)?;
    for o in [owner, owner + 1] {
        ensure_eq!(
            unlock_error(b, "lock", &name, o)?.as_str(),
            "not_held",
            "{} unlock by owner {o}",
            b.label
        );
    }
    // The holder's other owner is not the holder either.
    ensure_eq!(
        unlock_error(a, "lock", &name, owner + 1)?.as_str(),
        "not_held",
        "{} other owner",
        a.label
    );
    let after = key_state(&mut con, &name)?;
    ensure_eq!(after.fields, before.fields, "the hash after failed unlocks");
    ensure!(
        after.pttl <= before.pttl,
        "a failed unlock extended the lease: {} -> {}",
        before.pttl,
        after.pttl
    );
    ensure_eq!(
        all_keys(&mut con)?,
        keys_before,
        "keys after failed unlocks"
    );
    ensure_eq!(
        subscriber.payloads(ms(100)),
        Vec::<String>::new(),
        "messages after failed unlocks"
    );
    ensure_eq!(
        hold_count(a, "lock", &name, owner)?,
        1,
        "{} still holds",
        a.label
    );

    unlock(a, "lock", &name, owner)?;
    expect_free(&mut con, &name)?;
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec!["0".to_string()],
        "messages after the unlock"
    );
    Ok("3 foreign unlocks refused; hash, TTL, keys and channel untouched".into())
}

/// `force_unlock` from the other side frees the holder's lock and wakes a waiter; with a
/// waiter on each side, both get the lock in turn.
fn force_unlock_wakes(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("force"), ctx.owner(), ctx.con()?);
    let channel = channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;

    lock(a, "lock", &name, owner)?;
    let wait_b = b.send(lock_request("lock", &name, owner, None))?;
    let wait_a = a.send(lock_request("lock", &name, owner + 1, None))?;
    // Both agents subscribed, plus our own subscriber.
    wait_waiting(&mut con, &channel, 3, &[(b, wait_b), (a, wait_a)])?;

    let (released, forced) = force_unlock(b, "lock", &name)?;
    ensure!(
        released,
        "force_unlock of a held lock answered released=false"
    );
    let forced_ns = ns_field(b, &forced, "start_ns")?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let (first, first_owner, first_reply, second, second_owner, second_id) = loop {
        if let Some(reply) = b.poll(wait_b) {
            break (b, owner, reply, a, owner + 1, wait_a);
        }
        if let Some(reply) = a.poll(wait_a) {
            break (a, owner + 1, reply, b, owner, wait_b);
        }
        ensure!(
            Instant::now() < deadline,
            "no waiter acquired within 5 s of force_unlock"
        );
        thread::sleep(ms(1));
    };
    ensure!(
        first_reply["ok"] == true,
        "{}: lock failed: {first_reply}",
        first.label
    );
    let woke = millis_between(forced_ns, ns_field(first, &first_reply, "end_ns")?);
    ensure!(
        woke < WAKE_BOUND_MS,
        "{} acquired {woke:.1} ms after force_unlock",
        first.label
    );
    expect_holder(&mut con, &name, first, 1)?;
    ensure!(
        second.poll(second_id).is_none(),
        "both waiters hold the lock"
    );

    let handoff = hand_over(first, &name, first_owner, second, second_id)?;
    expect_holder(&mut con, &name, second, 1)?;
    unlock(second, "lock", &name, second_owner)?;
    expect_free(&mut con, &name)?;
    ensure!(
        !force_unlock(a, "lock", &name)?.0,
        "force_unlock of a free lock answered released=true"
    );
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec!["0".to_string(); 3],
        "messages: force_unlock, then two unlocks"
    );
    Ok(format!(
        "{} woke {woke:.2} ms after force_unlock, then {} {handoff:.2} ms after its unlock",
        first.label, second.label
    ))
}

/// The watchdog timeout of the agents of the `watchdog` and `paused holder` scenarios.
const SHORT_WATCHDOG_MS: i64 = 1_500;

/// Two fresh agents with a [`SHORT_WATCHDOG_MS`] watchdog: `holder`'s holds a new lock and
/// `waiter`'s has a `lock` request pending on it, subscribed.
struct Contest {
    holder: Agent,
    waiter: Agent,
    name: String,
    owner: u64,
    con: Connection,
    /// The holder's hash, as it was right after the acquire.
    held: KeyState,
    /// The waiter's pending `lock` request.
    pending: u64,
}

impl Contest {
    fn start(ctx: &Ctx, holder: Impl, waiter: Impl, scenario: &str) -> Result<Self, String> {
        let watchdog = SHORT_WATCHDOG_MS.to_string();
        let args = ["--watchdog-ms", watchdog.as_str()];
        let a = ctx.start_agent(holder, &args)?;
        let b = ctx.start_agent(waiter, &args)?;
        let (name, owner, mut con) = (ctx.name(scenario), ctx.owner(), ctx.con()?);
        lock(&a, "lock", &name, owner)?;
        let held = expect_holder(&mut con, &name, &a, 1)?;
        ensure!(
            held.pttl <= SHORT_WATCHDOG_MS,
            "PTTL {} above the watchdog timeout",
            held.pttl
        );
        let pending = b.send(lock_request("lock", &name, owner, None))?;
        wait_waiting(&mut con, &channel(&name), 1, &[(&b, pending)])?;
        Ok(Self {
            holder: a,
            waiter: b,
            name,
            owner,
            con,
            held,
            pending,
        })
    }

    /// The waiter's pending `lock` must succeed within the watchdog timeout (plus 250 ms) of
    /// `since_ns`, when the holder `went` (was killed, stopped): the last renewal set at most
    /// that TTL, and the waiter retries on the TTL it was told. Returns the delay in ms.
    fn taken_over(&mut self, since_ns: u64, went: &str) -> Result<f64, String> {
        let got = acquired(&self.waiter, self.pending, Duration::from_secs(10))?;
        let after = millis_between(since_ns, ns_field(&self.waiter, &got, "end_ns")?);
        ensure!(
            after <= SHORT_WATCHDOG_MS as f64 + 250.0,
            "{} acquired {after:.0} ms after the holder {went} (watchdog {SHORT_WATCHDOG_MS} ms)",
            self.waiter.label
        );
        expect_holder(&mut self.con, &self.name, &self.waiter, 1)?;
        Ok(after)
    }
}

/// With `--watchdog-ms 1500`, the holder keeps the lock for 3x that while the other side
/// waits; after SIGKILL of the holder, the waiter acquires within one watchdog timeout.
fn watchdog(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    let mut contest = Contest::start(ctx, holder, waiter, "watchdog")?;
    let Contest { name, owner, .. } = &contest;
    let (name, owner) = (name.clone(), *owner);
    let until = Instant::now() + ms(3 * SHORT_WATCHDOG_MS as u64);
    let mut lowest_pttl = i64::MAX;
    while Instant::now() < until {
        thread::sleep(ms(100));
        let state = key_state(&mut contest.con, &name)?;
        ensure_eq!(
            state.fields,
            contest.held.fields,
            "the hash while the watchdog renews"
        );
        ensure!(
            state.pttl > 0 && state.pttl <= SHORT_WATCHDOG_MS,
            "PTTL {} while renewed",
            state.pttl
        );
        lowest_pttl = lowest_pttl.min(state.pttl);
        ensure!(
            contest.waiter.poll(contest.pending).is_none(),
            "{} acquired while the holder lived",
            contest.waiter.label
        );
    }

    let killed_ns = now_ns();
    contest.holder.kill();
    let after = contest.taken_over(killed_ns, "was killed")?;
    unlock(&contest.waiter, "lock", &name, owner)?;
    expect_free(&mut contest.con, &name)?;
    Ok(format!(
        "held 4.5 s (lowest PTTL seen {lowest_pttl} ms); acquired {after:.0} ms after SIGKILL"
    ))
}

/// A holder stopped (SIGSTOP) past its watchdog lease loses the lock to the other side; once
/// resumed, its renewal does not take the lock back and its unlock is `not_held`, leaving the
/// new holder's lock as it was (RELIABILITY_TESTS T3, across languages).
fn paused_holder(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    let mut contest = Contest::start(ctx, holder, waiter, "paused")?;
    let paused_ns = now_ns();
    contest.holder.pause()?;
    let taken = contest.taken_over(paused_ns, "was stopped");
    // Keep the holder stopped for a while after the takeover, then let it run again (also
    // when the takeover failed, so that the agent can be shut down).
    thread::sleep(ms(300));
    contest.holder.resume()?;
    let taken = taken?;

    let Contest {
        holder: a,
        waiter: b,
        name,
        owner,
        con,
        ..
    } = &mut contest;
    let (name, owner) = (name.as_str(), *owner);
    let state = key_state(con, name)?;
    // The resumed holder's watchdog runs every 500 ms: give it two rounds.
    thread::sleep(ms(1_100));
    let later = expect_holder(con, name, b, 1)?;
    ensure_eq!(
        later.fields,
        state.fields,
        "the hash after the old holder resumed"
    );
    ensure!(
        later.pttl <= SHORT_WATCHDOG_MS,
        "PTTL {} after the old holder resumed",
        later.pttl
    );
    ensure_eq!(
        unlock_error(a, "lock", name, owner)?.as_str(),
        "not_held",
        "unlock by the resumed old holder {}",
        a.label
    );
    ensure_eq!(
        key_state(con, name)?.fields,
        state.fields,
        "the hash after the old holder's unlock"
    );
    ensure_eq!(
        hold_count(b, "lock", name, owner)?,
        1,
        "{} hold_count",
        b.label
    );
    unlock(b, "lock", name, owner)?;
    expect_free(con, name)?;
    Ok(format!(
        "taken over {taken:.0} ms after SIGSTOP; after SIGCONT the old holder's unlock is not_held"
    ))
}

/// A lock taken with `lease_ms` expires on time and the other side takes it.
fn explicit_lease(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    const LEASE_MS: i64 = 1_000;
    let (a, b) = (ctx.agent(holder), ctx.agent(waiter));
    let (name, owner, mut con) = (ctx.name("lease"), ctx.owner(), ctx.con()?);

    let locked = a.call(lock_request("lock", &name, owner, Some(LEASE_MS)))?;
    let state = expect_holder(&mut con, &name, a, 1)?;
    ensure!(
        state.pttl > LEASE_MS - 200 && state.pttl <= LEASE_MS,
        "PTTL {} for a 1 s lease",
        state.pttl
    );
    let pending = b.send(lock_request("lock", &name, owner, None))?;
    wait_waiting(&mut con, &channel(&name), 1, &[(b, pending)])?;
    let got = acquired(b, pending, Duration::from_secs(5))?;
    let after = millis_between(
        ns_field(a, &locked, "start_ns")?,
        ns_field(b, &got, "end_ns")?,
    );
    ensure!(
        after >= LEASE_MS as f64 - 1.0,
        "{} acquired {after:.1} ms after a 1 s lease began",
        b.label
    );
    ensure!(
        after <= LEASE_MS as f64 + 500.0,
        "{} acquired only {after:.0} ms after the lease began",
        b.label
    );
    expect_holder(&mut con, &name, b, 1)?;
    ensure_eq!(
        unlock_error(a, "lock", &name, owner)?.as_str(),
        "not_held",
        "unlock after the lease ended"
    );
    expect_holder(&mut con, &name, b, 1)?;
    unlock(b, "lock", &name, owner)?;
    expect_free(&mut con, &name)?;
    Ok(format!(
        "acquired {after:.0} ms after the 1000 ms lease began"
    ))
}

/// One sequence (lock, re-lock, query, unlock, unlock, force unlock, then the same with an
/// explicit lease) from each agent; what
/// Redis holds after each step and the messages a plain subscriber sees are the same.
fn same_bytes(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let rust = byte_trace(ctx, &ctx.rust)?;
    let java = byte_trace(ctx, &ctx.java)?;
    for (i, (r, j)) in rust.iter().zip(&java).enumerate() {
        ensure!(
            r == j,
            "step {i} differs:\n      rust: {r}\n      java: {j}"
        );
    }
    ensure_eq!(rust.len(), java.len(), "trace lengths");
    Ok(format!(
        "{} steps identical (key type, field shape, values, TTL range, messages)",
        rust.len()
    ))
}

/// The explicit lease of the second half of [`byte_trace`].
const TRACE_LEASE_MS: i64 = 10_000;

/// The normalised trace of one agent's sequence; checks the expected values on the way.
fn byte_trace(ctx: &Ctx, agent: &Agent) -> Result<Vec<String>, String> {
    let (name, owner, mut con) = (ctx.name("bytes"), ctx.owner(), ctx.con()?);
    let channel = channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;
    let mut trace = Vec::new();
    let mut field = None;
    let mut step = |label: &str, con: &mut Connection, extra: String| -> Result<(), String> {
        let state = key_state(con, &name)?;
        let fields: Vec<String> = state
            .fields
            .iter()
            .map(|(f, v)| {
                if field.get_or_insert_with(|| f.clone()) != f {
                    return format!("{f} (another field than before)={v}");
                }
                let shape = match f.strip_prefix(&format!("{}:", agent.client_id)) {
                    Some(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                        "<client_id>:<decimal>".to_string()
                    }
                    _ => f.clone(),
                };
                format!("{shape}={v}")
            })
            .collect();
        let ttl = match state.pttl {
            t @ (-2 | -1) => t.to_string(),
            t if t > LONG_WATCHDOG_MS - 5_000 && t <= LONG_WATCHDOG_MS => "watchdog lease".into(),
            t if t > TRACE_LEASE_MS - 150 && t <= TRACE_LEASE_MS => "fresh 10 s lease".into(),
            t => format!("{t} ms (out of range)"),
        };
        // Other keys about this lock; Redisson's unlock also leaves its private unlock latch
        // (`redisson_unlock_latch:{N}:<id>`, REDISSON_LAYOUT §1.8), which this crate does not
        // write (README, "Interoperating with Java").
        let others: Vec<String> =
            query::<Vec<String>>(con, redis::cmd("KEYS").arg(format!("*{name}*")))?
                .into_iter()
                .filter(|k| k != &name && !k.starts_with("redisson_unlock_latch:"))
                .collect();
        trace.push(format!(
            "{label}: type {} fields {fields:?} ttl {ttl} other keys {others:?} {extra}",
            state.kind
        ));
        Ok(())
    };

    lock(agent, "lock", &name, owner)?;
    step("lock", &mut con, String::new())?;
    lock(agent, "lock", &name, owner)?;
    step("re-lock", &mut con, String::new())?;
    let answers = format!(
        "hold_count {} is_held {} is_locked {} remaining_ttl>0 {}",
        hold_count(agent, "lock", &name, owner)?,
        is_held(agent, "lock", &name, owner)?,
        is_locked(agent, "lock", &name)?,
        remaining_ttl(agent, "lock", &name)? > 0
    );
    step("query", &mut con, answers)?;
    unlock(agent, "lock", &name, owner)?;
    step("unlock", &mut con, String::new())?;
    unlock(agent, "lock", &name, owner)?;
    step("unlock", &mut con, String::new())?;
    lock(agent, "lock", &name, owner)?;
    let released = force_unlock(agent, "lock", &name)?.0;
    step(
        "lock + force_unlock",
        &mut con,
        format!("released {released}"),
    )?;
    let released = force_unlock(agent, "lock", &name)?.0;
    step(
        "force_unlock of a free lock",
        &mut con,
        format!("released {released}"),
    )?;
    // Explicit leases: every acquire sets the TTL to its lease, and so does a partial release
    // (the pauses let a TTL that was not re-applied fall out of the "fresh" range).
    agent.call(lock_request("lock", &name, owner, Some(TRACE_LEASE_MS)))?;
    step("lock, 10 s lease", &mut con, String::new())?;
    thread::sleep(ms(300));
    agent.call(lock_request("lock", &name, owner, Some(TRACE_LEASE_MS)))?;
    step("re-lock, 10 s lease", &mut con, String::new())?;
    thread::sleep(ms(300));
    unlock(agent, "lock", &name, owner)?;
    step("unlock", &mut con, String::new())?;
    unlock(agent, "lock", &name, owner)?;
    step("unlock", &mut con, String::new())?;
    trace.push(format!(
        "messages on {{channel}}: {:?}",
        subscriber.payloads(ms(100))
    ));

    let expected = [
        "lock: type hash fields [\"<client_id>:<decimal>=1\"] ttl watchdog lease other keys [] ",
        "re-lock: type hash fields [\"<client_id>:<decimal>=2\"] ttl watchdog lease other keys [] ",
        "query: type hash fields [\"<client_id>:<decimal>=2\"] ttl watchdog lease other keys [] \
         hold_count 2 is_held true is_locked true remaining_ttl>0 true",
        "unlock: type hash fields [\"<client_id>:<decimal>=1\"] ttl watchdog lease other keys [] ",
        "unlock: type none fields [] ttl -2 other keys [] ",
        "lock + force_unlock: type none fields [] ttl -2 other keys [] released true",
        "force_unlock of a free lock: type none fields [] ttl -2 other keys [] released false",
        "lock, 10 s lease: type hash fields [\"<client_id>:<decimal>=1\"] ttl fresh 10 s lease other keys [] ",
        "re-lock, 10 s lease: type hash fields [\"<client_id>:<decimal>=2\"] ttl fresh 10 s lease other keys [] ",
        "unlock: type hash fields [\"<client_id>:<decimal>=1\"] ttl fresh 10 s lease other keys [] ",
        "unlock: type none fields [] ttl -2 other keys [] ",
        "messages on {channel}: [\"0\", \"0\", \"0\"]",
    ];
    for (got, want) in trace.iter().zip(expected) {
        ensure!(
            got == want,
            "{}: unexpected state\n      got:  {got}\n      want: {want}",
            agent.label
        );
    }
    ensure_eq!(
        trace.len(),
        expected.len(),
        "{}: steps in the trace",
        agent.label
    );
    Ok(trace)
}

/// One `stress` worker that every agent of [`run_stress`] runs: the lock kind, the owner and
/// how long each critical section lasts.
struct StressWorker {
    kind: &'static str,
    owner: u64,
    hold_us: u64,
}

/// One critical section a `stress` worker recorded: from acquired to releasing, in ns of the
/// agents' monotonic clock (the same on one machine).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Section {
    start: u64,
    end: u64,
    agent: String,
    kind: &'static str,
    owner: u64,
}

/// What [`run_stress`] checked.
struct StressRun {
    /// Every recorded section, by start.
    sections: Vec<Section>,
    /// The counter's value: one increment per section of every worker that is not a reader.
    counter: u64,
    /// Pairs of read sections that overlapped.
    read_overlaps: usize,
    /// The stalls of a read-write lock explained as Redisson's race (empty: none; see
    /// [`wakeup::StallWatch::report`]).
    stalls: String,
}

/// Sends `stress` with `record` for each of `workers` to each of `agents` (in that order), on
/// the lock `name` of the workers' kinds and the counter `<name>:counter`, `iterations` times
/// each, all at once; then checks that every worker did `iterations` sections, each ending no
/// earlier than it starts, that the counter is exactly one increment per section of the
/// workers that write (every kind but `read`), and that no section overlaps another unless
/// both are reads (two sections overlap unless one starts after the other ends).
///
/// On a read-write lock a [`wakeup::StallWatch`] watches the run: a Redisson waiter that
/// missed a write unlock's `1` by Redisson's own race is shown to be one, woken by the runner,
/// and reported in [`StressRun::stalls`]; any other stall fails the run.
fn run_stress(
    ctx: &Ctx,
    con: &mut Connection,
    agents: &[&Agent],
    workers: &[StressWorker],
    name: &str,
    iterations: u64,
) -> Result<StressRun, String> {
    let counter = format!("{name}:counter");
    let mut watch = match workers.iter().any(|w| matches!(w.kind, "read" | "write")) {
        true => Some(wakeup::StallWatch::start(ctx, name)?),
        false => None,
    };
    let mut pending = Vec::new();
    for &agent in agents {
        for w in workers {
            let id = agent.send(json!({"op": "stress", "kind": w.kind, "name": name,
                                       "owner": w.owner, "iterations": iterations,
                                       "counter": counter, "hold_us": w.hold_us,
                                       "record": true}))?;
            pending.push((agent, w, id));
        }
    }
    let mut sections = Vec::new();
    // The replies taken so far, by index in `pending` (`wait` takes a reply off the inbox).
    let mut answered = vec![false; pending.len()];
    let still_waiting = |answered: &[bool]| -> Vec<wakeup::Waiting> {
        pending
            .iter()
            .zip(answered)
            .filter(|((a, _, id), done)| !**done && a.poll(*id).is_none())
            .map(|((a, w, id), _)| wakeup::Waiting {
                agent: a,
                kind: w.kind,
                owner: w.owner,
                id: *id,
            })
            .collect()
    };
    for (index, &(agent, w, id)) in pending.iter().enumerate() {
        let (kind, o) = (w.kind, w.owner);
        let deadline = Instant::now() + Duration::from_secs(300);
        let reply = loop {
            // In slices of 250 ms while a watch looks for stalls between them.
            let left = deadline.saturating_duration_since(Instant::now());
            let slice = if watch.is_some() {
                left.min(ms(250))
            } else {
                left
            };
            let asked = Instant::now();
            let error = match agent.wait(id, slice) {
                Ok(reply) => break Ok(reply),
                Err(e) => e,
            };
            // An agent that exited answers at once; the deadline ends the rest.
            if asked.elapsed() < slice || Instant::now() >= deadline {
                break Err(error);
            }
            if let Some(watch) = watch.as_mut() {
                watch.check(con, &still_waiting(&answered))?;
            }
        };
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                // What Redis holds and who is still waiting, to tell a lost wake-up from a
                // stuck holder.
                let state = key_state(con, name)
                    .map(|s| format!("{s:?}"))
                    .unwrap_or_else(|e| e);
                let waiting: Vec<String> = still_waiting(&answered)
                    .iter()
                    .map(|w| w.describe())
                    .collect();
                return Err(format!(
                    "{e}; {name} holds {state}; still unanswered: {waiting:?}"
                ));
            }
        };
        answered[index] = true;
        ensure!(
            reply["ok"] == true,
            "{} {kind} owner {o}: stress failed: {reply}",
            agent.label
        );
        ensure_eq!(
            reply["done"].as_u64(),
            Some(iterations),
            "{} {kind} owner {o}: done",
            agent.label
        );
        let list = reply["intervals"]
            .as_array()
            .ok_or("stress reply without intervals")?;
        ensure_eq!(
            list.len() as u64,
            iterations,
            "{} {kind} owner {o}: intervals",
            agent.label
        );
        for pair in list {
            let (Some(start), Some(end)) = (pair[0].as_u64(), pair[1].as_u64()) else {
                return Err(format!("{}: bad interval {pair}", agent.label));
            };
            ensure!(
                start <= end,
                "{}: interval {pair} ends before it starts",
                agent.label
            );
            sections.push(Section {
                start,
                end,
                agent: agent.label.clone(),
                kind,
                owner: o,
            });
        }
    }
    let writers = workers.iter().filter(|w| w.kind != "read").count() as u64;
    let expected = agents.len() as u64 * writers * iterations;
    let value: Option<String> = query(con, redis::cmd("GET").arg(&counter))?;
    ensure_eq!(value, Some(expected.to_string()), "counter {counter}");
    sections.sort();
    let mut read_overlaps = 0;
    for (i, x) in sections.iter().enumerate() {
        // By start: once a section starts after x ends, so do all after it.
        for y in sections[i + 1..].iter().take_while(|y| y.start <= x.end) {
            ensure!(
                x.kind == "read" && y.kind == "read",
                "overlap: {} {} owner {} held {}..{} and {} {} owner {} from {}",
                x.agent,
                x.kind,
                x.owner,
                x.start,
                x.end,
                y.agent,
                y.kind,
                y.owner,
                y.start
            );
            if y.start < x.end {
                read_overlaps += 1;
            }
        }
    }
    Ok(StressRun {
        sections,
        counter: expected,
        read_overlaps,
        stalls: watch.map(|w| w.report()).unwrap_or_default(),
    })
}

/// Two Java and two Rust agents, two owners each, `stress` with `record` on one lock and one
/// counter: the counter is exact and no two recorded intervals overlap.
fn mixed_stress(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let java2 = ctx.start_agent(Impl::Java, &[])?;
    let rust2 = ctx.start_agent(Impl::Rust, &[])?;
    let agents = [&ctx.java, &java2, &ctx.rust, &rust2];
    let (name, owner, mut con) = (ctx.name("stress"), ctx.owner(), ctx.con()?);
    let iterations = ctx.options.iterations;
    let workers = [owner, owner + 1].map(|owner| StressWorker {
        kind: "lock",
        owner,
        hold_us: 200,
    });
    let run = run_stress(ctx, &mut con, &agents, &workers, &name, iterations)?;
    let min_gap = run
        .sections
        .windows(2)
        .map(|pair| pair[1].start - pair[0].end)
        .min()
        .unwrap_or(u64::MAX);
    expect_free(&mut con, &name)?;
    Ok(format!(
        "{} workers x {iterations}: counter {}, {} intervals, none overlap (closest {:.1} µs apart)",
        agents.len() * workers.len(),
        run.counter,
        run.sections.len(),
        min_gap as f64 / 1e3
    ))
}
