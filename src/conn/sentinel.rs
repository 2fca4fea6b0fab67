//! Where a single-server topology connects: a fixed address, or the master that Redis
//! Sentinel names now. With Sentinel the master is asked for every time a connection opens
//! (a pooled call connection or the pub/sub connection), and a failover is followed at once:
//! a task of the client listens to the Sentinels' `+switch-master` announcements and, on one
//! for our master, retires every open connection (the old master may go on accepting writes
//! for seconds before the Sentinels demote it, and whatever it takes then is lost). Besides,
//! a write refused with `READONLY` retires every pooled connection, and a dropped or stalled
//! connection is replaced.

use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};
use tokio::sync::Mutex;

use super::tls::Tls;
use crate::config::Config;
use crate::credentials::{self, CredentialsProvider};
use crate::error::BuildError;
use crate::future::BoxFuture;

/// The server a [`Single`](super::single::Single) topology opens its connections to.
pub(super) struct Source {
    at: At,
    /// Asked for the login of every new connection, over the configured one.
    provider: Option<CredentialsProvider>,
    tls: Tls,
}

/// Where the server is.
pub(super) enum At {
    /// One address ([`Config::url`]).
    Fixed(Box<redis::Client>),
    /// The master the Sentinels name now.
    Sentinel(Box<Sentinels>),
}

/// How the master is asked for.
enum Lookup {
    /// redis-rs's `Sentinel`, with the data nodes' login in `Sentinels::data`.
    Plain(Mutex<Sentinel>),
    /// redis-rs's `SentinelClient`, which also gives the data nodes the configured TLS
    /// certificates (its master lookup opens a connection to check the role: with a private
    /// CA, that connection needs them already).
    #[cfg(feature = "tls")]
    Certified(Mutex<redis::sentinel::SentinelClient>),
}

/// The Sentinels of one master name, and how to log in to the data nodes they name.
pub(super) struct Sentinels {
    lookup: Lookup,
    /// Each Sentinel's address and credentials, for the `+switch-master` listener.
    infos: Vec<ConnectionInfo>,
    master: String,
    nodes: Vec<String>,
    /// Database, user and password for the data nodes (not the Sentinels').
    data: SentinelNodeConnectionInfo,
}

impl Source {
    pub(super) fn new(
        config: &Config,
        provider: Option<CredentialsProvider>,
        tls: Tls,
    ) -> Result<Self, BuildError> {
        let at = if config.is_sentinel() {
            At::Sentinel(Box::new(Sentinels::new(config, &tls)?))
        } else {
            let info = with_credentials(
                config
                    .url
                    .as_str()
                    .into_connection_info()
                    .map_err(BuildError::Url)?,
                config,
            );
            At::Fixed(Box::new(tls.client(info).map_err(BuildError::Url)?))
        };
        Ok(Self { at, provider, tls })
    }

    /// The Sentinels, in Sentinel mode.
    pub(super) fn sentinels(&self) -> Option<&Sentinels> {
        match &self.at {
            At::Sentinel(sentinels) => Some(sentinels),
            At::Fixed(_) => None,
        }
    }

    /// A client for the server to connect to now (with Sentinel: asks them; a connection to
    /// the master it names is opened to check its role).
    ///
    /// With a credentials provider, the client logs in with what it answers now.
    ///
    /// Boxed: redis-rs's Sentinel lookups are deep futures, and every connection's creation
    /// (and so `ClientBuilder::connect`) contains this one.
    pub(super) fn client(&self) -> BoxFuture<'_, redis::RedisResult<redis::Client>> {
        Box::pin(self.lookup())
    }

    async fn lookup(&self) -> redis::RedisResult<redis::Client> {
        let client = match &self.at {
            At::Fixed(client) => (**client).clone(),
            At::Sentinel(sentinels) => match &sentinels.lookup {
                Lookup::Plain(sentinel) => {
                    sentinel
                        .lock()
                        .await
                        .async_master_for(&sentinels.master, Some(&sentinels.data))
                        .await?
                }
                #[cfg(feature = "tls")]
                Lookup::Certified(client) => client.lock().await.async_get_client().await?,
            },
        };
        let mut info = client.get_connection_info().clone();
        if let Some(provider) = &self.provider {
            info = credentials::apply(info, provider.fetch().await?);
        }
        // The data node the Sentinels name gets the configured certificates too.
        self.tls.client(info)
    }

    /// What the source is, for errors and `Debug`.
    pub(super) fn describe(&self) -> String {
        match &self.at {
            At::Fixed(client) => client.get_connection_info().addr().to_string(),
            At::Sentinel(s) => {
                format!("master {:?} of Sentinels {}", s.master, s.nodes.join(", "))
            }
        }
    }
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Sentinels {
    fn new(config: &Config, tls: &Tls) -> Result<Self, BuildError> {
        // Each Sentinel's address, with the configured certificates where it is TLS.
        let infos = config
            .sentinel_nodes
            .iter()
            .map(|node| {
                let info = node.as_str().into_connection_info()?;
                Ok(tls.client(info)?.get_connection_info().clone())
            })
            .collect::<redis::RedisResult<Vec<ConnectionInfo>>>()
            .map_err(BuildError::Url)?;
        // The data nodes: the database, user and password of `url`, then the explicit ones.
        let url = config
            .url
            .as_str()
            .into_connection_info()
            .map_err(BuildError::Url)?;
        let redis = with_credentials(url, config).redis_settings().clone();
        // Cloned only where the certified lookup below needs it too.
        #[cfg(feature = "tls")]
        let mut data =
            SentinelNodeConnectionInfo::default().set_redis_connection_info(redis.clone());
        #[cfg(not(feature = "tls"))]
        let mut data = SentinelNodeConnectionInfo::default().set_redis_connection_info(redis);
        // Data nodes over TLS when the Sentinels are (as Redisson decides by the scheme).
        let secure = config
            .sentinel_nodes
            .iter()
            .any(|node| node.starts_with("rediss://"));
        if secure {
            data = data.set_tls_mode(redis::TlsMode::Secure);
        }
        #[cfg(feature = "tls")]
        let lookup = match tls.certs() {
            Some(certs) => Lookup::Certified(Mutex::new(
                certified(config, &infos, &redis, secure, certs).map_err(BuildError::Url)?,
            )),
            None => Lookup::Plain(Mutex::new(
                Sentinel::build(infos.clone()).map_err(BuildError::Url)?,
            )),
        };
        #[cfg(not(feature = "tls"))]
        let lookup = Lookup::Plain(Mutex::new(
            Sentinel::build(infos.clone()).map_err(BuildError::Url)?,
        ));
        Ok(Self {
            lookup,
            infos,
            master: config.sentinel_master.clone(),
            nodes: config.sentinel_nodes.clone(),
            data,
        })
    }
}

/// A `SentinelClient` for the master, with `certs` for the Sentinels and the data nodes; the
/// Sentinels' login is the first one their URLs give.
#[cfg(feature = "tls")]
fn certified(
    config: &Config,
    infos: &[ConnectionInfo],
    data: &RedisConnectionInfo,
    secure: bool,
    certs: redis::TlsCertificates,
) -> redis::RedisResult<redis::sentinel::SentinelClient> {
    use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
    let mut builder = SentinelClientBuilder::new(
        infos.iter().map(|i| i.addr().clone()),
        &config.sentinel_master,
        SentinelServerType::Master,
    )?
    .set_client_to_redis_db(data.db())
    .set_client_to_redis_certificates(certs.clone())
    .set_client_to_sentinel_certificates(certs);
    if secure {
        builder = builder
            .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
            .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
    }
    if let Some(user) = data.username() {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Some(password) = data.password() {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some(sentinel) = infos
        .iter()
        .map(ConnectionInfo::redis_settings)
        .find(|r| r.password().is_some())
    {
        if let Some(user) = sentinel.username() {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = sentinel.password() {
            builder = builder.set_client_to_sentinel_password(password);
        }
    }
    builder.build()
}

impl Sentinels {
    /// Listens to the Sentinels' `+switch-master` announcements, one Sentinel at a time (the
    /// next one when its connection fails), and calls `switched` for every one that names
    /// our master. After (re)connecting to a Sentinel it also asks it for the master and calls
    /// `switched` when that is not the one last seen, since an announcement may have been
    /// missed meanwhile. Runs until the client shuts down (the caller's service task).
    pub(super) async fn follow_switches(&self, timeout: Duration, switched: impl Fn()) {
        let mut last: Option<(String, u16)> = None;
        let mut failures = 0u32;
        for info in self.infos.iter().cycle() {
            match self.listen(info, timeout, &mut last, &switched).await {
                Ok(()) => failures = 0,
                Err(e) => {
                    failures += 1;
                    tracing::debug!(sentinel = %info.addr(), error = %e, "listening to a Sentinel failed; trying the next");
                }
            }
            // A pause once every Sentinel failed in a row (all down, or unreachable).
            if failures as usize >= self.infos.len() {
                tokio::time::sleep(Duration::from_millis(500)).await;
                failures = 0;
            }
        }
    }

    /// One Sentinel's announcements, until its connection ends.
    async fn listen(
        &self,
        info: &ConnectionInfo,
        timeout: Duration,
        last: &mut Option<(String, u16)>,
        switched: &impl Fn(),
    ) -> redis::RedisResult<()> {
        let client = redis::Client::open(info.clone())?;
        let connect = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            let mut con = client.get_multiplexed_async_connection().await?;
            let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(&self.master)
                .query_async(&mut con)
                .await?;
            Ok::<_, redis::RedisError>((pubsub, addr))
        };
        let (pubsub, addr) = tokio::time::timeout(timeout, connect).await.map_err(|_| {
            redis::RedisError::from((redis::ErrorKind::Io, "Sentinel did not answer in time"))
        })??;
        if let Some(addr) = addr {
            if last.as_ref().is_some_and(|seen| *seen != addr) {
                tracing::info!(master = %self.master, host = %addr.0, port = addr.1, "the Sentinels name another master; reconnecting");
                switched();
            }
            *last = Some(addr);
        }
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            let Ok(text) = message.get_payload::<String>() else {
                continue;
            };
            // "<master name> <old ip> <old port> <new ip> <new port>"
            let fields: Vec<&str> = text.split(' ').collect();
            if fields.len() == 5 && fields[0] == self.master {
                tracing::info!(master = %self.master, from = %format!("{}:{}", fields[1], fields[2]), to = %format!("{}:{}", fields[3], fields[4]), "+switch-master: reconnecting to the new master");
                if let Ok(port) = fields[4].parse() {
                    *last = Some((fields[3].to_owned(), port));
                }
                switched();
            }
        }
        Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            "Sentinel connection closed",
        )))
    }
}

/// `info` with [`Config::username`] and [`Config::password`] applied over the URL's.
pub(super) fn with_credentials(info: ConnectionInfo, config: &Config) -> ConnectionInfo {
    let mut redis: RedisConnectionInfo = info.redis_settings().clone();
    if let Some(user) = &config.username {
        redis = redis.set_username(user);
    }
    if let Some(password) = &config.password {
        redis = redis.set_password(password);
    }
    info.set_redis_settings(redis)
}
