-- permit_semaphore/set.lua: make the semaphore's total (available + acquired) permits n.
-- Mirrors Redisson RedissonPermitExpirableSemaphore.setPermitsAsync (docs/LAYOUT.md §6.5).
--
-- KEYS[1] = semaphore name N
-- KEYS[2] = channel redisson_sc:{N}
-- KEYS[3] = {N}:timeout
-- ARGV[1] = the total permits n
-- ARGV[2] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: 1 = changed (n published on KEYS[2]); 0 = the total already was n (nothing changed).
local t1 = redis.call('type', KEYS[1]).ok
local t3 = redis.call('type', KEYS[3]).ok
if (t1 ~= 'none' and t1 ~= 'string') or (t3 ~= 'none' and t3 ~= 'zset') then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local available = redis.call('get', KEYS[1])
if available == false then
    redis.call('set', KEYS[1], ARGV[1])
    for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
    return 1
end
local acquired = redis.call('zcount', KEYS[3], 0, '+inf')
local total = acquired + tonumber(available)
if total == tonumber(ARGV[1]) then
    return 0
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
return 1
