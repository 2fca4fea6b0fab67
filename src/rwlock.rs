//! The read-write lock, compatible with Redisson's `RReadWriteLock` (REDISSON_LAYOUT.md §5).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::client::Client;
use crate::detach::BoxFuture;
use crate::error::{Error, Result};
use crate::guard::Release;
use crate::handle::{Handle, lock_api};
use crate::kind::{
    AcquireReply, LockKind, Renewal, acquire_script, release_reply, released_reply, run_script,
    unexpected,
};
use crate::naming;
use crate::pubsub::{READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};
use crate::scripts;

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
/// As Redisson writes it (REDISSON_LAYOUT.md §5.1):
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
/// readers' markers, never another client's (Redisson 4.4+; REDISSON_LAYOUT.md §5.8).
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
    pub(crate) fn new(client: Client, name: String) -> Self {
        let channel: Arc<str> = naming::rwlock_channel(&name).into();
        let name: Arc<str> = name.into();
        let read = Read {
            channel: channel.clone(),
            key_prefix: naming::rwlock_key_prefix(&name).into(),
        };
        let write = Write { channel };
        Self {
            read: ReadLock {
                handle: Handle::new(client.clone(), Arc::new(read), name.clone()),
            },
            write: WriteLock {
                handle: Handle::new(client, Arc::new(write), name),
            },
        }
    }

    /// The lock's name: its Redis key.
    pub fn name(&self) -> &str {
        self.read.handle.name()
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
            .field("client_id", &self.read.handle.client.id())
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
    handle: Handle,
}

lock_api!(ReadLock, "client.rw_lock(\"device:7\").read_lock()");

/// The write half of an [`RwLock`]: Redisson's `RReadWriteLock.writeLock()`.
///
/// Exclusive and reentrant (a re-entry *adds* its lease to the lock's remaining TTL, as in
/// Redisson). An owner holding the read half without the write half gets
/// [`Error::UpgradeRefused`] at once. [`is_locked`](Self::is_locked) is true when the lock is in
/// mode `write`; [`force_unlock`](Self::force_unlock) deletes the lock only when it is in mode
/// `write`. See [`RwLock`] for the layout and rules.
#[derive(Clone)]
pub struct WriteLock {
    handle: Handle,
}

lock_api!(WriteLock, "client.rw_lock(\"device:7\").write_lock()");

/// The writer field of the owner whose reader field is `reader`: the format of
/// [`naming::write_field`].
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
}

impl LockKind for Read {
    fn label(&self) -> &'static str {
        "ReadLock"
    }

    fn acquire<'a>(
        &'a self,
        hold: &'a Release,
        _wait: Option<Duration>,
        limit: Duration,
    ) -> BoxFuture<'a, Result<AcquireReply>> {
        Box::pin(async move {
            let mut invocation = scripts::RWLOCK_READ_ACQUIRE.prepare_invoke();
            invocation
                .key(&*hold.name)
                .key(naming::rwlock_timeout_prefix(&hold.name, &hold.field))
                .arg(hold.lease_ms)
                .arg(&hold.field)
                .arg(writer_field_of(&hold.field));
            acquire_script(hold, "rwlock/read_acquire.lua", &invocation, limit).await
        })
    }

    fn release<'a>(&'a self, hold: &'a Release) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut invocation = scripts::RWLOCK_READ_UNLOCK.prepare_invoke();
            invocation
                .key(&*hold.name)
                .key(&*self.channel)
                .key(naming::rwlock_timeout_prefix(&hold.name, &hold.field))
                .key(&*self.key_prefix)
                .arg(UNLOCK_MESSAGE)
                .arg(&hold.field)
                .arg(hold.client.inner().publish_command);
            // nil: not held (or no lock at all); 0: released, the lock stays held; 1: freed.
            release_reply(
                "rwlock/read_unlock.lua",
                hold,
                run_script(&hold.client, "unlock", &hold.name, &invocation).await?,
            )
        })
    }

    fn wake_channel(&self, _hold: &Release) -> String {
        self.channel.to_string()
    }

    fn renewal(&self, hold: &Release) -> Renewal {
        Renewal::Read {
            marker_prefix: naming::rwlock_timeout_prefix(&hold.name, &hold.field),
        }
    }

    fn force_unlock<'a>(
        &'a self,
        client: &'a Client,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        force_unlock(client, name, &self.channel, "read", UNLOCK_MESSAGE)
    }

    fn is_locked<'a>(&'a self, client: &'a Client, name: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut invocation = scripts::RWLOCK_READ_IS_LOCKED.prepare_invoke();
            invocation.key(name);
            match run_script(client, "is_locked", name, &invocation).await? {
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
}

impl LockKind for Write {
    fn label(&self) -> &'static str {
        "WriteLock"
    }

    fn field(&self, client_id: &str, owner: u64) -> String {
        naming::write_field(client_id, owner)
    }

    fn acquire<'a>(
        &'a self,
        hold: &'a Release,
        _wait: Option<Duration>,
        limit: Duration,
    ) -> BoxFuture<'a, Result<AcquireReply>> {
        Box::pin(async move {
            let reader = reader_field_of(&hold.field);
            let mut invocation = scripts::RWLOCK_WRITE_ACQUIRE.prepare_invoke();
            invocation
                .key(&*hold.name)
                .arg(hold.lease_ms)
                .arg(&hold.field)
                .arg(reader);
            let reply = hold
                .client
                .inner()
                .connections
                .script_with_limit("acquire", &hold.name, &invocation, limit)
                .await?;
            match reply {
                Value::Nil => Ok(AcquireReply::Acquired),
                Value::Int(ttl) => Ok(AcquireReply::Held(ttl)),
                Value::BulkString(ref s) if s == b"upgrade" => Err(Error::UpgradeRefused {
                    name: hold.name.to_string(),
                    holder: reader.to_owned(),
                }),
                other => Err(unexpected("rwlock/write_acquire.lua", &other)),
            }
        })
    }

    fn release<'a>(&'a self, hold: &'a Release) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut invocation = scripts::RWLOCK_WRITE_UNLOCK.prepare_invoke();
            invocation
                .key(&*hold.name)
                .key(&*self.channel)
                .arg(READ_UNLOCK_MESSAGE)
                .arg(hold.lease_ms)
                .arg(&hold.field)
                .arg(hold.client.inner().publish_command);
            // nil: not held; 0: one write hold released, others remain; 1: the last one
            // released (the lock freed, or left in mode read for this owner's read holds).
            release_reply(
                "rwlock/write_unlock.lua",
                hold,
                run_script(&hold.client, "unlock", &hold.name, &invocation).await?,
            )
        })
    }

    fn wake_channel(&self, _hold: &Release) -> String {
        self.channel.to_string()
    }

    fn force_unlock<'a>(
        &'a self,
        client: &'a Client,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        force_unlock(client, name, &self.channel, "write", READ_UNLOCK_MESSAGE)
    }

    fn is_locked<'a>(&'a self, client: &'a Client, name: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let reply = client
                .inner()
                .connections
                .query("is_locked", name, redis::cmd("HGET").arg(name).arg("mode"))
                .await?;
            Ok(matches!(reply, Value::BulkString(ref mode) if mode == b"write"))
        })
    }
}

/// `lua/rwlock/force_unlock.lua` for the half that deletes the lock in `mode`, publishing
/// `message`.
fn force_unlock<'a>(
    client: &'a Client,
    name: &'a str,
    channel: &'a str,
    mode: &'static str,
    message: &'static str,
) -> BoxFuture<'a, Result<bool>> {
    Box::pin(async move {
        let mut invocation = scripts::RWLOCK_FORCE_UNLOCK.prepare_invoke();
        invocation
            .key(name)
            .key(channel)
            .arg(mode)
            .arg(message)
            .arg(client.inner().publish_command);
        let reply = run_script(client, "force_unlock", name, &invocation).await?;
        released_reply("rwlock/force_unlock.lua", reply)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_and_writer_fields_of_one_owner() {
        let id = "1f6a3c2e-9b1d-4c7a-8e55-0d2f4b6a7c81";
        let reader = naming::holder_field(id, 57);
        let writer = naming::write_field(id, 57);
        assert_eq!(writer_field_of(&reader), writer);
        assert_eq!(reader_field_of(&writer), reader);
    }
}
