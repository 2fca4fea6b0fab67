//! One hold, owned by a guard ([`Held`]): registered with the watchdog or leased, released
//! explicitly or on drop without blocking, given back when nobody received it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::kind::HoldSpec;
use super::release::release;
use crate::error::{Error, Result};
use crate::observe::{self, Subject, Tag};
use crate::owner::Owner;
use crate::wait::Detachable;
use crate::watchdog::{Lease, Loss};

/// One hold of a lock, owned by a guard. Dropping it releases the hold in the background.
#[derive(Debug)]
pub(crate) struct Held {
    /// `None` once the hold was given up (released, forgotten).
    spec: Option<Arc<HoldSpec>>,
    owner: Owner,
    /// The explicit lease, or `None`: the watchdog renews the hold.
    lease_time: Option<Duration>,
    /// Until when the client vouches for the hold, and whether it is lost.
    lease: Arc<Lease>,
    /// The renewal kind registered with the watchdog, if the watchdog renews the hold.
    renewal: Option<&'static str>,
    /// The fencing token of the grant (the fenced lock).
    token: Option<u64>,
    /// The metric labels of the lock.
    tag: Tag,
}

impl Held {
    /// A hold granted by a request sent at `sent`: registered with the watchdog when it has no
    /// explicit lease, otherwise valid until `sent + lease`.
    pub(crate) fn granted(
        spec: &Arc<HoldSpec>,
        owner: Owner,
        lease_time: Option<Duration>,
        sent: Instant,
        token: Option<u64>,
    ) -> Self {
        let tag = Tag::new(
            spec.kind.metric_kind(),
            &spec.id.name,
            spec.shared.config.metrics_name_label,
        );
        let (lease, renewal) = match lease_time {
            Some(lease) => (Lease::new(sent, lease, tag.clone()), None),
            None => {
                let renewal = spec.kind.renewal();
                let lease =
                    spec.shared
                        .watchdog
                        .register(&renewal, &spec.id, sent, &tag, Some(owner));
                (lease, Some(renewal.kind()))
            }
        };
        Self {
            spec: Some(spec.clone()),
            owner,
            lease_time,
            lease,
            renewal,
            token,
            tag,
        }
    }

    /// The span of a release of this hold.
    fn release_span(&self, spec: &HoldSpec) -> tracing::Span {
        Subject {
            kind: spec.kind.metric_kind(),
            name: &spec.id.name,
            client_id: &spec.shared.id,
            owner: Some(self.owner),
        }
        .release_span()
    }

    /// The fencing token the grant drew, for the kinds that draw one.
    pub(crate) fn token(&self) -> Option<u64> {
        self.token
    }

    /// The holder as Redis stores it: the hash field, or a token lock's value.
    pub(crate) fn holder(&self) -> &str {
        self.spec.as_ref().map_or("", |s| &s.id.field)
    }

    /// Counts this hold in the metrics while the returned value lives.
    pub(crate) fn metric(&self) -> observe::Hold {
        self.tag.hold()
    }

    pub(crate) fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    pub(crate) fn name(&self) -> &str {
        self.spec.as_ref().map_or("", |s| &s.id.name)
    }

    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }

    pub(crate) fn lease_time(&self) -> Option<Duration> {
        self.lease_time
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    pub(crate) async fn lost(&self) {
        self.lease.lost().await;
    }

    pub(crate) fn valid_until(&self) -> std::time::Instant {
        self.lease.valid_until().into_std()
    }

    /// Stops renewal and takes the hold out, so `Drop` does nothing more: the one "consume
    /// without drop" path of `unlock`, `forget` and `discard`.
    fn disarm(&mut self) -> Option<Arc<HoldSpec>> {
        let spec = self.spec.take()?;
        if let Some(kind) = self.renewal.take() {
            spec.shared.watchdog.unregister(kind, &spec.id, &self.lease);
        }
        Some(spec)
    }

    /// Stops counting a hold the client no longer vouches for, in the background.
    /// At once when no operation of the same holder is in flight, so the owner's next
    /// acquire already finds the hold uncounted.
    fn forget_in_background(spec: Arc<HoldSpec>, lease: Arc<Lease>) {
        if spec.record.try_forget(&spec.id, &lease) {
            return;
        }
        let shared = spec.shared.clone();
        drop(shared.tasks.spawn(async move {
            let op = spec.record.enter(&spec.id, None).await;
            op.forgotten(&lease);
        }));
    }

    /// Releases the hold and reports the outcome, in a `release` span. The release completes
    /// even if this future is dropped: it then finishes in a task of the client.
    pub(crate) async fn unlock(mut self) -> Result<()> {
        let Some(spec) = self.disarm() else {
            return Ok(());
        };
        let span = self.release_span(&spec);
        self.release(spec).instrument(span).await
    }

    async fn release(&self, spec: Arc<HoldSpec>) -> Result<()> {
        let lease = self.lease.clone();
        let loss = lease.loss();
        if loss == Some(Loss::Gone) {
            // Redis said it is gone: nothing to release.
            let name = spec.id.name.to_string();
            Self::forget_in_background(spec, lease);
            return Err(Error::LeaseLost { name });
        }
        let shared = spec.shared.clone();
        if let Err(e) = shared.ensure_open() {
            Self::forget_in_background(spec, lease);
            return Err(e);
        }
        let name = spec.id.name.clone();
        let call = async move { release(&spec, &lease).await };
        // Awaited here; finished in the background if this future is dropped.
        let result = Detachable::new(&shared, call, {
            let name = name.clone();
            move |result: Result<()>| async move {
                if let Err(e) = result {
                    tracing::warn!(lock = %name, error = %e, "release failed after its caller left");
                }
            }
        })
        .await;
        match &result {
            Ok(()) => tracing::debug!("released"),
            Err(e) => tracing::debug!(error = %e, "release failed"),
        }
        match (loss, result) {
            // The client could not vouch for the hold any more: even if the release found it
            // still held (and freed it), the caller must know it may have been shared.
            (Some(Loss::Expired), Ok(())) => Err(Error::LeaseLost {
                name: name.to_string(),
            }),
            (_, result) => result,
        }
    }

    /// Gives back a hold nobody will use (a grant that came too late, or that its caller never
    /// received); errors are logged.
    pub(crate) async fn discard(mut self) {
        let Some(spec) = self.disarm() else {
            return;
        };
        let span = self.release_span(&spec);
        async {
            tracing::debug!("undoing a grant nobody received");
            if let Err(e) = release(&spec, &self.lease).await
                && !e.is_not_held()
            {
                tracing::warn!(lock = %spec.id.name, error = %e, "undoing a grant failed; it expires with its lease");
            }
        }
        .instrument(span)
        .await;
    }

    /// Stops renewal and keeps the lock until its lease expires.
    pub(crate) fn forget(mut self) {
        if let Some(spec) = self.disarm() {
            Self::forget_in_background(spec, self.lease.clone());
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(spec) = self.disarm() else {
            return;
        };
        let lease = self.lease.clone();
        if lease.loss() == Some(Loss::Gone) {
            Self::forget_in_background(spec, lease);
            return;
        }
        if spec.shared.tasks.is_shut_down() {
            tracing::warn!(
                lock = %spec.id.name,
                "guard dropped after shutdown: the lock stays until its lease expires"
            );
            return;
        }
        // Never blocks and never panics, also on a thread outside the runtime: the task is
        // spawned through the runtime handle captured when the client was built.
        let shared = spec.shared.clone();
        let span = self.release_span(&spec);
        drop(
            shared.tasks.spawn(
                async move {
                    match release(&spec, &lease).await {
                        Ok(()) => tracing::debug!("released on drop"),
                        Err(e) => {
                            tracing::warn!(lock = %spec.id.name, error = %e, "release on drop failed");
                        }
                    }
                }
                .instrument(span),
            ),
        );
    }
}
