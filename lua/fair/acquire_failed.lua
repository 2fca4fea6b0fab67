-- fair/acquire_failed.lua: a waiter leaves a fair lock's queue without the lock.
-- Mirrors Redisson RedissonFairLock.acquireFailedAsync (REDISSON_LAYOUT.md §4.6).
--
-- KEYS[1] = waiter queue redisson_lock_queue:{N}
-- KEYS[2] = waiter deadlines redisson_lock_timeout:{N}
-- ARGV[1] = holder field F of the waiter leaving
-- ARGV[2] = that waiter's slot in milliseconds (as its acquire passed it)
--
-- Reply: 0, always. Effect: every waiter queued after F has its deadline moved ARGV[2]
--        earlier (each moves up one place), then F is removed from the zset and the list.
--        When F is not queued nothing changes.
local queue = redis.call('lrange', KEYS[1], 0, -1)
local i = 1
while i <= #queue and queue[i] ~= ARGV[1] do
    i = i + 1
end
for j = i + 1, #queue do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[j])
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
return 0
