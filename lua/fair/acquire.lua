-- fair/acquire.lua: take or re-enter a fair lock, or join (or stay in) its waiter queue.
-- Mirrors Redisson RedissonFairLock.tryLockInnerAsync, the waiting form (RedisCommands.EVAL_LONG,
-- used by lock() and tryLock(wait > 0)) (REDISSON_LAYOUT.md §4.4). Runs after fair/purge.lua.
--
-- KEYS[1] = lock name N
-- KEYS[2] = waiter queue redisson_lock_queue:{N}
-- KEYS[3] = waiter deadlines redisson_lock_timeout:{N}
-- ARGV[1] = now, the client's wall clock in epoch milliseconds (read by the purge too)
-- ARGV[2] = lease in milliseconds (explicit lease, or the watchdog timeout)
-- ARGV[3] = holder field F
-- ARGV[4] = the waiter's slot in milliseconds (the wait of try_lock_for, else
--           fair_wait_timeout; Redisson's `wait`)
--
-- Reply: nil when acquired: the lock was free and F was the queue head (or the queue empty),
--        so F left the queue and every other deadline moved ARGV[4] earlier; or F re-entered.
--        The key's TTL is reset to ARGV[2] either way.
--        When F joins the queue: the ttl of Redisson's arithmetic, the time until the waiter
--        before F must have taken the lock (its deadline - now), or PTTL N when F is first;
--        F's deadline is ttl + ARGV[4] + now.
--        When F was already queued (its deadline is never refreshed): PTTL N while N exists
--        (-1: no expiry) like Redisson. While N does not exist (another waiter is the head,
--        about to take it) Redisson replies 0 and its waiters re-poll at once; this script
--        replies the time until the head's deadline (when the purge would drop a dead head),
--        or -2 (no hint) when the head has no deadline. Only the reply differs: Redis is
--        left exactly as Redisson leaves it.
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
    if pttl ~= -2 then
        return pttl
    end
    local head = redis.call('lindex', KEYS[2], 0)
    local head_deadline = head and redis.call('zscore', KEYS[3], head)
    if head_deadline then
        return math.max(1, tonumber(head_deadline) - tonumber(ARGV[1]))
    end
    return -2
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
