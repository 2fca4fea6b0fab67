//! The primitives that are not locks, as one list parallel to [`Kind`](super::Kind): the two
//! semaphores and the latch ([`Primitive`], [`per_primitive!`]). The properties the wait engine
//! promises for every primitive (a waiting acquire that is cancelled leaves nothing; what is
//! held is released on drop; a restart; errors on a key of another type, an unreachable
//! server, after shutdown) run for them from this list, with the same shape as the locks'
//! tests: each primitive can be made to wait ([`close`](Primitive::close)) and let in
//! ([`open`](Primitive::open)), and says what it leaves in Redis.
//!
//! Their layout: docs/LAYOUT.md §6.4 (the semaphore), §6.5 (the permit-expirable semaphore),
//! §6.6 (the latch), §12 (this crate's grant markers).

use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, PermitId, Permits};

use super::{State, state};

/// The semaphores and the latch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    /// The counting semaphore, `client.semaphore(name)` (Redisson's `RSemaphore`): the
    /// string `name` holds the available permits; an acquisition returns `Permits`, which
    /// release on drop.
    Semaphore,
    /// The permit-expirable semaphore, `client.permit_expirable_semaphore(name)`
    /// (`RPermitExpirableSemaphore`): the string `name` holds the available permits, the
    /// sorted set `{name}:timeout` the acquired ones; an acquisition returns permit ids, plain
    /// values released by id (nothing to drop).
    PermitSemaphore,
    /// The count-down latch, `client.count_down_latch(name)` (`RCountDownLatch`): the string
    /// `name` holds the count; waiting for it to open takes nothing.
    Latch,
}

/// What one acquisition of a [`Primitive`] holds.
#[derive(Debug)]
pub enum Taken {
    /// A semaphore's permits (released on drop).
    Permits(Permits),
    /// A permit-expirable semaphore's permit ids.
    Ids(Vec<PermitId>),
    /// The latch is open (nothing is held).
    Open,
}

impl Primitive {
    /// Every primitive of the list.
    pub const ALL: [Self; 3] = [Self::Semaphore, Self::PermitSemaphore, Self::Latch];

    /// The primitive's name in test names: `semaphore`, `permit_semaphore`, `latch`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Semaphore => "semaphore",
            Self::PermitSemaphore => "permit_semaphore",
            Self::Latch => "latch",
        }
    }

    /// The channel its waiters subscribe to and its writes publish on:
    /// `redisson_sc:{name}` for both semaphores, `redisson_countdownlatch__channel__{name}`.
    pub fn channel(&self, name: &str) -> String {
        match self {
            Self::Semaphore | Self::PermitSemaphore => format!("redisson_sc:{{{name}}}"),
            Self::Latch => format!("redisson_countdownlatch__channel__{{{name}}}"),
        }
    }

    /// The permit-expirable semaphore's acquired permits, `{name}:timeout`.
    pub fn timeouts_key(name: &str) -> String {
        format!("{{{name}}}:timeout")
    }

    /// Makes `name` keep every acquirer waiting: a semaphore with 0 permits (`name` = `0`), a
    /// latch with count 1 (`name` = `1`).
    pub async fn close(&self, client: &Client, name: &str) {
        match self {
            Self::Semaphore => assert!(client.semaphore(name).try_set_permits(0).await.unwrap()),
            Self::PermitSemaphore => assert!(
                client
                    .permit_expirable_semaphore(name)
                    .try_set_permits(0)
                    .await
                    .unwrap()
            ),
            Self::Latch => assert!(
                client
                    .count_down_latch(name)
                    .try_set_count(1)
                    .await
                    .unwrap()
            ),
        }
    }

    /// Lets one acquirer in: one more permit (`release(1)`, `add_permits(1)`), the latch
    /// counted down to 0 (opened: its key deleted).
    pub async fn open(&self, client: &Client, name: &str) {
        match self {
            Self::Semaphore => client.semaphore(name).release(1).await.unwrap(),
            Self::PermitSemaphore => {
                client
                    .permit_expirable_semaphore(name)
                    .add_permits(1)
                    .await
                    .unwrap();
            }
            Self::Latch => client.count_down_latch(name).count_down().await.unwrap(),
        }
    }

    /// What `name` holds while [`close`](Self::close)d with nothing acquired: the value `0`
    /// (no acquired permit: no `{name}:timeout`, no grant marker), or the latch's `1`.
    pub fn closed_state(&self) -> State {
        match self {
            Self::Semaphore | Self::PermitSemaphore => State::Value("0".to_owned()),
            Self::Latch => State::Value("1".to_owned()),
        }
    }

    /// What `name` holds once [`open`](Self::open)ed from closed and the one acquirer let in
    /// has given back what it took: one permit available, or no latch (open).
    pub fn opened_state(&self) -> State {
        match self {
            Self::Semaphore | Self::PermitSemaphore => State::Value("1".to_owned()),
            Self::Latch => State::Absent,
        }
    }

    /// Asserts that the server holds exactly `name` with `want` (as [`state`] reads it) and
    /// nothing else: no grant marker, no acquired permit, no other key.
    pub async fn assert_only(&self, raw: &mut MultiplexedConnection, name: &str, want: &State) {
        assert_eq!(&state(raw, name).await, want, "{self:?} {name}");
        let keys = super::all_keys(raw).await;
        let expected: Vec<String> = if *want == State::Absent {
            Vec::new()
        } else {
            vec![name.to_owned()]
        };
        assert_eq!(keys, expected, "{:?}", super::describe_keys(raw).await);
    }

    /// An acquisition that waits as long as it takes: `acquire(1)`, `acquire(1, None)`,
    /// `await_open()`.
    pub fn acquire<'a>(
        &self,
        client: &'a Client,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Taken, Error>> {
        match self {
            Self::Semaphore => {
                let sem = client.semaphore(name);
                Box::pin(async move { sem.acquire(1).await.map(Taken::Permits) })
            }
            Self::PermitSemaphore => {
                let sem = client.permit_expirable_semaphore(name);
                Box::pin(async move { sem.acquire(1, None).await.map(Taken::Ids) })
            }
            Self::Latch => {
                let latch = client.count_down_latch(name);
                Box::pin(async move { latch.await_open().await.map(|()| Taken::Open) })
            }
        }
    }

    /// An acquisition that waits at most `wait`: `try_acquire_for(1, wait)`,
    /// `try_acquire_for(1, wait, None)`, `await_for(wait)`.
    pub fn try_acquire_for<'a>(
        &self,
        client: &'a Client,
        name: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Option<Taken>, Error>> {
        match self {
            Self::Semaphore => {
                let sem = client.semaphore(name);
                Box::pin(async move {
                    sem.try_acquire_for(1, wait)
                        .await
                        .map(|p| p.map(Taken::Permits))
                })
            }
            Self::PermitSemaphore => {
                let sem = client.permit_expirable_semaphore(name);
                Box::pin(async move {
                    sem.try_acquire_for(1, wait, None)
                        .await
                        .map(|p| p.map(Taken::Ids))
                })
            }
            Self::Latch => {
                let latch = client.count_down_latch(name);
                Box::pin(async move {
                    latch
                        .await_for(wait)
                        .await
                        .map(|open| open.then_some(Taken::Open))
                })
            }
        }
    }

    /// Gives back what an acquisition of `name` took: the permits, the ids; nothing for the
    /// latch.
    pub async fn give_back(&self, client: &Client, name: &str, taken: Taken) {
        match taken {
            Taken::Permits(p) => p.release().await.unwrap(),
            Taken::Ids(ids) => client
                .permit_expirable_semaphore(name)
                .release(&ids)
                .await
                .unwrap(),
            Taken::Open => assert_eq!(*self, Self::Latch),
        }
    }

    /// Every operation of the primitive on `name` once, each named: the acquisitions (waiting,
    /// bounded, one attempt), the queries and the writes. The error tests expect each to fail
    /// the same way.
    pub fn operations<'a>(
        &self,
        client: &'a Client,
        name: &'a str,
    ) -> Vec<(&'static str, BoxFuture<'a, Result<(), Error>>)> {
        let id = PermitId::parse("00112233445566778899aabbccddeeff").unwrap();
        match self {
            Self::Semaphore => {
                let s = client.semaphore(name);
                vec![
                    ("acquire", {
                        let s = s.clone();
                        Box::pin(async move { s.acquire(1).await.map(drop) })
                    }),
                    ("try_acquire", {
                        let s = s.clone();
                        Box::pin(async move { s.try_acquire(1).await.map(drop) })
                    }),
                    ("try_acquire_for", {
                        let s = s.clone();
                        Box::pin(async move {
                            s.try_acquire_for(1, Duration::from_millis(300))
                                .await
                                .map(drop)
                        })
                    }),
                    ("available_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.available_permits().await.map(drop) })
                    }),
                    ("try_set_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.try_set_permits(1).await.map(drop) })
                    }),
                    ("try_set_permits_with_ttl", {
                        let s = s.clone();
                        Box::pin(async move {
                            s.try_set_permits_with_ttl(1, Duration::from_secs(1))
                                .await
                                .map(drop)
                        })
                    }),
                    ("add_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.add_permits(1).await.map(drop) })
                    }),
                    ("drain_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.drain_permits().await.map(drop) })
                    }),
                    ("release", {
                        let s = s.clone();
                        Box::pin(async move { s.release(1).await })
                    }),
                    ("release_if_exists", {
                        Box::pin(async move { s.release_if_exists(1).await.map(drop) })
                    }),
                ]
            }
            Self::PermitSemaphore => {
                let s = client.permit_expirable_semaphore(name);
                vec![
                    ("acquire", {
                        let s = s.clone();
                        Box::pin(async move { s.acquire(1, None).await.map(drop) })
                    }),
                    ("try_acquire", {
                        let s = s.clone();
                        Box::pin(async move { s.try_acquire(1, None).await.map(drop) })
                    }),
                    ("try_acquire_for", {
                        let s = s.clone();
                        Box::pin(async move {
                            s.try_acquire_for(1, Duration::from_millis(300), None)
                                .await
                                .map(drop)
                        })
                    }),
                    ("available_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.available_permits().await.map(drop) })
                    }),
                    ("total_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.total_permits().await.map(drop) })
                    }),
                    ("acquired_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.acquired_permits().await.map(drop) })
                    }),
                    ("try_set_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.try_set_permits(1).await.map(drop) })
                    }),
                    ("set_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.set_permits(1).await })
                    }),
                    ("add_permits", {
                        let s = s.clone();
                        Box::pin(async move { s.add_permits(1).await.map(drop) })
                    }),
                    ("update_lease_time", {
                        let s = s.clone();
                        Box::pin(async move {
                            s.update_lease_time(&id, Some(Duration::from_secs(1)))
                                .await
                                .map(drop)
                        })
                    }),
                    ("try_release", {
                        let s = s.clone();
                        Box::pin(async move { s.try_release(&id).await.map(drop) })
                    }),
                    ("release", {
                        let s = s.clone();
                        Box::pin(async move { s.release(&[id]).await })
                    }),
                    ("lease_time", {
                        Box::pin(async move { s.lease_time(&id).await.map(drop) })
                    }),
                ]
            }
            Self::Latch => {
                let l = client.count_down_latch(name);
                vec![
                    ("await_open", {
                        let l = l.clone();
                        Box::pin(async move { l.await_open().await })
                    }),
                    ("await_for", {
                        let l = l.clone();
                        Box::pin(
                            async move { l.await_for(Duration::from_millis(300)).await.map(drop) },
                        )
                    }),
                    ("count", {
                        let l = l.clone();
                        Box::pin(async move { l.count().await.map(drop) })
                    }),
                    ("try_set_count", {
                        let l = l.clone();
                        Box::pin(async move { l.try_set_count(1).await.map(drop) })
                    }),
                    ("count_down", {
                        let l = l.clone();
                        Box::pin(async move { l.count_down().await })
                    }),
                    (
                        "delete",
                        Box::pin(async move { l.delete().await.map(drop) }),
                    ),
                ]
            }
        }
    }

    /// Polls (bounded, 5 s) until a waiter's subscription to [`channel`](Self::channel) is
    /// there: `clients` connections subscribed.
    pub async fn wait_parked(&self, raw: &mut MultiplexedConnection, name: &str, clients: i64) {
        super::wait_numsub(raw, &self.channel(name), clients).await;
    }

    /// `GET name`, for failure messages.
    pub async fn value(raw: &mut MultiplexedConnection, name: &str) -> Option<String> {
        raw.get(name).await.unwrap()
    }
}

impl std::fmt::Display for Primitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// One test per primitive, from the one list [`Primitive::ALL`], as
/// [`per_kind!`](crate::common::per_kind) does for the lock kinds: `per_primitive!(#[attributes]
/// async fn NAME);` next to `async fn NAME(p: Primitive)` defines the module `NAME` with the
/// tests `semaphore`, `permit_semaphore` and `latch`; `; except { latch: "why" }` makes a
/// primitive's test `#[ignore = "why"]`, for a property that does not apply to it.
#[allow(unused_macros)]
macro_rules! per_primitive {
    ($(#[$attr:meta])* async fn $name:ident) => {
        $crate::common::per_primitive!($(#[$attr])* async fn $name; except {});
    };
    ($(#[$attr:meta])* async fn $name:ident; except { $($ex:ident : $why:literal),* $(,)? }) => {
        mod $name {
            $crate::common::per_primitive_test!(
                [$(#[$attr])*] $name [$($ex: $why),*]
                semaphore Semaphore, permit_semaphore PermitSemaphore, latch Latch
            );
        }
    };
}
#[allow(unused_imports)]
pub(crate) use per_primitive;

/// The tests of [`per_primitive!`] (as [`per_kind_test!`](crate::common::per_kind_test)).
#[allow(unused_macros)]
macro_rules! per_primitive_test {
    ([$($attr:tt)*] $name:ident [$($ex:ident : $why:literal),*] $($label:ident $variant:ident),*) => {
        macro_rules! one_primitive {
            $( ($ex, $v:ident) => {
                #[test]
                #[ignore = $why]
                fn $ex() {}
            }; )*
            ($l:ident, $v:ident) => {
                $crate::common::per_primitive_test!(@run [$($attr)*] $name $l $v);
            };
        }
        $( one_primitive!($label, $variant); )*
    };
    (@run [$($attr:tt)*] $name:ident $label:ident $variant:ident) => {
        $($attr)*
        async fn $label() {
            super::$name(crate::common::Primitive::$variant).await;
        }
    };
}
#[allow(unused_imports)]
pub(crate) use per_primitive_test;
