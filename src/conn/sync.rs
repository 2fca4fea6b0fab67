//! Replica sync: lock writes followed by `WAIT` on the master's replicas (Redisson's
//! `checkLockSyncedSlaves`, docs/LAYOUT.md §1.7; see [`SyncReplicas`](crate::config::SyncReplicas)).
//!
//! A synced call goes as a pipeline on one connection, the script (or command) then `WAIT
//! <replicas> <timeout>`, so that `WAIT` counts the acknowledgements of exactly that write.
//! `<replicas>` is what the master reports in `INFO replication` (`connected_slaves`), kept per
//! master for a few seconds; Redisson keeps the same count per master entry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::{RedisResult, Value};

use super::call::{Body, SlotGroup};
use crate::config::Config;

/// How long a master's replica count is trusted before it is read again.
const COUNT_TTL: Duration = Duration::from_secs(5);

/// What replica sync said about one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Synced {
    /// No `WAIT` was sent: replica sync is off, the call is not one Redisson syncs, or the
    /// master has no replicas.
    Skipped,
    /// This many replicas acknowledged the write.
    Acked(u32),
    /// None of the master's `replicas` acknowledged the write within `after`.
    Unacked { replicas: u32, after: Duration },
}

/// The `WAIT` a synced call is sent with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WaitFor {
    pub(super) replicas: u32,
    pub(super) timeout: Duration,
}

/// The reply to a call's `WAIT`.
#[derive(Clone, Debug)]
pub(super) enum WaitReply {
    Acks(u32),
    /// The server refused `WAIT` (`unknown command`, or a replica).
    Refused(redis::RedisError),
}

/// The client's replica sync state: on or off, and the replica counts of the masters.
#[derive(Debug)]
pub(super) struct ReplicaSync {
    on: AtomicBool,
    pub(super) timeout: Duration,
    /// Per renewal group (a cluster slot; one group on a single server): the replica count,
    /// when it was read, and the topology epoch it was read in.
    counts: Mutex<HashMap<SlotGroup, (u32, Instant, u64)>>,
}

impl ReplicaSync {
    pub(super) fn new(config: &Config) -> Self {
        Self {
            on: AtomicBool::new(config.syncs_replicas()),
            timeout: config.replica_sync_timeout,
            counts: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The replica count of `group`'s master, if read recently and in this epoch.
    pub(super) fn known(&self, group: SlotGroup, epoch: u64) -> Option<u32> {
        let counts = self.counts();
        let &(count, at, seen) = counts.get(&group)?;
        (seen == epoch && at.elapsed() < COUNT_TTL).then_some(count)
    }

    pub(super) fn store(&self, group: SlotGroup, count: u32, epoch: u64) {
        self.counts().insert(group, (count, Instant::now(), epoch));
    }

    /// Has `group`'s count read again at its next call (fewer replicas acknowledged than it
    /// said).
    pub(super) fn forget(&self, group: SlotGroup) {
        self.counts().remove(&group);
    }

    /// The server refused `WAIT`: replica sync is off from now on, with one warning (as
    /// Redisson).
    pub(super) fn refused(&self, error: &redis::RedisError) {
        if self.on.swap(false, Ordering::Relaxed) {
            tracing::warn!(%error, "the server refuses WAIT: replica sync is off for this client");
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<SlotGroup, (u32, Instant, u64)>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `connected_slaves` of an `INFO replication` reply.
pub(super) fn connected_replicas(info: &str) -> Option<u32> {
    info.lines()
        .find_map(|line| line.trim().strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Sends `body` then `WAIT` as one pipeline on `conn`. A script unknown to the server
/// (NOSCRIPT: its `WAIT` ran, for nothing) is loaded and the pipeline sent once more.
pub(super) async fn send<C: redis::aio::ConnectionLike + Send>(
    conn: &mut C,
    body: &Body<'_>,
    wait: WaitFor,
) -> RedisResult<(Value, WaitReply)> {
    let mut pipe = redis::pipe();
    pipe.add_command(body.to_cmd());
    add_wait(&mut pipe, wait);
    let replies: Vec<RedisResult<Value>> = pipe.query_async(conn).await?;
    match split(replies) {
        Err(e) if super::script::is_noscript_reply(&e) => {
            let Body::Script(invocation) = body else {
                return Err(e);
            };
            invocation
                .script()
                .load_cmd()
                .query_async::<()>(conn)
                .await?;
            split(pipe.query_async(conn).await?)
        }
        other => other,
    }
}

/// Adds `WAIT` to `pipe`, its error read as a reply (see [`wait_reply`]).
pub(super) fn add_wait(pipe: &mut redis::Pipeline, wait: WaitFor) {
    let timeout_ms = u64::try_from(wait.timeout.as_millis()).unwrap_or(u64::MAX);
    pipe.cmd("WAIT")
        .arg(wait.replicas)
        .arg(timeout_ms)
        .ignore_errors();
}

/// A pipeline's reply to its `WAIT`, the last command.
pub(super) fn wait_reply(reply: Option<RedisResult<Value>>) -> WaitReply {
    match reply {
        Some(Ok(Value::Int(n))) => WaitReply::Acks(u32::try_from(n).unwrap_or(0)),
        Some(Err(e)) => WaitReply::Refused(e),
        other => WaitReply::Refused(redis::RedisError::from((
            redis::ErrorKind::Client,
            "unexpected WAIT reply",
            format!("{other:?}"),
        ))),
    }
}

fn split(replies: Vec<RedisResult<Value>>) -> RedisResult<(Value, WaitReply)> {
    let mut replies = replies.into_iter();
    let value = replies.next().unwrap_or(Ok(Value::Nil))?;
    Ok((value, wait_reply(replies.next())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_connected_replicas() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1\r\n";
        assert_eq!(connected_replicas(info), Some(2));
        assert_eq!(connected_replicas("role:slave\r\n"), None);
    }

    #[test]
    fn counts_expire_with_the_epoch() {
        let sync = ReplicaSync::new(&Config::from_cluster(["redis://127.0.0.1:1"]));
        assert!(sync.enabled());
        let group = SlotGroup(None);
        sync.store(group, 2, 7);
        assert_eq!(sync.known(group, 7), Some(2));
        assert_eq!(
            sync.known(group, 8),
            None,
            "a failover makes the count stale"
        );
        sync.forget(group);
        assert_eq!(sync.known(group, 7), None);
        sync.refused(&redis::RedisError::from((redis::ErrorKind::Client, "x")));
        assert!(!sync.enabled());
    }
}
