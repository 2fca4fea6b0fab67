//! The lock variants across languages (REDISSON_LAYOUT §2.7, §4.11, §6.1–§6.3): Rust and Java
//! share Redisson's `RFencedLock` (one token counter, `redisson_lock_token:{N}`, whichever side
//! acquires; a waiter woken by the other side's unlock message), `RSpinLock` (an RLock hash whose
//! unlock publishes nothing, so waiters poll), `RNonReentrantLock` and
//! `RNonReentrantFairLock` (the holder's own re-acquire is refused, `not_held`, and changes
//! nothing in Redis). A child module of `scenarios`, whose helpers and macros it uses.
//!
//! Directed scenarios run twice: `holder` is the side that holds first, `other` the side that
//! waits. The non-reentrant kinds are Redisson 4.4.0+ (the smoke set, run against 3.52.0, leaves
//! them out); against an older Redisson their scenarios check only that the Java agent answers
//! `unsupported`, and say so.

use std::time::{Duration, Instant};

use crate::server::Connection;
use serde_json::{Value, json};

use super::*;

const FENCED: &str = "fenced";
const SPIN: &str = "spin";
const NON_REENTRANT: &str = "nonreentrant";
const NON_REENTRANT_FAIR: &str = "nonreentrant_fair";

/// Upper bound for "woken by the unlock message", from the unlock's start to the waiter's
/// answer: far above a local round trip.
const VARIANT_WAKE_BOUND_MS: f64 = 900.0;
/// The Rust agent's periodic re-check of a waiter (the crate's default `recheck_interval`); the
/// Java agent's waits here have none (their hint is the 600 s watchdog lease or the 300 s fair
/// slot). A waiter answering sooner than this after it began waiting cannot have been woken by a
/// re-check.
const RECHECK_MS: f64 = 1_000.0;
/// Upper bound for a spin waiter's acquire after the unlock: its back-off caps at 128 ms
/// (Redisson's default `ExponentialBackOff`), so one poll lands within that plus a round trip.
const SPIN_POLL_BOUND_MS: f64 = 500.0;
/// How long a waiter is left waiting, once it is known to wait, before the unlock.
const SETTLE_MS: u64 = 200;
/// How long a spin waiter polls before the unlock: long enough for its back-off to reach its
/// 128 ms cap (1 + 2 + 4 + ... + 128 ms is about 255 ms).
const SPIN_WAIT_MS: u64 = 400;
/// The explicit lease of some fenced acquisitions.
const LEASE_MS: i64 = 60_000;
/// Iterations per `stress` worker of [`variants_stress`].
const STRESS_ITERATIONS: u64 = 25;

// ---- names (REDISSON_LAYOUT §1.2, §4.1, §6.2) -------------------------------------------------

/// `redisson_lock_token:{N}` (prefixName), the fenced lock's token counter.
fn token_key(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock_token:{name}")
    } else {
        format!("redisson_lock_token:{{{name}}}")
    }
}

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeouts_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

// ---- what Redis holds -------------------------------------------------------------------------

/// The token counter holds exactly `token` and has no expiry.
fn expect_token(con: &mut Connection, name: &str, token: i64) -> Result<(), String> {
    let key = token_key(name);
    let state = key_state(con, &key)?;
    ensure_eq!(state.kind.as_str(), "string", "{key}: key type");
    let value: Option<String> = query(con, redis::cmd("GET").arg(&key))?;
    ensure_eq!(value, Some(token.to_string()), "{key}: value");
    ensure_eq!(state.pttl, -1, "{key}: PTTL");
    Ok(())
}

/// The lock hash's PTTL is a fresh watchdog lease (`lease_ms` None) or a fresh explicit lease.
fn expect_lease(state: &KeyState, lease_ms: Option<i64>, what: &str) -> Result<(), String> {
    let lease = lease_ms.unwrap_or(LONG_WATCHDOG_MS);
    ensure!(
        state.pttl > lease - 5_000 && state.pttl <= lease,
        "{what}: PTTL {} for a lease of {lease} ms",
        state.pttl
    );
    Ok(())
}

/// Every key named after `name` (`*{N}*`: the token counter, queue, deadlines) but Redisson's
/// transient unlock latches (`redisson_unlock_latch:{N}:<id>`, REDISSON_LAYOUT §1.8), sorted.
fn other_keys(con: &mut Connection, name: &str) -> Result<Vec<String>, String> {
    let mut keys: Vec<String> =
        query::<Vec<String>>(con, redis::cmd("KEYS").arg(format!("*{{{name}}}*")))?
            .into_iter()
            .filter(|k| !k.starts_with("redisson_unlock_latch:"))
            .collect();
    keys.sort();
    Ok(keys)
}

/// The fair queue, head first.
fn queue(con: &mut Connection, name: &str) -> Result<Vec<String>, String> {
    query(
        con,
        redis::cmd("LRANGE").arg(queue_key(name)).arg(0).arg(-1),
    )
}

/// The fair waiters' deadlines (`redisson_lock_timeout:{N}`), as (field, score) in score order.
fn deadlines(con: &mut Connection, name: &str) -> Result<Vec<(String, i64)>, String> {
    let raw: Vec<(String, f64)> = query(
        con,
        redis::cmd("ZRANGE")
            .arg(timeouts_key(name))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES"),
    )?;
    Ok(raw.into_iter().map(|(f, s)| (f, s as i64)).collect())
}

fn expect_no_queue(con: &mut Connection, name: &str) -> Result<(), String> {
    for key in [queue_key(name), timeouts_key(name)] {
        ensure_eq!(key_state(con, &key)?.kind.as_str(), "none", "{key}");
    }
    Ok(())
}

/// Waits (10 s at most) until the fair queue has `len` entries, checking meanwhile that no
/// pending request was answered.
fn wait_queued(
    con: &mut Connection,
    name: &str,
    len: usize,
    pending: &[(&Agent, u64)],
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n: usize = query(con, redis::cmd("LLEN").arg(queue_key(name)))?;
        if n == len {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "queue length {n}, expected {len} within 10 s"
        );
        for (agent, id) in pending {
            still_pending(agent, *id, "answered while queued")?;
        }
        thread::sleep(ms(2));
    }
}

fn delete(con: &mut Connection, keys: &[String]) -> Result<(), String> {
    query::<i64>(con, redis::cmd("DEL").arg(keys)).map(drop)
}

// ---- requests and answers ---------------------------------------------------------------------

/// The pending request `id` of `agent` has not been answered.
fn still_pending(agent: &Agent, id: u64, what: &str) -> Result<(), String> {
    ensure!(
        agent.poll(id).is_none(),
        "{} {what}: {:?}",
        agent.label,
        agent.poll(id)
    );
    Ok(())
}

/// The `token` of a fenced acquisition's answer: a positive integer.
fn token_of(agent: &Agent, reply: &Value) -> Result<i64, String> {
    let token = int_field(agent, reply, "token")?;
    ensure!(token > 0, "{}: token {token} in {reply}", agent.label);
    Ok(token)
}

/// `request`, which must fail; the error code and how long the agent took (ms).
fn refused(agent: &Agent, request: &Value) -> Result<(String, f64), String> {
    let reply = agent.reply(request.clone())?;
    ensure!(
        reply["ok"] == false,
        "{}: {request} succeeded: {reply}",
        agent.label
    );
    let took = match (reply["start_ns"].as_u64(), reply["end_ns"].as_u64()) {
        (Some(start), Some(end)) => millis_between(start, end),
        _ => f64::NAN,
    };
    Ok((
        reply["error"].as_str().unwrap_or_default().to_string(),
        took,
    ))
}

/// A `try_lock` that must not acquire: `acquired` false and no `token`.
fn try_refused(
    agent: &Agent,
    kind: &str,
    name: &str,
    owner: u64,
    wait_ms: i64,
) -> Result<(), String> {
    let reply = agent.call(json!({"op": "try_lock", "kind": kind, "name": name,
                                  "owner": owner, "wait_ms": wait_ms}))?;
    ensure!(
        reply["acquired"] == false && reply.get("token").is_none(),
        "{}: {kind} try_lock (wait {wait_ms} ms) of a held lock answered {reply}",
        agent.label
    );
    Ok(())
}

/// The pending `lock` `id` of `waiter`, sent at `sent_ns`, succeeds, woken by the message of
/// the unlock that started at `released_ns`: within [`VARIANT_WAKE_BOUND_MS`] of it, and sooner
/// after the waiter began waiting than a periodic re-check could have run ([`RECHECK_MS`]).
/// Returns the answer and the delay in ms.
fn woken(waiter: &Agent, id: u64, sent_ns: u64, released_ns: u64) -> Result<(Value, f64), String> {
    let got = acquired(waiter, id, Duration::from_secs(5))?;
    let end = ns_field(waiter, &got, "end_ns")?;
    let delay = millis_between(released_ns, end);
    ensure!(
        delay > 0.0 && delay < VARIANT_WAKE_BOUND_MS,
        "{} got the lock {delay:.3} ms after the unlock started",
        waiter.label
    );
    let waited = millis_between(sent_ns, end);
    ensure!(
        waited < RECHECK_MS,
        "{} got the lock {waited:.0} ms after it began waiting, as late as a periodic re-check \
         ({RECHECK_MS} ms): the unlock came too late to tell what woke it",
        waiter.label
    );
    Ok((got, delay))
}

fn latency_summary(latencies: &[f64]) -> String {
    latencies
        .iter()
        .map(|d| format!("{d:.2}"))
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether the Java agent's Redisson is at least `major.minor`.
pub(super) fn redisson_at_least(agent: &Agent, major: u64, minor: u64) -> bool {
    let mut parts = agent
        .version
        .split(['.', '-'])
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    version >= (major, minor)
}

/// For a Redisson without the non-reentrant locks (before 4.4.0): checks that the Java agent
/// answers `unsupported` for `kind`, and returns what the scenario reports instead of running.
fn without_non_reentrant(ctx: &Ctx, kind: &str) -> Result<Option<String>, String> {
    if redisson_at_least(&ctx.java, 4, 4) {
        return Ok(None);
    }
    let name = ctx.name("nonreentrant-unsupported");
    let request = json!({"op": "try_lock", "kind": kind, "name": name, "owner": ctx.owner()});
    let (error, _) = refused(&ctx.java, &request)?;
    ensure_eq!(
        error.as_str(),
        "unsupported",
        "{}: {kind} with Redisson {}",
        ctx.java.label,
        ctx.java.version
    );
    Ok(Some(format!(
        "not run: Redisson {} has no {kind} (4.4.0+); the java agent answers unsupported",
        ctx.java.version
    )))
}

// ---- fenced -----------------------------------------------------------------------------------

/// How one acquisition of [`fenced_tokens`] is asked for.
#[derive(Clone, Copy, Debug)]
enum Ask {
    /// `lock`, watchdog lease.
    Lock,
    /// `lock` with [`LEASE_MS`].
    LockLease,
    /// `try_lock` without wait.
    TryLock,
    /// `try_lock` with a 500 ms wait (acquires at once).
    TryLockWait,
    /// `try_lock` without wait, with [`LEASE_MS`].
    TryLockLease,
}

impl Ask {
    fn request(self, name: &str, owner: u64) -> Value {
        let mut request = match self {
            Self::Lock | Self::LockLease => lock_request(FENCED, name, owner, None),
            Self::TryLock | Self::TryLockWait | Self::TryLockLease => {
                json!({"op": "try_lock", "kind": FENCED, "name": name, "owner": owner})
            }
        };
        match self {
            Self::LockLease | Self::TryLockLease => request["lease_ms"] = json!(LEASE_MS),
            Self::TryLockWait => request["wait_ms"] = json!(500),
            Self::Lock | Self::TryLock => {}
        }
        request
    }

    fn lease(self) -> Option<i64> {
        matches!(self, Self::LockLease | Self::TryLockLease).then_some(LEASE_MS)
    }

    /// Sends the request; the token of the acquisition it must make.
    fn acquire(self, agent: &Agent, name: &str, owner: u64) -> Result<i64, String> {
        let reply = agent.call(self.request(name, owner))?;
        if !matches!(self, Self::Lock | Self::LockLease) {
            ensure!(
                reply["acquired"] == true,
                "{}: {self:?} did not acquire: {reply}",
                agent.label
            );
        }
        token_of(agent, &reply)
    }
}

/// Acquisitions alternate between the sides (`holder`, `other`, `holder`, ... three rounds),
/// each side entering twice (a first acquisition and a re-entry, by `lock` and `try_lock`, with
/// and without a lease): the tokens are exactly 1, 2, 3, ... in acquisition order whichever side
/// acquires, `redisson_lock_token:{N}` always equals the last token and never expires, and the
/// hash is the usual RLock hash (`<client_id>:<thread>` = hold count, lease as asked). While one
/// side holds, the other's `try_lock` (without and with a wait) answers false, without a token,
/// and leaves the counter alone. Only full releases publish, `0` each.
pub(super) fn fenced_tokens(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("fenced-tokens"), ctx.owner(), ctx.con()?);
    let channel = channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;
    // Per round: how each side enters first, and how it re-enters.
    let asks = [
        (Ask::Lock, Ask::TryLock),
        (Ask::TryLockWait, Ask::Lock),
        (Ask::LockLease, Ask::TryLockLease),
    ];

    let mut tokens = Vec::new();
    let mut fields: [Option<String>; 2] = [None, None];
    for (round, (first, again)) in asks.into_iter().enumerate() {
        for (side, (x, y)) in [(a, b), (b, a)].into_iter().enumerate() {
            let at = |e: String| format!("round {round}, {} holds: {e}", x.label);
            for (count, ask) in [(1, first), (2, again)] {
                let token = ask.acquire(x, &name, owner).map_err(at)?;
                tokens.push((x.label.clone(), token));
                ensure_eq!(
                    token,
                    tokens.len() as i64,
                    "round {round}: {}'s {ask:?} (hold {count}): token",
                    x.label
                );
                expect_token(&mut con, &name, token).map_err(at)?;
                let state = expect_holder(&mut con, &name, x, count).map_err(at)?;
                expect_lease(&state, ask.lease(), &format!("{}'s {ask:?}", x.label)).map_err(at)?;
                let field = &state.fields[0].0;
                let known = fields[side].get_or_insert_with(|| field.clone()).clone();
                ensure_eq!(field, &known, "round {round}: {}'s field", x.label);
            }
            for wait_ms in [0, 100] {
                try_refused(y, FENCED, &name, owner, wait_ms).map_err(at)?;
                try_refused(y, FENCED, &name, owner + 1, wait_ms).map_err(at)?;
            }
            expect_token(&mut con, &name, tokens.len() as i64).map_err(at)?;
            expect_holder(&mut con, &name, x, 2).map_err(at)?;
            ensure_eq!(
                hold_count(x, FENCED, &name, owner)?,
                2,
                "round {round}: {} hold_count",
                x.label
            );
            unlock(x, FENCED, &name, owner)?;
            expect_holder(&mut con, &name, x, 1).map_err(at)?;
            unlock(x, FENCED, &name, owner)?;
            expect_free(&mut con, &name).map_err(at)?;
        }
    }
    let total = tokens.len() as i64;
    ensure_eq!(total, 4 * asks.len() as i64, "acquisitions");
    expect_token(&mut con, &name, total)?;
    ensure_eq!(
        other_keys(&mut con, &name)?,
        vec![token_key(&name)],
        "keys about {name} once free"
    );
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec!["0".to_string(); 2 * asks.len()],
        "messages on {channel} (one per full release)"
    );
    delete(&mut con, &[token_key(&name)])?;
    let sequence = tokens
        .iter()
        .map(|(label, t)| format!("{}{t}", &label[..1]))
        .collect::<Vec<_>>()
        .join(" ");
    Ok(format!(
        "tokens {sequence} (r: rust, j: java), re-entries included; counter {total} without \
         TTL; refused try_locks carry no token and leave the counter"
    ))
}

/// `other`'s blocking fenced `lock` waits (subscribed) while `holder` holds; `holder`'s unlock
/// wakes it by its message (bound as in the semaphore scenarios), and it answers the next
/// token. Three rounds: tokens 1 -> 2, 3 -> 4, 5 -> 6.
pub(super) fn fenced_wake_up(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    const ROUNDS: i64 = 3;
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("fenced-wakeup"), ctx.owner(), ctx.con()?);
    let channel = channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;

    let mut latencies = Vec::new();
    for round in 0..ROUNDS {
        let at = |e: String| format!("round {}: {e}", round + 1);
        let held = token_of(a, &lock(a, FENCED, &name, owner)?)?;
        ensure_eq!(
            held,
            2 * round + 1,
            "round {}: {}'s token",
            round + 1,
            a.label
        );
        let sent = now_ns();
        let waiting = b.send(lock_request(FENCED, &name, owner, None))?;
        // The waiter's subscription and ours.
        wait_waiting(&mut con, &channel, 2, &[(b, waiting)]).map_err(at)?;
        thread::sleep(ms(SETTLE_MS));
        still_pending(b, waiting, "got a held fenced lock").map_err(at)?;
        expect_holder(&mut con, &name, a, 1).map_err(at)?;
        expect_token(&mut con, &name, held).map_err(at)?;

        let released = unlock(a, FENCED, &name, owner)?;
        let (got, delay) =
            woken(b, waiting, sent, ns_field(a, &released, "start_ns")?).map_err(at)?;
        ensure_eq!(
            token_of(b, &got)?,
            held + 1,
            "round {}: {}'s token after the wake-up",
            round + 1,
            b.label
        );
        expect_holder(&mut con, &name, b, 1).map_err(at)?;
        expect_token(&mut con, &name, held + 1).map_err(at)?;
        unlock(b, FENCED, &name, owner)?;
        expect_free(&mut con, &name).map_err(at)?;
        latencies.push(delay);
    }
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec!["0".to_string(); 2 * ROUNDS as usize],
        "messages on {channel}"
    );
    expect_token(&mut con, &name, 2 * ROUNDS)?;
    delete(&mut con, &[token_key(&name)])?;
    Ok(format!(
        "{ROUNDS} handoffs, {}'s unlock start -> {}'s fenced lock answered: {} ms; tokens \
         1..{} in turn",
        a.label,
        b.label,
        latency_summary(&latencies),
        2 * ROUNDS
    ))
}

/// Two Rust and two Java agents, two owners each, `stress` of the fenced lock with `record`:
/// the counter is exact, no two recorded sections overlap, and the token counter ends at the
/// number of acquisitions of all workers.
pub(super) fn variants_stress(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let rust2 = ctx.start_agent(Impl::Rust, &[])?;
    let java2 = ctx.start_agent(Impl::Java, &[])?;
    let agents = [&ctx.rust, &ctx.java, &rust2, &java2];
    let (name, owner, mut con) = (ctx.name("fenced-stress"), ctx.owner(), ctx.con()?);
    let workers = [owner, owner + 1].map(|owner| StressWorker {
        kind: FENCED,
        owner,
        hold_us: 200,
    });
    let run = run_stress(ctx, &mut con, &agents, &workers, &name, STRESS_ITERATIONS)?;
    let total = (agents.len() * workers.len()) as i64 * STRESS_ITERATIONS as i64;
    ensure_eq!(run.sections.len() as i64, total, "recorded sections");
    expect_token(&mut con, &name, total)?;
    expect_free(&mut con, &name)?;
    let min_gap = run
        .sections
        .windows(2)
        .map(|pair| pair[1].start - pair[0].end)
        .min()
        .unwrap_or(u64::MAX);
    let by_java = run
        .sections
        .iter()
        .filter(|s| s.agent.starts_with("java"))
        .count();
    delete(&mut con, &[token_key(&name), format!("{name}:counter")])?;
    Ok(format!(
        "{} workers x {STRESS_ITERATIONS}: counter {}, {total} sections ({by_java} java), none \
         overlap (closest {:.1} µs apart); token counter {total}",
        agents.len() * workers.len(),
        run.counter,
        min_gap as f64 / 1e3
    ))
}

// ---- spin -------------------------------------------------------------------------------------

/// `holder` holds a spin lock (the RLock hash: a `lock`-kind `try_lock` of either side fails,
/// and so does `other`'s spin `try_lock`, with and without a wait); `other`'s blocking spin
/// `lock` polls without subscribing; `holder`'s unlock publishes nothing (a plain subscriber on
/// `redisson_lock__channel:{N}` hears no message all along), and the waiter gets the lock within
/// [`SPIN_POLL_BOUND_MS`] by its next poll. Three rounds.
pub(super) fn spin_polling(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    const ROUNDS: usize = 3;
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("spin-polling"), ctx.owner(), ctx.con()?);
    let channel = channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;

    let mut latencies = Vec::new();
    for round in 1..=ROUNDS {
        let at = |e: String| format!("round {round}: {e}");
        lock(a, SPIN, &name, owner)?;
        let state = expect_holder(&mut con, &name, a, 1).map_err(at)?;
        expect_lease(&state, None, "spin lock").map_err(at)?;
        for side in [a, b] {
            ensure!(
                !try_lock(side, "lock", &name, owner + 1, 0)?,
                "round {round}: {}'s lock-kind try_lock got a held spin lock",
                side.label
            );
        }
        for wait_ms in [0, 100] {
            try_refused(b, SPIN, &name, owner, wait_ms).map_err(at)?;
        }
        ensure_eq!(
            key_state(&mut con, &name)?.fields,
            state.fields,
            "round {round}: the hash after the refused try_locks"
        );

        let waiting = b.send(lock_request(SPIN, &name, owner, None))?;
        thread::sleep(ms(SPIN_WAIT_MS));
        still_pending(b, waiting, "got a held spin lock").map_err(at)?;
        // Ours only: a spin waiter polls, it does not listen.
        ensure_eq!(
            numsub(&mut con, &channel)?,
            1,
            "round {round}: subscribers of {channel} while {} waits",
            b.label
        );
        let released = unlock(a, SPIN, &name, owner)?;
        let got = acquired(b, waiting, Duration::from_secs(5)).map_err(at)?;
        let delay = millis_between(
            ns_field(a, &released, "start_ns")?,
            ns_field(b, &got, "end_ns")?,
        );
        ensure!(
            delay > 0.0 && delay < SPIN_POLL_BOUND_MS,
            "round {round}: {} got the spin lock {delay:.1} ms after the unlock started \
             (back-off caps at 128 ms)",
            b.label
        );
        expect_holder(&mut con, &name, b, 1).map_err(at)?;
        ensure!(
            !try_lock(a, "lock", &name, owner + 1, 0)?,
            "round {round}: {}'s lock-kind try_lock got {}'s spin lock",
            a.label,
            b.label
        );
        unlock(b, SPIN, &name, owner)?;
        expect_free(&mut con, &name).map_err(at)?;
        latencies.push(delay);
    }
    ensure_eq!(
        subscriber.payloads(ms(200)),
        Vec::<String>::new(),
        "messages on {channel} (spin unlocks publish nothing)"
    );
    ensure_eq!(
        other_keys(&mut con, &name)?,
        Vec::<String>::new(),
        "keys about {name} once free"
    );
    Ok(format!(
        "{ROUNDS} handoffs, {}'s unlock start -> {}'s polling spin lock answered: {} ms; no \
         message, no waiter subscribed; lock-kind try_locks refused",
        a.label,
        b.label,
        latency_summary(&latencies)
    ))
}

// ---- non-reentrant ----------------------------------------------------------------------------

/// The re-acquires of `agent`'s owner `owner`, which holds `kind` on `name`: `try_lock` without
/// wait and with a 200 ms wait, each refused with `not_held`; the hash's fields are unchanged,
/// its lease not extended, the hold count still 1, and (fair kind) the queue and its deadlines
/// unchanged. Returns how long the refusals took (ms).
fn reacquire_refused(
    con: &mut Connection,
    agent: &Agent,
    kind: &str,
    name: &str,
    owner: u64,
) -> Result<Vec<f64>, String> {
    let before = key_state(con, name)?;
    holder_field(&before, agent)?;
    let queued = (queue(con, name)?, deadlines(con, name)?);
    let mut took = Vec::new();
    for wait_ms in [0, 200] {
        let request = json!({"op": "try_lock", "kind": kind, "name": name, "owner": owner,
                             "wait_ms": wait_ms});
        let (error, ms) = refused(agent, &request)?;
        ensure_eq!(
            error.as_str(),
            "not_held",
            "{}: re-acquire {request}",
            agent.label
        );
        took.push(ms);
    }
    let after = key_state(con, name)?;
    ensure_eq!(
        after.fields,
        before.fields,
        "{name} after {}'s refused re-acquires",
        agent.label
    );
    ensure!(
        after.pttl > 0 && after.pttl <= before.pttl,
        "{}'s refused re-acquires changed the PTTL {} -> {}",
        agent.label,
        before.pttl,
        after.pttl
    );
    ensure_eq!(
        (queue(con, name)?, deadlines(con, name)?),
        queued,
        "the queue and deadlines after {}'s refused re-acquires",
        agent.label
    );
    ensure_eq!(
        hold_count(agent, kind, name, owner)?,
        1,
        "{} hold_count after the refused re-acquires",
        agent.label
    );
    ensure!(
        is_held(agent, kind, name, owner)?,
        "{} no longer holds after the refused re-acquires",
        agent.label
    );
    Ok(took)
}

/// `holder` takes the non-reentrant lock; its own re-acquires are refused (`not_held`) and
/// change nothing; `other`'s `try_lock` (and an RLock `try_lock` on the same name) answers
/// false; `other`'s blocking `lock` is woken by `holder`'s unlock message and holds it with its
/// own field; then `other`'s re-acquires are refused too, and `holder`'s unlock is `not_held`.
pub(super) fn nonreentrant(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    if let Some(skipped) = without_non_reentrant(ctx, NON_REENTRANT)? {
        return Ok(skipped);
    }
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("nonreentrant"), ctx.owner(), ctx.con()?);
    let channel = channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;

    lock(a, NON_REENTRANT, &name, owner)?;
    let state = expect_holder(&mut con, &name, a, 1)?;
    expect_lease(&state, None, "non-reentrant lock")?;
    let mut took = reacquire_refused(&mut con, a, NON_REENTRANT, &name, owner)?;
    for wait_ms in [0, 100] {
        try_refused(b, NON_REENTRANT, &name, owner, wait_ms)?;
    }
    ensure!(
        !try_lock(b, "lock", &name, owner + 1, 0)?,
        "{}'s lock-kind try_lock got a held non-reentrant lock",
        b.label
    );
    expect_holder(&mut con, &name, a, 1)?;

    let sent = now_ns();
    let waiting = b.send(lock_request(NON_REENTRANT, &name, owner, None))?;
    // The waiter's subscription and ours.
    wait_waiting(&mut con, &channel, 2, &[(b, waiting)])?;
    thread::sleep(ms(SETTLE_MS));
    still_pending(b, waiting, "got a held non-reentrant lock")?;
    let released = unlock(a, NON_REENTRANT, &name, owner)?;
    let (_, delay) = woken(b, waiting, sent, ns_field(a, &released, "start_ns")?)?;
    let state = expect_holder(&mut con, &name, b, 1)?;
    expect_lease(&state, None, "non-reentrant lock after the handoff")?;
    took.extend(reacquire_refused(&mut con, b, NON_REENTRANT, &name, owner)?);
    ensure_eq!(
        unlock_error(a, NON_REENTRANT, &name, owner)?.as_str(),
        "not_held",
        "unlock by {} after the handoff",
        a.label
    );
    expect_holder(&mut con, &name, b, 1)?;
    unlock(b, NON_REENTRANT, &name, owner)?;
    expect_free(&mut con, &name)?;
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec!["0".to_string(); 2],
        "messages on {channel}"
    );
    ensure_eq!(
        other_keys(&mut con, &name)?,
        Vec::<String>::new(),
        "keys about {name} once free"
    );
    Ok(format!(
        "re-acquires refused not_held on both sides (hash, lease, count 1 unchanged; answered \
         in {} ms); {}'s waiter woken {delay:.2} ms after {}'s unlock began",
        latency_summary(&took),
        b.label,
        a.label
    ))
}

/// The same over the non-reentrant fair lock, plus its queue: `holder`'s re-acquires are
/// refused and never join the queue; `other`'s `try_lock` without wait never joins it either;
/// two waiters, `other`'s W1 then `holder`'s W2 (another owner), queued in that order, are
/// served in that order, each by its own channel's message; W1's re-acquire while W2 waits is
/// refused and leaves the queue and W2's deadline alone; queue and deadlines are gone at the
/// end.
pub(super) fn nonreentrant_fair(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    if let Some(skipped) = without_non_reentrant(ctx, NON_REENTRANT_FAIR)? {
        return Ok(skipped);
    }
    const KIND: &str = NON_REENTRANT_FAIR;
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("nonreentrant-fair"), ctx.owner(), ctx.con()?);

    lock(a, KIND, &name, owner)?;
    let state = expect_holder(&mut con, &name, a, 1)?;
    expect_lease(&state, None, "non-reentrant fair lock")?;
    let mut took = reacquire_refused(&mut con, a, KIND, &name, owner)?;
    expect_no_queue(&mut con, &name)?;
    try_refused(b, KIND, &name, owner, 0)?;
    ensure!(
        !try_lock(b, "fair", &name, owner + 3, 0)?,
        "{}'s fair-kind try_lock got a held non-reentrant fair lock",
        b.label
    );
    expect_no_queue(&mut con, &name)?;

    // W1 (other side), then W2 (holder side, another owner).
    let (w1, w2) = (owner + 1, owner + 2);
    let sent1 = now_ns();
    let first = b.send(lock_request(KIND, &name, w1, None))?;
    wait_queued(&mut con, &name, 1, &[])?;
    let second = a.send(lock_request(KIND, &name, w2, None))?;
    wait_queued(&mut con, &name, 2, &[(b, first)])?;
    thread::sleep(ms(30));
    still_pending(b, first, "answered while queued")?;
    still_pending(a, second, "answered while queued")?;
    let fields = queue(&mut con, &name)?;
    for (field, agent) in fields.iter().zip([b, a]) {
        ensure!(
            field.starts_with(&format!("{}:", agent.client_id)),
            "queue {fields:?}: {field} is not {}'s",
            agent.label
        );
    }
    let deadlines_now = deadlines(&mut con, &name)?;
    ensure_eq!(
        deadlines_now
            .iter()
            .map(|(f, _)| f.clone())
            .collect::<Vec<_>>(),
        fields,
        "deadline order"
    );

    // Unlock: W1 only, by its message.
    let released = unlock(a, KIND, &name, owner)?;
    let (_, delay1) = woken(b, first, sent1, ns_field(a, &released, "start_ns")?)?;
    thread::sleep(ms(20));
    still_pending(a, second, "was served before the queue's head")?;
    let state = expect_holder(&mut con, &name, b, 1)?;
    ensure_eq!(
        &state.fields[0].0,
        &fields[0],
        "the field of W1 once it holds"
    );
    ensure_eq!(
        queue(&mut con, &name)?,
        fields[1..].to_vec(),
        "queue after W1"
    );
    took.extend(reacquire_refused(&mut con, b, KIND, &name, w1)?);
    ensure_eq!(
        unlock_error(a, KIND, &name, owner)?.as_str(),
        "not_held",
        "unlock by {} after the handoff",
        a.label
    );

    // W1 unlocks: W2.
    let released = unlock(b, KIND, &name, w1)?;
    let got = acquired(a, second, Duration::from_secs(5))?;
    let delay2 = millis_between(
        ns_field(b, &released, "start_ns")?,
        ns_field(a, &got, "end_ns")?,
    );
    ensure!(
        delay2 > 0.0 && delay2 < VARIANT_WAKE_BOUND_MS,
        "W2 ({}) got the lock {delay2:.3} ms after W1's unlock started",
        a.label
    );
    let state = expect_holder(&mut con, &name, a, 1)?;
    ensure_eq!(
        &state.fields[0].0,
        &fields[1],
        "the field of W2 once it holds"
    );
    expect_no_queue(&mut con, &name)?;
    took.extend(reacquire_refused(&mut con, a, KIND, &name, w2)?);
    expect_no_queue(&mut con, &name)?;
    unlock(a, KIND, &name, w2)?;
    expect_free(&mut con, &name)?;
    expect_no_queue(&mut con, &name)?;
    ensure_eq!(
        other_keys(&mut con, &name)?,
        Vec::<String>::new(),
        "keys about {name} once free"
    );
    Ok(format!(
        "re-acquires refused not_held, queue untouched (answered in {} ms); served W1 {} then \
         W2 {}, {delay1:.2}/{delay2:.2} ms after each unlock began; queue and deadlines gone",
        latency_summary(&took),
        b.label,
        a.label
    ))
}
