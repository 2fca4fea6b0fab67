//! The reentrant lock, compatible with Redisson's `RLock` (REDISSON_LAYOUT.md §2).

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::detach::BoxFuture;
use crate::error::Result;
use crate::guard::Release;
use crate::handle::{Handle, lock_api};
use crate::kind::{
    AcquireReply, LockKind, acquire_script, release_reply, released_reply, run_script,
};
use crate::naming;
use crate::pubsub::UNLOCK_MESSAGE;
use crate::scripts;

/// A reentrant distributed lock: Redisson's `RLock`.
///
/// The lock is the Redis hash `name` with one field `<client id>:<owner id>` whose value is the
/// hold count; its TTL is the lease. Waiters subscribe to `redisson_lock__channel:{name}` and are
/// woken by the `0` published on full release. Java services using Redisson's
/// `getLock(name)` on the same Redis share the lock with this one in both directions.
///
/// Reentrancy is per [`Owner`](crate::Owner): by default the current Tokio task. Every
/// successful acquisition returns a [`LockGuard`](crate::LockGuard); each guard releases one
/// hold.
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
    handle: Handle,
}

lock_api!(Lock, "client.lock(\"order:42\")");

impl Lock {
    pub(crate) fn new(client: Client, name: String) -> Self {
        let kind = Reentrant {
            channel: naming::lock_channel(&name).into(),
        };
        Self {
            handle: Handle::new(client, Arc::new(kind), name.into()),
        }
    }
}

/// The reentrant lock's scripts (`lua/lock/`).
#[derive(Debug)]
struct Reentrant {
    /// `redisson_lock__channel:{N}`.
    channel: Arc<str>,
}

impl LockKind for Reentrant {
    fn label(&self) -> &'static str {
        "Lock"
    }

    fn acquire<'a>(
        &'a self,
        hold: &'a Release,
        _wait: Option<Duration>,
        limit: Duration,
    ) -> BoxFuture<'a, Result<AcquireReply>> {
        Box::pin(async move {
            let mut invocation = scripts::LOCK_ACQUIRE.prepare_invoke();
            invocation
                .key(&*hold.name)
                .arg(hold.lease_ms)
                .arg(&hold.field);
            acquire_script(hold, "lock/acquire.lua", &invocation, limit).await
        })
    }

    fn release<'a>(&'a self, hold: &'a Release) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut invocation = scripts::LOCK_UNLOCK.prepare_invoke();
            invocation
                .key(&*hold.name)
                .key(&*self.channel)
                .arg(UNLOCK_MESSAGE)
                .arg(hold.lease_ms)
                .arg(&hold.field)
                .arg(hold.client.inner().publish_command);
            // nil: not held; 0: one hold released, others remain; 1: last hold released.
            release_reply(
                "lock/unlock.lua",
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
        Box::pin(async move {
            let mut invocation = scripts::LOCK_FORCE_UNLOCK.prepare_invoke();
            invocation
                .key(name)
                .key(&*self.channel)
                .arg(UNLOCK_MESSAGE)
                .arg(client.inner().publish_command);
            let reply = run_script(client, "force_unlock", name, &invocation).await?;
            released_reply("lock/force_unlock.lua", reply)
        })
    }
}
