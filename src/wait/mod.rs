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
//! - **transient errors do not end a wait**: `BUSY`, `LOADING`, a refused or dropped
//!   connection and the like are retried with back-off within the wait, from its first attempt
//!   on ([`Outage`]); a bounded wait in which Redis never answered ends with the last
//!   connection error, not with "not acquired";
//! - **a grant that came too late is not spun on**: one whose validity was spent when its reply
//!   arrived is given back by the primitive ([`Step::Late`]) and tried again, but the
//!   [`LATE_GRANTS`]th in a row ends the wait with [`Error::LateGrants`];
//! - **bounded**: a wait with a deadline returns within it plus [`ATTEMPT_GRACE`].

mod backoff;
mod detach;
mod settle;

use std::convert::Infallible;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::observe::{self, Acquisition, Subject, Tag};
use crate::pubsub::WakePolicy;
use crate::shared::Shared;

pub(crate) use backoff::{BACKGROUND_RETRIES, Backoff};
pub(crate) use detach::Detachable;
pub(crate) use settle::{cut_off, release_in_time, settle, settle_with};

/// How long an attempt still in flight at the end of a wait may take to answer before the
/// call gives up on it (its grant, if any, is then undone).
pub(crate) const ATTEMPT_GRACE: Duration = Duration::from_millis(100);

/// A waiter that is not its channel's re-checker and has no hint re-checks on its own after
/// this many re-check intervals (the re-checker role covers lost messages well before).
const PARKED_BACKSTOP: u32 = 30;

/// The shortest sleep between two attempts of a waiter.
const MIN_SLEEP: Duration = Duration::from_millis(1);

/// How many grants in a row may arrive after their lease before a waiting acquire fails with
/// [`Error::LateGrants`]. One late grant can be a fluke (a reply held up by a stall, a paused
/// process, a starved runtime), and a second can be the same stall spanning two attempts; a
/// third in a row means the replies are slower than the lease, which no retry mends: each
/// attempt would write the lock only for it to expire, or be given back, before its reply
/// arrives. Three is also the bound on grants no replica acknowledged (`UNSYNCED_RETRIES`,
/// Redisson's `retryAttempts`). The wait then ends after three rounds of an acquire and the
/// release of its grant (with every reply 250 ms late: 1.8 s for a `Lock`, 2.8 s for a
/// `FairLock`, in `tests/late_grants.rs`): seconds, not never.
pub(crate) const LATE_GRANTS: u32 = 3;

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
    /// Refused before anything was sent (the client knows the answer): nothing to clean up.
    Refused(Error),
    /// Granted, but the grant's validity was spent (or about to be) when its reply arrived: the
    /// primitive has given it back already. The engine tries again at once, up to
    /// [`LATE_GRANTS`] in a row.
    Late(LateGrant),
}

/// A grant that arrived too late to be used: how long its reply took and the lease it had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LateGrant {
    /// From sending the request to its reply.
    pub(crate) latency: Duration,
    /// The lease the grant had.
    pub(crate) lease: Duration,
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
    /// `None`: no deadline); `limit` bounds the wait for its reply; `contended`: an earlier
    /// attempt of this wait found the primitive busy (a kind may ask differently then).
    fn attempt(
        &self,
        wait: Option<Duration>,
        limit: Duration,
        contended: bool,
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

    /// `true` when a waiting acquisition (not a single attempt) lets this client's waiters
    /// already parked on the primitive's channel go first: finding any, it joins them without
    /// an attempt, and attempts when a message (or the re-checker role, or the backstop) wakes
    /// it, as though its first attempt had found the primitive busy. It yields only with its
    /// own subscription confirmed and some of them still parked then (otherwise it attempts
    /// at once), and never takes a wake that was stored before it came. The waiter an unlock
    /// message woke then does not lose the lock to its releaser's next acquire (barging), which
    /// would cost it a failed attempt and another sleep (benchmark S7); within one client the
    /// waiters are served in the order they parked, as tokio's `Mutex` serves its waiters.
    /// Only with a pub/sub strategy; by default no primitive yields.
    fn yields_to_parked(&self) -> bool {
        false
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

/// Acquires through `acq`, waiting as long as it takes: only a grant or an error ends it.
///
/// It runs in an `acquire` span and records the acquisition's metrics ([`observe`]).
pub(crate) async fn acquire<A: Acquire>(shared: &Arc<Shared>, acq: Arc<A>) -> Result<A::Grant> {
    let ended = observed(shared, acq, None, None::<Bound<Infallible>>).await?;
    match ended {
        Ended::Granted(grant) => Ok(grant),
        Ended::TimedOut(never) => match never {},
    }
}

/// Acquires through `acq`, waiting at most `wait`: `None` when it was not granted in time.
/// `ZERO` makes one attempt (retried once if it was resolved as not applied); a `wait` too long
/// for the clock counts as no deadline.
///
/// It runs in an `acquire` span and records the acquisition's metrics ([`observe`]).
pub(crate) async fn try_acquire<A: Acquire>(
    shared: &Arc<Shared>,
    acq: Arc<A>,
    wait: Duration,
) -> Result<Option<A::Grant>> {
    let bound = Instant::now().checked_add(wait).map(|at| Bound {
        at,
        single: wait.is_zero(),
        marker: (),
    });
    let ended = observed(shared, acq, Some(wait), bound).await?;
    Ok(match ended {
        Ended::Granted(grant) => Some(grant),
        Ended::TimedOut(()) => None,
    })
}

/// The deadline of a bounded wait, with the value its "not acquired in time" carries: `()`
/// for [`try_acquire`], and none for [`acquire`], whose waiter has no `Bound` (its marker type
/// is `Infallible`), so that it cannot end without a grant.
#[derive(Clone, Copy, Debug)]
struct Bound<T> {
    at: Instant,
    /// One attempt only (a zero wait).
    single: bool,
    marker: T,
}

/// How an acquisition ended, errors aside.
enum Ended<G, T> {
    Granted(G),
    /// The wait ran out; only a waiter with a [`Bound`] can end so.
    TimedOut(T),
}

/// [`first_attempts`], then the wait if they found the primitive busy, in the acquisition's
/// span, with its metrics.
async fn observed<A: Acquire, T: Marker>(
    shared: &Arc<Shared>,
    acq: Arc<A>,
    wait: Option<Duration>,
    bound: Option<Bound<T>>,
) -> Result<Ended<A::Grant, T>> {
    let (span, tag) = {
        let subject = acq.subject();
        let tag = Tag::new(subject.kind, subject.name, shared.config.metrics_name_label);
        (subject.acquire_span(wait), tag)
    };
    let acquisition = Acquisition::start(tag.clone());
    // Boxed, each part on its own: the waiter's futures are kilobytes, and inline every future
    // above them (the lock call, the caller's own) would carry them and be moved with them.
    // The first attempts' box is freed before a wait's is allocated: an acquisition granted at
    // once allocates the smaller one only, small enough for the allocator's per-thread cache,
    // and a parked waiter holds the wait's only.
    let first = Box::pin(first_attempts(shared, acq, wait, bound, tag));
    let result = async move {
        // Matched before the wait is awaited: kept across it, the first attempts' outcome
        // would make this future larger.
        let waiting = match first.await {
            Ok(First::Ended(ended)) => return Ok(ended),
            Ok(First::Wait(waiting)) => waiting,
            Err(e) => return Err(e),
        };
        waiting.await
    }
    .instrument(span.clone())
    .await;
    let outcome = match &result {
        Ok(Ended::Granted(_)) => Ok(true),
        Ok(Ended::TimedOut(_)) => Ok(false),
        Err(e) => Err(e),
    };
    observe::acquisition_ended(acquisition, &span, outcome);
    result
}

/// The bytes of the box [`observed`] allocates for the first attempts of `acq`: the larger of
/// an untimed and a bounded wait's (tests keep it within what the allocator serves fastest).
#[cfg(test)]
pub(crate) fn boxed_acquisition_size<A: Acquire>(shared: &Arc<Shared>, acq: Arc<A>) -> usize {
    let tag = || {
        let subject = acq.subject();
        Tag::new(subject.kind, subject.name, shared.config.metrics_name_label)
    };
    let untimed = first_attempts::<A, Infallible>(shared, acq.clone(), None, None, tag());
    let bounded = first_attempts::<A, ()>(shared, acq.clone(), None, None, tag());
    std::mem::size_of_val(&untimed).max(std::mem::size_of_val(&bounded))
}

/// What a bounded wait's "not acquired" carries: `()`, or `Infallible` for a wait without one.
trait Marker: Copy + Send + Sync + 'static {}

impl<T: Copy + Send + Sync + 'static> Marker for T {}

/// How an acquisition's [`first_attempts`] ended, errors aside.
enum First<G, T> {
    /// Granted, or not acquired (a single attempt that found the primitive busy, a bound that
    /// ran out during an attempt).
    Ended(Ended<G, T>),
    /// The primitive is busy: the wait for it ([`wait_for_grant`]), boxed, not started.
    Wait(BoxFuture<'static, Result<Ended<G, T>>>),
}

/// The attempts before a wait: the first, and one more of a single attempt resolved as not
/// applied; or none, for a waiter that yields to the client's parked waiters.
async fn first_attempts<A: Acquire, T: Marker>(
    shared: &Arc<Shared>,
    acq: Arc<A>,
    wait: Option<Duration>,
    bound: Option<Bound<T>>,
    tag: Tag,
) -> Result<First<A::Grant, T>> {
    shared.ensure_open()?;
    let waiter = Waiter {
        bound,
        shared: shared.clone(),
        acq,
        wait,
        tag,
        late: AtomicU32::new(0),
    };
    let single = waiter.single();
    // From the first waiting attempt on, the waiter may leave a trace (a queue entry) that
    // must be cleaned up if it leaves without a grant.
    let give_up = (!single).then(|| GiveUp::new(&waiter));

    // A waiting acquisition that yields to the client's parked waiters joins them at once.
    let yielded = if single { None } else { waiter.yielded() };
    let (strategy, outage, yielding) = match yielded {
        Some(strategy) => (strategy, Outage::default(), true),
        None => {
            let mut retried = false;
            let mut outage = Outage::default();
            loop {
                match waiter.attempt(false).await {
                    Attempted::Granted(g) => {
                        GiveUp::disarm(give_up);
                        return Ok(First::Ended(Ended::Granted(g)));
                    }
                    Attempted::Busy(_) => {
                        outage.answered();
                        break;
                    }
                    Attempted::Unresolved if single && !retried => retried = true,
                    Attempted::Unresolved => {
                        outage.answered();
                        break;
                    }
                    Attempted::GaveUp(t) => {
                        return Ok(First::Ended(GiveUp::finish(give_up, &waiter, t).await));
                    }
                    // BUSY proves the script did not run; a grant no replica acknowledged was
                    // given back; a refused or dropped connection (Redis down or restarting):
                    // a waiting call retries them within its wait.
                    Attempted::Failed(e) if !single && retry_while_waiting(&e) => {
                        outage.failed(e, Duration::ZERO);
                        break;
                    }
                    Attempted::Failed(e) => return GiveUp::fail(give_up, e).map(First::Ended),
                    // Refused before anything was sent: nothing to clean up.
                    Attempted::Refused(e) => {
                        GiveUp::disarm(give_up);
                        return Err(e);
                    }
                }
            }
            if let Some(Bound {
                single: true,
                marker,
                ..
            }) = waiter.bound
            {
                return Ok(First::Ended(Ended::TimedOut(marker)));
            }
            (waiter.acq.strategy(), outage, false)
        }
    };
    Ok(First::Wait(Box::pin(wait_for_grant(
        waiter, give_up, strategy, outage, yielding,
    ))))
}

/// The wait of an acquisition, after [`first_attempts`] found the primitive busy
/// (or the waiter yielded to the client's parked waiters): by messages or by back-off until a
/// grant, the bound, or an error.
async fn wait_for_grant<A: Acquire, T: Marker>(
    waiter: Waiter<A, T>,
    give_up: Option<GiveUp<A>>,
    strategy: Strategy,
    outage: Outage,
    yielding: bool,
) -> Result<Ended<A::Grant, T>> {
    let _waiting = waiter.tag.waiting();
    let result = match strategy {
        Strategy::PubSub { channel, policy } => {
            waiter.by_messages(&channel, policy, outage, yielding).await
        }
        Strategy::Backoff(backoff) => waiter.by_backoff(backoff, outage).await,
    };
    match result {
        Ok(Ended::Granted(g)) => {
            GiveUp::disarm(give_up);
            Ok(Ended::Granted(g))
        }
        Ok(Ended::TimedOut(t)) => Ok(GiveUp::finish(give_up, &waiter, t).await),
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
        || e.connection_refused()
        || matches!(e, Error::Connection { .. })
        || matches!(e, Error::ReplicasNotSynced { .. })
}

/// How often a waiter that keeps finding Redis unreachable logs a warning (the retries in
/// between are debug events).
pub(crate) const OUTAGE_WARN_EVERY: Duration = Duration::from_secs(5);

/// The connection errors of one wait: each is retried with back-off until the wait ends (an
/// untimed wait: until Redis is back), with a warning at most every [`OUTAGE_WARN_EVERY`]. A
/// bounded wait in which Redis never answered ends with the last of them
/// ([`Error::Connection`]), which says what failed, rather than "not acquired", which would
/// say someone else holds it; once Redis answered (busy) the wait ends as usual.
#[derive(Default)]
struct Outage {
    /// Redis answered an attempt of this wait.
    answered: bool,
    /// The last connection error, while Redis has not answered.
    last: Option<Error>,
    warned: Option<Instant>,
}

impl Outage {
    /// Redis answered an attempt (busy, or resolved as not applied).
    fn answered(&mut self) {
        self.answered = true;
        self.last = None;
    }

    /// An attempt failed with an error [`retry_while_waiting`] retries, `pause` before the next.
    fn failed(&mut self, e: Error, pause: Duration) {
        if e.server_busy() || matches!(e, Error::ReplicasNotSynced { .. }) {
            // Redis answered: it is there, only busy.
            tracing::debug!(error = %e, ?pause, "transient error while waiting; retrying");
            self.answered();
            return;
        }
        let now = Instant::now();
        if self
            .warned
            .is_none_or(|at| now.duration_since(at) >= OUTAGE_WARN_EVERY)
        {
            self.warned = Some(now);
            tracing::warn!(error = %e, ?pause, "Redis unreachable while waiting; retrying until the wait ends");
        } else {
            tracing::debug!(error = %e, ?pause, "Redis unreachable while waiting; retrying");
        }
        self.last = Some(e);
    }

    /// The wait ran out: "not acquired" with `marker`, or the connection error when Redis
    /// never answered.
    fn ended<G, T>(self, marker: T) -> Result<Ended<G, T>> {
        match self.last {
            Some(e) if !self.answered => Err(e),
            _ => Ok(Ended::TimedOut(marker)),
        }
    }
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
enum Attempted<G, T> {
    Granted(G),
    Busy(Option<Duration>),
    /// Its outcome was unknown, and it turned out not to have taken effect.
    Unresolved,
    /// The deadline passed while the attempt was in flight; it was abandoned.
    GaveUp(T),
    Failed(Error),
    Refused(Error),
}

/// One waiter: the caller of one acquisition.
struct Waiter<A: Acquire, T> {
    shared: Arc<Shared>,
    acq: Arc<A>,
    /// The caller's whole wait, as the primitive sees it (`None`: no deadline).
    wait: Option<Duration>,
    /// Its deadline (`None`: none, or one too far for the clock).
    bound: Option<Bound<T>>,
    /// The acquisition's metric labels.
    tag: Tag,
    /// How many grants in a row arrived after their lease (see [`LATE_GRANTS`]).
    late: AtomicU32,
}

impl<A: Acquire, T: Marker> Waiter<A, T> {
    /// The deadline, and what "not acquired by then" carries.
    fn deadline(&self) -> Option<(Instant, T)> {
        self.bound.map(|b| (b.at, b.marker))
    }

    /// One attempt only.
    fn single(&self) -> bool {
        self.bound.is_some_and(|b| b.single)
    }

    /// The strategy to wait by at once, without a first attempt, when the primitive yields to
    /// the client's waiters already parked on its channel and there are some (see
    /// [`Acquire::yields_to_parked`]); `None`: attempt first.
    fn yielded(&self) -> Option<Strategy> {
        let pubsub = &self.shared.pubsub;
        if !pubsub.any_waiters() || !self.acq.yields_to_parked() {
            return None;
        }
        match self.acq.strategy() {
            Strategy::PubSub { channel, policy } if pubsub.has_waiters(&channel) => {
                tracing::trace!(channel, "waiters of this client are parked; joining them");
                Some(Strategy::PubSub { channel, policy })
            }
            _ => None,
        }
    }

    fn remaining(&self) -> Option<Duration> {
        self.bound
            .map(|b| b.at.saturating_duration_since(Instant::now()))
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
    async fn attempt(&self, contended: bool) -> Attempted<A::Grant, T> {
        if let Err(e) = self.shared.ensure_open() {
            return Attempted::Failed(e);
        }
        let acq = self.acq.clone();
        let (wait, limit) = (self.wait, self.command_timeout());
        let call = async move { acq.attempt(wait, limit, contended).await };
        let finish = self.finish();
        let detached = Detachable::new(&self.shared, call, finish);
        // Without a deadline the attempt's own calls bound it (each by the command timeout);
        // with one, the caller waits up to the deadline plus the grace.
        let patience = (self.bound.is_some() && !self.single()).then(|| self.patience(contended));
        let step = match patience {
            None => Ok(detached.await),
            Some(patience) => tokio::time::timeout(patience, detached).await,
        };
        let step = match step {
            Ok(step) => step,
            Err(_) => {
                // Past the deadline of a wait that saw the primitive busy: "not acquired".
                if let (true, Some((_, t))) = (contended, self.deadline()) {
                    return Attempted::GaveUp(t);
                }
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
            Step::Refused(e) => Attempted::Refused(e),
            Step::Late(late) => self.late(late),
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
            // Boxed: rare (a lost reply), and inline its state would double every attempt's.
            Step::Unknown(pending, e) => Box::pin(self.resolve(pending, e, contended)).await,
        }
    }

    /// Counts a grant that arrived after its lease (given back already): busy, to be tried
    /// again at once, until the [`LATE_GRANTS`]th in a row, which fails the acquire. Only a
    /// grant whose reply came is counted: one found by resolving a lost reply has no measured
    /// latency, and is tried again as not applied.
    fn late(&self, late: LateGrant) -> Attempted<A::Grant, T> {
        let grants = self.late.fetch_add(1, Ordering::Relaxed) + 1;
        let LateGrant { latency, lease } = late;
        let subject = self.acq.subject();
        if grants >= LATE_GRANTS {
            return Attempted::Failed(Error::LateGrants {
                name: subject.name.to_string(),
                grants,
                latency,
                lease,
            });
        }
        if grants == 1 {
            tracing::warn!(lock = %subject.name, ?latency, ?lease, "a grant arrived after its lease (the reply was slower than the lease); it was given back, trying again");
        } else {
            tracing::debug!(lock = %subject.name, ?latency, ?lease, grants, "another grant arrived after its lease; trying again");
        }
        Attempted::Busy(Some(Duration::ZERO))
    }

    /// Resolves an attempt of unknown outcome, within the caller's patience; past it the
    /// resolution goes on in a task of the client (which undoes a grant it finds) and the
    /// attempt's error is returned.
    async fn resolve(
        &self,
        pending: A::Pending,
        error: Error,
        contended: bool,
    ) -> Attempted<A::Grant, T> {
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
            Err(_) => match (contended, self.deadline()) {
                (true, Some((_, t))) => Attempted::GaveUp(t),
                _ => Attempted::Failed(error),
            },
        }
    }

    /// The wait a detached attempt's give-up cleanup runs with, when the waiter may have left
    /// a trace (the attempt may have queued it after any earlier cleanup); `None`: no cleanup.
    fn cleanup_after(&self) -> Option<Option<Duration>> {
        (!self.single() && self.acq.leaves_trace()).then_some(self.wait)
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
                    Step::Busy(_) | Step::Failed(_) | Step::Refused(_) | Step::Late(_) => {}
                }
                if let Some(wait) = cleanup {
                    run_give_up(&shared, &*acq, wait).await;
                }
            })
        }
    }

    /// Waits by messages on `channel` (docs/LAYOUT.md §1.10): subscribe, then attempt again
    /// and sleep until a message or the hint, in a loop. A waiter that `yields` sleeps before
    /// its first attempt, as though one had found the primitive busy without a hint.
    async fn by_messages(
        &self,
        channel: &str,
        policy: WakePolicy,
        mut outage: Outage,
        yields: bool,
    ) -> Result<Ended<A::Grant, T>> {
        let config = &self.shared.config;
        let mut unsynced = Unsynced::default();
        let subscription = self.shared.pubsub.subscribe(channel, policy);
        // Registered before the subscription is confirmed and before every attempt: a message
        // published after the attempt's reply is not lost (tokio's `Notified::enable`
        // pattern), and one that arrives before this waiter's first attempt wakes it rather
        // than staying behind as a permit for whoever registers next (a releaser yielding to
        // this waiter would take it and overtake it).
        let mut notified = pin!(subscription.notified());
        if notified.as_mut().enable() && yields {
            // A wake stored before this waiter came: a message that found every parked waiter
            // of this client between a wake and its next attempt, which it makes anyway. Not
            // this waiter's, which yields to them.
            notified.set(subscription.notified());
            notified.as_mut().enable();
        }
        // Wait for Redis to confirm the subscription, but never past the deadline: without it
        // the loop still re-checks every `recheck_interval`.
        let confirm_for = self
            .remaining()
            .map_or(config.command_timeout, |r| r.min(config.command_timeout));
        let confirmed = match tokio::time::timeout(confirm_for, subscription.ready()).await {
            Ok(Ok(())) => true,
            Ok(Err(Error::Shutdown)) => return Err(Error::Shutdown),
            Ok(Err(e)) => {
                tracing::debug!(channel, error = %e, "subscribe failed; polling");
                false
            }
            Err(_) => {
                tracing::debug!(channel, "subscribe not confirmed in time; polling");
                false
            }
        };
        let mut transient = Backoff::transient();
        // A waiter yields only to waiters still parked once its own subscription is confirmed:
        // their release then wakes it. One that was granted and left before may have released
        // already, its message published before this waiter was subscribed.
        let mut yields = yields && confirmed && subscription.has_company();
        loop {
            let attempted_at = Instant::now();
            let mut busy = false;
            let attempted = if std::mem::take(&mut yields) {
                Attempted::Busy(None)
            } else {
                self.attempt(true).await
            };
            let mut wake_at = match attempted {
                Attempted::Granted(g) => return Ok(Ended::Granted(g)),
                Attempted::GaveUp(t) => return outage.ended(t),
                Attempted::Busy(hint) => {
                    busy = true;
                    outage.answered();
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
                Attempted::Unresolved => {
                    outage.answered();
                    Instant::now()
                }
                Attempted::Failed(e @ Error::ReplicasNotSynced { .. }) if unsynced.give_up() => {
                    return Err(e);
                }
                Attempted::Failed(e) if retry_while_waiting(&e) => {
                    let pause = transient.next_delay();
                    outage.failed(e, pause);
                    Instant::now() + pause
                }
                Attempted::Failed(e) | Attempted::Refused(e) => return Err(e),
            };
            if let Some((deadline, t)) = self.deadline() {
                if Instant::now() >= deadline {
                    return outage.ended(t);
                }
                wake_at = wake_at.min(deadline);
            }
            loop {
                let role = pin!(subscription.role_offered());
                tokio::select! {
                    biased;
                    () = self.shared.tasks.shutdown_signal() => return Err(Error::Shutdown),
                    () = &mut notified => {
                        // Spent: the next one, registered before the next attempt.
                        notified.set(subscription.notified());
                        notified.as_mut().enable();
                        break;
                    }
                    () = tokio::time::sleep_until(wake_at) => {
                        // Woken by the timer, not by a message: a re-check. The registration
                        // stays, with its place among the channel's waiters.
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
    async fn by_backoff(
        &self,
        mut backoff: Backoff,
        mut outage: Outage,
    ) -> Result<Ended<A::Grant, T>> {
        let mut unsynced = Unsynced::default();
        loop {
            let pause = match self.attempt(true).await {
                Attempted::Granted(g) => return Ok(Ended::Granted(g)),
                Attempted::GaveUp(t) => return outage.ended(t),
                Attempted::Busy(_) | Attempted::Unresolved => {
                    outage.answered();
                    backoff.next_delay()
                }
                Attempted::Failed(e @ Error::ReplicasNotSynced { .. }) if unsynced.give_up() => {
                    return Err(e);
                }
                Attempted::Failed(e) if retry_while_waiting(&e) => {
                    let pause = backoff.next_delay();
                    outage.failed(e, pause);
                    pause
                }
                Attempted::Failed(e) | Attempted::Refused(e) => return Err(e),
            };
            let mut wake_at = Instant::now() + pause;
            if let Some((deadline, t)) = self.deadline() {
                if Instant::now() >= deadline {
                    return outage.ended(t);
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
    fn new<T: Marker>(waiter: &Waiter<A, T>) -> Self {
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

    /// Granted (or refused before anything was sent): nothing to clean up.
    fn disarm(this: Option<Self>) {
        if let Some(mut this) = this {
            this.armed = None;
        }
    }

    /// An error ends the wait: the cleanup runs in the background (on drop).
    fn fail<T>(this: Option<Self>, error: Error) -> Result<Ended<A::Grant, T>> {
        drop(this);
        Err(error)
    }

    /// The wait ended without a grant: cleans up now, within the caller's grace (then in the
    /// background), and reports "not acquired" with `marker`.
    async fn finish<T: Marker>(
        this: Option<Self>,
        waiter: &Waiter<A, T>,
        marker: T,
    ) -> Ended<A::Grant, T> {
        if let Some((shared, acq, wait, token)) = this.and_then(|mut this| this.armed.take()) {
            let shared_for_cleanup = shared.clone();
            let cleanup = async move {
                run_give_up(&shared_for_cleanup, &*acq, wait).await;
                drop(token);
            };
            let grace = match waiter.deadline() {
                Some((deadline, _)) => {
                    (deadline + ATTEMPT_GRACE).saturating_duration_since(Instant::now())
                }
                None => waiter.command_timeout(),
            };
            let detached = Detachable::new(&shared, cleanup, |()| async {});
            let _ = tokio::time::timeout(grace, detached).await;
        }
        Ended::TimedOut(marker)
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
