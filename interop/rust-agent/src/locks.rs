//! The one place that maps a protocol kind to a lock of the crate: a `redisson_sync::AnyLock`,
//! whose API is the same for every kind.

use redisson_sync::{AnyLock, Client};

use crate::protocol::{Failure, Kind};

/// The lock of `kind` named `name`. Every protocol kind this agent parses has one; the
/// `Result` stays for the kinds the protocol may add before the crate has them
/// (`unsupported`).
pub fn any_lock(
    client: &Client,
    kind: Kind,
    name: impl Into<String>,
) -> std::result::Result<AnyLock, Failure> {
    Ok(match kind {
        Kind::Lock => client.lock(name).into(),
        Kind::Fair => client.fair_lock(name).into(),
        Kind::Read => client.rw_lock(name).read_lock().into(),
        Kind::Write => client.rw_lock(name).write_lock().into(),
        Kind::Fenced => client.fenced_lock(name).into(),
        Kind::Spin => client.spin_lock(name).into(),
        Kind::NonReentrant => client.non_reentrant_lock(name).into(),
        Kind::NonReentrantFair => client.non_reentrant_fair_lock(name).into(),
    })
}
