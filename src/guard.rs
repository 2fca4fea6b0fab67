//! The guard machinery shared by every lock kind: what a hold is, how it is released
//! explicitly, and how it is released on drop without blocking (STYLE.md §7.9).

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::detach::Detachable;
use crate::error::{Error, Result};
use crate::kind::LockKind;
use crate::owner::Owner;
use crate::watchdog::{LostSignal, Watched};

/// Everything needed to release one hold; runs on its own, detached from the guard.
#[derive(Clone, Debug)]
pub(crate) struct Release {
    pub(crate) client: Client,
    /// The primitive the hold belongs to: its scripts and names.
    pub(crate) kind: Arc<dyn LockKind>,
    pub(crate) name: Arc<str>,
    pub(crate) field: String,
    /// Lease of the hold, re-applied to the key when other holds of the same owner remain.
    pub(crate) lease_ms: u64,
}

impl Release {
    /// Runs the release script once.
    pub(crate) async fn run(self) -> Result<()> {
        self.kind.release(&self).await
    }
}

/// One hold of a lock, owned by a guard. Dropping it releases the hold in the background.
#[derive(Debug)]
pub(crate) struct Held {
    release: Option<Release>,
    owner: Owner,
    lease: Option<Duration>,
    lost: Arc<LostSignal>,
    /// Set when the watchdog renews this hold.
    watched: Option<Watched>,
}

impl Held {
    /// Wraps a hold that was just granted; `renew` registers it with the watchdog.
    pub(crate) fn new(
        release: Release,
        owner: Owner,
        lease: Option<Duration>,
        renew: bool,
    ) -> Self {
        let (watched, lost) = if renew {
            let watched = Watched {
                key: release.name.to_string(),
                field: release.field.clone(),
                renewal: release.kind.renewal(&release),
            };
            let lost = release.client.inner().watchdog.register(watched.clone());
            (Some(watched), lost)
        } else {
            (None, LostSignal::new())
        };
        Self {
            release: Some(release),
            owner,
            lease,
            lost,
            watched,
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.release.as_ref().map_or("", |r| &r.name)
    }

    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }

    pub(crate) fn lease(&self) -> Option<Duration> {
        self.lease
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.is_raised()
    }

    pub(crate) async fn lost(&self) {
        self.lost.raised().await;
    }

    /// Stops renewal and takes the release out, so `Drop` does nothing more. This is the one
    /// "consume without drop" path used by `unlock` and `forget`.
    fn disarm(&mut self) -> Option<Release> {
        let release = self.release.take()?;
        if let Some(watched) = self.watched.take() {
            release
                .client
                .inner()
                .watchdog
                .unregister(&watched, &self.lost);
        }
        Some(release)
    }

    /// Releases the hold and reports the outcome. The release completes even if this future is
    /// dropped: it then finishes in a task of the client.
    pub(crate) async fn unlock(mut self) -> Result<()> {
        let Some(release) = self.disarm() else {
            return Ok(());
        };
        if self.lost.is_raised() {
            return Err(Error::LeaseLost {
                name: release.name.to_string(),
            });
        }
        let client = release.client.clone();
        client.ensure_open()?;
        let name = release.name.clone();
        // Awaited here; finished in the background if this future is dropped.
        let call = async move { release.run().await };
        Detachable::new(&client, call, move |result: Result<()>| async move {
            if let Err(e) = result {
                tracing::warn!(lock = %name, error = %e, "release failed after its caller left");
            }
        })
        .await
    }

    /// Stops renewal and keeps the lock until its lease expires.
    pub(crate) fn forget(mut self) {
        let _ = self.disarm();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(release) = self.disarm() else {
            return;
        };
        if self.lost.is_raised() {
            return;
        }
        let client = release.client.clone();
        if client.is_shut_down() {
            tracing::warn!(
                lock = %release.name,
                "guard dropped after shutdown: the lock stays until its lease expires"
            );
            return;
        }
        // Never blocks and never panics, also on a thread outside the runtime: the task is
        // spawned through the runtime handle captured when the client was built.
        drop(client.spawn(async move {
            let name = release.name.clone();
            if let Err(e) = release.run().await {
                tracing::warn!(lock = %name, error = %e, "release on drop failed");
            }
        }));
    }
}

/// A held lock of any kind ([`Lock`](crate::Lock), [`FairLock`](crate::FairLock), either half
/// of an [`RwLock`](crate::RwLock)): one hold of one owner.
///
/// Like tokio's `OwnedMutexGuard`, the guard owns what it needs (`'static`, `Send + Sync`): it
/// can be moved to another task and released there. It does not lock anything in-process.
///
/// # Release on drop
///
/// Dropping the guard stops its lease renewal at once and schedules the release in a
/// background task of the client; it returns immediately, never blocks and never panics (also
/// on a thread outside the runtime, and during unwinding; there is no poisoning). The lock
/// becomes free shortly after the drop, not at it: use [`unlock`](Self::unlock) when the next
/// step depends on the lock being free. Call [`Client::shutdown`] before the runtime ends, or
/// releases still scheduled are lost and those locks stay held until their lease expires.
#[clippy::has_significant_drop]
#[must_use = "if unused the lock will immediately be released"]
#[derive(Debug)]
pub struct LockGuard {
    held: Held,
}

impl LockGuard {
    pub(crate) fn new(held: Held) -> Self {
        Self { held }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.held.name()
    }

    /// The owner holding the lock through this guard.
    pub fn owner(&self) -> Owner {
        self.held.owner()
    }

    /// The explicit lease, or `None` when the watchdog renews the lock.
    pub fn lease(&self) -> Option<Duration> {
        self.held.lease()
    }

    /// `true` once the watchdog found the lock gone (expired during a stall, force-unlocked,
    /// deleted). Locks with an explicit lease are not watched and never report lost.
    pub fn is_lost(&self) -> bool {
        self.held.is_lost()
    }

    /// Resolves when the watchdog finds the lock lost; pends forever for an explicit lease.
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
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the watchdog had found the lock lost (Redis is not touched);
    /// [`Error::NotHeld`] when the owner no longer holds it (lease expired, force-unlocked,
    /// taken over); [`Error::Redis`], [`Error::Timeout`]; [`Error::Shutdown`] after
    /// [`Client::shutdown`] (the lock then expires with its lease).
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
