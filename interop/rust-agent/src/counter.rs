//! The `stress` counter: a plain Redis string key holding a decimal number, shared with the
//! other language's agent, read and written on a connection of its own.

use std::time::Duration;

use redisson_sync::redis::cluster::ClusterClient;
use redisson_sync::redis::cluster_async::ClusterConnection;
use redisson_sync::redis::{self, AsyncConnectionConfig, RedisError, aio::MultiplexedConnection};
use tokio::sync::Mutex;

use crate::protocol::{Code, Failure};

/// A multiplexed connection, opened again after it broke (a Redis restart, a killed client).
pub struct Counter {
    client: redis::Client,
    config: AsyncConnectionConfig,
    connection: Mutex<Option<MultiplexedConnection>>,
    /// In cluster mode: the cluster connection (it reconnects and follows the slots itself).
    cluster: Option<ClusterConnection>,
}

impl Counter {
    /// Opens the connection; `timeout` bounds connecting and every command.
    pub async fn connect(url: &str, timeout: Duration) -> Result<Self, RedisError> {
        let counter = Self {
            client: redis::Client::open(url)?,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout)),
            connection: Mutex::new(None),
            cluster: None,
        };
        counter.connection().await?;
        Ok(counter)
    }

    /// A counter on a Redis Cluster reached through the seed node `url`.
    pub async fn connect_cluster(url: &str, timeout: Duration) -> Result<Self, RedisError> {
        let cluster = ClusterClient::builder([url])
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .build()?
            .get_async_connection()
            .await?;
        Ok(Self {
            client: redis::Client::open(url)?,
            config: AsyncConnectionConfig::new(),
            connection: Mutex::new(None),
            cluster: Some(cluster),
        })
    }

    /// Reads the counter; a missing key is 0.
    pub async fn get(&self, key: &str) -> Result<i64, Failure> {
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
        self.query(key, redis::cmd("SET").arg(key).arg(value.to_string()))
            .await
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
        if error.is_connection_dropped() || error.is_unrecoverable_error() || error.is_io_error() {
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
        let open = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        *connection = Some(open.clone());
        Ok(open)
    }
}
