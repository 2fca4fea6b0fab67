//! The count-down latch (`client.count_down_latch(name)`, Redisson's `RCountDownLatch`), after
//! Redisson's `RedissonCountDownLatchTest` (its layout: docs/LAYOUT.md §6.6): the key and the `0` /
//! `1` messages on `redisson_countdownlatch__channel__{name}`, waiting, reuse, and bad input.

mod common;

use std::time::{Duration, Instant};

use common::{
    Messages, Primitive, RedisServer, client, client_with, dbsize, exists, ms, unique_name, value,
    wait_numsub,
};
use redisson_sync::Error;

#[tokio::test]
async fn set_count_down_and_open_with_the_exact_keys_and_messages() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("latch");
    let latch = c.count_down_latch(&name);
    let mut messages = Messages::subscribe(&server, &Primitive::Latch.channel(&name)).await;

    assert_eq!(latch.count().await.unwrap(), 0, "a missing latch counts 0");
    assert!(latch.try_set_count(2).await.unwrap());
    assert_eq!(messages.next().await, "1");
    assert_eq!(value(&mut raw, &name).await.as_deref(), Some("2"));
    assert!(!latch.try_set_count(5).await.unwrap(), "set once");
    messages.none_within(ms(100)).await;

    latch.count_down().await.unwrap();
    assert_eq!(latch.count().await.unwrap(), 1);
    messages.none_within(ms(100)).await;
    latch.count_down().await.unwrap();
    assert_eq!(messages.next().await, "0");
    assert!(!exists(&mut raw, &name).await, "deleted at zero");
    assert_eq!(latch.count().await.unwrap(), 0);

    // Counting down an open latch does nothing and publishes nothing.
    latch.count_down().await.unwrap();
    messages.none_within(ms(100)).await;
    assert!(!exists(&mut raw, &name).await);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiter_is_woken_by_the_last_count_down() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let setter = client(&server);
    // Re-check every 30 s: only the `0` message can explain prompt wake-ups.
    let waiters_client = client_with(&server, Duration::from_secs(30), Duration::from_secs(30));
    let name = unique_name("latch");
    setter
        .count_down_latch(&name)
        .try_set_count(1)
        .await
        .unwrap();

    let mut waiters = Vec::new();
    for i in 0..5 {
        let latch = waiters_client.count_down_latch(&name);
        waiters.push(tokio::spawn(async move {
            if i % 2 == 0 {
                latch.await_open().await.unwrap();
            } else {
                assert!(latch.await_for(ms(10_000)).await.unwrap());
            }
            Instant::now()
        }));
    }
    wait_numsub(&mut raw, &Primitive::Latch.channel(&name), 1).await;
    tokio::time::sleep(ms(300)).await;
    assert!(waiters.iter().all(|w| !w.is_finished()));

    let opened = Instant::now();
    setter.count_down_latch(&name).count_down().await.unwrap();
    for w in waiters {
        let woke = tokio::time::timeout(Duration::from_secs(5), w)
            .await
            .unwrap()
            .unwrap();
        let latency = woke.saturating_duration_since(opened);
        assert!(latency < ms(500), "woken after {latency:?}");
    }
    wait_numsub(&mut raw, &Primitive::Latch.channel(&name), 0).await;
    setter.shutdown().await;
    waiters_client.shutdown().await;
}

#[tokio::test]
async fn await_returns_at_once_when_open_and_times_out_when_closed() {
    let server = RedisServer::start();
    let c = client(&server);
    let latch = c.count_down_latch(unique_name("latch"));
    let start = Instant::now();
    latch.await_open().await.unwrap();
    assert!(latch.await_for(ms(0)).await.unwrap());
    assert!(start.elapsed() < ms(500));

    latch.try_set_count(1).await.unwrap();
    let start = Instant::now();
    assert!(!latch.await_for(ms(300)).await.unwrap());
    let took = start.elapsed();
    assert!(took >= ms(290) && took < ms(1_500), "took {took:?}");
    assert!(!latch.await_for(Duration::ZERO).await.unwrap());
    c.shutdown().await;
}

/// A latch can be set again once open, and waiters then wait for the new round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_is_reused_after_reaching_zero() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("latch");
    let latch = c.count_down_latch(&name);
    for round in 0..3 {
        assert!(latch.try_set_count(2).await.unwrap(), "round {round}");
        let waiter = {
            let latch = latch.clone();
            tokio::spawn(async move { latch.await_for(ms(5_000)).await.unwrap() })
        };
        latch.count_down().await.unwrap();
        tokio::time::sleep(ms(100)).await;
        assert!(!waiter.is_finished(), "round {round}: opened at 1");
        latch.count_down().await.unwrap();
        assert!(waiter.await.unwrap(), "round {round}");
        assert!(!exists(&mut raw, &name).await);
    }
    c.shutdown().await;
}

#[tokio::test]
async fn delete_publishes_the_new_count_message_only_when_there_was_a_latch() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let name = unique_name("latch");
    let latch = c.count_down_latch(&name);
    let mut messages = Messages::subscribe(&server, &Primitive::Latch.channel(&name)).await;
    assert!(!latch.delete().await.unwrap());
    messages.none_within(ms(100)).await;
    latch.try_set_count(3).await.unwrap();
    assert_eq!(messages.next().await, "1");
    assert!(latch.delete().await.unwrap());
    assert_eq!(messages.next().await, "1");
    assert!(!exists(&mut raw, &name).await);
    c.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_a_clear_error_and_changes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let latch = c.count_down_latch(unique_name("latch"));
    let before = dbsize(&mut raw).await;
    assert!(matches!(
        latch.try_set_count(0).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        latch.try_set_count(u64::MAX).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(dbsize(&mut raw).await, before);

    // (A key of another type: `tests/errors.rs`, for every primitive.)
    c.shutdown().await;
}
