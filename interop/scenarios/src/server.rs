//! The scenarios' private, throwaway `redis-server` (testkit's [`RedisServer`]: a free port of
//! 127.0.0.1, killed by its own pid when dropped), plus the raw queries the scenarios use to
//! look at what Redis holds.

use std::path::Path;

use redis::{Connection, Value};

pub use testkit::RedisServer;

/// Starts `redis-server` without persistence, its files in a fresh directory under `logs`
/// (removed when the server is dropped).
pub fn start(logs: &Path) -> Result<RedisServer, String> {
    RedisServer::builder().dir_in(logs).try_start()
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
