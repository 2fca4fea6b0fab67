//! The lock variants across languages (REDISSON_LAYOUT §2.7, §4.11, §6.1–§6.3): the fenced
//! lock's token sequence whichever side acquires and its waiter woken by the other side's
//! unlock message; the spin lock's silent unlock and polling waiter; the non-reentrant locks'
//! refused re-entry (`not_held`, Redisson's `IllegalMonitorStateException`) with ownership
//! intact. A child module of `scenarios`, whose helpers and macros it uses. The non-reentrant
//! kinds are Redisson 4.4+: not in the smoke set run against 3.52.0.

use std::time::{Duration, Instant};

use redis::Connection;
use serde_json::{Value, json};

use super::*;

/// `redisson_lock_token:{N}`.
fn token_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}

/// The `token` of a fenced `lock` / `try_lock` answer.
fn token_of(agent: &Agent, reply: &Value) -> Result<i64, String> {
    int_field(agent, reply, "token")
}

/// Fenced tokens 1, 2, 3, ... in acquisition order whichever side acquires, re-entries
/// included; the other side's try_lock meanwhile fails without a token.
pub(super) fn fenced_tokens(ctx: &Ctx, first: Impl, second: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(first), ctx.agent(second));
    let (name, owner, mut con) = (ctx.name("fenced"), ctx.owner(), ctx.con()?);
    let mut seen = Vec::new();
    for round in 0..3 {
        for (holder, other) in [(a, b), (b, a)] {
            seen.push(token_of(holder, &lock(holder, "fenced", &name, owner)?)?);
            // Re-entry draws a token too.
            let reply = holder.call(json!({"op": "try_lock", "kind": "fenced", "name": name,
                                           "owner": owner}))?;
            ensure!(
                bool_field(holder, &reply, "acquired")?,
                "{} re-entry refused",
                holder.label
            );
            seen.push(token_of(holder, &reply)?);
            let refused = other.call(json!({"op": "try_lock", "kind": "fenced", "name": name,
                                            "owner": owner}))?;
            ensure!(
                !bool_field(other, &refused, "acquired")? && refused.get("token").is_none(),
                "round {round}: {} got a held fenced lock: {refused}",
                other.label
            );
            expect_holder(&mut con, &name, holder, 2)?;
            unlock(holder, "fenced", &name, owner)?;
            unlock(holder, "fenced", &name, owner)?;
        }
    }
    let expected: Vec<i64> = (1..=seen.len() as i64).collect();
    ensure_eq!(seen, expected, "tokens in acquisition order");
    let counter: String = query(&mut con, redis::cmd("GET").arg(token_key(&name)))?;
    ensure_eq!(counter, seen.len().to_string(), "{}", token_key(&name));
    let ttl: i64 = query(&mut con, redis::cmd("PTTL").arg(token_key(&name)))?;
    ensure_eq!(ttl, -1, "the token counter's TTL");
    expect_free(&mut con, &name)?;
    query::<()>(&mut con, redis::cmd("DEL").arg(token_key(&name)))?;
    Ok(format!(
        "tokens 1..{} alternating {} and {}, re-entries included; counter {} without TTL",
        seen.len(),
        a.label,
        b.label,
        seen.len()
    ))
}

/// A fenced waiter of one side is woken by the other side's unlock message, and gets the next
/// token.
pub(super) fn fenced_wake_up(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(waiter));
    let (name, owner, mut con) = (ctx.name("fenced-wake"), ctx.owner(), ctx.con()?);
    let t1 = token_of(a, &lock(a, "fenced", &name, owner)?)?;
    let pending = b.send(lock_request("fenced", &name, owner, None))?;
    wait_waiting(&mut con, &channel(&name), 1, &[(b, pending)])?;
    let released = unlock(a, "fenced", &name, owner)?;
    let got = b.wait(pending, Duration::from_secs(5))?;
    ensure!(got["ok"] == true, "{}: {got}", b.label);
    let latency_ms =
        (ns_field(b, &got, "end_ns")? as f64 - ns_field(a, &released, "start_ns")? as f64) / 1e6;
    ensure!(
        latency_ms < 900.0,
        "{} got the lock {latency_ms:.1} ms after the unlock: not by the message",
        b.label
    );
    let t2 = token_of(b, &got)?;
    ensure_eq!(t2, t1 + 1, "the waiter's token");
    expect_holder(&mut con, &name, b, 1)?;
    unlock(b, "fenced", &name, owner)?;
    query::<()>(&mut con, redis::cmd("DEL").arg(token_key(&name)))?;
    Ok(format!(
        "{}'s waiter woken {latency_ms:.2} ms after {}'s unlock began, token {t1} -> {t2}",
        b.label, a.label
    ))
}

/// A spin lock: the unlock publishes nothing (a plain subscriber sees no message), the other
/// side's waiter gets it by polling, and a `lock`-kind try_lock of either side fails while it
/// is held (same hash).
pub(super) fn spin_polling(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(waiter));
    let (name, owner, mut con) = (ctx.name("spin"), ctx.owner(), ctx.con()?);
    let mut sub = ctx
        .server
        .redis_client()
        .get_connection()
        .map_err(|e| e.to_string())?;
    let mut pubsub = sub.as_pubsub();
    pubsub
        .subscribe(channel(&name))
        .map_err(|e| e.to_string())?;
    pubsub
        .set_read_timeout(Some(ms(50)))
        .map_err(|e| e.to_string())?;

    lock(a, "spin", &name, owner)?;
    expect_holder(&mut con, &name, a, 1)?;
    for side in [a, b] {
        ensure!(
            !try_lock(side, "lock", &name, owner + 1, 0)?,
            "{}: a lock-kind try_lock got a held spin lock",
            side.label
        );
    }
    let pending = b.send(lock_request("spin", &name, owner, None))?;
    std::thread::sleep(ms(300));
    ensure!(
        b.poll(pending).is_none(),
        "{} got a held spin lock",
        b.label
    );
    let released = unlock(a, "spin", &name, owner)?;
    let got = b.wait(pending, Duration::from_secs(5))?;
    ensure!(got["ok"] == true, "{}: {got}", b.label);
    let latency_ms =
        (ns_field(b, &got, "end_ns")? as f64 - ns_field(a, &released, "start_ns")? as f64) / 1e6;
    ensure!(
        latency_ms < 500.0,
        "{} polled its way in only {latency_ms:.1} ms after the unlock (back-off caps at 128 ms)",
        b.label
    );
    expect_holder(&mut con, &name, b, 1)?;
    unlock(b, "spin", &name, owner)?;
    let deadline = Instant::now() + ms(300);
    while Instant::now() < deadline {
        if let Ok(msg) = pubsub.get_message() {
            let payload: String = msg.get_payload().unwrap_or_default();
            return Err(format!(
                "a spin unlock published {payload:?} on {}",
                channel(&name)
            ));
        }
    }
    expect_free(&mut con, &name)?;
    Ok(format!(
        "{}'s waiter polled its way in {latency_ms:.1} ms after {}'s unlock; nothing published",
        b.label, a.label
    ))
}

/// A non-reentrant lock (`kind`: `nonreentrant` or `nonreentrant_fair`): the holder's own
/// re-acquire fails with `not_held` and leaves its single hold; the other side waits (for the
/// fair kind: two waiters, one per side, served in queue order) and gets it after the unlock.
fn non_reentrant(ctx: &Ctx, kind: &str, holder: Impl, waiter: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(holder), ctx.agent(waiter));
    let (name, owner, mut con) = (ctx.name(kind), ctx.owner(), ctx.con()?);
    lock(a, kind, &name, owner)?;
    let before = key_state(&mut con, &name)?;
    for request in [
        json!({"op": "lock", "kind": kind, "name": name, "owner": owner}),
        json!({"op": "try_lock", "kind": kind, "name": name, "owner": owner}),
        json!({"op": "try_lock", "kind": kind, "name": name, "owner": owner, "wait_ms": 200}),
    ] {
        let reply = a.reply(request.clone())?;
        ensure!(
            reply["ok"] == false && reply["error"] == "not_held",
            "{}: re-acquire {request} answered {reply}",
            a.label
        );
    }
    let after = key_state(&mut con, &name)?;
    ensure_eq!(
        (&after.kind, &after.fields),
        (&before.kind, &before.fields),
        "{name} after the refused re-entries"
    );
    ensure!(
        after.pttl <= before.pttl,
        "a refused re-entry extended the lease: {} -> {}",
        before.pttl,
        after.pttl
    );
    ensure_eq!(
        hold_count(a, kind, &name, owner)?,
        1,
        "{}'s hold count",
        a.label
    );
    if kind == "nonreentrant_fair" {
        let queued: i64 = query(
            &mut con,
            redis::cmd("LLEN").arg(format!("redisson_lock_queue:{{{name}}}")),
        )?;
        ensure_eq!(queued, 0, "queue after the refused re-entries");
    }
    ensure!(
        !try_lock(b, kind, &name, owner, 0)?,
        "{} got a held lock",
        b.label
    );

    let mut order = Vec::new();
    let first = b.send(lock_request(kind, &name, owner + 1, None))?;
    let second = if kind == "nonreentrant_fair" {
        wait_queue(&mut con, &name, 1)?;
        let id = a.send(lock_request(kind, &name, owner + 2, None))?;
        wait_queue(&mut con, &name, 2)?;
        Some(id)
    } else {
        wait_waiting(&mut con, &channel(&name), 1, &[(b, first)])?;
        None
    };
    unlock(a, kind, &name, owner)?;
    b.wait(first, Duration::from_secs(5))?;
    order.push(b.label.clone());
    expect_holder(&mut con, &name, b, 1)?;
    unlock(b, kind, &name, owner + 1)?;
    if let Some(id) = second {
        a.wait(id, Duration::from_secs(5))?;
        order.push(a.label.clone());
        unlock(a, kind, &name, owner + 2)?;
        for key in [
            format!("redisson_lock_queue:{{{name}}}"),
            format!("redisson_lock_timeout:{{{name}}}"),
        ] {
            let state = key_state(&mut con, &key)?;
            ensure_eq!(state.kind.as_str(), "none", "{key} at the end");
        }
    }
    expect_free(&mut con, &name)?;
    Ok(format!(
        "{}'s re-acquires refused (not_held), hold count 1, hash unchanged; then served: {}",
        a.label,
        order.join(", ")
    ))
}

pub(super) fn nonreentrant(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    non_reentrant(ctx, "nonreentrant", holder, waiter)
}

pub(super) fn nonreentrant_fair(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    non_reentrant(ctx, "nonreentrant_fair", holder, waiter)
}

/// Polls `LLEN redisson_lock_queue:{name}` until it is `n` (bounded: 5 s).
fn wait_queue(con: &mut Connection, name: &str, n: i64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let len: i64 = query(
            con,
            redis::cmd("LLEN").arg(format!("redisson_lock_queue:{{{name}}}")),
        )?;
        if len == n {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "queue of {name} stayed at {len}, expected {n}"
        );
        std::thread::sleep(ms(10));
    }
}
