//! [`TlsFiles`]: a throwaway certificate authority and a server certificate for 127.0.0.1,
//! made with the `openssl` command, and [`RedisServer::start_tls`]: a server that also
//! listens for TLS.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::server::{RedisServer, free_port, make_dir};

/// A CA certificate and a server certificate it signed (P-256 keys, valid two days, subject
/// alternative names `IP:127.0.0.1` and `DNS:localhost`), in PEM files of a fresh directory
/// that is removed when this is dropped.
#[derive(Debug)]
pub struct TlsFiles {
    dir: PathBuf,
}

impl TlsFiles {
    /// Generates the files with `openssl`; panics with its output when that fails.
    pub fn generate() -> Self {
        Self::try_generate().unwrap_or_else(|msg| panic!("{msg}"))
    }

    /// [`generate`](Self::generate), reporting failure as an error message.
    pub fn try_generate() -> Result<Self, String> {
        let files = Self {
            dir: make_dir(None)?,
        };
        let ext = files.dir.join("server.ext");
        fs::write(
            &ext,
            "basicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth,clientAuth\n\
             subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .map_err(|e| format!("write {}: {e}", ext.display()))?;
        let d = |name: &str| files.dir.join(name).to_string_lossy().into_owned();
        let steps: [Vec<String>; 3] = [
            [
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=redisson-sync test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
                "-keyout",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([d("ca.key"), "-out".into(), d("ca.crt")])
            .collect(),
            [
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([d("server.key"), "-out".into(), d("server.csr")])
            .collect(),
            ["x509", "-req", "-days", "2", "-in"]
                .iter()
                .map(|s| s.to_string())
                .chain([
                    d("server.csr"),
                    "-CA".into(),
                    d("ca.crt"),
                    "-CAkey".into(),
                    d("ca.key"),
                    "-CAcreateserial".into(),
                    "-extfile".into(),
                    d("server.ext"),
                    "-out".into(),
                    d("server.crt"),
                ])
                .collect(),
        ];
        for args in steps {
            let out = Command::new("openssl")
                .args(&args)
                .output()
                .map_err(|e| format!("openssl (is it installed?): {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "openssl {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        Ok(files)
    }

    /// The CA certificate (PEM): what a client must trust.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The server certificate (PEM).
    pub fn server_cert(&self) -> PathBuf {
        self.dir.join("server.crt")
    }

    /// The server's private key (PEM).
    pub fn server_key(&self) -> PathBuf {
        self.dir.join("server.key")
    }

    /// The `redis-server` arguments that make it listen for TLS on `port` with these files
    /// (clients are not asked for certificates).
    pub(crate) fn server_args(&self, port: u16) -> Vec<String> {
        server_args(&self.paths(), port)
    }

    /// The CA certificate, server certificate and key paths, as text.
    pub(crate) fn paths(&self) -> [String; 3] {
        let path = |p: PathBuf| p.to_string_lossy().into_owned();
        [
            path(self.ca_cert()),
            path(self.server_cert()),
            path(self.server_key()),
        ]
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The `redis-server` arguments that make it listen for TLS on `port` with the CA certificate,
/// server certificate and key at `paths` (clients are not asked for certificates).
pub(crate) fn server_args([ca, cert, key]: &[String; 3], port: u16) -> Vec<String> {
    [
        "--tls-port",
        &port.to_string(),
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
        "--tls-ca-cert-file",
        ca,
        "--tls-auth-clients",
        "no",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl RedisServer {
    /// A server that listens for TLS on a port of its own (`--tls-port`, with `files`'
    /// certificate; clients are not asked for certificates) besides its plain port, which
    /// the tests use to look at keys. Returns the server and its TLS port.
    pub fn start_tls(files: &TlsFiles, extra: &[&str]) -> (Self, u16) {
        Self::try_start_tls(files, extra).unwrap_or_else(|msg| panic!("{msg}"))
    }

    /// [`start_tls`](Self::start_tls), reporting failure as an error message.
    pub fn try_start_tls(files: &TlsFiles, extra: &[&str]) -> Result<(Self, u16), String> {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let args = files.server_args(port);
            let args: Vec<&str> = args
                .iter()
                .map(String::as_str)
                .chain(extra.iter().copied())
                .collect();
            match Self::builder().args(&args).try_start() {
                Ok(server) => return Ok((server, port)),
                Err(e) => last = e,
            }
        }
        Err(format!("no TLS redis-server: {last}"))
    }
}
