//! The counting semaphore, compatible with Redisson's `RSemaphore` (docs/LAYOUT.md §6.4): its
//! scripts (`lua/semaphore/`), its channel, and the [`Permits`] an acquisition returns.

use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Cmd;
use tokio::time::Instant;
use tracing::Instrument;

use super::common::{PermitId, TRY_SET, check_permits, duration_ms};
use crate::conn::{Call, Delivery, Script, Synced};
use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::layout;
use crate::object::{Object, object_methods};
use crate::observe::{self, Subject, Tag};
use crate::pubsub::WakePolicy;
use crate::reply::{bool_reply, int_reply};
use crate::shared::Shared;
use crate::wait::{self, Acquire, Detachable, Step, Strategy};

/// `lua/semaphore/try_acquire.lua`: RedissonSemaphore.tryAcquireAsync0.
static TRY_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/semaphore/try_acquire.lua")));

/// `lua/semaphore/release.lua`: RedissonSemaphore.releaseAsync / releaseIfExistsAsync.
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/semaphore/release.lua")));

/// `lua/semaphore/add.lua`: RedissonSemaphore.addPermitsAsync.
static ADD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/semaphore/add.lua")));

/// `lua/semaphore/drain.lua`: RedissonSemaphore.drainPermitsAsync.
static DRAIN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/semaphore/drain.lua")));

/// A distributed counting semaphore: Redisson's `RSemaphore`.
///
/// The semaphore is the Redis string `name` holding the number of available permits (a signed
/// integer: [`add_permits`](Self::add_permits) may take it below zero). Acquiring decrements
/// it when enough permits are available; releasing increments it and publishes the new count
/// on `redisson_sc:{name}`, which wakes waiters here and in Java. Java services using
/// Redisson's `getSemaphore(name)` on the same Redis share the permits in both directions.
///
/// # Permits are not owned
///
/// Unlike a lock, a permit is not tied to whoever took it: anyone may release permits, also
/// permits that were never acquired (that raises the count), and Redisson tells its users to
/// take a semaphore exactly when a release must happen from another thread or host. An
/// acquisition returns [`Permits`], which releases on drop like a lock guard but can also be
/// released explicitly, moved to another task, or [`forget`](Permits::forget)-ten (then
/// release them later with [`release`](Self::release), from anywhere).
///
/// A process that dies holding permits does not give them back: nothing in Redis records who
/// has them. Where that matters, use the
/// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore), whose permits come back
/// by themselves when their lease ends.
///
/// # Waiting
///
/// A waiter subscribes to the channel (one subscription per client, shared by its waiters)
/// and is woken by the messages every permit-increasing write publishes: a message with count
/// `k` wakes up to `k` of the client's waiters, so a release of one permit wakes one waiter,
/// not all of them. One waiter per channel also re-checks every `recheck_interval`, in case a
/// message was lost. Waiters are not served in order.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let device = client.semaphore("device:7");
/// device.try_set_permits(2).await?; // once, by whoever sets the device up
/// let permits = device.acquire(1).await?;
/// // ... at most two users at once, across Rust and Java ...
/// permits.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    pub(super) inner: Arc<Inner>,
}

/// A semaphore's names, shared by its handle clones and its [`Permits`].
pub(super) struct Inner {
    shared: Arc<Shared>,
    name: Arc<str>,
    /// `redisson_sc:{N}`.
    channel: Arc<str>,
    /// The semaphore's one key, `N`, for the object methods.
    keys: [Arc<str>; 1],
}

impl Object for Inner {
    fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }
}

object_methods!(
    Semaphore,
    field: inner,
    make: "client.semaphore(\"pool\")",
    keys: "It acts on the semaphore's key `name`.",
    delete: "Deletes the semaphore's key (`DEL`), as Redisson's `delete()` does; nothing is \
        published (waiters find no permits until it is set again).",
    watchdog: "",
);

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.inner.name)
            .field("client_id", &self.inner.shared.id)
            .finish()
    }
}

impl Semaphore {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        let channel = layout::semaphore_channel(&name).into();
        let name: Arc<str> = name.into();
        Self {
            inner: Arc::new(Inner {
                shared,
                keys: [name.clone()],
                name,
                channel,
            }),
        }
    }

    /// The semaphore's name: its Redis key.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Sets the number of permits if the semaphore does not exist yet (Redisson's
    /// `trySetPermits`): `true` if set (the count is published, waking waiters), `false` if it
    /// existed (nothing changed).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when `name` holds another kind of key; [`Error::Redis`],
    /// [`Error::Timeout`].
    pub async fn try_set_permits(&self, permits: i32) -> Result<bool> {
        self.inner.try_set(permits, None).await
    }

    /// [`try_set_permits`](Self::try_set_permits) with a time to live: the semaphore key
    /// expires after `ttl` (Redisson's `trySetPermits(permits, timeToLive)`).
    /// [`add_permits`](Self::add_permits) clears the TTL again, as in Redisson.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits); [`Error::InvalidArgument`] for a TTL
    /// under 1 ms.
    pub async fn try_set_permits_with_ttl(&self, permits: i32, ttl: Duration) -> Result<bool> {
        let ttl = duration_ms("time to live", ttl)?;
        self.inner.try_set(permits, Some(ttl)).await
    }

    /// Adds `permits` (negative: removes them; the count may go below zero) and publishes the
    /// new count; returns it. Creates the semaphore when missing, and clears any TTL (a plain
    /// `SET`, as Redisson's `addPermits`).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn add_permits(&self, permits: i32) -> Result<i64> {
        let inner = &self.inner;
        inner.shared.ensure_open()?;
        let verb = inner.shared.conn.publish_command().await?;
        let mut invocation = ADD.prepare_invoke();
        invocation
            .key(&*inner.name)
            .key(&*inner.channel)
            .arg(permits)
            .arg(verb);
        let call = Call::write("add_permits", &inner.name, &invocation);
        int_reply("semaphore/add.lua", inner.shared.conn.call(call).await?)
    }

    /// The number of available permits (0 when the semaphore does not exist; may be
    /// negative).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn available_permits(&self) -> Result<i64> {
        let inner = &self.inner;
        inner.shared.ensure_open()?;
        let cmd = Cmd::get(&*inner.name);
        let reply = inner
            .shared
            .conn
            .call(Call::read("available_permits", &inner.name, &cmd))
            .await?;
        int_reply("GET", reply)
    }

    /// Takes every available permit and returns how many there were (the count becomes 0;
    /// a missing semaphore stays missing and 0 is returned). Nothing is published.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn drain_permits(&self) -> Result<i64> {
        let inner = &self.inner;
        inner.shared.ensure_open()?;
        let mut invocation = DRAIN.prepare_invoke();
        invocation.key(&*inner.name);
        let call = Call::write("drain_permits", &inner.name, &invocation);
        int_reply("semaphore/drain.lua", inner.shared.conn.call(call).await?)
    }

    /// Acquires `permits`, waiting as long as it takes (Redisson's `acquire(permits)`).
    /// `permits == 0` returns at once with empty [`Permits`], as in Redisson.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::InvalidArgument`] for more than `i32::MAX` permits,
    /// [`Error::Shutdown`], and Redis errors that are not transient ([`Error::Redis`],
    /// [`Error::Timeout`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future never loses a permit nor keeps one. An attempt in
    /// flight finishes in a task of the client, which gives back what it took.
    pub async fn acquire(&self, permits: u32) -> Result<Permits> {
        let Some(acquire) = self.acquisition(permits)? else {
            return Ok(self.permits(0));
        };
        let marker = wait::acquire(&self.inner.shared, acquire).await?;
        Ok(self.granted(permits, marker))
    }

    /// Makes one attempt to acquire `permits` (Redisson's `tryAcquire(permits)`): `None` when
    /// not enough are available.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(&self, permits: u32) -> Result<Option<Permits>> {
        self.try_acquire_for(permits, Duration::ZERO).await
    }

    /// Acquires `permits`, waiting at most `wait` (Redisson's `tryAcquire(permits,
    /// waitTime)`): `None` when they did not become available in time. Returns within `wait`
    /// plus 100 ms, also when Redis stalls.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire_for(&self, permits: u32, wait: Duration) -> Result<Option<Permits>> {
        let Some(acquire) = self.acquisition(permits)? else {
            return Ok(Some(self.permits(0)));
        };
        let granted = wait::try_acquire(&self.inner.shared, acquire, wait).await?;
        Ok(granted.map(|marker| self.granted(permits, marker)))
    }

    /// The acquisition of `permits`, as the engine drives it; `None` for 0 permits (granted at
    /// once, as in Redisson).
    fn acquisition(&self, permits: u32) -> Result<Option<Arc<SemaphoreAcquire>>> {
        check_permits(permits)?;
        self.inner.shared.ensure_open()?;
        Ok((permits > 0).then(|| {
            Arc::new(SemaphoreAcquire {
                inner: self.inner.clone(),
                permits,
            })
        }))
    }

    /// The guard of `permits` granted with the grant's `marker`.
    fn granted(&self, permits: u32, marker: Marker) -> Permits {
        Permits {
            semaphore: Some(self.clone()),
            count: permits,
            marker: Some(marker),
            hold: Some(self.inner.tag().hold()),
        }
    }

    fn permits(&self, count: u32) -> Permits {
        Permits {
            semaphore: (count > 0).then(|| self.clone()),
            count,
            marker: None,
            hold: None,
        }
    }

    /// Releases `permits`: adds them to the count (creating the semaphore when missing) and
    /// publishes the new count, waking up to that many waiters (Redisson's `release(permits)`).
    /// Anyone may release, also permits that were never acquired. `permits == 0` does nothing.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::InvalidArgument`] for more than `i32::MAX` permits,
    /// [`Error::Redis`], [`Error::Timeout`]. A release whose reply is lost is not sent again
    /// (it may have run; sending it twice would create permits): its error is returned.
    /// ([`Permits::release`] knows better: the grant marker of its acquisition tells whether
    /// the release ran.)
    pub async fn release(&self, permits: u32) -> Result<()> {
        check_permits(permits)?;
        self.inner.shared.ensure_open()?;
        if permits == 0 {
            return Ok(());
        }
        self.inner.release(permits, false, None).await.map(|_| ())
    }

    /// Releases `permits` only if the semaphore exists (Redisson's `releaseIfExists`): `true`
    /// if released, `false` if there was no semaphore (or `permits == 0`).
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release).
    pub async fn release_if_exists(&self, permits: u32) -> Result<bool> {
        check_permits(permits)?;
        self.inner.shared.ensure_open()?;
        if permits == 0 {
            return Ok(false);
        }
        self.inner.release(permits, true, None).await
    }
}

impl Inner {
    fn subject(&self) -> Subject<'_> {
        Subject {
            kind: "semaphore",
            name: &self.name,
            client_id: &self.shared.id,
            owner: None,
        }
    }

    fn tag(&self) -> Tag {
        Tag::new(
            "semaphore",
            &self.name,
            self.shared.config.metrics_name_label,
        )
    }

    async fn try_set(&self, permits: i32, ttl_ms: Option<i64>) -> Result<bool> {
        self.shared.ensure_open()?;
        let verb = self.shared.conn.publish_command().await?;
        let mut invocation = TRY_SET.prepare_invoke();
        invocation
            .key(&*self.name)
            .key(&*self.channel)
            .arg(permits)
            .arg(verb);
        if let Some(ttl) = ttl_ms {
            invocation.arg(ttl);
        }
        // Sent once more after a dropped connection: a second run finds the key and changes
        // nothing.
        let call = Call::write("try_set_permits", &self.name, &invocation).idempotent();
        bool_reply("semaphore/try_set.lua", self.shared.conn.call(call).await?)
    }

    /// Runs the release script, in a `release` span. Without a grant marker a lost reply is
    /// cut off (so it cannot run later), reported, and never sent again. With one (the
    /// permits of an acquisition, whose marker the release deletes) any transient failure is
    /// settled: see [`settle_release`](Self::settle_release).
    async fn release(
        self: &Arc<Self>,
        permits: u32,
        if_exists: bool,
        marker: Option<&Marker>,
    ) -> Result<bool> {
        let span = self.subject().release_span();
        self.release_in_span(permits, if_exists, marker)
            .instrument(span)
            .await
    }

    async fn release_in_span(
        self: &Arc<Self>,
        permits: u32,
        if_exists: bool,
        marker: Option<&Marker>,
    ) -> Result<bool> {
        // No open check here: releases scheduled before a shutdown (dropped permits, undos)
        // still run while it drains them; the callers' own calls check.
        let delivery = Delivery::default();
        let key = marker.map(|m| &*m.key);
        match (
            self.send_release(permits, if_exists, key, &delivery).await,
            marker,
        ) {
            (Err(e), Some(marker)) if e.is_transient() => {
                let lost = may_have_run(delivery, &e);
                let settle =
                    Arc::clone(self).settle_release(permits, if_exists, marker.clone(), lost, e);
                // Boxed: rare, and the settling future is large.
                Box::pin(wait::release_in_time(
                    &self.shared,
                    self.name.clone(),
                    "release",
                    self.shared.config.command_timeout,
                    settle,
                ))
                .await
                .map(|()| true)
            }
            (Err(e), None) if e.outcome_unknown() && delivery.was_sent() => {
                // Never sent again (a second run would add permits); only made sure it cannot
                // run later. The caller gets the error either way.
                if let Err(cut) = wait::cut_off(&self.shared, &delivery, &self.name).await {
                    tracing::warn!(semaphore = %self.name, error = %cut, "cutting off a release of unknown outcome failed; it may still take effect");
                }
                Err(e)
            }
            (reply, _) => reply,
        }
    }

    /// Settles a release of an acquisition's permits that failed transiently, by the grant
    /// marker the release deletes. A send whose reply never came (`lost`) is cut off (it
    /// cannot run later) and the marker read: gone before it could have expired, the release
    /// ran; still there, it did not, and it is sent again. A send Redis refused or that could
    /// not be sent (the slot's master down in a failover) is sent again after a pause
    /// ([`wait::BACKGROUND_RETRIES`], about a minute in all). At most 10 sends more; past
    /// them, past the marker's life, or on an error that is not transient, the error stands
    /// (the permits may stay taken: the semaphore has no lease).
    async fn settle_release(
        self: Arc<Self>,
        permits: u32,
        if_exists: bool,
        marker: Marker,
        mut lost: Option<Delivery>,
        mut error: Error,
    ) -> Result<()> {
        let mut sends = wait::BACKGROUND_RETRIES.iter();
        loop {
            match lost.take() {
                Some(delivery) => {
                    if !self.marker_exists(&delivery, &marker.key).await? {
                        return if Instant::now() < marker.alive_until {
                            Ok(())
                        } else {
                            Err(error)
                        };
                    }
                    if sends.next().is_none() {
                        return Err(error);
                    }
                    tracing::debug!(semaphore = %self.name, error = %error, "a release did not run; sending it again");
                }
                None => {
                    let Some(pause) = sends.next() else {
                        return Err(error);
                    };
                    // A shutdown ends the pause and the settling, as it ends the expirable
                    // semaphore's later release: it would otherwise wait out the pauses.
                    tokio::select! {
                        () = self.shared.tasks.shutdown_signal() => return Err(error),
                        () = tokio::time::sleep(*pause) => {}
                    }
                }
            }
            if self.shared.tasks.is_shut_down() {
                return Err(error);
            }
            let again = Delivery::default();
            match self
                .send_release(permits, if_exists, Some(&marker.key), &again)
                .await
            {
                Err(e) if e.is_transient() => {
                    lost = may_have_run(again, &e);
                    error = e;
                }
                reply => return reply.map(|_| ()),
            }
        }
    }

    /// Sends the release script once, tracked by `delivery`.
    async fn send_release(
        &self,
        permits: u32,
        if_exists: bool,
        marker: Option<&str>,
        delivery: &Delivery,
    ) -> Result<bool> {
        let verb = self.shared.conn.publish_command().await?;
        let mut invocation = RELEASE.prepare_invoke();
        invocation.key(&*self.name).key(&*self.channel);
        if let Some(marker) = marker {
            invocation.key(marker);
        }
        invocation
            .arg(permits)
            .arg(verb)
            .arg(if if_exists { "if_exists" } else { "always" });
        let call = Call::write("release", &self.name, &invocation)
            .tracked(delivery)
            .synced();
        bool_reply("semaphore/release.lua", self.shared.conn.call(call).await?)
    }

    /// How long a grant marker lives when its permits are not released: long enough for any
    /// resolution of a lost reply (which starts within a command timeout of the send).
    fn marker_ttl(&self) -> Duration {
        (self.shared.config.command_timeout * 10).max(Duration::from_secs(60))
    }

    /// Cuts off the request of unknown outcome `delivery` went out with, then reads whether
    /// `marker` exists, retrying transient errors for up to half the marker's life: for an
    /// acquire, whether it ran (it sets the marker); for a release, whether it did not (it
    /// deletes it).
    async fn marker_exists(&self, delivery: &Delivery, marker: &str) -> Result<bool> {
        let cmd = Cmd::exists(marker);
        let reply =
            wait::settle(&self.shared, delivery, marker, &cmd, self.marker_ttl() / 2).await?;
        bool_reply("EXISTS", reply)
    }
}

/// The send of a release that failed with the transient `error`, if it may have run: it went
/// out, and Redis did not refuse it (`BUSY`, `CLUSTERDOWN` and the like prove it did not run).
/// Such a send is settled by the grant marker, after a cut-off; one that did not go out or was
/// refused is simply sent again.
fn may_have_run(delivery: Delivery, error: &Error) -> Option<Delivery> {
    (delivery.was_sent() && !error.server_busy()).then_some(delivery)
}

/// One acquisition of permits, as the wait engine drives it.
struct SemaphoreAcquire {
    inner: Arc<Inner>,
    permits: u32,
}

/// An attempt whose reply never came: where it went, and the marker it would have set.
struct PendingGrant {
    delivery: Delivery,
    marker: Marker,
}

/// A grant marker (docs/LAYOUT.md §12): set by the acquire with the marker's TTL, deleted by
/// the release of its permits, so its absence proves a release ran, until it could have
/// expired.
#[derive(Clone, Debug)]
struct Marker {
    key: Arc<str>,
    /// The acquire's send plus the marker's TTL: Redis ran it later, so the marker lives at
    /// least until then unless a release deleted it.
    alive_until: Instant,
}

impl Acquire for SemaphoreAcquire {
    /// The grant marker, deleted by the release of the permits.
    type Grant = Marker;
    type Pending = PendingGrant;

    fn subject(&self) -> Subject<'_> {
        self.inner.subject()
    }

    fn strategy(&self) -> Strategy {
        Strategy::PubSub {
            channel: self.inner.channel.to_string(),
            policy: WakePolicy::Permits,
        }
    }

    fn attempt(
        &self,
        _wait: Option<Duration>,
        limit: Duration,
        _contended: bool,
    ) -> BoxFuture<'_, Step<Marker, PendingGrant>> {
        Box::pin(async move {
            let inner = &self.inner;
            let request = PermitId::random().to_string();
            let marker = Marker {
                key: layout::semaphore_grant_marker(&inner.name, &request).into(),
                alive_until: Instant::now() + inner.marker_ttl(),
            };
            let ttl_ms = u64::try_from(inner.marker_ttl().as_millis()).unwrap_or(u64::MAX);
            let mut invocation = TRY_ACQUIRE.prepare_invoke();
            invocation
                .key(&*inner.name)
                .key(&*marker.key)
                .arg(self.permits)
                .arg(ttl_ms);
            let delivery = Delivery::default();
            let call = Call::write("acquire", &inner.name, &invocation)
                .limit(limit)
                .tracked(&delivery)
                .synced();
            match inner.shared.conn.call_synced(call).await {
                Ok((reply, synced)) => match bool_reply("semaphore/try_acquire.lua", reply) {
                    Ok(true) => match synced {
                        Synced::Unacked { replicas, after } => {
                            // As a lock: what no replica acknowledged is given back.
                            self.undo(marker).await;
                            Step::Failed(Error::ReplicasNotSynced {
                                operation: "acquire",
                                name: inner.name.to_string(),
                                replicas,
                                after,
                            })
                        }
                        _ => Step::Granted(marker),
                    },
                    // Permits carry no expiry: no hint; a message (or the re-check) wakes.
                    Ok(false) => Step::Busy(None),
                    Err(e) => Step::Failed(e),
                },
                Err(e) if e.outcome_unknown() && delivery.was_sent() => {
                    Step::Unknown(PendingGrant { delivery, marker }, e)
                }
                Err(e) => Step::Failed(e),
            }
        })
    }

    /// Cuts the attempt off, then looks for its grant marker: there means it ran.
    fn resolve(&self, pending: PendingGrant) -> BoxFuture<'_, Result<Option<Marker>>> {
        Box::pin(async move {
            let granted = self
                .inner
                .marker_exists(&pending.delivery, &pending.marker.key)
                .await?;
            Ok(granted.then_some(pending.marker))
        })
    }

    fn undo(&self, marker: Marker) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Err(e) = self.inner.release(self.permits, false, Some(&marker)).await {
                tracing::warn!(semaphore = %self.inner.name, permits = self.permits, error = %e, "giving back permits nobody received failed");
            }
        })
    }
}

/// Permits acquired from a [`Semaphore`]: released on drop (in the background, like a
/// [`LockGuard`](crate::LockGuard)), or explicitly with [`release`](Self::release), or kept
/// taken with [`forget`](Self::forget).
///
/// A permit is not owned: `Permits` may be moved to another task or thread and released
/// there, and any handle of the semaphore may release permits it never acquired.
#[must_use = "dropping Permits releases them at once"]
pub struct Permits {
    /// `None` once released or forgotten (or when no permit was taken).
    semaphore: Option<Semaphore>,
    count: u32,
    /// The acquisition's grant marker, deleted with the release.
    marker: Option<Marker>,
    /// Counts the hold in the metrics until the permits are released, dropped or forgotten.
    hold: Option<observe::Hold>,
}

impl fmt::Debug for Permits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permits")
            .field("semaphore", &self.semaphore.as_ref().map(Semaphore::name))
            .field("count", &self.count)
            .finish()
    }
}

impl Permits {
    /// How many permits this holds.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Releases the permits now and reports the outcome. The release completes even if this
    /// future is dropped: it then finishes in a task of the client.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release`].
    pub async fn release(mut self) -> Result<()> {
        let Some(semaphore) = self.semaphore.take() else {
            return Ok(());
        };
        let inner = semaphore.inner;
        let shared = inner.shared.clone();
        shared.ensure_open()?;
        let permits = self.count;
        let marker = self.marker.take();
        let name = inner.name.clone();
        let _hold = self.hold.take();
        let call = async move {
            inner
                .release(permits, false, marker.as_ref())
                .await
                .map(|_| ())
        };
        Detachable::new(&shared, call, move |result: Result<()>| async move {
            if let Err(e) = result {
                tracing::warn!(semaphore = %name, error = %e, "release failed after its caller left");
            }
        })
        .await
    }

    /// Keeps the permits taken: nothing is released now or on drop. Release them later with
    /// [`Semaphore::release`], from this process or any other.
    pub fn forget(mut self) {
        self.semaphore = None;
    }
}

impl Drop for Permits {
    fn drop(&mut self) {
        let Some(semaphore) = self.semaphore.take() else {
            return;
        };
        let inner = semaphore.inner;
        if inner.shared.tasks.is_shut_down() {
            tracing::warn!(semaphore = %inner.name, permits = self.count, "permits dropped after shutdown: they stay taken");
            return;
        }
        let permits = self.count;
        let marker = self.marker.take();
        let shared = inner.shared.clone();
        drop(shared.tasks.spawn(async move {
            if let Err(e) = inner.release(permits, false, marker.as_ref()).await {
                tracing::warn!(semaphore = %inner.name, error = %e, "release on drop failed");
            }
        }));
    }
}
