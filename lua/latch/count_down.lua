-- latch/count_down.lua: count a latch down by one; open it at zero.
-- Mirrors Redisson RedissonCountDownLatch.countDownAsync (docs/LAYOUT.md §6.6).
--
-- KEYS[1] = latch name N
-- KEYS[2] = channel redisson_countdownlatch__channel__{N}
-- ARGV[1] = message '0' (Redisson CountDownLatchPubSub.ZERO_COUNT_MESSAGE: opens the latch)
-- ARGV[2] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: the count after (N is deleted when it reaches 0 or below; ARGV[1] is published only
--        when it reaches exactly 0: counting down a missing latch gives -1, publishes nothing).
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
end
return v
