//! Command-line options (CONFORMANCE_PROTOCOL.md, "Options"): both agents accept all of them.

use std::time::Duration;

/// Usage text printed for `--help`.
pub const USAGE: &str = "\
usage: redisson-sync-agent [OPTIONS]
  --redis URL                        Redis URL (default redis://127.0.0.1:6379)
  --mode single|cluster|sentinel     topology (default single; sentinel is not supported yet)
  --master NAME                      sentinel master name
  --watchdog-ms N                    watchdog lease in ms (default 30000)
  --fair-wait-ms N                   fair-lock waiter slot in ms (default 300000)
  --pubsub auto|classic|sharded|both pub/sub flavour in cluster mode (default auto)
  --redisson VERSION                 Java agent only; accepted and ignored
Speaks the JSON-lines protocol of CONFORMANCE_PROTOCOL.md on stdin/stdout.";

/// The topology given with `--mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Single,
    Cluster,
    Sentinel,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Cluster => "cluster",
            Self::Sentinel => "sentinel",
        }
    }
}

/// The parsed options. `redis`, `mode`, `watchdog`, `fair_wait` and `pubsub` change what this
/// agent does; the others are validated so that a driver gets the same answer from both agents.
#[derive(Clone, Debug)]
pub struct Options {
    pub redis: String,
    pub mode: Mode,
    pub watchdog: Duration,
    /// `--fair-wait-ms`: the fair-lock waiter slot (`Config::fair_wait_timeout`).
    pub fair_wait: Duration,
    /// `--pubsub`: `Config::pubsub` (cluster mode only).
    pub pubsub: redisson_sync::PubSubMode,
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
            pubsub: redisson_sync::PubSubMode::Auto,
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
                "--master" | "--redisson" => {
                    if value.is_empty() {
                        return Err(bad_value(&name, &value, "a non-empty string"));
                    }
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
