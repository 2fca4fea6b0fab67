//! The guard machinery shared by every lock kind: what a hold is, how it is released
//! explicitly, and how it is released on drop without blocking (STYLE.md §7.9).

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::detach::Detachable;
use crate::error::{Error, Result};
use crate::owner::Owner;
use crate::watchdog::{LostSignal, Watched};

/// Which primitive a hold belongs to, with what its release script needs beyond the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A reentrant lock ([`crate::Lock`]), publishing on this unlock channel.
    Lock { channel: Arc<str> },
}

/// Everything needed to release one hold; runs on its own, detached from the guard.
#[derive(Clone, Debug)]
pub(crate) struct Release {
    pub(crate) client: Client,
    pub(crate) kind: Kind,
    pub(crate) name: Arc<str>,
    pub(crate) field: String,
    /// Lease re-applied to the key when other holds of the same owner remain.
    pub(crate) lease_ms: u64,
}

impl Release {
    /// Runs the release script once.
    pub(crate) async fn run(self) -> Result<()> {
        match &self.kind {
            Kind::Lock { channel } => crate::lock::release(&self, channel).await,
        }
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
