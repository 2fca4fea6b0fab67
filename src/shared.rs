//! The state one client's primitives share: what the wait engine and every primitive take,
//! instead of the public `Client`.

use std::fmt;
use std::sync::Arc;

use crate::config::Config;
use crate::conn::Conn;
use crate::credentials::CredentialsProvider;
use crate::error::{BuildError, Error, Result};
use crate::names::NameMapper;
use crate::pubsub::PubSub;
use crate::tasks::Tasks;
use crate::watchdog::Watchdog;

/// A client's connections, services and settings.
pub(crate) struct Shared {
    /// The client id: a v4 UUID in Java's format, the first half of every holder field.
    pub(crate) id: String,
    pub(crate) config: Config,
    /// Maps every name the client is given (a prefix, or the builder's mapper).
    pub(crate) names: NameMapper,
    pub(crate) conn: Arc<Conn>,
    pub(crate) pubsub: PubSub,
    pub(crate) watchdog: Watchdog,
    pub(crate) tasks: Tasks,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .field("config", &self.config)
            .field("connections", &self.conn)
            .field("shut_down", &self.tasks.is_shut_down())
            .finish()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Stops the pub/sub transport and the watchdog once the last handle is gone.
        self.tasks.shut_down();
    }
}

/// Held by a [`Client`](crate::Client) and shared by its clones (not by its locks and guards):
/// dropped with the last of them. When that happens before
/// [`Client::shutdown`](crate::Client::shutdown) while background releases are still pending,
/// it warns: a process that exits now leaves those locks held until their leases end. Never
/// blocks.
pub(crate) struct LastHandle(pub(crate) Arc<Shared>);

impl Drop for LastHandle {
    fn drop(&mut self) {
        let tasks = &self.0.tasks;
        if tasks.is_shut_down() {
            return;
        }
        let pending = tasks.pending();
        if pending > 0 {
            tracing::warn!(
                client = %self.0.id,
                pending,
                "the last Client handle was dropped without Client::shutdown() while {pending} \
                 background release(s) of dropped guards were still pending: if the process exits \
                 now, those locks stay held until their leases end; call \
                 `client.shutdown().await` before exiting"
            );
        }
    }
}

impl Shared {
    pub(crate) fn new(
        config: Config,
        names: NameMapper,
        credentials: Option<CredentialsProvider>,
        tasks: Tasks,
    ) -> Result<Self, BuildError> {
        let id = crate::layout::client_id(&uuid::Uuid::new_v4());
        let conn = Arc::new(Conn::new(&config, credentials)?);
        conn.start(&tasks);
        let pubsub = PubSub::start(conn.clone(), config.ping_interval, &tasks);
        let watchdog = Watchdog::start(
            conn.clone(),
            id.as_str().into(),
            config.watchdog_timeout,
            config.watchdog_batch_size,
            &tasks,
        );
        Ok(Self {
            id,
            config,
            names,
            conn,
            pubsub,
            watchdog,
            tasks,
        })
    }

    /// A client's state that never connects (tests that send nothing), on the current
    /// runtime.
    #[cfg(test)]
    pub(crate) fn offline() -> Arc<Self> {
        let config = Config::from_url("redis://127.0.0.1:1");
        let tasks = Tasks::new(tokio::runtime::Handle::current());
        Arc::new(Self::new(config, NameMapper::identity(), None, tasks).unwrap())
    }

    /// [`Error::Shutdown`] once the client was shut down.
    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.tasks.is_shut_down() {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }
}
