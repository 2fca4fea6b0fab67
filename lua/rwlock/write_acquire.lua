-- rwlock/write_acquire.lua: take or re-enter the write half of a read-write lock.
-- Mirrors Redisson RedissonWriteLock.tryLockInnerAsync (docs/LAYOUT.md §5.4), plus one
-- read-only check of ours before the PTTL reply: a refused upgrade.
--
-- KEYS[1] = lock name N
-- ARGV[1] = lease in milliseconds (explicit lease, or the watchdog timeout)
-- ARGV[2] = writer field F:write ("<client uuid>:<owner id>:write")
-- ARGV[3] = the same owner's reader field F ("<client uuid>:<owner id>")
-- ARGV[4] = (optional) the hold count of F:write the client expects (docs/LAYOUT.md §12): when
--           F:write's count differs, nothing is done and the reply is 'held:<count>'
--
-- Reply: nil when acquired: a free lock becomes mode write with F:write = 1 and TTL ARGV[1];
--        a re-entry (mode write, F:write present) adds one hold and ADDS ARGV[1] to the
--        remaining TTL (PEXPIRE N, PTTL N + ARGV[1]), as Redisson does since 2.10.5.
--        "upgrade" when F holds the read lock without holding the write lock: Redisson has no
--        upgrade, and its reader would wait on itself until its read lease ends. Nothing is
--        changed; Redisson would reply the PTTL here.
--        Otherwise the PTTL of N in milliseconds (the waiter's sleep hint; -1 = no expiry);
--        'held:<count>' as above (nothing changed).
if ARGV[4] then
    local held = tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0
    if held ~= tonumber(ARGV[4]) then
        return 'held:' .. held
    end
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local remaining = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], remaining + ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return 'upgrade'
end
return redis.call('pttl', KEYS[1])
