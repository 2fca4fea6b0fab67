-- permit_semaphore/add.lua: add (or, negative, remove) available permits.
-- Mirrors Redisson RedissonPermitExpirableSemaphore.addPermitsAsync (docs/LAYOUT.md §6.5):
-- unlike RSemaphore's, it publishes the number added (only when positive), not the total.
--
-- KEYS[1] = semaphore name N
-- KEYS[2] = channel redisson_sc:{N}
-- ARGV[1] = permits to add (may be negative)
-- ARGV[2] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: the new number of available permits.
local value = redis.call('get', KEYS[1])
if value == false then
    value = 0
end
local updated = tonumber(value) + tonumber(ARGV[1])
redis.call('set', KEYS[1], updated)
if tonumber(ARGV[1]) > 0 then
    for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
end
return updated
