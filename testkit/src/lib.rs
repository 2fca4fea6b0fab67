//! Test support for redisson-sync: throwaway Redis processes, for the crate's tests, its
//! examples, the interop scenario runner and the benchmark harness.
//!
//! Everything runs on this host, on free ports of 127.0.0.1 (never 6379 or another fixed
//! port), and every process is started by this crate, ended by its own pid (never by name)
//! and reaped; its directory is removed when its handle is dropped. `redis-server` must be on
//! PATH: run `scripts/ensure-redis`.
//!
//! - [`RedisServer`]: one `redis-server` child process without persistence (`--save ""
//!   --appendonly no`) and with `DEBUG` enabled (`--enable-debug-command local`), in its own
//!   directory. It can be stopped (SIGKILL, a crash) and restarted on the same port and
//!   directory, or paused and resumed (SIGSTOP / SIGCONT, a hung server). Extra server
//!   arguments ([`RedisServer::start_with`], [`RedisServerBuilder::args`]), e.g. `--appendonly
//!   yes --appendfsync always`, apply on restart too. [`RedisServer::start`] panics with the
//!   server's output when it cannot start; [`RedisServer::try_start`] returns the message
//!   instead.
//!
//! ```no_run
//! use testkit::RedisServer;
//!
//! let mut server = RedisServer::start();
//! let mut con = server.connect();
//! let _: () = redis::cmd("SET").arg("k").arg(1).query(&mut con).unwrap();
//! server.pause(); // SIGSTOP: connections stay open, nothing answers
//! server.resume();
//! ```

mod server;

pub use server::{RedisServer, RedisServerBuilder};
