//! The engine on its own, with a made-up primitive that needs no Redis: a grant carries a
//! value, the strategy is back-off polling, and every hook records that it ran.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::config::Config;
use crate::tasks::Tasks;

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
}

#[derive(Clone, Copy, Debug)]
enum Scripted {
    Busy,
    Unknown { ran: bool },
}

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
        Strategy::Backoff(Backoff::exponential(
            Duration::from_millis(1),
            Duration::from_millis(4),
            2,
        ))
    }

    fn attempt(&self, _wait: Option<Duration>, _limit: Duration) -> BoxFuture<'_, Step<u64, u64>> {
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

    fn give_up(&self, _wait: Option<Duration>) -> Option<BoxFuture<'_, Result<()>>> {
        Some(Box::pin(async move {
            self.gave_up.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }))
    }
}

/// A client that never connects (nothing here sends a request).
fn shared() -> Arc<Shared> {
    let config = Config::from_url("redis://127.0.0.1:1");
    let tasks = Tasks::new(tokio::runtime::Handle::current());
    Arc::new(Shared::new(config, crate::names::NameMapper::identity(), None, tasks).unwrap())
}

#[tokio::test]
async fn a_grant_carries_the_primitives_value_after_busy_attempts() {
    let shared = shared();
    let fake = Arc::new(Fake {
        grant_on: 4,
        ..Fake::default()
    });
    let got = acquire(&shared, fake.clone(), None).await.unwrap();
    assert_eq!(got, Some(4));
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
    let got = acquire(&shared, fake.clone(), Some(Duration::ZERO))
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
    let got = acquire(&shared, fake.clone(), Some(Duration::from_millis(30)))
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
    let left = tokio::time::timeout(
        Duration::from_millis(10),
        acquire(&shared, fake.clone(), None),
    )
    .await;
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
    let got = acquire(&shared, fake.clone(), None).await.unwrap();
    assert_eq!(got, Some(1));
    assert_eq!(fake.resolved.load(Ordering::SeqCst), 1);
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 1);

    // It did not run: the engine attempts again (a single attempt too, once).
    let fake = Arc::new(Fake {
        grant_on: 2,
        script: vec![(1, Scripted::Unknown { ran: false })],
        ..Fake::default()
    });
    let got = acquire(&shared, fake.clone(), Some(Duration::ZERO))
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
    let got = acquire(&shared, fake, Some(Duration::MAX)).await.unwrap();
    assert_eq!(got, Some(3));
}

#[tokio::test]
async fn a_shut_down_client_refuses_at_once() {
    let shared = shared();
    shared.tasks.shut_down();
    let fake = Arc::new(Fake::default());
    let err = acquire(&shared, fake.clone(), None).await.unwrap_err();
    assert!(err.is_shutdown());
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 0);
}
