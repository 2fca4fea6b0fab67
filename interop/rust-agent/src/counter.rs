//! The `stress` counter: a plain Redis string key holding a decimal number, shared with the
//! other language's agent, read and written on a connection of its own.

use std::time::Duration;

use redisson_sync::redis::cluster::ClusterClient;
use redisson_sync::redis::cluster_async::ClusterConnection;
use redisson_sync::redis::sentinel::{
    SentinelClient, SentinelNodeConnectionInfo, SentinelServerType,
};
use redisson_sync::redis::{
    self, AsyncConnectionConfig, IntoConnectionInfo, RedisError, aio::MultiplexedConnection,
};
use tokio::sync::Mutex;

use crate::options::{Mode, Options};
use crate::protocol::{Code, Failure};

/// A multiplexed connection, opened again after it broke (a Redis restart, a killed client,
/// a Sentinel failover: it then asks the Sentinel for the master again).
pub struct Counter {
    source: Source,
    config: AsyncConnectionConfig,
    connection: Mutex<Option<MultiplexedConnection>>,
    /// In cluster mode: the cluster connection (it reconnects and follows the slots itself).
    cluster: Option<ClusterConnection>,
    /// `--name-prefix`, put before every key as the Java agent's NameMapper does.
    prefix: String,
}

/// Where the single-server connection goes.
enum Source {
    Fixed(redis::Client),
    Sentinel(Mutex<SentinelClient>),
}

impl Counter {
    /// Opens the connection of the topology `options` name; `timeout` bounds connecting and
    /// every command.
    pub async fn connect(options: &Options, timeout: Duration) -> Result<Self, RedisError> {
        let url = options.redis.as_str();
        let mut info = url.into_connection_info()?;
        let mut redis_info = info.redis_settings().clone();
        if let Some(user) = &options.user {
            redis_info = redis_info.set_username(user);
        }
        if let Some(password) = &options.password {
            redis_info = redis_info.set_password(password);
        }
        info = info.set_redis_settings(redis_info.clone());
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let (source, cluster) = match options.mode {
            Mode::Cluster => {
                let mut builder = ClusterClient::builder([info.clone()])
                    .connection_timeout(timeout)
                    .response_timeout(timeout);
                if let Some(user) = redis_info.username() {
                    builder = builder.username(user);
                }
                if let Some(password) = redis_info.password() {
                    builder = builder.password(password);
                }
                let cluster = builder.build()?.get_async_connection().await?;
                (Source::Fixed(redis::Client::open(info)?), Some(cluster))
            }
            Mode::Sentinel => {
                let data = SentinelNodeConnectionInfo::default()
                    .set_redis_connection_info(redis_info.clone().set_db(0));
                let client = SentinelClient::build(
                    vec![url],
                    options.master.clone(),
                    Some(data),
                    SentinelServerType::Master,
                )?;
                (Source::Sentinel(Mutex::new(client)), None)
            }
            Mode::Single => {
                // `--tls-ca`: the server's certificate chains to this CA, not the system's.
                let client = match &options.tls_ca {
                    Some(ca) => {
                        let root_cert = std::fs::read(ca).map_err(|e| {
                            RedisError::from((
                                redis::ErrorKind::Io,
                                "cannot read --tls-ca",
                                format!("{ca}: {e}"),
                            ))
                        })?;
                        redis::Client::build_with_tls(
                            info,
                            redis::TlsCertificates {
                                client_tls: None,
                                root_cert: Some(root_cert),
                            },
                        )?
                    }
                    None => redis::Client::open(info)?,
                };
                (Source::Fixed(client), None)
            }
        };
        let counter = Self {
            source,
            config,
            connection: Mutex::new(None),
            cluster,
            prefix: options.name_prefix.clone(),
        };
        if counter.cluster.is_none() {
            counter.connection().await?;
        }
        Ok(counter)
    }

    /// Reads the counter; a missing key is 0.
    pub async fn get(&self, key: &str) -> Result<i64, Failure> {
        let key = &self.key(key);
        let value: Option<String> = self.query(key, redis::cmd("GET").arg(key)).await?;
        match value {
            None => Ok(0),
            Some(text) => text.parse().map_err(|_| {
                Failure::new(
                    Code::Redis,
                    format!("counter {key:?} holds {text:?}, not a decimal integer"),
                )
            }),
        }
    }

    /// Writes the counter as plain decimal text.
    pub async fn set(&self, key: &str, value: i64) -> Result<(), Failure> {
        let key = &self.key(key);
        self.query(key, redis::cmd("SET").arg(key).arg(value.to_string()))
            .await
    }

    /// `key` with the name prefix.
    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        key: &str,
        cmd: &redis::Cmd,
    ) -> Result<T, Failure> {
        let result = match &self.cluster {
            Some(cluster) => cmd.query_async(&mut cluster.clone()).await,
            None => match self.connection().await {
                Ok(mut connection) => cmd.query_async(&mut connection).await,
                Err(e) => Err(e),
            },
        };
        let error = match result {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if error.is_connection_dropped()
            || error.is_unrecoverable_error()
            || error.is_io_error()
            || error.code() == Some("READONLY")
        {
            // The next command opens a new connection.
            *self.connection.lock().await = None;
        }
        let code = if error.is_timeout() {
            Code::Timeout
        } else {
            Code::Redis
        };
        Err(Failure::new(code, format!("counter {key:?}: {error}")))
    }

    async fn connection(&self) -> Result<MultiplexedConnection, RedisError> {
        let mut connection = self.connection.lock().await;
        if let Some(open) = connection.as_ref() {
            return Ok(open.clone());
        }
        let client = match &self.source {
            Source::Fixed(client) => client.clone(),
            Source::Sentinel(sentinel) => sentinel.lock().await.async_get_client().await?,
        };
        let open = client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        *connection = Some(open.clone());
        Ok(open)
    }
}
