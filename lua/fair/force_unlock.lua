-- fair/force_unlock.lua: delete a fair lock whoever holds it, and wake the queue's head.
-- Mirrors Redisson RedissonFairLock.forceUnlockAsync (docs/LAYOUT.md §4.8).
-- Runs after fair/purge.lua.
--
-- KEYS[1] = lock name N
-- KEYS[2] = waiter queue redisson_lock_queue:{N}
-- KEYS[3] = waiter deadlines redisson_lock_timeout:{N}
-- KEYS[4] = unlock channel prefix redisson_lock__channel:{N} (the head H is woken on
--           KEYS[4] .. ':' .. H)
-- ARGV[1] = now, the client's wall clock in epoch milliseconds (read by the purge)
-- ARGV[2] = unlock message ("0")
-- ARGV[3] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: 1 = N existed and was deleted (ARGV[2] published on the head's channel, if there is
--        a head); 0 = N did not exist (nothing published).
if redis.call('del', KEYS[1]) == 1 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, KEYS[4] .. ':' .. head, ARGV[2]) end
    end
    return 1
end
return 0
