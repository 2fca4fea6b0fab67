//! The fair-lock scenarios (issue 4): Rust and Java waiters share Redisson's `RFairLock` queue
//! (docs/LAYOUT.md §4): arrival order across languages with Redisson's deadline
//! arithmetic, wake-ups of the queue's head only, a crashed head purged after its slot, and a
//! mixed stress. A child module of `scenarios`, whose helpers and macros it uses.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::server::Connection;
use serde_json::json;

use super::*;

const FAIR: &str = "fair";
/// Redisson's `fairLockWaitTimeout` default, the slot of a `lock()` waiter of both long-lived
/// agents.
const DEFAULT_SLOT_MS: i64 = 300_000;
/// The slot of the agents of [`fair_dead_head`].
const SHORT_SLOT_MS: i64 = 1_500;

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeouts_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

/// The wake-up channel of one waiter: `redisson_lock__channel:{N}:<field>`.
fn waiter_channel(name: &str, field: &str) -> String {
    format!("{}:{field}", channel(name))
}

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The queue, head first.
fn queue(con: &mut Connection, name: &str) -> Result<Vec<String>, String> {
    query(
        con,
        redis::cmd("LRANGE").arg(queue_key(name)).arg(0).arg(-1),
    )
}

/// The deadlines of the queued waiters, in queue order; every waiter must have one.
fn deadlines(con: &mut Connection, name: &str) -> Result<Vec<i64>, String> {
    let mut scores = Vec::new();
    for field in queue(con, name)? {
        let score: Option<f64> = query(
            con,
            redis::cmd("ZSCORE").arg(timeouts_key(name)).arg(&field),
        )?;
        let score = score.ok_or_else(|| format!("queued {field} has no deadline"))?;
        scores.push(score as i64);
    }
    let card: i64 = query(con, redis::cmd("ZCARD").arg(timeouts_key(name)))?;
    ensure_eq!(
        card as usize,
        scores.len(),
        "the deadline set and the queue out of step"
    );
    Ok(scores)
}

/// Waits (10 s at most) until the queue has `len` entries, checking meanwhile that no pending
/// request was answered.
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
            ensure!(
                agent.poll(*id).is_none(),
                "{} answered while queued: {:?}",
                agent.label,
                agent.poll(*id)
            );
        }
        thread::sleep(ms(2));
    }
}

fn expect_no_queue(con: &mut Connection, name: &str) -> Result<(), String> {
    for key in [queue_key(name), timeouts_key(name)] {
        ensure_eq!(key_state(con, &key)?.kind.as_str(), "none", "{key}");
    }
    Ok(())
}

/// One queued waiter of a scenario.
struct Waiter<'a> {
    agent: &'a Agent,
    owner: u64,
    pending: u64,
}

/// `releaser` unlocks, and the head `next` must get the lock by its wake-up message (within
/// [`WAKE_BOUND_MS`] of the unlock's start), while none of `rest` answers. Returns the delay.
fn fair_hand_over(
    releaser: &Agent,
    name: &str,
    owner: u64,
    next: &Waiter<'_>,
    rest: &[Waiter<'_>],
) -> Result<f64, String> {
    let released = unlock(releaser, FAIR, name, owner)?;
    let got = acquired(next.agent, next.pending, Duration::from_secs(5))?;
    let delay = millis_between(
        ns_field(releaser, &released, "start_ns")?,
        ns_field(next.agent, &got, "end_ns")?,
    );
    ensure!(
        delay > 0.0 && delay < WAKE_BOUND_MS,
        "{} got the lock {delay:.3} ms after {}'s unlock started",
        next.agent.label,
        releaser.label
    );
    thread::sleep(ms(20));
    for w in rest {
        ensure!(
            w.agent.poll(w.pending).is_none(),
            "{} owner {} was served out of turn",
            w.agent.label,
            w.owner
        );
    }
    Ok(delay)
}

/// Waiters of both sides interleaved (`first`, `second`, `first`, `second`), each confirmed
/// queued before the next arrives, are served in exactly that order. On the way: the deadlines
/// are spaced by exactly one slot whoever wrote them; a `try_lock` without wait never joins
/// the queue; a `second`-side waiter whose wait ends leaves the queue and moves the later
/// deadlines up by its slot; each grant moves the rest up by the new holder's slot.
pub(super) fn fair_order(ctx: &Ctx, first: Impl, second: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(first), ctx.agent(second));
    let (name, owner, mut con) = (ctx.name("fair-order"), ctx.owner(), ctx.con()?);

    lock(a, FAIR, &name, owner)?;
    expect_holder(&mut con, &name, a, 1)?;
    expect_no_queue(&mut con, &name)?;
    ensure!(
        !try_lock(b, FAIR, &name, owner, 0)?,
        "{} got a held fair lock",
        b.label
    );
    expect_no_queue(&mut con, &name)?;

    // W1 (first), W2 (second), X (second, gives up), W3 (first), W4 (second).
    let leaver_wait_ms: i64 = 1_500;
    let mut waiters = Vec::new();
    let mut leaver = None;
    for (i, (agent, o)) in [
        (a, owner + 1),
        (b, owner + 2),
        (b, owner + 3),
        (a, owner + 4),
        (b, owner + 5),
    ]
    .into_iter()
    .enumerate()
    {
        let request = if i == 2 {
            json!({"op": "try_lock", "kind": FAIR, "name": name, "owner": o,
                   "wait_ms": leaver_wait_ms})
        } else {
            lock_request(FAIR, &name, o, None)
        };
        let pending = agent.send(request)?;
        let queued: Vec<(&Agent, u64)> = waiters
            .iter()
            .map(|w: &Waiter<'_>| (w.agent, w.pending))
            .collect();
        wait_queued(&mut con, &name, i + 1, &queued)?;
        if i == 2 {
            leaver = Some(Waiter {
                agent,
                owner: o,
                pending,
            });
        } else {
            waiters.push(Waiter {
                agent,
                owner: o,
                pending,
            });
        }
        if i == 1 {
            // While waiters queue, a try_lock without wait still never joins them.
            ensure!(
                !try_lock(a, FAIR, &name, owner + 9, 0)?,
                "{} got the lock by try_lock",
                a.label
            );
            ensure_eq!(queue(&mut con, &name)?.len(), 2, "queue after a try_lock");
        }
    }
    let leaver = leaver.ok_or("no leaver")?;
    ensure!(
        leaver.agent.poll(leaver.pending).is_none(),
        "{}'s {leaver_wait_ms} ms wait ended before the last waiter queued",
        leaver.agent.label
    );
    let fields = queue(&mut con, &name)?;
    for (field, agent) in fields.iter().zip([a, b, b, a, b]) {
        ensure!(
            field.starts_with(&format!("{}:", agent.client_id)),
            "queue {fields:?}: {field} is not {}'s",
            agent.label
        );
    }
    let d = deadlines(&mut con, &name)?;
    let pttl = key_state(&mut con, &name)?.pttl;
    let expected_first = epoch_ms() + pttl + DEFAULT_SLOT_MS;
    ensure!(
        (d[0] - expected_first).abs() <= 100,
        "first deadline {} vs the lock's expiry + one slot {expected_first}",
        d[0]
    );
    let gaps: Vec<i64> = d.windows(2).map(|p| p[1] - p[0]).collect();
    ensure_eq!(
        gaps,
        vec![
            DEFAULT_SLOT_MS,
            leaver_wait_ms,
            DEFAULT_SLOT_MS,
            DEFAULT_SLOT_MS
        ],
        "gaps between deadlines (queue {fields:?})"
    );

    // X's wait ends: it leaves, and W3 and W4 move up by its slot.
    let gave_up = leaver.agent.wait(leaver.pending, Duration::from_secs(10))?;
    ensure_eq!(
        gave_up["acquired"].as_bool(),
        Some(false),
        "{}'s try_lock",
        leaver.agent.label
    );
    let mut expected_fields = fields.clone();
    expected_fields.remove(2);
    ensure_eq!(
        queue(&mut con, &name)?,
        expected_fields,
        "queue after X left"
    );
    let mut expected = vec![d[0], d[1], d[3] - leaver_wait_ms, d[4] - leaver_wait_ms];
    ensure_eq!(
        deadlines(&mut con, &name)?,
        expected,
        "deadlines after X left"
    );

    // The handoffs, in order; each grant moves the rest up one slot.
    let mut delays = Vec::new();
    let (mut releaser, mut releaser_owner) = (a, owner);
    for i in 0..waiters.len() {
        let delay = fair_hand_over(
            releaser,
            &name,
            releaser_owner,
            &waiters[i],
            &waiters[i + 1..],
        )
        .map_err(|e| format!("handoff {}: {e}", i + 1))?;
        delays.push(delay);
        let w = &waiters[i];
        expect_holder(&mut con, &name, w.agent, 1)?;
        expected = expected[1..].iter().map(|s| s - DEFAULT_SLOT_MS).collect();
        ensure_eq!(
            deadlines(&mut con, &name)?,
            expected,
            "deadlines after W{} got it",
            i + 1
        );
        (releaser, releaser_owner) = (w.agent, w.owner);
    }
    unlock(releaser, FAIR, &name, releaser_owner)?;
    expect_free(&mut con, &name)?;
    expect_no_queue(&mut con, &name)?;
    let order: Vec<String> = waiters.iter().map(|w| w.agent.label.clone()).collect();
    Ok(format!(
        "served {} in arrival order, handoffs {} ms; deadlines one slot apart, a {} waiter's \
         give-up moved the later ones {leaver_wait_ms} ms",
        order.join(", "),
        delays
            .iter()
            .map(|d| format!("{d:.1}"))
            .collect::<Vec<_>>()
            .join("/"),
        leaver.agent.label
    ))
}

/// An unlock publishes `0` on the channel of the queue's head only: `releaser` unlocks with a
/// `waiter`-side head and a `releaser`-side second; the head's unlock then wakes the second.
/// A plain subscriber on both waiters' channels and on the bare lock channel sees exactly
/// those two messages.
pub(super) fn fair_head_only(ctx: &Ctx, releaser: Impl, waiter: Impl) -> Result<String, String> {
    let (a, b) = (ctx.agent(releaser), ctx.agent(waiter));
    let (name, owner, mut con) = (ctx.name("fair-head"), ctx.owner(), ctx.con()?);

    lock(a, FAIR, &name, owner)?;
    let head = Waiter {
        agent: b,
        owner: owner + 1,
        pending: b.send(lock_request(FAIR, &name, owner + 1, None))?,
    };
    wait_queued(&mut con, &name, 1, &[])?;
    let second = Waiter {
        agent: a,
        owner: owner + 2,
        pending: a.send(lock_request(FAIR, &name, owner + 2, None))?,
    };
    wait_queued(&mut con, &name, 2, &[(b, head.pending)])?;
    let fields = queue(&mut con, &name)?;
    let channels = vec![
        channel(&name),
        waiter_channel(&name, &fields[0]),
        waiter_channel(&name, &fields[1]),
    ];
    // Each waiter subscribed to its own channel, nobody to the bare one.
    wait_waiting(&mut con, &channels[1], 1, &[(b, head.pending)])?;
    wait_waiting(&mut con, &channels[2], 1, &[(a, second.pending)])?;
    ensure_eq!(
        numsub(&mut con, &channels[0])?,
        0,
        "subscribers of {}",
        channels[0]
    );
    let subscriber = Subscriber::start(ctx, &channels)?;

    let first = fair_hand_over(a, &name, owner, &head, std::slice::from_ref(&second))?;
    expect_holder(&mut con, &name, b, 1)?;
    let then = fair_hand_over(b, &name, head.owner, &second, &[])?;
    expect_holder(&mut con, &name, a, 1)?;
    unlock(a, FAIR, &name, second.owner)?;
    expect_free(&mut con, &name)?;
    expect_no_queue(&mut con, &name)?;
    thread::sleep(ms(100));
    let seen = subscriber.messages.lock().unwrap().clone();
    ensure_eq!(
        seen,
        vec![
            (channels[1].clone(), "0".to_string()),
            (channels[2].clone(), "0".to_string())
        ],
        "messages on the bare channel and both waiters' channels"
    );
    Ok(format!(
        "{}'s unlock woke only {}'s head ({first:.2} ms), whose unlock woke only {}'s ({then:.2} ms); \
         the last unlock published nothing",
        a.label, b.label, a.label
    ))
}

/// A waiter killed (SIGKILL) at the queue's head blocks the free lock until its slot ends
/// (agents with `--fair-wait-ms 1500`); then the next waiter, of the other side, purges it and
/// proceeds. `survivors` holds the lock and has the next waiter; `victim`'s waiter dies.
pub(super) fn fair_dead_head(ctx: &Ctx, survivors: Impl, victim: Impl) -> Result<String, String> {
    let slot = SHORT_SLOT_MS.to_string();
    let args = ["--fair-wait-ms", slot.as_str()];
    let a = ctx.start_agent(survivors, &args)?;
    let mut v = ctx.start_agent(victim, &args)?;
    let (name, owner, mut con) = (ctx.name("fair-dead"), ctx.owner(), ctx.con()?);

    // The holder's lease is 1.5 s, so the dead head's deadline is about 3 s away.
    a.call(lock_request(FAIR, &name, owner, Some(1_500)))?;
    let dying = v.send(lock_request(FAIR, &name, owner + 1, None))?;
    wait_queued(&mut con, &name, 1, &[])?;
    let next = Waiter {
        agent: &a,
        owner: owner + 2,
        pending: a.send(lock_request(FAIR, &name, owner + 2, None))?,
    };
    wait_queued(&mut con, &name, 2, &[(&v, dying), (&a, next.pending)])?;
    let fields = queue(&mut con, &name)?;
    let d = deadlines(&mut con, &name)?;
    ensure_eq!(d[1] - d[0], SHORT_SLOT_MS, "slot between the two deadlines");
    ensure!(
        fields[0].starts_with(&format!("{}:", v.client_id)),
        "the head {} is not {}'s",
        fields[0],
        v.label
    );

    v.kill();
    // The unlock wakes the dead head only; the lock stays free and unserved until the head's
    // deadline.
    unlock(&a, FAIR, &name, owner)?;
    thread::sleep(ms(300));
    ensure!(
        a.poll(next.pending).is_none(),
        "{} served before the dead head's slot ended",
        a.label
    );
    expect_free(&mut con, &name)?;
    let got = acquired(&a, next.pending, Duration::from_secs(10))?;
    let served_at = epoch_ms();
    let late = served_at - d[0];
    ensure!(
        late >= 0,
        "{} was served {} ms before the dead head's deadline",
        a.label,
        -late
    );
    ensure!(
        late < 1_000,
        "{} was served {late} ms after the dead head's deadline",
        a.label
    );
    ensure!(got["ok"] == true, "{got}");
    expect_holder(&mut con, &name, &a, 1)?;
    expect_no_queue(&mut con, &name)?;
    unlock(&a, FAIR, &name, next.owner)?;
    expect_free(&mut con, &name)?;
    Ok(format!(
        "{}'s waiter killed at the head; {}'s next waiter served {late} ms after its deadline",
        v.label, a.label
    ))
}

/// Two Java and two Rust agents, two owners each, `stress` with `record` on one fair lock and
/// one counter: the counter is exact, no two intervals overlap, and the queue is empty after.
pub(super) fn fair_stress(ctx: &Ctx, _: Impl, _: Impl) -> Result<String, String> {
    let java2 = ctx.start_agent(Impl::Java, &[])?;
    let rust2 = ctx.start_agent(Impl::Rust, &[])?;
    let agents = [&ctx.java, &ctx.rust, &java2, &rust2];
    let (name, owner, mut con) = (ctx.name("fair-stress"), ctx.owner(), ctx.con()?);
    let iterations = ctx.options.iterations;
    let workers = [owner, owner + 1].map(|owner| StressWorker {
        kind: FAIR,
        owner,
        hold_us: 200,
    });
    let run = run_stress(ctx, &mut con, &agents, &workers, &name, iterations)?;
    // Fair service: between two turns of one owner, every other owner still working had one.
    let mut max_turns_between = 0;
    let mut last_turn = std::collections::HashMap::new();
    for (turn, section) in run.sections.iter().enumerate() {
        if let Some(prev) = last_turn.insert((&section.agent, section.owner), turn) {
            max_turns_between = max_turns_between.max(turn - prev - 1);
        }
    }
    expect_free(&mut con, &name)?;
    expect_no_queue(&mut con, &name)?;
    Ok(format!(
        "{} workers x {iterations}: counter {}, no overlap, queue empty after; \
         at most {max_turns_between} other turns between two of one owner",
        agents.len() * workers.len(),
        run.counter
    ))
}
