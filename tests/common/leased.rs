//! Every primitive whose holds carry a lease, from one list ([`Leased`]): the nine lock kinds
//! and the permit-expirable semaphore's renewing permits, with what the tests that run over
//! all of them share: a hold the watchdog renews ([`Leased::acquire`], a [`Guard`]), a
//! rival's hold with an explicit lease ([`Leased::rival`], a [`RivalHold`]), and one test per
//! entry ([`per_leased!`](crate::common::leased::per_leased)). The counting semaphore is not
//! in it: its permits have no lease and nothing renews them.

use std::time::{Duration, Instant};

use redisson_sync::{
    Client, LockGuard, LockOptions, PermitExpirableSemaphore, PermitGuard, PermitId, Result,
};

use super::AnyLock;

/// One primitive with leased holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leased {
    /// `client.lock(name)`.
    Lock,
    /// `client.fair_lock(name)`.
    Fair,
    /// `client.rw_lock(name).read_lock()`.
    Read,
    /// `client.rw_lock(name).write_lock()`.
    Write,
    /// `client.fenced_lock(name)`.
    Fenced,
    /// `client.spin_lock(name)`.
    Spin,
    /// `client.non_reentrant_lock(name)`.
    NonReentrant,
    /// `client.non_reentrant_fair_lock(name)`.
    NonReentrantFair,
    /// `client.token_lock(name)`.
    Token,
    /// One renewing permit of `client.permit_expirable_semaphore(name)`, set to 1 permit.
    Permits,
}

impl Leased {
    /// Every entry: the lock kinds, then the renewing permits.
    pub const ALL: [Self; 10] = [
        Self::Lock,
        Self::Fair,
        Self::Read,
        Self::Write,
        Self::Fenced,
        Self::Spin,
        Self::NonReentrant,
        Self::NonReentrantFair,
        Self::Token,
        Self::Permits,
    ];

    /// The entry named `label` (a test's name in [`per_leased!`](crate::common::leased::per_leased)).
    pub fn from_label(label: &str) -> Self {
        *Self::ALL
            .iter()
            .find(|l| l.label() == label)
            .unwrap_or_else(|| panic!("no leased primitive {label:?}"))
    }

    /// Its name in test names: `lock`, `fair`, `read`, `write`, `fenced`, `spin`,
    /// `nonreentrant`, `nonreentrant_fair`, `token`, `permits`.
    pub fn label(&self) -> &'static str {
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
            Self::Permits => "permits",
        }
    }

    /// The lock of this kind named `name`; `None` for the permits.
    pub fn any(&self, client: &Client, name: &str) -> Option<AnyLock> {
        Some(match self {
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
            Self::Permits => return None,
        })
    }

    /// What must exist before anyone acquires: the semaphore's one permit.
    pub async fn prepare(&self, client: &Client, name: &str) {
        if *self == Self::Permits {
            assert!(
                client
                    .permit_expirable_semaphore(name)
                    .try_set_permits(1)
                    .await
                    .unwrap()
            );
        }
    }

    /// A hold the watchdog renews, waiting as long as it takes: a lock without an explicit
    /// lease (its lease: the client's watchdog timeout), or one renewing permit leased for the
    /// watchdog timeout.
    pub async fn acquire(&self, client: &Client, name: &str) -> Result<Guard> {
        match self.any(client, name) {
            Some(lock) => lock
                .lock_with_options(&LockOptions::new())
                .await
                .map(Guard::Lock),
            None => client
                .permit_expirable_semaphore(name)
                .acquire_renewing(1, client.config().watchdog_timeout)
                .await
                .map(Guard::Permits),
        }
    }

    /// A hold that keeps a hold of this entry out, with an explicit `lease` (nothing renews
    /// it), waiting at most `wait`: the write half against the read half, the entry itself
    /// otherwise; a permit with a lease against the renewing permit.
    pub async fn rival(
        &self,
        client: &Client,
        name: &str,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<RivalHold>> {
        let kind = match self {
            Self::Read => Self::Write,
            other => *other,
        };
        match kind.any(client, name) {
            Some(lock) => Ok(lock
                .try_lock_with_options(wait, &LockOptions::new().lease(lease))
                .await?
                .map(RivalHold::Lock)),
            None => {
                let semaphore = client.permit_expirable_semaphore(name);
                let ids = semaphore.try_acquire_for(1, wait, Some(lease)).await?;
                Ok(ids.map(|ids| RivalHold::Permits(semaphore, ids)))
            }
        }
    }
}

impl Leased {
    /// Panics unless `labels` are those of [`ALL`](Self::ALL) in order, or of every lock
    /// kind (all but the permits).
    pub fn check_list(labels: &[&str]) {
        let all: Vec<&str> = Self::ALL.iter().map(Self::label).collect();
        assert!(
            labels == all || labels == &all[..all.len() - 1],
            "per_leased! lists {labels:?}, Leased::ALL is {all:?}"
        );
    }
}

impl std::fmt::Display for Leased {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A hold the watchdog renews: a lock's guard or a renewing permit's.
#[derive(Debug)]
pub enum Guard {
    Lock(LockGuard),
    Permits(PermitGuard),
}

impl Guard {
    /// Until when the client vouches for the hold.
    pub fn valid_until(&self) -> Instant {
        match self {
            Self::Lock(g) => g.valid_until(),
            Self::Permits(g) => g.valid_until(),
        }
    }

    /// Whether the hold is lost.
    pub fn is_lost(&self) -> bool {
        match self {
            Self::Lock(g) => g.is_lost(),
            Self::Permits(g) => g.is_lost(),
        }
    }

    /// Resolves once the hold is lost.
    pub async fn lost(&self) {
        match self {
            Self::Lock(g) => g.lost().await,
            Self::Permits(g) => g.lost().await,
        }
    }

    /// The holder as Redis stores it: the lock's field (or token value), the permit's id.
    pub fn holder(&self) -> String {
        match self {
            Self::Lock(g) => g.holder().to_owned(),
            Self::Permits(g) => g.ids()[0].to_string(),
        }
    }

    /// Releases the hold: `unlock` or `release`.
    pub async fn release(self) -> Result<()> {
        match self {
            Self::Lock(g) => g.unlock().await,
            Self::Permits(g) => g.release().await,
        }
    }
}

/// A rival's hold with an explicit lease: a lock's guard, or permit ids with their semaphore.
#[derive(Debug)]
pub enum RivalHold {
    Lock(LockGuard),
    Permits(PermitExpirableSemaphore, Vec<PermitId>),
}

impl RivalHold {
    /// Releases it; panics if that fails.
    pub async fn release(self) {
        match self {
            Self::Lock(g) => g.unlock().await.unwrap(),
            Self::Permits(semaphore, ids) => semaphore.release(&ids).await.unwrap(),
        }
    }
}

/// One test per entry of [`Leased::ALL`]: `per_leased!(#[test] fn NAME);` next to
/// `fn NAME(leased: Leased)` defines the module `NAME` with one test per entry, named by its
/// label (a failure names it: `NAME::fair`), each calling `NAME` with its entry, plus
/// `NAME::covers_every_entry`, which checks that the list here is [`Leased::ALL`];
/// `per_leased!(#[test] fn NAME: locks);` does the same for the lock kinds only (every entry
/// but `permits`). With `async fn` the same for an `async fn NAME` under the attributes'
/// runtime (`#[tokio::test]`).
#[allow(unused_macros)]
macro_rules! per_leased {
    ($(#[$attr:meta])* fn $name:ident) => {
        $crate::common::leased::per_leased!(@each {$(#[$attr])*} {} $name:
            lock, fair, read, write, fenced, spin, nonreentrant, nonreentrant_fair, token, permits);
    };
    ($(#[$attr:meta])* fn $name:ident: locks) => {
        $crate::common::leased::per_leased!(@each {$(#[$attr])*} {} $name:
            lock, fair, read, write, fenced, spin, nonreentrant, nonreentrant_fair, token);
    };
    ($(#[$attr:meta])* async fn $name:ident) => {
        $crate::common::leased::per_leased!(@each {$(#[$attr])*} {async} $name:
            lock, fair, read, write, fenced, spin, nonreentrant, nonreentrant_fair, token, permits);
    };
    ($(#[$attr:meta])* async fn $name:ident: locks) => {
        $crate::common::leased::per_leased!(@each {$(#[$attr])*} {async} $name:
            lock, fair, read, write, fenced, spin, nonreentrant, nonreentrant_fair, token);
    };
    (@each $attrs:tt $async:tt $name:ident: $($label:ident),+) => {
        mod $name {
            $($crate::common::leased::per_leased!(@one $attrs $async $name $label);)+

            #[test]
            fn covers_every_entry() {
                crate::common::leased::Leased::check_list(&[$(stringify!($label)),+]);
            }
        }
    };
    (@one {$(#[$attr:meta])*} {} $name:ident $label:ident) => {
        $(#[$attr])*
        fn $label() {
            super::$name(crate::common::leased::Leased::from_label(stringify!($label)));
        }
    };
    (@one {$(#[$attr:meta])*} {async} $name:ident $label:ident) => {
        $(#[$attr])*
        async fn $label() {
            super::$name(crate::common::leased::Leased::from_label(stringify!($label))).await;
        }
    };
}
#[allow(unused_imports)]
pub(crate) use per_leased;
