-- rwlock/renew_read.lua: the watchdog's batched lease renewal of read holds.
-- Mirrors Redisson's ReadLockTask, 4.4.0+ semantics (docs/LAYOUT.md §5.8): a client renews
-- only its own readers' timeout markers, and the hash.
--
-- KEYS[1..n]      = read-write lock names N
-- ARGV[1]         = lease in milliseconds (the watchdog timeout)
-- ARGV[2i]        = reader field F held in KEYS[i] ("<client uuid>:<owner id>")
-- ARGV[2i + 1]    = F's marker prefix, timeoutPrefix(F) = "{N}:F:rwlock_timeout"
--                   (or "N:F:rwlock_timeout" when N contains "{")
--
-- Reply: an array of n integers: 1 = F still holds KEYS[i] (its markers <prefix>:1..count and
--        KEYS[i] got ARGV[1] as TTL); 0 = F holds no read lock there any more.
local renewed = {}
for i = 1, #KEYS do
    -- pcall: a key replaced by another type counts as lost instead of failing the batch.
    local count = redis.pcall('hget', KEYS[i], ARGV[2 * i])
    count = tonumber(count)
    if count ~= nil and count > 0 then
        for k = 1, count do
            redis.call('pexpire', ARGV[2 * i + 1] .. ':' .. k, ARGV[1])
        end
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
