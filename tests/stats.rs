//! `Client::stats()`: what the client keeps in memory, as the soak samples it. Each count is
//! checked while its cause lives and after it ends, when every count but the idle record slots
//! is back to 0.

mod common;

use std::time::Duration;

use common::{RedisServer, ms, unique_name};
use redisson_sync::observe::ClientStats;
use redisson_sync::{Client, LockOptions, Owner};
use tokio::time::{Instant, sleep};

/// Polls `stats` until `done` holds (at most 5 s, every 10 ms), then returns them.
async fn stats_when(client: &Client, done: impl Fn(&ClientStats) -> bool) -> ClientStats {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let stats = client.stats();
        if done(&stats) || Instant::now() >= until {
            return stats;
        }
        sleep(ms(10)).await;
    }
}

fn idle(s: &ClientStats) -> bool {
    s.channels == 0
        && s.waiters == 0
        && s.observers == 0
        && s.watched_holds == 0
        && s.counted_holds == 0
        && s.background_tasks == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_holds_renewals_waiters_and_observers_and_return_to_zero() {
    let server = RedisServer::start();
    let client = Client::open(server.url()).unwrap();
    assert_eq!(client.stats(), ClientStats::default());
    let name = unique_name("stats");
    let lock = client.lock(&name);
    let one = LockOptions::new().owner(Owner::new(1));
    let two = LockOptions::new().owner(Owner::new(2));

    // Two holds of one owner: one renewal, two counted holds, one record slot.
    let first = lock.lock_with_options(&one).await.unwrap();
    let again = lock.lock_with_options(&one).await.unwrap();
    let s = client.stats();
    assert_eq!(
        (
            s.watched_holds,
            s.counted_holds,
            s.record_slots,
            s.waiters,
            s.channels
        ),
        (1, 2, 1, 0, 0),
        "{s:?}"
    );

    // Another owner waits: one channel, one waiter.
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock_with_options(&two).await }
    });
    let s = stats_when(&client, |s| s.waiters == 1).await;
    assert_eq!((s.channels, s.waiters), (1, 1), "{s:?}");

    // An explicit lease is not renewed: no second watched hold.
    let leased = client
        .lock(unique_name("stats-leased"))
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(client.stats().watched_holds, 1);
    assert_eq!(client.stats().counted_holds, 3);

    again.unlock().await.unwrap();
    first.unlock().await.unwrap();
    let second = waiting.await.unwrap().unwrap();
    let s = stats_when(&client, |s| s.waiters == 0 && s.channels == 0).await;
    assert_eq!(
        (s.channels, s.waiters, s.watched_holds, s.counted_holds),
        (0, 0, 1, 2),
        "{s:?}"
    );
    second.unlock().await.unwrap();
    leased.unlock().await.unwrap();

    // An event stream observes the lock's channel (and its key's keyspace notifications)
    // without waiting.
    let events = client.events(&name).await.unwrap();
    let observed = events.channels().len();
    assert!(observed >= 1, "{:?}", events.channels());
    let s = client.stats();
    assert_eq!(
        (s.channels, s.observers, s.waiters),
        (observed, observed, 0),
        "{s:?}"
    );
    drop(events);

    // A guard dropped without unlock: a background release, then nothing.
    drop(lock.lock().await.unwrap());
    let s = stats_when(&client, idle).await;
    assert!(idle(&s), "{s:?}");
    // No slot is kept for the two owners, the leased lock or the dropped guard: each went
    // when its last hold did.
    assert_eq!(s.record_slots, 0, "{s:?}");
    client.shutdown().await;
}
