-- fair/acquire.lua: take or re-enter a fair lock, or join (or stay in) its waiter queue.
-- Mirrors Redisson RedissonFairLock.tryLockInnerAsync, the waiting form (RedisCommands.EVAL_LONG,
-- used by lock() and tryLock(wait > 0)) (docs/LAYOUT.md §4.4). Runs after fair/purge.lua.
--
-- KEYS[1] = lock name N
-- KEYS[2] = waiter queue redisson_lock_queue:{N}
-- KEYS[3] = waiter deadlines redisson_lock_timeout:{N}
-- ARGV[1] = now, the client's wall clock in epoch milliseconds (read by the purge too)
-- ARGV[2] = lease in milliseconds (explicit lease, or the watchdog timeout)
-- ARGV[3] = holder field F
-- ARGV[4] = the waiter's slot in milliseconds (the wait of try_lock_for, else
--           fair_wait_timeout; Redisson's `wait`)
-- ARGV[5] = (optional) the hold count of F the client expects (docs/LAYOUT.md §12): when
--           F's count differs, nothing else is done and the reply is 'held:<count>'
--
-- Reply: nil when acquired: the lock was free and F was the queue head (or the queue empty),
--        so F left the queue and every other deadline moved ARGV[4] earlier; or F re-entered.
--        The key's TTL is reset to ARGV[2] either way.
--        When F joins the queue: the ttl of Redisson's arithmetic, the time until the waiter
--        before F must have taken the lock (its deadline - now), or PTTL N when F is first;
--        F's deadline is ttl + ARGV[4] + now.
--        When F was already queued (its deadline is never refreshed): Redisson replies
--        max(0, PTTL N), so its waiters re-poll at once while N is free or has no expiry.
--        This script replies a sleep hint instead: the earlier of PTTL N and, when another
--        waiter is the head, the time until the head's deadline (when the purge drops a
--        crashed head, whose wake-up message is lost), at least 1; -1 when N has no expiry
--        and -2 when N does not exist, if the head gives no deadline. Only the reply
--        differs: Redis is left exactly as Redisson leaves it.
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
if redis.call('zscore', KEYS[3], ARGV[3]) ~= false then
    local pttl = redis.call('pttl', KEYS[1])
    local head = redis.call('lindex', KEYS[2], 0)
    local head_deadline = false
    if head ~= false and head ~= ARGV[3] then
        head_deadline = redis.call('zscore', KEYS[3], head)
    end
    if head_deadline ~= false then
        local until_head = math.max(1, tonumber(head_deadline) - tonumber(ARGV[1]))
        if pttl < 0 or until_head < pttl then
            return until_head
        end
    end
    return pttl
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
local last_deadline = false
if last ~= false and last ~= ARGV[3] then
    last_deadline = redis.call('zscore', KEYS[3], last)
end
if last_deadline ~= false then
    ttl = tonumber(last_deadline) - tonumber(ARGV[1])
else
    ttl = redis.call('pttl', KEYS[1])
end
local deadline = ttl + tonumber(ARGV[4]) + tonumber(ARGV[1])
if redis.call('zadd', KEYS[3], deadline, ARGV[3]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[3])
end
return ttl
