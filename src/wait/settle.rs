//! Settling a request of unknown outcome (docs/LAYOUT.md §12 (b)): a request that was sent
//! but got no reply is cut off at the server, so whatever of it Redis has not run it never
//! runs, and then the evidence of whether it ran is read. Every primitive reads its own
//! evidence (a hold count, a token, a grant marker, a permit id); the cut-off and the bounded
//! retries are here, once.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::{Cmd, Value};
use tokio::time::Instant;

use super::{Backoff, Detachable};
use crate::conn::{Call, Delivery};
use crate::error::{Error, Result};
use crate::shared::Shared;

/// Cuts off the connection a request of unknown outcome went out on (`Conn::cut_off`),
/// warning when the server does not allow it: the request may then still take effect.
pub(crate) async fn cut_off(shared: &Shared, delivery: &Delivery, key: &str) -> Result<()> {
    if !shared.conn.cut_off(delivery, key).await? {
        tracing::warn!(
            key,
            "a request of unknown outcome could not be cut off; it may still take effect"
        );
    }
    Ok(())
}

/// Cuts the request off, then reads `cmd` (the evidence, on `key`'s server), retrying
/// transient errors of either step for up to `patience` (at most once more after a
/// shutdown). What it reads is final: the request ran before the cut-off, or never will.
pub(crate) async fn settle(
    shared: &Shared,
    delivery: &Delivery,
    key: &str,
    cmd: &Cmd,
    patience: Duration,
) -> Result<Value> {
    settle_with(shared, delivery, key, patience, || {
        shared.conn.call(Call::read("resolve", key, cmd))
    })
    .await
}

/// [`settle`], reading the evidence with `read` (a primitive's own query: a script, a
/// comparison) instead of one command.
pub(crate) async fn settle_with<T, F, Fut>(
    shared: &Shared,
    delivery: &Delivery,
    key: &str,
    patience: Duration,
    mut read: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let started = Instant::now();
    let mut backoff = Backoff::transient();
    let mut cut = false;
    loop {
        let attempt = async {
            if !cut {
                cut_off(shared, delivery, key).await?;
                cut = true;
            }
            read().await
        };
        match attempt.await {
            Err(e)
                if e.is_transient()
                    && !shared.tasks.is_shut_down()
                    && started.elapsed() < patience =>
            {
                tracing::debug!(key, error = %e, "resolving an unknown outcome; retrying");
                tokio::time::sleep(backoff.next_delay()).await;
            }
            result => return result,
        }
    }
}

/// Awaits `settling` (a release of unknown outcome being settled) for at most `patience`;
/// past it the settling goes on in a task of the client, which logs a failure, and the caller
/// gets `Timeout` for `operation` (the settling's own time plus the first wait,
/// `2 × patience`).
pub(crate) async fn release_in_time<F>(
    shared: &Arc<Shared>,
    name: Arc<str>,
    operation: &'static str,
    patience: Duration,
    settling: F,
) -> Result<()>
where
    F: Future<Output = Result<()>> + Send + 'static,
{
    let detached = Detachable::new(shared, settling, move |r: Result<()>| async move {
        if let Err(e) = r {
            tracing::warn!(name = %name, error = %e, "a release of unknown outcome could not be settled");
        }
    });
    match tokio::time::timeout(patience, detached).await {
        Ok(result) => result,
        Err(_) => Err(Error::Timeout {
            operation,
            after: patience * 2,
        }),
    }
}
