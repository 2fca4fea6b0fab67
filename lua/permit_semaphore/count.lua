-- permit_semaphore/count.lua: reclaim expired permits, then count.
-- Mirrors Redisson RedissonPermitExpirableSemaphore.availablePermitsAsync, getPermitsAsync
-- and acquiredPermitsAsync (docs/LAYOUT.md §6.5): each reclaims every expired permit first.
--
-- KEYS[1] = semaphore name N
-- KEYS[2] = {N}:timeout
-- KEYS[3] = channel redisson_sc:{N}
-- ARGV[1] = now (epoch ms)
-- ARGV[2] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
-- ARGV[3] = what to count: 'available' (N, 0 when missing), 'acquired' (members of KEYS[2])
--           or 'total' (both; 0 when N is missing)
--
-- Reply: the count. Reclaimed permits are added to N, and its new value published when > 0.
local t1 = redis.call('type', KEYS[1]).ok
local t2 = redis.call('type', KEYS[2]).ok
if (t1 ~= 'none' and t1 ~= 'string') or (t2 ~= 'none' and t2 ~= 'zset') then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[3], value) end
    end
end
local available = redis.call('get', KEYS[1])
local acquired = redis.call('zcount', KEYS[2], 0, '+inf')
if ARGV[3] == 'acquired' then
    return acquired
end
if available == false then
    return 0
end
if ARGV[3] == 'total' then
    return tonumber(available) + acquired
end
return tonumber(available)
