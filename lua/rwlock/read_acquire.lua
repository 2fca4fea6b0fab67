-- rwlock/read_acquire.lua: take or re-enter the read half of a read-write lock.
-- Mirrors Redisson RedissonReadLock.tryLockInnerAsync (docs/LAYOUT.md §5.2).
--
-- KEYS[1] = lock name N (a hash: "mode" = read | write, reader fields "<client uuid>:<owner id>"
--           and writer fields "<client uuid>:<owner id>:write", values = hold counts)
-- KEYS[2] = the reader's marker prefix, timeoutPrefix(F) = "{N}:F:rwlock_timeout"
--           ("N:F:rwlock_timeout" when N contains "{"); the k-th read hold of F has the marker
--           key "<prefix>:k" (a string "1" whose TTL is that hold's lease)
-- ARGV[1] = lease in milliseconds (explicit lease, or the watchdog timeout)
-- ARGV[2] = reader field F
-- ARGV[3] = F's writer field, F .. ":write"
-- ARGV[4] = (optional) the hold count of F the client expects (docs/LAYOUT.md §12): when
--           F's count differs, nothing is done and the reply is 'held:<count>'
--
-- Reply: nil when acquired: a free lock becomes mode read; a lock in mode read, or in mode
--        write held by F's own writer field (a writer taking read), is joined. The hold count of
--        F goes up by one to k, the marker <prefix>:k gets ARGV[1] as TTL, and N's TTL becomes
--        max(PTTL N, ARGV[1]).
--        Otherwise the PTTL of N in milliseconds (a writer of another owner holds it; the
--        waiter's sleep hint, -1 = no expiry). Readers join whenever the mode is read, even
--        while writers wait: there is no writer preference.
--        'held:<count>' as above (nothing changed).
if ARGV[4] then
    local held = tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0
    if held ~= tonumber(ARGV[4]) then
        return 'held:' .. held
    end
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1)
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local k = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local marker = KEYS[2] .. ':' .. k
    redis.call('set', marker, 1)
    redis.call('pexpire', marker, ARGV[1])
    local remaining = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(remaining, tonumber(ARGV[1])))
    return nil
end
return redis.call('pttl', KEYS[1])
