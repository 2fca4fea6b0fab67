-- semaphore/try_acquire.lua: take permits of a semaphore if enough are available.
-- Mirrors Redisson RedissonSemaphore.tryAcquireAsync0 (docs/LAYOUT.md §6.4), plus this crate's
-- grant marker (§12): evidence, for a reply that is lost, that this very request ran.
--
-- KEYS[1] = semaphore name N (a string: the available permits, a signed integer)
-- KEYS[2] = (optional) grant marker {N}:redisson_sync:grant:<request id>, set on a grant
-- ARGV[1] = permits wanted (>= 1)
-- ARGV[2] = (with KEYS[2]) how long the marker lives, in milliseconds
--
-- Reply: 1 = taken (N decremented by ARGV[1]; the marker set to ARGV[1] with TTL ARGV[2]);
--        0 = not enough available (nothing changed).
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    if KEYS[2] ~= nil then
        redis.call('set', KEYS[2], ARGV[1], 'px', ARGV[2])
    end
    return 1
end
return 0
