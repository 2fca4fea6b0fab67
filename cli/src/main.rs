//! `redisson-sync`: inspect, list, watch and force-unlock the Redisson structures (locks, fair
//! locks, read-write locks, fenced locks, semaphores, latches) of a Redis server.
//!
//! ```text
//! redisson-sync [--redis URL | --cluster URL... | --sentinel URL... --master NAME] <command>
//!   inspect NAME [--json] [--as semaphore|latch]
//!   list [PATTERN] [--limit N] [--json]
//!   watch NAME [--for SECONDS] [--as semaphore|latch]
//!   force-unlock NAME [--yes]
//! ```
//!
//! The server is `--redis URL`, else `$REDIS_URL`, else `redis://127.0.0.1:6379`. Every
//! command but `force-unlock` only reads. Exit status: 0 on success, 1 on an error (printed
//! on stderr as `error: ...`), 2 on a usage error.

mod commands;
mod render;

use std::fmt;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use redisson_sync::redis;
use redisson_sync::{Client, CounterHint};

/// How long to wait for the server to accept a connection and answer `PING`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Inspect, list, watch and force-unlock Redisson locks, semaphores and latches.
#[derive(Debug, Parser)]
#[command(name = "redisson-sync", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: Command,
}

/// Which Redis deployment to talk to.
#[derive(Debug, Args)]
struct Target {
    /// A single Redis server [default: $REDIS_URL, else redis://127.0.0.1:6379]
    #[arg(long, value_name = "URL", global = true, conflicts_with_all = ["cluster", "sentinel"])]
    redis: Option<String>,
    /// Redis Cluster seed nodes (repeat the flag or separate with commas); not supported yet
    #[arg(
        long,
        value_name = "URL",
        global = true,
        value_delimiter = ',',
        conflicts_with = "sentinel"
    )]
    cluster: Vec<String>,
    /// Sentinels (repeat the flag or separate with commas), with --master; not supported yet
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
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the structure at NAME: kind, TTL, holders, fair queue, markers, token, permits
    Inspect {
        /// The structure's name (its main Redis key)
        name: String,
        /// Print one JSON object instead of a table
        #[arg(long)]
        json: bool,
        /// Read a positive integer string as this kind (Redis cannot tell a semaphore from a
        /// latch; by default it is a latch only while waiters listen on the latch's channel)
        #[arg(long = "as", value_name = "KIND")]
        as_kind: Option<Counter>,
    },
    /// List the lock structures, semaphores and latches whose names match PATTERN (SCAN)
    List {
        /// A Redis glob pattern (`*`, `?`, `[abc]`, `\` escapes)
        #[arg(default_value = "*")]
        pattern: String,
        /// Examine at most this many keys
        #[arg(long, default_value_t = 1000)]
        limit: usize,
        /// Print one JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// Follow NAME: print the snapshot on every message on its channels and every second
    /// when it changed, with handoffs
    Watch {
        /// The structure's name
        name: String,
        /// Stop after this many seconds [default: until Ctrl-C]
        #[arg(long = "for", value_name = "SECONDS")]
        for_secs: Option<f64>,
        /// As for inspect
        #[arg(long = "as", value_name = "KIND")]
        as_kind: Option<Counter>,
    },
    /// Delete the lock at NAME whoever holds it (asks for confirmation unless --yes)
    ForceUnlock {
        /// The lock's name
        name: String,
        /// Do not ask for confirmation
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// How to read a positive integer string.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Counter {
    Semaphore,
    Latch,
}

impl Counter {
    fn hint(kind: Option<Self>) -> CounterHint {
        match kind {
            None => CounterHint::Auto,
            Some(Self::Semaphore) => CounterHint::Semaphore,
            Some(Self::Latch) => CounterHint::Latch,
        }
    }
}

/// A failure, as printed: `error: <message>`.
#[derive(Debug)]
struct Failure(String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<redisson_sync::Error> for Failure {
    fn from(e: redisson_sync::Error) -> Self {
        Self(e.to_string())
    }
}

impl From<redis::RedisError> for Failure {
    fn from(e: redis::RedisError) -> Self {
        Self(format!("Redis error: {e}"))
    }
}

type Result<T, E = Failure> = std::result::Result<T, E>;

/// The connections a command uses: the crate's client (inspection, force unlock) and a plain
/// redis-rs client (SCAN, TYPE, pub/sub).
#[derive(Debug)]
struct Session {
    url: String,
    client: Client,
    redis: redis::Client,
    raw: redis::aio::MultiplexedConnection,
}

impl Target {
    /// The URL of the single server, or the error for the topologies not supported yet.
    fn url(&self) -> Result<String> {
        if !self.cluster.is_empty() || !self.sentinel.is_empty() {
            let mode = if self.cluster.is_empty() {
                "Sentinel"
            } else {
                "Redis Cluster"
            };
            return Err(Failure(format!(
                "{mode} mode is not supported until the crate's cluster/sentinel support lands; \
                 use --redis URL with one server"
            )));
        }
        Ok(self
            .redis
            .clone()
            .or_else(|| std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned()))
    }
}

impl Session {
    async fn open(target: &Target) -> Result<Self> {
        let url = target.url()?;
        let redis = redis::Client::open(url.as_str())
            .map_err(|e| Failure(format!("invalid Redis URL {url:?}: {e}")))?;
        let unreachable =
            |e: &dyn fmt::Display| Failure(format!("cannot reach Redis at {url}: {e}"));
        let mut raw =
            match tokio::time::timeout(CONNECT_TIMEOUT, redis.get_multiplexed_async_connection())
                .await
            {
                Ok(Ok(raw)) => raw,
                Ok(Err(e)) => return Err(unreachable(&e)),
                Err(_) => {
                    return Err(unreachable(&format!(
                        "no connection within {CONNECT_TIMEOUT:?}"
                    )));
                }
            };
        match tokio::time::timeout(
            CONNECT_TIMEOUT,
            redis::cmd("PING").query_async::<String>(&mut raw),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(unreachable(&e)),
            Err(_) => {
                return Err(unreachable(&format!(
                    "no answer to PING within {CONNECT_TIMEOUT:?}"
                )));
            }
        }
        let client = Client::builder()
            .url(url.as_str())
            .pool_size(2)
            .build()
            .map_err(|e| Failure(e.to_string()))?;
        Ok(Self {
            url,
            client,
            redis,
            raw,
        })
    }
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let code = match run(cli).await {
        Ok(()) => 0,
        Err(failure) => {
            eprintln!("error: {failure}");
            1
        }
    };
    std::process::exit(code);
}

async fn run(cli: Cli) -> Result<()> {
    let mut session = Session::open(&cli.target).await?;
    let result = match cli.command {
        Command::Inspect {
            name,
            json,
            as_kind,
        } => commands::inspect(&mut session, &name, json, Counter::hint(as_kind)).await,
        Command::List {
            pattern,
            limit,
            json,
        } => commands::list(&mut session, &pattern, limit, json).await,
        Command::Watch {
            name,
            for_secs,
            as_kind,
        } => {
            let limit = match for_secs {
                Some(s) if !(s.is_finite() && s >= 0.0) => {
                    return Err(Failure(format!(
                        "--for takes a number of seconds >= 0, got {s}"
                    )));
                }
                Some(s) => Some(Duration::from_secs_f64(s)),
                None => None,
            };
            commands::watch(&mut session, &name, limit, Counter::hint(as_kind)).await
        }
        Command::ForceUnlock { name, yes } => {
            commands::force_unlock(&mut session, &name, yes).await
        }
    };
    session.client.shutdown().await;
    result
}
