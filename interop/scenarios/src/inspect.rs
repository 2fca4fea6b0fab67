//! Inspection of structures the Java agent made: the `redisson-sync` CLI (`cli/`, built by
//! `interop/build`) reads a Java holder's lock, a Java fair queue, Java readers, a Java
//! semaphore holder and Java expirable permits, and shows the Java client id and thread ids
//! exactly as they are in Redis, without changing anything (DUMP of every key before and
//! after). Then `watch` shows a handoff from a Java holder to a Rust waiter as it happens, and
//! the lock events of a Java holder (`watch --json`, the crate's `Client::events`): its
//! acquisitions, its unlock, Redisson's `forceUnlock()` and a lease running out, with and
//! without keyspace notifications. The CLI connects the way the scenarios' agents do: one
//! server, the cluster's seed nodes (`--cluster`), or the Sentinels (`--sentinel`, `--master`);
//! and, with a server of its own, over TLS with an ACL user and a name prefix. A child module
//! of `scenarios`, whose helpers and macros it uses.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::server::{Backend, Connection};
use serde_json::{Value, json};

use super::*;

/// The CLI binary, built by `interop/build` beside the agents.
fn cli(ctx: &Ctx) -> std::path::PathBuf {
    ctx.root.join("target/release/redisson-sync")
}

/// How the CLI reaches the scenarios' Redis: `--redis URL`, `--cluster SEEDS --pubsub MODE`
/// (the Java agent's mode) or `--sentinel URLS --master NAME`.
fn target(ctx: &Ctx) -> Vec<String> {
    match &ctx.server {
        Backend::Single(server) => vec!["--redis".into(), server.url()],
        // Subscribed as the Java agent publishes.
        Backend::Cluster(cluster) => vec![
            "--cluster".into(),
            cluster.seed_urls().join(","),
            "--pubsub".into(),
            ctx.options.pubsub.clone(),
        ],
        Backend::Sentinel(setup) => vec![
            "--sentinel".into(),
            setup.sentinel_urls().join(","),
            "--master".into(),
            setup.master_name().into(),
        ],
    }
}

/// Runs the CLI with `args` against the scenario server; its stdout on success.
fn run_cli(ctx: &Ctx, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cli(ctx))
        .args(target(ctx))
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

/// DUMP of every key of the database, sorted by key, with when it expires: what must not
/// change.
fn dump_all(con: &mut Connection) -> Result<Vec<(String, Vec<u8>, i64)>, String> {
    let mut out = Vec::new();
    for key in all_keys(con)? {
        let dump: Vec<u8> = query(con, redis::cmd("DUMP").arg(&key))?;
        let expires = expire_time(con, &key)?;
        out.push((key, dump, expires));
    }
    Ok(out)
}

/// When `key` expires (`PEXPIRETIME`: epoch ms, -1 never, -2 no key). Before Redis 7 there is
/// no `PEXPIRETIME`, and `PTTL` moves on between two reads, so there only whether the key
/// expires is compared: 0 for an expiring key.
fn expire_time(con: &mut Connection, key: &str) -> Result<i64, String> {
    match query(con, redis::cmd("PEXPIRETIME").arg(key)) {
        Err(e) if e.contains("unknown command") => {
            let ttl: i64 = query(con, redis::cmd("PTTL").arg(key))?;
            Ok(ttl.min(0))
        }
        other => other,
    }
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
        .args(target(ctx))
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

/// `watch NAME --json` running: the CLI, and its lines as they come.
struct JsonWatch {
    child: Child,
    lines: mpsc::Receiver<String>,
    secs: f64,
}

impl JsonWatch {
    /// Starts `redisson-sync <before> watch NAME --json --for SECS --poll 0.2 <extra>` and
    /// waits for its first event (`watching`: subscribed by then), returned parsed.
    fn start(
        ctx: &Ctx,
        before: &[String],
        name: &str,
        secs: f64,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Result<(Self, Value), String> {
        let mut command = Command::new(cli(ctx));
        command
            .args(before)
            .args(["watch", name, "--json", "--poll", "0.2", "--for"])
            .arg(secs.to_string())
            .args(extra)
            .stdout(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run the CLI: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let watch = Self { child, lines, secs };
        let first = watch
            .lines
            .recv_timeout(Duration::from_secs(20))
            .map_err(|_| "watch printed nothing within 20 s".to_string())?;
        let first: Value =
            serde_json::from_str(&first).map_err(|e| format!("watch output {first:?}: {e}"))?;
        ensure_eq!(first["event"], json!("watching"), "first event");
        Ok((watch, first))
    }

    /// Waits for the CLI to end (`--for`), bounded, and returns every further event.
    fn finish(mut self) -> Result<Vec<Value>, String> {
        let deadline = Instant::now() + Duration::from_secs_f64(self.secs + 15.0);
        let status = loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err("watch did not stop after --for".into());
            }
            std::thread::sleep(ms(20));
        };
        ensure!(status.success(), "watch failed: {status}");
        let mut events = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            events.push(
                serde_json::from_str::<Value>(&line)
                    .map_err(|e| format!("watch output {line:?}: {e}"))?,
            );
        }
        Ok(events)
    }
}

/// `(event, seen_by, holder field)` of each event.
fn told(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap_or_default().to_owned(),
                e["seen_by"].as_str().unwrap_or_default().to_owned(),
                e["holder"]["field"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// `CONFIG SET notify-keyspace-events <flags>` where the scenarios' keys live: the server,
/// the Sentinels' current master, or every node of the cluster.
fn set_keyspace(ctx: &Ctx, flags: &str) -> Result<(), String> {
    let mut set = redis::cmd("CONFIG");
    set.arg("SET").arg("notify-keyspace-events").arg(flags);
    match ctx.con()? {
        Connection::Cluster(_, nodes) => {
            for url in nodes {
                let mut node = redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection())
                    .map_err(|e| format!("{url}: {e}"))?;
                set.query::<()>(&mut node)
                    .map_err(|e| format!("{url}: CONFIG SET: {e}"))?;
            }
            Ok(())
        }
        mut con => query::<()>(&mut con, &set),
    }
}

/// The one holder field of the lock hash `name` (the Java holder's `<client id>:<thread id>`).
fn only_field(con: &mut Connection, name: &str) -> Result<String, String> {
    let fields: Vec<(String, String)> = query(con, redis::cmd("HGETALL").arg(name))?;
    ensure_eq!(fields.len(), 1, "fields of {name}");
    Ok(fields[0].0.clone())
}

/// The lock events of a Java holder, told by the Rust side (`watch --json`, on
/// `Client::events`), with keyspace notifications on and then without them (`--no-keyspace`):
/// Java locks and unlocks, locks and force-unlocks (Redisson's `forceUnlock()`), locks with a
/// 700 ms lease and lets it run out. Each event names the Java holder's field, exactly as it is
/// in Redis. In a cluster the name has a hash tag, so that the keyspace notifications reach the
/// subscription (they are published on the key's node only).
pub(super) fn events_java(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let java = ctx.agent(Impl::Java);
    let mut con = ctx.con()?;
    set_keyspace(ctx, "KA")?;
    let result = (|| {
        let mut summary = Vec::new();
        for keyspace in [true, false] {
            let o = ctx.owner();
            let name = if ctx.server.is_cluster() {
                format!("{{{}}}", ctx.name("events"))
            } else {
                ctx.name("events")
            };
            let extra: &[&str] = if keyspace { &[] } else { &["--no-keyspace"] };
            let (watch, first) = JsonWatch::start(ctx, &target(ctx), &name, 5.0, extra, &[])?;
            ensure_eq!(
                first["keyspace_on"],
                json!(keyspace),
                "keyspace: {}",
                first["keyspace"]
            );
            let pause = || std::thread::sleep(ms(500));
            lock_(java, "lock", &name, o)?;
            let f1 = only_field(&mut con, &name)?;
            pause();
            unlock(java, "lock", &name, o)?;
            pause();
            lock_(java, "lock", &name, o + 1)?;
            let f2 = only_field(&mut con, &name)?;
            pause();
            let (released, _) = force_unlock(java, "lock", &name)?;
            ensure!(released, "Java's forceUnlock removed nothing");
            pause();
            java.call(lock_request("lock", &name, o + 2, Some(700)))?;
            let f3 = only_field(&mut con, &name)?;
            std::thread::sleep(ms(1300));
            let events = watch.finish()?;
            let (by_ks, by_msg) = if keyspace {
                ("keyspace", "keyspace")
            } else {
                ("snapshot", "message")
            };
            let t = |e: &str, by: &str, f: &String| (e.to_owned(), by.to_owned(), f.clone());
            let expected = vec![
                t("acquired", by_ks, &f1),
                t("released", by_msg, &f1),
                t("acquired", by_ks, &f2),
                // Without keyspace notifications a force unlock is a release (same message).
                t(
                    if keyspace {
                        "force_unlocked"
                    } else {
                        "released"
                    },
                    by_msg,
                    &f2,
                ),
                t("acquired", by_ks, &f3),
                t("expired", by_ks, &f3),
            ];
            ensure_eq!(
                told(&events),
                expected,
                "events of {name} (keyspace {keyspace})"
            );
            for e in &events {
                ensure_eq!(
                    e["holder"]["client_id"],
                    json!(java.client_id),
                    "the holder's client id in {e}"
                );
            }
            let (_, thread) = split_field(&f1).ok_or("unparsable Java field")?;
            ensure_eq!(
                events[0]["holder"]["owner"],
                json!(thread),
                "Java thread id"
            );
            summary.push(format!(
                "{}: {}",
                if keyspace {
                    "keyspace on"
                } else {
                    "keyspace off"
                },
                events
                    .iter()
                    .map(|e| format!(
                        "{} ({})",
                        e["event"].as_str().unwrap_or_default(),
                        e["seen_by"].as_str().unwrap_or_default()
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(summary.join("; "))
    })();
    set_keyspace(ctx, "")?;
    result
}

/// The CLI over TLS with an ACL user (password from `$REDISSON_SYNC_PASSWORD`) and a name
/// prefix, on a Java agent that connects the same way (`rediss://`, `--tls-ca`, `--user`,
/// `--password`, `--name-prefix app:`): `inspect` shows the Java holder under `app:`, `list`
/// finds only prefixed keys, `watch` tells the Java unlock, and the password is never printed.
pub(super) fn cli_tls_prefix(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    const PASSWORD: &str = "cli-interop-secret";
    let files = testkit::TlsFiles::try_generate()?;
    let (server, port) = testkit::RedisServer::try_start_tls(&files, &[])?;
    let mut con = Connection::Single(server.try_connect()?);
    query::<()>(
        &mut con,
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg("cli-app")
            .arg("on")
            .arg(format!(">{PASSWORD}"))
            .arg("~app:*")
            // The other keys of a structure named app:N (an inspection reads them all).
            .arg("~redisson_*")
            .arg("~{app:*")
            .arg("&*")
            .arg("+@all"),
    )?;
    let url = format!("rediss://127.0.0.1:{port}");
    let ca = files.ca_cert().to_string_lossy().into_owned();
    let java = ctx.start_agent(
        Impl::Java,
        &[
            "--redis",
            &url,
            "--tls-ca",
            &ca,
            "--user",
            "cli-app",
            "--password",
            PASSWORD,
            "--name-prefix",
            "app:",
        ],
    )?;
    let o = ctx.owner();
    let name = ctx.name("cli-tls");
    let key = format!("app:{name}");
    lock_(&java, "lock", &name, o)?;
    let field = only_field(&mut con, &key)?;
    let before: Vec<String> = [
        "--redis",
        &url,
        "--tls-ca",
        &ca,
        "--user",
        "cli-app",
        "--name-prefix",
        "app:",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let env = [("REDISSON_SYNC_PASSWORD", PASSWORD)];
    let run = |args: &[&str]| -> Result<String, String> {
        let out = Command::new(cli(ctx))
            .args(&before)
            .args(args)
            .env("REDISSON_SYNC_PASSWORD", PASSWORD)
            .output()
            .map_err(|e| format!("cannot run the CLI: {e}"))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ensure!(
            !text.contains(PASSWORD),
            "the CLI printed the password: {text}"
        );
        ensure!(out.status.success(), "redisson-sync {args:?}: {text}");
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let shown: Value = serde_json::from_str(run(&["inspect", &name, "--json"])?.trim())
        .map_err(|e| e.to_string())?;
    ensure_eq!(shown["name"], json!(key), "inspected name");
    let (client, thread) = split_field(&field).ok_or("unparsable Java field")?;
    ensure_eq!(
        shown["holders"],
        json!([{"client_id": client, "owner": thread, "count": 1}]),
        "holders of {key}"
    );
    ensure_eq!(client, java.client_id.as_str(), "Java client id");
    let listed = run(&["list", &format!("{name}*")])?;
    ensure!(
        listed.lines().count() == 1 && listed.contains(&key),
        "list: {listed}"
    );
    let (watch, _) = JsonWatch::start(ctx, &before, &name, 1.5, &[], &env)?;
    unlock(&java, "lock", &name, o)?;
    let events = watch.finish()?;
    ensure_eq!(
        told(&events),
        vec![("released".to_owned(), "message".to_owned(), field.clone())],
        "events of {key}"
    );
    drop(java);
    Ok(format!(
        "rediss:// + CA, ACL user, password from the environment (never printed), prefix app:: Java holder {field} shown under {key}, its unlock told by message"
    ))
}
