//! Test support for redisson-sync: throwaway Redis processes and a fault-injecting proxy, for
//! the crate's tests, its examples, the interop scenario runner and the benchmark harness.
//!
//! Everything runs on this host, on free ports of 127.0.0.1 (never 6379 or another fixed
//! port), and every process is started by this crate, ended by its own pid (never by name)
//! and reaped; its directory is removed when its handle is dropped. `redis-server` (and, for
//! a cluster, `redis-cli`) must be on PATH: run `scripts/ensure-redis`.
//!
//! [`ServerBuild`]: the environment variable `REDISSON_SYNC_SERVER` selects another server
//! build for everything started here: `valkey-9.1`, `redis-6.2` or `redis-7.0`, which
//! `scripts/ensure-servers` provides under `target/servers/<build>/bin/`, or a directory
//! holding `redis-server` and `redis-cli` (see docs/servers.md). What differs between builds
//! is probed, never read from a version: `--enable-debug-command local` is passed only to a
//! build that accepts it (before 7.0 `DEBUG` is on by default), and
//! [`ServerBuild::supports_tls`] says whether TLS can be tested.
//!
//! - [`RedisServer`]: one `redis-server` child process without persistence (`--save ""
//!   --appendonly no`) and with `DEBUG` enabled (`--enable-debug-command local` where the build
//!   has the option), in its own
//!   directory. It can be stopped (SIGKILL, a crash) and restarted on the same port and
//!   directory, or paused and resumed (SIGSTOP / SIGCONT, a hung server). Extra server
//!   arguments ([`RedisServer::start_with`], [`RedisServerBuilder::args`]), e.g. `--appendonly
//!   yes --appendfsync always`, apply on restart too. [`RedisServer::start`] panics with the
//!   server's output when it cannot start; [`RedisServer::try_start`] returns the message
//!   instead.
//! - [`RedisCluster`]: N masters (default 3) with R replicas each (default 0), created with
//!   `redis-cli --cluster create` and ready once every node reports `cluster_state:ok` and
//!   the same slots; it finds the master of a key ([`RedisCluster::node_for_key`]) and stops,
//!   pauses or resumes single nodes.
//! - [`RedisSentinel`]: one master, two replicas and three Sentinels (quorum 2,
//!   `down-after-milliseconds 1000`, `failover-timeout 3000`), the Sentinels being
//!   `redis-server <conf> --sentinel`; ready once every Sentinel reports the master and knows
//!   the replicas and its peers, and the replicas' links are up.
//! - [`TlsFiles`]: a throwaway CA and a server certificate for 127.0.0.1 (the `openssl`
//!   command), and [`RedisServer::start_tls`], a server that also listens for TLS;
//!   [`RedisClusterBuilder::tls`] and [`RedisSentinel::start_tls`] do the same for a cluster
//!   (its bus over TLS too) and a Sentinel setup (replication and the Sentinels' links too).
//! - [`FaultProxy`]: a TCP proxy in front of one loopback address that passes, delays,
//!   freezes, drops or resets the traffic ([`Mode`]) of all its connections or only of those
//!   that sent a pattern ([`FaultProxy::set_mode_for`]), and resets the connection that sends
//!   a pattern, before or after forwarding it ([`FaultProxy::reset_before`],
//!   [`FaultProxy::reset_after`], each a one-shot [`Trigger`]). It runs its own tokio runtime
//!   on its own thread, so sync and async tests can both drive it. There is no `tc netem`
//!   on the machines these tests run on; this is the user-space substitute.
//! - [`acl`]: the least-privilege ACL rules of a redisson-sync user (docs/servers.md).
//! - [`memory`]: memory pressure: a server's `maxmemory-policy`, a fill that holds it over or
//!   at its limit ([`memory::Fill`]), every evictable key evicted at once
//!   ([`memory::evict_all`]), and the keys it evicts, from its keyspace notifications
//!   ([`memory::Evictions`]).
//! - [`history`]: the fault suite's checker: overlapping holds (expected or violations),
//!   fencing tokens out of order, lost wake-ups, from recorded holds and injected faults.
//!
//! ```no_run
//! use testkit::{FaultProxy, Mode, RedisServer};
//!
//! let server = RedisServer::start();
//! let proxy = FaultProxy::start(server.addr());
//! let mut con = redis::Client::open(proxy.url()).unwrap().get_connection().unwrap();
//! let _: () = redis::cmd("SET").arg("k").arg(1).query(&mut con).unwrap();
//! proxy.set_mode(Mode::Freeze); // the next reply is held until the mode changes
//! proxy.set_mode(Mode::Pass);
//! ```

pub mod acl;
mod build;
mod cluster;
pub mod history;
pub mod memory;
mod proxy;
mod sentinel;
mod server;
mod tls;

pub use build::{SERVER_ENV, SERVERS_DIR_ENV, ServerBuild};
pub use cluster::{ClusterNode, RedisCluster, RedisClusterBuilder, Role};
pub use proxy::{FaultProxy, Mode, Trigger};
pub use sentinel::RedisSentinel;
pub use server::{RedisServer, RedisServerBuilder, replica_link_up};
pub use tls::TlsFiles;
