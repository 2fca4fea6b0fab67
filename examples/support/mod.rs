//! The Redis of the examples: the one at `REDIS_URL` when set, otherwise a throwaway
//! `redis-server` on a free port of 127.0.0.1 (no persistence), stopped at the end.
//!
//! Each example includes this file with `#[path = "support/mod.rs"] mod support;` (a file in a
//! subdirectory of `examples/` is not built as an example of its own). The throwaway server is
//! the test suite's [`RedisServer`] from the `testkit` workspace crate (a dev-dependency).

use testkit::RedisServer;

/// The error of [`redis`]: what the examples' `main` returns too.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

/// The URL of the Redis at `REDIS_URL` when set; otherwise starts a throwaway server (waiting
/// up to 10 s for it) and returns its URL and the server, which runs until it is dropped.
pub(crate) fn redis() -> Result<(String, Option<RedisServer>), Error> {
    match std::env::var("REDIS_URL") {
        Ok(url) => Ok((url, None)),
        Err(_) => {
            let server = RedisServer::try_start()?;
            Ok((server.url(), Some(server)))
        }
    }
}
