-- lock/unlock.lua: release one hold of a reentrant lock.
-- Mirrors Redisson RedissonLock.unlockInnerAsync (docs/LAYOUT.md §2.3), without the
-- unlock latch: a release of unknown outcome is cut off and resolved instead (§12).
--
-- KEYS[1] = lock name N
-- KEYS[2] = unlock channel redisson_lock__channel:{N}
-- ARGV[1] = unlock message ("0", Redisson LockPubSub.UNLOCK_MESSAGE)
-- ARGV[2] = lease in milliseconds re-applied while holds remain
-- ARGV[3] = holder field F
-- ARGV[4] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: nil = F does not hold N (nothing changed);
--        0   = one hold released, others remain (TTL reset to ARGV[2]);
--        1   = last hold released: N deleted and ARGV[1] published on KEYS[2].
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if remaining > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
for verb in string.gmatch(ARGV[4], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
return 1
