//! The one place that maps a protocol kind to a lock type of the crate. Every lock type has the
//! same API (the crate's `lock_api!`), so the agent's operations are written once, on
//! [`AnyLock`].

use std::time::Duration;

use redisson_sync::{
    Client, FairLock, Lock, LockGuard, LockOptions, Owner, ReadLock, Result, Ttl, WriteLock,
};

use crate::protocol::{Failure, Kind};

/// A lock of any kind this crate has.
#[derive(Debug)]
pub enum AnyLock {
    Lock(Lock),
    Fair(FairLock),
    /// The read half of `client.rw_lock(name)`.
    Read(ReadLock),
    /// The write half of `client.rw_lock(name)`.
    Write(WriteLock),
}

/// Runs `$body` with `$lock` bound to the lock inside any variant.
macro_rules! on_lock {
    ($any:expr, $lock:ident => $body:expr) => {
        match $any {
            AnyLock::Lock($lock) => $body,
            AnyLock::Fair($lock) => $body,
            AnyLock::Read($lock) => $body,
            AnyLock::Write($lock) => $body,
        }
    };
}

impl AnyLock {
    /// The lock of `kind` named `name`. Every protocol kind has one now; the `Result` stays for
    /// the kinds the protocol may add before the crate has them (`unsupported`).
    pub fn new(
        client: &Client,
        kind: Kind,
        name: impl Into<String>,
    ) -> std::result::Result<Self, Failure> {
        match kind {
            Kind::Lock => Ok(Self::Lock(client.lock(name))),
            Kind::Fair => Ok(Self::Fair(client.fair_lock(name))),
            Kind::Read => Ok(Self::Read(client.rw_lock(name).read_lock())),
            Kind::Write => Ok(Self::Write(client.rw_lock(name).write_lock())),
        }
    }

    pub async fn lock(&self, options: &LockOptions) -> Result<LockGuard> {
        on_lock!(self, l => l.lock_with_options(options).await)
    }

    pub async fn try_lock(
        &self,
        wait: Duration,
        options: &LockOptions,
    ) -> Result<Option<LockGuard>> {
        on_lock!(self, l => l.try_lock_with_options(wait, options).await)
    }

    pub async fn force_unlock(&self) -> Result<bool> {
        on_lock!(self, l => l.force_unlock().await)
    }

    pub async fn is_locked(&self) -> Result<bool> {
        on_lock!(self, l => l.is_locked().await)
    }

    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        on_lock!(self, l => l.is_held_by(owner).await)
    }

    pub async fn hold_count(&self, owner: Owner) -> Result<u64> {
        on_lock!(self, l => l.hold_count(owner).await)
    }

    pub async fn remaining_ttl(&self) -> Result<Ttl> {
        on_lock!(self, l => l.remaining_ttl().await)
    }
}
