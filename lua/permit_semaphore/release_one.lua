-- permit_semaphore/release_one.lua: release one permit by its id.
-- Mirrors Redisson RedissonPermitExpirableSemaphore.tryReleaseAsync(permitId)
-- (docs/LAYOUT.md §6.5).
--
-- KEYS[1] = semaphore name N
-- KEYS[2] = channel redisson_sc:{N}
-- KEYS[3] = {N}:timeout
-- ARGV[1] = the permit id (16 raw bytes)
-- ARGV[2] = now (epoch ms)
-- ARGV[3] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: 1 = released (the id removed, N incremented, its new value published);
--        0 = the id is not there (nothing changed), or it had already expired (it is then
--            removed and its permit returned all the same, as Redisson does).
local t1 = redis.call('type', KEYS[1]).ok
local t3 = redis.call('type', KEYS[3]).ok
if (t1 ~= 'none' and t1 ~= 'string') or (t3 ~= 'none' and t3 ~= 'zset') then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local expire = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then
    return 0
end
local value = redis.call('incrby', KEYS[1], 1)
for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, KEYS[2], value) end
if tonumber(expire) <= tonumber(ARGV[2]) then
    return 0
end
return 1
