-- lock/renew.lua: the watchdog's batched lease renewal.
-- Mirrors Redisson's LockRenewalScheduler / LockTask script (docs/LAYOUT.md §1.9).
--
-- KEYS[1..n]  = lock names
-- ARGV[1]     = lease in milliseconds (the watchdog timeout)
-- ARGV[i + 1] = holder field expected in KEYS[i]
--
-- Reply: an array of n integers: 1 = KEYS[i] still held by ARGV[i + 1] and its TTL reset to
--        ARGV[1]; 0 = the holder is gone (lock expired, force-unlocked or taken over).
local renewed = {}
for i = 1, #KEYS do
    -- pcall: a key replaced by another type counts as lost instead of failing the batch.
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
