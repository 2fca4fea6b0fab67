//! The plain token lock: `SET name <value> NX PX lease` (a refusal explained by
//! `lua/token/acquire.lua`), released by a Lua compare-and-delete,
//! renewed by a compare-and-`PEXPIRE` (its scripts are in `lua/token/`). Not a Redisson
//! structure: the lock many services hand-write before adopting Redisson.
//!
//! A kind over the hold layer like every lock: it counts one hold per value
//! ([`max_holds`](HoldKind::max_holds) 1) and settles an unknown outcome by comparing the key
//! with the value ([`read_holds`](HoldKind::read_holds)); it waits by back-off polling (such
//! locks publish nothing) and renews through the watchdog with its own [`Renewal`] kind.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Cmd, Value};

use super::single::{LockCore, Locks};
use super::surface::{Core, lock_surface};
use crate::conn::{Call, Delivery, Script, ScriptInvocation, Synced};
use crate::error::Result;
use crate::future::BoxFuture;
use crate::hold::{
    AcquireReply, AcquireRequest, Evidence, Fields, HoldKind, HoldSpec, ReleaseReply,
    ReleaseRequest,
};
use crate::object::object_methods;
use crate::owner::Owner;
use crate::reply::{deleted_reply, status, unexpected};
use crate::shared::Shared;
use crate::wait::{Backoff, Strategy};
use crate::watchdog::Renewal;

/// `lua/token/acquire.lua`: `SET N V NX PX lease`, or why not.
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/token/acquire.lua")));

/// `lua/token/unlock.lua`: compare-and-delete.
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/token/unlock.lua")));

/// `lua/token/renew.lua`: the watchdog's batched compare-and-`PEXPIRE`.
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/token/renew.lua")));

/// The acquire script's reply when the lock already holds the attempt's own value.
const HELD_BY_VALUE: &[u8] = b"held";

/// The first delay between two polls of a waiter; it doubles up to [`POLL_MAX`].
const POLL_INITIAL: Duration = Duration::from_millis(2);

/// The longest delay between two polls of a waiter: a release is noticed within about this.
const POLL_MAX: Duration = Duration::from_millis(100);

/// What a [`TokenLock`] writes as its value: how the value of an acquisition is made.
///
/// The default, [`Random`](Self::Random), is what a hand-written lock usually does, and the
/// only format whose lost replies are resolved exactly (see [`TokenLock`]). The fixed formats
/// exist to write values of the same shape as an existing service does, `<uuid>` or
/// `<uuid>:<thread id>`, so that tools and code reading the value keep working; with them,
/// every acquisition of the same holder writes the same value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ValueFormat {
    /// 32 random lowercase hex characters (a v4 UUID without hyphens), fresh for every
    /// acquisition.
    #[default]
    Random,
    /// The client's id, [`Client::id`](crate::Client::id): a v4 UUID in Java's
    /// `UUID.toString()` format. Every task of the client is then the same holder: a second
    /// acquisition while the first holds gets [`Error::NotReentrant`](crate::Error::NotReentrant), it does not wait.
    ClientId,
    /// `<client id>:<owner id>`, like a Java `<uuid>:<threadId>` value (and a Redisson lock's
    /// holder field): the owner is [`Owner::current`](crate::Owner::current) or the one of
    /// [`LockOptions::owner`](crate::LockOptions::owner).
    ClientIdAndOwner,
}

/// A plain distributed lock: the Redis string `name` holding the holder's value, taken with
/// `SET name <value> NX PX <lease>` and released by a Lua compare-and-delete
/// (`if GET name == value then DEL name`): the lock many services hand-write before adopting
/// Redisson.
///
/// # Not a Redisson format
///
/// Redisson has no such structure: its `RLock` is a hash of holder fields and hold counts
/// ([`Lock`](crate::Lock)). A Redisson client cannot share a token lock (its scripts fail on a
/// string key, and this lock's acquire reports [`Error::WrongType`](crate::Error::WrongType) on a Redisson lock's
/// hash). What can share it is any service, in Java or elsewhere, that hand-wrote the same
/// protocol: `SET NX PX` to acquire, compare-and-delete to release, compare-and-`PEXPIRE` to
/// extend. Such a service and this crate exclude each other on the same name, and neither
/// ever deletes or extends a value it did not write.
///
/// # Value formats
///
/// The value is 32 random hex characters per acquisition by default
/// ([`ValueFormat::Random`]). To write values of the shape an existing service writes, use
/// [`with_format`](Self::with_format): [`ValueFormat::ClientId`] writes the client's UUID
/// (`<uuid>`), [`ValueFormat::ClientIdAndOwner`] writes `<uuid>:<owner id>`, like a Java
/// `<uuid>:<threadId>` value. A holder is identified by its value alone: a handle whose
/// format and owner produce the value already in Redis sees the lock as its own, and gets
/// [`Error::NotReentrant`](crate::Error::NotReentrant) from an acquire (Redis unchanged).
///
/// # Semantics
///
/// - **Not reentrant**: acquiring while the same value holds the lock fails at once with
///   [`Error::NotReentrant`](crate::Error::NotReentrant), never a deadlock (only possible with the fixed formats; random
///   values never meet).
/// - **Guards**: every acquisition returns a [`LockGuard`](crate::LockGuard), as every lock's
///   does; its [`holder`](crate::LockGuard::holder) is the value written, its
///   [`token`](crate::LockGuard::token) is `None` (a token lock draws no fencing token).
/// - **Leases**: with an explicit lease ([`LockOptions::lease`](crate::LockOptions::lease)) the key expires that long
///   after the grant and is never extended. Without one the lease is the client's
///   `watchdog_timeout`, extended every `watchdog_timeout / 3` by a compare-and-`PEXPIRE`
///   while the guard lives; the guard reports lost when the extension finds another value.
/// - **Commands**: an acquisition of a free lock is one plain `SET name <value> NX PX
///   <lease>`. When that `SET` is refused, a script (`lua/token/acquire.lua`) tells why
///   (another holder, this value already, a key of another type) and every later poll of the
///   wait is that script alone, which grants the same way when it finds the name free.
/// - **No fairness, waiting by polling**: nothing is published, so a waiter polls with
///   exponential back-off (2 ms doubling to 100 ms) and notices a release within about the
///   current delay. Waiters are served in no particular order.
/// - **Release**: a [`LockGuard`](crate::LockGuard) releases on drop (in the background) or with
///   [`unlock`](crate::LockGuard::unlock), which reports [`Error::NotHeld`](crate::Error::NotHeld) when the key no
///   longer holds its value (it expired and maybe another holder took it: that holder's value
///   is left alone).
///
/// # Failure behaviour
///
/// An acquire whose reply is lost (a timeout, a connection reset after it was sent) is cut off
/// at the server (`CLIENT KILL`: what Redis has not run of it, it never runs), then `GET name`
/// says whether it ran: the value is the attempt's value. With random values this is exact;
/// with a fixed format, the same value written by another process is taken for this
/// attempt's grant. A release whose reply is lost is cut off and read the same way, and
/// sent once more if the value is still there. A dropped acquire future never keeps the lock:
/// an attempt in flight finishes in a task of the client, which releases what it granted.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use redisson_sync::{LockOptions, Owner, ValueFormat};
///
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let job = client.token_lock("job:nightly");
/// let guard = job.lock().await?; // renewed by the watchdog while the guard lives
/// // ... critical section ...
/// guard.unlock().await?;
///
/// // Values shaped like an existing service's `<uuid>:<thread id>`, with a 10 s lease.
/// let shared = client.token_lock("report:7").with_format(ValueFormat::ClientIdAndOwner);
/// let opts = LockOptions::new().lease(Duration::from_secs(10)).owner(Owner::new(1));
/// if let Some(guard) = shared.try_lock_with_options(Duration::from_secs(2), &opts).await? {
///     guard.unlock().await?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct TokenLock {
    core: LockCore,
    format: ValueFormat,
}

lock_surface!(
    TokenLock,
    setup: "# ",
    make: "client.token_lock(\"job\")",
    errors: "[`Error::NotReentrant`](crate::Error::NotReentrant) when the lock already holds \
        this acquisition's value (fixed formats only; Redis unchanged).",
    cancel: "",
    force_unlock: "Deletes the key whoever holds it (`DEL`); nothing is published, waiters find \
        it free at their next poll.",
    is_locked: "`true` when anyone holds the lock (`EXISTS`).",
);
object_methods!(
    TokenLock,
    field: core,
    make: "client.token_lock(\"job\")",
    keys: "It acts on the lock's key `name`.",
    delete: "Deletes the lock's key (`DEL`), whoever holds it: as [`force_unlock`](Self::force_unlock).",
    watchdog: "On a lock held under the watchdog, an expiry set here lasts until the next \
        renewal (at most a third of the watchdog timeout), which sets the lease again, as \
        Redisson's watchdog does; a hold with an explicit lease keeps it (a cleared expiry \
        makes the key persistent until the lock is released). Keys beyond the name are not \
        renewed and keep it.",
);

impl TokenLock {
    pub(crate) fn new(locks: &Locks, name: String) -> Self {
        Self::with(locks, name.into(), ValueFormat::default())
    }

    fn with(locks: &Locks, name: Arc<str>, format: ValueFormat) -> Self {
        let kind = Token {
            format,
            fields: Fields::default(),
        };
        Self {
            core: LockCore::new(locks, Arc::new(kind), name),
            format,
        }
    }

    /// The format of the values this handle writes.
    pub fn format(&self) -> ValueFormat {
        self.format
    }

    /// This handle with values of `format` (see [Value formats](Self#value-formats)).
    #[must_use]
    pub fn with_format(self, format: ValueFormat) -> Self {
        let name = self.core.name().into();
        Self::with(self.core.locks(), name, format)
    }
}

/// The token lock's scripts (`lua/token/`).
#[derive(Debug)]
struct Token {
    format: ValueFormat,
    /// The fixed values, made once per owner.
    fields: Fields,
}

impl Token {
    /// Runs the compare-and-delete once: `true` if it deleted the value.
    async fn run_release(hold: &HoldSpec, delivery: &Delivery) -> Result<bool> {
        let mut invocation = UNLOCK.prepare_invoke();
        invocation.key(&*hold.id.name).arg(&*hold.id.field);
        let call = Call::write("unlock", &hold.id.name, &invocation).tracked(delivery);
        deleted_reply("token/unlock.lua", hold.shared.conn.call(call).await?)
    }
}

impl HoldKind for Token {
    fn label(&self) -> &'static str {
        "TokenLock"
    }

    fn metric_kind(&self) -> &'static str {
        "token"
    }

    fn field(&self, client_id: &str, owner: Owner) -> Arc<str> {
        match self.format {
            ValueFormat::Random => uuid::Uuid::new_v4().simple().to_string().into(),
            ValueFormat::ClientId => self.fields.get(owner, || client_id.to_owned()),
            ValueFormat::ClientIdAndOwner => self.fields.holder(client_id, owner),
        }
    }

    fn max_holds(&self) -> u32 {
        1
    }

    fn acquire<'a>(
        &'a self,
        req: &'a AcquireRequest<'a>,
    ) -> BoxFuture<'a, Result<(AcquireReply, Synced)>> {
        Box::pin(async move {
            let hold = req.hold;
            // A wait's first attempt sends the plain `SET N V NX PX lease`: on a free name it
            // grants at once, a command the server runs without Lua. Only a refusal, and every
            // poll after one (a lock seen held is likely held still), runs the script, which
            // grants the same way or says why not: held by this value, by another one (its
            // PTTL), or a key of another type.
            if !req.contended {
                let mut set = redis::cmd("SET");
                set.arg(&*hold.id.name)
                    .arg(&*hold.id.field)
                    .arg("NX")
                    .arg("PX")
                    .arg(hold.lease_ms);
                let call = Call::write_command("acquire", &hold.id.name, &set)
                    .limit(req.limit)
                    .tracked(&req.sent);
                match hold.shared.conn.call(call).await? {
                    Value::Nil => {}
                    ref v if status(v) == Some(b"OK") => {
                        return Ok((AcquireReply::Granted { token: None }, Synced::Skipped));
                    }
                    other => return Err(unexpected("SET NX PX", &other)),
                }
            }
            let mut invocation = ACQUIRE.prepare_invoke();
            invocation
                .key(&*hold.id.name)
                .arg(&*hold.id.field)
                .arg(hold.lease_ms);
            let call = Call::write("acquire", &hold.id.name, &invocation)
                .limit(req.limit)
                .tracked(&req.sent);
            let reply = match hold.shared.conn.call(call).await? {
                Value::Nil => AcquireReply::Granted { token: None },
                Value::Int(pttl) => AcquireReply::Held(pttl),
                ref v if status(v) == Some(HELD_BY_VALUE) => {
                    if self.format == ValueFormat::Random && req.expected == 0 {
                        // Only this acquisition writes its random value: an earlier attempt of
                        // it whose outcome could not be resolved ran after all. Give that
                        // grant back (its validity is unknown) and try again at once.
                        tracing::debug!(lock = %hold.id.name, "an unresolved attempt ran after all; giving it back");
                        if let Err(e) = Self::run_release(hold, &Delivery::default()).await {
                            tracing::debug!(lock = %hold.id.name, error = %e, "giving back an unresolved grant failed");
                        }
                        AcquireReply::Held(0)
                    } else {
                        // The value is there: this holder holds the lock already.
                        AcquireReply::Count(1)
                    }
                }
                other => return Err(unexpected("token/acquire.lua", &other)),
            };
            Ok((reply, Synced::Skipped))
        })
    }

    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>> {
        Box::pin(async move {
            Ok(if Self::run_release(req.hold, &req.sent).await? {
                ReleaseReply::Released
            } else {
                ReleaseReply::NotHeld
            })
        })
    }

    /// One hold when the key holds the value, none otherwise.
    fn read_holds<'a>(&'a self, hold: &'a HoldSpec) -> BoxFuture<'a, Result<Evidence>> {
        Box::pin(async move {
            let cmd = Cmd::get(&*hold.id.name);
            let call = Call::read("resolve", &hold.id.name, &cmd);
            let holds = match hold.shared.conn.call(call).await? {
                Value::Nil => false,
                Value::BulkString(value) => value == hold.id.field.as_bytes(),
                other => return Err(unexpected("GET", &other)),
            };
            Ok(Evidence {
                count: u32::from(holds),
                token: None,
            })
        })
    }

    fn strategy(&self, _hold: &HoldSpec) -> Strategy {
        Strategy::Backoff(Backoff::exponential(POLL_INITIAL, POLL_MAX, 2))
    }

    fn renewal(&self) -> Arc<dyn Renewal> {
        TOKEN_RENEWAL.clone()
    }

    fn force_unlock<'a>(
        &'a self,
        shared: &'a Shared,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut cmd = redis::cmd("DEL");
            cmd.arg(name);
            let call = Call::write_command("force_unlock", name, &cmd).idempotent();
            deleted_reply("DEL", shared.conn.call(call).await?)
        })
    }
}

/// Extends a token lock's lease while it holds the value: compare-and-`PEXPIRE`
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
