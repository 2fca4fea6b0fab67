//! TLS (`rediss://` URLs): with the `tls` feature, redis-rs over rustls, trusting the
//! system's roots or the CA certificates of [`Config::tls_ca_cert`], and presenting the
//! client certificate of [`Config::tls_client_cert`] where one is set. Without the feature,
//! a `rediss://` URL or a certificate setting is refused when the client is built.

use redis::ConnectionInfo;

use crate::config::Config;
use crate::error::BuildError;

/// The certificates every connection of the client uses.
#[derive(Clone, Default)]
pub(super) struct Tls {
    #[cfg(feature = "tls")]
    certs: Option<redis::TlsCertificates>,
}

impl Tls {
    /// Reads the certificate files of `config`.
    #[cfg(feature = "tls")]
    pub(super) fn new(config: &Config) -> Result<Self, BuildError> {
        let read = |field: &str, path: &str| {
            std::fs::read(path).map_err(|e| {
                BuildError::InvalidConfig(format!("{field}: cannot read {path:?}: {e}"))
            })
        };
        let root_cert = match &config.tls_ca_cert {
            Some(path) => Some(read("tls_ca_cert", path)?),
            None => None,
        };
        let client_tls = match (&config.tls_client_cert, &config.tls_client_key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read("tls_client_cert", cert)?,
                client_key: read("tls_client_key", key)?,
            }),
            (None, None) => None,
            _ => {
                return Err(BuildError::InvalidConfig(
                    "tls_client_cert and tls_client_key go together".into(),
                ));
            }
        };
        let certs =
            (root_cert.is_some() || client_tls.is_some()).then_some(redis::TlsCertificates {
                client_tls,
                root_cert,
            });
        Ok(Self { certs })
    }

    /// Without the `tls` feature: refuses TLS settings and `rediss://` URLs.
    #[cfg(not(feature = "tls"))]
    pub(super) fn new(config: &Config) -> Result<Self, BuildError> {
        let urls = std::iter::once(&config.url)
            .chain(&config.cluster_nodes)
            .chain(&config.sentinel_nodes);
        if config.tls_ca_cert.is_some()
            || config.tls_client_cert.is_some()
            || config.tls_client_key.is_some()
            || urls.into_iter().any(|u| u.starts_with("rediss://"))
        {
            return Err(BuildError::InvalidConfig(
                "TLS (a rediss:// URL or a tls_* setting) needs the crate's `tls` feature".into(),
            ));
        }
        Ok(Self::default())
    }

    /// A client for `info` that uses these certificates when `info` is a TLS address.
    pub(super) fn client(&self, info: ConnectionInfo) -> redis::RedisResult<redis::Client> {
        #[cfg(feature = "tls")]
        if let Some(certs) = &self.certs
            && matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
        {
            return redis::Client::build_with_tls(info, certs.clone());
        }
        redis::Client::open(info)
    }

    /// The certificates for redis-rs's cluster client, if any are set.
    #[cfg(feature = "tls")]
    pub(super) fn certs(&self) -> Option<redis::TlsCertificates> {
        self.certs.clone()
    }
}
