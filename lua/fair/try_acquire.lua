-- fair/try_acquire.lua: take or re-enter a fair lock if it is free and it is F's turn; never
-- joins the waiter queue.
-- Mirrors Redisson RedissonFairLock.tryLockInnerAsync, non-waiting form (docs/LAYOUT.md §4.5:
-- RedisCommands.EVAL_NULL_BOOLEAN, used by tryLock() without a wait).
-- Runs after fair/purge.lua.
--
-- KEYS[1] = lock name N
-- KEYS[2] = waiter queue redisson_lock_queue:{N}
-- KEYS[3] = waiter deadlines redisson_lock_timeout:{N}
-- ARGV[1] = now, the client's wall clock in epoch milliseconds (read by the purge)
-- ARGV[2] = lease in milliseconds (explicit lease, or the watchdog timeout)
-- ARGV[3] = holder field F
-- ARGV[4] = slot in milliseconds by which the other waiters' deadlines move earlier when F
--           takes the lock (fair_wait_timeout, as Redisson's tryLock() uses)
-- ARGV[5] = (optional) the hold count of F the client expects (docs/LAYOUT.md §12): when
--           F's count differs, nothing else is done and the reply is 'held:<count>'
--
-- Reply: nil when acquired (free and F's turn: F left the queue if it was in it, every other
--        deadline moved ARGV[4] earlier; or re-entry), the key's TTL reset to ARGV[2];
--        1 when not acquired (Redisson's "false"), nothing changed beyond the purge;
--        'held:<count>' as above.
if ARGV[5] then
    local held = tonumber(redis.call('hget', KEYS[1], ARGV[3])) or 0
    if held ~= tonumber(ARGV[5]) then
        return 'held:' .. held
    end
end
if redis.call('exists', KEYS[1]) == 0
    and (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[3]) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[3])
    local waiters = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #waiters do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), waiters[i])
    end
    redis.call('hset', KEYS[1], ARGV[3], 1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], 1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return nil
end
return 1
