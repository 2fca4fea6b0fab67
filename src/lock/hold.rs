//! One hold of a lock: how it is asked for (an [`Acquire`] for the wait engine), how it is
//! released, and how an acquire or release of unknown outcome is resolved.
//!
//! Every acquire and release runs as one operation on the client's record of its holds
//! ([`crate::holds`]): it carries a fresh request id whose fence key (docs/LAYOUT.md §12) stops
//! the request once the client gives up on its reply, and an acquire carries the hold count
//! the client knows, so Redis grants only on top of the holds the client has guards for.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Script, Value};
use tokio::time::Instant;

use super::guard::Held;
use super::kind::{AcquireReply, AcquireRequest, LockKind, ReleaseReply, ReleaseRequest};
use crate::conn::Call;
use crate::error::{Error, Result};
use crate::holds::Op;
use crate::owner::Owner;
use crate::shared::Shared;
use crate::wait::{Acquire, Backoff, BoxFuture, Step, Strategy};
use crate::watchdog::{Lease, Loss};

/// `lua/hold/resolve.lua`: fences a request and reads the holder field's count.
static RESOLVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/hold/resolve.lua")));

/// How often an acquire grant may disagree with the client's count before the attempt gives up
/// for now (each disagreement reports older holds lost and retries at once).
const MAX_CORRECTIONS: usize = 3;

/// Everything needed to acquire or release one hold; runs on its own, detached from callers.
#[derive(Clone, Debug)]
pub(crate) struct HoldSpec {
    pub(crate) shared: Arc<Shared>,
    /// The primitive the hold belongs to: its scripts and names.
    pub(crate) kind: Arc<dyn LockKind>,
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    /// The lease of the hold: explicit, or the watchdog timeout.
    pub(crate) lease_ms: u64,
    /// `redisson_sync_fence:{N}:`, the prefix of this lock's fence keys.
    pub(crate) fence_prefix: Arc<str>,
}

impl HoldSpec {
    fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// A fresh fence key, for one request.
    fn fence(&self) -> String {
        let mut fence = String::with_capacity(self.fence_prefix.len() + 32);
        fence.push_str(&self.fence_prefix);
        self.shared.push_request_id(&mut fence);
        fence
    }

    /// How long a fence must outlive the request it stops: twice the lease, at least a minute.
    fn fence_ttl_ms(&self) -> u64 {
        self.lease_ms.saturating_mul(2).max(60_000)
    }

    /// How long an unknown outcome is retried before it is given up (the hold then expires
    /// with its lease if it was granted).
    fn resolve_limit(&self) -> Duration {
        (self.lease() + self.shared.config.command_timeout) * 2
    }

    /// Fences `fence` and reads the holder field's count, in one script, retrying transient
    /// errors (bounded; at most once more after a shutdown). `proof` is a count that proves
    /// the request ran (it runs only once): the fence is removed again then, having nothing
    /// left to stop.
    async fn fence_and_count(&self, fence: &str, proof: Option<u32>) -> Result<u32> {
        let started = Instant::now();
        let mut backoff =
            Backoff::exponential(Duration::from_millis(10), Duration::from_millis(500), 2);
        loop {
            let mut invocation = RESOLVE.prepare_invoke();
            invocation
                .key(&*self.name)
                .key(fence)
                .arg(&*self.field)
                .arg(self.fence_ttl_ms())
                .arg(proof.map_or(-1, i64::from));
            let call = Call::write("resolve", &self.name, &invocation).idempotent();
            match self.shared.conn.call(call).await {
                Ok(Value::Int(n)) => return Ok(u32::try_from(n).unwrap_or(0)),
                Ok(other) => return Err(super::kind::unexpected("hold/resolve.lua", &other)),
                Err(e)
                    if e.is_transient()
                        && !self.shared.tasks.is_shut_down()
                        && started.elapsed() < self.resolve_limit() =>
                {
                    tracing::debug!(lock = %self.name, error = %e, "resolving an unknown outcome; retrying");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// One owner's acquisition of one lock, as the wait engine drives it.
#[derive(Debug)]
pub(crate) struct LockAcquire {
    pub(crate) spec: HoldSpec,
    pub(crate) owner: Owner,
    /// The explicit lease, or `None`: the watchdog renews the hold.
    pub(crate) explicit_lease: Option<Duration>,
}

/// An acquire whose reply never came: its slot and fence, kept until resolved.
#[derive(Debug)]
pub(crate) struct PendingAcquire {
    op: Op,
    fence: String,
    sent: Instant,
}

impl LockAcquire {
    /// The guard of a hold granted by a request sent at `sent`; ends `op`.
    fn grant(&self, op: Op, sent: Instant) -> Held {
        let tainted = op.tainted();
        let held = Held::granted(&self.spec, self.owner, self.explicit_lease, sent);
        op.granted(held.lease());
        if tainted {
            // The count it was granted on cannot be trusted: do not vouch for it.
            held.lease().raise(Loss::Expired);
        }
        held
    }

    /// A grant arrived too late to be used (its lease is spent or about to be): gives it back
    /// and reports the lock busy, so the caller tries again within its wait.
    async fn too_late(&self, held: Held) -> Step<Held, PendingAcquire> {
        tracing::warn!(lock = %self.spec.name, "a grant arrived after its lease; releasing it");
        held.discard().await;
        Step::Busy(Some(Duration::ZERO))
    }
}

impl Acquire for LockAcquire {
    type Grant = Held;
    type Pending = PendingAcquire;

    fn strategy(&self) -> Strategy {
        self.spec.kind.strategy(&self.spec)
    }

    fn attempt(
        &self,
        wait: Option<Duration>,
        limit: Duration,
    ) -> BoxFuture<'_, Step<Held, PendingAcquire>> {
        Box::pin(async move {
            let spec = &self.spec;
            let mut op = spec
                .shared
                .holds
                .enter(&spec.name, &spec.field, Some(Instant::now() + limit))
                .await;
            for _ in 0..MAX_CORRECTIONS {
                let fence = spec.fence();
                let request = AcquireRequest {
                    hold: spec,
                    wait,
                    limit,
                    fence: &fence,
                    expected: op.held(),
                    sent: AtomicBool::new(false),
                };
                let sent = Instant::now();
                match spec.kind.acquire(&request).await {
                    Ok(AcquireReply::Acquired) => {
                        let held = self.grant(op, sent);
                        if Instant::now() >= held.lease().deadline() {
                            return self.too_late(held).await;
                        }
                        return Step::Granted(held);
                    }
                    Ok(AcquireReply::Held(ttl)) => {
                        op.unchanged();
                        // -1: no expiry, -2: no hint.
                        let hint = u64::try_from(ttl).ok().map(Duration::from_millis);
                        return Step::Busy(hint);
                    }
                    Ok(AcquireReply::Count(actual)) => op.correct(actual),
                    Ok(AcquireReply::Fenced) => {
                        op.unchanged();
                        return Step::Failed(Error::UnexpectedReply {
                            script: "acquire",
                            detail: "a fresh request found its fence".into(),
                        });
                    }
                    Err(e) if e.outcome_unknown() && request.was_sent() => {
                        return Step::Unknown(PendingAcquire { op, fence, sent }, e);
                    }
                    Err(e) => {
                        op.unchanged();
                        return Step::Failed(e);
                    }
                }
            }
            op.unchanged();
            Step::Busy(Some(Duration::ZERO))
        })
    }

    fn resolve(&self, pending: PendingAcquire) -> BoxFuture<'_, Result<Option<Held>>> {
        Box::pin(async move {
            let PendingAcquire {
                mut op,
                fence,
                sent,
            } = pending;
            // On error `op` is dropped unresolved: the slot is marked tainted.
            let count = self
                .spec
                .fence_and_count(&fence, Some(op.held() + 1))
                .await?;
            if count == op.held() + 1 {
                // The request ran: it granted exactly on top of the holds the client counts.
                let held = self.grant(op, sent);
                if Instant::now() >= held.lease().deadline() {
                    held.discard().await;
                    return Ok(None);
                }
                return Ok(Some(held));
            }
            // It did not run, and cannot any more.
            op.correct(count);
            op.unchanged();
            Ok(None)
        })
    }

    fn undo(&self, grant: Held) -> BoxFuture<'_, ()> {
        Box::pin(grant.discard())
    }

    fn leaves_trace(&self) -> bool {
        self.spec.kind.queues_waiters()
    }

    fn give_up(&self, wait: Option<Duration>) -> Option<BoxFuture<'_, Result<()>>> {
        self.spec.kind.give_up(&self.spec, wait)
    }
}

/// Releases one hold (whose guard has `lease`), resolving an unknown outcome: the release is
/// fenced and the count read; if it did not run it is sent once more.
pub(crate) async fn release(spec: &HoldSpec, lease: &Arc<Lease>) -> Result<()> {
    let until = Instant::now() + spec.shared.config.command_timeout;
    let mut op = spec
        .shared
        .holds
        .enter(&spec.name, &spec.field, Some(until))
        .await;
    let mut sends = 0;
    loop {
        sends += 1;
        let fence = spec.fence();
        let request = ReleaseRequest {
            hold: spec,
            fence: &fence,
            sent: AtomicBool::new(false),
        };
        let reply = spec.kind.release(&request).await;
        match reply {
            Ok(ReleaseReply::Released) => {
                op.released(lease);
                return Ok(());
            }
            Ok(ReleaseReply::NotHeld) => {
                op.correct(0);
                op.unchanged();
                return Err(Error::NotHeld {
                    name: spec.name.to_string(),
                    holder: spec.field.to_string(),
                });
            }
            Ok(ReleaseReply::Fenced) => {
                op.unchanged();
                return Err(Error::UnexpectedReply {
                    script: "release",
                    detail: "a fresh request found its fence".into(),
                });
            }
            Err(e) if e.outcome_unknown() && request.was_sent() => {
                // On error `op` is dropped unresolved: the slot is marked tainted.
                let before = op.held();
                // A count one lower proves the release ran only while holds remain: a count of
                // 0 may also be the lease running out, and then the release may still land
                // later, on a newer hold of this owner; its fence must stay for that.
                let proof = (before >= 2).then(|| before - 1);
                let count = spec.fence_and_count(&fence, proof).await?;
                if count + 1 == before {
                    op.released(lease);
                    return Ok(());
                }
                if count == before && sends < 2 {
                    tracing::debug!(lock = %spec.name, error = %e, "a release did not run; sending it again");
                    continue;
                }
                // Gone, or still not run after a second try: report what Redis says.
                op.correct(count);
                op.unchanged();
                return if count < before { Ok(()) } else { Err(e) };
            }
            Err(e) => {
                op.unchanged();
                return Err(e);
            }
        }
    }
}
