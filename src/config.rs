//! Client configuration: [`Config`] (every setting, serializable with the `serde` feature),
//! the choices some settings take ([`PubSubMode`], [`SyncReplicas`]), and what the
//! [`ClientBuilder`](crate::ClientBuilder) takes besides: a [`NameMapper`] and a
//! [`CredentialsProvider`].

use std::time::Duration;

use crate::error::BuildError;

pub use crate::credentials::{Credentials, CredentialsError, CredentialsProvider};
pub use crate::names::NameMapper;

/// The longest lease Redis accepts whatever the clock (`PEXPIRE` fails when now + lease
/// overflows an `i64` of milliseconds).
pub(crate) const MAX_LEASE_MS: u64 = 1 << 62;

/// Configuration of a [`Client`](crate::Client).
///
/// Every field has a default ([`Config::default`]); build a client with
/// [`Config::create_client`] or [`ClientBuilder`](crate::ClientBuilder). With the `serde`
/// feature the config deserializes from any serde format; durations are written in
/// milliseconds as `<field>_ms` (for example `watchdog_timeout_ms = 30000`), and a negative or
/// non-integer value is rejected with an error.
#[derive(Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
#[non_exhaustive]
pub struct Config {
    /// Redis URL, `redis://[user:password@]host:port[/db]` (or `rediss://` where redis-rs has
    /// TLS enabled).
    ///
    /// Default: `redis://127.0.0.1:6379`. Ignored when [`cluster_nodes`](Self::cluster_nodes)
    /// is set.
    pub url: String,
    /// Seed nodes of a Redis Cluster (`redis://host:port` each; any reachable one is enough,
    /// the client discovers the rest and follows topology changes). Empty: a single server at
    /// [`url`](Self::url).
    ///
    /// Default: empty.
    pub cluster_nodes: Vec<String>,
    /// Sentinels to ask for the master (`redis://[user:password@]host:port` each; the
    /// credentials in these URLs are the Sentinels' own). Not empty: Sentinel mode, the client
    /// connects to the master the Sentinels name for [`sentinel_master`](Self::sentinel_master)
    /// and follows their failovers; [`url`](Self::url) then only gives the database number and
    /// the data nodes' credentials. Exclusive with [`cluster_nodes`](Self::cluster_nodes).
    ///
    /// Default: empty.
    pub sentinel_nodes: Vec<String>,
    /// The master name the Sentinels monitor (Redisson's `masterName`), in Sentinel mode.
    ///
    /// Default: empty.
    pub sentinel_master: String,
    /// ACL user for the data nodes (Redis 6+), overriding the one in [`url`](Self::url)
    /// (Redisson's `username`). Sentinels take theirs from [`sentinel_nodes`](Self::sentinel_nodes).
    ///
    /// Default: none (the URL's, or the `default` user).
    pub username: Option<String>,
    /// Password for the data nodes, overriding the one in [`url`](Self::url) (Redisson's
    /// `password`). Never printed by `Debug`.
    ///
    /// Default: none (the URL's, or no password).
    pub password: Option<String>,
    /// In cluster mode, how unlock messages are published and waited for (Redisson's
    /// `shardedSubscriptionMode`); outside cluster mode always classic `PUBLISH`/`SUBSCRIBE`.
    /// Match the Java services': see [`PubSubMode`].
    ///
    /// Default: [`PubSubMode::Auto`].
    pub pubsub: PubSubMode,
    /// Maximum number of connections for lock commands (one more, dedicated connection
    /// carries the client's pub/sub subscriptions). Calls share the
    /// [`connections`](Self::connections) the first call opens: they are multiplexed, so the
    /// requests of concurrent tasks travel pipelined on them, and another opens only to replace
    /// one that failed (or, with replica sync, for a synced call, which holds one of a second
    /// pool of this size until its reply).
    ///
    /// Default: 16.
    pub pool_size: usize,
    /// How many connections calls share (a single server, or Sentinel's master; in cluster
    /// mode each node has one). The client's first call opens them all (within its own time for
    /// a connection; one it could not open opens at its first use); each is kept open for
    /// the client's life and counts toward [`pool_size`](Self::pool_size) (a larger value than
    /// `pool_size` opens `pool_size`).
    ///
    /// While few calls are in flight (under 32), successive calls take the connections in
    /// turn: a few concurrent calls finish sooner over two connections, each with its own
    /// redis-rs task, than queued on one. With more in flight, every call goes over the first:
    /// many requests pipelined on one connection cost the fewest system calls each. Measured on
    /// two cores against one server, lock+unlock pairs/s on distinct keys (`pairs --throughput`,
    /// 2026-12-05), 2 against 1: about 1.5 x at 8 concurrent tasks, within the noise at 64 and
    /// 512. With 1, every call shares one connection.
    ///
    /// Default: 2.
    pub connections: usize,
    /// Lease of a lock taken without an explicit lease, renewed by the watchdog every
    /// `watchdog_timeout / 3` while the guard lives (Redisson's `lockWatchdogTimeout`).
    ///
    /// Default: 30 s.
    #[cfg_attr(feature = "serde", serde(rename = "watchdog_timeout_ms", with = "ms"))]
    pub watchdog_timeout: Duration,
    /// Maximum number of locks renewed by one watchdog script call (Redisson's
    /// `lockWatchdogBatchSize`).
    ///
    /// Default: 100.
    pub watchdog_batch_size: usize,
    /// How often a waiting client re-checks a lock on its own, even when no message arrived.
    /// Waiters sleep until a message or the lock's remaining TTL, like Redisson's; in addition,
    /// one waiter per lock and client (the channel's re-checker) re-checks at least this often,
    /// so a lost message costs about this much, however many tasks wait (parked waiters cost
    /// Redis nothing else).
    ///
    /// Default: 1 s.
    #[cfg_attr(feature = "serde", serde(rename = "recheck_interval_ms", with = "ms"))]
    pub recheck_interval: Duration,
    /// Slot of one fair-lock waiter: a queued waiter that has not taken the lock this long after
    /// its turn came is dropped from the queue (Redisson's `fairLockWaitTimeout`). A
    /// `try_lock_for(wait)` uses `wait` as its slot instead, as Redisson does.
    ///
    /// Default: 5 min.
    #[cfg_attr(feature = "serde", serde(rename = "fair_wait_timeout_ms", with = "ms"))]
    pub fair_wait_timeout: Duration,
    /// Time limit of one Redis command or script call, including taking a connection
    /// (Redisson's `timeout`).
    ///
    /// Default: 3 s.
    #[cfg_attr(feature = "serde", serde(rename = "command_timeout_ms", with = "ms"))]
    pub command_timeout: Duration,
    /// Time limit for opening a connection to Redis (Redisson's `connectTimeout`).
    ///
    /// Default: 3 s.
    #[cfg_attr(feature = "serde", serde(rename = "connect_timeout_ms", with = "ms"))]
    pub connect_timeout: Duration,
    /// How often the pub/sub connection is pinged while it carries subscriptions (Redisson's
    /// `pingConnectionInterval`, shorter by default). A connection whose `PING` gets no answer
    /// within the command timeout is dropped and replaced; its channels are subscribed again
    /// and every waiter re-checks its lock, since a message may have been lost meanwhile. So a
    /// silently dead subscription is noticed within about this interval plus the command
    /// timeout.
    ///
    /// Default: 1 s.
    #[cfg_attr(feature = "serde", serde(rename = "ping_interval_ms", with = "ms"))]
    pub ping_interval: Duration,
    /// With the `metrics` feature: also label every metric (but the pub/sub reconnects) with
    /// the primitive's name, `name` (see [`observe`](crate::observe)). Every distinct name is
    /// then a time series of its own: turn it on only when the application uses few, fixed
    /// names. Without the feature it changes nothing.
    ///
    /// Default: `false` (the metrics are labelled by kind only).
    pub metrics_name_label: bool,
    /// Put before every name the client is given, before any key, channel or queue name is
    /// derived from it: Redisson's `NameMapper` that prepends the same prefix (docs/LAYOUT.md
    /// §1.1). A Rust service must use the Java services' prefix to share their locks. For
    /// another mapping use [`ClientBuilder::name_mapper`](crate::ClientBuilder::name_mapper).
    ///
    /// Default: empty (names are the keys, as given).
    pub key_prefix: String,
    /// Whether lock writes wait for the master's replicas (Redisson's `checkLockSyncedSlaves`,
    /// docs/LAYOUT.md §1.7): see [`SyncReplicas`].
    ///
    /// Default: [`SyncReplicas::Auto`] (on with Sentinel and in a cluster, off on a single
    /// server, as Redisson).
    pub sync_replicas: SyncReplicas,
    /// How long a synced write waits for its replicas (`WAIT`'s timeout; Redisson's
    /// `slavesSyncTimeout`).
    ///
    /// Default: 1 s.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "replica_sync_timeout_ms", with = "ms")
    )]
    pub replica_sync_timeout: Duration,
    /// With the `tls` feature: a PEM file of the CA certificates that `rediss://` servers'
    /// certificates must chain to, instead of the system's roots (Redisson's
    /// `sslTruststore`).
    ///
    /// Default: none (the system's roots).
    pub tls_ca_cert: Option<String>,
    /// With the `tls` feature: a PEM file of the client certificate to present, for servers
    /// that ask for one (`tls-auth-clients yes`; Redisson's `sslKeystore`). Set
    /// [`tls_client_key`](Self::tls_client_key) with it.
    ///
    /// Default: none.
    pub tls_client_cert: Option<String>,
    /// With the `tls` feature: a PEM file of the client certificate's private key.
    ///
    /// Default: none.
    pub tls_client_key: Option<String>,
}

/// Whether lock writes are followed by `WAIT` on the master's replicas (Redisson's
/// `checkLockSyncedSlaves`, docs/LAYOUT.md §1.7).
///
/// With replica sync, every call Redisson syncs (lock acquire, unlock, renewal, force unlock,
/// a fair waiter's give-up; semaphore acquire and release; permit-expirable semaphore
/// acquire, release and permit changes) is pipelined with `WAIT <replicas>
/// <replica_sync_timeout>` on the same connection, `<replicas>` being the replicas the master
/// reports (`INFO replication`, re-read every few seconds). When replicas were expected and
/// none acknowledged in time, an acquire releases what it got and returns
/// [`Error::ReplicasNotSynced`](crate::Error::ReplicasNotSynced); the other calls did take
/// effect on the master, so they succeed with a warning (a renewal that was not synced is
/// simply made again at the next tick). A server that refuses `WAIT` turns replica sync off
/// for the client, with one warning.
///
/// `WAIT` narrows, but does not close, the window in which a failover loses a lock: Redis
/// replication stays asynchronous (see RELIABILITY.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "lowercase")
)]
#[non_exhaustive]
pub enum SyncReplicas {
    /// On with Sentinel and in a cluster; off on a single server (Redisson skips `WAIT` in
    /// its single-server mode).
    #[default]
    Auto,
    /// On in every mode, a single server's replicas included.
    On,
    /// Never: lock writes are plain script calls.
    Off,
}

impl SyncReplicas {
    /// The name used in configuration (`auto`, `on`, `off`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        }
    }
}

impl std::str::FromStr for SyncReplicas {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            other => Err(format!(
                "sync_replicas must be auto, on or off, got {other:?}"
            )),
        }
    }
}

impl std::fmt::Debug for Config {
    /// Every field, with passwords (the field and those in URLs) shown as `***`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls = |v: &[String]| v.iter().map(|u| redact(u)).collect::<Vec<_>>();
        f.debug_struct("Config")
            .field("url", &redact(&self.url))
            .field("cluster_nodes", &urls(&self.cluster_nodes))
            .field("sentinel_nodes", &urls(&self.sentinel_nodes))
            .field("sentinel_master", &self.sentinel_master)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("pubsub", &self.pubsub)
            .field("pool_size", &self.pool_size)
            .field("connections", &self.connections)
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("watchdog_batch_size", &self.watchdog_batch_size)
            .field("recheck_interval", &self.recheck_interval)
            .field("fair_wait_timeout", &self.fair_wait_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("ping_interval", &self.ping_interval)
            .field("metrics_name_label", &self.metrics_name_label)
            .field("key_prefix", &self.key_prefix)
            .field("sync_replicas", &self.sync_replicas)
            .field("replica_sync_timeout", &self.replica_sync_timeout)
            .field("tls_ca_cert", &self.tls_ca_cert)
            .field("tls_client_cert", &self.tls_client_cert)
            .field("tls_client_key", &self.tls_client_key)
            .finish()
    }
}

/// `url` with the password of its `user:password@` part replaced by `***`, also when the
/// text is not a valid URL (no scheme, say), so that no message or `Debug` shows it. For a
/// program's own messages and logs (the CLI shows URLs through it):
///
/// ```
/// use redisson_sync::config::redact;
///
/// assert_eq!(redact("redis://app:s3cret@10.0.0.1:6379/2"), "redis://app:***@10.0.0.1:6379/2");
/// assert_eq!(redact("rediss://token@h:6380"), "rediss://***@h:6380");
/// assert_eq!(redact("redis://h:6379"), "redis://h:6379");
/// ```
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest))
            if scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (format!("{scheme}://"), rest)
        }
        _ => (String::new(), url),
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}{user}:***@{host}"),
            None => format!("{scheme}***@{host}"),
        },
        None => url.to_owned(),
    }
}

/// How a client in cluster mode publishes its messages and subscribes to them (Redisson's
/// `ShardedSubscriptionMode`, docs/LAYOUT.md §1.6). Sharded (`SPUBLISH`/`SSUBSCRIBE`) and classic
/// (`PUBLISH`/`SUBSCRIBE`) messages are separate in Redis 7: a waiter only hears messages of its
/// own flavour, so every client sharing a lock must agree (or one side must use [`Both`](Self::Both)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "lowercase")
)]
#[non_exhaustive]
pub enum PubSubMode {
    /// Sharded when the cluster supports it (`PUBSUB SHARDNUMSUB` succeeds: Redis or Valkey
    /// 7+), classic otherwise; exactly how Redisson 3.28+ decides with its default `AUTO`.
    #[default]
    Auto,
    /// Always classic `PUBLISH`/`SUBSCRIBE` (Redisson `OFF`, and every Redisson before 3.22).
    Classic,
    /// Always `SPUBLISH`/`SSUBSCRIBE` (Redisson `ON`); connecting fails on a cluster without
    /// sharded pub/sub.
    Sharded,
    /// Publish with both verbs and listen both ways, so Java peers in either mode are woken
    /// (for a fleet migrating between modes). Needs sharded pub/sub.
    Both,
}

impl PubSubMode {
    /// The name used in configuration (`auto`, `classic`, `sharded`, `both`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Classic => "classic",
            Self::Sharded => "sharded",
            Self::Both => "both",
        }
    }
}

impl std::str::FromStr for PubSubMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "classic" => Ok(Self::Classic),
            "sharded" => Ok(Self::Sharded),
            "both" => Ok(Self::Both),
            other => Err(format!(
                "pub/sub mode must be auto, classic, sharded or both, got {other:?}"
            )),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:6379".to_owned(),
            cluster_nodes: Vec::new(),
            sentinel_nodes: Vec::new(),
            sentinel_master: String::new(),
            username: None,
            password: None,
            pubsub: PubSubMode::Auto,
            pool_size: 16,
            connections: 2,
            watchdog_timeout: Duration::from_secs(30),
            watchdog_batch_size: 100,
            recheck_interval: Duration::from_secs(1),
            fair_wait_timeout: Duration::from_secs(300),
            command_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(3),
            ping_interval: Duration::from_secs(1),
            metrics_name_label: false,
            key_prefix: String::new(),
            sync_replicas: SyncReplicas::Auto,
            replica_sync_timeout: Duration::from_secs(1),
            tls_ca_cert: None,
            tls_client_cert: None,
            tls_client_key: None,
        }
    }
}

impl Config {
    /// The default configuration for a Redis Cluster with these seed nodes.
    pub fn from_cluster<S: Into<String>>(nodes: impl IntoIterator<Item = S>) -> Self {
        Self {
            cluster_nodes: nodes.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// The default configuration for the master that these Sentinels monitor as `master`.
    pub fn from_sentinel<S: Into<String>>(
        nodes: impl IntoIterator<Item = S>,
        master: impl Into<String>,
    ) -> Self {
        Self {
            sentinel_nodes: nodes.into_iter().map(Into::into).collect(),
            sentinel_master: master.into(),
            ..Self::default()
        }
    }

    /// Whether this configuration is for a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        !self.cluster_nodes.is_empty()
    }

    /// Whether this configuration is for a master found through Redis Sentinel.
    pub fn is_sentinel(&self) -> bool {
        !self.sentinel_nodes.is_empty()
    }

    /// The default configuration with the given Redis URL.
    pub fn from_url(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }

    /// Checks every setting; called by [`ClientBuilder::build`](crate::ClientBuilder::build).
    pub(crate) fn validate(&self) -> Result<(), BuildError> {
        let bad = |msg: String| Err(BuildError::InvalidConfig(msg));
        if self.pool_size == 0 {
            return bad("pool_size must be at least 1".into());
        }
        if self.connections == 0 {
            return bad("connections must be at least 1".into());
        }
        if self.watchdog_batch_size == 0 {
            return bad("watchdog_batch_size must be at least 1".into());
        }
        for node in &self.cluster_nodes {
            if let Err(e) = redis::IntoConnectionInfo::into_connection_info(node.as_str()) {
                return bad(format!(
                    "cluster node {:?} is not a Redis URL: {e}",
                    redact(node)
                ));
            }
        }
        for node in &self.sentinel_nodes {
            if let Err(e) = redis::IntoConnectionInfo::into_connection_info(node.as_str()) {
                return bad(format!(
                    "sentinel node {:?} is not a Redis URL: {e}",
                    redact(node)
                ));
            }
        }
        if self.is_sentinel() && self.is_cluster() {
            return bad(
                "sentinel_nodes and cluster_nodes are both set: a client connects to \
                 one topology"
                    .into(),
            );
        }
        if self.is_sentinel() && self.sentinel_master.is_empty() {
            return bad("sentinel_master must name the master the Sentinels monitor".into());
        }
        for (field, value, min) in [
            (
                "watchdog_timeout",
                self.watchdog_timeout,
                Duration::from_millis(3),
            ),
            (
                "recheck_interval",
                self.recheck_interval,
                Duration::from_millis(1),
            ),
            (
                "fair_wait_timeout",
                self.fair_wait_timeout,
                Duration::from_millis(1),
            ),
            (
                "command_timeout",
                self.command_timeout,
                Duration::from_millis(1),
            ),
            (
                "connect_timeout",
                self.connect_timeout,
                Duration::from_millis(1),
            ),
            (
                "ping_interval",
                self.ping_interval,
                Duration::from_millis(1),
            ),
            (
                "replica_sync_timeout",
                self.replica_sync_timeout,
                Duration::from_millis(1),
            ),
        ] {
            if value < min {
                return bad(format!("{field} must be at least {min:?}, got {value:?}"));
            }
            if value.as_millis() > u128::from(MAX_LEASE_MS) {
                return bad(format!("{field} must be at most 2^62 ms, got {value:?}"));
            }
        }
        Ok(())
    }

    /// Whether synced calls are followed by `WAIT` (see [`SyncReplicas`]).
    pub(crate) fn syncs_replicas(&self) -> bool {
        match self.sync_replicas {
            SyncReplicas::Auto => self.is_cluster() || self.is_sentinel(),
            SyncReplicas::On => true,
            SyncReplicas::Off => false,
        }
    }

    /// The lease of a hold taken without an explicit one, in milliseconds.
    pub(crate) fn watchdog_ms(&self) -> u64 {
        u64::try_from(self.watchdog_timeout.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Serde helpers: a `Duration` as a non-negative integer number of milliseconds.
#[cfg(feature = "serde")]
mod ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = i64::deserialize(d)?;
        if ms < 0 {
            return Err(D::Error::custom(format!(
                "a duration in milliseconds must not be negative, got {ms}"
            )));
        }
        Ok(Duration::from_millis(ms.unsigned_abs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_redisson() {
        let c = Config::default();
        assert_eq!(c.watchdog_timeout, Duration::from_secs(30));
        assert_eq!(c.watchdog_batch_size, 100);
        assert_eq!(c.command_timeout, Duration::from_secs(3));
        assert_eq!(c.replica_sync_timeout, Duration::from_secs(1));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn replica_sync_follows_the_mode_like_redisson() {
        assert!(!Config::default().syncs_replicas());
        assert!(Config::from_cluster(["redis://127.0.0.1:7000"]).syncs_replicas());
        assert!(Config::from_sentinel(["redis://127.0.0.1:26379"], "m").syncs_replicas());
        let on = Config {
            sync_replicas: SyncReplicas::On,
            ..Config::default()
        };
        assert!(on.syncs_replicas());
        let off = Config {
            sync_replicas: SyncReplicas::Off,
            ..Config::from_cluster(["redis://127.0.0.1:7000"])
        };
        assert!(!off.syncs_replicas());
        assert_eq!("on".parse::<SyncReplicas>(), Ok(SyncReplicas::On));
        assert!(
            "yes"
                .parse::<SyncReplicas>()
                .unwrap_err()
                .contains("auto, on or off")
        );
    }

    #[test]
    fn debug_hides_passwords() {
        let c = Config {
            url: "redis://app:s3cret@10.0.0.1:6379/2".into(),
            sentinel_nodes: vec!["redis://:sentinel-pw@10.0.0.2:26379".into()],
            sentinel_master: "mymaster".into(),
            password: Some("hunter2".into()),
            ..Config::default()
        };
        let text = format!("{c:?}");
        for secret in ["s3cret", "sentinel-pw", "hunter2"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(text.contains("redis://app:***@10.0.0.1:6379/2"), "{text}");
        assert!(text.contains("redis://:***@10.0.0.2:26379"), "{text}");
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact("redis://token@h:1"), "redis://***@h:1");
        // Not URLs, but shown as given elsewhere: the password stays hidden
        // (tests/fuzz_parsers.rs).
        assert_eq!(redact("app:s3cret@h:1"), "app:***@h:1");
        assert_eq!(redact(":s3://cret@h"), ":***@h");
    }

    #[test]
    fn sentinel_settings_are_checked() {
        let c = Config::from_sentinel(["redis://127.0.0.1:26379"], "mymaster");
        assert!(c.is_sentinel() && !c.is_cluster());
        assert!(c.validate().is_ok());
        let c = Config::from_sentinel(["redis://127.0.0.1:26379"], "");
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("sentinel_master must name"), "{err}");
        let c = Config {
            cluster_nodes: vec!["redis://127.0.0.1:7000".into()],
            ..Config::from_sentinel(["redis://127.0.0.1:26379"], "m")
        };
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("both set"), "{err}");
        let c = Config::from_sentinel(["nope"], "m");
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("sentinel node \"nope\""), "{err}");
    }

    #[test]
    fn zero_durations_are_rejected_by_name() {
        for (field, mut c) in [
            ("watchdog_timeout", Config::default()),
            ("recheck_interval", Config::default()),
            ("command_timeout", Config::default()),
            ("connect_timeout", Config::default()),
        ] {
            match field {
                "watchdog_timeout" => c.watchdog_timeout = Duration::ZERO,
                "recheck_interval" => c.recheck_interval = Duration::ZERO,
                "command_timeout" => c.command_timeout = Duration::ZERO,
                _ => c.connect_timeout = Duration::ZERO,
            }
            let err = c.validate().unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        }
        let c = Config {
            pool_size: 0,
            ..Config::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("pool_size"));
        let c = Config {
            connections: 0,
            ..Config::default()
        };
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("connections must be at least 1"), "{err}");
        // More than pool_size opens pool_size (see Single::new); a pool of one with the
        // default two connections is valid.
        for (connections, pool_size) in [(17, 16), (2, 1)] {
            let c = Config {
                connections,
                pool_size,
                ..Config::default()
            };
            c.validate().unwrap();
        }
        let c = Config {
            watchdog_timeout: Duration::from_millis(MAX_LEASE_MS + 1),
            ..Config::default()
        };
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("watchdog_timeout must be at most 2^62 ms"),
            "{err}"
        );
    }
}

#[cfg(all(test, feature = "serde"))]
mod serde_tests {
    use super::*;

    #[test]
    fn durations_are_milliseconds_and_negative_values_are_rejected() {
        let c: Config = serde_json::from_str(
            r#"{"url":"redis://127.0.0.1:7000","watchdog_timeout_ms":1500,"recheck_interval_ms":250}"#,
        )
        .unwrap();
        assert_eq!(c.url, "redis://127.0.0.1:7000");
        assert_eq!(c.watchdog_timeout, Duration::from_millis(1500));
        assert_eq!(c.recheck_interval, Duration::from_millis(250));
        assert_eq!(c.command_timeout, Config::default().command_timeout);

        let err = serde_json::from_str::<Config>(r#"{"watchdog_timeout_ms":-5}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("must not be negative, got -5"), "{err}");

        // zero passes deserialization and is rejected, by name, when the client is built
        let c: Config = serde_json::from_str(r#"{"command_timeout_ms":0}"#).unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("command_timeout"), "{err}");

        let err = serde_json::from_str::<Config>(r#"{"watchdog_timeout":1}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field"), "{err}");

        let round: Config = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(round, c);
    }

    #[test]
    fn a_cluster_config_names_its_seeds_and_pubsub_mode() {
        let c: Config = serde_json::from_str(
            r#"{"cluster_nodes":["redis://10.0.0.1:6379","redis://10.0.0.2:6379"],"pubsub":"both"}"#,
        )
        .unwrap();
        assert!(c.is_cluster());
        assert_eq!(c.cluster_nodes.len(), 2);
        assert_eq!(c.pubsub, PubSubMode::Both);
        assert!(c.validate().is_ok());
        assert_eq!(Config::default().pubsub, PubSubMode::Auto);
        let err = serde_json::from_str::<Config>(r#"{"pubsub":"sometimes"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variant"), "{err}");
        let bad = Config::from_cluster(["not a url"]);
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("cluster node \"not a url\""), "{err}");
        let round: Config = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(round, c);
        assert_eq!("sharded".parse::<PubSubMode>(), Ok(PubSubMode::Sharded));
        assert!("x".parse::<PubSubMode>().is_err());
    }
}
