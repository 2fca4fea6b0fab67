//! The permit-expirable semaphore, compatible with Redisson's `RPermitExpirableSemaphore`
//! (docs/LAYOUT.md §6.5): its scripts (`lua/permit_semaphore/`), its names, and permit ids.

use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Cmd, Value};
use tokio::time::Instant;
use tracing::Instrument;

use super::common::{PermitId, TRY_SET, check_permits, duration_ms, now_epoch_ms};
use crate::conn::{Call, Delivery, Script, ScriptInvocation, Synced};
use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::layout;
use crate::object::{Object, object_methods};
use crate::observe::Subject;
use crate::pubsub::WakePolicy;
use crate::reply::unexpected;
use crate::reply::{bool_reply, int_reply};
use crate::shared::Shared;
use crate::wait::{self, Acquire, Step, Strategy};

/// `lua/permit_semaphore/acquire.lua`: RedissonPermitExpirableSemaphore.tryAcquireAsync.
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/permit_semaphore/acquire.lua")));

/// `lua/permit_semaphore/release_one.lua`: tryReleaseAsync(permitId).
static RELEASE_ONE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/permit_semaphore/release_one.lua")));

/// `lua/permit_semaphore/release.lua`: tryReleaseAsync(permitsIds).
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/permit_semaphore/release.lua")));

/// `lua/permit_semaphore/set.lua`: setPermitsAsync.
static SET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/permit_semaphore/set.lua")));

/// `lua/permit_semaphore/add.lua`: addPermitsAsync.
static ADD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/permit_semaphore/add.lua")));

/// `lua/permit_semaphore/count.lua`: available/get/acquiredPermitsAsync.
static COUNT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/permit_semaphore/count.lua")));

/// `lua/permit_semaphore/lease.lua`: getLeaseTimeAsync / updateLeaseTimeAsync.
static LEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/permit_semaphore/lease.lua")));

/// The score of a permit without lease: Redisson's `nonExpirableTimeout`.
const NO_EXPIRY: i64 = 922_337_203_685_477;

/// Goes on releasing `ids` in a task of the client after a release failed transiently: again
/// and again until it runs (or finds them gone: it had run, or they expired), fails otherwise,
/// the tries run out or the client shuts down.
fn release_later(inner: Arc<Inner>, ids: Vec<PermitId>) {
    let shared = inner.shared.clone();
    let token = shared.tasks.token();
    drop(shared.tasks.spawn(async move {
        for pause in wait::BACKGROUND_RETRIES {
            tokio::select! {
                () = inner.shared.tasks.shutdown_signal() => break,
                () = tokio::time::sleep(pause) => {}
            }
            match inner.release_many(&ids).await {
                Ok(released) => {
                    tracing::debug!(semaphore = %inner.name, released, "a failed release went through later");
                    break;
                }
                Err(e) if e.is_transient() => {
                    tracing::debug!(semaphore = %inner.name, error = %e, "a failed release failed again; trying later");
                }
                Err(e) => {
                    tracing::warn!(semaphore = %inner.name, error = %e, "a failed release could not be completed; its permits stay until their lease ends");
                    break;
                }
            }
        }
        drop(token);
    }));
}

/// A distributed semaphore whose permits have ids and optional leases: Redisson's
/// `RPermitExpirableSemaphore`.
///
/// The available permits are the Redis string `name`; every acquired permit is a member of
/// the sorted set `{name}:timeout` (its raw 16-byte id, scored by the epoch ms its lease
/// ends, or by `922337203685477` when it has no lease). Before almost every operation, permits
/// whose lease has ended are reclaimed: removed from the set and added back to the count (the
/// new count is published on `redisson_sc:{name}`). So a holder that dies gives its permits
/// back when their lease runs out: the crash-safe form of the [`Semaphore`](crate::Semaphore).
/// Java services using Redisson's `getPermitExpirableSemaphore(name)` share the permits in
/// both directions, and ids made on one side can be released on the other.
///
/// Leases are judged by the clock of the client that checks them (as in Redisson): keep the
/// hosts' clocks in sync.
///
/// # Waiting
///
/// A waiter subscribes to `redisson_sc:{name}` and sleeps until a message wakes it or until
/// the nearest lease of an acquired permit ends (the acquire script's hint), whichever comes
/// first; one waiter per client also re-checks every `recheck_interval`.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
///
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let slots = client.permit_expirable_semaphore("render-slots");
/// slots.try_set_permits(4).await?;
/// // The permit comes back by itself after 30 s if this process dies.
/// let ids = slots.acquire(1, Some(Duration::from_secs(30))).await?;
/// // ... work ...
/// slots.release(&ids).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) shared: Arc<Shared>,
    pub(super) name: Arc<str>,
    /// `{N}:timeout`.
    timeouts: Arc<str>,
    /// `redisson_sc:{N}`.
    channel: Arc<str>,
    /// `N` and `{N}:timeout`, for the object methods.
    keys: [Arc<str>; 2],
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
    PermitExpirableSemaphore,
    field: inner,
    make: "client.permit_expirable_semaphore(\"pool\")",
    keys: "It acts on both of the semaphore's keys, `name` (the available permits) and \
        `{name}:timeout` (the acquired ones), as Redisson's does.",
    delete: "Deletes both of the semaphore's keys (`DEL name {name}:timeout`), as Redisson's \
        `delete()` does: the acquired permits are gone with them (their ids no longer \
        release anything).",
    watchdog: "",
);

impl fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.inner.name)
            .field("client_id", &self.inner.shared.id)
            .finish()
    }
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        let timeouts: Arc<str> = layout::permit_timeouts(&name).into();
        let channel = layout::semaphore_channel(&name).into();
        let name: Arc<str> = name.into();
        Self {
            inner: Arc::new(Inner {
                keys: [name.clone(), timeouts.clone()],
                timeouts,
                channel,
                shared,
                name,
            }),
        }
    }

    /// The semaphore's name: the Redis key of its available permits.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Sets the number of available permits if the semaphore does not exist yet (Redisson's
    /// `trySetPermits`): `true` if set (the count is published), `false` if it existed.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn try_set_permits(&self, permits: i32) -> Result<bool> {
        let inner = &self.inner;
        inner.shared.ensure_open()?;
        let verb = inner.shared.conn.publish_command().await?;
        let mut invocation = TRY_SET.prepare_invoke();
        invocation
            .key(&*inner.name)
            .key(&*inner.channel)
            .arg(permits)
            .arg(verb);
        let call = Call::write("try_set_permits", &inner.name, &invocation)
            .idempotent()
            .synced();
        bool_reply("semaphore/try_set.lua", inner.shared.conn.call(call).await?)
    }

    /// Makes the total number of permits (available plus acquired) `permits`, adjusting the
    /// available ones, and publishes it (Redisson's `setPermits`). Acquired permits stay
    /// acquired; the available count may go negative.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn set_permits(&self, permits: i32) -> Result<()> {
        let inner = &self.inner;
        inner.shared.ensure_open()?;
        let verb = inner.shared.conn.publish_command().await?;
        let mut invocation = SET.prepare_invoke();
        invocation
            .key(&*inner.name)
            .key(&*inner.channel)
            .key(&*inner.timeouts)
            .arg(permits)
            .arg(verb);
        let call = Call::write("set_permits", &inner.name, &invocation)
            .idempotent()
            .synced();
        bool_reply(
            "permit_semaphore/set.lua",
            inner.shared.conn.call(call).await?,
        )
        .map(|_| ())
    }

    /// Adds `permits` to the available ones (negative: removes them) and returns the new
    /// available count; a positive number is published (Redisson's `addPermits`).
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
        let call = Call::write("add_permits", &inner.name, &invocation).synced();
        int_reply(
            "permit_semaphore/add.lua",
            inner.shared.conn.call(call).await?,
        )
    }

    /// The available permits, after reclaiming expired ones (0 when the semaphore does not
    /// exist).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn available_permits(&self) -> Result<i64> {
        self.inner.count("available").await
    }

    /// All permits, available plus acquired, after reclaiming expired ones (Redisson's
    /// `getPermits`; 0 when the semaphore does not exist).
    ///
    /// # Errors
    ///
    /// As [`available_permits`](Self::available_permits).
    pub async fn total_permits(&self) -> Result<i64> {
        self.inner.count("total").await
    }

    /// The acquired permits whose lease has not ended (Redisson's `acquiredPermits`).
    ///
    /// # Errors
    ///
    /// As [`available_permits`](Self::available_permits).
    pub async fn acquired_permits(&self) -> Result<i64> {
        self.inner.count("acquired").await
    }

    /// Acquires `permits` permits, waiting as long as it takes, each with `lease` (`None`: no
    /// lease, the permit is held until released). Returns one id per permit.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for 0 permits (Redisson returns an empty list, which its
    /// own API reads as "not acquired"), more than `i32::MAX`, or a lease under 1 ms;
    /// [`Error::WrongType`]; [`Error::Shutdown`]; Redis errors that are not transient.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an attempt in flight when the future is dropped finishes in a task of the
    /// client, which releases the permits it took.
    pub async fn acquire(&self, permits: u32, lease: Option<Duration>) -> Result<Vec<PermitId>> {
        let (ids, _) = wait::acquire(&self.inner.shared, self.acquisition(permits, lease)?).await?;
        Ok(ids)
    }

    /// Makes one attempt to acquire `permits` with `lease`: `None` when not enough are
    /// available.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(
        &self,
        permits: u32,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<PermitId>>> {
        self.try_acquire_for(permits, Duration::ZERO, lease).await
    }

    /// Acquires `permits` with `lease`, waiting at most `wait`: `None` when they did not
    /// become available in time. Returns within `wait` plus 100 ms, also when Redis stalls.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire_for(
        &self,
        permits: u32,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<PermitId>>> {
        let acquire = self.acquisition(permits, lease)?;
        let granted = wait::try_acquire(&self.inner.shared, acquire, wait).await?;
        Ok(granted.map(|(ids, _)| ids))
    }

    /// The acquisition of `permits` with `lease`, as the engine drives it.
    pub(super) fn acquisition(
        &self,
        permits: u32,
        lease: Option<Duration>,
    ) -> Result<Arc<ExpirableAcquire>> {
        check_permits(permits)?;
        if permits == 0 {
            return Err(Error::InvalidArgument(
                "acquire at least 1 permit (0 permits have no id to return)".into(),
            ));
        }
        let lease_ms = lease.map(|l| duration_ms("lease", l)).transpose()?;
        Ok(Arc::new(ExpirableAcquire {
            inner: self.inner.clone(),
            permits,
            lease_ms,
        }))
    }

    /// Releases one permit (Redisson's `tryRelease(permitId)`): `true` if released, `false`
    /// if the id is unknown or its lease had already ended (an expired permit found still
    /// there is returned to the count all the same, as in Redisson).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn try_release(&self, id: &PermitId) -> Result<bool> {
        let inner = &self.inner;
        inner.shared.ensure_open()?;
        let verb = inner.shared.conn.publish_command().await?;
        let mut invocation = RELEASE_ONE.prepare_invoke();
        invocation
            .key(&*inner.name)
            .key(&*inner.channel)
            .key(&*inner.timeouts)
            .arg(&id.0[..])
            .arg(now_epoch_ms())
            .arg(verb);
        match inner
            .send_release(&invocation, std::slice::from_ref(id))
            .await?
        {
            Released::Reply(reply) => bool_reply("permit_semaphore/release_one.lua", reply),
            Released::Ran => Ok(true),
        }
    }

    /// Releases every permit of `ids`, all or nothing (Redisson's `release(permitsIds)`).
    ///
    /// # Errors
    ///
    /// [`Error::PermitNotHeld`] when any of them is unknown or expired (nothing is released);
    /// [`Error::InvalidArgument`] for an empty list or one with the same id twice (Redisson
    /// would release it once and report a failure); [`Error::WrongType`], [`Error::Redis`],
    /// [`Error::Timeout`].
    pub async fn release(&self, ids: &[PermitId]) -> Result<()> {
        self.inner.release_ids(ids, false).await
    }

    /// Releases the permits of `ids` if every one is held (Redisson's `tryRelease(List)`):
    /// how many were released, 0 when one of them is unknown or its lease ended (then none is;
    /// expired permits found are returned to the count all the same, as in Redisson). An id
    /// given twice is released once and counted once, as in Redisson.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty list (nothing sent); [`Error::WrongType`],
    /// [`Error::Redis`], [`Error::Timeout`]. A release that fails transiently (a reset link, a
    /// restart) goes on in a task of the client until it runs or finds its ids gone, as
    /// [`release`](Self::release)'s does.
    ///
    /// # Cancel safety
    ///
    /// A dropped call may or may not have released the permits.
    pub async fn try_release_many(&self, ids: &[PermitId]) -> Result<u64> {
        if ids.is_empty() {
            return Err(Error::InvalidArgument(
                "release at least one permit id".into(),
            ));
        }
        self.inner.shared.ensure_open()?;
        match self.inner.release_many(ids).await {
            Ok(released) => Ok(u64::try_from(released).unwrap_or(0)),
            Err(e) if e.is_transient() => {
                // As `release`: the ids still name the permits, and releasing them again is
                // idempotent.
                release_later(self.inner.clone(), ids.to_vec());
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Sets the lease of an acquired permit to `lease` from now (`None`: no lease); `false`
    /// when the permit is not held (unknown, released, or already expired).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a lease under 1 ms; [`Error::WrongType`],
    /// [`Error::Redis`], [`Error::Timeout`].
    pub async fn update_lease_time(&self, id: &PermitId, lease: Option<Duration>) -> Result<bool> {
        let expiry = match lease {
            Some(l) => now_epoch_ms().saturating_add(duration_ms("lease", l)?),
            None => NO_EXPIRY,
        };
        let reply = self.inner.lease(id, Some(expiry)).await?;
        bool_reply("permit_semaphore/lease.lua", reply)
    }

    /// What is left of an acquired permit's lease: `None` when it has no lease (Redisson's
    /// `getLeaseTime(permitId)`).
    ///
    /// # Errors
    ///
    /// [`Error::PermitNotHeld`] when the permit is not held (unknown, released or expired);
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`].
    pub async fn lease_time(&self, id: &PermitId) -> Result<Option<Duration>> {
        let reply = self.inner.lease(id, None).await?;
        match int_reply("permit_semaphore/lease.lua", reply)? {
            -2 => Err(Error::PermitNotHeld {
                name: self.inner.name.to_string(),
                ids: vec![id.to_string()],
            }),
            -1 => Ok(None),
            ms => Ok(Some(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))),
        }
    }
}

impl Inner {
    /// [`PermitExpirableSemaphore::release`]: all or nothing, a transient failure going on in
    /// the background.
    /// `scheduled`: a release scheduled before a shutdown (a dropped guard's), which still
    /// runs while the shutdown drains it.
    pub(super) async fn release_ids(
        self: &Arc<Self>,
        ids: &[PermitId],
        scheduled: bool,
    ) -> Result<()> {
        if ids.is_empty() {
            return Err(Error::InvalidArgument(
                "release at least one permit id".into(),
            ));
        }
        let mut unique = ids.to_vec();
        unique.sort_unstable_by_key(|id| id.0);
        unique.dedup();
        if unique.len() != ids.len() {
            return Err(Error::InvalidArgument(
                "the same permit id appears twice in one release".into(),
            ));
        }
        if !scheduled {
            self.shared.ensure_open()?;
        }
        let released = match self.release_many(ids).await {
            Ok(released) => released,
            Err(e) if e.is_transient() => {
                // Not run, or not known to have run: the ids still name the permits, and a
                // release of them is idempotent (a second one finds them gone). Without a
                // lease they would otherwise be held for good.
                release_later(self.clone(), ids.to_vec());
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        if released == ids.len() as i64 {
            Ok(())
        } else {
            Err(Error::PermitNotHeld {
                name: self.name.to_string(),
                ids: ids.iter().map(ToString::to_string).collect(),
            })
        }
    }

    fn subject(&self) -> Subject<'_> {
        Subject {
            kind: "permit_semaphore",
            name: &self.name,
            client_id: &self.shared.id,
            owner: None,
        }
    }

    async fn count(&self, what: &'static str) -> Result<i64> {
        self.shared.ensure_open()?;
        let verb = self.shared.conn.publish_command().await?;
        let mut invocation = COUNT.prepare_invoke();
        invocation
            .key(&*self.name)
            .key(&*self.timeouts)
            .key(&*self.channel)
            .arg(now_epoch_ms())
            .arg(verb)
            .arg(what);
        // It writes (the reclaim), and a second run changes nothing more.
        let call = Call::write("count_permits", &self.name, &invocation).idempotent();
        int_reply(
            "permit_semaphore/count.lua",
            self.shared.conn.call(call).await?,
        )
    }

    async fn lease(&self, id: &PermitId, update: Option<i64>) -> Result<Value> {
        self.shared.ensure_open()?;
        let verb = self.shared.conn.publish_command().await?;
        let mut invocation = LEASE.prepare_invoke();
        invocation
            .key(&*self.name)
            .key(&*self.timeouts)
            .key(&*self.channel)
            .arg(&id.0[..])
            .arg(now_epoch_ms())
            .arg(verb)
            .arg(NO_EXPIRY);
        if let Some(expiry) = update {
            invocation.arg(expiry);
        }
        let mut call = Call::write("lease_time", &self.name, &invocation).idempotent();
        if update.is_some() {
            // Redisson syncs the update, not the query.
            call = call.synced();
        }
        self.shared.conn.call(call).await
    }

    /// Runs the all-or-nothing release script: the number of permits released (0: none).
    async fn release_many(&self, ids: &[PermitId]) -> Result<i64> {
        let verb = self.shared.conn.publish_command().await?;
        let mut invocation = RELEASE.prepare_invoke();
        invocation
            .key(&*self.name)
            .key(&*self.channel)
            .key(&*self.timeouts)
            .arg(ids.len())
            .arg(now_epoch_ms())
            .arg(verb);
        for id in ids {
            invocation.arg(&id.0[..]);
        }
        match self.send_release(&invocation, ids).await? {
            Released::Reply(reply) => int_reply("permit_semaphore/release.lua", reply),
            Released::Ran => {
                // Each id once, as the script's ZREM counts them.
                let mut distinct = ids.to_vec();
                distinct.sort_unstable_by_key(|id| id.0);
                distinct.dedup();
                Ok(distinct.len() as i64)
            }
        }
    }

    /// Runs a release script for `ids`. A reply that is lost is settled, never guessed: the
    /// request is cut off (so it cannot run later) and the ids looked up. None left: it ran
    /// (or they expired and were reclaimed meanwhile: the permits are back either way). All
    /// still there: it did not run, and it is sent once more. Anything else: the error.
    async fn send_release(
        &self,
        invocation: &ScriptInvocation<'_>,
        ids: &[PermitId],
    ) -> Result<Released> {
        let span = self.subject().release_span();
        async {
            let mut sends = 0;
            loop {
                sends += 1;
                let delivery = Delivery::default();
                let call = Call::write("release", &self.name, invocation)
                    .tracked(&delivery)
                    .synced();
                match self.shared.conn.call(call).await {
                    Ok(reply) => return Ok(Released::Reply(reply)),
                    Err(e) if e.outcome_unknown() && delivery.was_sent() => {
                        wait::cut_off(&self.shared, &delivery, &self.name).await?;
                        let present = self.present(ids).await?;
                        if present == 0 {
                            return Ok(Released::Ran);
                        }
                        if present < ids.len() || sends == 2 {
                            return Err(e);
                        }
                        tracing::debug!(semaphore = %self.name, error = %e, "a release did not run; sending it again");
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        .instrument(span)
        .await
    }

    /// How many of `ids` are acquired permits now.
    async fn present(&self, ids: &[PermitId]) -> Result<usize> {
        let mut present = 0;
        for id in ids {
            let mut cmd = Cmd::new();
            cmd.arg("ZSCORE").arg(&*self.timeouts).arg(&id.0[..]);
            let reply = self
                .shared
                .conn
                .call(Call::read("resolve", &self.name, &cmd))
                .await?;
            if reply != Value::Nil {
                present += 1;
            }
        }
        Ok(present)
    }
}

/// What a release request came to.
enum Released {
    /// The script's reply.
    Reply(Value),
    /// The reply was lost, and the request found to have run.
    Ran,
}

/// One acquisition of expirable permits, as the wait engine drives it.
pub(super) struct ExpirableAcquire {
    inner: Arc<Inner>,
    permits: u32,
    lease_ms: Option<i64>,
}

/// An attempt whose reply never came: its ids, where it went and when.
pub(super) struct PendingIds {
    ids: Vec<PermitId>,
    delivery: Delivery,
    sent: Instant,
}

impl ExpirableAcquire {
    /// The acquire script for `ids`, its leases starting at `now` (epoch milliseconds).
    fn invocation(
        &self,
        ids: &[PermitId],
        verb: &'static str,
        now: i64,
    ) -> ScriptInvocation<'static> {
        let inner = &self.inner;
        let expiry = self
            .lease_ms
            .map_or(NO_EXPIRY, |lease| now.saturating_add(lease));
        let mut invocation = ACQUIRE.prepare_invoke();
        invocation
            .key(&*inner.name)
            .key(&*inner.timeouts)
            .key(&*inner.channel)
            .arg(self.permits)
            .arg(expiry)
            .arg(now)
            .arg(NO_EXPIRY)
            .arg(verb);
        for id in ids {
            invocation.arg(&id.0[..]);
        }
        invocation
    }
}

impl Acquire for ExpirableAcquire {
    /// The ids, and when the request that granted them was sent (where their lease starts).
    type Grant = (Vec<PermitId>, Instant);
    type Pending = PendingIds;

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
    ) -> BoxFuture<'_, Step<(Vec<PermitId>, Instant), PendingIds>> {
        Box::pin(async move {
            let inner = &self.inner;
            // Fresh ids per attempt, as Redisson makes per tryAcquire.
            let ids: Vec<PermitId> = (0..self.permits).map(|_| PermitId::random()).collect();
            let verb = match inner.shared.conn.publish_command().await {
                Ok(verb) => verb,
                Err(e) => return Step::Failed(e),
            };
            // The leases end on the client's wall clock (the script's `now` plus the lease):
            // they are valid from the instant those milliseconds denote, before the send.
            let (now, sent) = crate::clock::epoch_ms_since();
            let invocation = self.invocation(&ids, verb, now);
            let delivery = Delivery::default();
            let call = Call::write("acquire", &inner.name, &invocation)
                .limit(limit)
                .tracked(&delivery)
                .synced();
            match inner.shared.conn.call_synced(call).await {
                Ok((Value::Nil, _)) => Step::Busy(None),
                Ok((ref reply, synced)) => match crate::reply::status(reply) {
                    Some(b"OK") => match synced {
                        Synced::Unacked { replicas, after } => {
                            // As a lock: what no replica acknowledged is given back.
                            self.undo((ids, sent)).await;
                            Step::Failed(Error::ReplicasNotSynced {
                                operation: "acquire",
                                name: inner.name.to_string(),
                                replicas,
                                after,
                            })
                        }
                        _ => Step::Granted((ids, sent)),
                    },
                    Some(hint) if hint.first() == Some(&b':') => {
                        // ':<score>': the nearest lease end, in epoch ms.
                        let score = std::str::from_utf8(&hint[1..])
                            .ok()
                            .and_then(|s| s.parse::<f64>().ok());
                        match score {
                            Some(score) => {
                                let left = (score as i64).saturating_sub(now_epoch_ms()).max(0);
                                Step::Busy(Some(Duration::from_millis(left as u64)))
                            }
                            None => Step::Failed(unexpected("permit_semaphore/acquire.lua", reply)),
                        }
                    }
                    _ => Step::Failed(unexpected("permit_semaphore/acquire.lua", reply)),
                },
                Err(e) if e.outcome_unknown() && delivery.was_sent() => Step::Unknown(
                    PendingIds {
                        ids,
                        delivery,
                        sent,
                    },
                    e,
                ),
                Err(e) => Step::Failed(e),
            }
        })
    }

    /// Cuts the attempt off, then looks for its first id: the script adds all of them at
    /// once, so one present means the attempt ran (and its permits are still held).
    fn resolve(
        &self,
        pending: PendingIds,
    ) -> BoxFuture<'_, Result<Option<(Vec<PermitId>, Instant)>>> {
        Box::pin(async move {
            let inner = &self.inner;
            let Some(first) = pending.ids.first() else {
                return Ok(None);
            };
            let mut cmd = Cmd::new();
            cmd.arg("ZSCORE").arg(&*inner.timeouts).arg(&first.0[..]);
            let patience = inner.shared.config.command_timeout * 2;
            let reply = wait::settle(
                &inner.shared,
                &pending.delivery,
                &inner.name,
                &cmd,
                patience,
            )
            .await?;
            Ok((reply != Value::Nil).then_some((pending.ids, pending.sent)))
        })
    }

    fn undo(&self, (ids, _): (Vec<PermitId>, Instant)) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Err(e) = self.inner.release_many(&ids).await {
                tracing::warn!(semaphore = %self.inner.name, error = %e, "giving back permits nobody received failed; they come back when their lease ends");
            }
        })
    }
}
