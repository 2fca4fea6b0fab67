//! One owner's acquisition of one hold, as the wait engine drives it ([`HoldAcquire`]), and how
//! an acquire of unknown outcome is resolved.
//!
//! Every attempt runs as one operation on the client's record of its holds
//! ([`Record`](super::record::Record)) and carries the hold count the client knows, so Redis
//! grants only on top of the holds the client has guards for (docs/LAYOUT.md §12). When an
//! attempt's reply never comes, the client cuts off the connection it went out on at the
//! server ([`Conn::cut_off`](crate::conn::Conn::cut_off): whatever of it Redis has not run by
//! then, it never runs), then reads the holder's count ([`HoldKind::read_holds`]): one more
//! than before means the request ran.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::held::Held;
use super::kind::{AcquireReply, AcquireRequest, HoldKind, HoldSpec, ReleaseRequest};
use super::record::Op;
use crate::conn::{Delivery, Synced};
use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::observe::Subject;
use crate::owner::Owner;
use crate::wait::{Acquire, LateGrant, Step, Strategy};
use crate::watchdog::Loss;

/// How often an acquire grant may disagree with the client's count before the attempt gives up
/// for now (each disagreement reports older holds lost and retries at once).
const MAX_CORRECTIONS: usize = 3;

/// One owner's acquisition of one hold.
#[derive(Debug)]
pub(crate) struct HoldAcquire {
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

impl HoldAcquire {
    /// The hold granted by a request sent at `sent` (with the fencing token it drew, for the
    /// kinds that draw one); ends `op`.
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

    /// The hold of a grant, unless it arrived too late to be used (its lease is spent or
    /// about to be): then it is given back, and how late it was returned.
    async fn grant_in_time(
        &self,
        op: Op,
        sent: Instant,
        token: Option<u64>,
    ) -> Result<Held, LateGrant> {
        let held = self.grant(op, sent, token);
        let now = Instant::now();
        if now < held.lease().deadline() {
            return Ok(held);
        }
        let late = LateGrant {
            latency: now.saturating_duration_since(sent),
            lease: self.spec.lease(),
        };
        tracing::debug!(lock = %self.spec.id.name, latency = ?late.latency, lease = ?late.lease, "a grant arrived after its lease; releasing it");
        // Boxed: rare, and a release's future is large.
        Box::pin(held.discard()).await;
        Err(late)
    }

    /// `Error::NotReentrant` for this holder.
    fn not_reentrant(&self) -> Error {
        Error::NotReentrant {
            name: self.spec.id.name.to_string(),
            holder: self.spec.id.field.to_string(),
        }
    }

    /// Gives back a grant no replica acknowledged (one hold: a re-entry keeps the holds it
    /// had), as Redisson's `handleNoSync` does, and says so.
    async fn unsynced(&self, replicas: u32, after: Duration) -> Error {
        let spec = &self.spec;
        let release = ReleaseRequest {
            hold: spec,
            sent: Delivery::default(),
        };
        if let Err(e) = spec.kind.release(&release).await {
            // Its lease ends it: a hold that nobody renews.
            tracing::warn!(name = %spec.id.name, error = %e, "could not release an acquire that no replica acknowledged; its lease will end it");
        }
        Error::ReplicasNotSynced {
            operation: "acquire",
            name: spec.id.name.to_string(),
            replicas,
            after,
        }
    }
}

impl Acquire for HoldAcquire {
    type Grant = Held;
    type Pending = PendingAcquire;

    fn subject(&self) -> Subject<'_> {
        Subject {
            kind: self.spec.kind.metric_kind(),
            name: &self.spec.id.name,
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
        contended: bool,
    ) -> BoxFuture<'_, Step<Held, PendingAcquire>> {
        Box::pin(async move {
            let spec = &self.spec;
            let kind: &dyn HoldKind = &*spec.kind;
            let mut op = spec.record.enter(&spec.id, Some(limit)).await;
            for _ in 0..MAX_CORRECTIONS {
                if op.held() >= kind.max_holds() {
                    op.unchanged();
                    return Step::Refused(self.not_reentrant());
                }
                let request = AcquireRequest {
                    hold: spec,
                    wait,
                    limit,
                    contended,
                    expected: op.held(),
                    sent: Delivery::default(),
                };
                let sent = Instant::now();
                match kind.acquire(&request).await {
                    Ok((AcquireReply::Granted { .. }, Synced::Unacked { replicas, after })) => {
                        op.unchanged();
                        return Step::Failed(Box::pin(self.unsynced(replicas, after)).await);
                    }
                    Ok((AcquireReply::Granted { token }, _)) => {
                        return match self.grant_in_time(op, sent, token).await {
                            Ok(held) => Step::Granted(held),
                            // Given back; the engine tries again, a few times in a row.
                            Err(late) => Step::Late(late),
                        };
                    }
                    Ok((AcquireReply::Held(ttl), _)) => {
                        op.unchanged();
                        // -1: no expiry, -2: no hint.
                        let hint = u64::try_from(ttl).ok().map(Duration::from_millis);
                        return Step::Busy(hint);
                    }
                    Ok((AcquireReply::Count(actual), _)) if actual > op.held() => {
                        if actual >= kind.max_holds() {
                            // Redis shows this holder holding all it may, and the client has no
                            // guard for it: a hold nobody here can release (a release a
                            // failover lost, a grant whose outcome could not be resolved that
                            // ran after all, another process writing the same holder). Not a
                            // re-entry: busy, as with another holder's hold, until its lease
                            // ends (it is never renewed), and not counted.
                            op.unchanged();
                            return Step::Busy(Some(spec.shared.config.recheck_interval));
                        }
                        op.correct(actual);
                    }
                    Ok((AcquireReply::Count(actual), _)) => op.correct(actual),
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
            let evidence = self.spec.cut_off_and_read(&delivery).await?;
            if evidence.count == op.held() + 1 {
                // The request ran: it granted exactly on top of the holds the client counts.
                // Too late to be used, it was given back: tried again as not applied (no reply
                // came, so there is no latency to count it by).
                return Ok(self.grant_in_time(op, sent, evidence.token).await.ok());
            }
            // It did not run, and cannot any more.
            op.correct(evidence.count);
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

    /// Only for a kind that yields, and only when this owner holds none of it: an owner that
    /// holds the lock and re-enters must never wait for a release that only it can make.
    fn yields_to_parked(&self) -> bool {
        let spec = &self.spec;
        spec.kind.yields_to_parked() && spec.record.holds_now(&spec.id) == 0
    }

    fn give_up(&self, wait: Option<Duration>) -> Option<BoxFuture<'_, Result<()>>> {
        self.spec.kind.give_up(&self.spec, wait)
    }
}
