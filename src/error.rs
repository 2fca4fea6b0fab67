//! The crate's error types.

use std::fmt;
use std::time::Duration;

/// Errors returned by lock operations.
///
/// Contention is not an error: a lock held by someone else is reported as `Ok(None)` by the
/// `try_` methods. These are the failures: Redis unreachable or misbehaving, misuse, and a lock
/// that was lost while it was believed held.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Redis returned an error, or the connection to it failed.
    Redis(redis::RedisError),
    /// A Redis operation did not complete in time (the client's `command_timeout`, or the
    /// maximum wait of a `try_lock_for` whose last attempt got no reply).
    Timeout {
        /// What was being done, e.g. `"acquire"`.
        operation: &'static str,
        /// How long it was given.
        after: Duration,
    },
    /// The owner does not hold the lock (Redisson's `IllegalMonitorStateException`): it was
    /// force-unlocked, expired, or taken over by another holder. Nothing was changed.
    NotHeld {
        /// The lock name.
        name: String,
        /// The holder field the release was attempted for (`<client id>:<owner id>`).
        holder: String,
    },
    /// The watchdog found the lock gone while its guard still existed (expired during a stall,
    /// force-unlocked, deleted). The release did not touch Redis.
    LeaseLost {
        /// The lock name.
        name: String,
    },
    /// The owner holds the read half of a read-write lock and asked for its write half
    /// (without holding that already). Redisson's `RReadWriteLock` cannot upgrade: its reader
    /// would wait on itself until its read lease ends. Returned at once, by waiting and
    /// non-waiting acquisitions alike; nothing was changed. Release the read holds first.
    UpgradeRefused {
        /// The lock name.
        name: String,
        /// The owner's reader field (`<client id>:<owner id>`).
        holder: String,
    },
    /// The owner already holds this non-reentrant lock and asked for it again (Redisson's
    /// `IllegalMonitorStateException` from `NonReentrantLock` and `NonReentrantFairLock`).
    /// Returned at once, never a deadlock; the hold the owner has is left as it was.
    NotReentrant {
        /// The lock name.
        name: String,
        /// The holder field (or token) of the owner.
        holder: String,
    },
    /// The name holds a Redis key of another type than the primitive uses (a lock is a hash,
    /// a semaphore or latch a string, a permit-expirable semaphore's permits a sorted set).
    /// Nothing was changed.
    WrongType {
        /// The key that holds a value of another type.
        key: String,
    },
    /// An argument was out of range (zero or sub-millisecond lease, a duration too long for
    /// Redis, zero permits where they mean nothing, a permit id that is not 32 hex
    /// characters). Nothing was sent to Redis.
    InvalidArgument(String),
    /// A permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) is not held:
    /// it was released already, its lease ran out, or it never existed (Redisson's
    /// `IllegalArgumentException` "has already been released or doesn't exist"). Nothing was
    /// released.
    PermitNotHeld {
        /// The semaphore name.
        name: String,
        /// The permit ids asked for, as 32-character hex.
        ids: Vec<String>,
    },
    /// The servers are not what the configuration says, or a name cannot be used on them: a
    /// single server given as a cluster, a Redis Cluster node given as a single server, no
    /// seed node reachable, sharded pub/sub asked of a cluster without it, a name whose
    /// derived keys would fall in different cluster slots. The message names the fix; nothing
    /// was written.
    Topology(String),
    /// Replica sync is on ([`Config::sync_replicas`](crate::Config::sync_replicas)) and none of
    /// the master's replicas acknowledged an acquire within the replica sync timeout
    /// (Redisson's `NoSyncedSlavesException`, "None of slaves were synced"). What the acquire
    /// got was released again: the caller holds nothing. Worth another try once the replicas
    /// catch up.
    ReplicasNotSynced {
        /// What was being done, e.g. `"acquire"`.
        operation: &'static str,
        /// The lock or semaphore name.
        name: String,
        /// How many replicas the master reported.
        replicas: u32,
        /// How long `WAIT` waited.
        after: Duration,
    },
    /// The client was shut down with [`Client::shutdown`](crate::Client::shutdown).
    Shutdown,
    /// A script returned a reply this crate does not understand.
    UnexpectedReply {
        /// The script that replied.
        script: &'static str,
        /// The reply, as text.
        detail: String,
    },
}

impl Error {
    /// `true` for [`Error::NotHeld`] and [`Error::LeaseLost`]: the lock was not held at release.
    pub fn is_not_held(&self) -> bool {
        matches!(self, Self::NotHeld { .. } | Self::LeaseLost { .. })
    }

    /// `true` when an operation timed out, on our side or in the Redis driver.
    pub fn is_timeout(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            Self::Redis(e) => e.is_timeout(),
            _ => false,
        }
    }

    /// `true` when the client was shut down.
    pub fn is_shutdown(&self) -> bool {
        matches!(self, Self::Shutdown)
    }

    /// The request may have reached Redis but no reply came back (a timeout, a connection that
    /// broke after the request was handed to it): whether it took effect is unknown.
    pub(crate) fn outcome_unknown(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            Self::Redis(e) => e.is_timeout() || (e.is_io_error() && !e.is_connection_refusal()),
            _ => false,
        }
    }

    /// The key holds a Redis value of another type.
    pub(crate) fn is_wrong_type(&self) -> bool {
        matches!(self, Self::WrongType { .. })
    }

    /// The connection the request was on dropped (or was already dead).
    pub(crate) fn connection_dropped(&self) -> bool {
        matches!(self, Self::Redis(e) if e.is_connection_dropped())
    }

    /// Redis says "later" and ran nothing: it is busy running a script (`BUSY`, which proves
    /// the script did not run), loading its data (`LOADING`), or in a cluster or replication
    /// transition (`TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN`; `READONLY`: the server was
    /// demoted to a replica, and a new connection finds the master).
    pub(crate) fn server_busy(&self) -> bool {
        matches!(self, Self::Redis(e) if matches!(
            e.code(),
            Some("BUSY" | "LOADING" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" | "READONLY")
        ))
    }

    /// Worth another try a little later: the server is busy ([`server_busy`](Self::server_busy)),
    /// or the connection dropped, was refused or stalled.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            Self::Redis(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.kind() == redis::ErrorKind::ClusterConnectionNotFound
                    || self.server_busy()
            }
            _ => false,
        }
    }

    /// Maps a Redis error for an operation on `key`, naming the key when it has the wrong type.
    pub(crate) fn from_redis(err: redis::RedisError, key: &str) -> Self {
        // Inside a script Redis 7 reports "WRONGTYPE ..."; older servers wrap it in an ERR.
        if err.code() == Some("WRONGTYPE") || err.to_string().contains("WRONGTYPE") {
            Self::WrongType {
                key: key.to_owned(),
            }
        } else {
            Self::Redis(err)
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Redis(e) => write!(f, "Redis error: {e}"),
            Self::Timeout { operation, after } => {
                write!(f, "Redis did not answer the {operation} within {after:?}")
            }
            Self::NotHeld { name, holder } => {
                write!(f, "lock {name:?} is not held by {holder}")
            }
            Self::LeaseLost { name } => write!(
                f,
                "lock {name:?} was lost before release: its lease expired or it was force-unlocked"
            ),
            Self::UpgradeRefused { name, holder } => write!(
                f,
                "{holder} holds the read lock of {name:?} and asked for its write lock: a \
                 read-write lock cannot be upgraded (Redisson's reader would wait on itself); \
                 release the read holds first"
            ),
            Self::WrongType { key } => write!(
                f,
                "key {key:?} holds a Redis value of another type than this primitive uses; \
                 nothing was changed"
            ),
            Self::NotReentrant { name, holder } => write!(
                f,
                "{holder} already holds the non-reentrant lock {name:?} and asked for it again; \
                 release it first"
            ),
            Self::PermitNotHeld { name, ids } => write!(
                f,
                "semaphore {name:?}: permit(s) {} released already, expired, or never acquired; nothing was released",
                ids.join(", ")
            ),
            Self::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Self::Topology(msg) => f.write_str(msg),
            Self::ReplicasNotSynced {
                operation,
                name,
                replicas,
                after,
            } => write!(
                f,
                "none of the master's {replicas} replicas acknowledged the {operation} of                  {name:?} within {after:?}; it was released again (Redisson: None of slaves                  were synced)"
            ),
            Self::Shutdown => write!(f, "the client has been shut down"),
            Self::UnexpectedReply { script, detail } => {
                write!(f, "unexpected reply from script {script}: {detail}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Self::Redis(e)
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors from building a [`Client`](crate::Client).
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting is out of range; the message names it.
    InvalidConfig(String),
    /// The Redis URL could not be parsed.
    Url(redis::RedisError),
    /// No Tokio runtime was given and none is current.
    NoRuntime,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidConfig(msg) => write!(f, "invalid configuration: {msg}"),
            Self::Url(e) => write!(f, "invalid Redis URL: {e}"),
            Self::NoRuntime => write!(
                f,
                "no Tokio runtime: build the client inside a runtime or pass one with ClientBuilder::runtime"
            ),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Url(e) => Some(e),
            _ => None,
        }
    }
}
