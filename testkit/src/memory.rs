//! Memory pressure on a server: its `maxmemory-policy` ([`Policy`]), what `INFO` says about
//! its memory ([`Memory`]), a fill that puts it over or at its limit ([`Fill`]), evictions on
//! demand ([`evict_all`]) and a record of the keys it evicts ([`Evictions`]).
//!
//! Redis decides before every command, from `used_memory` at that instant (less its replicas'
//! output buffers and the AOF buffer), whether it is over `maxmemory`: then an evicting policy
//! evicts keys first, and a command that may grow memory (`denyoom`) is refused with `OOM
//! command not allowed when used memory > 'maxmemory'` if it is still over. A script without
//! a shebang is not refused up front: its first write of a `denyoom` command is (`HSET`,
//! `HINCRBY`, `SET`, `INCR`, `DECRBY`, `ZADD`, `RPUSH`, ...), and once it has written
//! anything (`DEL`, `LPOP`, `ZREM`, `PEXPIRE` are writes that are not `denyoom`) the rest runs.
//!
//! A fill that stops at the first refusal leaves the server just over its limit, and its own
//! buffers, freed afterwards, can bring it back under: on Valkey 9.1.2 and Redis 6.2.14 (libc
//! malloc) the next writes were accepted again. So [`Fill::over_limit`] sets `maxmemory` well
//! below what the server uses once the filler is written: every `denyoom` write is refused,
//! whatever the buffers of a connection do meanwhile.

use std::time::{Duration, Instant};

/// Bytes of each filler value.
const FILLER_VALUE: usize = 16 * 1024;
/// How many filler keys a fill writes: 1 MiB of data without TTL.
const FILLER_KEYS: u64 = 64;
/// How far below `used_memory` [`Fill::over_limit`] sets `maxmemory`: more than a connection's
/// buffers (a few tens of KiB) can move it.
const OVER_LIMIT_BY: u64 = 512 * 1024;

/// A `maxmemory-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Policy {
    /// Refuse writes that may grow memory; evict nothing (the default).
    NoEviction,
    /// Evict the least recently used of the keys with a TTL.
    VolatileLru,
    /// Evict the least frequently used of the keys with a TTL.
    VolatileLfu,
    /// Evict a random key with a TTL.
    VolatileRandom,
    /// Evict the key with the shortest TTL.
    VolatileTtl,
    /// Evict the least recently used key.
    AllkeysLru,
    /// Evict the least frequently used key.
    AllkeysLfu,
    /// Evict a random key.
    AllkeysRandom,
}

impl Policy {
    /// Every policy, `noeviction` first.
    pub const ALL: [Self; 8] = [
        Self::NoEviction,
        Self::VolatileLru,
        Self::VolatileLfu,
        Self::VolatileRandom,
        Self::VolatileTtl,
        Self::AllkeysLru,
        Self::AllkeysLfu,
        Self::AllkeysRandom,
    ];

    /// The policies that evict keys.
    pub const EVICTING: [Self; 7] = [
        Self::VolatileLru,
        Self::VolatileLfu,
        Self::VolatileRandom,
        Self::VolatileTtl,
        Self::AllkeysLru,
        Self::AllkeysLfu,
        Self::AllkeysRandom,
    ];

    /// Its name in `CONFIG SET maxmemory-policy`.
    pub fn name(self) -> &'static str {
        match self {
            Self::NoEviction => "noeviction",
            Self::VolatileLru => "volatile-lru",
            Self::VolatileLfu => "volatile-lfu",
            Self::VolatileRandom => "volatile-random",
            Self::VolatileTtl => "volatile-ttl",
            Self::AllkeysLru => "allkeys-lru",
            Self::AllkeysLfu => "allkeys-lfu",
            Self::AllkeysRandom => "allkeys-random",
        }
    }

    /// The policy of this [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether it may evict a key without a TTL (the `allkeys-*` policies).
    pub fn evicts_persistent_keys(self) -> bool {
        matches!(
            self,
            Self::AllkeysLru | Self::AllkeysLfu | Self::AllkeysRandom
        )
    }

    /// Whether it evicts keys at all.
    pub fn evicts(self) -> bool {
        self != Self::NoEviction
    }
}

/// What `INFO` says about a server's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    /// `used_memory`: bytes allocated, in the server's own count.
    pub used: u64,
    /// `maxmemory` (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory_policy`.
    pub policy: String,
    /// `evicted_keys`: keys evicted since the start (or the last `CONFIG RESETSTAT`).
    pub evicted_keys: u64,
}

/// Reads [`Memory`] from `INFO memory` and `INFO stats`.
pub fn memory(con: &mut redis::Connection) -> Result<Memory, String> {
    // One section per call: servers before 7.0 take no more.
    let mut info = String::new();
    for section in ["memory", "stats"] {
        let text: String = redis::cmd("INFO")
            .arg(section)
            .query(con)
            .map_err(|e| format!("INFO {section}: {e}"))?;
        info += &text;
    }
    let field = |name: &str| -> Result<&str, String> {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
            .ok_or_else(|| format!("INFO has no {name}"))
    };
    let number = |name: &str| -> Result<u64, String> {
        let text = field(name)?;
        text.parse()
            .map_err(|_| format!("INFO {name} is not a number: {text:?}"))
    };
    Ok(Memory {
        used: number("used_memory")?,
        maxmemory: number("maxmemory")?,
        policy: field("maxmemory_policy")?.to_owned(),
        evicted_keys: number("evicted_keys")?,
    })
}

/// `CONFIG SET name value`.
pub fn config_set(con: &mut redis::Connection, name: &str, value: &str) -> Result<(), String> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query::<()>(con)
        .map_err(|e| format!("CONFIG SET {name} {value}: {e}"))
}

/// `CONFIG GET name`'s value.
fn config_get(con: &mut redis::Connection, name: &str) -> Result<String, String> {
    let reply: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(con)
        .map_err(|e| format!("CONFIG GET {name}: {e}"))?;
    reply
        .get(1)
        .cloned()
        .ok_or_else(|| format!("CONFIG GET {name}: no such setting"))
}

/// A server filled with data and held over or at its memory limit, with `policy`; until
/// [`heal`](Self::heal) gives its settings back and deletes the filler.
///
/// The filler is 64 keys `<prefix>:<n>` of 16 KiB, without TTL: data no
/// `volatile-*` policy may evict (an application's own data, in the worst case for locks, whose
/// keys all have a TTL).
#[derive(Debug)]
#[must_use = "a fill stays until it is healed"]
pub struct Fill {
    prefix: String,
    /// What `heal` sets again: `maxmemory`, `maxmemory-policy`.
    maxmemory: String,
    policy: String,
    /// The `maxmemory` the fill set.
    limit: u64,
}

impl Fill {
    /// Sets `policy`, writes the filler, then sets `maxmemory` 512 KiB below the memory the
    /// server uses: from then on every write that may grow memory is refused (`noeviction`),
    /// or makes the server evict what `policy` may evict and, once nothing is left, refused
    /// too. Deterministic: no connection's buffers move `used_memory` by that much.
    pub fn over_limit(
        con: &mut redis::Connection,
        policy: Policy,
        prefix: &str,
    ) -> Result<Self, String> {
        let fill = Self::write(con, policy, prefix)?;
        let limit = memory(con).map(|m| m.used.saturating_sub(OVER_LIMIT_BY).max(1));
        fill.set_limit(con, limit)
    }

    /// Sets `policy`, writes the filler, then sets `maxmemory` `headroom` bytes above the
    /// memory the server uses: a little more data (or a connection's buffers) takes it over,
    /// and then `policy` evicts, or Redis refuses writes.
    pub fn at_limit(
        con: &mut redis::Connection,
        policy: Policy,
        prefix: &str,
        headroom: u64,
    ) -> Result<Self, String> {
        let fill = Self::write(con, policy, prefix)?;
        let limit = memory(con).map(|m| m.used + headroom);
        fill.set_limit(con, limit)
    }

    /// Sets `maxmemory` to `limit`; on failure gives everything back.
    fn set_limit(
        mut self,
        con: &mut redis::Connection,
        limit: Result<u64, String>,
    ) -> Result<Self, String> {
        let set = limit.and_then(|limit| {
            self.limit = limit;
            config_set(con, "maxmemory", &limit.to_string())
        });
        match set {
            Ok(()) => Ok(self),
            Err(e) => {
                let _ = self.heal(con);
                Err(e)
            }
        }
    }

    fn write(con: &mut redis::Connection, policy: Policy, prefix: &str) -> Result<Self, String> {
        let fill = Self {
            prefix: prefix.to_owned(),
            maxmemory: config_get(con, "maxmemory")?,
            policy: config_get(con, "maxmemory-policy")?,
            limit: 0,
        };
        let value = "x".repeat(FILLER_VALUE);
        let mut pipe = redis::pipe();
        for n in 0..FILLER_KEYS {
            pipe.cmd("SET").arg(fill.key(n)).arg(&value).ignore();
        }
        let written = config_set(con, "maxmemory-policy", policy.name()).and_then(|()| {
            pipe.query::<()>(con)
                .map_err(|e| format!("writing the filler: {e}"))
        });
        match written {
            Ok(()) => Ok(fill),
            Err(e) => {
                let _ = fill.heal(con);
                Err(e)
            }
        }
    }

    fn key(&self, n: u64) -> String {
        format!("{}:{n}", self.prefix)
    }

    /// The `maxmemory` the fill set.
    pub fn maxmemory(&self) -> u64 {
        self.limit
    }

    /// Writes one more filler value (`<prefix>:more:<n>`, no TTL), pushing the server over its
    /// limit: the next command makes it evict, or is refused. `Ok(false)` when Redis refused
    /// this write itself for memory.
    pub fn push(&self, con: &mut redis::Connection, n: u64) -> Result<bool, String> {
        let value = "x".repeat(FILLER_VALUE / 4);
        match redis::cmd("SET")
            .arg(format!("{}:more:{n}", self.prefix))
            .arg(value)
            .query::<()>(con)
        {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some("OOM") => Ok(false),
            Err(e) => Err(format!("pushing the filler: {e}")),
        }
    }

    /// Gives back the settings the fill changed (`maxmemory` first, so that nothing more is
    /// evicted or refused) and deletes the filler.
    pub fn heal(self, con: &mut redis::Connection) -> Result<(), String> {
        config_set(con, "maxmemory", &self.maxmemory)?;
        config_set(con, "maxmemory-policy", &self.policy)?;
        let mut keys: Vec<String> = (0..FILLER_KEYS).map(|n| self.key(n)).collect();
        let more: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:more:*", self.prefix))
            .query(con)
            .map_err(|e| format!("KEYS: {e}"))?;
        keys.extend(more);
        redis::cmd("DEL")
            .arg(&keys)
            .query::<()>(con)
            .map_err(|e| format!("deleting the filler: {e}"))
    }
}

/// Makes the server evict, at once, every key its policy may evict (with a `volatile-*`
/// policy every key with a TTL, with an `allkeys-*` one every key): `CONFIG SET maxmemory 1`
/// and the old limit again, in one pipeline, so that no other client's command runs in between
/// (Redis evicts before the second command, or, before 7.0, within the first), with
/// `maxmemory-eviction-tenacity 100` for the time (no time limit on one eviction round).
/// Returns how many keys it evicted. Under `noeviction` it evicts nothing.
pub fn evict_all(con: &mut redis::Connection) -> Result<u64, String> {
    let before = memory(con)?;
    let tenacity = config_get(con, "maxmemory-eviction-tenacity")?;
    config_set(con, "maxmemory-eviction-tenacity", "100")?;
    let squeezed = redis::pipe()
        .cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1")
        .ignore()
        .cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(before.maxmemory.to_string())
        .ignore()
        .query::<()>(con)
        .map_err(|e| format!("CONFIG SET maxmemory 1 and back: {e}"));
    config_set(con, "maxmemory-eviction-tenacity", &tenacity)?;
    squeezed?;
    Ok(memory(con)?.evicted_keys - before.evicted_keys)
}

/// Evicted keys, each with the instant its notification was heard, in order.
pub type Heard = Vec<(Instant, String)>;

/// The keys a server evicts, as its keyspace notifications (`__keyevent@<db>__:evicted`) tell
/// them, heard on a connection of its own from [`start`](Self::start) to
/// [`stop`](Self::stop). `notify-keyspace-events` is set to `Ee` meanwhile and given back by
/// `stop` (dropped without `stop`, the listener ends and the setting stays).
#[derive(Debug)]
pub struct Evictions {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    listener: Option<std::thread::JoinHandle<Result<Heard, String>>>,
    events: String,
    url: String,
}

impl Evictions {
    /// Subscribes to the evictions of the server at `url` (waits until the subscription is
    /// confirmed, so that no eviction after this returns is missed).
    pub fn start(url: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| format!("{url}: {e}"))?;
        let mut con = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .map_err(|e| format!("{url}: {e}"))?;
        let events = config_get(&mut con, "notify-keyspace-events")?;
        config_set(&mut con, "notify-keyspace-events", "Ee")?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let listener = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut con = client
                    .get_connection_with_timeout(Duration::from_secs(2))
                    .map_err(|e| e.to_string())?;
                con.set_read_timeout(Some(Duration::from_millis(50)))
                    .map_err(|e| e.to_string())?;
                let mut pubsub = con.as_pubsub();
                let subscribed = pubsub
                    .psubscribe("__keyevent@*__:evicted")
                    .map_err(|e| format!("PSUBSCRIBE: {e}"));
                let _ = ready_tx.send(subscribed.clone());
                subscribed?;
                let mut keys = Vec::new();
                // Bounded by `stop`, which `Evictions::stop` sets before joining.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match pubsub.get_message() {
                        Ok(msg) => {
                            keys.push((Instant::now(), msg.get_payload().unwrap_or_default()));
                        }
                        Err(e) if e.is_timeout() => {}
                        Err(e) => return Err(format!("eviction notifications: {e}")),
                    }
                }
                Ok(keys)
            })
        };
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "the eviction listener did not subscribe within 5 s".to_string())??;
        Ok(Self {
            stop,
            listener: Some(listener),
            events,
            url: url.to_owned(),
        })
    }

    /// Stops listening (after a last 100 ms for notifications under way) and returns every
    /// evicted key with the instant it was heard, in order; gives `notify-keyspace-events`
    /// back.
    pub fn stop(mut self) -> Result<Heard, String> {
        std::thread::sleep(Duration::from_millis(100));
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let keys = self
            .listener
            .take()
            .ok_or_else(|| "stopped twice".to_string())?
            .join()
            .map_err(|_| "the eviction listener panicked".to_string())?;
        let mut con = redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .map_err(|e| format!("{}: {e}", self.url))?;
        config_set(&mut con, "notify-keyspace-events", &self.events)?;
        keys
    }
}

impl Drop for Evictions {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::Policy;

    #[test]
    fn policies_by_name() {
        for p in Policy::ALL {
            assert_eq!(Policy::from_name(p.name()), Some(p));
        }
        assert_eq!(Policy::EVICTING.len(), 7);
        assert!(!Policy::EVICTING.contains(&Policy::NoEviction));
        assert_eq!(
            Policy::ALL
                .iter()
                .filter(|p| p.evicts_persistent_keys())
                .count(),
            3
        );
    }
}
