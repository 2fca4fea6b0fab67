//! Lock events (`Client::events`): the exact events of each kind of change, on a server with
//! keyspace notifications on (`notify-keyspace-events KA`) and on one without, made by this
//! crate's clients (the interop scenario "lock events of a java holder" does it with
//! Redisson's): acquisition, re-entry, partial and full release, a handoff to a waiter, an
//! expiry, a force unlock, a `DEL`, a fair lock's handoff on the head's channel, a read-write
//! lock, a semaphore, a latch, a key prefix, the subscriptions ending with the stream, and the
//! blocking API's iterator of the same events.

mod common;

use std::time::{Duration, Instant};

use common::{field, ms, numsub, unique_name, wait_numsub};
use futures_util::StreamExt;
use redis::AsyncCommands;
use redisson_sync::events::{Event, EventKind, EventStream, Keyspace, SeenBy};
use redisson_sync::{Client, LockOptions, Owner};
use testkit::RedisServer;

/// The poll interval of the streams here: short, so that what only a poll sees comes soon.
const POLL: Duration = Duration::from_millis(200);

/// A server with keyspace notifications on (`KA`), or one with them off (the default).
fn server(keyspace: bool) -> RedisServer {
    if keyspace {
        RedisServer::start_with(&["--notify-keyspace-events", "KA"])
    } else {
        RedisServer::start()
    }
}

fn client(server: &RedisServer) -> Client {
    Client::builder()
        .url(server.url())
        .recheck_interval(ms(200))
        .build()
        .unwrap()
}

fn owner(n: u64) -> LockOptions {
    LockOptions::new().owner(Owner::new(n))
}

async fn stream(client: &Client, name: &str) -> (EventStream, Event) {
    let mut events = client.events(name).poll_interval(POLL).await.unwrap();
    let first = next(&mut events).await;
    assert_eq!(first.kind, EventKind::Watching);
    (events, first)
}

/// The next event (at most 5 s away).
async fn next(events: &mut EventStream) -> Event {
    tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("no event within 5 s")
        .expect("the stream ended")
        .expect("an event, not an error")
}

/// One expected event: kind, how it was told, the holder's field, its hold count after.
type Expected<'a> = (EventKind, SeenBy, Option<&'a str>, Option<i64>);

/// Exactly these events, in this order, then nothing more for a while (three polls).
async fn expect(events: &mut EventStream, expected: &[Expected<'_>]) -> Vec<Event> {
    let mut got = Vec::new();
    for _ in expected {
        got.push(next(events).await);
    }
    let seen: Vec<Expected<'_>> = got
        .iter()
        .map(|e| {
            (
                e.kind,
                e.seen_by,
                e.holder.as_ref().map(|h| h.field.as_str()),
                e.holds,
            )
        })
        .collect();
    assert_eq!(seen, expected, "{got:#?}");
    quiet(events).await;
    got
}

/// No event for three polls.
async fn quiet(events: &mut EventStream) {
    if let Ok(more) = tokio::time::timeout(POLL * 3, events.next()).await {
        panic!("one event too many: {more:#?}");
    }
}

/// How the events of a change are told: by keyspace notification where they are on, else by
/// `without` (a message, or the snapshots).
fn by(keyspace: bool, without: SeenBy) -> SeenBy {
    if keyspace { SeenBy::Keyspace } else { without }
}

#[tokio::test]
async fn the_first_event_says_whether_keyspace_notifications_are_on() {
    for keyspace in [true, false] {
        let server = server(keyspace);
        let c = client(&server);
        let name = unique_name("events-first");
        let (events, first) = stream(&c, &name).await;
        let expected = if keyspace {
            Keyspace::On {
                config: "AKE".into(),
            }
        } else {
            Keyspace::Off {
                config: String::new(),
            }
        };
        // Redis normalises the flags it reports.
        match (&first.keyspace, keyspace) {
            (Some(Keyspace::On { config }), true) => assert!(config.contains('K'), "{config}"),
            (Some(other), _) => assert_eq!(*other, expected),
            (None, _) => panic!("no keyspace status on the first event"),
        }
        assert_eq!(events.keyspace(), first.keyspace.as_ref().unwrap());
        assert_eq!(events.keyspace().missed().is_empty(), keyspace);
        assert_eq!(first.snapshot.name, name);
        assert_eq!(
            events.channels(),
            [
                format!("redisson_lock__channel:{{{name}}}"),
                format!("redisson_rwlock:{{{name}}}"),
                format!("__keyspace@0__:{name}"),
            ]
        );
        c.shutdown().await;
    }
}

#[tokio::test]
async fn acquired_reentered_released_in_part_then_released() {
    for keyspace in [true, false] {
        let server = server(keyspace);
        let c = client(&server);
        let name = unique_name("events-lock");
        let (mut events, _) = stream(&c, &name).await;
        let a = field(&c, Owner::new(1));
        let lock = c.lock(&name);
        let g1 = lock.lock_with_options(&owner(1)).await.unwrap();
        // A free lock's acquisition publishes nothing: a poll sees it without keyspace.
        expect(
            &mut events,
            &[(
                EventKind::Acquired,
                by(keyspace, SeenBy::Snapshot),
                Some(&a),
                Some(1),
            )],
        )
        .await;
        let g2 = lock.lock_with_options(&owner(1)).await.unwrap();
        expect(
            &mut events,
            &[(
                EventKind::Reentered,
                by(keyspace, SeenBy::Snapshot),
                Some(&a),
                Some(2),
            )],
        )
        .await;
        g2.unlock().await.unwrap();
        expect(
            &mut events,
            &[(
                EventKind::Released,
                by(keyspace, SeenBy::Snapshot),
                Some(&a),
                Some(1),
            )],
        )
        .await;
        g1.unlock().await.unwrap();
        let got = expect(
            &mut events,
            &[(
                EventKind::Released,
                by(keyspace, SeenBy::Message),
                Some(&a),
                Some(0),
            )],
        )
        .await;
        // What was heard: the unlock message, and with keyspace the script's notifications.
        let heard: Vec<String> = got[0].heard.iter().map(|n| n.payload.clone()).collect();
        if keyspace {
            assert_eq!(heard, ["hincrby", "del", "0"]);
        } else {
            assert_eq!(heard, ["0"]);
        }
        assert_eq!(
            got[0].heard.last().unwrap().channel,
            format!("redisson_lock__channel:{{{name}}}")
        );
        assert!(!got[0].snapshot.is_held());
        c.shutdown().await;
    }
}

#[tokio::test]
async fn a_handoff_to_a_waiter() {
    for keyspace in [true, false] {
        let server = server(keyspace);
        let mut raw = server.conn().await;
        let c = client(&server);
        let name = unique_name("events-handoff");
        let lock = c.lock(&name);
        let held = lock.lock_with_options(&owner(1)).await.unwrap();
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.lock_with_options(&owner(2)).await })
        };
        wait_numsub(&mut raw, &common::channel(&name), 1).await;
        // Another client watches, as another process would.
        let watcher = client(&server);
        let (mut events, first) = stream(&watcher, &name).await;
        assert_eq!(numsub(&mut raw, &common::channel(&name)).await, 2);
        assert_eq!(first.snapshot.holders[0].field, field(&c, Owner::new(1)));
        held.unlock().await.unwrap();
        let (a, b) = (field(&c, Owner::new(1)), field(&c, Owner::new(2)));
        expect(
            &mut events,
            &[
                (
                    EventKind::Released,
                    by(keyspace, SeenBy::Message),
                    Some(&a),
                    Some(0),
                ),
                // Taken after the message: seen at the follow-up read, or by its notifications.
                (
                    EventKind::Acquired,
                    by(keyspace, SeenBy::Snapshot),
                    Some(&b),
                    Some(1),
                ),
            ],
        )
        .await;
        waiter.await.unwrap().unwrap().unlock().await.unwrap();
        watcher.shutdown().await;
        c.shutdown().await;
    }
}

#[tokio::test]
async fn an_expiry_is_seen_or_inferred() {
    for keyspace in [true, false] {
        let server = server(keyspace);
        let c = client(&server);
        let name = unique_name("events-expiry");
        let (mut events, _) = stream(&c, &name).await;
        let a = field(&c, Owner::new(1));
        let started = Instant::now();
        let guard = c
            .lock(&name)
            .lock_with_options(&owner(1).lease(ms(400)))
            .await
            .unwrap();
        let got = expect(
            &mut events,
            &[
                (
                    EventKind::Acquired,
                    by(keyspace, SeenBy::Snapshot),
                    Some(&a),
                    Some(1),
                ),
                (
                    EventKind::Expired,
                    by(keyspace, SeenBy::Snapshot),
                    Some(&a),
                    Some(0),
                ),
            ],
        )
        .await;
        // Told after the lease ended, well before the next poll would have (the read at the
        // TTL's end, or the notification).
        let lag = started.elapsed();
        assert!(lag >= ms(400), "{lag:?}");
        if keyspace {
            assert_eq!(got[1].heard.last().unwrap().payload, "expired");
        } else {
            assert!(got[1].heard.is_empty());
        }
        assert!(guard.unlock().await.is_err());
        c.shutdown().await;
    }
}

#[tokio::test]
async fn a_force_unlock_and_a_del() {
    for keyspace in [true, false] {
        let server = server(keyspace);
        let mut raw = server.conn().await;
        let c = client(&server);
        let name = unique_name("events-force");
        let a = field(&c, Owner::new(1));
        let lock = c.lock(&name);
        let guard = lock.lock_with_options(&owner(1)).await.unwrap();
        let (mut events, _) = stream(&c, &name).await;
        assert!(lock.force_unlock().await.unwrap());
        // Without keyspace notifications a force unlock looks like a release (documented).
        let kind = if keyspace {
            EventKind::ForceUnlocked
        } else {
            EventKind::Released
        };
        expect(
            &mut events,
            &[(kind, by(keyspace, SeenBy::Message), Some(&a), Some(0))],
        )
        .await;
        drop(guard);

        let other = lock.lock_with_options(&owner(2)).await.unwrap();
        let b = field(&c, Owner::new(2));
        expect(
            &mut events,
            &[(
                EventKind::Acquired,
                by(keyspace, SeenBy::Snapshot),
                Some(&b),
                Some(1),
            )],
        )
        .await;
        let () = raw.del(&name).await.unwrap();
        expect(
            &mut events,
            &[(
                EventKind::Deleted,
                by(keyspace, SeenBy::Snapshot),
                Some(&b),
                Some(0),
            )],
        )
        .await;
        drop(other);
        c.shutdown().await;
    }
}

#[tokio::test]
async fn a_fair_handoff_is_heard_on_the_head_waiters_channel() {
    for keyspace in [true, false] {
        let server = server(keyspace);
        let mut raw = server.conn().await;
        let c = client(&server);
        let name = unique_name("events-fair");
        let lock = c.fair_lock(&name);
        let held = lock.lock_with_options(&owner(1)).await.unwrap();
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.lock_with_options(&owner(2)).await })
        };
        let (a, b) = (field(&c, Owner::new(1)), field(&c, Owner::new(2)));
        let head = format!("redisson_lock__channel:{{{name}}}:{b}");
        wait_numsub(&mut raw, &head, 1).await;
        let watcher = client(&server);
        let (mut events, first) = stream(&watcher, &name).await;
        assert_eq!(first.snapshot.queue.len(), 1);
        // The stream observes the head's own channel.
        assert!(events.channels().contains(&head), "{:?}", events.channels());
        assert_eq!(numsub(&mut raw, &head).await, 2);
        held.unlock().await.unwrap();
        let got = expect(
            &mut events,
            &[
                (
                    EventKind::Released,
                    by(keyspace, SeenBy::Message),
                    Some(&a),
                    Some(0),
                ),
                (
                    EventKind::Acquired,
                    by(keyspace, SeenBy::Snapshot),
                    Some(&b),
                    Some(1),
                ),
            ],
        )
        .await;
        assert!(
            got[0]
                .heard
                .iter()
                .any(|n| n.channel == head && n.payload == "0"),
            "{:?}",
            got[0].heard
        );
        waiter.await.unwrap().unwrap().unlock().await.unwrap();
        watcher.shutdown().await;
        c.shutdown().await;
    }
}

#[tokio::test]
async fn read_write_lock_readers_and_a_writer() {
    for keyspace in [true, false] {
        let server = server(keyspace);
        let c = client(&server);
        let name = unique_name("events-rw");
        let rw = c.rw_lock(&name);
        let (mut events, _) = stream(&c, &name).await;
        let r1 = rw.read_lock().lock_with_options(&owner(1)).await.unwrap();
        let (a, b) = (field(&c, Owner::new(1)), field(&c, Owner::new(2)));
        expect(
            &mut events,
            &[(
                EventKind::Acquired,
                by(keyspace, SeenBy::Snapshot),
                Some(&a),
                Some(1),
            )],
        )
        .await;
        let r2 = rw.read_lock().lock_with_options(&owner(2)).await.unwrap();
        expect(
            &mut events,
            &[(
                EventKind::Acquired,
                by(keyspace, SeenBy::Snapshot),
                Some(&b),
                Some(1),
            )],
        )
        .await;
        // A reader leaving while another stays publishes nothing.
        r1.unlock().await.unwrap();
        expect(
            &mut events,
            &[(
                EventKind::Released,
                by(keyspace, SeenBy::Snapshot),
                Some(&a),
                Some(0),
            )],
        )
        .await;
        r2.unlock().await.unwrap();
        expect(
            &mut events,
            &[(
                EventKind::Released,
                by(keyspace, SeenBy::Message),
                Some(&b),
                Some(0),
            )],
        )
        .await;
        let w = rw.write_lock().lock_with_options(&owner(3)).await.unwrap();
        let writer = format!("{}:write", field(&c, Owner::new(3)));
        let got = expect(
            &mut events,
            &[(
                EventKind::Acquired,
                by(keyspace, SeenBy::Snapshot),
                Some(&writer),
                Some(1),
            )],
        )
        .await;
        assert_eq!(
            got[0].holder.as_ref().unwrap().mode,
            Some(redisson_sync::inspect::HoldMode::Write)
        );
        w.unlock().await.unwrap();
        let got = expect(
            &mut events,
            &[(
                EventKind::Released,
                by(keyspace, SeenBy::Message),
                Some(&writer),
                Some(0),
            )],
        )
        .await;
        assert!(
            got[0]
                .heard
                .iter()
                .any(|n| n.channel == format!("redisson_rwlock:{{{name}}}") && n.payload == "1"),
            "{:?}",
            got[0].heard
        );
        c.shutdown().await;
    }
}

#[tokio::test]
async fn semaphore_permits_and_a_latch_opening() {
    for keyspace in [true, false] {
        let server = server(keyspace);
        let c = client(&server);
        let sem_name = unique_name("events-sem");
        let sem = c.semaphore(&sem_name);
        assert!(sem.try_set_permits(3).await.unwrap());
        let (mut events, first) = stream(&c, &sem_name).await;
        assert_eq!(first.snapshot.permits, Some(3));
        assert!(
            events
                .channels()
                .contains(&format!("redisson_sc:{{{sem_name}}}")),
            "{:?}",
            events.channels()
        );
        let permits = sem.acquire(2).await.unwrap();
        let got = expect(
            &mut events,
            &[(
                EventKind::Acquired,
                by(keyspace, SeenBy::Snapshot),
                None,
                None,
            )],
        )
        .await;
        assert_eq!(got[0].permits, Some(2));
        permits.release().await.unwrap();
        let got = expect(
            &mut events,
            &[(
                EventKind::Released,
                by(keyspace, SeenBy::Message),
                None,
                None,
            )],
        )
        .await;
        assert_eq!(got[0].permits, Some(2));
        let sem_channel = format!("redisson_sc:{{{sem_name}}}");
        assert!(
            got[0].heard.iter().any(|n| n.channel == sem_channel),
            "{:?}",
            got[0].heard
        );

        let latch_name = unique_name("events-latch");
        let latch = c.count_down_latch(&latch_name);
        assert!(latch.try_set_count(2).await.unwrap());
        let mut events = c
            .events(&latch_name)
            .counter_hint(redisson_sync::inspect::CounterHint::Latch)
            .poll_interval(POLL)
            .await
            .unwrap();
        let first = next(&mut events).await;
        assert_eq!(first.snapshot.count, Some(2));
        latch.count_down().await.unwrap();
        expect(
            &mut events,
            &[(
                EventKind::Changed,
                by(keyspace, SeenBy::Snapshot),
                None,
                None,
            )],
        )
        .await;
        latch.count_down().await.unwrap();
        let got = expect(
            &mut events,
            &[(EventKind::Opened, by(keyspace, SeenBy::Message), None, None)],
        )
        .await;
        assert!(
            got[0].heard.iter().any(|n| n.payload == "0"),
            "{:?}",
            got[0].heard
        );
        c.shutdown().await;
    }
}

#[tokio::test]
async fn a_prefixed_name_and_the_subscriptions_end_with_the_stream() {
    let server = server(true);
    let mut raw = server.conn().await;
    let c = Client::builder()
        .url(server.url())
        .key_prefix("app:")
        .build()
        .unwrap();
    let name = unique_name("events-prefix");
    let key = format!("app:{name}");
    let (mut events, first) = stream(&c, &name).await;
    assert_eq!(first.name, key);
    let channel = common::channel(&key);
    assert_eq!(numsub(&mut raw, &channel).await, 1);
    assert_eq!(numsub(&mut raw, &format!("__keyspace@0__:{key}")).await, 1);
    let guard = c.lock(&name).lock_with_options(&owner(1)).await.unwrap();
    let a = field(&c, Owner::new(1));
    let got = expect(
        &mut events,
        &[(EventKind::Acquired, SeenBy::Keyspace, Some(&a), Some(1))],
    )
    .await;
    assert_eq!(got[0].name, key);
    drop(events);
    wait_numsub(&mut raw, &channel, 0).await;
    wait_numsub(&mut raw, &format!("__keyspace@0__:{key}"), 0).await;
    guard.unlock().await.unwrap();
    // A stream of a client shut down ends after telling so.
    let (mut events, _) = stream(&c, &name).await;
    c.shutdown().await;
    let end = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap();
    assert!(
        matches!(end, Some(Err(redisson_sync::Error::Shutdown))),
        "{end:?}"
    );
    assert!(events.next().await.is_none());
}

/// The blocking API's events (`blocking::Client::events`): an iterator with the stream's
/// events, told the same way: a thread's acquisition, a partial release, the full release
/// (keyspace notifications and the unlock message heard); nothing within a wait is `Ok(None)`; inside
/// async code every read is refused.
#[test]
fn blocking_events_are_an_iterator_of_the_same_events() {
    use redisson_sync::{Error, blocking};

    let server = server(true);
    let c = blocking::Client::builder()
        .url(server.url())
        .connect()
        .unwrap();
    let name = unique_name("events-blocking");
    let mut events = c.events(&name).poll_interval(POLL).start().unwrap();
    assert!(events.keyspace().is_on(), "{}", events.keyspace());
    let first = events.next().unwrap().unwrap();
    assert_eq!(first.kind, EventKind::Watching);
    // Nothing happens: a bounded wait says so.
    assert_eq!(events.next_timeout(POLL * 3).unwrap(), None);

    // This thread is the owner of the blocking calls.
    let me = format!("{}:{}", c.id(), Owner::current().id());
    let lock = c.lock(&name);
    let g1 = lock.lock().unwrap();
    let g2 = lock.lock().unwrap();
    let wait = Duration::from_secs(5);
    let mut told = Vec::new();
    // The acquisition and the re-entry may be one difference or two (read between them or not).
    while told.last().map(|e: &Event| e.holds) != Some(Some(2)) {
        assert!(told.len() < 2, "{told:#?}");
        told.push(
            events
                .next_timeout(wait)
                .unwrap()
                .expect("an event within 5 s"),
        );
    }
    assert_eq!(told[0].kind, EventKind::Acquired, "{told:#?}");
    for event in &told {
        assert_eq!(event.seen_by, SeenBy::Keyspace, "{event:#?}");
        assert_eq!(
            event.holder.as_ref().map(|h| h.field.as_str()),
            Some(me.as_str())
        );
    }
    g2.unlock().unwrap();
    let partial = events
        .next_timeout(wait)
        .unwrap()
        .expect("an event within 5 s");
    assert_eq!(
        (partial.kind, partial.holds),
        (EventKind::Released, Some(1)),
        "{partial:#?}"
    );
    g1.unlock().unwrap();
    let full = events
        .next_timeout(wait)
        .unwrap()
        .expect("an event within 5 s");
    assert_eq!(
        (full.kind, full.seen_by, full.holds),
        (EventKind::Released, SeenBy::Keyspace, Some(0)),
        "{full:#?}"
    );
    let heard: Vec<&str> = full.heard.iter().map(|n| n.payload.as_str()).collect();
    assert_eq!(heard, ["hincrby", "del", "0"]);
    assert_eq!(
        full.holder.as_ref().map(|h| h.field.as_str()),
        Some(me.as_str())
    );
    assert_eq!(events.next_timeout(POLL * 3).unwrap(), None);

    // Inside async code: refused, not blocked.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        assert!(matches!(
            events.next(),
            Some(Err(Error::InAsyncContext { .. }))
        ));
        assert!(matches!(
            events.next_timeout(POLL),
            Err(Error::InAsyncContext { .. })
        ));
    });
    drop(events);
    c.shutdown().unwrap();
}
