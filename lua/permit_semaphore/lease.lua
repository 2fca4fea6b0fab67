-- permit_semaphore/lease.lua: reclaim expired permits, then read or update one permit's lease.
-- Mirrors Redisson RedissonPermitExpirableSemaphore.getLeaseTimeAsync and
-- updateLeaseTimeAsync (docs/LAYOUT.md §6.5).
--
-- KEYS[1] = semaphore name N
-- KEYS[2] = {N}:timeout
-- KEYS[3] = channel redisson_sc:{N}
-- ARGV[1] = the permit id (16 raw bytes)
-- ARGV[2] = now (epoch ms)
-- ARGV[3] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
-- ARGV[4] = 922337203685477 (the score of a permit without lease)
-- ARGV[5] = (optional) the permit's new expiry (epoch ms, or ARGV[4]): update instead of read
--
-- Reply, read:   -2 = the id is not there (expired ones are reclaimed first);
--                -1 = no lease; otherwise the ms left of the lease (>= 0).
-- Reply, update: 1 = updated; 0 = the id is not there (nothing changed but the reclaim).
local t1 = redis.call('type', KEYS[1]).ok
local t2 = redis.call('type', KEYS[2]).ok
if (t1 ~= 'none' and t1 ~= 'string') or (t2 ~= 'none' and t2 ~= 'zset') then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[2], 'limit', 0, -1)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, KEYS[3], value) end
    end
end
local score = redis.call('zscore', KEYS[2], ARGV[1])
if ARGV[5] ~= nil then
    if score == false then
        return 0
    end
    redis.call('zadd', KEYS[2], ARGV[5], ARGV[1])
    return 1
end
if score == false then
    return -2
end
if tonumber(score) == tonumber(ARGV[4]) then
    return -1
end
return tonumber(score) - tonumber(ARGV[2])
