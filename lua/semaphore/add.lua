-- semaphore/add.lua: add (or, negative, remove) permits; clears any TTL.
-- Mirrors Redisson RedissonSemaphore.addPermitsAsync (docs/LAYOUT.md §6.4): a plain SET, so
-- a TTL set by try_set with a time to live is gone afterwards.
--
-- KEYS[1] = semaphore name N
-- KEYS[2] = channel redisson_sc:{N}
-- ARGV[1] = permits to add (may be negative)
-- ARGV[2] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: the new number of available permits (also published on KEYS[2]).
local value = redis.call('get', KEYS[1])
if value == false then
    value = 0
end
local updated = tonumber(value) + tonumber(ARGV[1])
redis.call('set', KEYS[1], updated)
for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[2], updated) end
return updated
