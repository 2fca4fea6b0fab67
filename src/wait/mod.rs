//! The wait engine: one way to wait for any primitive (docs/LAYOUT.md §1.10).
//!
//! A primitive describes one acquisition as an [`Acquire`]: an attempt either grants (with a
//! value of the primitive's type: a lock hold, a fencing token, permit ids) or finds the
//! primitive busy (with a sleep hint). The engine runs attempts until one grants, the wait
//! runs out or an error ends it, and waits between them by a [`Strategy`]: messages on a
//! channel with a wake policy (subscribe, then attempt again, then sleep until a message or
//! the hint), or back-off polling. tokio's `Mutex`, `RwLock` and `Semaphore` as thin layers
//! over one `batch_semaphore` are the model: the locks are one user of this engine.
//!
//! What it guarantees for every primitive:
//!
//! - **a grant is never lost**: an attempt in flight when the caller leaves finishes in a task
//!   of the client, which gives the grant back ([`Acquire::undo`]); an attempt whose outcome is
//!   unknown (no reply) is resolved ([`Acquire::resolve`]) before the next one, or in that task;
//! - **a waiter that leaves cleans up**: when its wait runs out, its future is dropped, an error
//!   ends it or the client shuts down, the primitive's [`Acquire::give_up`] runs;
//! - **transient errors do not end a wait**: `BUSY`, `LOADING`, a dropped connection and the
//!   like are retried with back-off within the wait;
//! - **bounded**: a wait with a deadline returns within it plus [`ATTEMPT_GRACE`].

mod backoff;
mod detach;
mod settle;

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::observe::{self, Acquisition, Subject, Tag};
use crate::pubsub::WakePolicy;
use crate::shared::Shared;

pub(crate) use backoff::{BACKGROUND_RETRIES, Backoff};
pub(crate) use detach::{BoxFuture, Detachable};
pub(crate) use settle::{cut_off, release_in_time, settle};

/// How long an attempt still in flight at the end of a wait may take to answer before the
/// call gives up on it (its grant, if any, is then undone).
pub(crate) const ATTEMPT_GRACE: Duration = Duration::from_millis(100);

/// A waiter that is not its channel's re-checker and has no hint re-checks on its own after
/// this many re-check intervals (the re-checker role covers lost messages well before).
const PARKED_BACKSTOP: u32 = 30;

/// The shortest sleep between two attempts of a waiter.
const MIN_SLEEP: Duration = Duration::from_millis(1);

/// What one attempt did.
#[derive(Debug)]
pub(crate) enum Step<G, P> {
    /// Granted, with the primitive's value.
    Granted(G),
    /// Not available now; come back after at most the hint (`None`: no hint).
    Busy(Option<Duration>),
    /// Sent, but no reply came: whether it took effect is unknown until
    /// [`Acquire::resolve`] finds out from `P`, which also keeps whatever the attempt holds
    /// meanwhile.
    Unknown(P, Error),
    /// Failed without taking effect.
    Failed(Error),
}

/// One primitive's acquisition, as the engine drives it.
pub(crate) trait Acquire: Send + Sync + 'static {
    /// What a grant hands back.
    type Grant: Send + 'static;
    /// What an attempt of unknown outcome keeps until it is resolved.
    type Pending: Send + 'static;

    /// What the acquisition's metrics and spans carry: the primitive's kind (its metrics
    /// label, see [`observe`]), name, client and owner.
    fn subject(&self) -> Subject<'_>;

    /// How a waiter waits between attempts (asked only when the first attempt found the
    /// primitive busy).
    fn strategy(&self) -> Strategy;

    /// Makes one attempt. `wait` is the caller's whole wait (`Some(ZERO)`: a single attempt,
    /// `None`: no deadline); `limit` bounds the wait for its reply.
    fn attempt(
        &self,
        wait: Option<Duration>,
        limit: Duration,
    ) -> BoxFuture<'_, Step<Self::Grant, Self::Pending>>;

    /// Finds out whether an attempt of unknown outcome took effect, making sure it cannot
    /// take effect any more: `Some(grant)` if it did.
    fn resolve(&self, pending: Self::Pending) -> BoxFuture<'_, Result<Option<Self::Grant>>>;

    /// Gives back a grant nobody received.
    fn undo(&self, grant: Self::Grant) -> BoxFuture<'_, ()>;

    /// `true` when a waiting attempt may leave a trace in Redis (a queue entry) that
    /// [`give_up`](Self::give_up) cleans up.
    fn leaves_trace(&self) -> bool {
        false
    }

    /// Cleans up when the waiter leaves without a grant. `None`: nothing to clean up.
    fn give_up(&self, _wait: Option<Duration>) -> Option<BoxFuture<'_, Result<()>>> {
        None
    }
}

/// How a waiter waits between attempts.
#[derive(Debug)]
pub(crate) enum Strategy {
    /// Subscribe to `channel`; sleep until a message wakes the waiter (per `policy`) or its
    /// hint runs out; one waiter per channel and client also re-checks every
    /// `recheck_interval`.
    PubSub { channel: String, policy: WakePolicy },
    /// Poll, sleeping by a back-off between attempts (Redisson's spin lock).
    Backoff(Backoff),
}

/// Acquires through `acq`: `wait` = `None` waits for ever, `Some(ZERO)` makes one attempt
/// (retried once if it was resolved as not applied), `Some(d)` waits at most `d` (a `d` too
/// long for the clock counts as no deadline).
///
/// It runs in an `acquire` span and records the acquisition's metrics ([`observe`]).
pub(crate) async fn acquire<A: Acquire>(
    shared: &Arc<Shared>,
    acq: Arc<A>,
    wait: Option<Duration>,
) -> Result<Option<A::Grant>> {
    let subject = acq.subject();
    let span = subject.acquire_span(wait);
    let tag = Tag::new(subject.kind, subject.name, shared.config.metrics_name_label);
    let acquisition = Acquisition::start(tag.clone());
    let result = acquire_in_span(shared, acq, wait, tag)
        .instrument(span.clone())
        .await;
    observe::acquisition_ended(acquisition, &span, &result);
    result
}

async fn acquire_in_span<A: Acquire>(
    shared: &Arc<Shared>,
    acq: Arc<A>,
    wait: Option<Duration>,
    tag: Tag,
) -> Result<Option<A::Grant>> {
    shared.ensure_open()?;
    let single = wait == Some(Duration::ZERO);
    let waiter = Waiter {
        deadline: wait.and_then(|w| Instant::now().checked_add(w)),
        shared: shared.clone(),
        acq,
        wait,
        single,
        tag,
    };
    // From the first waiting attempt on, the waiter may leave a trace (a queue entry) that
    // must be cleaned up if it leaves without a grant.
    let give_up = (!single).then(|| GiveUp::new(&waiter));

    let mut retried = false;
    loop {
        match waiter.attempt(false).await {
            Attempted::Granted(g) => return GiveUp::disarm(give_up, Some(g)),
            Attempted::Busy(_) => break,
            Attempted::Unresolved if single && !retried => retried = true,
            Attempted::Unresolved => break,
            Attempted::GaveUp => return GiveUp::finish(give_up, &waiter).await,
            // BUSY proves the script did not run; a waiting call retries it within its wait.
            Attempted::Failed(e) if !single && e.server_busy() => break,
            // A grant no replica acknowledged was given back: tried again within the wait.
            Attempted::Failed(Error::ReplicasNotSynced { .. }) if !single => break,
            // Refused by the client before anything was sent: nothing to clean up.
            Attempted::Failed(e @ Error::NotReentrant { .. }) => {
                GiveUp::disarm(give_up, None)?;
                return Err(e);
            }
            Attempted::Failed(e) => return GiveUp::fail(give_up, e),
        }
    }
    if single {
        return Ok(None);
    }
    let _waiting = waiter.tag.waiting();
    let result = match waiter.acq.strategy() {
        Strategy::PubSub { channel, policy } => waiter.by_messages(&channel, policy).await,
        Strategy::Backoff(backoff) => waiter.by_backoff(backoff).await,
    };
    match result {
        Ok(Some(g)) => GiveUp::disarm(give_up, Some(g)),
        Ok(None) => GiveUp::finish(give_up, &waiter).await,
        Err(e) => GiveUp::fail(give_up, e),
    }
}

/// Errors a waiter retries (with back-off) instead of returning: Redis said "later" and ran
/// nothing, the connection dropped or was refused (a restart), or no replica acknowledged a
/// grant, which was given back (replicas resyncing after a failover; Redisson retries the
/// acquire too). A timeout is not retried: Redis is stalled or unreachable, and the caller
/// learns it after one command timeout.
fn retry_while_waiting(e: &Error) -> bool {
    e.server_busy()
        || e.connection_dropped()
        || matches!(e, Error::Redis(r) if r.is_connection_refusal())
        || matches!(e, Error::ReplicasNotSynced { .. })
}

/// How many grants in a row no replica acknowledged: a waiter tries again after the first
/// [`UNSYNCED_RETRIES`] (replicas resyncing after a failover catch up within seconds), then
/// returns the error, as Redisson's `retryAttempts` (3) does, rather than waiting for ever on
/// replicas that are gone.
#[derive(Default)]
struct Unsynced(u32);

/// See [`Unsynced`].
const UNSYNCED_RETRIES: u32 = 3;

impl Unsynced {
    /// Counts one more; `true` once the retries are spent.
    fn give_up(&mut self) -> bool {
        self.0 += 1;
        self.0 > UNSYNCED_RETRIES
    }
}

/// What one attempt came to, resolution included.
enum Attempted<G> {
    Granted(G),
    Busy(Option<Duration>),
    /// Its outcome was unknown, and it turned out not to have taken effect.
    Unresolved,
    /// The deadline passed while the attempt was in flight; it was abandoned.
    GaveUp,
    Failed(Error),
}

/// One waiter: the caller of one acquisition.
struct Waiter<A: Acquire> {
    shared: Arc<Shared>,
    acq: Arc<A>,
    wait: Option<Duration>,
    deadline: Option<Instant>,
    single: bool,
    /// The acquisition's metric labels.
    tag: Tag,
}

impl<A: Acquire> Waiter<A> {
    fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    fn command_timeout(&self) -> Duration {
        self.shared.config.command_timeout
    }

    /// How long the caller waits for one attempt (or one resolution): up to its deadline plus
    /// the grace; one attempt without a deadline: the command timeout.
    fn patience(&self, contended: bool) -> Duration {
        match self.remaining() {
            Some(remaining) if !remaining.is_zero() || contended => {
                remaining + ATTEMPT_GRACE.min(self.command_timeout())
            }
            _ => self.command_timeout(),
        }
    }

    /// Runs one attempt so that a grant is never lost: it is awaited here, and if this future
    /// is dropped or gives up before the reply, the attempt finishes in a task of the client,
    /// which undoes a grant (resolving an unknown outcome first) and runs the give-up cleanup
    /// if the waiter may have left a trace.
    async fn attempt(&self, contended: bool) -> Attempted<A::Grant> {
        if let Err(e) = self.shared.ensure_open() {
            return Attempted::Failed(e);
        }
        let acq = self.acq.clone();
        let (wait, limit) = (self.wait, self.command_timeout());
        let call = async move { acq.attempt(wait, limit).await };
        let finish = self.finish();
        let detached = Detachable::new(&self.shared, call, finish);
        // Without a deadline the attempt's own calls bound it (each by the command timeout);
        // with one, the caller waits up to the deadline plus the grace.
        let patience = (self.deadline.is_some() && !self.single).then(|| self.patience(contended));
        let step = match patience {
            None => Ok(detached.await),
            Some(patience) => tokio::time::timeout(patience, detached).await,
        };
        let step = match step {
            Ok(step) => step,
            // Past the deadline of a wait that saw the primitive busy: "not acquired".
            Err(_) if contended && self.deadline.is_some() => return Attempted::GaveUp,
            Err(_) => {
                return Attempted::Failed(Error::Timeout {
                    operation: "acquire",
                    after: patience.unwrap_or_default(),
                });
            }
        };
        match step {
            Step::Granted(g) => Attempted::Granted(g),
            Step::Busy(hint) => Attempted::Busy(hint),
            Step::Failed(e) => Attempted::Failed(e),
            // Redis did not answer within the command timeout: resolving now would stall as
            // long again. The first attempt reports the timeout at once and resolves in the
            // background (undoing a grant it finds).
            Step::Unknown(pending, e) if e.is_timeout() && !contended => {
                let finish = self.finish();
                let resolve = finish(Step::Unknown(
                    pending,
                    Error::Timeout {
                        operation: "acquire",
                        after: self.command_timeout(),
                    },
                ));
                drop(
                    self.shared
                        .tasks
                        .spawn(resolve.instrument(tracing::Span::current())),
                );
                Attempted::Failed(e)
            }
            Step::Unknown(pending, e) => self.resolve(pending, e, contended).await,
        }
    }

    /// Resolves an attempt of unknown outcome, within the caller's patience; past it the
    /// resolution goes on in a task of the client (which undoes a grant it finds) and the
    /// attempt's error is returned.
    async fn resolve(
        &self,
        pending: A::Pending,
        error: Error,
        contended: bool,
    ) -> Attempted<A::Grant> {
        tracing::debug!(error = %error, "acquire outcome unknown; resolving");
        let acq = self.acq.clone();
        let call = async move { acq.resolve(pending).await };
        let finish = {
            let acq = self.acq.clone();
            let shared = self.shared.clone();
            let cleanup = self.cleanup_after();
            move |resolved: Result<Option<A::Grant>>| async move {
                if let Ok(Some(grant)) = resolved {
                    tracing::debug!("an abandoned acquire was granted; undoing it");
                    acq.undo(grant).await;
                }
                if let Some(wait) = cleanup {
                    run_give_up(&shared, &*acq, wait).await;
                }
            }
        };
        let patience = self.patience(contended);
        match tokio::time::timeout(patience, Detachable::new(&self.shared, call, finish)).await {
            Ok(Ok(Some(grant))) => Attempted::Granted(grant),
            Ok(Ok(None)) => Attempted::Unresolved,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "resolving an acquire failed");
                Attempted::Failed(error)
            }
            Err(_) if contended && self.deadline.is_some() => Attempted::GaveUp,
            Err(_) => Attempted::Failed(error),
        }
    }

    /// The wait a detached attempt's give-up cleanup runs with, when the waiter may have left
    /// a trace (the attempt may have queued it after any earlier cleanup); `None`: no cleanup.
    fn cleanup_after(&self) -> Option<Option<Duration>> {
        (!self.single && self.acq.leaves_trace()).then_some(self.wait)
    }

    /// What a detached attempt does with its step.
    fn finish(
        &self,
    ) -> impl FnOnce(Step<A::Grant, A::Pending>) -> BoxFuture<'static, ()> + Send + 'static {
        let acq = self.acq.clone();
        let shared = self.shared.clone();
        let cleanup = self.cleanup_after();
        move |step| {
            Box::pin(async move {
                match step {
                    Step::Granted(grant) => {
                        tracing::debug!("acquire abandoned after it was granted; undoing it");
                        acq.undo(grant).await;
                    }
                    Step::Unknown(pending, _) => match acq.resolve(pending).await {
                        Ok(Some(grant)) => acq.undo(grant).await,
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "an abandoned acquire could not be resolved; a grant it made expires with its lease");
                        }
                    },
                    Step::Busy(_) | Step::Failed(_) => {}
                }
                if let Some(wait) = cleanup {
                    run_give_up(&shared, &*acq, wait).await;
                }
            })
        }
    }

    /// Waits by messages on `channel` (docs/LAYOUT.md §1.10): subscribe, then attempt again
    /// and sleep until a message or the hint, in a loop.
    async fn by_messages(&self, channel: &str, policy: WakePolicy) -> Result<Option<A::Grant>> {
        let config = &self.shared.config;
        let mut unsynced = Unsynced::default();
        let subscription = self.shared.pubsub.subscribe(channel, policy);
        // Wait for Redis to confirm the subscription, but never past the deadline: without it
        // the loop still re-checks every `recheck_interval`.
        let confirm_for = self
            .remaining()
            .map_or(config.command_timeout, |r| r.min(config.command_timeout));
        match tokio::time::timeout(confirm_for, subscription.ready()).await {
            Ok(Ok(())) => {}
            Ok(Err(Error::Shutdown)) => return Err(Error::Shutdown),
            Ok(Err(e)) => tracing::debug!(channel, error = %e, "subscribe failed; polling"),
            Err(_) => tracing::debug!(channel, "subscribe not confirmed in time; polling"),
        }
        let mut transient = Backoff::transient();
        loop {
            let mut notified = pin!(subscription.notified());
            // Registered before the attempt: a message published after the attempt's reply is
            // not lost (tokio's `Notified::enable` pattern).
            notified.as_mut().enable();
            let attempted_at = Instant::now();
            let mut busy = false;
            let mut wake_at = match self.attempt(true).await {
                Attempted::Granted(g) => return Ok(Some(g)),
                Attempted::GaveUp => return Ok(None),
                Attempted::Busy(hint) => {
                    busy = true;
                    transient.reset();
                    // Until a message wakes it: the hint (the lock's TTL, a permit's lease
                    // end), like a Redisson waiter; the channel's re-checker re-checks every
                    // `recheck_interval` too, in case a message was lost. Without a hint (a
                    // semaphore's permits, a latch, a lock without TTL) the others sleep until
                    // a message or the re-checker role comes to them, with a long backstop.
                    let now = Instant::now();
                    let rechecker = subscription.claim_recheck();
                    match hint.map(|h| h.max(MIN_SLEEP)) {
                        Some(h) if rechecker => now + h.min(config.recheck_interval),
                        Some(h) => now + h,
                        None if rechecker => now + config.recheck_interval,
                        None => now + config.recheck_interval * PARKED_BACKSTOP,
                    }
                }
                // Not applied after all: try again at once.
                Attempted::Unresolved => Instant::now(),
                Attempted::Failed(e @ Error::ReplicasNotSynced { .. }) if unsynced.give_up() => {
                    return Err(e);
                }
                Attempted::Failed(e) if retry_while_waiting(&e) => {
                    let pause = transient.next_delay();
                    tracing::debug!(channel, error = %e, ?pause, "transient error while waiting; retrying");
                    Instant::now() + pause
                }
                Attempted::Failed(e) => return Err(e),
            };
            if let Some(deadline) = self.deadline {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                wake_at = wake_at.min(deadline);
            }
            loop {
                let role = pin!(subscription.role_offered());
                tokio::select! {
                    biased;
                    () = self.shared.tasks.shutdown_signal() => return Err(Error::Shutdown),
                    () = &mut notified => break,
                    () = tokio::time::sleep_until(wake_at) => {
                        // Woken by the timer, not by a message: a re-check.
                        if busy {
                            self.tag.rechecked();
                            tracing::trace!(channel, "re-checking without a message");
                        }
                        break;
                    }
                    () = role => {
                        // The re-checker left: take its role and re-check on schedule.
                        if subscription.claim_recheck() {
                            wake_at = wake_at.min(attempted_at + config.recheck_interval);
                        }
                    }
                }
            }
        }
    }

    /// Waits by polling: attempt, then sleep by the back-off, in a loop.
    async fn by_backoff(&self, mut backoff: Backoff) -> Result<Option<A::Grant>> {
        let mut unsynced = Unsynced::default();
        loop {
            let pause = match self.attempt(true).await {
                Attempted::Granted(g) => return Ok(Some(g)),
                Attempted::GaveUp => return Ok(None),
                Attempted::Busy(_) | Attempted::Unresolved => backoff.next_delay(),
                Attempted::Failed(e @ Error::ReplicasNotSynced { .. }) if unsynced.give_up() => {
                    return Err(e);
                }
                Attempted::Failed(e) if retry_while_waiting(&e) => backoff.next_delay(),
                Attempted::Failed(e) => return Err(e),
            };
            let mut wake_at = Instant::now() + pause;
            if let Some(deadline) = self.deadline {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                wake_at = wake_at.min(deadline);
            }
            tokio::select! {
                () = self.shared.tasks.shutdown_signal() => return Err(Error::Shutdown),
                () = tokio::time::sleep_until(wake_at) => {}
            }
        }
    }
}

/// Runs the give-up cleanup in a `give_up` span: again after a transient failure (the cleanup
/// is idempotent), until it succeeds, fails otherwise, the retries run out or the client shuts
/// down; a cleanup that never ran leaves what ages out with the waiter's slot.
async fn run_give_up<A: Acquire>(shared: &Shared, acq: &A, wait: Option<Duration>) {
    let span = acq.subject().give_up_span();
    async {
        let mut pauses = BACKGROUND_RETRIES.iter();
        loop {
            let Some(cleanup) = acq.give_up(wait) else {
                return;
            };
            let e = match cleanup.await {
                Ok(()) => {
                    tracing::debug!("waiter left; cleaned up");
                    return;
                }
                Err(e) => e,
            };
            let pause = match pauses.next() {
                Some(pause) if e.is_transient() && !shared.tasks.is_shut_down() => *pause,
                _ => {
                    tracing::warn!(error = %e, "give-up cleanup failed; what the waiter left ages out");
                    return;
                }
            };
            tracing::debug!(error = %e, ?pause, "give-up cleanup failed; trying again");
            tokio::select! {
                () = shared.tasks.shutdown_signal() => {
                    tracing::warn!(error = %e, "give-up cleanup failed at shutdown; what the waiter left ages out");
                    return;
                }
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
    .instrument(span)
    .await;
}

/// The give-up cleanup of a waiter, armed while it waits: run inline (within the caller's
/// grace) when the wait ends without a grant, or in a task of the client when the waiter is
/// dropped or fails. While armed it keeps `Client::shutdown` waiting, so a waiter ended by a
/// shutdown still cleans up before the connections close.
struct GiveUp<A: Acquire> {
    armed: Option<Armed<A>>,
}

/// What an armed cleanup needs: the client, the acquisition, its wait, and the token that keeps
/// `Client::shutdown` waiting.
type Armed<A> = (Arc<Shared>, Arc<A>, Option<Duration>, TaskTrackerToken);

impl<A: Acquire> GiveUp<A> {
    fn new(waiter: &Waiter<A>) -> Self {
        let armed = waiter.acq.leaves_trace().then(|| {
            (
                waiter.shared.clone(),
                waiter.acq.clone(),
                waiter.wait,
                waiter.shared.tasks.token(),
            )
        });
        Self { armed }
    }

    /// Granted: nothing to clean up.
    fn disarm(this: Option<Self>, grant: Option<A::Grant>) -> Result<Option<A::Grant>> {
        if let Some(mut this) = this {
            this.armed = None;
        }
        Ok(grant)
    }

    /// An error ends the wait: the cleanup runs in the background (on drop).
    fn fail(this: Option<Self>, error: Error) -> Result<Option<A::Grant>> {
        drop(this);
        Err(error)
    }

    /// The wait ended without a grant: cleans up now, within the caller's grace (then in the
    /// background), and reports "not acquired".
    async fn finish(this: Option<Self>, waiter: &Waiter<A>) -> Result<Option<A::Grant>> {
        if let Some((shared, acq, wait, token)) = this.and_then(|mut this| this.armed.take()) {
            let shared_for_cleanup = shared.clone();
            let cleanup = async move {
                run_give_up(&shared_for_cleanup, &*acq, wait).await;
                drop(token);
            };
            let grace = match waiter.deadline {
                Some(deadline) => {
                    (deadline + ATTEMPT_GRACE).saturating_duration_since(Instant::now())
                }
                None => waiter.command_timeout(),
            };
            let detached = Detachable::new(&shared, cleanup, |()| async {});
            let _ = tokio::time::timeout(grace, detached).await;
        }
        Ok(None)
    }
}

impl<A: Acquire> Drop for GiveUp<A> {
    fn drop(&mut self) {
        if let Some((shared, acq, wait, token)) = self.armed.take() {
            let spawner = shared.clone();
            drop(spawner.tasks.spawn(async move {
                run_give_up(&shared, &*acq, wait).await;
                drop(token);
            }));
        }
    }
}

#[cfg(test)]
mod tests;
