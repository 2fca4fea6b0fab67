//! Releasing one hold, and settling a release of unknown outcome: the release is cut off at
//! the server and the holder's count read; if it did not run it is sent once more.

use std::sync::Arc;

use super::kind::{HoldSpec, ReleaseReply, ReleaseRequest};
use super::record::Op;
use crate::conn::Delivery;
use crate::error::{Error, Result};
use crate::wait;
use crate::watchdog::Lease;

/// Releases one hold (whose guard has `lease`), resolving an unknown outcome. Settling an
/// unknown outcome is awaited for at most the command timeout; it then goes on in a task of
/// the client (the holder's next operation on the lock waits for it) and this returns
/// `Timeout`.
pub(crate) async fn release(spec: &Arc<HoldSpec>, lease: &Arc<Lease>) -> Result<()> {
    let patience = spec.shared.config.command_timeout;
    let op = spec.record.enter(&spec.id, Some(patience)).await;
    let request = ReleaseRequest {
        hold: spec,
        sent: Delivery::default(),
    };
    match spec.kind.release(&request).await {
        Err(e) if e.outcome_unknown() && request.sent.was_sent() => {
            let settle = settle_release(spec.clone(), lease.clone(), op, request.sent, e);
            // Boxed: rare, and kilobytes large; inline, every release's future would carry it.
            Box::pin(wait::release_in_time(
                &spec.shared,
                spec.id.name.clone(),
                "unlock",
                patience,
                settle,
            ))
            .await
        }
        reply => released(spec, lease, op, reply),
    }
}

/// Ends a release operation with its reply. A release Redis refused (out of memory, a
/// permission) left the hold in Redis, but its guard is spent and renews it no more: the
/// client stops counting it, as after `forget`, so it ends with its lease, and the owner's
/// next acquire asks Redis (a non-reentrant kind would otherwise refuse it for good as a
/// re-entry).
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
                name: spec.id.name.to_string(),
                holder: spec.id.field.to_string(),
            })
        }
        Err(e) => {
            op.forgotten(lease);
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
        let before = op.held();
        let count = match spec.cut_off_and_read(&delivery).await {
            Ok(evidence) => evidence.count,
            // Redis could not be reached to settle it (bounded retries): whatever the release
            // did, its guard is spent, so the hold is no longer counted (as after `forget`):
            // if it is still in Redis it ends with its lease, and the owner's next acquire
            // asks Redis instead of being refused as a re-entry for good.
            Err(e) => {
                op.forgotten(&lease);
                return Err(e);
            }
        };
        if count + 1 == before {
            op.released(&lease);
            return Ok(());
        }
        if count == before && sends < 2 {
            tracing::debug!(lock = %spec.id.name, error = %error, "a release did not run; sending it again");
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
        // Gone, or still not run after a second try: report what Redis says. A hold still
        // there is no guard's any more (see `released`).
        op.correct(count);
        if count < before {
            op.unchanged();
            return Ok(());
        }
        op.forgotten(&lease);
        return Err(error);
    }
    op.unchanged();
    Err(error)
}
