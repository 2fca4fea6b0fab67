//! The one place that maps a protocol kind to a lock of the crate: as a
//! `Box<dyn redisson_sync::DistributedLock>` (the lock surface, the same for every kind), or
//! as the concrete lock ([`with_kind!`]) for the queries of a single lock's holds, which each
//! kind has as its own methods.

use redisson_sync::{Client, DistributedLock};

use crate::protocol::{Failure, Kind};

/// Runs `$body` with `$lock` bound to the concrete lock of `$kind` named `$name`, made by
/// `$client`. Every protocol kind this agent parses has one.
macro_rules! with_kind {
    ($client:expr, $kind:expr, $name:expr, |$lock:ident| $body:expr) => {{
        let client: &redisson_sync::Client = $client;
        match $kind {
            $crate::protocol::Kind::Lock => {
                let $lock = client.lock($name);
                $body
            }
            $crate::protocol::Kind::Fair => {
                let $lock = client.fair_lock($name);
                $body
            }
            $crate::protocol::Kind::Read => {
                let $lock = client.rw_lock($name).read_lock();
                $body
            }
            $crate::protocol::Kind::Write => {
                let $lock = client.rw_lock($name).write_lock();
                $body
            }
            $crate::protocol::Kind::Fenced => {
                let $lock = client.fenced_lock($name);
                $body
            }
            $crate::protocol::Kind::Spin => {
                let $lock = client.spin_lock($name);
                $body
            }
            $crate::protocol::Kind::NonReentrant => {
                let $lock = client.non_reentrant_lock($name);
                $body
            }
            $crate::protocol::Kind::NonReentrantFair => {
                let $lock = client.non_reentrant_fair_lock($name);
                $body
            }
        }
    }};
}
pub(crate) use with_kind;

/// The lock of `kind` named `name`. The `Result` stays for the kinds the protocol may add
/// before the crate has them (`unsupported`).
pub fn any_lock(
    client: &Client,
    kind: Kind,
    name: impl Into<String>,
) -> std::result::Result<Box<dyn DistributedLock>, Failure> {
    Ok(with_kind!(client, kind, name, |lock| Box::new(lock)))
}
