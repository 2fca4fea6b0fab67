//! Renewing permits: the permits of one acquisition of a
//! [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) whose leases the client's
//! watchdog keeps renewing while their [`PermitGuard`] lives (`lua/permit_semaphore/renew.lua`,
//! Redisson's `updateLeaseTime` for a batch of acquisitions), so that a slow job keeps its
//! permits and a dead process gives them back one lease after it stopped renewing.

use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio::time::Instant;

use super::common::PermitId;
use super::expirable::{ExpirableAcquire, Inner};
use crate::conn::{Script, ScriptInvocation};
use crate::error::{Error, Result};
use crate::fasthash::NameField;
use crate::layout;
use crate::observe::{self, Tag};
use crate::semaphore::PermitExpirableSemaphore;
use crate::wait;
use crate::watchdog::{BatchArgs, Lease, Loss, Renewal};

/// `lua/permit_semaphore/renew.lua`: the watchdog's batched lease renewal of permits.
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/permit_semaphore/renew.lua")));

/// The shortest lease a renewing acquisition takes: its renewals come every third of it.
const MIN_RENEWED_LEASE: Duration = Duration::from_millis(30);

impl PermitExpirableSemaphore {
    /// Acquires `permits` permits with `lease`, waiting as long as it takes, and keeps
    /// renewing their leases while the returned guard lives: every third of `lease` the
    /// client's watchdog moves their lease end to `lease` from then (Redisson's
    /// `updateLeaseTime`, for the permits of many guards in one script call). Java sees
    /// ordinary permits whose lease ends later; a process that dies stops renewing, and its
    /// permits come back one lease later. See [`PermitGuard`].
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`Error::InvalidArgument`] for a lease under 30 ms
    /// (renewals come every third of it).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire): an attempt in flight when the future is dropped
    /// finishes in a task of the client, which releases the permits it took.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use std::time::Duration;
    ///
    /// let slots = client.permit_expirable_semaphore("render-slots");
    /// // A 10 s lease, renewed while the job runs, however long it takes.
    /// let permit = slots.acquire_renewing(1, Duration::from_secs(10)).await?;
    /// tokio::select! {
    ///     () = permit.lost() => eprintln!("lost the permit: stopping"),
    ///     () = async { /* ... a long job ... */ } => {}
    /// }
    /// permit.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_renewing(&self, permits: u32, lease: Duration) -> Result<PermitGuard> {
        let acquire = self.renewing(permits, lease)?;
        let (ids, sent) = wait::acquire(&self.inner.shared, acquire).await?;
        Ok(PermitGuard::granted(self.inner.clone(), ids, lease, sent))
    }

    /// [`acquire_renewing`](Self::acquire_renewing) with one attempt: `None` when not enough
    /// permits are available.
    ///
    /// # Errors
    ///
    /// As [`acquire_renewing`](Self::acquire_renewing).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_renewing`](Self::acquire_renewing).
    pub async fn try_acquire_renewing(
        &self,
        permits: u32,
        lease: Duration,
    ) -> Result<Option<PermitGuard>> {
        self.try_acquire_renewing_for(permits, Duration::ZERO, lease)
            .await
    }

    /// [`acquire_renewing`](Self::acquire_renewing), waiting at most `wait`: `None` when the
    /// permits did not become available in time.
    ///
    /// # Errors
    ///
    /// As [`acquire_renewing`](Self::acquire_renewing).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_renewing`](Self::acquire_renewing).
    pub async fn try_acquire_renewing_for(
        &self,
        permits: u32,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<PermitGuard>> {
        let acquire = self.renewing(permits, lease)?;
        let granted = wait::try_acquire(&self.inner.shared, acquire, wait).await?;
        Ok(granted.map(|(ids, sent)| PermitGuard::granted(self.inner.clone(), ids, lease, sent)))
    }

    /// The acquisition of renewing permits.
    fn renewing(&self, permits: u32, lease: Duration) -> Result<Arc<ExpirableAcquire>> {
        if lease < MIN_RENEWED_LEASE {
            return Err(Error::InvalidArgument(format!(
                "a renewing lease must be at least {MIN_RENEWED_LEASE:?} (renewals come every \
                 third of it), got {lease:?}"
            )));
        }
        self.acquisition(permits, Some(lease))
    }
}

/// Renews the permits of renewing acquisitions: for each, its semaphore's three keys and its
/// ids (hex, comma-separated, the watched hold's field).
#[derive(Debug)]
struct PermitRenewal;

impl Renewal for PermitRenewal {
    fn kind(&self) -> &'static str {
        "permits"
    }

    fn script(&self) -> &'static Script {
        &RENEW
    }

    fn add(&self, batch: &mut ScriptInvocation<'static>, key: &str, field: &str) {
        batch
            .key(key)
            .key(layout::permit_timeouts(key))
            .key(layout::semaphore_channel(key))
            .arg(field);
    }

    fn batch_args(&self) -> BatchArgs {
        BatchArgs::NowAndVerb
    }
}

static PERMIT_RENEWAL: LazyLock<Arc<dyn Renewal>> = LazyLock::new(|| Arc::new(PermitRenewal));

/// The permits of one renewing acquisition of a
/// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore)
/// ([`acquire_renewing`](crate::PermitExpirableSemaphore::acquire_renewing) and its `try_`
/// forms): ordinary permits with ids and a lease, as Java sees them, whose leases the client's
/// watchdog renews every third of the lease while the guard lives (the watchdog of a lock,
/// for permits: Redisson has none).
///
/// # Validity
///
/// As a [`LockGuard`](crate::LockGuard)'s: the client vouches for the permits until
/// [`valid_until`](Self::valid_until), the send time of the last confirmed acquire or renewal
/// plus the lease; from shortly before it, or as soon as a renewal finds one of the ids gone
/// (released by its id elsewhere, expired, the semaphore deleted), the guard is
/// [lost](Self::is_lost). A partition that keeps every renewal from being confirmed is
/// reported at that instant, before the leases can have ended in Redis.
///
/// # Release on drop
///
/// Dropping the guard stops the renewal at once and releases the permits in a background task
/// of the client (a release that fails transiently goes on until it runs or finds its ids
/// gone); use [`release`](Self::release) when the next step depends on the permits being
/// back. Call [`Client::shutdown`](crate::Client::shutdown) before the process exits.
#[clippy::has_significant_drop]
#[must_use = "if unused the permits will immediately be released"]
pub struct PermitGuard {
    semaphore: Arc<Inner>,
    ids: Vec<PermitId>,
    /// The semaphore's name and the ids as the watchdog's field: hex, comma-separated.
    hold: NameField,
    lease_time: Duration,
    lease: Arc<Lease>,
    /// `false` once the guard gave its permits up (released, forgotten).
    armed: bool,
    /// Counts the hold in the metrics while the guard lives.
    _metric: observe::Hold,
}

impl fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard")
            .field("semaphore", &self.semaphore.name)
            .field("ids", &self.ids)
            .field("lease", &self.lease_time)
            .field("lost", &self.lease.is_lost())
            .finish()
    }
}

impl PermitGuard {
    /// The guard of `ids`, granted by a request sent at `sent` with `lease`: registered with
    /// the watchdog.
    pub(super) fn granted(
        semaphore: Arc<Inner>,
        ids: Vec<PermitId>,
        lease: Duration,
        sent: Instant,
    ) -> Self {
        let field: Arc<str> = ids
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
            .into();
        let shared = &semaphore.shared;
        let tag = Tag::new(
            "permit_semaphore",
            &semaphore.name,
            shared.config.metrics_name_label,
        );
        let hold = NameField::new(semaphore.name.clone(), field);
        let watched =
            shared
                .watchdog
                .register_leased(&PERMIT_RENEWAL, &hold, sent, lease, &tag, None);
        Self {
            _metric: tag.hold(),
            semaphore,
            ids,
            hold,
            lease_time: lease,
            lease: watched,
            armed: true,
        }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.semaphore.name
    }

    /// The ids of the permits.
    pub fn ids(&self) -> &[PermitId] {
        &self.ids
    }

    /// The lease each renewal sets.
    pub fn lease(&self) -> Duration {
        self.lease_time
    }

    /// The instant until which the client vouches for the permits. See
    /// [Validity](Self#validity).
    pub fn valid_until(&self) -> std::time::Instant {
        self.lease.valid_until().into_std()
    }

    /// `true` once the permits are lost (see [Validity](Self#validity)).
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// Resolves when the permits are lost (see [`is_lost`](Self::is_lost)); as
    /// [`LockGuard::lost`](crate::LockGuard::lost), its timer needs the runtime, and
    /// `is_lost` and `valid_until` read the clock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn lost(&self) {
        self.lease.lost().await;
    }

    /// Stops the renewal; `false` when the guard had given its permits up already.
    fn disarm(&mut self) -> bool {
        if !std::mem::take(&mut self.armed) {
            return false;
        }
        self.semaphore
            .shared
            .watchdog
            .unregister(PERMIT_RENEWAL.kind(), &self.hold, &self.lease);
        true
    }

    /// Releases the permits (Redisson's `release(permitsIds)`, all or nothing) and stops their
    /// renewal.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the permits were lost: a renewal had found one gone (nothing
    /// is sent), or the validity ran out (the release is still sent, so permits still there
    /// come back); [`Error::PermitNotHeld`] when one of them is not held any more (nothing
    /// released); [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`] (a transient
    /// failure goes on in the background, as
    /// [`release`](crate::PermitExpirableSemaphore::release)'s), [`Error::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// A dropped call may or may not have released the permits; their renewal is stopped
    /// either way.
    pub async fn release(mut self) -> Result<()> {
        self.disarm();
        let name = self.semaphore.name.to_string();
        let loss = self.lease.loss();
        if loss == Some(Loss::Gone) {
            return Err(Error::LeaseLost { name });
        }
        let released = self.semaphore.release_ids(&self.ids, false).await;
        match (loss, released) {
            // The client could not vouch for them any more: the caller must know.
            (Some(Loss::Expired), Ok(())) => Err(Error::LeaseLost { name }),
            (_, result) => result,
        }
    }

    /// Stops the renewal and keeps the permits: they stay acquired until their lease ends (or
    /// a release of their ids), and their ids are returned.
    pub fn into_ids(mut self) -> Vec<PermitId> {
        self.disarm();
        std::mem::take(&mut self.ids)
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        if !self.disarm() {
            return;
        }
        if self.lease.loss() == Some(Loss::Gone) {
            return;
        }
        let shared = self.semaphore.shared.clone();
        if shared.tasks.is_shut_down() {
            tracing::warn!(
                semaphore = %self.semaphore.name,
                "permit guard dropped after shutdown: the permits stay until their lease ends"
            );
            return;
        }
        let semaphore = self.semaphore.clone();
        let ids = std::mem::take(&mut self.ids);
        drop(shared.tasks.spawn(async move {
            if let Err(e) = semaphore.release_ids(&ids, true).await {
                tracing::warn!(semaphore = %semaphore.name, error = %e, "releasing dropped permits failed");
            }
        }));
    }
}
