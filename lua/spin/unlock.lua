-- spin/unlock.lua: release one hold of a spin lock; publishes nothing.
-- Mirrors Redisson RedissonSpinLock.unlockInnerAsync (docs/LAYOUT.md §6.1): the reentrant
-- lock's unlock (§2.3) without the message, since spin waiters poll.
--
-- KEYS[1] = lock name N
-- ARGV[1] = lease in milliseconds re-applied while holds remain
-- ARGV[2] = holder field F
--
-- Reply: nil = F does not hold N (nothing changed);
--        0   = one hold released, others remain (TTL reset to ARGV[1]);
--        1   = last hold released: N deleted.
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if remaining > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
redis.call('del', KEYS[1])
return 1
