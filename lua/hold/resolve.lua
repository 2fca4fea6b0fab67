-- hold/resolve.lua: settle an acquire or release whose reply never came (docs/LAYOUT.md §12).
-- This crate's own script; Redisson has no counterpart (its RedissonBaseLock unlock latch,
-- §1.8, plays a similar part for unlock retries only).
--
-- KEYS[1] = lock name N (a hash: field = holder, value = hold count)
-- KEYS[2] = the fence key of the request in doubt, redisson_sync_fence:{N}:<request id>
-- ARGV[1] = holder field F the request was for
-- ARGV[2] = TTL of the fence in milliseconds (longer than the request could still be in
--           flight)
-- ARGV[3] = a hold count of F that proves the request ran (an acquire: the count it was sent
--           against plus one; a release: that count minus one, while it is not 0, since a
--           lease running out also leaves 0), or -1 when no count would prove it
--
-- Reply: the hold count of F in N (0 when F or N is absent, or N is not a hash). Effect: the
--        fence is set, so the request, if it arrives later, does nothing; the count read in
--        the same step tells the client whether the request ran before. When the count is
--        ARGV[3] the request ran, and it runs only once: the fence is deleted again; otherwise
--        it stays until its TTL.
redis.call('set', KEYS[2], 1, 'px', ARGV[2])
local held = redis.pcall('hget', KEYS[1], ARGV[1])
if type(held) == 'table' then
    held = 0
end
held = tonumber(held) or 0
if held == tonumber(ARGV[3]) then
    redis.call('del', KEYS[2])
end
return held
