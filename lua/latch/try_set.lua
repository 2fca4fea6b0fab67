-- latch/try_set.lua: set the count of a count-down latch that does not exist yet.
-- Mirrors Redisson RedissonCountDownLatch.trySetCountAsync (docs/LAYOUT.md §6.6).
--
-- KEYS[1] = latch name N (a string: the count)
-- KEYS[2] = channel redisson_countdownlatch__channel__{N}
-- ARGV[1] = message '1' (Redisson CountDownLatchPubSub.NEW_COUNT_MESSAGE: closes the latch)
-- ARGV[2] = the count (>= 1)
-- ARGV[3] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- A key of another type at N is an error (WRONGTYPE), and nothing is changed.
--
-- Reply: 1 = set (ARGV[1] published); 0 = N exists (nothing changed).
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
    return 1
end
return 0
