//! The client's background work: one runtime handle, one shutdown signal, one tracker.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

/// Spawns the client's background work on the runtime captured at build time (so a guard
/// dropped on any thread can still schedule its release), and knows about shutdown.
pub(crate) struct Tasks {
    handle: Handle,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Set before `shutdown` is cancelled: what [`is_shut_down`](Self::is_shut_down) reads on
    /// every call (the token's own `is_cancelled` takes a mutex shared by every thread).
    shut: AtomicBool,
}

impl fmt::Debug for Tasks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tasks")
            .field("tracked", &self.tracker.len())
            .field("shut_down", &self.is_shut_down())
            .finish()
    }
}

impl Tasks {
    pub(crate) fn new(handle: Handle) -> Self {
        Self {
            handle,
            tracker: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            shut: AtomicBool::new(false),
        }
    }

    /// Spawns work that [`drain`](Self::drain) waits for: releases, undos, cleanups.
    pub(crate) fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn_on(task, &self.handle)
    }

    /// Spawns a service of the client (pub/sub transport, watchdog) that runs until shutdown.
    pub(crate) fn spawn_service<F>(&self, service: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let shutdown = self.shutdown.clone();
        drop(self.handle.spawn(async move {
            tokio::select! {
                () = service => {}
                () = shutdown.cancelled() => {}
            }
        }));
    }

    /// A token that keeps [`drain`](Self::drain) waiting until it is dropped: for work that
    /// must still reach Redis during a shutdown.
    pub(crate) fn token(&self) -> TaskTrackerToken {
        self.tracker.token()
    }

    /// How many tracked tasks (releases, undos, cleanups) have not finished yet.
    pub(crate) fn pending(&self) -> usize {
        self.tracker.len()
    }

    pub(crate) fn shut_down(&self) {
        self.shut.store(true, Ordering::Release);
        self.shutdown.cancel();
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut.load(Ordering::Acquire)
    }

    /// Resolves when the client is shut down.
    pub(crate) async fn shutdown_signal(&self) {
        self.shutdown.cancelled().await;
    }

    /// Waits for every tracked task; new ones may no longer keep it waiting after this starts.
    pub(crate) async fn drain(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }
}
