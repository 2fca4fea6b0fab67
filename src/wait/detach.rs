//! Futures that finish in the background when their caller drops them.
//!
//! A Redis call that was sent has effects whether or not anyone reads its reply. The caller of
//! an acquire or release awaits a [`Detachable`] directly (no task hop on the normal path); if
//! the caller is dropped or times out before the call completes, the rest of the call moves to
//! a task of the client, which hands the eventual outcome to a `finish` step (for an acquire:
//! undo a grant nobody received). The task runs in the span current when the future was made
//! (the acquire's or release's), so its logs still name the lock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tracing::Instrument;

use crate::future::BoxFuture;
use crate::shared::Shared;

/// A future that, dropped before it completes, completes in a task of the client and passes
/// its output to `finish` (generic, so that making one allocates only the call's box).
pub(crate) struct Detachable<T, G, GF>
where
    T: Send + 'static,
    G: FnOnce(T) -> GF + Send + 'static,
    GF: Future<Output = ()> + Send + 'static,
{
    call: Option<BoxFuture<'static, T>>,
    finish: Option<G>,
    shared: Arc<Shared>,
    /// The span the background task runs in.
    span: tracing::Span,
}

impl<T, G, GF> Detachable<T, G, GF>
where
    T: Send + 'static,
    G: FnOnce(T) -> GF + Send + 'static,
    GF: Future<Output = ()> + Send + 'static,
{
    pub(crate) fn new<F>(shared: &Arc<Shared>, call: F, finish: G) -> Self
    where
        F: Future<Output = T> + Send + 'static,
    {
        Self {
            call: Some(Box::pin(call)),
            finish: Some(finish),
            shared: shared.clone(),
            span: tracing::Span::current(),
        }
    }
}

impl<T, G, GF> Future for Detachable<T, G, GF>
where
    T: Send + 'static,
    G: FnOnce(T) -> GF + Send + 'static + Unpin,
    GF: Future<Output = ()> + Send + 'static,
{
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(call) = self.call.as_mut() else {
            // Completed already; a completed future is not polled again by correct callers.
            return Poll::Pending;
        };
        let output = std::task::ready!(call.as_mut().poll(cx));
        self.call = None;
        self.finish = None;
        Poll::Ready(output)
    }
}

impl<T, G, GF> Drop for Detachable<T, G, GF>
where
    T: Send + 'static,
    G: FnOnce(T) -> GF + Send + 'static,
    GF: Future<Output = ()> + Send + 'static,
{
    fn drop(&mut self) {
        if let (Some(call), Some(finish)) = (self.call.take(), self.finish.take()) {
            let span = std::mem::replace(&mut self.span, tracing::Span::none());
            drop(
                self.shared
                    .tasks
                    .spawn(async move { finish(call.await).await }.instrument(span)),
            );
        }
    }
}

impl<T, G, GF> std::fmt::Debug for Detachable<T, G, GF>
where
    T: Send + 'static,
    G: FnOnce(T) -> GF + Send + 'static,
    GF: Future<Output = ()> + Send + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detachable")
            .field("pending", &self.call.is_some())
            .finish()
    }
}
