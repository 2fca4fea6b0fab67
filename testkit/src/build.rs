//! [`ServerBuild`]: which server binary the testkit runs, chosen by one environment variable.
//!
//! `REDISSON_SYNC_SERVER` names a build that `scripts/ensure-servers` provides under the
//! repository's `target/servers/<build>/bin/` (`redis-7.0`, `valkey-9.1`, `redis-6.2`), or a
//! directory holding `redis-server` and `redis-cli`. Unset (or empty), the testkit runs the
//! `redis-server` and `redis-cli` on PATH, as it always did (Debian's 7.0.15, from
//! `scripts/ensure-redis`). `REDISSON_SYNC_SERVERS_DIR` overrides where the named builds are
//! looked for (default: `target/servers` of this repository).
//!
//! Nothing here knows a build's version: what differs between builds is probed (see
//! [`ServerBuild::supports_tls`] and the `DEBUG` option in `server.rs`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable that selects the server build.
pub const SERVER_ENV: &str = "REDISSON_SYNC_SERVER";
/// The environment variable that says where the named builds are (default: this repository's
/// `target/servers`).
pub const SERVERS_DIR_ENV: &str = "REDISSON_SYNC_SERVERS_DIR";

/// One server build: the binaries the testkit starts.
#[derive(Debug)]
pub struct ServerBuild {
    name: String,
    server: PathBuf,
    cli: PathBuf,
    tls: OnceLock<bool>,
}

impl ServerBuild {
    /// The build `REDISSON_SYNC_SERVER` selects (read once per process).
    pub fn current() -> &'static Self {
        static CURRENT: OnceLock<ServerBuild> = OnceLock::new();
        CURRENT.get_or_init(|| Self::from_selection(std::env::var(SERVER_ENV).ok().as_deref()))
    }

    fn from_selection(selection: Option<&str>) -> Self {
        let selection = selection.map(str::trim).filter(|s| !s.is_empty());
        let Some(name) = selection else {
            return Self::new("path", PathBuf::from("redis-server"), "redis-cli".into());
        };
        let bin = if name.contains('/') {
            PathBuf::from(name)
        } else {
            let dir = std::env::var_os(SERVERS_DIR_ENV).map_or_else(
                || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/servers"),
                PathBuf::from,
            );
            dir.join(name).join("bin")
        };
        Self::new(name, bin.join("redis-server"), bin.join("redis-cli"))
    }

    fn new(name: &str, server: PathBuf, cli: PathBuf) -> Self {
        Self {
            name: name.to_owned(),
            server,
            cli,
            tls: OnceLock::new(),
        }
    }

    /// The build's name: what `REDISSON_SYNC_SERVER` says, or `path` when it is unset (the
    /// binaries on PATH).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `redis-server` (or `valkey-server`) binary.
    pub fn server(&self) -> &Path {
        &self.server
    }

    /// The `redis-cli` binary that creates clusters.
    pub fn cli(&self) -> &Path {
        &self.cli
    }

    /// What `<server> --version` prints (e.g. `Valkey server v=9.1.2 ...`), for logs; `None`
    /// when the binary cannot be run.
    pub fn version_line(&self) -> Option<String> {
        let out = std::process::Command::new(&self.server)
            .arg("--version")
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Whether this build can listen for TLS, probed once per process by starting a server
    /// with a TLS port (a build without TLS refuses the directive or has no TLS
    /// connection type).
    pub fn supports_tls(&self) -> bool {
        *self.tls.get_or_init(|| {
            let Ok(files) = crate::TlsFiles::try_generate() else {
                return false;
            };
            crate::RedisServer::try_start_tls(&files, &[]).is_ok()
        })
    }

    /// The message for a missing binary.
    pub(crate) fn missing(&self, binary: &Path) -> String {
        if self.name == "path" {
            format!(
                "{} not found on PATH; run scripts/ensure-redis",
                binary.display()
            )
        } else {
            format!(
                "{} not found for server build {:?} ({SERVER_ENV}); run scripts/ensure-servers {}",
                binary.display(),
                self.name,
                self.name
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selection_names_the_binaries() {
        let path = ServerBuild::from_selection(None);
        assert_eq!(path.name(), "path");
        assert_eq!(path.server(), Path::new("redis-server"));
        assert_eq!(ServerBuild::from_selection(Some(" ")).name(), "path");
        let valkey = ServerBuild::from_selection(Some("valkey-9.1"));
        assert!(valkey.server().ends_with("valkey-9.1/bin/redis-server"));
        assert!(valkey.cli().ends_with("valkey-9.1/bin/redis-cli"));
        let dir = ServerBuild::from_selection(Some("/opt/redis/bin"));
        assert_eq!(dir.server(), Path::new("/opt/redis/bin/redis-server"));
        assert!(
            valkey
                .missing(valkey.server())
                .contains("scripts/ensure-servers valkey-9.1")
        );
    }
}
