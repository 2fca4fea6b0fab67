//! The read-write lock scenarios (issue 5): Rust and Java readers and writers on one
//! `RReadWriteLock` (REDISSON_LAYOUT §5). A child module of `scenarios`, whose helpers and
//! macros it uses.
//!
//! Directed scenarios run twice: `first` is the side whose reader comes first (and, in the
//! wake-up scenario, the side that writes), `second` the other.

use std::thread;
use std::time::{Duration, Instant};

use crate::server::Connection;

use super::*;

/// `redisson_rwlock:{N}` (prefixName of REDISSON_LAYOUT §1.2), the channel of both halves.
pub(super) fn rw_channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_rwlock:{name}")
    } else {
        format!("redisson_rwlock:{{{name}}}")
    }
}

/// `agent`'s field in `field`'s shape `<client_id>:<decimal><suffix>` (the decimal is the Rust
/// agent's owner number, the Java agent's thread id)?
fn is_field_of(field: &str, agent: &Agent, suffix: &str) -> bool {
    field
        .strip_prefix(&format!("{}:", agent.client_id))
        .and_then(|rest| rest.strip_suffix(suffix))
        .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
}

/// The k-th read-hold marker of `field` on `name` (a name without `{`).
fn marker(name: &str, field: &str, k: u32) -> String {
    format!("{{{name}}}:{field}:rwlock_timeout:{k}")
}

/// What [`expect_readers`] found.
pub(super) struct Readers {
    state: KeyState,
    /// The reader fields, in the order of the `readers` argument's agents.
    fields: Vec<String>,
    /// The PTTL of each reader's one marker, in the same order.
    markers: Vec<i64>,
}

/// Checks that `name` is in mode read, held once by one owner of each entry of `readers` (an
/// agent appears once per owner reading) and by nobody else, and that each reader has its one
/// marker, expiring.
pub(super) fn expect_readers(
    con: &mut Connection,
    name: &str,
    readers: &[&Agent],
) -> Result<Readers, String> {
    let state = key_state(con, name)?;
    ensure_eq!(state.kind.as_str(), "hash", "{name}: key type");
    ensure!(
        state
            .fields
            .contains(&("mode".to_string(), "read".to_string()))
            && state.fields.len() == readers.len() + 1,
        "{name}: expected mode read and {} reader fields: {:?}",
        readers.len(),
        state.fields
    );
    ensure!(state.pttl > 0, "{name}: PTTL {}", state.pttl);
    let mut fields = Vec::new();
    for agent in readers {
        let field = state
            .fields
            .iter()
            .find(|(f, v)| is_field_of(f, agent, "") && v == "1" && !fields.contains(f))
            .map(|(f, _)| f.clone())
            .ok_or_else(|| {
                format!(
                    "{name}: no (further) reader field of {} held once: {:?}",
                    agent.label, state.fields
                )
            })?;
        fields.push(field);
    }
    let mut markers = Vec::new();
    for field in &fields {
        let key = marker(name, field, 1);
        let m = key_state(con, &key)?;
        ensure_eq!(m.kind.as_str(), "string", "{key}: type");
        ensure!(m.pttl > 0, "{key}: PTTL {}", m.pttl);
        let second = key_state(con, &marker(name, field, 2))?;
        ensure_eq!(second.kind.as_str(), "none", "a second marker of {field}");
        markers.push(m.pttl);
    }
    Ok(Readers {
        state,
        fields,
        markers,
    })
}

/// The pending request `id` of `agent` must not have been answered.
fn still_waiting(agent: &Agent, id: u64, what: &str) -> Result<(), String> {
    ensure!(
        agent.poll(id).is_none(),
        "{} {what}: {:?}",
        agent.label,
        agent.poll(id)
    );
    Ok(())
}

/// The pending acquire `id` of `waiter` succeeds, woken by the release that started at
/// `released_ns`: within [`WAKE_BOUND_MS`] of it. Returns the delay in ms.
fn woken(waiter: &Agent, id: u64, released_ns: u64, what: &str) -> Result<f64, String> {
    let got = waiter.wait(id, Duration::from_secs(5))?;
    ensure!(
        got["ok"] == true && got["acquired"] != false,
        "{}: {what} did not acquire: {got}",
        waiter.label
    );
    let delay = millis_between(released_ns, ns_field(waiter, &got, "end_ns")?);
    ensure!(
        delay > 0.0 && delay < WAKE_BOUND_MS,
        "{}: {what} acquired {delay:.3} ms after the release started",
        waiter.label
    );
    Ok(delay)
}

/// Readers of both languages hold the lock together (mode read, both fields, both markers);
/// a Java writer waits; `first`'s read unlock leaves the lock to `second`'s reader (hash and
/// its marker untouched, the writer still waiting); `second`'s unlock frees the lock and its
/// `0` wakes the writer; the writer's release publishes `1`.
pub(super) fn readers_share(ctx: &Ctx, first: Impl, second: Impl) -> Result<String, String> {
    let (a, b, java) = (ctx.agent(first), ctx.agent(second), &ctx.java);
    let (name, owner, mut con) = (ctx.name("rw-share"), ctx.owner(), ctx.con()?);
    let channel = rw_channel(&name);
    let subscriber = Subscriber::start(ctx, std::slice::from_ref(&channel))?;

    lock(a, "read", &name, owner)?;
    ensure!(
        try_lock(b, "read", &name, owner, 0)?,
        "{}'s reader could not join {}'s",
        b.label,
        a.label
    );
    let both = expect_readers(&mut con, &name, &[a, b])?;
    for agent in [a, b] {
        ensure!(
            is_locked(agent, "read", &name)? && !is_locked(agent, "write", &name)?,
            "{}: is_locked read/write should be true/false",
            agent.label
        );
        ensure!(
            is_held(agent, "read", &name, owner)? && !is_held(agent, "write", &name, owner)?,
            "{}: is_held read/write",
            agent.label
        );
    }
    for agent in [a, b] {
        ensure!(
            !try_lock(agent, "write", &name, owner + 1, 0)?,
            "{} took the write lock from two readers",
            agent.label
        );
    }
    let writer = owner + 2;
    let pending = java.send(lock_request("write", &name, writer, None))?;
    // Two subscribers: the Java agent's, and ours.
    wait_waiting(&mut con, &channel, 2, &[(java, pending)])?;

    unlock(a, "read", &name, owner)?;
    thread::sleep(ms(200));
    still_waiting(java, pending, "took the write lock while a reader held it")?;
    let left = expect_readers(&mut con, &name, &[b])?;
    ensure_eq!(left.fields[0], both.fields[1], "{}'s reader field", b.label);
    ensure!(
        left.markers[0] <= both.markers[1],
        "{}'s marker was extended by {}'s unlock",
        b.label,
        a.label
    );
    ensure!(
        left.state.pttl > LONG_WATCHDOG_MS - 10_000 && left.state.pttl <= left.markers[0] + 5,
        "PTTL {} after {}'s unlock: {}'s marker ({} ms) should bound it",
        left.state.pttl,
        left.markers[0],
        a.label,
        b.label
    );
    ensure!(
        is_locked(a, "read", &name)?,
        "{} sees the lock free while {} reads",
        a.label,
        b.label
    );

    let released = unlock(b, "read", &name, owner)?;
    let delay = woken(
        java,
        pending,
        ns_field(b, &released, "start_ns")?,
        "the waiting writer",
    )?;
    let state = key_state(&mut con, &name)?;
    ensure!(
        state.fields.len() == 2
            && state
                .fields
                .contains(&("mode".to_string(), "write".to_string()))
            && state
                .fields
                .iter()
                .any(|(f, v)| is_field_of(f, java, ":write") && v == "1"),
        "the hash after the writer got in: {:?}",
        state.fields
    );
    unlock(java, "write", &name, writer)?;
    expect_free(&mut con, &name)?;
    ensure_eq!(
        subscriber.payloads(ms(100)),
        vec!["0".to_string(), "1".to_string()],
        "messages on {channel} (last read release, write release)"
    );
    Ok(format!(
        "mode read with both fields and markers; {}'s unlock left the lock to {}; \
         the Java writer got in {delay:.2} ms after the last read unlock",
        a.label, b.label
    ))
}

/// With `--watchdog-ms 1500` on both sides, a Rust and a Java reader keep the lock (hash and
/// both markers renewed, each side its own) for 3x that while a writer waits. Then `first`'s
/// reader is killed: its field stays behind as a zombie, and `second`'s unlock lets the writer
/// in within one watchdog timeout (at once when the zombie's marker has expired; Redisson
/// before 4.4 renews other clients' markers too, so a surviving Java reader keeps it alive
/// until its own release).
pub(super) fn watchdog_readers(ctx: &Ctx, first: Impl, second: Impl) -> Result<String, String> {
    const WATCHDOG_MS: i64 = 1_500;
    let watchdog = WATCHDOG_MS.to_string();
    let args = ["--watchdog-ms", watchdog.as_str()];
    let mut a = ctx.start_agent(first, &args)?;
    let b = ctx.start_agent(second, &args)?;
    let writer_agent = ctx.agent(second);
    let (name, owner, mut con) = (ctx.name("rw-watchdog"), ctx.owner(), ctx.con()?);
    let channel = rw_channel(&name);

    lock(&a, "read", &name, owner)?;
    lock(&b, "read", &name, owner)?;
    let held = expect_readers(&mut con, &name, &[&a, &b])?;
    ensure!(
        held.state.pttl <= WATCHDOG_MS,
        "PTTL {} above the watchdog timeout",
        held.state.pttl
    );
    let writer = owner + 1;
    let pending = writer_agent.send(lock_request("write", &name, writer, None))?;
    wait_waiting(&mut con, &channel, 1, &[(writer_agent, pending)])?;

    let until = Instant::now() + ms(3 * WATCHDOG_MS as u64);
    let mut lowest = i64::MAX;
    while Instant::now() < until {
        thread::sleep(ms(100));
        let now = expect_readers(&mut con, &name, &[&a, &b])?;
        ensure_eq!(now.fields, held.fields, "the reader fields while renewed");
        for pttl in now.markers.iter().chain([&now.state.pttl]) {
            ensure!(
                *pttl > 0 && *pttl <= WATCHDOG_MS,
                "PTTL {pttl} while renewed (hash {}, markers {:?})",
                now.state.pttl,
                now.markers
            );
            lowest = lowest.min(*pttl);
        }
        still_waiting(
            writer_agent,
            pending,
            "took the write lock from live readers",
        )?;
    }

    a.kill();
    let zombie = held.fields[0].clone();
    thread::sleep(ms(WATCHDOG_MS as u64 + 300));
    let zombie_marker = key_state(&mut con, &marker(&name, &zombie, 1))?.pttl;
    let state = key_state(&mut con, &name)?;
    ensure!(
        state.fields.contains(&(zombie.clone(), "1".to_string())),
        "the killed reader's field should still be in the hash: {:?}",
        state.fields
    );
    still_waiting(
        writer_agent,
        pending,
        "took the write lock from a live reader",
    )?;
    let released = unlock(&b, "read", &name, owner)?;
    let got = writer_agent.wait(pending, Duration::from_secs(5))?;
    ensure!(got["ok"] == true, "the writer's lock failed: {got}");
    let after = millis_between(
        ns_field(&b, &released, "start_ns")?,
        ns_field(writer_agent, &got, "end_ns")?,
    );
    ensure!(
        after > 0.0 && after < WATCHDOG_MS as f64 + 500.0,
        "the writer got in {after:.0} ms after the last live reader's unlock"
    );
    let state = key_state(&mut con, &name)?;
    ensure!(
        !state.fields.iter().any(|(f, _)| f == &zombie),
        "the zombie's field outlived the hash: {:?}",
        state.fields
    );
    unlock(writer_agent, "write", &name, writer)?;
    expect_free(&mut con, &name)?;
    Ok(format!(
        "both readers held 4.5 s (lowest PTTL seen {lowest} ms); {}'s reader killed, its \
         marker PTTL {zombie_marker} ms {} ms later; the writer got in {after:.1} ms after \
         {}'s unlock",
        a.label,
        WATCHDOG_MS + 300,
        b.label
    ))
}

/// Two Java and two Rust agents, one writer and one reader owner each, `stress` with `record`
/// on one read-write lock: the writers' counter is exact, no write interval overlaps any other
/// interval, and read intervals overlap each other. A Redisson waiter that sleeps through a
/// write unlock by Redisson's own race is diagnosed and woken by `run_stress`'s watch, and
/// reported.
pub(super) fn mixed_stress(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let java2 = ctx.start_agent(Impl::Java, &[])?;
    let rust2 = ctx.start_agent(Impl::Rust, &[])?;
    let agents = [&ctx.java, &java2, &ctx.rust, &rust2];
    let (name, owner, mut con) = (ctx.name("rw-stress"), ctx.owner(), ctx.con()?);
    let iterations = ctx.options.iterations.min(30);
    let workers = [
        StressWorker {
            kind: "write",
            owner,
            hold_us: 200,
        },
        StressWorker {
            kind: "read",
            owner: owner + 1,
            hold_us: 1_000,
        },
    ];
    let run = run_stress(ctx, &mut con, &agents, &workers, &name, iterations)?;
    let (writers, read_overlaps) = (agents.len(), run.read_overlaps);
    ensure!(read_overlaps > 0, "no two reads ever overlapped");
    expect_free(&mut con, &name)?;
    Ok(format!(
        "{writers} writers + {writers} readers x {iterations}: counter {}, no write overlaps \
         anything, {read_overlaps} overlapping read pairs{}",
        run.counter, run.stalls
    ))
}
