-- rwlock/read_unlock.lua: release one read hold of a read-write lock.
-- Mirrors Redisson RedissonReadLock.unlockInnerAsync (docs/LAYOUT.md §5.3), 3.44+ replies,
-- without the unlock latch: a release of unknown outcome is cut off and resolved instead (§12).
--
-- KEYS[1] = lock name N
-- KEYS[2] = channel redisson_rwlock:{N}
-- KEYS[3] = the reader's marker prefix, timeoutPrefix(F) = "{N}:F:rwlock_timeout"
-- KEYS[4] = keyPrefix, "{N}" ("N" when N contains "{"): any holder G's markers are
--           "<keyPrefix>:G:rwlock_timeout:k"
-- ARGV[1] = unlock message ("0", Redisson LockPubSub.UNLOCK_MESSAGE)
-- ARGV[2] = reader field F
-- ARGV[3] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: nil = N does not exist (ARGV[1] is still published on KEYS[2], as Redisson does), or
--              F holds no read lock in N (nothing changed);
--        0   = F's newest hold released (its marker <prefix>:count deleted) and the lock stays
--              held: by other readers, whose longest remaining marker TTL becomes N's TTL, or
--              by a writer (mode write);
--        1   = the lock is free: N deleted and ARGV[1] published on KEYS[2]. This is also how
--              readers of dead clients ("zombies", whose markers expired) are swept away.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count == 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (count + 1))
if redis.call('hlen', KEYS[1]) > 1 then
    local max_remaining = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        -- "mode" is skipped; writer fields have no markers and count as -2.
        local holds = tonumber(redis.call('hget', KEYS[1], field))
        if type(holds) == 'number' then
            for k = holds, 1, -1 do
                local remaining = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. k)
                max_remaining = math.max(remaining, max_remaining)
            end
        end
    end
    if max_remaining > 0 then
        redis.call('pexpire', KEYS[1], max_remaining)
        return 0
    end
    if mode == 'write' then
        return 0
    end
end
redis.call('del', KEYS[1])
for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
return 1
