//! `redisson-sync`: inspect, list, watch and force-unlock the Redisson structures (locks, fair
//! locks, read-write locks, fenced locks, semaphores, latches) of a Redis server, a Redis
//! Cluster or a master behind Sentinel.
//!
//! ```text
//! redisson-sync [--redis URL | --cluster URL... | --sentinel URL... --master NAME]
//!               [--user NAME] [--password PW] [--tls-ca PEM] [--name-prefix P] <command>
//!   inspect NAME [--json] [--as semaphore|latch]
//!   list [PATTERN] [--limit N] [--json]
//!   watch NAME [--for SECONDS] [--json] [--as semaphore|latch] [--no-keyspace] [--poll S]
//!   force-unlock NAME [--yes]
//! ```
//!
//! The server is `--redis URL`, else `$REDIS_URL`, else `redis://127.0.0.1:6379`; the password
//! `--password`, else `$REDISSON_SYNC_PASSWORD` (never printed). Every command but
//! `force-unlock` only reads. Exit status: 0 on success, 1 on an error (printed on stderr as
//! `error: ...`), 2 on a usage error.

mod commands;
mod render;
mod target;

use std::fmt;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use redisson_sync::redis;
use redisson_sync::{Client, inspect::CounterHint};

use target::{Raw, Target};

/// How long to wait for the servers to accept a connection and answer.
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
    /// Follow NAME: print each event (acquired, released, expired, force-unlocked, ...) with
    /// the holder and what told it (messages, keyspace notifications, snapshots), and handoffs
    Watch {
        /// The structure's name
        name: String,
        /// Stop after this many seconds [default: until Ctrl-C]
        #[arg(long = "for", value_name = "SECONDS", value_parser = seconds)]
        for_secs: Option<Duration>,
        /// Print one JSON object per event instead of text
        #[arg(long)]
        json: bool,
        /// As for inspect
        #[arg(long = "as", value_name = "KIND")]
        as_kind: Option<Counter>,
        /// Do not use keyspace notifications even where the server has them on
        #[arg(long)]
        no_keyspace: bool,
        /// Read the state this often when nothing is heard (what publishes nothing, as an
        /// acquisition of a free lock without keyspace notifications, is seen then)
        #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = seconds)]
        poll: Duration,
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

/// A number of seconds as a duration: any value a `Duration` holds, else a usage error
/// (`Duration::from_secs_f64` panics on values such as `1e300`).
fn seconds(text: &str) -> Result<Duration, String> {
    let s: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a number of seconds, got {text:?}"))?;
    if !(s.is_finite() && s >= 0.0) {
        return Err(format!("expected a number of seconds >= 0, got {text:?}"));
    }
    Duration::try_from_secs_f64(s)
        .map_err(|_| format!("expected at most {} seconds, got {text:?}", u64::MAX))
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

/// The connections a command uses: the crate's client (inspection, events, force unlock) and
/// a plain redis-rs connection (SCAN on every master, TYPE).
#[derive(Debug)]
struct Session {
    /// Where, for messages: URLs without their passwords.
    place: String,
    client: Client,
    raw: Raw,
    /// `--name-prefix`: what the client puts before every name.
    prefix: String,
}

impl Session {
    async fn open(target: &Target) -> Result<Self> {
        let place = target.place();
        let raw = target.raw().await?;
        let client = target
            .client()?
            .connect()
            .await
            .map_err(|e| Failure(format!("cannot reach Redis at {place}: {e}")))?;
        Ok(Self {
            place,
            client,
            raw,
            prefix: target.name_prefix.clone().unwrap_or_default(),
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
            json,
            as_kind,
            no_keyspace,
            poll,
        } => {
            if poll < Duration::from_millis(10) {
                return Err(Failure(format!(
                    "--poll takes a number of seconds >= 0.01, got {}",
                    poll.as_secs_f64()
                )));
            }
            let options = commands::WatchOptions {
                limit: for_secs,
                json,
                hint: Counter::hint(as_kind),
                keyspace: !no_keyspace,
                poll,
            };
            commands::watch(&mut session, &name, options).await
        }
        Command::ForceUnlock { name, yes } => {
            commands::force_unlock(&mut session, &name, yes).await
        }
    };
    session.client.shutdown().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 29, item 8): `--for 1e300` passed the old check (finite, >= 0) and
    /// then panicked in `Duration::from_secs_f64`; every value is now a duration or a usage
    /// error, for `--for` and `--poll` alike.
    #[test]
    fn for_and_poll_take_any_number_of_seconds_a_duration_holds() {
        assert_eq!(seconds("2"), Ok(Duration::from_secs(2)));
        assert_eq!(seconds(" 0.5 "), Ok(Duration::from_millis(500)));
        assert_eq!(seconds("0"), Ok(Duration::ZERO));
        for bad in [
            "1e300", "1.9e19", "inf", "NaN", "-1", "-0.5", "", "2s", "0x10",
        ] {
            let err = seconds(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
        for flag in ["--for", "--poll"] {
            let parsed = Cli::try_parse_from(["redisson-sync", "watch", "n", flag, "1e300"]);
            let err = parsed.unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains("at most"), "{err}");
            assert!(Cli::try_parse_from(["redisson-sync", "watch", "n", flag, "3"]).is_ok());
        }
    }
}
