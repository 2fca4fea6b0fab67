//! The object and expiry ops (Redisson's `RObject` / `RExpirable`): one side makes a lock of
//! every kind, a semaphore, a permit-expirable semaphore and a latch, the other expires,
//! clears and deletes them, with the exact TTL of every key checked (a fair lock's queue and
//! deadlines, a fenced lock's counter, a permit-expirable semaphore's `{name}:timeout` go with
//! the name, a read hold's marker does not); `psem_try_release_many` counts as Redisson's
//! `tryRelease(List)`, all or nothing; and the permits the Rust side keeps renewing
//! (`psem_acquire` with `renew`) are ordinary permits to Java, whose lease keeps moving on.
//! A child module of `scenarios`, whose helpers and macros it uses.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::*;
use crate::server::Connection;

/// A lease far above the scenario's length: the holds are never renewed meanwhile.
const LEASE_MS: i64 = 120_000;
/// The time to live the other side sets.
const TTL_MS: i64 = 50_000;

/// What the object ops act on, by `okind`: every lock kind, then the others.
const OKINDS: [&str; 11] = [
    "lock",
    "fair",
    "read",
    "write",
    "fenced",
    "spin",
    "nonreentrant",
    "nonreentrant_fair",
    "semaphore",
    "psem",
    "latch",
];

fn obj(agent: &Agent, op: &str, okind: &str, name: &str, extra: Value) -> Result<Value, String> {
    let mut request = json!({"op": op, "okind": okind, "name": name});
    if let (Value::Object(r), Value::Object(e)) = (&mut request, extra) {
        r.extend(e);
    }
    agent.reply(request)
}

/// The op's answer: the bool `field` when it succeeded, `None` when the agent answered
/// `unsupported` (the Java agent for a latch's expiry: Redisson's `RCountDownLatch` has none).
fn obj_bool(
    agent: &Agent,
    op: &str,
    okind: &str,
    name: &str,
    extra: Value,
    field: &str,
) -> Result<Option<bool>, String> {
    let reply = obj(agent, op, okind, name, extra)?;
    if reply["ok"] == false {
        ensure_eq!(
            reply["error"].as_str(),
            Some("unsupported"),
            "{} {op} {okind}: {reply}",
            agent.label
        );
        return Ok(None);
    }
    Ok(Some(bool_field(agent, &reply, field)?))
}

fn obj_ttl(agent: &Agent, okind: &str, name: &str) -> Result<Option<i64>, String> {
    let reply = obj(agent, "obj_ttl", okind, name, json!({}))?;
    if reply["ok"] == false {
        ensure_eq!(
            reply["error"].as_str(),
            Some("unsupported"),
            "{} obj_ttl {okind}: {reply}",
            agent.label
        );
        return Ok(None);
    }
    Ok(Some(int_field(agent, &reply, "ttl_ms")?))
}

/// `{N}:suffix` (Redisson's suffixName) for a name without `{`.
fn suffixed(name: &str, suffix: &str) -> String {
    format!("{{{name}}}:{suffix}")
}

/// `prefix:{N}` (Redisson's prefixName) for a name without `{`.
fn prefixed(prefix: &str, name: &str) -> String {
    format!("{prefix}:{{{name}}}")
}

/// How long a fair kind's waiter waits: long enough for the expiry checks, over before the
/// delete (which wakes nobody), so that it never takes the deleted lock.
const WAITER_MS: u64 = 2_000;

/// What [`make`] made.
struct Made {
    /// The keys the object's expiry must act on, the name first.
    keys: Vec<String>,
    /// Keys of the primitive it must leave alone (a read hold's marker).
    untouched: Vec<String>,
    /// A fair kind's waiter: the request to wait for before the delete.
    waiter: Option<u64>,
}

/// Makes `okind` named `name` through `maker` (a hold with a long lease for the locks, with a
/// waiter of another owner queued for the fair kinds).
fn make(
    ctx: &Ctx,
    maker: &Agent,
    con: &mut Connection,
    okind: &str,
    name: &str,
) -> Result<Made, String> {
    let owner = ctx.owner();
    let mut keys = vec![name.to_owned()];
    let mut untouched = Vec::new();
    let mut waiter = None;
    match okind {
        "semaphore" => {
            maker.call(json!({"op": "sem_try_set", "name": name, "permits": 3}))?;
        }
        "psem" => {
            maker.call(json!({"op": "psem_try_set", "name": name, "permits": 3}))?;
            maker.call(json!({"op": "psem_acquire", "name": name, "owner": owner,
                              "permits": 1, "lease_ms": LEASE_MS}))?;
            keys.push(suffixed(name, "timeout"));
        }
        "latch" => {
            maker.call(json!({"op": "latch_try_set", "name": name, "count": 2}))?;
        }
        kind => {
            maker.call(lock_request(kind, name, owner, Some(LEASE_MS)))?;
            match kind {
                "fair" | "nonreentrant_fair" => {
                    // A waiter of another owner: the queue and its deadlines exist.
                    waiter = Some(
                        maker.send(json!({"op": "try_lock", "kind": kind, "name": name,
                                      "owner": ctx.owner(), "wait_ms": WAITER_MS}))?,
                    );
                    let queue = prefixed("redisson_lock_queue", name);
                    let deadline = std::time::Instant::now() + Duration::from_secs(5);
                    while query::<i64>(con, redis::cmd("LLEN").arg(&queue))? < 1 {
                        ensure!(
                            std::time::Instant::now() < deadline,
                            "{}: no waiter queued on {queue}",
                            maker.label
                        );
                        thread::sleep(ms(5));
                    }
                    keys.push(queue);
                    keys.push(prefixed("redisson_lock_timeout", name));
                }
                "fenced" => keys.push(prefixed("redisson_lock_token", name)),
                "read" => {
                    let markers: Vec<String> = query(
                        con,
                        redis::cmd("KEYS").arg(format!("{{{name}}}:*:rwlock_timeout:*")),
                    )?;
                    ensure_eq!(markers.len(), 1, "{}: read markers of {name}", maker.label);
                    untouched = markers;
                }
                _ => {}
            }
        }
    }
    for key in &keys {
        ensure!(
            key_state(con, key)?.kind != "none",
            "{} made {okind} {name}, but {key} does not exist",
            maker.label
        );
    }
    Ok(Made {
        keys,
        untouched,
        waiter,
    })
}

/// One side makes every kind of object, the other expires it (each key's TTL checked),
/// reads its TTL, clears it, deletes it; both sides see the same at each step.
pub(super) fn object_expiry(ctx: &Ctx, maker: Impl, actor: Impl) -> Result<String, String> {
    let (m, a) = (ctx.agent(maker), ctx.agent(actor));
    let mut con = ctx.con()?;
    let mut checked = 0;
    // RNonReentrantLock and RNonReentrantFairLock are Redisson 4.4.0+ (the smoke set runs
    // against 3.52.0 too): without them the Java agent cannot make or act on those kinds.
    let without_non_reentrant = !super::variants::redisson_at_least(&ctx.java, 4, 4);
    let mut skipped = Vec::new();
    for okind in OKINDS {
        if without_non_reentrant && okind.starts_with("nonreentrant") {
            skipped.push(okind);
            continue;
        }
        let name = ctx.name(&format!("obj-{okind}"));
        let Made {
            keys,
            untouched,
            waiter,
        } = make(ctx, m, &mut con, okind, &name)?;
        let untouched_before: Vec<i64> = untouched
            .iter()
            .map(|k| key_state(&mut con, k).map(|s| s.pttl))
            .collect::<Result<_, _>>()?;
        for agent in [m, a] {
            let exists = obj_bool(agent, "obj_exists", okind, &name, json!({}), "exists")?;
            ensure_eq!(exists, Some(true), "{} obj_exists {okind}", agent.label);
        }
        // The actor expires it: every key gets the TTL (unless the actor has no such op).
        let set = obj_bool(
            a,
            "obj_expire",
            okind,
            &name,
            json!({"ttl_ms": TTL_MS}),
            "set",
        )?;
        let expired_by_actor = match set {
            Some(set) => {
                ensure!(set, "{} obj_expire {okind}: false", a.label);
                true
            }
            // Only a latch's expiry may be missing (Java).
            None => {
                ensure_eq!(okind, "latch", "{}: obj_expire unsupported", a.label);
                let set = obj_bool(
                    m,
                    "obj_expire",
                    okind,
                    &name,
                    json!({"ttl_ms": TTL_MS}),
                    "set",
                )?;
                ensure_eq!(set, Some(true), "{} obj_expire {okind}", m.label);
                false
            }
        };
        for key in &keys {
            let ttl = key_state(&mut con, key)?.pttl;
            ensure!(
                (TTL_MS - 2_000..=TTL_MS).contains(&ttl),
                "{okind}: {key} has PTTL {ttl} after obj_expire {TTL_MS}"
            );
        }
        for (key, before) in untouched.iter().zip(&untouched_before) {
            let ttl = key_state(&mut con, key)?.pttl;
            ensure!(
                ttl <= *before && ttl > before - 10_000,
                "{okind}: {key} (not the object's) went from PTTL {before} to {ttl}"
            );
        }
        for agent in [m, a] {
            if let Some(ttl) = obj_ttl(agent, okind, &name)? {
                ensure!(
                    (TTL_MS - 2_000..=TTL_MS).contains(&ttl),
                    "{} obj_ttl {okind}: {ttl}",
                    agent.label
                );
            }
        }
        // The maker clears it: every key persistent again.
        let cleared = obj_bool(m, "obj_clear_expire", okind, &name, json!({}), "cleared")?;
        let clearer = if cleared.is_some() { m } else { a };
        if cleared.is_none() {
            ensure!(expired_by_actor, "{okind}: nobody can clear");
            let cleared = obj_bool(a, "obj_clear_expire", okind, &name, json!({}), "cleared")?;
            ensure_eq!(cleared, Some(true), "{} obj_clear_expire {okind}", a.label);
        } else {
            ensure_eq!(cleared, Some(true), "{} obj_clear_expire {okind}", m.label);
        }
        for key in &keys {
            ensure_eq!(
                key_state(&mut con, key)?.pttl,
                -1,
                "{okind}: {key} after clear"
            );
        }
        let again = obj_bool(
            clearer,
            "obj_clear_expire",
            okind,
            &name,
            json!({}),
            "cleared",
        )?;
        ensure_eq!(
            again,
            Some(false),
            "{} second obj_clear_expire {okind}",
            clearer.label
        );
        for agent in [m, a] {
            if let Some(ttl) = obj_ttl(agent, okind, &name)? {
                ensure_eq!(ttl, -1, "{} obj_ttl {okind} after clear", agent.label);
            }
        }
        // The fair waiter gives up (its wait is over): it must not take the deleted lock.
        if let Some(id) = waiter {
            let reply = m.wait(id, ms(WAITER_MS + 5_000))?;
            ensure!(
                reply["acquired"] == false,
                "{okind}: the waiter got a held lock: {reply}"
            );
        }
        // The actor deletes it: the keys that go with it are gone too, for both sides.
        let deleted = obj_bool(a, "obj_delete", okind, &name, json!({}), "deleted")?;
        ensure_eq!(deleted, Some(true), "{} obj_delete {okind}", a.label);
        // The fair and fenced kinds and the semaphore delete every key (a fair waiter that
        // left took its queue entry with it already); the other locks are force-unlocked.
        for key in &keys {
            ensure_eq!(
                key_state(&mut con, key)?.kind.as_str(),
                "none",
                "{okind}: {key} after obj_delete"
            );
        }
        for agent in [m, a] {
            let exists = obj_bool(agent, "obj_exists", okind, &name, json!({}), "exists")?;
            ensure_eq!(
                exists,
                Some(false),
                "{} obj_exists {okind} after delete",
                agent.label
            );
            if let Some(ttl) = obj_ttl(agent, okind, &name)? {
                ensure_eq!(ttl, -2, "{} obj_ttl {okind} after delete", agent.label);
            }
        }
        let twice = obj_bool(m, "obj_delete", okind, &name, json!({}), "deleted")?;
        ensure_eq!(twice, Some(false), "{} obj_delete {okind} twice", m.label);
        // Leave nothing: the fair waiter and any marker.
        for key in keys.iter().chain(&untouched) {
            let _: i64 = query(&mut con, redis::cmd("DEL").arg(key))?;
        }
        checked += 1;
    }
    let mut report = format!(
        "{checked} kinds made by {}, expired and deleted by {}",
        m.label, a.label
    );
    if !skipped.is_empty() {
        report.push_str(&format!(
            "; not run: {} (Redisson {} has none, 4.4.0+)",
            skipped.join(", "),
            ctx.java.version
        ));
    }
    Ok(report)
}

/// `psem_try_release_many` on permits the other side acquired: all or nothing, counted.
pub(super) fn psem_try_release_many(
    ctx: &Ctx,
    holder: Impl,
    other: Impl,
) -> Result<String, String> {
    let (h, o) = (ctx.agent(holder), ctx.agent(other));
    let name = ctx.name("psem-many");
    let mut con = ctx.con()?;
    h.call(json!({"op": "psem_try_set", "name": name, "permits": 5}))?;
    let reply =
        h.call(json!({"op": "psem_acquire", "name": name, "owner": ctx.owner(), "permits": 3}))?;
    let ids: Vec<String> = reply["ids"]
        .as_array()
        .ok_or_else(|| format!("{}: no ids: {reply}", h.label))?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    ensure_eq!(ids.len(), 3, "{}: ids", h.label);
    let count = |agent: &Agent, ids: &[String]| -> Result<i64, String> {
        let reply = agent.call(json!({"op": "psem_try_release_many", "name": name, "ids": ids}))?;
        int_field(agent, &reply, "released")
    };
    let unknown = "0123456789abcdef0123456789abcdef".to_owned();
    ensure_eq!(
        count(o, &[ids[0].clone(), unknown])?,
        0,
        "{}: a held id and an unknown one",
        o.label
    );
    let zcard: i64 = query(
        &mut con,
        redis::cmd("ZCARD").arg(suffixed(&name, "timeout")),
    )?;
    ensure_eq!(
        zcard,
        3,
        "permits still acquired after an all-or-nothing refusal"
    );
    ensure_eq!(count(o, &ids[..2])?, 2, "{}: two held ids", o.label);
    ensure_eq!(
        count(h, &[ids[2].clone(), ids[2].clone()])?,
        1,
        "{}: the same id twice",
        h.label
    );
    ensure_eq!(count(o, &ids)?, 0, "{}: released ones", o.label);
    let available: String = query(&mut con, redis::cmd("GET").arg(&name))?;
    ensure_eq!(available.as_str(), "5", "{name} after every release");
    Ok(format!(
        "{} acquired, {} released with counts 0, 2, 1, 0",
        h.label, o.label
    ))
}

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The Rust side keeps renewing its permits (`renew`); the Java side sees ordinary permits
/// whose lease end keeps moving on, cannot take them while they are renewed, and gets them
/// once they are released.
pub(super) fn psem_renewed_for_java(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    const RENEWED_LEASE_MS: i64 = 1_500;
    let (rust, java) = (ctx.agent(Impl::Rust), ctx.agent(Impl::Java));
    let name = ctx.name("psem-renew");
    let mut con = ctx.con()?;
    rust.call(json!({"op": "psem_try_set", "name": name, "permits": 1}))?;
    let reply = rust.call(
        json!({"op": "psem_acquire", "name": name, "owner": ctx.owner(),
                                 "lease_ms": RENEWED_LEASE_MS, "renew": true}),
    )?;
    let ids: Vec<String> = reply["ids"]
        .as_array()
        .ok_or_else(|| format!("{}: no ids: {reply}", rust.label))?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    ensure_eq!(ids.len(), 1, "rust: ids");
    // Java's renew is not a thing: Redisson has no permit renewal.
    let refused = java.reply(
        json!({"op": "psem_acquire", "name": name, "owner": ctx.owner(),
                                    "lease_ms": RENEWED_LEASE_MS, "renew": true, "wait_ms": 0}),
    )?;
    ensure_eq!(
        refused["error"].as_str(),
        Some("unsupported"),
        "java psem_acquire renew: {refused}"
    );
    let zset = suffixed(&name, "timeout");
    let mut last_score = 0;
    for step in 0..4 {
        thread::sleep(ms(RENEWED_LEASE_MS as u64 * 2 / 3));
        let now = epoch_ms();
        let scores: Vec<(Vec<u8>, i64)> = query(
            &mut con,
            redis::cmd("ZRANGE")
                .arg(&zset)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES"),
        )?;
        ensure_eq!(scores.len(), 1, "step {step}: permits acquired in {zset}");
        let score = scores[0].1;
        ensure!(
            score > now && score <= now + RENEWED_LEASE_MS + 50,
            "step {step}: lease end {score} at epoch ms {now} (lease {RENEWED_LEASE_MS})"
        );
        ensure!(
            score > last_score,
            "step {step}: the lease end did not move on ({score})"
        );
        last_score = score;
        let taken = java.call(
            json!({"op": "psem_acquire", "name": name, "owner": ctx.owner(),
                                      "wait_ms": 0}),
        )?;
        ensure!(
            taken["acquired"] == false,
            "step {step}: Java took a renewed permit: {taken}"
        );
        let available = java.call(json!({"op": "psem_available", "name": name}))?;
        ensure_eq!(
            int_field(java, &available, "permits")?,
            0,
            "step {step}: java psem_available"
        );
    }
    // Released by its id: renewal stops, and the permit is back for Java.
    let released = rust.call(json!({"op": "psem_release", "name": name, "ids": ids}))?;
    ensure!(
        released["released"] == true,
        "rust psem_release: {released}"
    );
    let taken = java.call(
        json!({"op": "psem_acquire", "name": name, "owner": ctx.owner(),
                                  "wait_ms": 0, "lease_ms": 10_000}),
    )?;
    ensure!(
        taken["acquired"] == true,
        "java psem_acquire after the release: {taken}"
    );
    Ok(format!(
        "renewed 4 times past a {RENEWED_LEASE_MS} ms lease; Java saw it held, then took it"
    ))
}
