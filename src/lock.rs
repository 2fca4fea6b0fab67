//! The reentrant lock, compatible with Redisson's `RLock` (REDISSON_LAYOUT.md §2).

use std::fmt;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use crate::client::Client;
use crate::detach::Detachable;
use crate::error::{Error, Result};
use crate::guard::{Held, Kind, Release};
use crate::naming;
use crate::owner::Owner;
use crate::pubsub::UNLOCK_MESSAGE;
use crate::scripts;

/// How long an acquire attempt still in flight at the end of a `try_lock_for` wait may take to
/// answer before the call gives up on it (its grant, if any, is then undone).
const ATTEMPT_GRACE: Duration = Duration::from_millis(100);

/// Options for one acquisition: an explicit lease and/or an explicit owner.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redisson_sync::{LockOptions, Owner};
///
/// let opts = LockOptions::new().lease(Duration::from_secs(10)).owner(Owner::new(7));
/// assert_eq!(opts.lease_time(), Some(Duration::from_secs(10)));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockOptions {
    lease: Option<Duration>,
    owner: Option<Owner>,
}

impl LockOptions {
    /// No lease (the watchdog renews the lock while its guard lives) and the current owner.
    pub fn new() -> Self {
        Self::default()
    }

    /// An explicit lease: the lock expires this long after it is granted, and is never renewed
    /// (Redisson's `lock(leaseTime, unit)`). Must be at least 1 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Acquire for this owner instead of [`Owner::current`] (Redisson's `threadId` overloads).
    pub fn owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The explicit lease, if any.
    pub fn lease_time(&self) -> Option<Duration> {
        self.lease
    }

    /// The explicit owner, if any.
    pub fn explicit_owner(&self) -> Option<Owner> {
        self.owner
    }
}

/// What `PTTL` says about a lock key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// The key does not exist (`PTTL` = -2): the lock is free.
    Absent,
    /// The key exists without expiry (`PTTL` = -1).
    Persistent,
    /// The key expires after this long.
    Remaining(Duration),
}

impl Ttl {
    fn from_pttl(ms: i64) -> Self {
        match ms {
            -1 => Self::Persistent,
            ms if ms < 0 => Self::Absent,
            ms => Self::Remaining(Duration::from_millis(ms.unsigned_abs())),
        }
    }

    /// The value as Redis and Redisson's `remainTimeToLive()` report it: -2, -1 or milliseconds.
    pub fn as_redis_millis(self) -> i64 {
        match self {
            Self::Absent => -2,
            Self::Persistent => -1,
            Self::Remaining(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        }
    }
}

/// A reentrant distributed lock: Redisson's `RLock`.
///
/// The lock is the Redis hash `name` with one field `<client id>:<owner id>` whose value is the
/// hold count; its TTL is the lease. Waiters subscribe to `redisson_lock__channel:{name}` and are
/// woken by the `0` published on full release. Java services using Redisson's
/// `getLock(name)` on the same Redis share the lock with this one in both directions.
///
/// Reentrancy is per [`Owner`]: by default the current Tokio task. Every successful acquisition
/// returns a [`LockGuard`]; each guard releases one hold.
///
/// Fairness: none. Waiters woken by an unlock race for the lock, like Redisson's `RLock`; use a
/// fair lock for FIFO order.
///
/// A `Lock` is a cheap handle (client clone + name): create one per use or keep it.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.lock("order:42");
/// let guard = lock.lock().await?;
/// // ... critical section ...
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Lock {
    client: Client,
    name: Arc<str>,
    channel: Arc<str>,
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
            .field("client_id", &self.client.id())
            .finish()
    }
}

/// Reply of `lua/lock/acquire.lua`.
#[derive(Debug)]
enum AcquireReply {
    Acquired,
    /// Held by another owner; the key's PTTL in ms (-1 = no expiry).
    Held(i64),
}

/// Reply of `lua/lock/unlock.lua`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnlockReply {
    NotHeld,
    StillHeld,
    Released,
}

impl Lock {
    pub(crate) fn new(client: Client, name: String) -> Self {
        let channel = naming::lock_channel(&name).into();
        Self {
            client,
            name: name.into(),
            channel,
        }
    }

    /// The lock's name: its Redis key.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Acquires the lock, waiting as long as it takes; the lease is the watchdog timeout,
    /// renewed while the guard lives (Redisson's `lock()`).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds another Redis type; [`Error::Redis`] or
    /// [`Error::Timeout`] when Redis fails or does not answer within the command timeout;
    /// [`Error::Shutdown`] after [`Client::shutdown`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future at any point leaves the lock as it was. While it
    /// waits, it only holds a pub/sub registration, dropped with it. An acquire script that is
    /// in flight when the future is dropped runs to completion in a task of the client; if it
    /// granted the lock, that task releases the hold again at once.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// let guard = client.lock("order:42").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lock(&self) -> Result<LockGuard> {
        self.lock_with_options(&LockOptions::new()).await
    }

    /// Acquires the lock with the given lease and owner, waiting as long as it takes
    /// (Redisson's `lock(leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), plus [`Error::InvalidArgument`] for a lease under 1 ms.
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use std::time::Duration;
    /// use redisson_sync::LockOptions;
    ///
    /// let opts = LockOptions::new().lease(Duration::from_secs(10));
    /// let guard = client.lock("order:42").lock_with_options(&opts).await?;
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lock_with_options(&self, options: &LockOptions) -> Result<LockGuard> {
        match self.acquire(None, options).await? {
            Some(guard) => Ok(guard),
            // Without a deadline the loop only returns a guard or an error.
            None => Err(Error::UnexpectedReply {
                script: "lock/acquire.lua",
                detail: "gave up without a deadline".into(),
            }),
        }
    }

    /// Makes one attempt: `Some(guard)` if the lock was free or already held by this owner,
    /// `None` if another owner holds it (Redisson's `tryLock()`). One round trip, bounded by
    /// the command timeout.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// match client.lock("order:42").try_lock().await? {
    ///     Some(guard) => guard.unlock().await?,
    ///     None => println!("busy"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(Some(Duration::ZERO), &LockOptions::new())
            .await
    }

    /// Tries to acquire the lock for at most `wait` (Redisson's `tryLock(waitTime, unit)`).
    /// `None` means another owner held it for the whole wait.
    ///
    /// Returns within `wait` plus at most 100 ms even when Redis is stalled or down: an attempt
    /// still in flight at the deadline gets that long to answer.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Timeout`] when Redis never answered within the wait.
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use std::time::Duration;
    ///
    /// if let Some(guard) = client.lock("order:42").try_lock_for(Duration::from_secs(3)).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.acquire(Some(wait), &LockOptions::new()).await
    }

    /// Tries to acquire the lock for at most `wait` with the given lease and owner (Redisson's
    /// `tryLock(waitTime, leaseTime, unit)`). A zero `wait` makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for), plus [`Error::InvalidArgument`] for a lease
    /// under 1 ms.
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use std::time::Duration;
    /// use redisson_sync::{LockOptions, Owner};
    ///
    /// let opts = LockOptions::new().lease(Duration::from_secs(5)).owner(Owner::new(1));
    /// let lock = client.lock("order:42");
    /// if let Some(guard) = lock.try_lock_with_options(Duration::from_secs(1), &opts).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_lock_with_options(
        &self,
        wait: Duration,
        options: &LockOptions,
    ) -> Result<Option<LockGuard>> {
        self.acquire(Some(wait), options).await
    }

    /// Deletes the lock whoever holds it and wakes a waiter (Redisson's `forceUnlock()`).
    /// Returns `true` if the lock existed. Holders find out at their next renewal or release.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`], [`Error::Timeout`], [`Error::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in the sense that a dropped call may or may not have deleted the lock.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// if client.lock("order:42").force_unlock().await? {
    ///     println!("it was locked");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn force_unlock(&self) -> Result<bool> {
        self.client.ensure_open()?;
        let inner = self.client.inner();
        let mut invocation = scripts::LOCK_FORCE_UNLOCK.prepare_invoke();
        invocation
            .key(&*self.name)
            .key(&*self.channel)
            .arg(UNLOCK_MESSAGE)
            .arg(inner.publish_command);
        match inner
            .connections
            .script("force_unlock", &self.name, &invocation)
            .await?
        {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            other => Err(unexpected("lock/force_unlock.lua", &other)),
        }
    }

    /// `true` when anyone holds the lock (`EXISTS name`, Redisson's `isLocked()`).
    ///
    /// # Errors
    ///
    /// [`Error::Redis`], [`Error::Timeout`], [`Error::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// let locked = client.lock("order:42").is_locked().await?;
    /// println!("locked: {locked}");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn is_locked(&self) -> Result<bool> {
        let v = self
            .query("is_locked", redis::cmd("EXISTS").arg(&*self.name))
            .await?;
        Ok(matches!(v, Value::Int(n) if n > 0))
    }

    /// `true` when `owner` of this client holds the lock (`HEXISTS`, Redisson's
    /// `isHeldByThread`). Use `Owner::current()` for "held by me".
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`], [`Error::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use redisson_sync::Owner;
    /// let mine = client.lock("order:42").is_held_by(Owner::current()).await?;
    /// println!("held by this task: {mine}");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        let field = self.field(owner);
        let v = self
            .query(
                "is_held_by",
                redis::cmd("HEXISTS").arg(&*self.name).arg(&field),
            )
            .await?;
        Ok(matches!(v, Value::Int(1)))
    }

    /// How many times `owner` of this client holds the lock; 0 when it does not (`HGET`,
    /// Redisson's `getHoldCount()`).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Timeout`], [`Error::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use redisson_sync::Owner;
    /// let holds = client.lock("order:42").hold_count(Owner::current()).await?;
    /// println!("{holds} holds");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn hold_count(&self, owner: Owner) -> Result<u64> {
        let field = self.field(owner);
        let v = self
            .query(
                "hold_count",
                redis::cmd("HGET").arg(&*self.name).arg(&field),
            )
            .await?;
        match v {
            Value::Nil => Ok(0),
            other => redis::from_redis_value::<u64>(other.clone())
                .map_err(|_| unexpected("HGET", &other)),
        }
    }

    /// The lock's remaining lease (`PTTL`, Redisson's `remainTimeToLive()`).
    ///
    /// # Errors
    ///
    /// [`Error::Redis`], [`Error::Timeout`], [`Error::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// use redisson_sync::Ttl;
    /// if let Ttl::Remaining(left) = client.lock("order:42").remaining_ttl().await? {
    ///     println!("{left:?} left");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn remaining_ttl(&self) -> Result<Ttl> {
        match self
            .query("remaining_ttl", redis::cmd("PTTL").arg(&*self.name))
            .await?
        {
            Value::Int(ms) => Ok(Ttl::from_pttl(ms)),
            other => Err(unexpected("PTTL", &other)),
        }
    }

    fn field(&self, owner: Owner) -> String {
        naming::holder_field(self.client.id(), owner.id())
    }

    async fn query(&self, op: &'static str, cmd: &redis::Cmd) -> Result<Value> {
        self.client.ensure_open()?;
        self.client
            .inner()
            .connections
            .query(op, &self.name, cmd)
            .await
    }

    /// The acquire loop of REDISSON_LAYOUT.md §1.10: try; subscribe; then try again and wait
    /// for an unlock message or the returned TTL (capped by the re-check interval), in a loop.
    /// `wait`: `None` waits forever, `Some(ZERO)` makes one attempt.
    async fn acquire(
        &self,
        wait: Option<Duration>,
        options: &LockOptions,
    ) -> Result<Option<LockGuard>> {
        self.client.ensure_open()?;
        let lease_ms = match options.lease {
            Some(lease) => Some(lease_millis(lease)?),
            None => None,
        };
        let owner = options.owner.unwrap_or_else(Owner::current);
        let attempt = Attempt {
            hold: Release {
                client: self.client.clone(),
                kind: Kind::Lock {
                    channel: self.channel.clone(),
                },
                name: self.name.clone(),
                field: self.field(owner),
                lease_ms: lease_ms.unwrap_or_else(|| self.watchdog_ms()),
            },
            deadline: wait.map(|w| Instant::now() + w),
        };
        let grant = |attempt: Attempt| {
            Some(LockGuard {
                held: Held::new(attempt.hold, owner, options.lease, options.lease.is_none()),
            })
        };

        match attempt.run(false).await? {
            Outcome::Acquired => return Ok(grant(attempt)),
            Outcome::Held(_) => {}
            Outcome::GaveUp => return Ok(None),
        }
        if wait == Some(Duration::ZERO) {
            return Ok(None);
        }

        let config = &self.client.inner().config;
        let subscription = self.client.inner().pubsub.subscribe(&self.channel);
        // Wait for Redis to confirm the subscription, but never past the deadline: without it
        // the loop still re-checks every `recheck_interval`.
        let confirm_for = attempt
            .remaining()
            .map_or(config.command_timeout, |r| r.min(config.command_timeout));
        match tokio::time::timeout(confirm_for, subscription.ready()).await {
            Ok(Ok(())) => {}
            Ok(Err(Error::Shutdown)) => return Err(Error::Shutdown),
            Ok(Err(e)) => {
                tracing::debug!(lock = %self.name, error = %e, "subscribe failed; polling");
            }
            Err(_) => {
                tracing::debug!(lock = %self.name, "subscribe not confirmed in time; polling");
            }
        }

        loop {
            let mut notified = pin!(subscription.notify().notified());
            // Registered before the attempt: an unlock published after the attempt's reply is
            // not lost (tokio's `Notified::enable` pattern).
            notified.as_mut().enable();
            let ttl = match attempt.run(true).await? {
                Outcome::Acquired => return Ok(grant(attempt)),
                Outcome::Held(ttl) => ttl,
                Outcome::GaveUp => return Ok(None),
            };
            let mut sleep = config.recheck_interval;
            if ttl >= 0 {
                sleep = sleep
                    .min(Duration::from_millis(ttl.unsigned_abs()).max(Duration::from_millis(1)));
            }
            if let Some(remaining) = attempt.remaining() {
                if remaining.is_zero() {
                    return Ok(None);
                }
                sleep = sleep.min(remaining);
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(sleep) => {}
                () = self.client.shut_down() => return Err(Error::Shutdown),
            }
        }
    }

    fn watchdog_ms(&self) -> u64 {
        u64::try_from(self.client.config().watchdog_timeout.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A lease in whole milliseconds, as the scripts take it.
fn lease_millis(lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if ms == 0 {
        return Err(Error::InvalidArgument(format!(
            "a lease must be at least 1 ms, got {lease:?}"
        )));
    }
    if ms > crate::config::MAX_LEASE_MS as u128 {
        return Err(Error::InvalidArgument(format!(
            "a lease must be at most 2^62 ms (Redis rejects later expiry times), got {lease:?}"
        )));
    }
    Ok(ms as u64)
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
    /// again if it was granted.
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
        let call = async move {
            // Wait for the reply up to the lease, but let a shutdown end the wait after one more
            // command timeout: `Client::shutdown` waits for a detached call.
            let shutdown_grace = async {
                hold.client.shut_down().await;
                tokio::time::sleep(command_timeout).await;
            };
            let reply = tokio::select! {
                reply = acquire_script(&hold, reply_limit) => reply,
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
            |(reply, hold): (Result<AcquireReply>, Release)| async move {
                match reply {
                    Ok(AcquireReply::Acquired) => {
                        tracing::debug!(lock = %hold.name, "acquire abandoned after it was granted; releasing");
                        if let Err(e) = hold.run().await {
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

async fn acquire_script(hold: &Release, reply_limit: Duration) -> Result<AcquireReply> {
    let mut invocation = scripts::LOCK_ACQUIRE.prepare_invoke();
    invocation
        .key(&*hold.name)
        .arg(hold.lease_ms)
        .arg(&hold.field);
    match hold
        .client
        .inner()
        .connections
        .script_with_limit("acquire", &hold.name, &invocation, reply_limit)
        .await?
    {
        Value::Nil => Ok(AcquireReply::Acquired),
        Value::Int(ttl) => Ok(AcquireReply::Held(ttl)),
        other => Err(unexpected("lock/acquire.lua", &other)),
    }
}

async fn unlock_script(release: &Release, channel: &str) -> Result<UnlockReply> {
    let inner = release.client.inner();
    let mut invocation = scripts::LOCK_UNLOCK.prepare_invoke();
    invocation
        .key(&*release.name)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(release.lease_ms)
        .arg(&release.field)
        .arg(inner.publish_command);
    match inner
        .connections
        .script("unlock", &release.name, &invocation)
        .await?
    {
        Value::Nil => Ok(UnlockReply::NotHeld),
        Value::Int(0) => Ok(UnlockReply::StillHeld),
        Value::Int(1) => Ok(UnlockReply::Released),
        other => Err(unexpected("lock/unlock.lua", &other)),
    }
}

/// Releases one hold (guard unlock, drop, or undo of an abandoned acquire).
pub(crate) async fn release(release: &Release, channel: &str) -> Result<()> {
    match unlock_script(release, channel).await? {
        UnlockReply::StillHeld | UnlockReply::Released => Ok(()),
        UnlockReply::NotHeld => Err(Error::NotHeld {
            name: release.name.to_string(),
            holder: release.field.clone(),
        }),
    }
}

fn unexpected(script: &'static str, value: &Value) -> Error {
    Error::UnexpectedReply {
        script,
        detail: format!("{value:?}"),
    }
}

/// A held [`Lock`]: one hold of one owner.
///
/// Like tokio's `OwnedMutexGuard`, the guard owns what it needs (`'static`, `Send + Sync`): it
/// can be moved to another task and released there. It does not lock anything in-process.
///
/// # Release on drop
///
/// Dropping the guard stops its lease renewal at once and schedules the release in a
/// background task of the client; it returns immediately, never blocks and never panics (also
/// on a thread outside the runtime, and during unwinding; there is no poisoning). The lock
/// becomes free shortly after the drop, not at it: use [`unlock`](Self::unlock) when the next
/// step depends on the lock being free. Call [`Client::shutdown`] before the runtime ends, or
/// releases still scheduled are lost and those locks stay held until their lease expires.
#[clippy::has_significant_drop]
#[must_use = "if unused the lock will immediately be released"]
#[derive(Debug)]
pub struct LockGuard {
    held: Held,
}

impl LockGuard {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.held.name()
    }

    /// The owner holding the lock through this guard.
    pub fn owner(&self) -> Owner {
        self.held.owner()
    }

    /// The explicit lease, or `None` when the watchdog renews the lock.
    pub fn lease(&self) -> Option<Duration> {
        self.held.lease()
    }

    /// `true` once the watchdog found the lock gone (expired during a stall, force-unlocked,
    /// deleted). Locks with an explicit lease are not watched and never report lost.
    pub fn is_lost(&self) -> bool {
        self.held.is_lost()
    }

    /// Resolves when the watchdog finds the lock lost; pends forever for an explicit lease.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// # async fn work() {}
    /// let guard = client.lock("job").lock().await?;
    /// tokio::select! {
    ///     () = work() => guard.unlock().await?,
    ///     () = guard.lost() => eprintln!("lock lost, stopping"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lost(&self) {
        self.held.lost().await;
    }

    /// Releases this hold (Redisson's `unlock()`): decrements the hold count, and on the last
    /// hold deletes the key and publishes the unlock message.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the watchdog had found the lock lost (Redis is not touched);
    /// [`Error::NotHeld`] when the owner no longer holds it (lease expired, force-unlocked,
    /// taken over); [`Error::Redis`], [`Error::Timeout`]; [`Error::Shutdown`] after
    /// [`Client::shutdown`] (the lock then expires with its lease).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release completes even if this future is dropped (it then finishes in a
    /// task of the client); only its result is lost.
    ///
    /// # Examples
    ///
    /// ```rust,no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_sync::Error> {
    /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
    /// let guard = client.lock("order:42").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn unlock(self) -> Result<()> {
        self.held.unlock().await
    }

    /// Stops renewal and keeps the lock without releasing it: it stays held until its lease
    /// expires (like tokio's `SemaphorePermit::forget`).
    pub fn forget(self) {
        self.held.forget();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_whole_milliseconds_that_redis_accepts() {
        assert!(lease_millis(Duration::ZERO).is_err());
        assert!(lease_millis(Duration::from_micros(999)).is_err());
        assert_eq!(lease_millis(Duration::from_millis(1)).unwrap(), 1);
        assert_eq!(lease_millis(Duration::from_micros(1500)).unwrap(), 1);
        let max = Duration::from_millis(crate::config::MAX_LEASE_MS);
        assert_eq!(lease_millis(max).unwrap(), 1 << 62);
        let err = lease_millis(max + Duration::from_millis(1)).unwrap_err();
        assert!(err.to_string().contains("at most 2^62 ms"), "{err}");
        assert!(lease_millis(Duration::MAX).is_err());
    }

    #[test]
    fn ttl_maps_pttl_replies() {
        assert_eq!(Ttl::from_pttl(-2), Ttl::Absent);
        assert_eq!(Ttl::from_pttl(-1), Ttl::Persistent);
        assert_eq!(Ttl::from_pttl(0), Ttl::Remaining(Duration::ZERO));
        assert_eq!(
            Ttl::from_pttl(1500),
            Ttl::Remaining(Duration::from_millis(1500))
        );
        for ms in [-2, -1, 0, 1500] {
            assert_eq!(Ttl::from_pttl(ms).as_redis_millis(), ms);
        }
    }
}
