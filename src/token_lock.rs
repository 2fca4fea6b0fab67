//! The plain token lock: `SET name <token> NX PX lease`, released by a Lua compare-and-delete,
//! renewed by a compare-and-`PEXPIRE` (its scripts are in `lua/token/`). Not a Redisson
//! structure: the lock many services hand-write before adopting Redisson.
//!
//! It waits through the wait engine by back-off polling (such locks publish nothing), renews
//! through the watchdog with its own [`Renewal`] kind, and keeps its holds in the client's
//! record of holds ([`crate::holds`]) like the locks do, keyed by the token: operations on one
//! token run one at a time, so an acquire or release whose reply was lost is resolved (cut off
//! at the server, then `GET name` compared with the token) before the next one on that token.

use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Cmd, Script, ScriptInvocation, Value};
use tokio::time::Instant;
use tracing::Instrument;

use crate::conn::{Call, Delivery};
use crate::error::{Error, Result};
use crate::holds::Op;
use crate::layout;
use crate::lock::{lease_millis, unexpected};
use crate::observe::{self, Subject, Tag};
use crate::options::LockOptions;
use crate::owner::Owner;
use crate::shared::Shared;
use crate::wait::{self, Acquire, Backoff, BoxFuture, Detachable, Step, Strategy};
use crate::watchdog::{Lease, Loss, Renewal};

/// `lua/token/acquire.lua`: `SET N T NX PX lease`, or why not.
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/token/acquire.lua")));

/// `lua/token/unlock.lua`: compare-and-delete.
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/token/unlock.lua")));

/// `lua/token/renew.lua`: the watchdog's batched compare-and-`PEXPIRE`.
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/token/renew.lua")));

/// The acquire script's reply when the lock already holds the attempt's own token.
const HELD_BY_TOKEN: &[u8] = b"held";

/// The first delay between two polls of a waiter; it doubles up to [`POLL_MAX`].
const POLL_INITIAL: Duration = Duration::from_millis(2);

/// The longest delay between two polls of a waiter: a release is noticed within about this.
const POLL_MAX: Duration = Duration::from_millis(100);

/// What a token lock writes as its value: how the token of an acquisition is made.
///
/// The default, [`Random`](Self::Random), is what a hand-written lock usually does, and the
/// only format whose lost replies are resolved exactly (see [`TokenLock`]). The fixed formats
/// exist to write values of the same shape as an existing service does, `<uuid>` or
/// `<uuid>:<thread id>`, so that tools and code reading the value keep working; with them,
/// every acquisition of the same holder writes the same value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenFormat {
    /// 32 random lowercase hex characters (a v4 UUID without hyphens), fresh for every
    /// acquisition.
    #[default]
    Random,
    /// The client's id, [`Client::id`](crate::Client::id): a v4 UUID in Java's
    /// `UUID.toString()` format. Every task of the client is then the same holder: a second
    /// acquisition while the first holds gets [`Error::NotReentrant`], it does not wait.
    ClientId,
    /// `<client id>:<owner id>`, like a Java `<uuid>:<threadId>` value (and a Redisson lock's
    /// holder field): the owner is [`Owner::current`] or the one of
    /// [`LockOptions::owner`].
    ClientIdAndOwner,
}

/// A plain distributed lock: the Redis string `name` holding the holder's token, taken with
/// `SET name <token> NX PX <lease>` and released by a Lua compare-and-delete
/// (`if GET name == token then DEL name`): the lock many services hand-write before adopting
/// Redisson.
///
/// # Not a Redisson format
///
/// Redisson has no such structure: its `RLock` is a hash of holder fields and hold counts
/// ([`Lock`](crate::Lock)). A Redisson client cannot share a token lock (its scripts fail on a
/// string key, and this lock's acquire reports [`Error::WrongType`] on a Redisson lock's
/// hash). What can share it is any service, in Java or elsewhere, that hand-wrote the same
/// protocol: `SET NX PX` to acquire, compare-and-delete to release, compare-and-`PEXPIRE` to
/// extend. Such a service and this crate exclude each other on the same name, and neither
/// ever deletes or extends a value it did not write.
///
/// # Token formats
///
/// The token is 32 random hex characters per acquisition by default
/// ([`TokenFormat::Random`]). To write values of the shape an existing service writes, use
/// [`with_format`](Self::with_format): [`TokenFormat::ClientId`] writes the client's UUID
/// (`<uuid>`), [`TokenFormat::ClientIdAndOwner`] writes `<uuid>:<owner id>`, like a Java
/// `<uuid>:<threadId>` value. A holder is identified by its value alone: a handle whose
/// format and owner produce the value already in Redis sees the lock as its own, and gets
/// [`Error::NotReentrant`] from an acquire (Redis unchanged).
///
/// # Semantics
///
/// - **Not reentrant**: acquiring while the same token holds the lock fails at once with
///   [`Error::NotReentrant`], never a deadlock (only possible with the fixed formats; random
///   tokens never meet).
/// - **Leases**: with an explicit lease ([`LockOptions::lease`]) the key expires that long
///   after the grant and is never extended. Without one the lease is the client's
///   `watchdog_timeout`, extended every `watchdog_timeout / 3` by a compare-and-`PEXPIRE`
///   while the guard lives; the guard reports lost when the extension finds another value.
/// - **No fairness, waiting by polling**: nothing is published, so a waiter polls with
///   exponential back-off (2 ms doubling to 100 ms) and notices a release within about the
///   current delay. Waiters are served in no particular order.
/// - **Release**: a [`TokenGuard`] releases on drop (in the background) or with
///   [`unlock`](TokenGuard::unlock), which reports [`Error::NotHeld`] when the value is no
///   longer its token (it expired and maybe another holder took it: that holder's value is
///   left alone).
///
/// # Failure behaviour
///
/// An acquire whose reply is lost (a timeout, a connection reset after it was sent) is cut off
/// at the server (`CLIENT KILL`: what Redis has not run of it, it never runs), then `GET name`
/// says whether it ran: the value is the attempt's token. With random tokens this is exact;
/// with a fixed format a value written by another process with the same token is taken for
/// this attempt's grant. A release whose reply is lost is cut off and read the same way, and
/// sent once more if the token is still there. A dropped acquire future never keeps the lock:
/// an attempt in flight finishes in a task of the client, which releases what it granted.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use redisson_sync::{LockOptions, Owner, TokenFormat};
///
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let job = client.token_lock("job:nightly");
/// let guard = job.lock().await?; // renewed by the watchdog while the guard lives
/// // ... critical section ...
/// guard.unlock().await?;
///
/// // Values shaped like an existing service's `<uuid>:<thread id>`, with a 10 s lease.
/// let shared = client.token_lock("report:7").with_format(TokenFormat::ClientIdAndOwner);
/// let opts = LockOptions::new().lease(Duration::from_secs(10)).owner(Owner::new(1));
/// if let Some(guard) = shared.try_lock_with_options(Duration::from_secs(2), &opts).await? {
///     guard.unlock().await?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct TokenLock {
    shared: Arc<Shared>,
    name: Arc<str>,
    format: TokenFormat,
}

impl fmt::Debug for TokenLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenLock")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("client_id", &self.shared.id)
            .finish()
    }
}

impl TokenLock {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        Self {
            shared,
            name: name.into(),
            format: TokenFormat::default(),
        }
    }

    /// The lock's name: its Redis key.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The format of the tokens this handle writes.
    pub fn format(&self) -> TokenFormat {
        self.format
    }

    /// This handle with tokens of `format` (see [Token formats](Self#token-formats)).
    #[must_use]
    pub fn with_format(mut self, format: TokenFormat) -> Self {
        self.format = format;
        self
    }

    /// Acquires the lock, waiting as long as it takes; the watchdog extends its lease while the
    /// guard lives.
    ///
    /// # Errors
    ///
    /// [`Error::NotReentrant`] when the lock already holds this acquisition's token (fixed
    /// formats only; Redis unchanged); [`Error::WrongType`] when `name` holds a key of another
    /// type (nothing changed); [`Error::Shutdown`]; Redis errors that are not transient
    /// ([`Error::Redis`], [`Error::Timeout`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future never leaves the lock taken. An attempt in flight
    /// finishes in a task of the client, which releases what it granted.
    pub async fn lock(&self) -> Result<TokenGuard> {
        self.lock_with_options(&LockOptions::new()).await
    }

    /// Acquires the lock with the lease and owner of `options`, waiting as long as it takes.
    /// Without a lease the watchdog extends it; the owner only matters for
    /// [`TokenFormat::ClientIdAndOwner`].
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::InvalidArgument`] for a lease under 1 ms or over
    /// 2^62 ms (nothing sent).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn lock_with_options(&self, options: &LockOptions) -> Result<TokenGuard> {
        match self.acquire(None, options).await? {
            Some(guard) => Ok(guard),
            // Without a deadline the engine only returns a grant or an error.
            None => Err(Error::UnexpectedReply {
                script: "token/acquire.lua",
                detail: "gave up without a deadline".into(),
            }),
        }
    }

    /// Makes one attempt: `None` when another token holds the lock.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), transient Redis errors included.
    pub async fn try_lock(&self) -> Result<Option<TokenGuard>> {
        self.acquire(Some(Duration::ZERO), &LockOptions::new())
            .await
    }

    /// Acquires the lock, waiting at most `wait`: `None` when it did not come free in time.
    /// Returns within `wait` plus 100 ms, also when Redis stalls.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<TokenGuard>> {
        self.acquire(Some(wait), &LockOptions::new()).await
    }

    /// [`try_lock_for`](Self::try_lock_for) with the lease and owner of `options`
    /// (`wait == ZERO`: one attempt).
    ///
    /// # Errors
    ///
    /// As [`lock_with_options`](Self::lock_with_options).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock_with_options(
        &self,
        wait: Duration,
        options: &LockOptions,
    ) -> Result<Option<TokenGuard>> {
        self.acquire(Some(wait), options).await
    }

    /// The token of one acquisition by `owner`.
    fn token(&self, owner: Owner) -> Arc<str> {
        match self.format {
            TokenFormat::Random => uuid::Uuid::new_v4().simple().to_string().into(),
            TokenFormat::ClientId => self.shared.id.as_str().into(),
            TokenFormat::ClientIdAndOwner => {
                layout::holder_field(&self.shared.id, owner.id()).into()
            }
        }
    }

    async fn acquire(
        &self,
        wait: Option<Duration>,
        options: &LockOptions,
    ) -> Result<Option<TokenGuard>> {
        self.shared.ensure_open()?;
        let explicit_lease = options.lease_time();
        let lease_ms = match explicit_lease {
            Some(lease) => lease_millis(lease)?,
            None => self.shared.config.watchdog_ms(),
        };
        let owner = options.explicit_owner().unwrap_or_else(Owner::current);
        let token = self.token(owner);
        let spec = Arc::new(Spec {
            shared: self.shared.clone(),
            name: self.name.clone(),
            slot: format!("token {token}").into(),
            token,
            random: self.format == TokenFormat::Random,
            lease_ms,
            owner,
        });
        let acquire = Arc::new(TokenAcquire {
            spec,
            explicit_lease,
        });
        let hold = wait::acquire(&self.shared, acquire, wait).await?;
        Ok(hold.map(|hold| TokenGuard {
            _metric: hold.spec.tag().hold(),
            hold,
        }))
    }
}

/// What one run of the acquire script said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AcquireReply {
    /// `SET NX` set the token.
    Acquired,
    /// The lock holds this very token already.
    HeldByToken,
    /// Another token holds it; its PTTL in ms (-1: no expiry).
    Busy(i64),
}

/// Everything needed to acquire or release one token's hold; runs on its own, detached from
/// callers.
#[derive(Debug)]
struct Spec {
    shared: Arc<Shared>,
    name: Arc<str>,
    token: Arc<str>,
    /// The key of this token in the client's record of holds: the token, marked so that it
    /// never meets a lock's holder field.
    slot: Arc<str>,
    /// The token is random: nobody but this acquisition ever writes it.
    random: bool,
    /// The lease: explicit, or the watchdog timeout.
    lease_ms: u64,
    /// The owner of the acquisition (part of the token only with
    /// [`TokenFormat::ClientIdAndOwner`]; always in the spans).
    owner: Owner,
}

impl Spec {
    fn subject(&self) -> Subject<'_> {
        Subject {
            kind: "token",
            name: &self.name,
            client_id: &self.shared.id,
            owner: Some(self.owner),
        }
    }

    fn tag(&self) -> Tag {
        Tag::new("token", &self.name, self.shared.config.metrics_name_label)
    }

    fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// How long an unknown outcome is retried before it is given up (a hold it granted then
    /// expires with its lease).
    fn resolve_limit(&self) -> Duration {
        (self.lease() + self.shared.config.command_timeout) * 2
    }

    /// Starts an operation on this token's hold (one at a time per token and client).
    async fn enter(&self, patience: Option<Duration>) -> Op {
        self.shared
            .holds
            .enter(&self.name, &self.slot, patience)
            .await
    }

    fn not_held(&self) -> Error {
        Error::NotHeld {
            name: self.name.to_string(),
            holder: self.token.to_string(),
        }
    }

    /// Runs the acquire script once.
    async fn run_acquire(&self, limit: Duration, delivery: &Delivery) -> Result<AcquireReply> {
        let mut invocation = ACQUIRE.prepare_invoke();
        invocation
            .key(&*self.name)
            .arg(&*self.token)
            .arg(self.lease_ms);
        let call = Call::write("acquire", &self.name, &invocation)
            .limit(limit)
            .tracked(delivery);
        match self.shared.conn.call(call).await? {
            Value::Nil => Ok(AcquireReply::Acquired),
            Value::Int(pttl) => Ok(AcquireReply::Busy(pttl)),
            Value::BulkString(s) if s == HELD_BY_TOKEN => Ok(AcquireReply::HeldByToken),
            Value::SimpleString(s) if s.as_bytes() == HELD_BY_TOKEN => {
                Ok(AcquireReply::HeldByToken)
            }
            other => Err(unexpected("token/acquire.lua", &other)),
        }
    }

    /// Runs the compare-and-delete once: `true` if it deleted the token.
    async fn run_release(&self, delivery: &Delivery) -> Result<bool> {
        let mut invocation = UNLOCK.prepare_invoke();
        invocation.key(&*self.name).arg(&*self.token);
        let call = Call::write("unlock", &self.name, &invocation).tracked(delivery);
        match self.shared.conn.call(call).await? {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            other => Err(unexpected("token/unlock.lua", &other)),
        }
    }

    /// Cuts off the connection a request of unknown outcome went out on, then reads whether
    /// the lock holds the token, retrying transient errors (bounded; at most once more after
    /// a shutdown). What it reads after the cut-off is final: the request ran before it, or
    /// never will.
    async fn cut_off_and_read(&self, delivery: &Delivery) -> Result<bool> {
        let cmd = Cmd::get(&*self.name);
        match wait::settle(
            &self.shared,
            delivery,
            &self.name,
            &cmd,
            self.resolve_limit(),
        )
        .await
        {
            Ok(Value::Nil) => Ok(false),
            Ok(Value::BulkString(value)) => Ok(value == self.token.as_bytes()),
            Ok(other) => Err(unexpected("GET", &other)),
            Err(e) if e.is_wrong_type() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Extends a token lock's lease while it holds the token: compare-and-`PEXPIRE`
/// (`lua/token/renew.lua`).
#[derive(Debug)]
struct TokenRenewal;

impl Renewal for TokenRenewal {
    fn kind(&self) -> &'static str {
        "token_lock"
    }

    fn script(&self) -> &'static Script {
        &RENEW
    }

    fn add(&self, batch: &mut ScriptInvocation<'static>, key: &str, field: &str) {
        batch.key(key).arg(field);
    }
}

static TOKEN_RENEWAL: LazyLock<Arc<dyn Renewal>> = LazyLock::new(|| Arc::new(TokenRenewal));

/// One acquisition of a token lock, as the wait engine drives it.
#[derive(Debug)]
struct TokenAcquire {
    spec: Arc<Spec>,
    /// The explicit lease, or `None`: the watchdog extends the hold.
    explicit_lease: Option<Duration>,
}

/// An attempt whose reply never came: its operation and where it went, kept until resolved.
#[derive(Debug)]
struct PendingAcquire {
    op: Op,
    delivery: Delivery,
    sent: Instant,
}

impl TokenAcquire {
    /// The hold granted by a request sent at `sent`; ends `op`.
    fn grant(&self, mut op: Op, sent: Instant) -> Hold {
        if op.held() > 0 {
            // The client counted an earlier hold of this token, yet SET NX found the key free:
            // that hold is gone (expired, deleted), and its guards are lost.
            op.correct(0);
        }
        let tainted = op.tainted();
        let hold = Hold::granted(&self.spec, self.explicit_lease, sent);
        op.granted(&hold.lease);
        if tainted {
            // The record it was granted on cannot be trusted: do not vouch for it.
            hold.lease.raise(Loss::Expired);
        }
        hold
    }

    /// The hold of a grant, unless it arrived too late to be used (its lease is spent or
    /// about to be): then it is given back and `None` returned.
    async fn grant_in_time(&self, op: Op, sent: Instant) -> Option<Hold> {
        let hold = self.grant(op, sent);
        if Instant::now() < hold.lease.deadline() {
            return Some(hold);
        }
        tracing::warn!(lock = %self.spec.name, "a grant arrived after its lease; releasing it");
        hold.discard().await;
        None
    }
}

impl Acquire for TokenAcquire {
    type Grant = Hold;
    type Pending = PendingAcquire;

    fn subject(&self) -> Subject<'_> {
        self.spec.subject()
    }

    fn strategy(&self) -> Strategy {
        Strategy::Backoff(Backoff::exponential(POLL_INITIAL, POLL_MAX, 2))
    }

    fn attempt(
        &self,
        _wait: Option<Duration>,
        limit: Duration,
    ) -> BoxFuture<'_, Step<Hold, PendingAcquire>> {
        Box::pin(async move {
            let spec = &self.spec;
            let op = spec.enter(Some(limit)).await;
            let delivery = Delivery::default();
            let sent = Instant::now();
            match spec.run_acquire(limit, &delivery).await {
                Ok(AcquireReply::Acquired) => match self.grant_in_time(op, sent).await {
                    Some(hold) => Step::Granted(hold),
                    // Busy, so the caller tries again within its wait.
                    None => Step::Busy(Some(Duration::ZERO)),
                },
                Ok(AcquireReply::HeldByToken) if spec.random && op.held() == 0 => {
                    // Only this acquisition writes its random token: an earlier attempt of it
                    // whose outcome could not be resolved ran after all. Give that grant back
                    // (its validity is unknown) and try again.
                    tracing::debug!(lock = %spec.name, "an unresolved attempt ran after all; giving it back");
                    if let Err(e) = spec.run_release(&Delivery::default()).await {
                        tracing::debug!(lock = %spec.name, error = %e, "giving back an unresolved grant failed");
                    }
                    op.unchanged();
                    Step::Busy(Some(Duration::ZERO))
                }
                Ok(AcquireReply::HeldByToken) => {
                    op.unchanged();
                    Step::Failed(Error::NotReentrant {
                        name: spec.name.to_string(),
                        holder: spec.token.to_string(),
                    })
                }
                Ok(AcquireReply::Busy(pttl)) => {
                    op.unchanged();
                    // -1: no expiry, no hint.
                    Step::Busy(u64::try_from(pttl).ok().map(Duration::from_millis))
                }
                Err(e) if e.outcome_unknown() && delivery.was_sent() => {
                    Step::Unknown(PendingAcquire { op, delivery, sent }, e)
                }
                Err(e) => {
                    op.unchanged();
                    Step::Failed(e)
                }
            }
        })
    }

    /// Cuts the attempt off, then reads the lock: the attempt's token there means it ran.
    fn resolve(&self, pending: PendingAcquire) -> BoxFuture<'_, Result<Option<Hold>>> {
        Box::pin(async move {
            let PendingAcquire { op, delivery, sent } = pending;
            // On error `op` is dropped unresolved: the slot is marked tainted.
            let holds_token = self.spec.cut_off_and_read(&delivery).await?;
            // The token there means the attempt ran, unless a guard of this client already
            // holds that (fixed) token: the attempt then found it taken and granted nothing.
            if holds_token && op.held() == 0 {
                return Ok(self.grant_in_time(op, sent).await);
            }
            op.unchanged();
            Ok(None)
        })
    }

    fn undo(&self, grant: Hold) -> BoxFuture<'_, ()> {
        Box::pin(grant.discard())
    }
}

/// Releases one hold (whose guard has `lease`), resolving an unknown outcome: the release is
/// cut off and the lock read; if the token is still there it is sent once more. Settling an
/// unknown outcome is awaited for at most the command timeout; it then goes on in a task of
/// the client (the token's next operation waits for it) and this returns `Timeout`.
async fn release(spec: &Arc<Spec>, lease: &Arc<Lease>) -> Result<()> {
    let patience = spec.shared.config.command_timeout;
    let op = spec.enter(Some(patience)).await;
    let delivery = Delivery::default();
    match spec.run_release(&delivery).await {
        Err(e) if e.outcome_unknown() && delivery.was_sent() => {
            let settle = settle_release(spec.clone(), lease.clone(), op, delivery, e);
            wait::release_in_time(&spec.shared, spec.name.clone(), patience, settle).await
        }
        reply => released(spec, lease, op, reply),
    }
}

/// Ends a release operation with its reply.
fn released(spec: &Spec, lease: &Arc<Lease>, mut op: Op, reply: Result<bool>) -> Result<()> {
    match reply {
        Ok(true) => {
            op.released(lease);
            Ok(())
        }
        Ok(false) => {
            op.correct(0);
            op.unchanged();
            Err(spec.not_held())
        }
        Err(e) => {
            op.unchanged();
            Err(e)
        }
    }
}

/// Settles a release whose reply never came: cuts it off, reads the lock; sends the release
/// once more if the token is still there.
async fn settle_release(
    spec: Arc<Spec>,
    lease: Arc<Lease>,
    op: Op,
    mut delivery: Delivery,
    mut error: Error,
) -> Result<()> {
    for sends in 1..=2 {
        // On error `op` is dropped unresolved: the slot is marked tainted.
        if !spec.cut_off_and_read(&delivery).await? {
            op.released(&lease);
            return Ok(());
        }
        if sends < 2 {
            tracing::debug!(lock = %spec.name, error = %error, "a release did not run; sending it again");
            let again = Delivery::default();
            match spec.run_release(&again).await {
                Err(e) if e.outcome_unknown() && again.was_sent() => {
                    delivery = again;
                    error = e;
                }
                reply => return released(&spec, &lease, op, reply),
            }
        }
    }
    // Still there after a second try of unknown outcome.
    op.unchanged();
    Err(error)
}

/// One hold of a token lock, owned by a guard (or by the engine until it hands it over).
/// Dropping it releases the hold in the background.
#[derive(Debug)]
struct Hold {
    spec: Arc<Spec>,
    /// `false` once the hold was given up (released, forgotten).
    armed: bool,
    /// The explicit lease, or `None`: the watchdog extends the hold.
    lease_time: Option<Duration>,
    /// Until when the client vouches for the hold, and whether it is lost.
    lease: Arc<Lease>,
    /// Registered with the watchdog.
    renewed: bool,
}

impl Hold {
    /// A hold granted by a request sent at `sent`: registered with the watchdog when it has no
    /// explicit lease, otherwise valid until `sent + lease`.
    fn granted(spec: &Arc<Spec>, lease_time: Option<Duration>, sent: Instant) -> Self {
        let tag = spec.tag();
        let (lease, renewed) = match lease_time {
            Some(lease) => (Lease::new(sent, lease, tag), false),
            None => {
                let lease = spec.shared.watchdog.register(
                    &TOKEN_RENEWAL,
                    &spec.name,
                    &spec.token,
                    sent,
                    &tag,
                    Some(spec.owner),
                );
                (lease, true)
            }
        };
        Self {
            spec: spec.clone(),
            armed: true,
            lease_time,
            lease,
            renewed,
        }
    }

    /// Stops renewal and marks the hold given up, so `Drop` does nothing more; `false` if it
    /// was already.
    fn disarm(&mut self) -> bool {
        if !std::mem::take(&mut self.armed) {
            return false;
        }
        if std::mem::take(&mut self.renewed) {
            self.spec.shared.watchdog.unregister(
                TOKEN_RENEWAL.kind(),
                &self.spec.name,
                &self.spec.token,
                &self.lease,
            );
        }
        true
    }

    /// Stops counting a hold the client no longer vouches for, in the background.
    fn forget_in_background(spec: Arc<Spec>, lease: Arc<Lease>) {
        let shared = spec.shared.clone();
        drop(shared.tasks.spawn(async move {
            spec.enter(None).await.forgotten(&lease);
        }));
    }

    /// Releases the hold and reports the outcome, in a `release` span.
    async fn unlock(mut self) -> Result<()> {
        if !self.disarm() {
            return Ok(());
        }
        let span = self.spec.subject().release_span();
        self.release().instrument(span).await
    }

    async fn release(&self) -> Result<()> {
        let spec = self.spec.clone();
        let lease = self.lease.clone();
        let loss = lease.loss();
        if loss == Some(Loss::Gone) {
            // Redis said it is gone: nothing to release.
            let name = spec.name.to_string();
            Self::forget_in_background(spec, lease);
            return Err(Error::LeaseLost { name });
        }
        let shared = spec.shared.clone();
        if let Err(e) = shared.ensure_open() {
            Self::forget_in_background(spec, lease);
            return Err(e);
        }
        let name = spec.name.clone();
        let call = async move { release(&spec, &lease).await };
        // Awaited here; finished in the background if this future is dropped.
        let result = Detachable::new(&shared, call, {
            let name = name.clone();
            move |result: Result<()>| async move {
                if let Err(e) = result {
                    tracing::warn!(lock = %name, error = %e, "release failed after its caller left");
                }
            }
        })
        .await;
        match &result {
            Ok(()) => tracing::debug!("released"),
            Err(e) => tracing::debug!(error = %e, "release failed"),
        }
        match (loss, result) {
            // The client could not vouch for the hold any more: even if the release found it
            // still held (and freed it), the caller must know it may have been shared.
            (Some(Loss::Expired), Ok(())) => Err(Error::LeaseLost {
                name: name.to_string(),
            }),
            (_, result) => result,
        }
    }

    /// Gives back a hold nobody will use (a grant that came too late, or that its caller never
    /// received); errors are logged.
    async fn discard(mut self) {
        if !self.disarm() {
            return;
        }
        let span = self.spec.subject().release_span();
        async {
            tracing::debug!("undoing a grant nobody received");
            if let Err(e) = release(&self.spec, &self.lease).await
                && !e.is_not_held()
            {
                tracing::warn!(lock = %self.spec.name, error = %e, "undoing a grant failed; it expires with its lease");
            }
        }
        .instrument(span)
        .await;
    }

    /// Stops renewal and keeps the lock until its lease expires.
    fn forget(mut self) {
        if self.disarm() {
            Self::forget_in_background(self.spec.clone(), self.lease.clone());
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.disarm() {
            return;
        }
        let spec = self.spec.clone();
        let lease = self.lease.clone();
        if lease.loss() == Some(Loss::Gone) {
            Self::forget_in_background(spec, lease);
            return;
        }
        if spec.shared.tasks.is_shut_down() {
            tracing::warn!(
                lock = %spec.name,
                "token guard dropped after shutdown: the lock stays until its lease expires"
            );
            return;
        }
        // Never blocks and never panics, also on a thread outside the runtime: the task is
        // spawned through the runtime handle captured when the client was built.
        let shared = spec.shared.clone();
        let span = spec.subject().release_span();
        drop(
            shared.tasks.spawn(
                async move {
                    match release(&spec, &lease).await {
                        Ok(()) => tracing::debug!("released on drop"),
                        Err(e) => {
                            tracing::warn!(lock = %spec.name, error = %e, "release on drop failed");
                        }
                    }
                }
                .instrument(span),
            ),
        );
    }
}

/// A held [`TokenLock`]: the lock holds this guard's [token](Self::token).
///
/// Like [`LockGuard`](crate::LockGuard), it owns what it needs (`'static`, `Send + Sync`)
/// and can be moved to another task and released there.
///
/// # Validity
///
/// The client vouches for the hold until [`valid_until`](Self::valid_until): the send time of
/// the last confirmed acquire or extension plus the lease. From shortly before that instant (a
/// drift margin of 1 % of the lease plus 2 ms), or as soon as the watchdog finds another value
/// (or none) under the name, the guard is [lost](Self::is_lost).
///
/// # Release on drop
///
/// Dropping the guard stops its extension at once and schedules the compare-and-delete in a
/// background task of the client; it returns immediately, never blocks and never panics. The
/// lock becomes free shortly after the drop: use [`unlock`](Self::unlock) when the next step
/// depends on it being free.
#[clippy::has_significant_drop]
#[must_use = "if unused the lock will immediately be released"]
#[derive(Debug)]
pub struct TokenGuard {
    hold: Hold,
    /// Counts the hold in the metrics while the guard lives.
    _metric: observe::Hold,
}

impl TokenGuard {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.hold.spec.name
    }

    /// The token this guard holds the lock with: the value of the key.
    pub fn token(&self) -> &str {
        &self.hold.spec.token
    }

    /// The explicit lease, or `None` when the watchdog extends the lock.
    pub fn lease(&self) -> Option<Duration> {
        self.hold.lease_time
    }

    /// The instant until which the client vouches for this hold. See
    /// [Validity](Self#validity).
    pub fn valid_until(&self) -> std::time::Instant {
        self.hold.lease.valid_until().into_std()
    }

    /// `true` once the hold is lost: the watchdog found the token gone (expired, deleted,
    /// replaced), or no acquire or extension was confirmed within its lease; for an explicit
    /// lease, from shortly before it ends.
    pub fn is_lost(&self) -> bool {
        self.hold.lease.is_lost()
    }

    /// Resolves when the hold is lost (see [`is_lost`](Self::is_lost)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn lost(&self) {
        self.hold.lease.lost().await;
    }

    /// Releases the lock: deletes the key if it still holds this guard's token
    /// (compare-and-delete). A release whose reply is lost is cut off at the server and
    /// settled by reading the key; it is sent once more if the token is still there.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the key no longer holds the token (its lease expired; another
    /// holder's value is left alone); [`Error::LeaseLost`] when the hold was lost: the
    /// watchdog had found it gone (Redis is not touched), or its validity had run out (the
    /// release is still sent, so a token still there is deleted); [`Error::Redis`],
    /// [`Error::Timeout`]; [`Error::Shutdown`] after
    /// [`Client::shutdown`](crate::Client::shutdown).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release completes even if this future is dropped (it then finishes in
    /// a task of the client); only its result is lost.
    pub async fn unlock(self) -> Result<()> {
        self.hold.unlock().await
    }

    /// Stops extension and keeps the lock without releasing it: it stays held until its lease
    /// expires.
    pub fn forget(self) {
        self.hold.forget();
    }
}
