//! The read-write lock, compatible with Redisson's `RReadWriteLock` (docs/LAYOUT.md §5): the
//! two halves' scripts (`lua/rwlock/`), the read holds' marker keys and their renewal kind.

use std::fmt;
use std::sync::{Arc, LazyLock};

use redis::Value;

use super::reentrant::HASH_RENEWAL;
use super::single::{LockCore, Locks};
use super::surface::{hold_queries, lock_surface};
use crate::conn::{Call, Script, ScriptInvocation, Synced};
use crate::error::{Error, Result};
use crate::fasthash::NameField;
use crate::future::BoxFuture;
use crate::hold::{
    AcquireReply, AcquireRequest, Fields, HoldKind, HoldSpec, ReleaseReply, ReleaseRequest,
    acquire_reply, on_unlock_messages, release_reply, send_acquire,
};
use crate::layout;
use crate::object::object_methods;
use crate::owner::Owner;
use crate::pubsub::{READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};
use crate::reply::{deleted_reply, status, unexpected};
use crate::shared::Shared;
use crate::wait::Strategy;
use crate::watchdog::Renewal;

/// `lua/rwlock/read_acquire.lua`: RedissonReadLock.tryLockInnerAsync.
static READ_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rwlock/read_acquire.lua")));

/// `lua/rwlock/read_unlock.lua`: RedissonReadLock.unlockInnerAsync.
static READ_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rwlock/read_unlock.lua")));

/// `lua/rwlock/read_is_locked.lua`: RedissonReadLock.isLocked.
static READ_IS_LOCKED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rwlock/read_is_locked.lua")));

/// `lua/rwlock/write_acquire.lua`: RedissonWriteLock.tryLockInnerAsync, plus a refused upgrade.
static WRITE_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rwlock/write_acquire.lua")));

/// `lua/rwlock/write_unlock.lua`: RedissonWriteLock.unlockInnerAsync.
static WRITE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rwlock/write_unlock.lua")));

/// `lua/rwlock/force_unlock.lua`: RedissonReadLock / RedissonWriteLock.forceUnlockAsync.
static FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rwlock/force_unlock.lua")));

/// `lua/rwlock/renew_read.lua`: the watchdog's batched renewal of read holds (Redisson's
/// `ReadLockTask`, 4.4+).
static RENEW_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rwlock/renew_read.lua")));

/// Renews a read hold: the hash and this holder's own `rwlock_timeout` markers,
/// `<prefix>:1 ..= <prefix>:<count>` (Redisson's `ReadLockTask`, docs/LAYOUT.md §5.8).
#[derive(Debug)]
struct ReadRenewal;

impl Renewal for ReadRenewal {
    fn kind(&self) -> &'static str {
        "rwlock-read"
    }

    fn script(&self) -> &'static Script {
        &RENEW_READ
    }

    fn add(&self, batch: &mut ScriptInvocation<'static>, key: &str, field: &str) {
        batch
            .key(key)
            .arg(field)
            .arg(layout::rwlock_timeout_prefix(key, field));
    }
}

static READ_RENEWAL: LazyLock<Arc<dyn Renewal>> = LazyLock::new(|| Arc::new(ReadRenewal));

/// A distributed read-write lock: Redisson's `RReadWriteLock`.
///
/// Many owners may hold the [read half](Self::read_lock) at once; the [write
/// half](Self::write_lock) excludes everyone else, readers included. Both halves are reentrant
/// per [`Owner`](crate::Owner) and have the whole lock API (`lock`, leases, `try_lock`,
/// `try_lock_for`, `force_unlock`, queries); every acquisition returns a
/// [`LockGuard`](crate::LockGuard) that releases one hold.
///
/// Java services using Redisson's `getReadWriteLock(name)` on the same Redis share the lock with
/// this one in both directions: readers of both languages hold it together, a writer of either
/// excludes the other, and each side's releases wake the other's waiters.
///
/// # Layout in Redis
///
/// As Redisson writes it (docs/LAYOUT.md §5.1):
///
/// - the hash `name`: field `mode` = `read` or `write`; one field per reader,
///   `<client id>:<owner id>`, and per writer, `<client id>:<owner id>:write`, each with its
///   hold count; its TTL is the longest lease still needed;
/// - one marker key per outstanding read hold, `{name}:<reader field>:rwlock_timeout:<k>` for
///   `k = 1 ..= count` (`name:...` when the name contains `{`), each with that hold's lease. When
///   a reader releases, the lock's TTL shrinks to the longest marker left, so a dead client's
///   readers stop counting once their markers expire;
/// - the channel `redisson_rwlock:{name}`: a read release that frees the lock publishes `0`
///   (wakes one waiter per client), a write release that frees it publishes `1` (wakes every
///   waiter, so all waiting readers enter together).
///
/// # Downgrade, and no upgrade
///
/// A writer may take the read lock too (downgrade): releasing its last write hold while it
/// still holds read holds leaves the lock in mode `read`, held by those read holds, and
/// publishes nothing (waiters notice at their next re-check).
///
/// Redisson has no upgrade: a reader asking for the write lock would wait on itself until its
/// read lease ends. Here the write half's `lock`, `try_lock_for` and `try_lock` return
/// [`Error::UpgradeRefused`] at once instead, and change nothing, when the owner holds the read
/// lock without holding the write lock. Release the read holds first.
///
/// # Fairness
///
/// None, as in Redisson: there is no writer preference. Readers join a lock in mode `read`
/// even while writers wait, so a steady stream of readers can keep a writer waiting.
///
/// # Renewal
///
/// Holds taken without an explicit lease are renewed by the client's watchdog: a write hold as
/// a plain lock (`PEXPIRE` while its field exists); a read hold together with this client's own
/// readers' markers, never another client's (Redisson 4.4+; docs/LAYOUT.md §5.8).
///
/// Redisson 3.44 to 3.52 fail to renew a read lock that one Java thread holds twice or more
/// (their watchdog script errors); avoid reentrant read holds shared with such peers.
///
/// An `RwLock` is a cheap handle (client clone + name): create one per use or keep it.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redisson_sync::Client::open("redis://127.0.0.1:6379")?;
/// let device = client.rw_lock("device:7");
///
/// let reading = device.read_lock().lock().await?; // shared with other readers
/// // ... read the device's state ...
/// reading.unlock().await?;
///
/// let writing = device.write_lock().lock().await?; // exclusive
/// // ... change the device ...
/// writing.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RwLock {
    read: ReadLock,
    write: WriteLock,
}

impl RwLock {
    pub(crate) fn new(locks: &Locks, name: String) -> Self {
        let channel: Arc<str> = layout::rwlock_channel(&name).into();
        let name: Arc<str> = name.into();
        let read = Read {
            channel: channel.clone(),
            key_prefix: layout::rwlock_key_prefix(&name).into(),
            fields: Fields::default(),
        };
        let write = Write {
            channel,
            fields: Fields::default(),
        };
        Self {
            read: ReadLock {
                core: LockCore::new(locks, Arc::new(read), name.clone()),
            },
            write: WriteLock {
                core: LockCore::new(locks, Arc::new(write), name),
            },
        }
    }

    /// The lock's name: its Redis key.
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The read half (Redisson's `readLock()`): shared by any number of owners, excluded by a
    /// writer of another owner.
    pub fn read_lock(&self) -> ReadLock {
        self.read.clone()
    }

    /// The write half (Redisson's `writeLock()`): exclusive, reentrant, and it may take the
    /// read half too (downgrade).
    pub fn write_lock(&self) -> WriteLock {
        self.write.clone()
    }
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock")
            .field("name", &self.name())
            .field("client_id", &self.read.core.shared().id)
            .finish()
    }
}

/// The read half of an [`RwLock`]: Redisson's `RReadWriteLock.readLock()`.
///
/// Shared: any number of owners hold it at once, while no other owner holds the write half.
/// [`is_locked`](Self::is_locked) is true when the lock is in mode `read`, or in mode `write`
/// with the writer also holding read (Redisson's script); [`force_unlock`](Self::force_unlock)
/// deletes the lock only when it is in mode `read`. See [`RwLock`] for the layout and rules.
#[derive(Clone)]
pub struct ReadLock {
    pub(super) core: LockCore,
}

lock_surface!(
    ReadLock,
    setup: "# ",
    make: "client.rw_lock(\"device:7\").read_lock()",
    errors: "",
    cancel: "",
    force_unlock: "Deletes the lock, whoever holds it, only when it is in mode `read`, and wakes \
        one waiter of each client (Redisson's read `forceUnlock()`); a lock in mode `write` is \
        left alone. Readers' marker keys are left to expire.",
    is_locked: "`true` when the lock is in mode `read`, or in mode `write` with the writer also \
        holding read (Redisson's read `isLocked()` script).",
);
hold_queries!(ReadLock, make: "client.rw_lock(\"device:7\").read_lock()");
object_methods!(
    ReadLock,
    field: core,
    make: "client.rw_lock(\"device:7\").read_lock()",
    keys: "It acts on the lock's hash `name` only: the read holds' marker keys keep their own \
        TTLs, as in Redisson.",
    delete: "Deletes the lock as Redisson's read `delete()` does: a force unlock, in mode `read` \
        only (a lock in mode `write` is left alone, and `false` returned).",
    watchdog: "On a lock held under the watchdog, an expiry set here lasts until the next \
        renewal (at most a third of the watchdog timeout), which sets the lease again, as \
        Redisson's watchdog does; a hold with an explicit lease keeps it (a cleared expiry \
        makes the key persistent until the lock is released). Keys beyond the name are not \
        renewed and keep it.",
);

/// The write half of an [`RwLock`]: Redisson's `RReadWriteLock.writeLock()`.
///
/// Exclusive and reentrant (a re-entry *adds* its lease to the lock's remaining TTL, as in
/// Redisson). An owner holding the read half without the write half gets
/// [`Error::UpgradeRefused`] at once. [`is_locked`](Self::is_locked) is true when the lock is in
/// mode `write`; [`force_unlock`](Self::force_unlock) deletes the lock only when it is in mode
/// `write`. See [`RwLock`] for the layout and rules.
#[derive(Clone)]
pub struct WriteLock {
    pub(super) core: LockCore,
}

lock_surface!(
    WriteLock,
    setup: "# ",
    make: "client.rw_lock(\"device:7\").write_lock()",
    errors: "[`Error::UpgradeRefused`](crate::Error::UpgradeRefused) at once, changing \
        nothing, when the owner holds the read half without the write half (Redisson's reader \
        would wait on itself until its read lease ends).",
    cancel: "",
    force_unlock: "Deletes the lock, whoever holds it, only when it is in mode `write`, and \
        wakes every waiter (Redisson's write `forceUnlock()`); a lock in mode `read` is left \
        alone.",
    is_locked: "`true` when the lock is in mode `write` (Redisson's write `isLocked()`).",
);
hold_queries!(WriteLock, make: "client.rw_lock(\"device:7\").write_lock()");
object_methods!(
    WriteLock,
    field: core,
    make: "client.rw_lock(\"device:7\").write_lock()",
    keys: "It acts on the lock's hash `name` only: the read holds' marker keys keep their own \
        TTLs, as in Redisson.",
    delete: "Deletes the lock as Redisson's write `delete()` does: a force unlock, in mode `write` \
        only (a lock in mode `read` is left alone, and `false` returned).",
    watchdog: "On a lock held under the watchdog, an expiry set here lasts until the next \
        renewal (at most a third of the watchdog timeout), which sets the lease again, as \
        Redisson's watchdog does; a hold with an explicit lease keeps it (a cleared expiry \
        makes the key persistent until the lock is released). Keys beyond the name are not \
        renewed and keep it.",
);

/// The writer field of the owner whose reader field is `reader`: the format of
/// [`layout::write_field`].
fn writer_field_of(reader: &str) -> String {
    let mut field = reader.to_owned();
    field.push_str(WRITE_SUFFIX);
    field
}

/// The reader field of the owner whose writer field is `writer`.
fn reader_field_of(writer: &str) -> &str {
    writer.strip_suffix(WRITE_SUFFIX).unwrap_or(writer)
}

const WRITE_SUFFIX: &str = ":write";

/// The read half's scripts (`lua/rwlock/read_*.lua`).
#[derive(Debug)]
struct Read {
    /// `redisson_rwlock:{N}`.
    channel: Arc<str>,
    /// `keyPrefix` of §5.1: `{N}`, or `N` when it contains `{`.
    key_prefix: Arc<str>,
    fields: Fields,
}

impl HoldKind for Read {
    fn label(&self) -> &'static str {
        "ReadLock"
    }

    fn metric_kind(&self) -> &'static str {
        "read"
    }

    fn field(&self, client_id: &str, owner: Owner) -> Arc<str> {
        self.fields.holder(client_id, owner)
    }

    fn acquire<'a>(
        &'a self,
        req: &'a AcquireRequest<'a>,
    ) -> BoxFuture<'a, Result<(AcquireReply, Synced)>> {
        Box::pin(async move {
            let hold = req.hold;
            let mut invocation = READ_ACQUIRE.prepare_invoke();
            invocation
                .key(&*hold.id.name)
                .key(layout::rwlock_timeout_prefix(&hold.id.name, &hold.id.field))
                .arg(hold.lease_ms)
                .arg(&*hold.id.field)
                .arg(writer_field_of(&hold.id.field))
                .arg(req.expected);
            let call = Call::write("acquire", &hold.id.name, &invocation)
                .limit(req.limit)
                .tracked(&req.sent);
            send_acquire(req, call, |v| acquire_reply("rwlock/read_acquire.lua", v)).await
        })
    }

    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>> {
        Box::pin(async move {
            let hold = req.hold;
            let verb = hold.shared.conn.publish_command().await?;
            let mut invocation = READ_UNLOCK.prepare_invoke();
            invocation
                .key(&*hold.id.name)
                .key(&*self.channel)
                .key(layout::rwlock_timeout_prefix(&hold.id.name, &hold.id.field))
                .key(&*self.key_prefix)
                .arg(UNLOCK_MESSAGE)
                .arg(&*hold.id.field)
                .arg(verb);
            let call = Call::write("unlock", &hold.id.name, &invocation)
                .tracked(&req.sent)
                .synced();
            // nil: not held (or no lock at all); 0: released, the lock stays held; 1: freed.
            release_reply("rwlock/read_unlock.lua", hold.shared.conn.call(call).await?)
        })
    }

    fn strategy(&self, _hold: &HoldSpec) -> Strategy {
        on_unlock_messages(&*self.channel)
    }

    fn renewal(&self) -> Arc<dyn Renewal> {
        READ_RENEWAL.clone()
    }

    fn force_unlock<'a>(
        &'a self,
        shared: &'a Shared,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        force_unlock(shared, name, &self.channel, "read", UNLOCK_MESSAGE)
    }

    fn is_locked<'a>(&'a self, shared: &'a Shared, name: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut invocation = READ_IS_LOCKED.prepare_invoke();
            invocation.key(name);
            let call = Call::read_script("is_locked", name, &invocation);
            match shared.conn.call(call).await? {
                Value::Int(n) => Ok(n == 1),
                other => Err(unexpected("rwlock/read_is_locked.lua", &other)),
            }
        })
    }
}

/// The write half's scripts (`lua/rwlock/write_*.lua`).
#[derive(Debug)]
struct Write {
    /// `redisson_rwlock:{N}`.
    channel: Arc<str>,
    fields: Fields,
}

impl HoldKind for Write {
    fn label(&self) -> &'static str {
        "WriteLock"
    }

    fn metric_kind(&self) -> &'static str {
        "write"
    }

    fn field(&self, client_id: &str, owner: Owner) -> Arc<str> {
        self.fields
            .get(owner, || layout::write_field(client_id, owner.id()))
    }

    fn acquire<'a>(
        &'a self,
        req: &'a AcquireRequest<'a>,
    ) -> BoxFuture<'a, Result<(AcquireReply, Synced)>> {
        Box::pin(async move {
            let hold = req.hold;
            let reader = reader_field_of(&hold.id.field);
            let mut invocation = WRITE_ACQUIRE.prepare_invoke();
            invocation
                .key(&*hold.id.name)
                .arg(hold.lease_ms)
                .arg(&*hold.id.field)
                .arg(reader)
                .arg(req.expected);
            let call = Call::write("acquire", &hold.id.name, &invocation)
                .limit(req.limit)
                .tracked(&req.sent);
            send_acquire(req, call, |reply| {
                if status(&reply) == Some(b"upgrade") {
                    // The owner's read hold: refused while the owner has a guard for it (the
                    // write would wait on itself). One the client has no guard for (a release
                    // a failover lost) is waited out as another reader's would be.
                    if hold
                        .record
                        .holds_now(&NameField::new(hold.id.name.clone(), reader.into()))
                        == 0
                    {
                        let recheck = hold.shared.config.recheck_interval.as_millis();
                        return Ok(AcquireReply::Held(
                            i64::try_from(recheck).unwrap_or(i64::MAX),
                        ));
                    }
                    return Err(Error::UpgradeRefused {
                        name: hold.id.name.to_string(),
                        holder: reader.to_owned(),
                    });
                }
                acquire_reply("rwlock/write_acquire.lua", reply)
            })
            .await
        })
    }

    fn release<'a>(&'a self, req: &'a ReleaseRequest<'a>) -> BoxFuture<'a, Result<ReleaseReply>> {
        Box::pin(async move {
            let hold = req.hold;
            let verb = hold.shared.conn.publish_command().await?;
            let mut invocation = WRITE_UNLOCK.prepare_invoke();
            invocation
                .key(&*hold.id.name)
                .key(&*self.channel)
                .arg(READ_UNLOCK_MESSAGE)
                .arg(hold.lease_ms)
                .arg(&*hold.id.field)
                .arg(verb);
            let call = Call::write("unlock", &hold.id.name, &invocation)
                .tracked(&req.sent)
                .synced();
            // nil: not held; 0: one write hold released, others remain; 1: the last one
            // released (the lock freed, or left in mode read for this owner's read holds).
            release_reply(
                "rwlock/write_unlock.lua",
                hold.shared.conn.call(call).await?,
            )
        })
    }

    fn strategy(&self, _hold: &HoldSpec) -> Strategy {
        on_unlock_messages(&*self.channel)
    }

    fn renewal(&self) -> Arc<dyn Renewal> {
        HASH_RENEWAL.clone()
    }

    fn force_unlock<'a>(
        &'a self,
        shared: &'a Shared,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        force_unlock(shared, name, &self.channel, "write", READ_UNLOCK_MESSAGE)
    }

    fn is_locked<'a>(&'a self, shared: &'a Shared, name: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut cmd = redis::cmd("HGET");
            cmd.arg(name).arg("mode");
            let reply = shared
                .conn
                .call(Call::read("is_locked", name, &cmd))
                .await?;
            Ok(matches!(reply, Value::BulkString(ref mode) if mode == b"write"))
        })
    }
}

/// `lua/rwlock/force_unlock.lua` for the half that deletes the lock in `mode`, publishing
/// `message`.
fn force_unlock<'a>(
    shared: &'a Shared,
    name: &'a str,
    channel: &'a str,
    mode: &'static str,
    message: &'static str,
) -> BoxFuture<'a, Result<bool>> {
    Box::pin(async move {
        let verb = shared.conn.publish_command().await?;
        let mut invocation = FORCE_UNLOCK.prepare_invoke();
        invocation
            .key(name)
            .key(channel)
            .arg(mode)
            .arg(message)
            .arg(verb);
        let call = Call::write("force_unlock", name, &invocation)
            .idempotent()
            .synced();
        deleted_reply("rwlock/force_unlock.lua", shared.conn.call(call).await?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_and_writer_fields_of_one_owner() {
        let id = "1f6a3c2e-9b1d-4c7a-8e55-0d2f4b6a7c81";
        let reader = layout::holder_field(id, 57);
        let writer = layout::write_field(id, 57);
        assert_eq!(writer_field_of(&reader), writer);
        assert_eq!(reader_field_of(&writer), reader);
    }
}
