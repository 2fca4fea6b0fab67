//! Where the CLI connects: one server, a Redis Cluster or a master behind Sentinel, with an
//! ACL user and password, TLS (`rediss://` and a CA file) and a name prefix; the crate's client
//! for all of it, and the plain connection `list` and the error messages use.

use std::fmt;

use clap::Args;
use redisson_sync::redis::{
    self, IntoConnectionInfo, TlsCertificates,
    aio::MultiplexedConnection,
    cluster::ClusterClientBuilder,
    cluster_async::ClusterConnection,
    cluster_routing::{RoutingInfo, SingleNodeRoutingInfo},
};
use redisson_sync::{Client, ClientBuilder, config::PubSubMode};

use crate::{CONNECT_TIMEOUT, Failure, Result};

/// Which Redis deployment to talk to, and how to log in.
#[derive(Debug, Args)]
pub(crate) struct Target {
    /// A single Redis server (redis:// or rediss://) [default: $REDIS_URL, else
    /// redis://127.0.0.1:6379]
    #[arg(long, value_name = "URL", global = true, conflicts_with_all = ["cluster", "sentinel"])]
    redis: Option<String>,
    /// Redis Cluster seed nodes (repeat the flag or separate with commas); `list` scans every
    /// master
    #[arg(
        long,
        value_name = "URL",
        global = true,
        value_delimiter = ',',
        conflicts_with = "sentinel"
    )]
    cluster: Vec<String>,
    /// Sentinels (repeat the flag or separate with commas), with --master; their own login
    /// goes in their URLs
    #[arg(
        long,
        value_name = "URL",
        global = true,
        value_delimiter = ',',
        requires = "master"
    )]
    sentinel: Vec<String>,
    /// The master name the Sentinels monitor
    #[arg(long, value_name = "NAME", global = true, requires = "sentinel")]
    master: Option<String>,
    /// On a cluster, how `watch` subscribes and `force-unlock` publishes: auto (sharded when
    /// the cluster has it, as Redisson's default), classic, sharded, or both (hears Java
    /// services of either mode)
    #[arg(long, value_name = "MODE", global = true, default_value = "auto", value_parser = parse_pubsub)]
    pubsub: PubSubMode,
    /// The ACL user of the data nodes
    #[arg(long, value_name = "NAME", global = true, env = "REDISSON_SYNC_USER")]
    user: Option<String>,
    /// The password of the data nodes (never printed)
    #[arg(
        long,
        value_name = "PW",
        global = true,
        env = "REDISSON_SYNC_PASSWORD",
        hide_env_values = true
    )]
    password: Option<String>,
    /// The CA certificates (PEM) a rediss:// server's certificate must chain to
    #[arg(long, value_name = "PEM", global = true)]
    tls_ca: Option<String>,
    /// Put before every name, as a Redisson NameMapper that prefixes (the names shown are
    /// the keys, prefix included)
    #[arg(long, value_name = "P", global = true)]
    pub(crate) name_prefix: Option<String>,
}

fn parse_pubsub(text: &str) -> std::result::Result<PubSubMode, String> {
    text.parse()
}

/// `url` without the password it may carry: `redis://user:***@host`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((login, host)) => {
            let user = login.split_once(':').map_or("", |(user, _)| user);
            if login.contains(':') {
                format!("{scheme}://{user}:***@{host}{path}")
            } else {
                format!("{scheme}://{login}@{host}{path}")
            }
        }
        None => url.to_owned(),
    }
}

impl Target {
    /// The single server's URL.
    fn url(&self) -> String {
        self.redis
            .clone()
            .or_else(|| std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned())
    }

    /// Where, for messages (no password).
    pub(crate) fn place(&self) -> String {
        let list = |urls: &[String]| {
            urls.iter()
                .map(|u| redact(u))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.cluster.is_empty() {
            format!("the Redis Cluster of {}", list(&self.cluster))
        } else if !self.sentinel.is_empty() {
            format!(
                "the master {:?} of the Sentinels {}",
                self.master.as_deref().unwrap_or_default(),
                list(&self.sentinel)
            )
        } else {
            redact(&self.url())
        }
    }

    /// The crate's client for this target.
    pub(crate) fn client(&self) -> Result<ClientBuilder> {
        let mut builder = Client::builder()
            .pool_size(2)
            .connect_timeout(CONNECT_TIMEOUT);
        builder = if !self.cluster.is_empty() {
            builder
                .cluster(self.cluster.iter().cloned())
                .pubsub(self.pubsub)
        } else if !self.sentinel.is_empty() {
            builder.sentinel(
                self.sentinel.iter().cloned(),
                self.master.clone().unwrap_or_default(),
            )
        } else {
            builder.url(self.url())
        };
        if let Some(user) = &self.user {
            builder = builder.username(user);
        }
        if let Some(password) = &self.password {
            builder = builder.password(password);
        }
        if let Some(ca) = &self.tls_ca {
            builder = builder.tls_ca_cert(ca);
        }
        if let Some(prefix) = &self.name_prefix {
            builder = builder.key_prefix(prefix);
        }
        Ok(builder)
    }

    /// The CA file's certificates, for the plain connections.
    fn certs(&self) -> Result<Option<TlsCertificates>> {
        let Some(path) = &self.tls_ca else {
            return Ok(None);
        };
        let pem = std::fs::read(path)
            .map_err(|e| Failure(format!("cannot read the CA file {path:?}: {e}")))?;
        Ok(Some(TlsCertificates {
            client_tls: None,
            root_cert: Some(pem),
        }))
    }

    /// A plain client of one node at `url`, with the data nodes' login and the CA.
    fn node(&self, url: &str) -> Result<redis::Client> {
        let bad = |e: &dyn fmt::Display| Failure(format!("invalid Redis URL {}: {e}", redact(url)));
        let mut info = url.into_connection_info().map_err(|e| bad(&e))?;
        let mut settings = info.redis_settings().clone();
        if let Some(user) = &self.user {
            settings = settings.set_username(user);
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        info = info.set_redis_settings(settings);
        match self.certs()? {
            Some(certs) => redis::Client::build_with_tls(info, certs).map_err(|e| bad(&e)),
            None => redis::Client::open(info).map_err(|e| bad(&e)),
        }
    }

    /// The plain connection: to the server, to the cluster, or to the master the Sentinels
    /// name now.
    pub(crate) async fn raw(&self) -> Result<Raw> {
        let place = self.place();
        let unreachable =
            |e: &dyn fmt::Display| Failure(format!("cannot reach Redis at {place}: {e}"));
        if !self.cluster.is_empty() {
            let mut builder = ClusterClientBuilder::new(self.cluster.iter().map(String::as_str))
                .connection_timeout(CONNECT_TIMEOUT)
                .response_timeout(CONNECT_TIMEOUT);
            if let Some(user) = &self.user {
                builder = builder.username(user);
            }
            if let Some(password) = &self.password {
                builder = builder.password(password);
            }
            if let Some(certs) = self.certs()? {
                builder = builder.certs(certs);
            }
            let client = builder.build().map_err(|e| unreachable(&e))?;
            let conn = bounded(client.get_async_connection())
                .await
                .map_err(|e| unreachable(&e))?;
            return Ok(Raw::Cluster(conn));
        }
        let url = if self.sentinel.is_empty() {
            self.url()
        } else {
            self.master_url().await?
        };
        let client = self.node(&url)?;
        let mut conn = bounded(client.get_multiplexed_async_connection())
            .await
            .map_err(|e| unreachable(&e))?;
        bounded(redis::cmd("PING").query_async::<String>(&mut conn))
            .await
            .map_err(|e| unreachable(&e))?;
        Ok(Raw::Single(conn))
    }

    /// The URL of the master the first Sentinel that answers names (`SENTINEL
    /// get-master-addr-by-name`), with the scheme of the Sentinels' URLs.
    async fn master_url(&self) -> Result<String> {
        let master = self.master.clone().unwrap_or_default();
        let mut last = String::new();
        for sentinel in &self.sentinel {
            let client = match url_client(sentinel, self.certs()?) {
                Ok(c) => c,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let asked = async {
                let mut conn = client.get_multiplexed_async_connection().await?;
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&master)
                    .query_async::<Option<(String, u16)>>(&mut conn)
                    .await
            };
            match bounded(asked).await {
                Ok(Some((host, port))) => {
                    let scheme = if sentinel.starts_with("rediss://") {
                        "rediss"
                    } else {
                        "redis"
                    };
                    return Ok(format!("{scheme}://{host}:{port}"));
                }
                Ok(None) => last = format!("{} knows no master {master:?}", redact(sentinel)),
                Err(e) => last = format!("{}: {e}", redact(sentinel)),
            }
        }
        Err(Failure(format!(
            "cannot reach Redis at {}: no Sentinel named the master ({last})",
            self.place()
        )))
    }
}

/// A plain client of `url` as given (a Sentinel: its login is in its URL).
fn url_client(url: &str, certs: Option<TlsCertificates>) -> redis::RedisResult<redis::Client> {
    match certs {
        Some(certs) => redis::Client::build_with_tls(url, certs),
        None => redis::Client::open(url),
    }
}

/// `op` within the connect timeout.
async fn bounded<T>(
    op: impl Future<Output = redis::RedisResult<T>>,
) -> std::result::Result<T, String> {
    match tokio::time::timeout(CONNECT_TIMEOUT, op).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
    }
}

/// The plain connection.
pub(crate) enum Raw {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl fmt::Debug for Raw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Single(_) => "Raw::Single",
            Self::Cluster(_) => "Raw::Cluster",
        })
    }
}

impl Raw {
    /// One command, routed by its key in a cluster.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        match self {
            Self::Single(c) => cmd.query_async(c).await,
            Self::Cluster(c) => cmd.query_async(c).await,
        }
    }

    /// The nodes whose keys `list` scans: the server, or every master of the cluster (from
    /// `CLUSTER NODES`: `host:port` of the nodes flagged `master` and not `fail`).
    pub(crate) async fn scan_targets(&mut self) -> redis::RedisResult<Vec<Option<(String, u16)>>> {
        let Self::Cluster(c) = self else {
            return Ok(vec![None]);
        };
        let nodes = c
            .route_command(
                redis::cmd("CLUSTER").arg("NODES").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .await?;
        let text: String = redis::from_redis_value(nodes)?;
        let mut masters = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            let flags: Vec<&str> = flags.split(',').collect();
            if !flags.contains(&"master") || flags.iter().any(|f| f.starts_with("fail")) {
                continue;
            }
            // ip:port@cport[,hostname]
            let addr = addr.split(['@', ',']).next().unwrap_or_default();
            if let Some((host, port)) = addr.rsplit_once(':')
                && let Ok(port) = port.parse()
                && fields.len() > 8
            {
                masters.push(Some((host.to_owned(), port)));
            }
        }
        masters.sort();
        Ok(masters)
    }

    /// `SCAN cursor MATCH pattern COUNT count` on one node (`None`: the server).
    pub(crate) async fn scan(
        &mut self,
        node: &Option<(String, u16)>,
        cmd: &redis::Cmd,
    ) -> redis::RedisResult<(u64, Vec<Vec<u8>>)> {
        match (self, node) {
            (Self::Cluster(c), Some((host, port))) => {
                let value = c
                    .route_command(
                        cmd.clone(),
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                            host: host.clone(),
                            port: *port,
                        }),
                    )
                    .await?;
                Ok(redis::from_redis_value(value)?)
            }
            (raw, _) => raw.query(cmd).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(
            redact("redis://:s3cret@127.0.0.1:6379/2"),
            "redis://:***@127.0.0.1:6379/2"
        );
        assert_eq!(
            redact("rediss://app:s3cret@h:6380"),
            "rediss://app:***@h:6380"
        );
        assert_eq!(redact("redis://app@h:1"), "redis://app@h:1");
    }
}
