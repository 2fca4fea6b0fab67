-- permit_semaphore/acquire.lua: take permits of a permit-expirable semaphore, one id each.
-- Mirrors Redisson RedissonPermitExpirableSemaphore.tryAcquireAsync(ids, timeoutDate)
-- (docs/LAYOUT.md §6.5), with a type check first so a wrong key type changes nothing.
--
-- KEYS[1] = semaphore name N (a string: the available permits)
-- KEYS[2] = {N}:timeout (a sorted set: one member per acquired permit, the raw 16-byte id,
--           scored by its expiry in epoch ms, or ARGV[4] for a permit without lease)
-- KEYS[3] = channel redisson_sc:{N}
-- ARGV[1] = permits wanted n (>= 1), also how many expired permits to reclaim first
-- ARGV[2] = the new permits' expiry (epoch ms) or ARGV[4]
-- ARGV[3] = now (epoch ms)
-- ARGV[4] = 922337203685477, the score of a permit without lease (Redisson's nonExpirableTimeout)
-- ARGV[5] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
-- ARGV[6..5+n] = the new permit ids (16 raw bytes each)
--
-- Reply: 'OK' = acquired (N decremented by n, the ids added to KEYS[2], which takes N's TTL);
--        ':<score>' = not enough permits; the nearest expiry of an acquired permit (the
--                     waiter's hint);
--        nil = not enough permits, and none of the acquired ones expires.
local t1 = redis.call('type', KEYS[1]).ok
local t2 = redis.call('type', KEYS[2]).ok
if (t1 ~= 'none' and t1 ~= 'string') or (t2 ~= 'none' and t2 ~= 'zset') then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        for verb in string.gmatch(ARGV[5], '%S+') do redis.call(verb, KEYS[3], value) end
    end
end
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    for i = 6, #ARGV, 1 do
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return 'OK'
end
local nearest = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if nearest[1] ~= nil and nearest[2] ~= ARGV[4] then
    return ':' .. tostring(nearest[2])
end
return nil
