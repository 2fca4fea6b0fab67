//! The semaphore and count-down latch scenarios: Rust and Java share Redisson's `RSemaphore`,
//! `RPermitExpirableSemaphore` and `RCountDownLatch` (REDISSON_LAYOUT §6.4–§6.6): a release
//! wakes an untimed acquire of the other side by its message, permits are never handed out
//! beyond the count under a mixed stress, a permit whose holder died comes back when its lease
//! ends, permit ids are the same bytes whichever side reads or releases them, and the last
//! count-down opens the waiters of both sides. A child module of `scenarios`, whose helpers
//! and macros it uses.
//!
//! Directed scenarios run twice: `holder` is the side that takes the permit (sets the latch)
//! first, `other` the side that waits (counts down last).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::server::Connection;
use serde_json::{Value, json};

use super::*;

/// Upper bound for "woken by the release's (count-down's) message", from the release's start
/// to the waiter's answer: far above a local round trip.
const SEM_WAKE_BOUND_MS: f64 = 900.0;
/// The Rust agent's periodic re-check of a waiter (the crate's default `recheck_interval`);
/// the Java agent's untimed waits have none. A waiter answering sooner than this after it began
/// waiting cannot have been woken by a re-check.
const RECHECK_MS: f64 = 1_000.0;
/// How long a waiter is left waiting, once subscribed, before the release that should wake it.
const SETTLE_MS: u64 = 200;
/// Redisson's `nonExpirableTimeout`: the score of a permit taken without a lease.
const NO_LEASE_SCORE: i64 = 922_337_203_685_477;

// ---- names (REDISSON_LAYOUT §1.2, §6.4–§6.6) ---------------------------------------------------

/// `redisson_sc:{N}` (prefixName), the channel of both semaphores.
fn sem_channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_sc:{name}")
    } else {
        format!("redisson_sc:{{{name}}}")
    }
}

/// `redisson_countdownlatch__channel__{N}`: always braces.
fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// `{N}:timeout` (suffixName), the permit-expirable semaphore's permits.
fn timeout_key(name: &str) -> String {
    if name.contains('{') {
        format!("{name}:timeout")
    } else {
        format!("{{{name}}}:timeout")
    }
}

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

// ---- what Redis holds ---------------------------------------------------------------------------

/// `key` is a string holding exactly `value`, without expiry.
fn expect_value(con: &mut Connection, key: &str, value: &str) -> Result<(), String> {
    let state = key_state(con, key)?;
    ensure_eq!(state.kind.as_str(), "string", "{key}: key type");
    let got: Option<String> = query(con, redis::cmd("GET").arg(key))?;
    ensure_eq!(got.as_deref(), Some(value), "{key}: value");
    ensure_eq!(state.pttl, -1, "{key}: PTTL");
    Ok(())
}

/// The permit-expirable semaphore's permits (`{N}:timeout`): (raw member, score), sorted by
/// member; empty when the key is gone. The zset, when present, has no expiry (nor has `N`).
fn permits_out(con: &mut Connection, name: &str) -> Result<Vec<(Vec<u8>, i64)>, String> {
    let key = timeout_key(name);
    let state = key_state(con, &key)?;
    if state.kind == "none" {
        return Ok(Vec::new());
    }
    ensure_eq!(state.kind.as_str(), "zset", "{key}: key type");
    ensure_eq!(state.pttl, -1, "{key}: PTTL");
    let raw: Vec<(Vec<u8>, f64)> = query(
        con,
        redis::cmd("ZRANGE")
            .arg(&key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES"),
    )?;
    let mut members: Vec<(Vec<u8>, i64)> = raw.into_iter().map(|(m, s)| (m, s as i64)).collect();
    members.sort();
    Ok(members)
}

/// The raw 16 bytes of a permit id, which must be 32 lowercase hex digits.
fn permit_bytes(id: &str) -> Result<Vec<u8>, String> {
    ensure!(
        id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "permit id {id:?} is not 32 lowercase hex digits"
    );
    (0..32)
        .step_by(2)
        .map(|i| u8::from_str_radix(&id[i..i + 2], 16).map_err(|e| format!("{id:?}: {e}")))
        .collect()
}

/// Deletes the keys a scenario created.
fn delete(con: &mut Connection, keys: &[String]) -> Result<(), String> {
    query::<i64>(con, redis::cmd("DEL").arg(keys)).map(drop)
}

// ---- requests -----------------------------------------------------------------------------------

fn sem_try_set(agent: &Agent, name: &str, permits: i64) -> Result<bool, String> {
    let reply = agent.call(json!({"op": "sem_try_set", "name": name, "permits": permits}))?;
    bool_field(agent, &reply, "set")
}

fn sem_try_acquire(
    agent: &Agent,
    name: &str,
    owner: u64,
    permits: i64,
    wait_ms: i64,
) -> Result<bool, String> {
    let reply = agent.call(json!({"op": "sem_acquire", "name": name, "owner": owner,
                                  "permits": permits, "wait_ms": wait_ms}))?;
    bool_field(agent, &reply, "acquired")
}

/// `sem_release`, which must succeed; the response.
fn sem_release(agent: &Agent, name: &str, permits: i64) -> Result<Value, String> {
    agent.call(json!({"op": "sem_release", "name": name, "permits": permits}))
}

fn sem_available(agent: &Agent, name: &str) -> Result<i64, String> {
    let reply = agent.call(json!({"op": "sem_available", "name": name}))?;
    int_field(agent, &reply, "permits")
}

fn latch_try_set(agent: &Agent, name: &str, count: i64) -> Result<bool, String> {
    let reply = agent.call(json!({"op": "latch_try_set", "name": name, "count": count}))?;
    bool_field(agent, &reply, "set")
}

/// `latch_count_down`, which must succeed; the response.
fn latch_count_down(agent: &Agent, name: &str) -> Result<Value, String> {
    agent.call(json!({"op": "latch_count_down", "name": name}))
}

fn latch_count(agent: &Agent, name: &str) -> Result<i64, String> {
    let reply = agent.call(json!({"op": "latch_count", "name": name}))?;
    int_field(agent, &reply, "count")
}

fn psem_try_set(agent: &Agent, name: &str, permits: i64) -> Result<bool, String> {
    let reply = agent.call(json!({"op": "psem_try_set", "name": name, "permits": permits}))?;
    bool_field(agent, &reply, "set")
}

fn psem_acquire_request(
    name: &str,
    owner: u64,
    permits: u64,
    wait_ms: Option<i64>,
    lease_ms: Option<i64>,
) -> Value {
    let mut request = json!({"op": "psem_acquire", "name": name, "owner": owner,
                             "permits": permits});
    if let Some(wait) = wait_ms {
        request["wait_ms"] = json!(wait);
    }
    if let Some(lease) = lease_ms {
        request["lease_ms"] = json!(lease);
    }
    request
}

/// The ids of a successful `psem_acquire` of `permits` permits: that many, distinct, each 32
/// lowercase hex digits.
fn psem_ids(agent: &Agent, reply: &Value, permits: usize) -> Result<Vec<String>, String> {
    ensure!(
        reply["ok"] == true && reply["acquired"] == true,
        "{}: psem_acquire did not acquire: {reply}",
        agent.label
    );
    let ids: Vec<String> = reply["ids"]
        .as_array()
        .ok_or_else(|| format!("{}: psem_acquire without ids: {reply}", agent.label))?
        .iter()
        .map(|id| id.as_str().map(str::to_owned))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("{}: ids that are not strings: {reply}", agent.label))?;
    ensure_eq!(
        ids.len(),
        permits,
        "{}: number of ids in {reply}",
        agent.label
    );
    for id in &ids {
        permit_bytes(id).map_err(|e| format!("{}: {e}", agent.label))?;
    }
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    ensure_eq!(distinct.len(), ids.len(), "{}: distinct ids", agent.label);
    Ok(ids)
}

fn psem_release(agent: &Agent, name: &str, ids: &[String]) -> Result<bool, String> {
    let reply = agent.call(json!({"op": "psem_release", "name": name, "ids": ids}))?;
    bool_field(agent, &reply, "released")
}

fn psem_available(agent: &Agent, name: &str) -> Result<i64, String> {
    let reply = agent.call(json!({"op": "psem_available", "name": name}))?;
    int_field(agent, &reply, "permits")
}

fn psem_update_lease(agent: &Agent, name: &str, id: &str, lease_ms: i64) -> Result<bool, String> {
    let reply = agent.call(
        json!({"op": "psem_update_lease", "name": name, "permit_id": id,
                                  "lease_ms": lease_ms}),
    )?;
    bool_field(agent, &reply, "updated")
}

/// `request`, which must fail; the error code.
fn error_code(agent: &Agent, request: Value) -> Result<String, String> {
    let reply = agent.reply(request.clone())?;
    ensure!(
        reply["ok"] == false,
        "{}: {request} succeeded: {reply}",
        agent.label
    );
    Ok(reply["error"].as_str().unwrap_or_default().to_string())
}

// ---- waiting ------------------------------------------------------------------------------------

/// The pending request `id` of `agent` has not been answered.
fn pending(agent: &Agent, id: u64, what: &str) -> Result<(), String> {
    ensure!(
        agent.poll(id).is_none(),
        "{} {what}: {:?}",
        agent.label,
        agent.poll(id)
    );
    Ok(())
}

/// Waits until `subscribers` listen on `channel` (each waiting agent subscribes once, plus the
/// scenario's own subscriber), then leaves the waiters [`SETTLE_MS`] more and checks that none
/// of `waiting` answered.
fn settle(
    con: &mut Connection,
    channel: &str,
    subscribers: i64,
    waiting: &[(&Agent, u64)],
) -> Result<(), String> {
    wait_waiting(con, channel, subscribers, waiting)?;
    thread::sleep(ms(SETTLE_MS));
    for (agent, id) in waiting {
        pending(agent, *id, "answered before it could")?;
    }
    Ok(())
}

/// The untimed wait `id` of `waiter`, sent at `sent_ns`, answers `field: true`, woken by the
/// message of the release (or count-down) that started at `released_ns`: within
/// [`SEM_WAKE_BOUND_MS`] of it, and sooner after the waiter began waiting than a periodic
/// re-check could have run ([`RECHECK_MS`]). Returns the delay in ms.
fn woken(
    waiter: &Agent,
    id: u64,
    field: &str,
    sent_ns: u64,
    released_ns: u64,
) -> Result<f64, String> {
    let got = waiter.wait(id, Duration::from_secs(5))?;
    ensure!(
        got["ok"] == true && got[field] == true,
        "{}: the waiting request answered {got}, expected {field}: true",
        waiter.label
    );
    let end = ns_field(waiter, &got, "end_ns")?;
    let delay = millis_between(released_ns, end);
    ensure!(
        delay > 0.0 && delay < SEM_WAKE_BOUND_MS,
        "{} answered {delay:.3} ms after the release started",
        waiter.label
    );
    let waited = millis_between(sent_ns, end);
    ensure!(
        waited < RECHECK_MS,
        "{} answered {waited:.0} ms after it began waiting, as late as a periodic re-check \
         ({RECHECK_MS} ms): the release came too late to tell what woke it",
        waiter.label
    );
    Ok(delay)
}

fn latency_summary(latencies: &[f64]) -> String {
    latencies
        .iter()
        .map(|d| format!("{d:.2}"))
        .collect::<Vec<_>>()
        .join("/")
}

// ---- scenarios ----------------------------------------------------------------------------------

/// `holder` takes the only permit of an `RSemaphore`; `other`'s untimed `sem_acquire` (Java:
/// `acquire()`, which waits on messages only) subscribes and waits; `holder`'s release wakes it
/// by its message. The key goes 1 -> 0 -> 0 (handed over) -> 1, and every release publishes the
/// new count. Three rounds.
pub(super) fn sem_wake_up(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    const ROUNDS: usize = 3;
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("sem-wakeup"), ctx.owner(), ctx.con()?);
    let channel = sem_channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;

    ensure!(
        sem_try_set(a, &name, 1)?,
        "{}: sem_try_set on a new semaphore answered false",
        a.label
    );
    ensure!(
        !sem_try_set(b, &name, 5)?,
        "{}: sem_try_set on an existing semaphore answered true",
        b.label
    );
    expect_value(&mut con, &name, "1")?;

    let mut latencies = Vec::new();
    for round in 1..=ROUNDS {
        let step = |e: String| format!("round {round}: {e}");
        ensure!(
            sem_try_acquire(a, &name, owner, 1, 0)?,
            "round {round}: {} could not take the only permit",
            a.label
        );
        expect_value(&mut con, &name, "0").map_err(step)?;
        ensure!(
            !sem_try_acquire(b, &name, owner, 1, 0)?,
            "round {round}: {} took a permit of an empty semaphore",
            b.label
        );
        for agent in [a, b] {
            ensure_eq!(
                sem_available(agent, &name)?,
                0,
                "round {round}: {} sem_available",
                agent.label
            );
        }

        let sent = now_ns();
        let waiting = b.send(json!({"op": "sem_acquire", "name": name, "owner": owner,
                                    "permits": 1}))?;
        // The waiter's subscription and ours.
        settle(&mut con, &channel, 2, &[(b, waiting)]).map_err(step)?;
        expect_value(&mut con, &name, "0").map_err(step)?;

        let released = sem_release(a, &name, 1)?;
        let delay = woken(
            b,
            waiting,
            "acquired",
            sent,
            ns_field(a, &released, "start_ns")?,
        )
        .map_err(step)?;
        expect_value(&mut con, &name, "0").map_err(step)?;
        sem_release(b, &name, 1)?;
        expect_value(&mut con, &name, "1").map_err(step)?;
        latencies.push(delay);
    }
    for agent in [a, b] {
        ensure_eq!(
            sem_available(agent, &name)?,
            1,
            "{} sem_available at the end",
            agent.label
        );
    }
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec!["1".to_string(); 1 + 2 * ROUNDS],
        "messages on {channel} (try_set 1, then per round two releases to 1)"
    );
    delete(&mut con, &[name])?;
    Ok(format!(
        "{ROUNDS} handoffs, {}'s release start -> {}'s untimed acquire answered: {} ms; \
         key 0 after each handoff, 1 after the waiter's release; messages all \"1\"",
        a.label,
        b.label,
        latency_summary(&latencies)
    ))
}

/// One permit held by one `stress` worker, from acquired to releasing.
struct Hold {
    start: u64,
    end: u64,
    agent: String,
    imp: Impl,
    owner: u64,
}

/// Two Rust and two Java agents, two owners each, `stress` with `record` on one `RSemaphore`
/// of three permits: at no instant do more than three recorded holds overlap, at some instant
/// several do, and all permits are back at the end. Reports how many acquires happened while
/// the other language held a permit.
pub(super) fn sem_stress(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let mut extra = vec![ctx.start_agent(Impl::Rust, &[])?];
    extra.push(ctx.start_agent(Impl::Java, &[])?);
    let agents = [
        (&ctx.rust, Impl::Rust),
        (&ctx.java, Impl::Java),
        (&extra[0], Impl::Rust),
        (&extra[1], Impl::Java),
    ];
    let outcome = sem_stress_on(ctx, &agents);
    for agent in &mut extra {
        agent.kill();
    }
    outcome
}

fn sem_stress_on(ctx: &Ctx, agents: &[(&Agent, Impl)]) -> Result<String, String> {
    const PERMITS: usize = 3;
    const HOLD_US: u64 = 2_000;
    let (name, owner, mut con) = (ctx.name("sem-stress"), ctx.owner(), ctx.con()?);
    let iterations = ctx.options.iterations.min(25);
    let owners = [owner, owner + 1];

    ensure!(
        sem_try_set(agents[0].0, &name, PERMITS as i64)?,
        "sem_try_set on a new semaphore answered false"
    );
    let started = Instant::now();
    let mut requests = Vec::new();
    for &(agent, imp) in agents {
        for o in owners {
            let id = agent.send(json!({"op": "stress", "kind": "semaphore", "name": name,
                                       "owner": o, "iterations": iterations,
                                       "hold_us": HOLD_US, "record": true}))?;
            requests.push((agent, imp, o, id));
        }
    }
    let mut holds = Vec::new();
    for (agent, imp, o, id) in requests {
        let reply = agent.wait(id, Duration::from_secs(120))?;
        ensure!(
            reply["ok"] == true,
            "{} owner {o}: stress failed: {reply}",
            agent.label
        );
        ensure_eq!(
            reply["done"].as_u64(),
            Some(iterations),
            "{} owner {o}: done",
            agent.label
        );
        let list = reply["intervals"]
            .as_array()
            .ok_or_else(|| format!("{}: stress reply without intervals", agent.label))?;
        ensure_eq!(
            list.len() as u64,
            iterations,
            "{} owner {o}: intervals",
            agent.label
        );
        let mut previous_end = 0;
        for pair in list {
            let (Some(start), Some(end)) = (pair[0].as_u64(), pair[1].as_u64()) else {
                return Err(format!("{}: bad interval {pair}", agent.label));
            };
            ensure!(
                previous_end <= start && start <= end,
                "{} owner {o}: interval {pair} out of order (previous ended {previous_end})",
                agent.label
            );
            previous_end = end;
            holds.push(Hold {
                start,
                end,
                agent: agent.label.clone(),
                imp,
                owner: o,
            });
        }
    }
    let took = started.elapsed();

    // Sweep line over the holds; at equal instants a start counts before an end (a permit
    // acquired at the very nanosecond another is about to be released was granted while that
    // one was still held).
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(2 * holds.len());
    for (i, h) in holds.iter().enumerate() {
        events.push((h.start, 0, i));
        events.push((h.end, 1, i));
    }
    events.sort();
    let mut active: Vec<usize> = Vec::new();
    let (mut most, mut mixed) = (0, 0usize);
    for (_, edge, i) in events {
        if edge == 1 {
            active.retain(|&j| j != i);
            continue;
        }
        active.push(i);
        if active.len() > PERMITS {
            let who: Vec<String> = active
                .iter()
                .map(|&j| {
                    let h = &holds[j];
                    format!("{} owner {} {}..{}", h.agent, h.owner, h.start, h.end)
                })
                .collect();
            return Err(format!(
                "{} holders of a {PERMITS}-permit semaphore at once: {}",
                active.len(),
                who.join(", ")
            ));
        }
        most = most.max(active.len());
        if active.iter().any(|&j| holds[j].imp != holds[i].imp) {
            mixed += 1;
        }
    }
    ensure!(
        most >= 2,
        "the holds never overlapped: at most {most} holder(s) at once of {PERMITS} permits"
    );
    // Not asserted: the semaphore is not fair, and a worker that releases takes a permit
    // again before the other agents' waiters, woken by the release's message, get to try; so
    // the side whose workers got in first usually keeps the permits until its workers are done,
    // and the two sides overlap only around that hand-over, if at all.
    expect_value(&mut con, &name, &PERMITS.to_string())?;
    for &(agent, _) in &agents[..2] {
        ensure_eq!(
            sem_available(agent, &name)?,
            PERMITS as i64,
            "{} sem_available after the stress",
            agent.label
        );
    }
    delete(&mut con, &[name])?;
    Ok(format!(
        "{} workers x {iterations} on {PERMITS} permits in {:.2} s: at most {most} holders at \
         once, {mixed} acquire(s) while the other language held one; key {PERMITS} after",
        agents.len() * owners.len(),
        took.as_secs_f64()
    ))
}

/// `holder` (a fresh agent) takes the only permit of an `RPermitExpirableSemaphore` with a
/// 1500 ms lease and is killed; `other`'s untimed `psem_acquire` without lease gets the permit
/// when the lease ends (woken by the wait hint of the permit's expiry, not a message: nobody
/// releases). The zset then holds just the new permit's raw id with the no-lease score.
pub(super) fn psem_killed_holder(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    const LEASE_MS: i64 = 1_500;
    let mut h = ctx.start_agent(holder, &[])?;
    let b = ctx.agent(other);
    let (name, owner, mut con) = (ctx.name("psem-killed"), ctx.owner(), ctx.con()?);
    let channel = sem_channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;

    ensure!(
        psem_try_set(&h, &name, 1)?,
        "{}: psem_try_set on a new semaphore answered false",
        h.label
    );
    ensure!(
        !psem_try_set(b, &name, 1)?,
        "{}: psem_try_set on an existing semaphore answered true",
        b.label
    );
    let before = epoch_ms();
    let held = h.call(psem_acquire_request(
        &name,
        owner,
        1,
        Some(0),
        Some(LEASE_MS),
    ))?;
    let after = epoch_ms();
    let ids = psem_ids(&h, &held, 1)?;
    expect_value(&mut con, &name, "0")?;
    let out = permits_out(&mut con, &name)?;
    ensure_eq!(out.len(), 1, "permits in {}", timeout_key(&name));
    ensure_eq!(
        out[0].0,
        permit_bytes(&ids[0])?,
        "the member of {} (the raw bytes of {})",
        timeout_key(&name),
        ids[0]
    );
    ensure!(
        out[0].1 >= before + LEASE_MS - 2 && out[0].1 <= after + LEASE_MS + 2,
        "score {} of a {LEASE_MS} ms lease taken between epoch ms {before} and {after}",
        out[0].1
    );
    h.kill();

    let failed = b.call(psem_acquire_request(&name, owner, 1, Some(0), None))?;
    ensure!(
        failed["acquired"] == false,
        "{} took a permit of an empty semaphore: {failed}",
        b.label
    );
    let waiting = b.send(psem_acquire_request(&name, owner, 1, None, None))?;
    wait_waiting(&mut con, &channel, 2, &[(b, waiting)])?;
    let got = b.wait(waiting, Duration::from_secs(10))?;
    let new_ids = psem_ids(b, &got, 1)?;
    // The lease's end was computed during the acquire: no earlier than its start.
    let after_lease = millis_between(
        ns_field(&h, &held, "start_ns")?,
        ns_field(b, &got, "end_ns")?,
    );
    ensure!(
        after_lease >= LEASE_MS as f64 - 50.0,
        "{} got the permit {after_lease:.0} ms after a {LEASE_MS} ms lease began",
        b.label
    );
    ensure!(
        after_lease < LEASE_MS as f64 + 2_000.0,
        "{} got the permit only {after_lease:.0} ms after a {LEASE_MS} ms lease began",
        b.label
    );
    ensure!(new_ids != ids, "the new permit has the dead holder's id");
    expect_value(&mut con, &name, "0")?;
    ensure_eq!(
        permits_out(&mut con, &name)?,
        vec![(permit_bytes(&new_ids[0])?, NO_LEASE_SCORE)],
        "permits in {} after the takeover",
        timeout_key(&name)
    );
    ensure_eq!(
        psem_available(b, &name)?,
        0,
        "{} psem_available while it holds the permit",
        b.label
    );

    ensure!(
        psem_release(b, &name, &new_ids)?,
        "{}: psem_release of its permit answered false",
        b.label
    );
    expect_value(&mut con, &name, "1")?;
    ensure_eq!(
        key_state(&mut con, &timeout_key(&name))?.kind.as_str(),
        "none",
        "{} after the release",
        timeout_key(&name)
    );
    for agent in [&ctx.rust, &ctx.java] {
        ensure_eq!(
            psem_available(agent, &name)?,
            1,
            "{} psem_available at the end",
            agent.label
        );
    }
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec!["1".to_string(); 3],
        "messages on {channel} (try_set 1, the expired permit reclaimed to 1, release of 1)"
    );
    delete(&mut con, &[name.clone(), timeout_key(&name)])?;
    Ok(format!(
        "{}'s permit (lease {LEASE_MS} ms) came to {} {after_lease:.0} ms after the acquire began; \
         then one raw-id member with score {NO_LEASE_SCORE}",
        h.label, b.label
    ))
}

/// `holder` takes two permits of an `RPermitExpirableSemaphore` with a 30 s lease; the zset's
/// members are the raw bytes of the hex ids it was given, scored with the lease's end. `other`
/// extends one id's lease, and releases both ids; a second release of them is refused, and so
/// are malformed ids, on both sides.
pub(super) fn psem_ids_cross(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    const PERMITS: i64 = 3;
    const LEASE_MS: i64 = 30_000;
    const LONGER_MS: i64 = 60_000;
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("psem-ids"), ctx.owner(), ctx.con()?);
    let (channel, zset) = (sem_channel(&name), timeout_key(&name));
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;

    ensure!(
        psem_try_set(a, &name, PERMITS)?,
        "{}: psem_try_set on a new semaphore answered false",
        a.label
    );
    expect_value(&mut con, &name, &PERMITS.to_string())?;
    let before = epoch_ms();
    let reply = a.call(psem_acquire_request(
        &name,
        owner,
        2,
        Some(0),
        Some(LEASE_MS),
    ))?;
    let after = epoch_ms();
    let ids = psem_ids(a, &reply, 2)?;
    expect_value(&mut con, &name, &(PERMITS - 2).to_string())?;
    let out = permits_out(&mut con, &name)?;
    let mut expected: Vec<Vec<u8>> = ids
        .iter()
        .map(|id| permit_bytes(id))
        .collect::<Result<_, _>>()?;
    expected.sort();
    ensure_eq!(
        out.iter().map(|(m, _)| m.clone()).collect::<Vec<_>>(),
        expected,
        "members of {zset} (the raw bytes of {ids:?})"
    );
    for (member, score) in &out {
        ensure!(
            *score >= before + LEASE_MS - 2 && *score <= after + LEASE_MS + 2,
            "score {score} of {member:02x?}: a {LEASE_MS} ms lease taken between epoch ms \
             {before} and {after}"
        );
    }
    for agent in [a, b] {
        ensure_eq!(
            psem_available(agent, &name)?,
            PERMITS - 2,
            "{} psem_available with two permits out",
            agent.label
        );
    }

    // The other side moves the first id's lease to 60 s; the second stays.
    let (first, second) = (permit_bytes(&ids[0])?, permit_bytes(&ids[1])?);
    let score_of = |out: &[(Vec<u8>, i64)], member: &[u8]| {
        out.iter()
            .find(|(m, _)| m == member)
            .map(|(_, s)| *s)
            .ok_or_else(|| format!("{member:02x?} is no longer in {zset}"))
    };
    let second_score = score_of(&out, &second)?;
    let before = epoch_ms();
    ensure!(
        psem_update_lease(b, &name, &ids[0], LONGER_MS)?,
        "{}: psem_update_lease of {}'s permit answered false",
        b.label,
        a.label
    );
    let after = epoch_ms();
    let out = permits_out(&mut con, &name)?;
    ensure_eq!(out.len(), 2, "members of {zset} after the lease update");
    let moved = score_of(&out, &first)?;
    ensure!(
        moved >= before + LONGER_MS - 2 && moved <= after + LONGER_MS + 2,
        "score {moved} after a {LONGER_MS} ms lease update between epoch ms {before} and {after}"
    );
    ensure_eq!(
        score_of(&out, &second)?,
        second_score,
        "score of the permit whose lease was not updated"
    );

    // The other side releases both; then neither side can release them again.
    ensure!(
        psem_release(b, &name, &ids)?,
        "{}: psem_release of {}'s two permits answered false",
        b.label,
        a.label
    );
    expect_value(&mut con, &name, &PERMITS.to_string())?;
    ensure_eq!(
        key_state(&mut con, &zset)?.kind.as_str(),
        "none",
        "{zset} after both permits were released"
    );
    for agent in [a, b] {
        ensure_eq!(
            psem_available(agent, &name)?,
            PERMITS,
            "{} psem_available after the release",
            agent.label
        );
        ensure!(
            !psem_release(agent, &name, &ids)?,
            "{}: a second release of the ids answered true",
            agent.label
        );
        ensure!(
            !psem_update_lease(agent, &name, &ids[1], LONGER_MS)?,
            "{}: psem_update_lease of a released id answered true",
            agent.label
        );
        for request in [
            json!({"op": "psem_release", "name": name, "ids": ["xyz"]}),
            json!({"op": "psem_update_lease", "name": name, "permit_id": "xyz",
                   "lease_ms": LONGER_MS}),
        ] {
            ensure_eq!(
                error_code(agent, request.clone())?.as_str(),
                "bad_request",
                "{}: answer to {request}",
                agent.label
            );
        }
    }
    expect_value(&mut con, &name, &PERMITS.to_string())?;
    ensure_eq!(
        key_state(&mut con, &zset)?.kind.as_str(),
        "none",
        "{zset} after the refused requests"
    );
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec![PERMITS.to_string(), "2".to_string()],
        "messages on {channel} (try_set {PERMITS}, release of two)"
    );
    delete(&mut con, &[name])?;
    Ok(format!(
        "{}'s 2 ids are the zset's raw members with the lease's end; {} moved one lease to \
         {LONGER_MS} ms and released both; again: false, \"xyz\": bad_request on both",
        a.label, b.label
    ))
}

/// `holder` sets a count-down latch to 2; one untimed `latch_await` on each side waits;
/// `holder`'s count-down leaves both waiting (no message); `other`'s last count-down deletes
/// the key and publishes `0`, which opens both waiters.
pub(super) fn latch_wake_up(ctx: &Ctx, holder: Impl, other: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(other));
    let (name, owner, mut con) = (ctx.name("latch-wakeup"), ctx.owner(), ctx.con()?);
    let channel = latch_channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;

    ensure!(
        latch_try_set(a, &name, 2)?,
        "{}: latch_try_set on a new latch answered false",
        a.label
    );
    ensure!(
        !latch_try_set(b, &name, 5)?,
        "{}: latch_try_set on an existing latch answered true",
        b.label
    );
    expect_value(&mut con, &name, "2")?;
    for agent in [a, b] {
        ensure_eq!(latch_count(agent, &name)?, 2, "{} latch_count", agent.label);
    }

    let sent = now_ns();
    let mut waiters = Vec::new();
    for agent in [a, b] {
        waiters.push((
            agent,
            agent.send(json!({"op": "latch_await", "name": name, "owner": owner}))?,
        ));
    }
    // Both agents' subscriptions and ours.
    settle(&mut con, &channel, 3, &waiters)?;

    latch_count_down(a, &name)?;
    expect_value(&mut con, &name, "1")?;
    thread::sleep(ms(SETTLE_MS));
    for &(agent, id) in &waiters {
        pending(agent, id, "opened at count 1")?;
        ensure_eq!(
            latch_count(agent, &name)?,
            1,
            "{} latch_count after one count-down",
            agent.label
        );
    }

    let opened = latch_count_down(b, &name)?;
    let opened_ns = ns_field(b, &opened, "start_ns")?;
    let mut delays = Vec::new();
    for &(agent, id) in &waiters {
        delays.push(woken(agent, id, "opened", sent, opened_ns)?);
    }
    ensure_eq!(
        key_state(&mut con, &name)?.kind.as_str(),
        "none",
        "{name} after the last count-down"
    );
    for agent in [a, b] {
        ensure_eq!(
            latch_count(agent, &name)?,
            0,
            "{} latch_count of the open latch",
            agent.label
        );
        let reply = agent.call(json!({"op": "latch_await", "name": name, "owner": owner,
                                      "wait_ms": 100}))?;
        ensure_eq!(
            reply["opened"].as_bool(),
            Some(true),
            "{}: latch_await on the open latch",
            agent.label
        );
    }
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec!["1".to_string(), "0".to_string()],
        "messages on {channel} (try_set, last count-down)"
    );
    Ok(format!(
        "{}'s count-down left both waiting; {}'s last one opened {} {:.2} ms and {} {:.2} ms \
         after it started; key deleted, messages [1, 0]",
        a.label, b.label, a.label, delays[0], b.label, delays[1]
    ))
}
