-- semaphore/try_set.lua: set the permits of a semaphore that does not exist yet.
-- Mirrors Redisson RedissonSemaphore.trySetPermitsAsync, with and without a TTL
-- (docs/LAYOUT.md §6.4).
--
-- KEYS[1] = semaphore name N
-- KEYS[2] = channel redisson_sc:{N}
-- ARGV[1] = permits
-- ARGV[2] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
-- ARGV[3] = (optional) time to live of N in milliseconds
--
-- A key of another type at N is an error (WRONGTYPE), and nothing is changed.
--
-- Reply: 1 = set (ARGV[1] published on KEYS[2]); 0 = N exists (nothing changed).
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
if ARGV[3] ~= nil then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
else
    redis.call('set', KEYS[1], ARGV[1])
end
for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
return 1
