//! The acquire loop shared by every lock kind (REDISSON_LAYOUT.md §1.10): try; subscribe to the
//! kind's wake-up channel; then try again and wait for a message or the returned TTL (capped by
//! the re-check interval), in a loop.
//!
//! Two guarantees hold for every kind:
//! - a grant is never lost: an acquire script in flight when the caller leaves finishes in a
//!   task of the client, which releases the hold again if it was granted;
//! - a waiter that leaves without the lock runs its kind's give-up cleanup (the fair lock's
//!   queue entry), whether its wait ran out, its future was dropped, an error ended it or its
//!   client shut down.

use std::pin::pin;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::detach::Detachable;
use crate::error::{Error, Result};
use crate::guard::{Held, LockGuard, Release};
use crate::handle::{Handle, LockOptions};
use crate::kind::{AcquireReply, lease_millis};
use crate::owner::Owner;

/// How long an acquire attempt still in flight at the end of a `try_lock_for` wait may take to
/// answer before the call gives up on it (its grant, if any, is then undone).
const ATTEMPT_GRACE: Duration = Duration::from_millis(100);

/// The shortest sleep between two attempts of a waiter.
const MIN_SLEEP: Duration = Duration::from_millis(1);

/// Acquires `handle` for the owner and lease of `options`. `wait`: `None` waits forever,
/// `Some(ZERO)` makes one attempt.
pub(crate) async fn acquire(
    handle: &Handle,
    wait: Option<Duration>,
    options: &LockOptions,
) -> Result<Option<LockGuard>> {
    let client = &handle.client;
    client.ensure_open()?;
    let lease_ms = match options.lease_time() {
        Some(lease) => Some(lease_millis(lease)?),
        None => None,
    };
    let owner = options.explicit_owner().unwrap_or_else(Owner::current);
    let attempt = Attempt {
        hold: Release {
            client: client.clone(),
            kind: handle.kind.clone(),
            name: handle.name.clone(),
            field: handle.kind.field(client.id(), owner.id()),
            lease_ms: lease_ms.unwrap_or_else(|| handle.watchdog_ms()),
        },
        wait,
        deadline: wait.map(|w| Instant::now() + w),
    };
    let lease = options.lease_time();
    let grant = |attempt: Attempt| {
        Some(LockGuard::new(Held::new(
            attempt.hold,
            owner,
            lease,
            lease.is_none(),
        )))
    };

    // From the first waiting attempt on, the waiter may have left a trace (a queue entry) that
    // must be cleaned up if it leaves without the lock.
    let give_up = (wait != Some(Duration::ZERO)).then(|| GiveUp::new(&attempt));
    let outcome = attempt.run(false).await;
    match outcome? {
        Outcome::Acquired => {
            GiveUp::disarm(give_up);
            return Ok(grant(attempt));
        }
        Outcome::Held(_) => {}
        Outcome::GaveUp => return GiveUp::finish(give_up).await,
    }
    if wait == Some(Duration::ZERO) {
        return Ok(None);
    }

    let config = client.config();
    let channel = handle.kind.wake_channel(&attempt.hold);
    let subscription = client.inner().pubsub.subscribe(&channel);
    // Wait for Redis to confirm the subscription, but never past the deadline: without it
    // the loop still re-checks every `recheck_interval`.
    let confirm_for = attempt
        .remaining()
        .map_or(config.command_timeout, |r| r.min(config.command_timeout));
    match tokio::time::timeout(confirm_for, subscription.ready()).await {
        Ok(Ok(())) => {}
        Ok(Err(Error::Shutdown)) => return Err(Error::Shutdown),
        Ok(Err(e)) => {
            tracing::debug!(lock = %handle.name, error = %e, "subscribe failed; polling");
        }
        Err(_) => {
            tracing::debug!(lock = %handle.name, "subscribe not confirmed in time; polling");
        }
    }

    loop {
        let mut notified = pin!(subscription.notify().notified());
        // Registered before the attempt: a message published after the attempt's reply is
        // not lost (tokio's `Notified::enable` pattern).
        notified.as_mut().enable();
        let ttl = match attempt.run(true).await? {
            Outcome::Acquired => {
                GiveUp::disarm(give_up);
                return Ok(grant(attempt));
            }
            Outcome::Held(ttl) => ttl,
            Outcome::GaveUp => return GiveUp::finish(give_up).await,
        };
        // Until a message wakes it: the lock's TTL (the hint), like a Redisson waiter; the
        // channel's re-checker also re-checks every `recheck_interval`, in case a message was
        // lost (one waiter per channel and client suffices: the lock it gets then is released
        // with a message that wakes the next).
        let hint = (ttl >= 0).then(|| Duration::from_millis(ttl.unsigned_abs()).max(MIN_SLEEP));
        let mut sleep = match hint {
            Some(hint) if subscription.claim_recheck() => hint.min(config.recheck_interval),
            Some(hint) => hint,
            None => config.recheck_interval,
        };
        if let Some(remaining) = attempt.remaining() {
            if remaining.is_zero() {
                return GiveUp::finish(give_up).await;
            }
            sleep = sleep.min(remaining);
        }
        tokio::select! {
            () = notified => {}
            () = tokio::time::sleep(sleep) => {}
            () = client.shut_down() => return Err(Error::Shutdown),
        }
    }
}

enum Outcome {
    Acquired,
    Held(i64),
    /// The deadline passed while the attempt was in flight; it was abandoned.
    GaveUp,
}

/// One owner's acquisition of one lock: the parameters of every attempt.
struct Attempt {
    /// The hold being asked for, as its release will need it (lock name, holder field, lease).
    hold: Release,
    /// The caller's whole wait, as the kind's scripts may need it.
    wait: Option<Duration>,
    deadline: Option<Instant>,
}

impl Attempt {
    fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Runs the acquire script once, so that a grant is never lost: the call is awaited here,
    /// and if this future is dropped or gives up before the reply (at its deadline, or after
    /// the command timeout), the call finishes in a task of the client, which releases the hold
    /// again if it was granted, and runs the kind's give-up cleanup if it queued the waiter.
    ///
    /// The caller waits for the reply up to the deadline plus [`ATTEMPT_GRACE`] (one attempt
    /// without a deadline: up to the command timeout). The detached call waits longer, up to the
    /// lease: a script sent to a stalled Redis still runs when Redis resumes, and its grant must
    /// be undone then.
    async fn run(&self, contended: bool) -> Result<Outcome> {
        let client = &self.hold.client;
        client.ensure_open()?;
        let command_timeout = client.config().command_timeout;
        let reply_limit = command_timeout.max(Duration::from_millis(self.hold.lease_ms));
        let hold = self.hold.clone();
        let wait = self.wait;
        let call = async move {
            // Wait for the reply up to the lease, but let a shutdown end the wait after one more
            // command timeout: `Client::shutdown` waits for a detached call.
            let shutdown_grace = async {
                hold.client.shut_down().await;
                tokio::time::sleep(command_timeout).await;
            };
            let reply = tokio::select! {
                reply = hold.kind.acquire(&hold, wait, reply_limit) => reply,
                () = shutdown_grace => Err(Error::Timeout {
                    operation: "acquire",
                    after: command_timeout,
                }),
            };
            (reply, hold)
        };
        let mut call = Detachable::new(
            client,
            call,
            move |(reply, hold): (Result<AcquireReply>, Release)| async move {
                match reply {
                    Ok(AcquireReply::Acquired) => {
                        tracing::debug!(lock = %hold.name, "acquire abandoned after it was granted; releasing");
                        if let Err(e) = hold.clone().run().await {
                            tracing::warn!(error = %e, "undoing an abandoned acquire failed; the lock expires with its lease");
                        }
                    }
                    Ok(AcquireReply::Held(_)) => {}
                    Err(e) => tracing::warn!(
                        lock = %hold.name,
                        error = %e,
                        "an abandoned acquire got no reply: if Redis runs it later, the hold expires with its lease"
                    ),
                }
                // The abandoned attempt may have queued the waiter after any earlier cleanup.
                if wait != Some(Duration::ZERO) {
                    run_give_up(&hold, wait).await;
                }
            },
        );
        let limit = match self.remaining() {
            Some(remaining) if !remaining.is_zero() || contended => {
                remaining + ATTEMPT_GRACE.min(command_timeout)
            }
            // One attempt (try_lock), or the first attempt of a wait without deadline.
            _ => command_timeout,
        };
        let (reply, _) = match tokio::time::timeout(limit, &mut call).await {
            Ok(reply) => reply,
            // Past the deadline of a wait that saw the lock held: an ordinary "not acquired".
            Err(_) if contended && self.deadline.is_some() => return Ok(Outcome::GaveUp),
            Err(_) => {
                return Err(Error::Timeout {
                    operation: "acquire",
                    after: limit,
                });
            }
        };
        match reply? {
            AcquireReply::Acquired => Ok(Outcome::Acquired),
            AcquireReply::Held(ttl) => Ok(Outcome::Held(ttl)),
        }
    }
}

/// Runs the kind's give-up cleanup once, logging a failure (the entry then ages out of the
/// queue when its slot passes).
async fn run_give_up(hold: &Release, wait: Option<Duration>) {
    if let Some(cleanup) = hold.kind.give_up(hold, wait)
        && let Err(e) = cleanup.await
    {
        tracing::warn!(lock = %hold.name, error = %e, "give-up cleanup failed; the waiter's entry ages out with its slot");
    }
}

/// The give-up cleanup of a waiter, armed while it waits: run inline when the wait ends
/// without the lock, or in a task of the client when the waiter is dropped or fails. While
/// armed it keeps [`Client::shutdown`](crate::Client::shutdown) waiting, so a waiter ended by
/// a shutdown still cleans up before the connections close.
struct GiveUp {
    armed: Option<(Release, Option<Duration>, TaskTrackerToken)>,
}

impl GiveUp {
    fn new(attempt: &Attempt) -> Self {
        let hold = &attempt.hold;
        let armed = hold
            .kind
            .queues_waiters()
            .then(|| (hold.clone(), attempt.wait, hold.client.shutdown_waits()));
        Self { armed }
    }

    /// The waiter got the lock: nothing to clean up.
    fn disarm(this: Option<Self>) {
        if let Some(mut this) = this {
            this.armed = None;
        }
    }

    /// The wait ended without the lock: cleans up now (finishing in the background if this
    /// future is dropped), then reports "not acquired".
    async fn finish(this: Option<Self>) -> Result<Option<LockGuard>> {
        if let Some((hold, wait, token)) = this.and_then(|mut this| this.armed.take()) {
            let client = hold.client.clone();
            let cleanup = async move {
                run_give_up(&hold, wait).await;
                drop(token);
            };
            Detachable::new(&client, cleanup, |()| async {}).await;
        }
        Ok(None)
    }
}

impl Drop for GiveUp {
    fn drop(&mut self) {
        if let Some((hold, wait, token)) = self.armed.take() {
            let client = hold.client.clone();
            drop(client.spawn(async move {
                run_give_up(&hold, wait).await;
                drop(token);
            }));
        }
    }
}
