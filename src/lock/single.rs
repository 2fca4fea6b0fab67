//! [`LockCore`]: a single lock of some kind on one name, over the hold layer; what every single
//! lock type wraps.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use super::guard::LockGuard;
use super::surface::{Core, Placement};
use crate::conn::Call;
use crate::error::Result;
use crate::fasthash::NameField;
use crate::hold::{HoldAcquire, HoldKind, HoldSpec, Record, hold_count_reply};
use crate::object::Object;
use crate::options::{LockOptions, lease_millis};
use crate::owner::Owner;
use crate::shared::Shared;
use crate::wait;

/// What a client gives each lock it makes: its shared state and its record of holds.
#[derive(Clone, Debug)]
pub(crate) struct Locks {
    pub(crate) shared: Arc<Shared>,
    pub(crate) record: Record,
}

/// A lock of some kind on one name.
#[derive(Clone)]
pub(crate) struct LockCore {
    locks: Locks,
    kind: Arc<dyn HoldKind>,
    name: Arc<str>,
    /// The lock's keys: its name, then those that expire and are deleted with it.
    keys: Arc<[Arc<str>]>,
}

impl fmt::Debug for LockCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.kind.label())
            .field("name", &self.name)
            .field("client_id", &self.locks.shared.id)
            .finish()
    }
}

impl LockCore {
    pub(crate) fn new(locks: &Locks, kind: Arc<dyn HoldKind>, name: Arc<str>) -> Self {
        let keys = std::iter::once(name.clone())
            .chain(kind.extra_keys(&name))
            .collect();
        Self {
            locks: locks.clone(),
            kind,
            name,
            keys,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.locks.shared
    }

    /// What the client gave this lock (to make another lock of the same client).
    pub(crate) fn locks(&self) -> &Locks {
        &self.locks
    }

    /// The holder id of `owner` for one acquisition.
    fn field(&self, owner: Owner) -> Arc<str> {
        self.kind.field(&self.locks.shared.id, owner)
    }

    /// One acquisition for the owner and lease of `options`.
    fn acquisition(&self, options: &LockOptions) -> Result<Arc<HoldAcquire>> {
        let shared = &self.locks.shared;
        shared.ensure_open()?;
        let explicit_lease = options.lease_time();
        let lease_ms = match explicit_lease {
            Some(lease) => lease_millis(lease)?,
            None => shared.config.watchdog_ms(),
        };
        let owner = options.explicit_owner().unwrap_or_else(Owner::current);
        let spec = Arc::new(HoldSpec {
            shared: shared.clone(),
            record: self.locks.record.clone(),
            kind: self.kind.clone(),
            id: NameField::new(self.name.clone(), self.field(owner)),
            lease_ms,
        });
        Ok(Arc::new(HoldAcquire {
            spec,
            owner,
            explicit_lease,
        }))
    }

    /// The bytes of the box an acquisition of this lock allocates (tests).
    #[cfg(test)]
    pub(crate) fn boxed_acquisition_size(&self) -> usize {
        let acquisition = self.acquisition(&LockOptions::new()).unwrap();
        wait::boxed_acquisition_size(&self.locks.shared, acquisition)
    }

    pub(crate) async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        let mut cmd = redis::cmd("HEXISTS");
        cmd.arg(&*self.name).arg(&*self.field(owner));
        let v = self.query("is_held_by", &cmd).await?;
        Ok(matches!(v, Value::Int(1)))
    }

    pub(crate) async fn hold_count(&self, owner: Owner) -> Result<u64> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(&*self.name).arg(&*self.field(owner));
        hold_count_reply(self.query("hold_count", &cmd).await?).map(u64::from)
    }

    /// A read-only command on the lock's key.
    async fn query(&self, op: &'static str, cmd: &redis::Cmd) -> Result<Value> {
        let shared = &self.locks.shared;
        shared.ensure_open()?;
        shared.conn.call(Call::read(op, &self.name, cmd)).await
    }
}

impl Core for LockCore {
    fn name(&self) -> &str {
        &self.name
    }

    fn placement(&self) -> Option<Placement<'_>> {
        Some(Placement {
            shared: &self.locks.shared,
            name: &self.name,
        })
    }

    async fn lock(&self, options: &LockOptions) -> Result<LockGuard> {
        let acquisition = self.acquisition(options)?;
        let held = wait::acquire(&self.locks.shared, acquisition).await?;
        Ok(LockGuard::new(held))
    }

    async fn try_lock(&self, wait: Duration, options: &LockOptions) -> Result<Option<LockGuard>> {
        let acquisition = self.acquisition(options)?;
        let held = wait::try_acquire(&self.locks.shared, acquisition, wait).await?;
        Ok(held.map(LockGuard::new))
    }

    async fn force_unlock(&self) -> Result<bool> {
        let shared = &self.locks.shared;
        shared.ensure_open()?;
        self.kind.force_unlock(shared, &self.name).await
    }

    async fn is_locked(&self) -> Result<bool> {
        let shared = &self.locks.shared;
        shared.ensure_open()?;
        self.kind.is_locked(shared, &self.name).await
    }
}

impl Object for LockCore {
    fn shared(&self) -> &Arc<Shared> {
        &self.locks.shared
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    async fn delete(&self) -> Result<bool> {
        let shared = &self.locks.shared;
        shared.ensure_open()?;
        self.kind.delete(shared, &self.keys).await
    }
}
