-- lock/acquire.lua: take or re-enter a reentrant lock.
-- Mirrors Redisson RedissonLock.tryLockInnerAsync (docs/LAYOUT.md §2.2).
--
-- KEYS[1] = lock name N (a hash: field = holder "<client uuid>:<owner id>", value = hold count)
-- ARGV[1] = lease in milliseconds (explicit lease, or the watchdog timeout)
-- ARGV[2] = holder field F
-- ARGV[3] = (optional) the hold count of F the client expects (docs/LAYOUT.md §12): when
--           F's count differs, nothing is done and the reply is 'held:<count>'
--
-- Reply: nil when acquired (first hold or re-entry; the key's TTL is reset to ARGV[1]),
--        otherwise the PTTL of N in milliseconds (the waiter's sleep hint; -1 = no expiry);
--        'held:<count>' as above (nothing changed).
local expected = tonumber(ARGV[3])
if redis.call('exists', KEYS[1]) == 0 then
    if expected ~= nil and expected ~= 0 then
        return 'held:0'
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0
if expected ~= nil and held ~= expected then
    return 'held:' .. held
end
if held > 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
