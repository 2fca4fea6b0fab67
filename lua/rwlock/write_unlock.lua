-- rwlock/write_unlock.lua: release one write hold of a read-write lock.
-- Mirrors Redisson RedissonWriteLock.unlockInnerAsync (docs/LAYOUT.md §5.5), 3.44+ replies,
-- without the unlock latch: a release of unknown outcome is cut off and resolved instead (§12).
--
-- KEYS[1] = lock name N
-- KEYS[2] = channel redisson_rwlock:{N}
-- ARGV[1] = unlock message ("1", Redisson LockPubSub.READ_UNLOCK_MESSAGE: wakes every waiter)
-- ARGV[2] = lease in milliseconds re-applied while write holds remain
-- ARGV[3] = writer field F:write
-- ARGV[4] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: nil = N does not exist (ARGV[1] is still published on KEYS[2], as Redisson does), or
--              N is in mode read, or F:write does not hold it (nothing changed);
--        0   = one write hold released, others remain (TTL reset to ARGV[2]);
--        1   = the last write hold released: N deleted and ARGV[1] published on KEYS[2], or,
--              when F still holds read locks (a downgrade), mode set to read and nothing
--              published.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    for verb in string.gmatch(ARGV[4], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
    return nil
end
if mode == 'write' then
    if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
        return nil
    end
    local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
    if count > 0 then
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 0
    end
    redis.call('hdel', KEYS[1], ARGV[3])
    if redis.call('hlen', KEYS[1]) == 1 then
        redis.call('del', KEYS[1])
        for verb in string.gmatch(ARGV[4], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
    else
        redis.call('hset', KEYS[1], 'mode', 'read')
    end
    return 1
end
return nil
