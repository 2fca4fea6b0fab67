//! The Redis of the examples: the one at `REDIS_URL` when set, otherwise a throwaway
//! `redis-server` on a free port of 127.0.0.1 (no persistence), stopped at the end.
//!
//! Each example includes this file with `#[path = "support/mod.rs"] mod support;` (a file in a
//! subdirectory of `examples/` is not built as an example of its own).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The error of [`redis`]: what the examples' `main` returns too.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

/// The URL of the Redis at `REDIS_URL` when set; otherwise starts a throwaway server and
/// returns its URL and the server, which runs until it is dropped.
pub(crate) fn redis() -> Result<(String, Option<ThrowawayRedis>), Error> {
    match std::env::var("REDIS_URL") {
        Ok(url) => Ok((url, None)),
        Err(_) => {
            let server = ThrowawayRedis::start()?;
            Ok((server.url(), Some(server)))
        }
    }
}

/// A `redis-server` child process on a free port of 127.0.0.1, killed on drop.
pub(crate) struct ThrowawayRedis {
    child: Child,
    port: u16,
}

impl ThrowawayRedis {
    /// Starts the server and waits (up to 10 s) until it accepts connections.
    fn start() -> Result<Self, Error> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server ({e}); run scripts/ensure-redis"))?;
        let server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("redis-server did not start".into());
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for ThrowawayRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
