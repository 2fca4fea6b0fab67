//! The runtime a blocking client owns, and the one place a blocking call blocks
//! ([`Inner::block`]): a current-thread Tokio runtime driven by a thread of its own, on which
//! the async client is built; a caller runs its call on its own thread with
//! `Handle::block_on`, after the check that no runtime is current there.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::thread::{JoinHandle, ThreadId};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::client::Client;
use crate::error::{Error, Result};

thread_local! {
    /// How many [`allow_in_runtime`] scopes are open on this thread.
    static ALLOWED: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f` with the blocking API allowed on this thread although a Tokio runtime is current:
/// for a closure of `tokio::task::spawn_blocking` or `tokio::task::block_in_place`, where Tokio
/// lets a thread block but cannot say so (calls there are refused by default, since Tokio
/// offers no way to tell them from an async task).
///
/// Only the refusal is lifted: inside an async task or a `block_on` of another runtime, Tokio
/// itself still refuses to block and **panics** ("Cannot start a runtime from within a
/// runtime"). Scopes nest; the permission ends with `f`, also when it panics.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use redisson_sync::blocking;
///
/// let client = blocking::Client::open("redis://127.0.0.1:6379")?;
/// let done = tokio::task::spawn_blocking(move || {
///     blocking::allow_in_runtime(|| {
///         let guard = client.lock("report").lock()?;
///         // ... sync work under the lock ...
///         guard.unlock()?;
///         client.shutdown()
///     })
/// })
/// .await?;
/// done?;
/// # Ok(())
/// # }
/// ```
pub fn allow_in_runtime<R>(f: impl FnOnce() -> R) -> R {
    struct Scope;
    impl Drop for Scope {
        fn drop(&mut self) {
            ALLOWED.with(|n| n.set(n.get() - 1));
        }
    }
    ALLOWED.with(|n| n.set(n.get() + 1));
    let _scope = Scope;
    f()
}

/// `Ok` when the calling thread may block: no Tokio runtime is current on it, or an
/// [`allow_in_runtime`] scope is open. `operation` names the call in the error.
pub(super) fn may_block(operation: &'static str) -> Result<()> {
    if Handle::try_current().is_err() || ALLOWED.with(Cell::get) > 0 {
        Ok(())
    } else {
        Err(Error::InAsyncContext { operation })
    }
}

/// What every blocking handle shares: the async client and the runtime it lives on. Dropped
/// with the last handle (client, primitive or guard): it then shuts the client down (so the
/// releases of dropped guards complete) and stops the runtime's thread.
pub(super) struct Inner {
    pub(super) client: Client,
    runtime: Runtime,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("blocking::Client")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl Inner {
    pub(super) fn new(client: Client, runtime: Runtime) -> Self {
        Self { client, runtime }
    }

    /// Runs `fut` to completion on the calling thread, the runtime's thread driving its I/O
    /// and timers; refused ([`Error::InAsyncContext`]) where the thread must not block.
    pub(super) fn block<F: Future>(&self, operation: &'static str, fut: F) -> Result<F::Output> {
        self.runtime.block(operation, fut)
    }

    /// [`block`](Self::block) for a fallible call.
    pub(super) fn call<T, F>(&self, operation: &'static str, fut: F) -> Result<T>
    where
        F: Future<Output = Result<T>>,
    {
        self.block(operation, fut)?
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.client.is_shut_down() {
            return;
        }
        if self.runtime.may_block_here() {
            // The last handle: complete the releases of dropped guards, as `shutdown` does.
            self.runtime.handle.block_on(self.client.shutdown());
        } else {
            tracing::warn!(
                client = %self.client.id(),
                "the last blocking::Client handle was dropped inside async code without \
                 shutdown(): releases still scheduled may not complete"
            );
        }
    }
}

/// A current-thread runtime driven by a thread of its own until it is told to stop.
pub(super) struct Runtime {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    thread_id: ThreadId,
}

impl Runtime {
    /// Starts the runtime on a thread named `name`.
    pub(super) fn start(name: String) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name(name.clone())
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            // Drives the I/O and timers of every call, and runs the client's tasks (its
            // connections, pub/sub, watchdog, releases of dropped guards), until stopped.
            runtime.block_on(async move {
                let _ = stopped.await;
            });
            // Dropped here, on its own thread: the tasks still there are dropped with it.
            drop(runtime);
        })?;
        Ok(Self {
            handle,
            stop: Some(stop),
            thread_id: thread.thread().id(),
            thread: Some(thread),
        })
    }

    /// The runtime's handle, for the async client's builder.
    pub(super) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Runs `fut` on the calling thread, refused where the thread must not block.
    pub(super) fn block<F: Future>(&self, operation: &'static str, fut: F) -> Result<F::Output> {
        may_block(operation)?;
        Ok(self.handle.block_on(fut))
    }

    /// `true` when this thread may wait for the runtime: not its own thread, and no runtime
    /// current (or an [`allow_in_runtime`] scope).
    fn may_block_here(&self) -> bool {
        std::thread::current().id() != self.thread_id && may_block("drop").is_ok()
    }
}

impl Drop for Runtime {
    /// Stops the runtime's thread, and waits for it where this thread may block.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take()
            && self.may_block_here()
        {
            let _ = thread.join();
        }
    }
}
