-- fair/purge.lua: drop stale waiters from the head of a fair lock's queue.
-- Mirrors the "remove stale threads" loop that Redisson RedissonFairLock puts at the start of
-- tryLockInnerAsync, unlockInnerAsync and forceUnlockAsync (docs/LAYOUT.md §4.3).
--
-- Not a script on its own: src/lock/fair.rs prepends this file to fair/acquire.lua,
-- fair/try_acquire.lua, fair/unlock.lua and fair/force_unlock.lua, which all pass:
-- KEYS[1] = lock name N (a hash: field = holder, value = hold count)
-- KEYS[2] = waiter queue redisson_lock_queue:{N} (a list of holder fields, head first)
-- KEYS[3] = waiter deadlines redisson_lock_timeout:{N} (a zset: holder field -> epoch ms)
-- ARGV[1] = now: the calling client's wall clock, epoch milliseconds
--
-- Reply: none (it never returns). Effect: while the queue's head has a deadline <= now, that
-- head is removed from both the zset and the list. A head without a deadline stops the loop
-- (Redisson 3.32+); no other deadline changes.
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline ~= false and tonumber(deadline) <= tonumber(ARGV[1]) then
        redis.call('zrem', KEYS[3], head)
        redis.call('lpop', KEYS[2])
    else
        break
    end
end
