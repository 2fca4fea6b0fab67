//! Credentials asked for at every new connection (rotating tokens such as cloud IAM auth):
//! [`CredentialsProvider`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::future::BoxFuture;

/// The error a [`CredentialsProvider`] returns.
pub type CredentialsError = Box<dyn std::error::Error + Send + Sync>;

/// A data node's login: an ACL user (`None`: the `default` user) and its password or token.
/// `Debug` does not show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The ACL user; `None` logs in as `default` (`AUTH <password>`).
    pub username: Option<String>,
    /// The password, or a token that stands for one.
    pub password: String,
}

impl Credentials {
    /// A user and its password.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: Some(username.into()),
            password: password.into(),
        }
    }

    /// The `default` user's password (`requirepass`).
    pub fn password(password: impl Into<String>) -> Self {
        Self {
            username: None,
            password: password.into(),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

type Fetch = dyn Fn() -> BoxFuture<'static, Result<Credentials, CredentialsError>> + Send + Sync;

/// Fresh credentials for every new connection to a data node, for passwords that rotate
/// (cloud IAM tokens, secrets managers): set with
/// [`ClientBuilder::credentials_provider`](crate::ClientBuilder::credentials_provider). It
/// replaces [`Config::username`](crate::Config::username) and
/// [`Config::password`](crate::Config::password) and the URL's. Connections already open keep
/// the login they were opened with (Redis checks a password only at `AUTH`); a connection
/// that fails is replaced, and its replacement asks again. Sentinels keep the credentials in
/// their URLs.
///
/// In a cluster the provider is asked when redis-rs opens a connection to a node, and once
/// more right after (redis-rs re-authenticates every connection with the next credentials
/// its provider streams).
///
/// ```
/// use redisson_sync::config::{Credentials, CredentialsProvider};
///
/// let provider = CredentialsProvider::new(|| async {
///     // e.g. ask the cloud's token service here
///     Ok(Credentials::new("app", "token-from-somewhere"))
/// });
/// # drop(provider);
/// ```
#[derive(Clone)]
pub struct CredentialsProvider(Arc<Fetch>);

impl CredentialsProvider {
    /// A provider that calls `fetch` for every new connection.
    pub fn new<F, Fut>(fetch: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Credentials, CredentialsError>> + Send + 'static,
    {
        Self(Arc::new(move || Box::pin(fetch())))
    }

    /// Asks for the credentials of one new connection.
    pub(crate) async fn fetch(&self) -> redis::RedisResult<Credentials> {
        (self.0)().await.map_err(|e| {
            redis::RedisError::from((
                redis::ErrorKind::AuthenticationFailed,
                "the credentials provider failed",
                e.to_string(),
            ))
        })
    }

    /// The provider as redis-rs's streaming credentials provider (cluster mode): every
    /// subscription yields one fresh answer.
    pub(crate) fn streaming(&self) -> Streaming {
        Streaming(self.clone())
    }
}

impl fmt::Debug for CredentialsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CredentialsProvider(..)")
    }
}

/// [`CredentialsProvider`] for redis-rs's cluster connections.
pub(crate) struct Streaming(CredentialsProvider);

impl redis::StreamingCredentialsProvider for Streaming {
    fn subscribe(
        &self,
    ) -> std::pin::Pin<
        Box<dyn futures_util::Stream<Item = redis::RedisResult<redis::BasicAuth>> + Send + 'static>,
    > {
        let provider = self.0.clone();
        Box::pin(futures_util::stream::once(async move {
            let credentials = provider.fetch().await?;
            Ok(redis::BasicAuth::new(
                credentials.username.unwrap_or_else(|| "default".to_owned()),
                credentials.password,
            ))
        }))
    }
}

/// `info` logged in with `credentials`.
pub(crate) fn apply(
    info: redis::ConnectionInfo,
    credentials: Credentials,
) -> redis::ConnectionInfo {
    let mut redis = info.redis_settings().clone();
    redis = match credentials.username {
        Some(user) => redis.set_username(user),
        None => redis,
    };
    redis = redis.set_password(credentials.password);
    info.set_redis_settings(redis)
}
