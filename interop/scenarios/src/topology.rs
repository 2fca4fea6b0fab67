//! Connecting where the Java services do (issue 13), across languages: a key prefix that both
//! sides apply (Redisson's `NameMapper`, REDISSON_LAYOUT §1.1) and a Sentinel failover. A
//! child module of `scenarios`, whose helpers and macros it uses.

use std::thread;
use std::time::{Duration, Instant};

use super::*;
use crate::server::{Backend, query};

/// The prefix both sides' fresh agents get in the name-prefix scenario.
const PREFIX: &str = "app:";

/// Both sides with `--name-prefix app:`: a lock, a fair lock and a read-write lock taken on
/// one side live under the prefixed keys (`app:N`, `redisson_lock_queue:{app:N}`, ...), nothing
/// is written under the bare name, an agent without the prefix does not see them, and the other
/// side's waiter is woken by the unlock message on the prefixed channel.
pub(super) fn name_prefix(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    let a = ctx.start_agent(holder, &["--name-prefix", PREFIX])?;
    let b = ctx.start_agent(waiter, &["--name-prefix", PREFIX])?;
    let bare = ctx.agent(waiter);
    let mut con = ctx.con()?;
    let owner = ctx.owner();

    // The reentrant lock.
    let name = ctx.name("prefix");
    let key = format!("{PREFIX}{name}");
    lock(&a, "lock", &name, owner)?;
    expect_holder(&mut con, &key, &a, 1)?;
    expect_free(&mut con, &name)?;
    ensure!(
        !is_locked(bare, "lock", &name)?,
        "{} (no prefix) sees {name} locked",
        bare.label
    );
    ensure!(
        is_locked(&b, "lock", &name)?,
        "{} (prefix) sees {name} free",
        b.label
    );
    let pending = b.send(lock_request("lock", &name, owner + 1, None))?;
    wait_waiting(&mut con, &channel(&key), 1, &[(&b, pending)])?;
    let latency = hand_over(&a, &name, owner, &b, pending)?;
    expect_holder(&mut con, &key, &b, 1)?;
    unlock(&b, "lock", &name, owner + 1)?;
    expect_free(&mut con, &key)?;

    // The fair lock: its queue and timeout keys are named from the prefixed name (Redisson
    // 3.52.0+; before, from the bare one).
    let fair = ctx.name("prefix-fair");
    let fair_key = format!("{PREFIX}{fair}");
    lock(&a, "fair", &fair, owner)?;
    let pending = b.send(lock_request("fair", &fair, owner + 1, None))?;
    let queue = format!("redisson_lock_queue:{{{fair_key}}}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let len: i64 = query(&mut con, redis::cmd("LLEN").arg(&queue))?;
        if len == 1 {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "{} never queued in {queue}",
            b.label
        );
        thread::sleep(ms(5));
    }
    let bare_keys: Vec<String> = query(&mut con, redis::cmd("KEYS").arg(format!("*{fair}*")))?;
    ensure!(
        bare_keys.iter().all(|k| k.contains(&fair_key)),
        "keys under the bare fair name: {bare_keys:?}"
    );
    unlock(&a, "fair", &fair, owner)?;
    let got = b.wait(pending, Duration::from_secs(5))?;
    ensure!(
        got["ok"] == true,
        "{}: fair lock not handed over: {got}",
        b.label
    );
    unlock(&b, "fair", &fair, owner + 1)?;
    for k in [
        fair_key.clone(),
        queue,
        format!("redisson_lock_timeout:{{{fair_key}}}"),
    ] {
        expect_free(&mut con, &k)?;
    }

    // The read-write lock: a read hold on one side keeps the other side's writer waiting.
    let rw = ctx.name("prefix-rw");
    let rw_key = format!("{PREFIX}{rw}");
    lock(&a, "read", &rw, owner)?;
    let mode: Option<String> = query(&mut con, redis::cmd("HGET").arg(&rw_key).arg("mode"))?;
    ensure_eq!(mode.as_deref(), Some("read"), "mode of {rw_key}");
    let pending = b.send(lock_request("write", &rw, owner + 1, None))?;
    thread::sleep(ms(200));
    ensure!(
        b.poll(pending).is_none(),
        "{} wrote while {} read",
        b.label,
        a.label
    );
    unlock(&a, "read", &rw, owner)?;
    let got = b.wait(pending, Duration::from_secs(5))?;
    ensure!(
        got["ok"] == true,
        "{}: write lock not granted: {got}",
        b.label
    );
    let mode: Option<String> = query(&mut con, redis::cmd("HGET").arg(&rw_key).arg("mode"))?;
    ensure_eq!(mode.as_deref(), Some("write"), "mode of {rw_key}");
    unlock(&b, "write", &rw, owner + 1)?;
    expect_free(&mut con, &rw_key)?;
    expect_free(&mut con, &rw)?;
    Ok(format!(
        "keys under {PREFIX}; lock handed over in {latency:.2} ms by message"
    ))
}

/// Both sides log in as an ACL user that may touch only `app:*` keys, the lock channels and
/// Redisson's unlock latches (`--user`, `--password`, `--name-prefix app:`): the lock lives
/// under the prefix and is handed over by message; an agent of the same user without the
/// prefix is refused by Redis (`NOPERM`, an error reply) and writes nothing.
pub(super) fn acl_user(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    let mut con = ctx.con()?;
    let () = query(
        &mut con,
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg("interop-app")
            .arg("on")
            .arg(">interop-secret")
            .arg(format!("~{PREFIX}*"))
            .arg("~redisson_lock__channel:*")
            // Redisson 3.24+ writes an unlock latch beside the lock (REDISSON_LAYOUT §1.8).
            .arg("~redisson_unlock_latch:*")
            .arg("&*")
            .arg("+@all"),
    )?;
    let login = ["--user", "interop-app", "--password", "interop-secret"];
    let mut args = login.to_vec();
    args.extend(["--name-prefix", PREFIX]);
    let a = ctx.start_agent(holder, &args)?;
    let b = ctx.start_agent(waiter, &args)?;
    let owner = ctx.owner();
    let name = ctx.name("acl");
    let key = format!("{PREFIX}{name}");
    lock(&a, "lock", &name, owner)?;
    expect_holder(&mut con, &key, &a, 1)?;
    let pending = b.send(lock_request("lock", &name, owner + 1, None))?;
    wait_waiting(&mut con, &channel(&key), 1, &[(&b, pending)])?;
    let latency = hand_over(&a, &name, owner, &b, pending)?;
    expect_holder(&mut con, &key, &b, 1)?;
    unlock(&b, "lock", &name, owner + 1)?;
    expect_free(&mut con, &key)?;
    // The same user without the prefix: Redis refuses the key.
    let outside = ctx.start_agent(holder, &login)?;
    let got = outside.wait(
        outside.send(lock_request("lock", &name, owner + 2, Some(10_000)))?,
        Duration::from_secs(10),
    )?;
    ensure!(
        got["ok"] == false,
        "{} took {name} outside its keys: {got}",
        outside.label
    );
    expect_free(&mut con, &name)?;
    Ok(format!(
        "keys under {PREFIX} only; lock handed over in {latency:.2} ms by message; outside them: {}",
        got["error"]
    ))
}

/// Both sides over TLS: agents given `--redis rediss://127.0.0.1:<tls port> --tls-ca <CA>`
/// of a `redis-server` with `--tls-port` and a certificate made for the scenario; a lock
/// taken on one side is seen held on the other, handed over by message (the pub/sub
/// connections are TLS too), and its hash is the usual one (read through the plain port).
pub(super) fn tls(ctx: &Ctx, holder: Impl, waiter: Impl) -> Result<String, String> {
    let files = testkit::TlsFiles::try_generate()?;
    let (server, port) = testkit::RedisServer::try_start_tls(&files, &[])?;
    let url = format!("rediss://127.0.0.1:{port}");
    let ca = files.ca_cert().to_string_lossy().into_owned();
    let args = ["--redis", url.as_str(), "--tls-ca", ca.as_str()];
    let a = ctx.start_agent(holder, &args)?;
    let b = ctx.start_agent(waiter, &args)?;
    let mut con = crate::server::Connection::Single(server.try_connect()?);
    let owner = ctx.owner();
    let name = ctx.name("tls");
    lock(&a, "lock", &name, owner)?;
    expect_holder(&mut con, &name, &a, 1)?;
    ensure!(
        is_locked(&b, "lock", &name)?,
        "{} sees {name} free over TLS",
        b.label
    );
    let pending = b.send(lock_request("lock", &name, owner + 1, None))?;
    wait_waiting(&mut con, &channel(&name), 1, &[(&b, pending)])?;
    let latency = hand_over(&a, &name, owner, &b, pending)?;
    expect_holder(&mut con, &name, &b, 1)?;
    unlock(&b, "lock", &name, owner + 1)?;
    expect_free(&mut con, &name)?;
    drop((a, b));
    Ok(format!(
        "rediss:// on both sides; lock handed over in {latency:.2} ms by message"
    ))
}

/// `SENTINEL FAILOVER` while a Rust holder (watchdog 5 s, replica sync on) holds and a Rust and a Java waiter
/// wait: both sides' first acquire on the new master is timed; two leases later the hold is
/// still there, renewed on the new master; the holder's unlock reaches it and wakes the
/// waiters by message, one after the other.
pub(super) fn sentinel_failover(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let Backend::Sentinel(setup) = &ctx.server else {
        return Err("needs --mode sentinel".into());
    };
    // A lease of 5 s: while the old master is being demoted a renewal sent there waits out
    // its WAIT (1 s, no replica answers), and the next one goes to the new master.
    let holder = ctx.start_agent(Impl::Rust, &["--watchdog-ms", "5000"])?;
    let (rust, java) = (ctx.agent(Impl::Rust), ctx.agent(Impl::Java));
    let name = ctx.name("sentinel-failover");
    let owner = ctx.owner();
    let mut con = ctx.con()?;
    lock(&holder, "lock", &name, owner)?;
    let pending_rust = rust.send(lock_request("lock", &name, owner + 1, None))?;
    let pending_java = java.send(lock_request("lock", &name, owner + 2, None))?;
    wait_waiting(
        &mut con,
        &channel(&name),
        2,
        &[(rust, pending_rust), (java, pending_java)],
    )?;

    let started = Instant::now();
    setup.failover()?;
    let promoted = started.elapsed();
    // Each side's first acquire on the new master: a fresh lock, tried by both in turn until
    // each has taken it there.
    let mut first: [Option<Duration>; 2] = [None, None];
    let probes = [
        ctx.name("sentinel-probe-rust"),
        ctx.name("sentinel-probe-java"),
    ];
    while first.iter().any(Option::is_none) {
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "no acquire on the new master within 60 s: {first:?}"
        );
        for (i, agent) in [rust, java].into_iter().enumerate() {
            if first[i].is_some() {
                continue;
            }
            // Errors while the master moves are expected; the next turn tries again.
            if let Ok(true) = try_lock(agent, "lock", &probes[i], owner + 3, 0) {
                let at = started.elapsed();
                let mut master = ctx.con()?;
                let on_master = key_state(&mut master, &probes[i])?.kind == "hash";
                unlock(agent, "lock", &probes[i], owner + 3)?;
                if on_master {
                    first[i] = Some(at);
                }
            }
        }
        thread::sleep(ms(20));
    }

    // Two leases on, the hold is still there, on the new master.
    thread::sleep(Duration::from_secs(10));
    let mut con = ctx.con()?;
    expect_holder(&mut con, &name, &holder, 1)?;
    let released = unlock(&holder, "lock", &name, owner)?;
    let released_ns = ns_field(&holder, &released, "start_ns")?;
    let mut wakes = Vec::new();
    let mut waiting = vec![
        (rust, pending_rust, owner + 1),
        (java, pending_java, owner + 2),
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !waiting.is_empty() {
        ensure!(
            Instant::now() < deadline,
            "waiters not woken: {:?}",
            waiting.iter().map(|w| &w.0.label).collect::<Vec<_>>()
        );
        let Some(i) = waiting.iter().position(|(a, id, _)| a.poll(*id).is_some()) else {
            thread::sleep(ms(2));
            continue;
        };
        let (agent, id, waiter_owner) = waiting.remove(i);
        let got = agent.wait(id, Duration::from_secs(1))?;
        ensure!(got["ok"] == true, "{}: {got}", agent.label);
        let delay = millis_between(released_ns, ns_field(agent, &got, "end_ns")?);
        wakes.push(format!("{} {delay:.1} ms", agent.label));
        unlock(agent, "lock", &name, waiter_owner)?;
    }
    expect_free(&mut con, &name)?;
    let secs = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
    Ok(format!(
        "failover {:.0} ms; first acquire on the new master: rust {:.0} ms, java {:.0} ms; after the unlock: {}",
        promoted.as_secs_f64() * 1e3,
        secs(first[0]),
        secs(first[1]),
        wakes.join(", ")
    ))
}
