//! Inspection of structures the Java agent made: the `redisson-sync` CLI (`cli/`, built by
//! `interop/build`) reads a Java holder's lock, a Java fair queue, Java readers, a Java
//! semaphore holder and Java expirable permits, and shows the Java client id and thread ids
//! exactly as they are in Redis, without changing anything (DUMP of every key before and
//! after). Then `watch` shows a handoff from a Java holder to a Rust waiter as it happens. A
//! child module of `scenarios`, whose helpers and macros it uses.

use std::process::Command;
use std::time::Duration;

use crate::server::Connection;
use serde_json::{Value, json};

use super::*;

/// The CLI binary, built by `interop/build` beside the agents.
fn cli(ctx: &Ctx) -> std::path::PathBuf {
    ctx.root.join("target/release/redisson-sync")
}

/// Runs the CLI with `args` against the scenario server; its stdout on success.
fn run_cli(ctx: &Ctx, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cli(ctx))
        .arg("--redis")
        .arg(ctx.server.url())
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cli(ctx).display()))?;
    if !out.status.success() {
        return Err(format!(
            "redisson-sync {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `inspect NAME --json [extra...]`, parsed.
fn inspect_json(ctx: &Ctx, name: &str, extra: &[&str]) -> Result<Value, String> {
    let mut args = vec!["inspect", name, "--json"];
    args.extend_from_slice(extra);
    let text = run_cli(ctx, &args)?;
    serde_json::from_str(text.trim()).map_err(|e| format!("inspect output {text:?}: {e}"))
}

/// DUMP of every key of the database, sorted by key: what must not change.
fn dump_all(con: &mut Connection) -> Result<Vec<(String, Vec<u8>, i64)>, String> {
    let mut out = Vec::new();
    for key in all_keys(con)? {
        let dump: Vec<u8> = query(con, redis::cmd("DUMP").arg(&key))?;
        let expires: i64 = query(con, redis::cmd("PEXPIRETIME").arg(&key))?;
        out.push((key, dump, expires));
    }
    Ok(out)
}

/// `<client id>:<thread id>` split at the last `:` (the thread id of a `:write` field is the
/// part before the suffix).
fn split_field(field: &str) -> Option<(&str, u64)> {
    let field = field.strip_suffix(":write").unwrap_or(field);
    let (client, owner) = field.rsplit_once(':')?;
    Some((client, owner.parse().ok()?))
}

/// Every Java-made structure inspected by the CLI, checked against raw Redis, with DUMP
/// equality around each inspection.
pub(super) fn inspect_java(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let java = ctx.agent(Impl::Java);
    let mut con = ctx.con()?;
    let o = ctx.owner();
    let (lock, fair, rw, sem, psem) = (
        ctx.name("inspect-lock"),
        ctx.name("inspect-fair"),
        ctx.name("inspect-rw"),
        ctx.name("inspect-sem"),
        ctx.name("inspect-psem"),
    );

    // A Java holder, twice.
    lock_(java, "lock", &lock, o)?;
    lock_(java, "lock", &lock, o)?;
    // A Java fair holder and two queued Java waiters, in order.
    lock_(java, "fair", &fair, o + 1)?;
    let w1 = java.send(lock_request("fair", &fair, o + 2, None))?;
    wait_queue_len(&mut con, &fair, 1)?;
    let w2 = java.send(lock_request("fair", &fair, o + 3, None))?;
    wait_queue_len(&mut con, &fair, 2)?;
    // Two Java readers.
    lock_(java, "read", &rw, o + 4)?;
    lock_(java, "read", &rw, o + 5)?;
    // A Java semaphore holder and Java expirable permits.
    java.call(json!({"op": "sem_try_set", "name": sem, "permits": 3}))?;
    java.call(
        json!({"op": "sem_acquire", "name": sem, "owner": o + 6, "permits": 1, "wait_ms": 0}),
    )?;
    java.call(json!({"op": "psem_try_set", "name": psem, "permits": 2}))?;
    let acquired =
        java.call(json!({"op": "psem_acquire", "name": psem, "owner": o + 7, "lease_ms": 60_000}))?;
    let java_ids: Vec<String> = acquired["ids"]
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();

    let before = dump_all(&mut con)?;
    let lock_json = inspect_json(ctx, &lock, &[])?;
    let fair_json = inspect_json(ctx, &fair, &[])?;
    let rw_json = inspect_json(ctx, &rw, &[])?;
    let sem_json = inspect_json(ctx, &sem, &["--as", "semaphore"])?;
    let psem_json = inspect_json(ctx, &psem, &[])?;
    let table = run_cli(ctx, &["inspect", &lock])?;
    ensure!(dump_all(&mut con)? == before, "an inspection changed Redis");

    // The lock: the Java field exactly as in Redis.
    let fields: Vec<(String, String)> = query(&mut con, redis::cmd("HGETALL").arg(&lock))?;
    ensure_eq!(fields.len(), 1, "{lock} fields");
    let (client, thread) = split_field(&fields[0].0).ok_or("unparsable Java field")?;
    ensure_eq!(client, java.client_id.as_str(), "Java field's client id");
    ensure_eq!(lock_json["kind"], json!("lock"), "{lock} kind");
    ensure_eq!(
        lock_json["holders"],
        json!([{"client_id": client, "owner": thread, "count": 2}]),
        "{lock} holders"
    );
    ensure!(
        lock_json["ttl_ms"].as_i64().is_some_and(|t| t > 0),
        "{lock} ttl {}",
        lock_json["ttl_ms"]
    );
    ensure!(
        table.contains(client) && table.contains(&thread.to_string()),
        "the table does not show {client}:{thread}: {table}"
    );

    // The fair queue: Java waiters in order with their deadlines from the timeout zset.
    let queue: Vec<String> = query(
        &mut con,
        redis::cmd("LRANGE")
            .arg(format!("redisson_lock_queue:{{{fair}}}"))
            .arg(0)
            .arg(-1),
    )?;
    ensure_eq!(fair_json["kind"], json!("fair"), "{fair} kind");
    let shown = fair_json["queue"].as_array().cloned().unwrap_or_default();
    ensure_eq!(shown.len(), queue.len(), "{fair} queue length");
    for (waiter, field) in shown.iter().zip(&queue) {
        let (client, thread) = split_field(field).ok_or("unparsable waiter")?;
        let deadline: f64 = query(
            &mut con,
            redis::cmd("ZSCORE")
                .arg(format!("redisson_lock_timeout:{{{fair}}}"))
                .arg(field),
        )?;
        ensure_eq!(
            *waiter,
            json!({"client_id": client, "owner": thread, "deadline_ms": deadline as i64}),
            "{fair} waiter {field}"
        );
    }

    // The readers: mode read, both Java fields.
    ensure_eq!(rw_json["kind"], json!("rw"), "{rw} kind");
    let mut readers: Vec<(String, u64)> = rw_json["holders"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|h| {
            (
                h["client_id"].as_str().unwrap_or_default().to_owned(),
                h["owner"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    readers.sort();
    let raw: Vec<(String, String)> = query(&mut con, redis::cmd("HGETALL").arg(&rw))?;
    let mut expected: Vec<(String, u64)> = raw
        .iter()
        .filter(|(f, _)| f != "mode")
        .filter_map(|(f, _)| split_field(f).map(|(c, t)| (c.to_owned(), t)))
        .collect();
    expected.sort();
    ensure_eq!(readers, expected, "{rw} readers");
    ensure!(
        rw_json["holders"]
            .as_array()
            .is_some_and(|hs| hs.iter().all(|h| h["mode"] == json!("read"))),
        "{rw} holders' mode: {}",
        rw_json["holders"]
    );

    // The semaphores.
    ensure_eq!(sem_json["kind"], json!("semaphore"), "{sem} kind");
    ensure_eq!(sem_json["permits"], json!(2), "{sem} permits");
    ensure_eq!(psem_json["kind"], json!("permit_semaphore"), "{psem} kind");
    ensure_eq!(psem_json["permits"], json!(1), "{psem} permits");
    let shown_ids: Vec<String> = psem_json["acquired"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p["id"].as_str().map(str::to_owned))
        .collect();
    ensure_eq!(shown_ids, java_ids, "{psem} acquired ids");

    // Clean up: the fair waiters get their turns.
    unlock(java, "fair", &fair, o + 1)?;
    java.wait(w1, CALL_TIMEOUT)?;
    unlock(java, "fair", &fair, o + 2)?;
    java.wait(w2, CALL_TIMEOUT)?;
    unlock(java, "fair", &fair, o + 3)?;
    unlock(java, "lock", &lock, o)?;
    unlock(java, "lock", &lock, o)?;
    unlock(java, "read", &rw, o + 4)?;
    unlock(java, "read", &rw, o + 5)?;
    java.call(json!({"op": "sem_release", "name": sem, "permits": 1}))?;
    java.call(json!({"op": "psem_release", "name": psem, "ids": java_ids}))?;
    for key in [&sem, &psem] {
        query::<()>(&mut con, redis::cmd("DEL").arg(key))?;
    }
    Ok(format!(
        "Java holder {client}:{thread} (x2), fair queue of {}, {} readers, semaphore and {} expirable permit(s): all shown as in Redis; DUMP unchanged",
        queue.len(),
        expected.len(),
        shown_ids.len()
    ))
}

/// `watch` while a Java holder hands the lock to a Rust waiter: the output shows the handoff.
pub(super) fn watch_java_handoff(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let (java, rust) = (ctx.agent(Impl::Java), ctx.agent(Impl::Rust));
    let mut con = ctx.con()?;
    let o = ctx.owner();
    let name = ctx.name("watch");
    lock_(java, "lock", &name, o)?;
    let waiter = rust.send(lock_request("lock", &name, o + 1, None))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while numsub(&mut con, &channel(&name))? < 1 {
        ensure!(
            std::time::Instant::now() < deadline,
            "the Rust waiter never subscribed"
        );
        std::thread::sleep(ms(10));
    }
    let watcher = Command::new(cli(ctx))
        .arg("--redis")
        .arg(ctx.server.url())
        .args(["watch", &name, "--for", "2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the CLI: {e}"))?;
    std::thread::sleep(ms(700));
    unlock(java, "lock", &name, o)?;
    rust.wait(waiter, CALL_TIMEOUT)?;
    let out = watcher
        .wait_with_output()
        .map_err(|e| format!("watch: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(out.status.success(), "watch failed: {text}");
    let handoff = text
        .lines()
        .find(|l| l.contains("handoff:"))
        .ok_or_else(|| format!("no handoff in the watch output: {text}"))?
        .trim()
        .to_owned();
    ensure!(
        handoff.contains(&java.client_id) && handoff.contains(&rust.client_id),
        "the handoff line does not name both clients: {handoff}"
    );
    unlock(rust, "lock", &name, o + 1)?;
    Ok(handoff)
}

/// `lock` of `kind` by `owner`, waiting for its answer.
fn lock_(agent: &Agent, kind: &str, name: &str, owner: u64) -> Result<(), String> {
    lock(agent, kind, name, owner).map(|_| ())
}

/// Polls `LLEN redisson_lock_queue:{name}` until it is `n` (bounded: 5 s).
fn wait_queue_len(con: &mut Connection, name: &str, n: i64) -> Result<(), String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let len: i64 = query(
            con,
            redis::cmd("LLEN").arg(format!("redisson_lock_queue:{{{name}}}")),
        )?;
        if len == n {
            return Ok(());
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "queue of {name} stayed at {len}, expected {n}"
        );
        std::thread::sleep(ms(10));
    }
}
