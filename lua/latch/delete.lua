-- latch/delete.lua: delete a latch and tell waiters it is reset.
-- Mirrors Redisson RedissonCountDownLatch.deleteAsync (docs/LAYOUT.md §6.6).
--
-- KEYS[1] = latch name N
-- KEYS[2] = channel redisson_countdownlatch__channel__{N}
-- ARGV[1] = message '1' (NEW_COUNT_MESSAGE)
-- ARGV[2] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- A key of another type at N is an error (WRONGTYPE), and nothing is changed.
--
-- Reply: 1 = deleted (ARGV[1] published); 0 = there was no latch.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if redis.call('del', KEYS[1]) == 1 then
    for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
    return 1
end
return 0
