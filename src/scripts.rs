//! The Lua scripts, one per file under `lua/`, loaded once and run with EVALSHA (redis-rs
//! `Script` loads them and retries on NOSCRIPT). Each file's header gives its KEYS, ARGV,
//! replies and the Redisson method it matches.

use std::sync::LazyLock;

use redis::Script;

/// `lua/lock/acquire.lua`: RedissonLock.tryLockInnerAsync. Reply: nil (acquired) or PTTL.
pub(crate) static LOCK_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/lock/acquire.lua")));

/// `lua/lock/unlock.lua`: RedissonLock.unlockInnerAsync. Reply: nil, 0 or 1.
pub(crate) static LOCK_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/lock/unlock.lua")));

/// `lua/lock/force_unlock.lua`: RedissonLock.forceUnlockAsync. Reply: 1 or 0.
pub(crate) static LOCK_FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/lock/force_unlock.lua")));

/// `lua/lock/renew.lua`: the watchdog's batched renewal. Reply: one 0/1 per key.
pub(crate) static LOCK_RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/lock/renew.lua")));

/// `lua/rwlock/renew_read.lua`: the watchdog's batched renewal of read holds (Redisson's
/// `ReadLockTask`, 4.4+). Reply: one 0/1 per key.
pub(crate) static RWLOCK_RENEW_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/rwlock/renew_read.lua")));

/// A fair-lock script that starts with the stale-waiter purge (`lua/fair/purge.lua`, §4.3),
/// as every Redisson fair-lock script but `acquireFailed` does.
macro_rules! fair_script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../lua/fair/purge.lua"),
                include_str!(concat!("../lua/fair/", $file))
            ))
        })
    };
}

/// `lua/fair/purge.lua` + `lua/fair/acquire.lua`: RedissonFairLock.tryLockInnerAsync, waiting
/// form. Reply: nil (acquired) or a sleep hint in ms (the queue position's ttl when enqueued).
pub(crate) static FAIR_ACQUIRE: LazyLock<Script> = fair_script!("acquire.lua");

/// `lua/fair/purge.lua` + `lua/fair/try_acquire.lua`: RedissonFairLock.tryLockInnerAsync,
/// non-waiting form (never enqueues). Reply: nil (acquired) or 1.
pub(crate) static FAIR_TRY_ACQUIRE: LazyLock<Script> = fair_script!("try_acquire.lua");

/// `lua/fair/purge.lua` + `lua/fair/unlock.lua`: RedissonFairLock.unlockInnerAsync. Reply: nil
/// (not held), 0 (still held), 1 (released) or 2 (the lock was gone).
pub(crate) static FAIR_UNLOCK: LazyLock<Script> = fair_script!("unlock.lua");

/// `lua/fair/purge.lua` + `lua/fair/force_unlock.lua`: RedissonFairLock.forceUnlockAsync.
/// Reply: 1 or 0.
pub(crate) static FAIR_FORCE_UNLOCK: LazyLock<Script> = fair_script!("force_unlock.lua");

/// `lua/fair/acquire_failed.lua`: RedissonFairLock.acquireFailedAsync, a waiter leaving the
/// queue. Reply: 0.
pub(crate) static FAIR_ACQUIRE_FAILED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/fair/acquire_failed.lua")));

/// `lua/rwlock/read_acquire.lua`: RedissonReadLock.tryLockInnerAsync. Reply: nil (acquired) or
/// PTTL.
pub(crate) static RWLOCK_READ_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/rwlock/read_acquire.lua")));

/// `lua/rwlock/read_unlock.lua`: RedissonReadLock.unlockInnerAsync. Reply: nil, 0 or 1.
pub(crate) static RWLOCK_READ_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/rwlock/read_unlock.lua")));

/// `lua/rwlock/read_is_locked.lua`: RedissonReadLock.isLocked. Reply: 1 or 0.
pub(crate) static RWLOCK_READ_IS_LOCKED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/rwlock/read_is_locked.lua")));

/// `lua/rwlock/write_acquire.lua`: RedissonWriteLock.tryLockInnerAsync, plus a refused
/// upgrade. Reply: nil (acquired), PTTL, or "upgrade".
pub(crate) static RWLOCK_WRITE_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/rwlock/write_acquire.lua")));

/// `lua/rwlock/write_unlock.lua`: RedissonWriteLock.unlockInnerAsync. Reply: nil, 0 or 1.
pub(crate) static RWLOCK_WRITE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/rwlock/write_unlock.lua")));

/// `lua/rwlock/force_unlock.lua`: RedissonReadLock / RedissonWriteLock.forceUnlockAsync.
/// Reply: 1 or 0.
pub(crate) static RWLOCK_FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/rwlock/force_unlock.lua")));
