//! Command-line options (CONFORMANCE_PROTOCOL.md, "Options"): both agents accept all of them.

use std::time::Duration;

/// Usage text printed for `--help`.
pub const USAGE: &str = "\
usage: redisson-sync-agent [OPTIONS]
  --redis URL                        Redis URL (default redis://127.0.0.1:6379)
  --mode single|cluster|sentinel     topology (default single)
  --master NAME                      sentinel master name (default mymaster; --redis names a Sentinel)
  --watchdog-ms N                    watchdog lease in ms (default 30000)
  --fair-wait-ms N                   fair-lock waiter slot in ms (default 300000)
  --pubsub auto|classic|sharded|both pub/sub flavour in cluster mode (default auto)
  --redisson VERSION                 Java agent only; accepted and ignored
  --user NAME                        ACL user for the data nodes (default: the URL's)
  --password PASSWORD                password for the data nodes (default: the URL's)
  --name-prefix PREFIX               put before every name (Redisson NameMapper; default none)
  --tls-ca FILE                      PEM CA certificates a rediss:// server must chain to
  --sync-replicas auto|on|off        WAIT on replicas after lock writes (Rust agent only; default auto)
Speaks the JSON-lines protocol of CONFORMANCE_PROTOCOL.md on stdin/stdout.";

/// The topology given with `--mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Single,
    Cluster,
    Sentinel,
}

/// The parsed options. `--redisson` (the Java agent's) is only validated, so that a driver
/// gets the same answer from both agents; every other option changes what this agent does.
#[derive(Clone, Debug)]
pub struct Options {
    pub redis: String,
    pub mode: Mode,
    pub watchdog: Duration,
    /// `--fair-wait-ms`: the fair-lock waiter slot (`Config::fair_wait_timeout`).
    pub fair_wait: Duration,
    /// `--pubsub`: `Config::pubsub` (cluster mode only).
    pub pubsub: redisson_sync::config::PubSubMode,
    /// `--master`: the Sentinel master name (sentinel mode).
    pub master: String,
    /// `--user`, `--password`: `Config::username`, `Config::password`.
    pub user: Option<String>,
    pub password: Option<String>,
    /// `--name-prefix`: `Config::key_prefix` (also put before the `stress` counter's key, as
    /// Redisson's NameMapper does to the Java agent's counter bucket).
    pub name_prefix: String,
    /// `--sync-replicas` (Rust agent only): `Config::sync_replicas`.
    pub sync_replicas: redisson_sync::config::SyncReplicas,
    /// `--tls-ca`: `Config::tls_ca_cert`.
    pub tls_ca: Option<String>,
}

impl Options {
    /// Parses the arguments after the program name. `Ok(None)` means `--help` was asked for;
    /// `Err` carries the message for stderr (the caller exits with status 2).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Self>, String> {
        let mut options = Self {
            redis: "redis://127.0.0.1:6379".to_owned(),
            mode: Mode::Single,
            watchdog: Duration::from_secs(30),
            fair_wait: Duration::from_secs(300),
            pubsub: redisson_sync::config::PubSubMode::Auto,
            master: "mymaster".to_owned(),
            user: None,
            password: None,
            name_prefix: String::new(),
            sync_replicas: redisson_sync::config::SyncReplicas::Auto,
            tls_ca: None,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            // Both `--name value` and `--name=value`.
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) if name.starts_with("--") => (name.to_owned(), Some(value)),
                _ => (arg.clone(), None),
            };
            if name == "-h" || name == "--help" {
                return Ok(None);
            }
            let value = match inline {
                Some(value) => value.to_owned(),
                None => args
                    .next()
                    .ok_or_else(|| format!("option {name} needs a value"))?,
            };
            match name.as_str() {
                "--redis" => options.redis = value,
                "--mode" => {
                    options.mode = match value.as_str() {
                        "single" => Mode::Single,
                        "cluster" => Mode::Cluster,
                        "sentinel" => Mode::Sentinel,
                        _ => return Err(bad_value(&name, &value, "single|cluster|sentinel")),
                    }
                }
                "--master" | "--redisson" | "--user" => {
                    if value.is_empty() {
                        return Err(bad_value(&name, &value, "a non-empty string"));
                    }
                    match name.as_str() {
                        "--master" => options.master = value,
                        "--user" => options.user = Some(value),
                        _ => {}
                    }
                }
                "--password" => options.password = Some(value),
                "--name-prefix" => options.name_prefix = value,
                "--tls-ca" => options.tls_ca = Some(value),
                "--sync-replicas" => {
                    options.sync_replicas = value
                        .parse()
                        .map_err(|_| bad_value(&name, &value, "auto|on|off"))?;
                }
                "--watchdog-ms" => {
                    options.watchdog = Duration::from_millis(millis(&name, &value)?);
                }
                "--fair-wait-ms" => {
                    options.fair_wait = Duration::from_millis(millis(&name, &value)?);
                }
                "--pubsub" => {
                    options.pubsub = value
                        .parse()
                        .map_err(|_| bad_value(&name, &value, "auto|classic|sharded|both"))?;
                }
                _ => return Err(format!("unknown option {name}\n{USAGE}")),
            }
        }
        Ok(Some(options))
    }
}

/// A positive integer number of milliseconds.
fn millis(name: &str, value: &str) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(ms),
        _ => Err(bad_value(name, value, "a positive integer (milliseconds)")),
    }
}

fn bad_value(name: &str, value: &str, expected: &str) -> String {
    format!("bad value {value:?} for {name}: expected {expected}")
}
