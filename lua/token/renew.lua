-- token/renew.lua: the watchdog's batched lease renewal of plain token locks
-- (compare-and-PEXPIRE).
-- Not a Redisson structure; the plain SET NX lock's extension, `if GET == token then PEXPIRE`.
--
-- KEYS[1..n]  = lock names
-- ARGV[1]     = lease in milliseconds (the watchdog timeout)
-- ARGV[i + 1] = token expected in KEYS[i]
--
-- Reply: an array of n integers: 1 = KEYS[i] still holds ARGV[i + 1] and its TTL was reset to
--        ARGV[1]; 0 = the holder is gone (expired, deleted, taken by another token).
local renewed = {}
for i = 1, #KEYS do
    -- pcall: a key replaced by another type counts as gone instead of failing the batch.
    if redis.pcall('get', KEYS[i]) == ARGV[i + 1] then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
