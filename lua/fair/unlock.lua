-- fair/unlock.lua: release one hold of a fair lock and wake the queue's head.
-- Mirrors Redisson RedissonFairLock.unlockInnerAsync (docs/LAYOUT.md §4.7), without the
-- unlock latch: a release of unknown outcome is cut off and resolved instead (§12).
-- Runs after fair/purge.lua, so the head woken is the first waiter still within its slot.
--
-- KEYS[1] = lock name N
-- KEYS[2] = waiter queue redisson_lock_queue:{N}
-- KEYS[3] = waiter deadlines redisson_lock_timeout:{N}
-- KEYS[4] = unlock channel prefix redisson_lock__channel:{N}; the head H is woken on
--           KEYS[4] .. ':' .. H, its own channel (nothing is published on KEYS[4] itself)
-- ARGV[1] = now, the client's wall clock in epoch milliseconds (read by the purge)
-- ARGV[2] = lease in milliseconds re-applied while holds remain
-- ARGV[3] = holder field F
-- ARGV[4] = unlock message ("0", Redisson LockPubSub.UNLOCK_MESSAGE)
-- ARGV[5] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: nil = N exists but F does not hold it (nothing changed);
--        0   = one hold released, others remain (TTL reset to ARGV[2]);
--        1   = last hold released: N deleted, ARGV[4] published on the head's channel;
--        2   = N did not exist (expired or force-unlocked): ARGV[4] published on the head's
--              channel. Redisson replies 1 here and reports success; this crate reports
--              NotHeld, with the same effect on Redis.
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        for verb in string.gmatch(ARGV[5], '%S+') do redis.call(verb, KEYS[4] .. ':' .. head, ARGV[4]) end
    end
    return 2
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if remaining > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
    for verb in string.gmatch(ARGV[5], '%S+') do redis.call(verb, KEYS[4] .. ':' .. head, ARGV[4]) end
end
return 1
