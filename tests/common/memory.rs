//! The memory-pressure tests' list of primitives: every lock kind, both semaphores and the
//! latch ([`Primitive`]), with what the tests need of each.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redisson_sync::Client;

use super::AnyLock;

/// Every primitive of the crate, for the tests that run over all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Primitive {
    Lock,
    Fair,
    Read,
    Write,
    Fenced,
    Spin,
    NonReentrant,
    NonReentrantFair,
    Token,
    Semaphore,
    PermitSemaphore,
    Latch,
}

impl Primitive {
    /// The lock kinds.
    pub const LOCKS: [Self; 9] = [
        Self::Lock,
        Self::Fair,
        Self::Read,
        Self::Write,
        Self::Fenced,
        Self::Spin,
        Self::NonReentrant,
        Self::NonReentrantFair,
        Self::Token,
    ];

    /// Its name in messages.
    pub fn label(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Fair => "fair",
            Self::Read => "read",
            Self::Write => "write",
            Self::Fenced => "fenced",
            Self::Spin => "spin",
            Self::NonReentrant => "nonreentrant",
            Self::NonReentrantFair => "nonreentrant_fair",
            Self::Token => "token",
            Self::Semaphore => "semaphore",
            Self::PermitSemaphore => "psem",
            Self::Latch => "latch",
        }
    }

    /// The lock of this kind named `name`, through `client`; panics for the semaphores and the
    /// latch.
    pub fn lock(self, client: &Client, name: &str) -> AnyLock {
        match self {
            Self::Lock => AnyLock::Lock(client.lock(name)),
            Self::Fair => AnyLock::Fair(client.fair_lock(name)),
            Self::Read => AnyLock::Read(client.rw_lock(name).read_lock()),
            Self::Write => AnyLock::Write(client.rw_lock(name).write_lock()),
            Self::Fenced => AnyLock::Fenced(client.fenced_lock(name)),
            Self::Spin => AnyLock::Spin(client.spin_lock(name)),
            Self::NonReentrant => AnyLock::NonReentrant(client.non_reentrant_lock(name)),
            Self::NonReentrantFair => {
                AnyLock::NonReentrantFair(client.non_reentrant_fair_lock(name))
            }
            Self::Token => AnyLock::Token(client.token_lock(name)),
            other => panic!("{} is not a lock", other.label()),
        }
    }

    /// A lock kind whose hold keeps a hold of this one out: the write half for the read half,
    /// the kind itself otherwise.
    pub fn rival(self) -> Self {
        match self {
            Self::Read => Self::Write,
            other => other,
        }
    }
}

impl std::fmt::Display for Primitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Every key of the primitive `name` (a name without `{`): the key `name` itself and every key
/// with `{name}` in it (queues, markers, token counters, permit sets).
pub async fn keys_of(raw: &mut MultiplexedConnection, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{name}*"))
        .query_async(raw)
        .await
        .unwrap();
    keys.retain(|k| k == name || k.contains(&format!("{{{name}}}")));
    keys.sort();
    keys
}

/// The channels with a subscriber whose name contains `name`.
pub async fn channels_of(raw: &mut MultiplexedConnection, name: &str) -> Vec<String> {
    redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg(format!("*{name}*"))
        .query_async(raw)
        .await
        .unwrap()
}

/// Polls (every 20 ms) until no channel of `name` has a subscriber; panics after 5 s.
pub async fn wait_unsubscribed(raw: &mut MultiplexedConnection, name: &str) {
    let start = Instant::now();
    loop {
        let channels = channels_of(raw, name).await;
        if channels.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "still subscribed to {channels:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A blocking connection to `server` for the `testkit::memory` helpers.
pub fn admin(server: &super::RedisServer) -> redis::Connection {
    server.connect()
}
