//! One hold of a lock: how it is asked for (an [`Acquire`] for the wait engine), how it is
//! released, and how an acquire or release of unknown outcome is resolved.
//!
//! Every acquire and release runs as one operation on the client's record of its holds
//! ([`crate::holds`]), and an acquire carries the hold count the client knows, so Redis grants
//! only on top of the holds the client has guards for (docs/LAYOUT.md §12). When a request's
//! reply never comes, the client cuts off the connection it went out on at the server
//! ([`Conn::cut_off`](crate::conn::Conn::cut_off): whatever of it Redis has not run by then,
//! it never runs), then reads the holder field's count: one more than before (acquire) or one
//! less (release) means the request ran.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use super::guard::Held;
use super::kind::{AcquireReply, AcquireRequest, LockKind, ReleaseReply, ReleaseRequest};
use crate::conn::Delivery;
use crate::error::{Error, Result};
use crate::holds::Op;
use crate::observe::Subject;
use crate::owner::Owner;
use crate::shared::Shared;
use crate::wait::{self, Acquire, BoxFuture, Step, Strategy};
use crate::watchdog::{Lease, Loss};

/// How often an acquire grant may disagree with the client's count before the attempt gives up
/// for now (each disagreement reports older holds lost and retries at once).
const MAX_CORRECTIONS: usize = 3;

/// Everything needed to acquire or release one hold; runs on its own, detached from callers.
#[derive(Debug)]
pub(crate) struct HoldSpec {
    pub(crate) shared: Arc<Shared>,
    /// The primitive the hold belongs to: its scripts and names.
    pub(crate) kind: Arc<dyn LockKind>,
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    /// The lease of the hold: explicit, or the watchdog timeout.
    pub(crate) lease_ms: u64,
}

impl HoldSpec {
    fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// How long an unknown outcome is retried before it is given up (the hold then expires
    /// with its lease if it was granted).
    fn resolve_limit(&self) -> Duration {
        (self.lease() + self.shared.config.command_timeout) * 2
    }

    /// Cuts off the connection a request of unknown outcome went out on, then reads the holder
    /// field's count, retrying transient errors (bounded; at most once more after a shutdown).
    /// The count read after the cut-off is final: the request ran before it, or never will.
    async fn cut_off_and_count(&self, delivery: &Delivery) -> Result<u32> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(&*self.name).arg(&*self.field);
        match wait::settle(
            &self.shared,
            delivery,
            &self.name,
            &cmd,
            self.resolve_limit(),
        )
        .await
        {
            Ok(Value::Nil) => Ok(0),
            Ok(value) => redis::from_redis_value::<u32>(value.clone())
                .map_err(|_| super::kind::unexpected("HGET", &value)),
            Err(e) if e.is_wrong_type() => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// One owner's acquisition of one lock, as the wait engine drives it.
#[derive(Debug)]
pub(crate) struct LockAcquire {
    pub(crate) spec: Arc<HoldSpec>,
    pub(crate) owner: Owner,
    /// The explicit lease, or `None`: the watchdog renews the hold.
    pub(crate) explicit_lease: Option<Duration>,
}

/// An acquire whose reply never came: its slot and where it went, kept until resolved.
#[derive(Debug)]
pub(crate) struct PendingAcquire {
    op: Op,
    delivery: Delivery,
    sent: Instant,
}

impl LockAcquire {
    /// The guard of a hold granted by a request sent at `sent` (with its fencing token, for
    /// the fenced lock); ends `op`.
    fn grant(&self, op: Op, sent: Instant, token: Option<u64>) -> Held {
        let tainted = op.tainted();
        let held = Held::granted(&self.spec, self.owner, self.explicit_lease, sent, token);
        op.granted(held.lease());
        if tainted {
            // The count it was granted on cannot be trusted: do not vouch for it.
            held.lease().raise(Loss::Expired);
        }
        held
    }

    /// The guard of a grant, unless it arrived too late to be used (its lease is spent or
    /// about to be): then it is given back and `None` returned.
    async fn grant_in_time(&self, op: Op, sent: Instant, token: Option<u64>) -> Option<Held> {
        let held = self.grant(op, sent, token);
        if Instant::now() < held.lease().deadline() {
            return Some(held);
        }
        tracing::warn!(lock = %self.spec.name, "a grant arrived after its lease; releasing it");
        held.discard().await;
        None
    }
}

impl Acquire for LockAcquire {
    type Grant = Held;
    type Pending = PendingAcquire;

    fn subject(&self) -> Subject<'_> {
        Subject {
            kind: self.spec.kind.metric_kind(),
            name: &self.spec.name,
            client_id: &self.spec.shared.id,
            owner: Some(self.owner),
        }
    }

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
                .enter(&spec.name, &spec.field, Some(limit))
                .await;
            for _ in 0..MAX_CORRECTIONS {
                if !spec.kind.reentrant() && op.held() > 0 {
                    op.unchanged();
                    return Step::Failed(Error::NotReentrant {
                        name: spec.name.to_string(),
                        holder: spec.field.to_string(),
                    });
                }
                let request = AcquireRequest {
                    hold: spec,
                    wait,
                    limit,
                    expected: op.held(),
                    sent: Delivery::default(),
                };
                let sent = Instant::now();
                let reply = spec.kind.acquire(&request).await;
                let token = match reply {
                    Ok(AcquireReply::Fenced(token)) => Some(token),
                    _ => None,
                };
                match reply {
                    Ok(AcquireReply::Acquired | AcquireReply::Fenced(_)) => {
                        return match self.grant_in_time(op, sent, token).await {
                            Some(held) => Step::Granted(held),
                            // Busy, so the caller tries again within its wait.
                            None => Step::Busy(Some(Duration::ZERO)),
                        };
                    }
                    Ok(AcquireReply::Held(ttl)) => {
                        op.unchanged();
                        // -1: no expiry, -2: no hint.
                        let hint = u64::try_from(ttl).ok().map(Duration::from_millis);
                        return Step::Busy(hint);
                    }
                    Ok(AcquireReply::Count(actual)) => op.correct(actual),
                    Err(e) if e.outcome_unknown() && request.sent.was_sent() => {
                        let delivery = request.sent;
                        return Step::Unknown(PendingAcquire { op, delivery, sent }, e);
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
                delivery,
                sent,
            } = pending;
            // On error `op` is dropped unresolved: the slot is marked tainted.
            let count = self.spec.cut_off_and_count(&delivery).await?;
            if count == op.held() + 1 {
                // The request ran: it granted exactly on top of the holds the client counts.
                let token = match self.spec.kind.granted_token(&self.spec).await {
                    Ok(token) => token,
                    Err(e) => {
                        // The hold is there, but its token cannot be read: give it back.
                        let held = self.grant(op, sent, None);
                        held.discard().await;
                        return Err(e);
                    }
                };
                return Ok(self.grant_in_time(op, sent, token).await);
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
/// cut off and the count read; if it did not run it is sent once more. Settling an unknown
/// outcome is awaited for at most the command timeout; it then goes on in a task of the client
/// (the owner's next operation on the lock waits for it) and this returns `Timeout`.
pub(crate) async fn release(spec: &Arc<HoldSpec>, lease: &Arc<Lease>) -> Result<()> {
    let patience = spec.shared.config.command_timeout;
    let op = spec
        .shared
        .holds
        .enter(&spec.name, &spec.field, Some(patience))
        .await;
    let request = ReleaseRequest {
        hold: spec,
        sent: Delivery::default(),
    };
    match spec.kind.release(&request).await {
        Err(e) if e.outcome_unknown() && request.sent.was_sent() => {
            let settle = settle_release(spec.clone(), lease.clone(), op, request.sent, e);
            wait::release_in_time(&spec.shared, spec.name.clone(), patience, settle).await
        }
        reply => released(spec, lease, op, reply),
    }
}

/// Ends a release operation with its reply.
fn released(
    spec: &HoldSpec,
    lease: &Arc<Lease>,
    mut op: Op,
    reply: Result<ReleaseReply>,
) -> Result<()> {
    match reply {
        Ok(ReleaseReply::Released) => {
            op.released(lease);
            Ok(())
        }
        Ok(ReleaseReply::NotHeld) => {
            op.correct(0);
            op.unchanged();
            Err(Error::NotHeld {
                name: spec.name.to_string(),
                holder: spec.field.to_string(),
            })
        }
        Err(e) => {
            op.unchanged();
            Err(e)
        }
    }
}

/// Settles a release whose reply never came: cuts it off, reads the count; sends the release
/// once more if it had not run.
async fn settle_release(
    spec: Arc<HoldSpec>,
    lease: Arc<Lease>,
    mut op: Op,
    mut delivery: Delivery,
    mut error: Error,
) -> Result<()> {
    for sends in 1..=2 {
        // On error `op` is dropped unresolved: the slot is marked tainted.
        let before = op.held();
        let count = spec.cut_off_and_count(&delivery).await?;
        if count + 1 == before {
            op.released(&lease);
            return Ok(());
        }
        if count == before && sends < 2 {
            tracing::debug!(lock = %spec.name, error = %error, "a release did not run; sending it again");
            let request = ReleaseRequest {
                hold: &spec,
                sent: Delivery::default(),
            };
            match spec.kind.release(&request).await {
                Err(e) if e.outcome_unknown() && request.sent.was_sent() => {
                    delivery = request.sent;
                    error = e;
                    continue;
                }
                reply => return released(&spec, &lease, op, reply),
            }
        }
        // Gone, or still not run after a second try: report what Redis says.
        op.correct(count);
        op.unchanged();
        return if count < before { Ok(()) } else { Err(error) };
    }
    op.unchanged();
    Err(error)
}
