-- fenced/acquire.lua: take or re-enter a fenced lock, and draw its next fencing token.
-- Mirrors Redisson RedissonFencedLock's token-returning acquire (docs/LAYOUT.md §6.2): the
-- reentrant lock's acquire (§2.2), plus INCR of the token counter on every grant, re-entries
-- included.
--
-- KEYS[1] = lock name N (a hash: field = holder "<client uuid>:<owner id>", value = hold count)
-- KEYS[2] = token counter redisson_lock_token:{N} (a string, no TTL)
-- ARGV[1] = lease in milliseconds (explicit lease, or the watchdog timeout)
-- ARGV[2] = holder field F
-- ARGV[3] = (optional) the hold count of F the client expects (docs/LAYOUT.md §12): when
--           F's count differs, nothing is done and the reply is 'held:<count>'
--
-- Reply: {-1, token} when acquired (first hold or re-entry; the key's TTL is reset to ARGV[1],
--        the counter incremented to token); {PTTL of N, -1} when held by another (-1 = no
--        expiry); 'held:<count>' as above (nothing changed).
local expected = tonumber(ARGV[3])
if redis.call('exists', KEYS[1]) == 0 then
    if expected ~= nil and expected ~= 0 then
        return 'held:0'
    end
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {-1, token}
end
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0
if expected ~= nil and held ~= expected then
    return 'held:' .. held
end
if held > 0 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}
