-- lock/acquire.lua: take or re-enter a reentrant lock.
-- Mirrors Redisson RedissonLock.tryLockInnerAsync (docs/LAYOUT.md §2.2).
--
-- KEYS[1] = lock name N (a hash: field = holder "<client uuid>:<owner id>", value = hold count)
-- KEYS[2] = (optional) this request's fence key, redisson_sync_fence:{N}:<request id>
--           (docs/LAYOUT.md §12): when it exists the script does nothing and replies 'fenced'
-- ARGV[1] = lease in milliseconds (explicit lease, or the watchdog timeout)
-- ARGV[2] = holder field F
-- ARGV[3] = (optional) the hold count of F the client expects (docs/LAYOUT.md §12): when
--           F's count differs, nothing is done and the reply is 'held:<count>'
--
-- Reply: nil when acquired (first hold or re-entry; the key's TTL is reset to ARGV[1]),
--        otherwise the PTTL of N in milliseconds (the waiter's sleep hint; -1 = no expiry);
--        'fenced' or 'held:<count>' as above (nothing changed).
if KEYS[2] and redis.call('exists', KEYS[2]) == 1 then
    return 'fenced'
end
if ARGV[3] then
    local held = tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0
    if held ~= tonumber(ARGV[3]) then
        return 'held:' .. held
    end
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
