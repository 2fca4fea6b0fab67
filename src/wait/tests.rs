//! The engine on its own, with a made-up primitive that needs no Redis: a grant carries a
//! value, the strategy is back-off polling, and every hook records that it ran.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// Grants a token on its `grant_on`-th attempt; earlier attempts are busy, or fail or are of
/// unknown outcome as scripted.
#[derive(Debug, Default)]
struct Fake {
    attempts: AtomicUsize,
    grant_on: usize,
    /// Per attempt (1-based), what it does instead of being busy.
    script: Vec<(usize, Scripted)>,
    /// How long each attempt takes.
    delay: Duration,
    undone: Mutex<Vec<u64>>,
    resolved: AtomicUsize,
    gave_up: AtomicUsize,
    trace: bool,
    name: Arc<str>,
    /// Waits by messages on this channel (lock messages) instead of polling.
    channel: Option<&'static str>,
    /// Yields to the client's waiters parked on `channel`.
    yields: bool,
}

#[derive(Clone, Copy, Debug)]
enum Scripted {
    Busy,
    Unknown {
        ran: bool,
    },
    /// Refused before anything was sent.
    Refused,
    /// Granted after its lease (and given back): [`LATE`].
    Late,
}

/// What a [`Scripted::Late`] attempt reports.
const LATE: LateGrant = LateGrant {
    latency: Duration::from_millis(20),
    lease: Duration::from_millis(15),
};

impl Acquire for Fake {
    type Grant = u64;
    type Pending = u64;

    fn subject(&self) -> Subject<'_> {
        Subject {
            kind: "lock",
            name: &self.name,
            client_id: "fake",
            owner: None,
        }
    }

    fn strategy(&self) -> Strategy {
        if let Some(channel) = self.channel {
            return Strategy::PubSub {
                channel: channel.to_owned(),
                policy: crate::pubsub::WakePolicy::Lock,
            };
        }
        Strategy::Backoff(Backoff::exponential(
            Duration::from_millis(1),
            Duration::from_millis(4),
            2,
        ))
    }

    fn attempt(
        &self,
        _wait: Option<Duration>,
        _limit: Duration,
        _contended: bool,
    ) -> BoxFuture<'_, Step<u64, u64>> {
        Box::pin(async move {
            let n = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(self.delay).await;
            match self.script.iter().find(|(i, _)| *i == n).map(|(_, s)| *s) {
                Some(Scripted::Unknown { ran }) => Step::Unknown(
                    if ran { n as u64 } else { 0 },
                    Error::Redis(redis::RedisError::from(std::io::Error::from(
                        std::io::ErrorKind::ConnectionReset,
                    ))),
                ),
                Some(Scripted::Busy) => Step::Busy(Some(Duration::from_millis(1))),
                Some(Scripted::Refused) => Step::Refused(Error::InvalidArgument("refused".into())),
                Some(Scripted::Late) => Step::Late(LATE),
                None if n >= self.grant_on => Step::Granted(n as u64),
                None => Step::Busy(Some(Duration::from_millis(1))),
            }
        })
    }

    fn resolve(&self, pending: u64) -> BoxFuture<'_, Result<Option<u64>>> {
        Box::pin(async move {
            self.resolved.fetch_add(1, Ordering::SeqCst);
            Ok((pending != 0).then_some(pending))
        })
    }

    fn undo(&self, grant: u64) -> BoxFuture<'_, ()> {
        Box::pin(async move { self.undone.lock().unwrap().push(grant) })
    }

    fn leaves_trace(&self) -> bool {
        self.trace
    }

    fn yields_to_parked(&self) -> bool {
        self.yields
    }

    fn give_up(&self, _wait: Option<Duration>) -> Option<BoxFuture<'_, Result<()>>> {
        Some(Box::pin(async move {
            self.gave_up.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }))
    }
}

/// A client that never connects (nothing here sends a request).
fn shared() -> Arc<Shared> {
    Shared::offline()
}

#[tokio::test]
async fn a_grant_carries_the_primitives_value_after_busy_attempts() {
    let shared = shared();
    let fake = Arc::new(Fake {
        grant_on: 4,
        ..Fake::default()
    });
    let got = acquire(&shared, fake.clone()).await.unwrap();
    assert_eq!(got, 4);
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 4);
    assert!(fake.undone.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_single_attempt_never_waits() {
    let shared = shared();
    let fake = Arc::new(Fake {
        grant_on: 2,
        trace: true,
        ..Fake::default()
    });
    let got = try_acquire(&shared, fake.clone(), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(got, None);
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 1);
    // A single attempt never queues, so there is nothing to clean up.
    assert_eq!(fake.gave_up.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_wait_that_runs_out_gives_up_and_cleans_up() {
    let shared = shared();
    let fake = Arc::new(Fake {
        grant_on: usize::MAX,
        trace: true,
        ..Fake::default()
    });
    let got = try_acquire(&shared, fake.clone(), Duration::from_millis(30))
        .await
        .unwrap();
    assert_eq!(got, None);
    assert!(fake.attempts.load(Ordering::SeqCst) > 1);
    assert_eq!(fake.gave_up.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_grant_nobody_received_is_undone() {
    let shared = shared();
    let fake = Arc::new(Fake {
        grant_on: 1,
        delay: Duration::from_millis(50),
        ..Fake::default()
    });
    // The caller leaves while the attempt is in flight.
    let left =
        tokio::time::timeout(Duration::from_millis(10), acquire(&shared, fake.clone())).await;
    assert!(left.is_err());
    shared.tasks.drain().await;
    assert_eq!(*fake.undone.lock().unwrap(), vec![1]);
}

#[tokio::test]
async fn an_unknown_outcome_is_resolved_before_the_next_attempt() {
    let shared = shared();
    // The first attempt's reply is lost but it ran: the grant is found and handed out.
    let fake = Arc::new(Fake {
        grant_on: usize::MAX,
        script: vec![(1, Scripted::Unknown { ran: true })],
        ..Fake::default()
    });
    let got = acquire(&shared, fake.clone()).await.unwrap();
    assert_eq!(got, 1);
    assert_eq!(fake.resolved.load(Ordering::SeqCst), 1);
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 1);

    // It did not run: the engine attempts again (a single attempt too, once).
    let fake = Arc::new(Fake {
        grant_on: 2,
        script: vec![(1, Scripted::Unknown { ran: false })],
        ..Fake::default()
    });
    let got = try_acquire(&shared, fake.clone(), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(got, Some(2));
    assert_eq!(fake.resolved.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_wait_too_long_for_the_clock_has_no_deadline() {
    let shared = shared();
    let fake = Arc::new(Fake {
        grant_on: 3,
        script: vec![(2, Scripted::Busy)],
        ..Fake::default()
    });
    let got = try_acquire(&shared, fake, Duration::MAX).await.unwrap();
    assert_eq!(got, Some(3));
}

#[tokio::test]
async fn a_shut_down_client_refuses_at_once() {
    let shared = shared();
    shared.tasks.shut_down();
    let fake = Arc::new(Fake::default());
    let err = acquire(&shared, fake.clone()).await.unwrap_err();
    assert!(err.is_shutdown());
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_refusal_ends_the_wait_without_a_cleanup() {
    let shared = shared();
    let fake = Arc::new(Fake {
        grant_on: usize::MAX,
        script: vec![(1, Scripted::Refused)],
        trace: true,
        ..Fake::default()
    });
    let err = acquire(&shared, fake.clone()).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    shared.tasks.drain().await;
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 1);
    // Nothing was sent, so nothing is cleaned up, also in the background.
    assert_eq!(fake.gave_up.load(Ordering::SeqCst), 0);
    // A refusal while waiting ends the wait too; the waiter may have queued by then.
    let fake = Arc::new(Fake {
        grant_on: usize::MAX,
        script: vec![(3, Scripted::Refused)],
        trace: true,
        ..Fake::default()
    });
    let err = try_acquire(&shared, fake.clone(), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    shared.tasks.drain().await;
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 3);
    assert_eq!(fake.gave_up.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn grants_after_their_lease_are_tried_again_until_the_bound_ends_the_wait() {
    let shared = shared();
    // Fewer than the bound in a row: tried again, the next grant is handed out.
    let fake = Arc::new(Fake {
        grant_on: 1,
        script: (1..LATE_GRANTS as usize)
            .map(|n| (n, Scripted::Late))
            .collect(),
        ..Fake::default()
    });
    let got = acquire(&shared, fake.clone()).await.unwrap();
    assert_eq!(got, LATE_GRANTS as u64);

    // The bound in a row ends a wait without a deadline, with what was measured; the waiter
    // cleans up what it may have left.
    for bounded in [false, true] {
        let fake = Arc::new(Fake {
            grant_on: usize::MAX,
            script: (1..=LATE_GRANTS as usize + 1)
                .map(|n| (n, Scripted::Late))
                .collect(),
            trace: true,
            name: "late".into(),
            ..Fake::default()
        });
        let err = if bounded {
            try_acquire(&shared, fake.clone(), Duration::from_secs(60))
                .await
                .unwrap_err()
        } else {
            acquire(&shared, fake.clone()).await.unwrap_err()
        };
        let Error::LateGrants {
            name,
            grants,
            latency,
            lease,
        } = &err
        else {
            panic!("{err}");
        };
        assert_eq!(
            (name.as_str(), *grants, *latency, *lease),
            ("late", LATE_GRANTS, LATE.latency, LATE.lease)
        );
        shared.tasks.drain().await;
        assert_eq!(fake.attempts.load(Ordering::SeqCst), LATE_GRANTS as usize);
        assert_eq!(fake.gave_up.load(Ordering::SeqCst), 1);
    }

    // A single attempt gives up on the first, as on a busy lock.
    let fake = Arc::new(Fake {
        grant_on: 2,
        script: vec![(1, Scripted::Late)],
        ..Fake::default()
    });
    let got = try_acquire(&shared, fake.clone(), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(got, None);
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 1);
}

/// A waiter yields to the client's waiters parked on its channel only once Redis confirmed its
/// own subscription: their release then reaches it. Here the subscription is never confirmed
/// (no server), so it does not wait for a message that may never come: it attempts, and is
/// granted, when its confirmation wait (its whole wait here) runs out. (Before, it yielded
/// without a confirmed subscription, and its wait ended without a single attempt.)
#[tokio::test]
async fn a_waiter_without_a_confirmed_subscription_does_not_yield() {
    let shared = shared();
    let parked = shared
        .pubsub
        .subscribe("yield-test", crate::pubsub::WakePolicy::Lock);
    let fake = Arc::new(Fake {
        grant_on: 1,
        channel: Some("yield-test"),
        yields: true,
        ..Fake::default()
    });
    let got = try_acquire(&shared, fake.clone(), Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(got, Some(1));
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 1);
    drop(parked);
}
