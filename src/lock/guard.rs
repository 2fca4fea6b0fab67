//! The guard every lock kind returns: one hold, released explicitly or on drop without
//! blocking.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::hold::{self, HoldSpec};
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
            &spec.name,
            spec.shared.config.metrics_name_label,
        );
        let (lease, renewal) = match lease_time {
            Some(lease) => (Lease::new(sent, lease, tag.clone()), None),
            None => {
                let renewal = spec.kind.renewal();
                let lease = spec.shared.watchdog.register(
                    &renewal,
                    &spec.name,
                    &spec.field,
                    sent,
                    &tag,
                    Some(owner),
                );
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
            name: &spec.name,
            client_id: &spec.shared.id,
            owner: Some(self.owner),
        }
        .release_span()
    }

    pub(crate) fn token(&self) -> Option<u64> {
        self.token
    }

    pub(crate) fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    pub(crate) fn name(&self) -> &str {
        self.spec.as_ref().map_or("", |s| &s.name)
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
            spec.shared
                .watchdog
                .unregister(kind, &spec.name, &spec.field, &self.lease);
        }
        Some(spec)
    }

    /// Stops counting a hold the client no longer vouches for, in the background.
    fn forget_in_background(spec: Arc<HoldSpec>, lease: Arc<Lease>) {
        let shared = spec.shared.clone();
        drop(shared.tasks.spawn(async move {
            let op = spec.shared.holds.enter(&spec.name, &spec.field, None).await;
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
            let name = spec.name.to_string();
            Self::forget_in_background(spec, lease);
            return Err(Error::LeaseLost { name });
        }
        let shared = spec.shared.clone();
        if let Err(e) = shared.ensure_open() {
            Self::forget_in_background(spec, lease);
            return Err(e);
        }
        let name = spec.name.clone();
        let call = async move { hold::release(&spec, &lease).await };
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
            if let Err(e) = hold::release(&spec, &self.lease).await
                && !e.is_not_held()
            {
                tracing::warn!(lock = %spec.name, error = %e, "undoing a grant failed; it expires with its lease");
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
                lock = %spec.name,
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
                    match hold::release(&spec, &lease).await {
                        Ok(()) => tracing::debug!("released on drop"),
                        Err(e) => {
                            tracing::warn!(lock = %spec.name, error = %e, "release on drop failed");
                        }
                    }
                }
                .instrument(span),
            ),
        );
    }
}

/// A held lock of any kind ([`Lock`](crate::Lock), [`FairLock`](crate::FairLock), either half
/// of an [`RwLock`](crate::RwLock)): one hold of one owner.
///
/// Like tokio's `OwnedMutexGuard`, the guard owns what it needs (`'static`, `Send + Sync`): it
/// can be moved to another task and released there. It does not lock anything in-process.
///
/// # Validity
///
/// The client vouches for the hold until [`valid_until`](Self::valid_until): the send time of
/// the last confirmed acquire or renewal plus the lease (Redis cannot have let the lock expire
/// earlier). The watchdog moves it forward while it renews the lock; an explicit lease ends
/// there. From shortly before that instant (a drift margin of 1 % of the lease plus 2 ms), or
/// as soon as Redis shows the hold gone, the guard is [lost](Self::is_lost): another holder may
/// have the lock. A partition that keeps every renewal from being confirmed is reported at that
/// instant, whatever the network does.
///
/// # Release on drop
///
/// Dropping the guard stops its lease renewal at once and schedules the release in a
/// background task of the client; it returns immediately, never blocks and never panics (also
/// on a thread outside the runtime, and during unwinding; there is no poisoning). The lock
/// becomes free shortly after the drop, not at it: use [`unlock`](Self::unlock) when the next
/// step depends on the lock being free. Call [`Client::shutdown`](crate::Client::shutdown)
/// before the runtime ends, or releases still scheduled are lost and those locks stay held
/// until their lease expires.
#[clippy::has_significant_drop]
#[must_use = "if unused the lock will immediately be released"]
#[derive(Debug)]
pub struct LockGuard {
    held: Held,
    /// Counts the hold in the metrics while the guard lives.
    _hold: observe::Hold,
}

impl LockGuard {
    pub(crate) fn new(held: Held) -> Self {
        let hold = held.tag.hold();
        Self { held, _hold: hold }
    }

    /// The lock's name: its Redis key.
    pub fn name(&self) -> &str {
        self.held.name()
    }

    /// The owner holding the lock through this guard.
    pub fn owner(&self) -> Owner {
        self.held.owner()
    }

    /// The fencing token of this hold: for a [`FencedLock`](crate::FencedLock), the value
    /// of its counter that this acquisition made (every acquisition, re-entries included,
    /// gets a higher one); `None` for the other kinds. Pass it to the protected resource,
    /// which refuses writes with a token lower than one it has seen.
    pub fn token(&self) -> Option<u64> {
        self.held.token()
    }

    /// The explicit lease, or `None` when the watchdog renews the lock.
    pub fn lease(&self) -> Option<Duration> {
        self.held.lease_time()
    }

    /// The instant until which the client vouches for this hold: the send time of the last
    /// confirmed acquire or renewal plus the lease. See [Validity](Self#validity).
    pub fn valid_until(&self) -> std::time::Instant {
        self.held.valid_until()
    }

    /// `true` once the hold is lost: Redis showed it gone (expired, force-unlocked, deleted,
    /// taken over), or no acquire or renewal was confirmed within its lease (see
    /// [Validity](Self#validity)); for an explicit lease, from shortly before it ends.
    pub fn is_lost(&self) -> bool {
        self.held.is_lost()
    }

    /// Resolves when the hold is lost (see [`is_lost`](Self::is_lost)): at the latest shortly
    /// before [`valid_until`](Self::valid_until), unless a renewal moves that forward.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// # async fn work() {}
    /// let guard = client.lock("job").lock().await?;
    /// tokio::select! {
    ///     () = work() => guard.unlock().await?,
    ///     () = guard.lost() => eprintln!("lock lost, stopping"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lost(&self) {
        self.held.lost().await;
    }

    /// Releases this hold (Redisson's `unlock()`): decrements the hold count, and on the last
    /// hold deletes the key and publishes the unlock message.
    ///
    /// When the connection breaks before the reply (so whether the release ran is unknown),
    /// the client finds out: it cuts the request's connection off at the server so that the
    /// request cannot run later, reads the hold count, and sends the release once more if it
    /// had not run. A count one lower is taken as the release having run; when that count is
    /// 0 it cannot be told from the hold having vanished meanwhile (a Redis restart without
    /// its data), and the release is reported a success: the lock is not held by this owner
    /// either way.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the hold was lost: Redis had shown it gone (Redis is not
    /// touched), or its validity had run out (the release is still sent, so a hold still there
    /// is freed); [`Error::NotHeld`] when the owner no longer holds it (lease expired,
    /// force-unlocked, taken over); [`Error::Redis`], [`Error::Timeout`] (after two command
    /// timeouts; the release then goes on in the background); [`Error::Shutdown`] after
    /// [`Client::shutdown`](crate::Client::shutdown) (the lock then expires with its lease).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release completes even if this future is dropped (it then finishes in a
    /// task of the client); only its result is lost.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// let guard = client.lock("order:42").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn unlock(self) -> Result<()> {
        self.held.unlock().await
    }

    /// Stops renewal and keeps the lock without releasing it: it stays held until its lease
    /// expires (like tokio's `SemaphorePermit::forget`).
    pub fn forget(self) {
        self.held.forget();
    }
}
