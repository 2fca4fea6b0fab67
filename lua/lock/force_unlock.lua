-- lock/force_unlock.lua: delete a lock whoever holds it, and wake a waiter.
-- Mirrors Redisson RedissonLock.forceUnlockAsync (docs/LAYOUT.md §2.4).
--
-- KEYS[1] = lock name N
-- KEYS[2] = unlock channel redisson_lock__channel:{N}
-- ARGV[1] = unlock message ("0")
-- ARGV[2] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
--
-- Reply: 1 = N existed and was deleted (ARGV[1] published on KEYS[2]); 0 = N did not exist.
if redis.call('del', KEYS[1]) == 1 then
    for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[2], ARGV[1]) end
    return 1
end
return 0
