-- lock/acquire.lua: take or re-enter a reentrant lock.
-- Mirrors Redisson RedissonLock.tryLockInnerAsync (REDISSON_LAYOUT.md §2.2).
--
-- KEYS[1] = lock name N (a hash: field = holder "<client uuid>:<owner id>", value = hold count)
-- ARGV[1] = lease in milliseconds (explicit lease, or the watchdog timeout)
-- ARGV[2] = holder field F
--
-- Reply: nil when acquired (first hold or re-entry; the key's TTL is reset to ARGV[1]),
--        otherwise the PTTL of N in milliseconds (the waiter's sleep hint; -1 = no expiry).
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
