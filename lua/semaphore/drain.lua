-- semaphore/drain.lua: take every available permit.
-- Mirrors Redisson RedissonSemaphore.drainPermitsAsync (docs/LAYOUT.md §6.4).
--
-- KEYS[1] = semaphore name N
--
-- Reply: the permits that were available (0 when N is missing; N is then left missing);
--        N is set to 0 otherwise. Nothing is published.
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
redis.call('set', KEYS[1], 0)
return tonumber(value)
