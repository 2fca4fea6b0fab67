//! The crate's error types.

use std::fmt;
use std::time::Duration;

/// Errors returned by lock operations.
///
/// Contention is not an error: a lock held by someone else is reported as `Ok(None)` by the
/// `try_` methods. These are the failures: Redis unreachable or misbehaving, misuse, and a lock
/// that was lost while it was believed held.
///
/// [`is_transient`](Self::is_transient) says which are worth another try a little later.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Redis returned an error (a connection that failed is [`Error::Connection`]).
    Redis(redis::RedisError),
    /// The connection to Redis failed: refused (nothing listens at the address, or the server
    /// is restarting), reset or dropped (the server stopped, restarted or cut the link). It
    /// names the server, the operation and the name it was for. Transient
    /// ([`is_transient`](Self::is_transient)); a waiting acquire retries it until its wait
    /// ends. When the connection broke after the request was sent, whether it took effect is
    /// unknown: an acquire or release finds out before it returns this.
    Connection {
        /// The server, as `host:port` (never a password); with Sentinel, the master name and
        /// the Sentinels; in a cluster, the seed nodes.
        server: String,
        /// What was being done, e.g. `"acquire"`, `"unlock"`, `"renew"`.
        operation: &'static str,
        /// The name (the Redis key) it was for; empty for a call on no key (the connection
        /// check of [`ClientBuilder::connect`](crate::ClientBuilder::connect)).
        name: String,
        /// The driver's error.
        source: redis::RedisError,
    },
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
    /// A waiting acquire of a lock (`lock()`, `try_lock_for`, their `_with_options` forms)
    /// got three grants in a row that each arrived after its lease: the reply took so long
    /// that the grant's validity was spent (to within a drift margin of 1 % of the lease plus
    /// 2 ms) by the time it came. Each grant was given back, so the caller holds nothing and
    /// leaves no queue entry or subscription behind; trying again would only repeat it while
    /// replies stay this slow. A single attempt (`try_lock()`) gives such a grant back and
    /// returns `None` instead. The fix is a lease longer than the replies take: a longer
    /// explicit lease, or for a lock the watchdog renews a longer
    /// [`watchdog_timeout`](crate::ClientBuilder::watchdog_timeout).
    LateGrants {
        /// The lock name.
        name: String,
        /// How many grants in a row came too late.
        grants: u32,
        /// How long the reply to the last of them took, from sending the acquire.
        latency: Duration,
        /// The lease each grant had: the explicit lease, or the watchdog timeout.
        lease: Duration,
    },
    /// Redis is at its memory limit (`maxmemory`) and refused the write (`OOM command not
    /// allowed when used memory > 'maxmemory'`): its policy is `noeviction`, or an evicting
    /// policy found nothing left it may evict. Redis refuses a script at its first write that
    /// could grow memory, before it has written anything, so nothing was changed: an acquire
    /// holds nothing, a release released nothing (the hold stays until its lease runs out, the
    /// permits stay taken). Worth another try once memory is freed; a waiting acquire ends
    /// with this error rather than retrying it. RELIABILITY.md, "Operating Redis for locks:
    /// memory", says which operations Redis refuses and which it still runs.
    OutOfMemory {
        /// What was being done, e.g. `"acquire"`, `"unlock"`.
        operation: &'static str,
        /// The lock, semaphore or latch name the call was for.
        key: String,
        /// The server's reply.
        message: String,
    },
    /// The server cannot do what was asked: an option or command it does not have (a
    /// conditional expire before Redis 7.0), or, found at
    /// [`ClientBuilder::connect`](crate::ClientBuilder::connect), what every lock operation
    /// needs: no Lua (a build without it), or an ACL rule that refuses the crate's script
    /// commands (`EVALSHA`, `SCRIPT LOAD`). The message names the server's answer and the fix
    /// (docs/servers.md); nothing was written.
    Unsupported(String),
    /// The server refused to run one of the crate's scripts: it touches a key of another slot
    /// or node ("Script attempted to access a non local key", as some serverless endpoints
    /// and proxies answer), a key it did not declare (Dragonfly without its
    /// `--default_lua_flags=allow-undeclared-keys`), or one this user's ACL rules do not
    /// allow (`NOPERM`). The script did not run. Never retried: the same script on the same
    /// server is refused again.
    ScriptRefused {
        /// What was being done, e.g. `"acquire"`.
        operation: &'static str,
        /// The lock or semaphore name the script was for.
        key: String,
        /// The server's reply.
        message: String,
    },
    /// The client was shut down with [`Client::shutdown`](crate::Client::shutdown).
    Shutdown,
    /// A call of the blocking API ([`blocking`](crate::blocking)) was made on a thread where a
    /// Tokio runtime is current (an async task, a `block_on`, a runtime's own threads):
    /// blocking that thread could deadlock the runtime (a holder waiting on it to run, the
    /// watchdog stalled), so the call was refused before anything was sent. Use the async API
    /// there; from `spawn_blocking` see [`blocking::allow_in_runtime`](crate::blocking::allow_in_runtime).
    InAsyncContext {
        /// The blocking call, e.g. `"lock"`.
        operation: &'static str,
    },
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
            _ => self.redis().is_some_and(redis::RedisError::is_timeout),
        }
    }

    /// `true` when the client was shut down.
    pub fn is_shutdown(&self) -> bool {
        matches!(self, Self::Shutdown)
    }

    /// `true` when the same call may succeed if tried again a little later, with nothing
    /// changed by the caller:
    ///
    /// - [`Error::Connection`]: refused, reset or dropped (a restart, a failover, a network
    ///   blip);
    /// - [`Error::Timeout`]: Redis did not answer in time (stalled, overloaded, unreachable);
    /// - [`Error::Redis`] with `BUSY` (a script running), `LOADING` (the server loading its
    ///   data), `TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN` (a cluster or replication transition)
    ///   or `READONLY` (the server was demoted to a replica; a new connection finds the
    ///   master), or a driver I/O error;
    /// - [`Error::ReplicasNotSynced`]: what was granted was given back; the replicas may catch
    ///   up.
    ///
    /// Everything else is `false`: contention is not an error, and misuse
    /// ([`Error::InvalidArgument`], [`Error::NotHeld`], [`Error::WrongType`], ...), a server
    /// that cannot do what was asked ([`Error::Unsupported`], [`Error::ScriptRefused`],
    /// [`Error::Topology`]) and [`Error::Shutdown`] fail the same way again.
    ///
    /// A waiting acquire (`lock`, `try_lock_for`, a semaphore's `acquire`, a latch's
    /// `await_open`) already retries connection errors and busy servers within its wait; a
    /// caller retries what a non-waiting call (`try_lock`, `unlock`, an inspection) returned.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Connection { .. } | Self::Timeout { .. } | Self::ReplicasNotSynced { .. } => true,
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

    /// The driver's error, for [`Error::Redis`] and [`Error::Connection`].
    fn redis(&self) -> Option<&redis::RedisError> {
        match self {
            Self::Redis(e) | Self::Connection { source: e, .. } => Some(e),
            _ => None,
        }
    }

    /// `true` for [`Error::OutOfMemory`]: Redis refused a write at its memory limit, and
    /// nothing was changed.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Self::OutOfMemory { .. })
    }

    /// [`Error::OutOfMemory`] for the call `operation` on `key` when Redis refused it for
    /// memory, `self` otherwise. Redis answers `OOM ...` before a command runs and from a
    /// script's first write (7.0 and Valkey); Redis 6.2 wraps a script's refusal in `ERR Error
    /// running script ... -OOM ...` (Redisson's `CommandDecoder` reads both as
    /// `RedisOutOfMemoryException`).
    pub(crate) fn named_out_of_memory(self, operation: &'static str, key: &str) -> Self {
        match self {
            Self::Redis(e) if is_oom(&e) => Self::OutOfMemory {
                operation,
                key: key.to_owned(),
                message: e.to_string(),
            },
            other => other,
        }
    }

    /// The request may have reached Redis but no reply came back (a timeout, a connection that
    /// broke after the request was handed to it): whether it took effect is unknown.
    pub(crate) fn outcome_unknown(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            _ => self
                .redis()
                .is_some_and(|e| e.is_timeout() || (e.is_io_error() && !e.is_connection_refusal())),
        }
    }

    /// The key holds a Redis value of another type.
    pub(crate) fn is_wrong_type(&self) -> bool {
        matches!(self, Self::WrongType { .. })
    }

    /// The connection the request was on dropped (or was already dead).
    pub(crate) fn connection_dropped(&self) -> bool {
        self.redis()
            .is_some_and(redis::RedisError::is_connection_dropped)
    }

    /// The connection was refused: nothing listens at the address (yet).
    pub(crate) fn connection_refused(&self) -> bool {
        self.redis()
            .is_some_and(redis::RedisError::is_connection_refusal)
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

    /// Names the server, the operation and the name in a connection failure (refused, reset,
    /// dropped, a driver I/O error): the seam calls it once for every failed call. Other
    /// errors are returned as they are.
    pub(crate) fn in_context(
        self,
        server: impl FnOnce() -> String,
        op: &'static str,
        key: &str,
    ) -> Self {
        match self {
            Self::Redis(e)
                if !e.is_timeout()
                    && (e.is_io_error()
                        || e.is_connection_refusal()
                        || e.is_connection_dropped()
                        || e.kind() == redis::ErrorKind::ClusterConnectionNotFound) =>
            {
                Self::Connection {
                    server: server(),
                    operation: op,
                    name: key.to_owned(),
                    source: e,
                }
            }
            other => other,
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
            Self::Connection {
                server,
                operation,
                name,
                source,
            } if name.is_empty() => write!(
                f,
                "{operation}: connection to Redis at {server} failed: {source}"
            ),
            Self::Connection {
                server,
                operation,
                name,
                source,
            } => write!(
                f,
                "{operation} of {name:?}: connection to Redis at {server} failed: {source}"
            ),
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
                "none of the master's {replicas} replicas acknowledged the {operation} of \
                 {name:?} within {after:?}; it was released again (Redisson: None of slaves \
                 were synced)"
            ),
            Self::LateGrants {
                name,
                grants,
                latency,
                lease,
            } => write!(
                f,
                "{grants} grants of {name:?} in a row arrived after their lease: the last reply \
                 took {latency:?}, the lease is {lease:?}; each was given back and nothing is \
                 held. Replies are slower than the lease: use a longer lease, or a longer \
                 watchdog timeout for a lock without one"
            ),
            Self::OutOfMemory {
                operation,
                key,
                message,
            } => write!(
                f,
                "Redis is at its memory limit and refused the {operation} of {key:?}; nothing \
                 was changed (free memory, raise maxmemory, or see RELIABILITY.md on memory): \
                 {message}"
            ),
            Self::Unsupported(msg) => f.write_str(msg),
            Self::ScriptRefused {
                operation,
                key,
                message,
            } => write!(
                f,
                "the server refused to run the {operation} script of {key:?} ({message}); it did \
                 not run: a server that refuses scripts touching their own keys (a non local \
                 key, an undeclared key, an ACL rule) cannot run this crate's locks, see \
                 docs/servers.md"
            ),
            Self::Shutdown => write!(f, "the client has been shut down"),
            Self::InAsyncContext { operation } => write!(
                f,
                "redisson_sync::blocking: {operation} was called where a Tokio runtime is \
                 current (inside async code); blocking this thread could deadlock the runtime, \
                 so nothing was done: use the async API here"
            ),
            Self::UnexpectedReply { script, detail } => {
                write!(f, "unexpected reply from script {script}: {detail}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Redis(e) | Self::Connection { source: e, .. } => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Self::Redis(e)
    }
}

/// Whether Redis refused the request for memory: an `OOM` error, or Redis 6.2's script error
/// that carries one (`... -OOM command not allowed ...`).
fn is_oom(e: &redis::RedisError) -> bool {
    e.code() == Some("OOM") || e.to_string().contains("-OOM ")
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
    /// The runtime of a [`blocking::Client`](crate::blocking::Client) (its thread, its I/O
    /// driver) could not be started.
    Runtime(std::io::Error),
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
            Self::Runtime(e) => write!(f, "could not start the blocking client's runtime: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Url(e) => Some(e),
            Self::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_grants_name_the_lock_the_latency_the_lease_and_the_fix() {
        let e = Error::LateGrants {
            name: "jobs".into(),
            grants: 3,
            latency: Duration::from_millis(2004),
            lease: Duration::from_millis(1500),
        };
        assert_eq!(
            e.to_string(),
            "3 grants of \"jobs\" in a row arrived after their lease: the last reply took \
             2.004s, the lease is 1.5s; each was given back and nothing is held. Replies are \
             slower than the lease: use a longer lease, or a longer watchdog timeout for a lock \
             without one"
        );
        assert!(!e.is_timeout() && !e.is_not_held() && !e.is_transient());
    }

    #[test]
    fn messages_have_no_runs_of_spaces() {
        let e = Error::ReplicasNotSynced {
            operation: "acquire",
            name: "jobs".into(),
            replicas: 2,
            after: Duration::from_secs(1),
        };
        assert!(!e.to_string().contains("  "), "{e}");
    }

    fn io(kind: std::io::ErrorKind) -> redis::RedisError {
        redis::RedisError::from(std::io::Error::from(kind))
    }

    /// A server's error reply with this code.
    fn reply(code: &str) -> Error {
        let reply = format!("-{code} something\r\n");
        match redis::parse_redis_value(reply.as_bytes()).unwrap() {
            redis::Value::ServerError(e) => Error::Redis(redis::RedisError::from(e)),
            other => panic!("{other:?}"),
        }
    }

    fn connection(source: redis::RedisError) -> Error {
        Error::Redis(source).in_context(|| "127.0.0.1:7000".into(), "acquire", "orders")
    }

    #[test]
    fn connection_failures_get_their_context_once_at_the_seam() {
        let e = connection(io(std::io::ErrorKind::ConnectionRefused));
        let Error::Connection {
            server,
            operation,
            name,
            source,
        } = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!(
            (server.as_str(), *operation, name.as_str()),
            ("127.0.0.1:7000", "acquire", "orders")
        );
        assert!(source.is_connection_refusal());
        assert_eq!(
            e.to_string(),
            format!(
                "acquire of \"orders\": connection to Redis at 127.0.0.1:7000 failed: {source}"
            )
        );
        assert!(std::error::Error::source(&e).is_some());
        // No name: the connection check.
        let check = Error::Redis(io(std::io::ErrorKind::ConnectionReset)).in_context(
            || "127.0.0.1:7000".into(),
            "connect",
            "",
        );
        assert!(
            check
                .to_string()
                .starts_with("connect: connection to Redis at 127.0.0.1:7000 failed: "),
            "{check}"
        );
        // Server replies keep their variant.
        assert!(matches!(
            reply("BUSY").in_context(|| unreachable!(), "acquire", "orders"),
            Error::Redis(_)
        ));
    }

    #[test]
    fn connection_errors_timeouts_and_busy_servers_are_transient() {
        for kind in [
            std::io::ErrorKind::ConnectionRefused,
            std::io::ErrorKind::ConnectionReset,
            std::io::ErrorKind::BrokenPipe,
            std::io::ErrorKind::UnexpectedEof,
        ] {
            let e = connection(io(kind));
            assert!(e.is_transient(), "{e:?}");
            assert!(!e.is_timeout(), "{e:?}");
        }
        let timeout = Error::Timeout {
            operation: "acquire",
            after: Duration::from_secs(1),
        };
        assert!(timeout.is_transient() && timeout.is_timeout());
        for code in [
            "BUSY",
            "LOADING",
            "TRYAGAIN",
            "MASTERDOWN",
            "CLUSTERDOWN",
            "READONLY",
        ] {
            assert!(reply(code).is_transient(), "{code}");
        }
        let unsynced = Error::ReplicasNotSynced {
            operation: "acquire",
            name: "orders".into(),
            replicas: 1,
            after: Duration::from_secs(1),
        };
        assert!(unsynced.is_transient());
    }

    #[test]
    fn misuse_refusals_and_shutdown_are_not_transient() {
        let name = || "orders".to_owned();
        let not_transient = [
            reply("ERR"),
            reply("NOPERM"),
            Error::NotHeld {
                name: name(),
                holder: name(),
            },
            Error::LeaseLost { name: name() },
            Error::UpgradeRefused {
                name: name(),
                holder: name(),
            },
            Error::NotReentrant {
                name: name(),
                holder: name(),
            },
            Error::WrongType { key: name() },
            Error::InvalidArgument(name()),
            Error::PermitNotHeld {
                name: name(),
                ids: vec![],
            },
            Error::Topology(name()),
            Error::Unsupported(name()),
            Error::ScriptRefused {
                operation: "acquire",
                key: name(),
                message: name(),
            },
            Error::Shutdown,
            Error::InAsyncContext { operation: "lock" },
            Error::UnexpectedReply {
                script: "acquire",
                detail: name(),
            },
        ];
        for e in not_transient {
            assert!(!e.is_transient(), "{e:?}");
        }
    }

    /// The reply of a server, as redis-rs hands it over.
    fn server_reply(resp: &str) -> redis::RedisError {
        redis::parse_redis_value(resp.as_bytes())
            .unwrap()
            .extract_error()
            .unwrap_err()
    }

    #[test]
    fn every_build_s_refusal_for_memory_is_out_of_memory_naming_the_call() {
        // What Redis 7.0.15, Valkey 9.1.2 and Redis 6.2.14 answered (RELIABILITY.md): before a
        // command, and at a script's first write.
        let refusals = [
            "-OOM command not allowed when used memory > 'maxmemory'.\r\n",
            "-OOM command not allowed when used memory > 'maxmemory'. script: \
             96caa887cba9a03335529aa63f29b5d35286d906, on @user_script:1.\r\n",
            "-OOM command not allowed when used memory > 'maxmemory'. script: on \
             @user_script:1.\r\n",
            "-ERR Error running script (call to f_96caa887cba9a03335529aa63f29b5d35286d906): \
             @user_script:1: @user_script: 1: -OOM command not allowed when used memory > \
             'maxmemory'.\r\n",
        ];
        for resp in refusals {
            let e = Error::Redis(server_reply(resp)).named_out_of_memory("unlock", "jobs");
            assert!(e.is_out_of_memory(), "{resp}: {e:?}");
            let Error::OutOfMemory {
                operation,
                key,
                message,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!((*operation, key.as_str()), ("unlock", "jobs"));
            assert!(message.contains("maxmemory"), "{message}");
            let text = e.to_string();
            assert!(
                text.starts_with("Redis is at its memory limit and refused the unlock of \"jobs\""),
                "{text}"
            );
            assert!(!e.is_transient() && !e.outcome_unknown() && !e.server_busy());
        }
        for other in ["-ERR unknown command 'X'\r\n", "-BUSY Redis is busy\r\n"] {
            let e = Error::Redis(server_reply(other)).named_out_of_memory("acquire", "jobs");
            assert!(!e.is_out_of_memory(), "{other}");
        }
    }
}
