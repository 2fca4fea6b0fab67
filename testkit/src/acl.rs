//! The least-privilege ACL rules of a redisson-sync user (docs/servers.md quotes them, and
//! `tests/least_privilege.rs` runs every primitive with exactly these rules).

/// The commands the crate sends, by itself or from its scripts (ACL rules apply inside
/// scripts too), on a single server, behind Sentinel and on a cluster. `AUTH` and `HELLO` are
/// allowed to every user.
pub const COMMANDS: &[&str] = &[
    // Scripts (every lock operation), and the transaction that loads and runs a script the
    // server forgot twice.
    "+evalsha",
    "+script|load",
    "+multi",
    "+exec",
    // Connection checks, identities and the cut-off of a request of unknown outcome.
    "+ping",
    "+info",
    "+role",
    "+client|info",
    "+client|id",
    "+client|kill",
    "+cluster|slots",
    // Replica sync.
    "+wait",
    // Waiting by message; publishing happens in the scripts.
    "+subscribe",
    "+unsubscribe",
    "+publish",
    "+pubsub|numsub",
    // Plain reads.
    "+exists",
    "+hexists",
    "+hget",
    "+pttl",
    "+del",
    // Inside the scripts.
    "+decr",
    "+decrby",
    "+get",
    "+hdel",
    "+hgetall",
    "+hincrby",
    "+hkeys",
    "+hlen",
    "+hscan",
    "+hset",
    "+incr",
    "+incrby",
    "+lindex",
    "+llen",
    "+lpop",
    "+lrange",
    "+lrem",
    "+pexpire",
    "+rpush",
    "+set",
    "+strlen",
    "+type",
    "+zadd",
    "+zcard",
    "+zcount",
    "+zincrby",
    "+zrange",
    "+zrangebyscore",
    "+zrem",
    "+zscore",
];

/// Commands of newer servers, which older ones refuse in a rule (`Unknown command`): drop
/// those the server does not know. Sharded pub/sub (Redis and Valkey 7.0+), and `CLIENT
/// SETINFO` (7.2+, which redis-rs sends when it connects and ignores if refused; a refusal
/// still lands in `ACL LOG`).
pub const NEWER_COMMANDS: &[&str] = &[
    "+ssubscribe",
    "+sunsubscribe",
    "+spublish",
    "+pubsub|shardnumsub",
    "+client|setinfo",
];

/// The key and channel patterns of a client whose names all start with `prefix` (its
/// `key_prefix`, e.g. `app:`): the names themselves, the keys the crate and Redisson derive
/// from them (`redisson_lock__channel:{app:x}`, or `redisson_lock__channel:app:{x}` for a name
/// with a hash tag, `{app:x}:timeout`, ...; a script names its channel among its keys), and
/// the channels.
pub fn patterns(prefix: &str) -> Vec<String> {
    vec![
        format!("~{prefix}*"),
        format!("~{{{prefix}*"),
        format!("~redisson_*{prefix}*"),
        format!("&redisson_*{prefix}*"),
    ]
}

/// The whole rule list for a user with `prefix`: `resetkeys resetchannels -@all`, the
/// patterns, then the commands, with [`NEWER_COMMANDS`] when `newer` (for a server that has
/// them all; otherwise drop the ones it refuses).
pub fn rules(prefix: &str, newer: bool) -> Vec<String> {
    let mut rules: Vec<String> = ["resetkeys", "resetchannels", "-@all"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    rules.extend(patterns(prefix));
    rules.extend(COMMANDS.iter().map(|s| (*s).to_owned()));
    if newer {
        rules.extend(NEWER_COMMANDS.iter().map(|s| (*s).to_owned()));
    }
    rules
}
