//! Critical sections run under a lock: [`WithLockOptions`], and the section runner every
//! `with_lock` shares ([`run_section`]).

use std::future::Future;
use std::time::Duration;

use super::guard::LockGuard;
use crate::error::Error;
use crate::options::LockOptions;
use crate::owner::Owner;

/// Options of a critical section run by `with_lock_options` or `try_with_lock` (for example
/// [`Lock::with_lock_options`](crate::Lock::with_lock_options)): the lease and owner of the
/// acquisition ([`LockOptions`]), and whether the section stops when the lock is lost.
///
/// How long to wait for the lock is not an option: `with_lock_options` waits as long as it
/// takes and returns the section's value; `try_with_lock(wait, ...)` waits at most `wait` and
/// returns `None` (the section not run) when the lock did not come free, as the `try_lock`
/// methods do: contention is not an error.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redisson_sync::{Owner, WithLockOptions};
///
/// let opts = WithLockOptions::new()
///     .lease(Duration::from_secs(10))
///     .owner(Owner::new(7))
///     .stop_on_lost(true);
/// assert_eq!(opts.options().lease_time(), Some(Duration::from_secs(10)));
/// assert!(opts.stops_on_lost());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WithLockOptions {
    lock: LockOptions,
    stop_on_lost: bool,
}

impl WithLockOptions {
    /// The defaults: the watchdog renews the lock while the section runs, the owner is the
    /// current task, and the section runs to its end even if the lock is lost meanwhile.
    pub fn new() -> Self {
        Self::default()
    }

    /// An explicit lease ([`LockOptions::lease`]): the lock expires this long after it is
    /// granted and is never renewed, so a section that outlives it runs without the lock
    /// (combine with [`stop_on_lost`](Self::stop_on_lost)). Must be at least 1 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lock = self.lock.lease(lease);
        self
    }

    /// Acquire for this owner instead of [`Owner::current`] ([`LockOptions::owner`]).
    pub fn owner(mut self, owner: Owner) -> Self {
        self.lock = self.lock.owner(owner);
        self
    }

    /// Replaces the lease and owner with those of `options`.
    pub fn lock_options(mut self, options: LockOptions) -> Self {
        self.lock = options;
        self
    }

    /// With `true`, the section is raced against the guard's lost signal
    /// ([`LockGuard::lost`]): as soon as the hold is lost (the watchdog found the lock gone:
    /// expired, force-unlocked, deleted; or its validity ran out, e.g. an explicit lease or a
    /// partition), the section's future is dropped at its current `.await` and the call
    /// returns [`Error::LeaseLost`]. A section must then be written to be cancellable at any
    /// await point (as any future in a `select!`). Default `false`: the section runs to its
    /// end and the loss is reported by the release ([`Error::LeaseLost`] instead of the
    /// section's value).
    pub fn stop_on_lost(mut self, stop: bool) -> Self {
        self.stop_on_lost = stop;
        self
    }

    /// The lease and owner of the acquisition.
    pub fn options(&self) -> &LockOptions {
        &self.lock
    }

    /// Whether the section stops when the lock is lost (see
    /// [`stop_on_lost`](Self::stop_on_lost)).
    pub fn stops_on_lost(&self) -> bool {
        self.stop_on_lost
    }
}

impl From<LockOptions> for WithLockOptions {
    fn from(options: LockOptions) -> Self {
        Self::new().lock_options(options)
    }
}

/// Runs the section `f` under `guard` and releases it: the body of every `with_lock`.
///
/// - `Ok(v)`: the release is awaited; its error, if any, replaces `v`.
/// - `Err(e)`: the release is awaited; `e` is returned, a release error only logged.
/// - `stop_on_lost` and the hold lost first: the section's future is dropped, the release is
///   awaited (a hold Redis showed gone is not touched), and [`Error::LeaseLost`] returned.
/// - A panic in the section, or this future dropped: `guard` is dropped with it, which
///   schedules the release in the background.
pub(crate) async fn run_section<F, Fut, T, E>(
    guard: LockGuard,
    stop_on_lost: bool,
    f: F,
) -> Result<T, E>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: From<Error>,
{
    let outcome = if stop_on_lost {
        let section = f();
        // Biased towards the loss: a section is never polled (again) once the hold is lost.
        tokio::select! {
            biased;
            () = guard.lost() => None,
            result = section => Some(result),
        }
    } else {
        Some(f().await)
    };
    match outcome {
        Some(Ok(value)) => match guard.unlock().await {
            Ok(()) => Ok(value),
            Err(e) => Err(e.into()),
        },
        Some(Err(e)) => {
            let name = guard.lost_name();
            if let Err(release) = guard.unlock().await {
                tracing::warn!(
                    lock = %name,
                    error = %release,
                    "release after a failed critical section failed; returning the section's error"
                );
            }
            Err(e)
        }
        None => {
            let name = guard.lost_name();
            // Expected to say `LeaseLost` too; a hold still in Redis (validity ran out, not
            // shown gone) is released by it.
            if let Err(release) = guard.unlock().await
                && !release.is_not_held()
            {
                tracing::warn!(lock = %name, error = %release, "release after a lost lease failed");
            }
            Err(Error::LeaseLost { name }.into())
        }
    }
}
