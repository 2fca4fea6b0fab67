-- rwlock/force_unlock.lua: delete a read-write lock whoever holds it, if it is in one mode.
-- Mirrors Redisson RedissonReadLock.forceUnlockAsync (ARGV[1] = "read", ARGV[2] = "0") and
-- RedissonWriteLock.forceUnlockAsync (ARGV[1] = "write", ARGV[2] = "1"), docs/LAYOUT.md §5.6.
-- Like Redisson, it leaves the readers' rwlock_timeout markers to expire.
--
-- KEYS[1] = lock name N
-- KEYS[2] = channel redisson_rwlock:{N}
-- ARGV[1] = the mode this half deletes: "read" or "write"
-- ARGV[2] = message: "0" (read half, wakes one waiter per client) or "1" (write half, wakes all)
-- ARGV[3] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: 1 = N was in mode ARGV[1] and was deleted (ARGV[2] published on KEYS[2]);
--        0 = N is absent or in the other mode (nothing changed).
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call('del', KEYS[1])
    for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, KEYS[2], ARGV[2]) end
    return 1
end
return 0
