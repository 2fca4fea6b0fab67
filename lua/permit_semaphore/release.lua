-- permit_semaphore/release.lua: release several permits by id, all or nothing.
-- Mirrors Redisson RedissonPermitExpirableSemaphore.tryReleaseAsync(permitsIds)
-- (docs/LAYOUT.md §6.5, 3.41.0+ semantics).
--
-- KEYS[1] = semaphore name N
-- KEYS[2] = channel redisson_sc:{N}
-- KEYS[3] = {N}:timeout
-- ARGV[1] = the number of ids
-- ARGV[2] = now (epoch ms)
-- ARGV[3] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
-- ARGV[4..] = the permit ids (16 raw bytes each)
--
-- Reply: 0 = some id is missing or expired (nothing changed);
--        otherwise the number of permits released: expired permits are reclaimed first,
--        then the ids removed, N incremented by their number and that number published.
local t1 = redis.call('type', KEYS[1]).ok
local t3 = redis.call('type', KEYS[3]).ok
if (t1 ~= 'none' and t1 ~= 'string') or (t3 ~= 'none' and t3 ~= 'zset') then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
for i = 4, #ARGV, 1 do
    local expire = redis.call('zscore', KEYS[3], ARGV[i])
    if expire == false or tonumber(expire) <= tonumber(ARGV[2]) then
        return 0
    end
end
local expired = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1)
if #expired > 0 then
    redis.call('zrem', KEYS[3], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, KEYS[2], value) end
    end
end
local ids = {}
for i = 4, #ARGV, 1 do
    table.insert(ids, ARGV[i])
end
local removed = redis.call('zrem', KEYS[3], unpack(ids))
redis.call('incrby', KEYS[1], removed)
for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, KEYS[2], removed) end
return removed
