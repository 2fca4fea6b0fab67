//! A private, throwaway `redis-server` on a free port of 127.0.0.1, killed (by its own pid)
//! when dropped, plus the raw queries the scenarios use to look at what Redis holds.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, Value};

pub struct RedisServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts `redis-server` without persistence, its files in a fresh directory under `logs`.
    pub fn start(logs: &Path) -> Result<Self, String> {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let dir = logs.join(format!("redis-{port}"));
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let log = std::fs::File::create(dir.join("redis.log")).map_err(|e| e.to_string())?;
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .arg("--dir")
                .arg(&dir)
                .stdout(log)
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| {
                    format!("cannot start redis-server (run scripts/ensure-redis): {e}")
                })?;
            let mut server = Self { child, port, dir };
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(status)) = server.child.try_wait() {
                    last = format!("redis-server on port {port} exited: {status}");
                    break;
                }
                if let Ok(mut con) = server.connect()
                    && redis::cmd("PING").query::<String>(&mut con).is_ok()
                {
                    return Ok(server);
                }
                thread::sleep(Duration::from_millis(20));
            }
            if last.is_empty() {
                last = format!("redis-server on port {port} did not answer PING within 10 s");
            }
        }
        Err(last)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn connect(&self) -> Result<Connection, String> {
        let client = redis::Client::open(self.url()).map_err(|e| e.to_string())?;
        client
            .get_connection_with_timeout(Duration::from_secs(2))
            .map_err(|e| e.to_string())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

/// What Redis holds under one key, as a scenario compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// `TYPE key`: `none`, `hash`, `string`, ...
    pub kind: String,
    /// The hash's fields and values, sorted (empty unless `kind` is `hash`).
    pub fields: Vec<(String, String)>,
    /// `PTTL key`: -2 no key, -1 no expiry.
    pub pttl: i64,
}

pub fn key_state(con: &mut Connection, key: &str) -> Result<KeyState, String> {
    let kind: String = query(con, redis::cmd("TYPE").arg(key))?;
    let mut fields: Vec<(String, String)> = if kind == "hash" {
        query(con, redis::cmd("HGETALL").arg(key))?
    } else {
        Vec::new()
    };
    fields.sort();
    let pttl: i64 = query(con, redis::cmd("PTTL").arg(key))?;
    Ok(KeyState { kind, fields, pttl })
}

/// Every key in the database, sorted.
pub fn all_keys(con: &mut Connection) -> Result<Vec<String>, String> {
    let mut keys: Vec<String> = query(con, redis::cmd("KEYS").arg("*"))?;
    keys.sort();
    Ok(keys)
}

/// `PUBSUB NUMSUB channel`.
pub fn numsub(con: &mut Connection, channel: &str) -> Result<i64, String> {
    let reply: Vec<Value> = query(con, redis::cmd("PUBSUB").arg("NUMSUB").arg(channel))?;
    match reply.get(1) {
        Some(Value::Int(n)) => Ok(*n),
        other => Err(format!(
            "PUBSUB NUMSUB {channel}: unexpected reply {other:?}"
        )),
    }
}

pub fn query<T: redis::FromRedisValue>(
    con: &mut Connection,
    cmd: &redis::Cmd,
) -> Result<T, String> {
    cmd.query(con).map_err(|e| format!("redis: {e}"))
}
