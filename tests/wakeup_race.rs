//! A release's message that reaches the client before the reply to its waiter's last attempt
//! still wakes the waiter: the waiter registers for messages before it attempts (tokio's
//! `Notified::enable` pattern, `src/wait/mod.rs`), and a message for every waiter leaves a
//! permit for one that comes late (`src/pubsub/registry.rs`).
//!
//! Redisson's waiters miss exactly this message when it wakes every waiter (a write lock's
//! `1`): its `LockPubSub` releases the wake-up only to the threads already parked, and a thread
//! between its attempt and its park then sleeps for the lock's TTL (RELIABILITY.md, "What the
//! suite found in Redisson"; `interop/run --only "missed wakes, reply delayed" --repeat 20`
//! shows it, and this crate's waiters beside it). Here the race is made certain: the waiters'
//! client reaches Redis through a fault proxy that holds back every reply to the connection
//! that sent a script, not the messages of its subscription, and the holder releases once the
//! waiters' last attempts have run.

mod common;

use std::time::{Duration, Instant};

use common::{
    FaultProxy, Kind, Mode, RedisServer, builder, client_with, ms, per_kind, script_calls,
    unique_name,
};
use redis::aio::MultiplexedConnection;
use redisson_sync::{LockOptions, Owner};

/// How long the proxy holds back each reply to the waiters' script connection.
const REPLY_DELAY: Duration = Duration::from_millis(300);
/// No script for this long: the waiters' last attempts ran and their replies are held back.
const QUIET: Duration = Duration::from_millis(80);
/// The re-check interval and watchdog of both clients: nothing but a message wakes a waiter
/// within [`WOKEN_WITHIN`].
const LONG: Duration = Duration::from_secs(30);
/// A woken waiter is granted after the held-back reply and one more attempt (two reply
/// delays); one that missed the message would sleep [`LONG`].
const WOKEN_WITHIN: Duration = Duration::from_secs(5);

per_kind!(at_once multi_thread(2), async fn a_message_ahead_of_the_attempts_reply_wakes_the_waiter; except {
    spin: "not applicable: spin waiters poll, no message wakes them",
    token: "not applicable: token lock waiters poll, no message wakes them",
});

/// The holder (another client, straight to Redis) releases while the replies to the waiters'
/// last attempts are held back: every waiter (three readers behind a writer, else one) is
/// granted by the message within [`WOKEN_WITHIN`], not after the 30 s re-check or lease.
async fn a_message_ahead_of_the_attempts_reply_wakes_the_waiter(kind: Kind) {
    let waiters: u64 = if kind == Kind::Read { 3 } else { 1 };
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut raw = server.conn().await;
    let holder = client_with(&server, LONG, LONG);
    let client = builder(proxy.url()).recheck_interval(LONG).build().unwrap();
    // A lock and unlock first, so that each attempt is one EVALSHA from here on.
    let warm = unique_name("warm");
    let opts = LockOptions::new().owner(Owner::new(1));
    let guard = kind.any(&client, &warm).lock_with_options(&opts).await;
    guard.unwrap().unlock().await.unwrap();
    let name = unique_name("race");

    let held = kind
        .rival()
        .any(&holder, &name)
        .lock_with_options(&LockOptions::new().owner(Owner::new(100)))
        .await
        .unwrap();
    proxy.set_mode_for(
        b"EVALSHA",
        Mode::Delay {
            up: Duration::ZERO,
            down: REPLY_DELAY,
        },
    );
    let polls = script_calls(&mut raw).await;
    let mut tasks = Vec::new();
    for owner in 1..=waiters {
        let lock = kind.any(&client, &name);
        tasks.push(tokio::spawn(async move {
            let opts = LockOptions::new().owner(Owner::new(owner));
            let guard = lock.lock_with_options(&opts).await.unwrap();
            (guard, Instant::now())
        }));
    }
    kind.wait_parked(&mut raw, &name, 1, waiters as usize, polls)
        .await;
    // Each waiter attempts before it subscribes and again after.
    scripts_quiet(&mut raw, polls + 2 * waiters).await;
    assert!(tasks.iter().all(|t| !t.is_finished()));

    let released = Instant::now();
    held.unlock().await.unwrap();
    let mut guards = Vec::new();
    for task in tasks {
        let (guard, granted) = tokio::time::timeout(WOKEN_WITHIN, task)
            .await
            .unwrap_or_else(|_| {
                panic!("{kind}: a waiter not granted {WOKEN_WITHIN:?} after the release")
            })
            .unwrap();
        println!("{kind}: granted {:?} after the release", granted - released);
        guards.push(guard);
    }
    proxy.clear_modes_for();
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    kind.assert_nothing_left(&mut raw, &[&warm, &name]).await;
    holder.shutdown().await;
    client.shutdown().await;
}

/// Polls (every 5 ms, bounded) until the server has run at least `calls` scripts and then
/// none for [`QUIET`].
async fn scripts_quiet(raw: &mut MultiplexedConnection, calls: u64) {
    let start = Instant::now();
    let mut last = script_calls(raw).await;
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(ms(5)).await;
        let now = script_calls(raw).await;
        if now != last {
            (last, since) = (now, Instant::now());
        } else if now >= calls && since.elapsed() >= QUIET {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{last} script calls, not {calls} and then quiet, within 10 s"
        );
    }
}
