//! Waking fair-lock waiters: an unlock publishes `0` only on the queue head's own channel
//! (docs/LAYOUT.md §4.7), a force unlock wakes the head, a crashed head stops blocking the
//! queue when its slot ends, and a handoff costs a fixed number of Redis commands whatever the
//! number of waiters (no herd). Re-check intervals are long (10-30 s) so that a prompt
//! acquisition can only come from a message (or a deadline hint), not from polling.

mod common;

use std::time::{Duration, Instant};

use common::{
    RedisServer, all_keys, channel, command_stats, drain, exists, fair_client, field, join, ms,
    now_ms, numsub, queue, queue_key, subscribe, timeouts_key, unique_name, wait_llen, wait_numsub,
    waiter_channel,
};
use redis::AsyncCommands;
use redisson_sync::{Client, LockGuard, LockOptions, Owner};
use tokio::task::JoinHandle;

/// A task waiting in `lock()` for `owner`; hands back its guard and when it got it.
fn spawn_owner(client: &Client, name: &str, owner: Owner) -> JoinHandle<(LockGuard, Instant)> {
    let lock = client.fair_lock(name);
    tokio::spawn(async move {
        let g = lock
            .lock_with_options(&LockOptions::new().owner(owner))
            .await
            .unwrap();
        (g, Instant::now())
    })
}

/// A holder and two queued waiters with known fields; raw subscribers on both waiters'
/// channels and on the bare lock channel. Each unlock publishes one `0`, on the head's
/// channel only; the last unlock (no waiter left) publishes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_wakes_only_the_head_on_its_own_channel() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = fair_client(&server, ms(300_000), ms(10_000));
    let w = fair_client(&server, ms(300_000), ms(10_000));
    let name = unique_name("fair-head");
    let (o1, o2, o3) = (Owner::new(1), Owner::new(2), Owner::new(3));
    let (f2, f3) = (field(&w, o2), field(&w, o3));
    let channels = [
        channel(&name),
        waiter_channel(&name, &f2),
        waiter_channel(&name, &f3),
    ];
    let mut messages = Box::pin(subscribe(&server, &channels).await);

    let g1 = a
        .fair_lock(&name)
        .lock_with_options(&LockOptions::new().owner(o1))
        .await
        .unwrap();
    let t2 = spawn_owner(&w, &name, o2);
    wait_llen(&mut raw, &name, 1).await;
    let t3 = spawn_owner(&w, &name, o3);
    wait_llen(&mut raw, &name, 2).await;
    assert_eq!(queue(&mut raw, &name).await, [f2.clone(), f3.clone()]);
    // Each waiter subscribed to its own channel (ours + the client's), none to the bare one.
    wait_numsub(&mut raw, &channels[1], 2).await;
    wait_numsub(&mut raw, &channels[2], 2).await;
    assert_eq!(numsub(&mut raw, &channels[0]).await, 1);
    tokio::time::sleep(ms(100)).await;

    let unlocked = Instant::now();
    g1.unlock().await.unwrap();
    let (g2, at2) = join(t2).await;
    let latency2 = at2 - unlocked;
    assert_eq!(
        drain(&mut messages).await,
        [(channels[1].clone(), "0".into())]
    );
    assert!(!t3.is_finished());

    let unlocked = Instant::now();
    g2.unlock().await.unwrap();
    let (g3, at3) = join(t3).await;
    let latency3 = at3 - unlocked;
    assert_eq!(
        drain(&mut messages).await,
        [(channels[2].clone(), "0".into())]
    );
    println!("wake-up latencies (unlock -> head acquired): {latency2:?}, {latency3:?}");
    for l in [latency2, latency3] {
        assert!(
            l < ms(1_000),
            "{l:?}: a 10 s re-check cannot explain it, a message must"
        );
    }

    g3.unlock().await.unwrap();
    assert_eq!(drain(&mut messages).await, [], "no head, no message");
    assert!(all_keys(&mut raw).await.is_empty());
    // The waiters left their channels.
    assert_eq!(numsub(&mut raw, &channels[1]).await, 1);
    assert_eq!(numsub(&mut raw, &channels[2]).await, 1);
    a.shutdown().await;
    w.shutdown().await;
}

/// A force unlock from a third client wakes the queue's head at once (re-check 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_wakes_the_head() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = fair_client(&server, ms(300_000), ms(10_000));
    let w = fair_client(&server, ms(300_000), ms(10_000));
    let x = fair_client(&server, ms(300_000), ms(10_000));
    let name = unique_name("fair-force");
    let o = Owner::new(2);

    let held = a
        .fair_lock(&name)
        .lock_with_options(&LockOptions::new().lease(ms(30_000)))
        .await
        .unwrap();
    let waiter = spawn_owner(&w, &name, o);
    wait_llen(&mut raw, &name, 1).await;
    wait_numsub(&mut raw, &waiter_channel(&name, &field(&w, o)), 1).await;
    tokio::time::sleep(ms(100)).await;

    let forced = Instant::now();
    assert!(x.fair_lock(&name).force_unlock().await.unwrap());
    let (g, at) = join(waiter).await;
    println!("force unlock -> head acquired: {:?}", at - forced);
    assert!(at - forced < ms(1_000));
    assert!(!exists(&mut raw, &queue_key(&name)).await);
    held.forget();
    g.unlock().await.unwrap();
    for c in [a, w, x] {
        c.shutdown().await;
    }
}

/// A waiter that died at the head (written by hand in Redisson's exact layout: its field in
/// the list, its deadline in the zset, nobody on its channel) blocks the free lock until its
/// deadline; then the next waiter purges it and is served, without waiting for a re-check
/// (10 s here): its sleep hint is the dead head's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_head_is_purged_when_its_slot_ends() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let a = fair_client(&server, ms(300_000), ms(10_000));
    let w = fair_client(&server, ms(300_000), ms(10_000));
    let name = unique_name("fair-dead");
    let dead = "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab:57";

    let held = a.fair_lock(&name).lock().await.unwrap();
    let dead_deadline = now_ms() + 1_000;
    let () = raw.rpush(queue_key(&name), dead).await.unwrap();
    let () = raw
        .zadd(timeouts_key(&name), dead, dead_deadline)
        .await
        .unwrap();
    let o = Owner::new(2);
    let waiter = spawn_owner(&w, &name, o);
    wait_llen(&mut raw, &name, 2).await;
    let fw = field(&w, o);
    let s: f64 = raw.zscore(timeouts_key(&name), &fw).await.unwrap();
    assert_eq!(
        s as i64,
        dead_deadline + 300_000,
        "queued one slot behind the dead head"
    );

    // The unlock wakes the dead head, nobody else; the lock stays free but unserved.
    held.unlock().await.unwrap();
    tokio::time::sleep(ms(300)).await;
    assert!(!waiter.is_finished());
    assert!(!exists(&mut raw, &name).await);

    let (g, at) = join(waiter).await;
    let late = now_ms()
        - dead_deadline
        - i64::try_from(Instant::now().duration_since(at).as_millis()).unwrap();
    println!("served {late} ms after the dead head's deadline");
    assert!((0..1_000).contains(&late), "{late} ms");
    assert_eq!(queue(&mut raw, &name).await, Vec::<String>::new());
    g.unlock().await.unwrap();
    assert!(all_keys(&mut raw).await.is_empty());
    a.shutdown().await;
    w.shutdown().await;
}

/// Explicit leases: no watchdog renewal can add commands to a count.
fn lease_30s() -> LockOptions {
    LockOptions::new().lease(ms(30_000))
}

/// The chain of `k` handoffs among `k` queued waiters of one client: (client commands,
/// publishes, per-handoff latencies).
async fn handoff_chain(server: &RedisServer, k: usize) -> (u64, u64, Vec<Duration>) {
    let mut raw = server.conn().await;
    let w = fair_client(server, ms(300_000), ms(30_000));
    let name = unique_name("fair-chain");
    let holder = w
        .fair_lock(&name)
        .lock_with_options(&lease_30s().owner(Owner::new(1_000)))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..k {
        let lock = w.fair_lock(&name);
        let owner = Owner::new(i as u64);
        tasks.push(tokio::spawn(async move {
            let g = lock
                .lock_with_options(&lease_30s().owner(owner))
                .await
                .unwrap();
            let acquired = Instant::now();
            g.unlock().await.unwrap();
            (acquired, Instant::now())
        }));
        wait_llen(&mut raw, &name, i + 1).await;
    }
    for f in queue(&mut raw, &name).await {
        wait_numsub(&mut raw, &waiter_channel(&name, &f), 1).await;
    }
    tokio::time::sleep(ms(200)).await; // every post-subscribe attempt done: all asleep
    // Load the unlock script (the holder has not unlocked yet), so no NOSCRIPT round trip
    // is counted.
    let warm = w.fair_lock(unique_name("fair-warm"));
    warm.lock_with_options(&lease_30s())
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();

    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut raw)
        .await
        .unwrap();
    let start = Instant::now();
    holder.unlock().await.unwrap();
    let mut times = Vec::new();
    for t in tasks {
        times.push(join(t).await);
    }
    let mut client_commands = 0;
    for cmd in [
        "evalsha",
        "eval",
        "subscribe",
        "unsubscribe",
        "ping",
        "script|load",
    ] {
        let calls = command_stats(&mut raw, cmd).await.calls;
        if calls > 0 {
            println!("  k={k}: {cmd} {calls}");
        }
        client_commands += calls;
    }
    let publishes = command_stats(&mut raw, "publish").await.calls;
    let mut latencies = vec![times[0].0 - start];
    for i in 1..k {
        latencies.push(times[i].0.saturating_duration_since(times[i - 1].1));
    }
    assert!(all_keys(&mut raw).await.is_empty());
    w.shutdown().await;
    (client_commands, publishes, latencies)
}

/// Commands per handoff under contention: the unlock script (publishing to the head only),
/// the head's acquire script, the head's UNSUBSCRIBE: about 3, the same for 4 and 16
/// waiters (no herd: nobody else wakes or polls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_costs_three_commands_whatever_the_queue_length() {
    let server = RedisServer::start();
    for k in [4, 16] {
        let (commands, publishes, mut latencies) = handoff_chain(&server, k).await;
        let per_handoff = commands as f64 / k as f64;
        latencies.sort();
        println!(
            "k={k}: {commands} client commands for {k} handoffs ({per_handoff:.2} per handoff), \
             {publishes} publishes; handoff latency p50 {:?} max {:?}",
            latencies[k / 2],
            latencies[k - 1]
        );
        // k unlocks that hand over + the last one, k acquires, k unsubscribes.
        assert_eq!(commands, 3 * k as u64 + 1, "per handoff: {per_handoff:.2}");
        assert_eq!(
            publishes, k as u64,
            "one message per handoff, to the head only"
        );
        assert!(latencies[k - 1] < ms(2_000), "{latencies:?}");
    }
}
