-- fair/acquire_failed.lua: a waiter leaves a fair lock's queue without the lock.
-- Mirrors Redisson RedissonFairLock.acquireFailedAsync (docs/LAYOUT.md §4.6), plus one step of
-- ours (§12): when the waiter leaving was the head and the lock is free, the new head is woken,
-- as an unlock would wake it; Redisson's cleanup leaves it asleep until its hint runs out.
--
-- KEYS[1] = waiter queue redisson_lock_queue:{N}
-- KEYS[2] = waiter deadlines redisson_lock_timeout:{N}
-- KEYS[3] = (optional) lock name N
-- KEYS[4] = (optional) unlock channel prefix redisson_lock__channel:{N}; a head H is woken on
--           KEYS[4] .. ':' .. H
-- ARGV[1] = holder field F of the waiter leaving
-- ARGV[2] = that waiter's slot in milliseconds (as its acquire passed it)
-- ARGV[3] = (with KEYS[3]) unlock message ("0")
-- ARGV[4] = (with KEYS[3]) publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: 0, always. Effect: every waiter queued after F has its deadline moved ARGV[2]
--        earlier (each moves up one place), then F is removed from the zset and the list.
--        When F is not queued nothing changes. With KEYS[3]: if F was the head and N does not
--        exist, ARGV[3] is published on the new head's channel (if there is a new head).
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
if KEYS[3] and i == 1 and #queue > 1 and redis.call('exists', KEYS[3]) == 0 then
    for verb in string.gmatch(ARGV[4], '%S+') do redis.call(verb, KEYS[4] .. ':' .. queue[2], ARGV[3]) end
end
return 0
