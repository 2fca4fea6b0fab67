-- object/expire.lua: set the expiry of every key of one object.
-- Mirrors Redisson RedissonExpirable's expire script (expireAsync / expireAtAsync with the
-- object's keys: a permit-expirable semaphore's name and {name}:timeout, a fair lock's name,
-- queue and deadlines, a fenced lock's name and token counter).
--
-- KEYS = the object's keys (its name first)
-- ARGV[1] = 'pexpire' (a time to live) or 'pexpireat' (an instant, epoch ms)
-- ARGV[2] = the milliseconds
-- ARGV[3] = '' or the condition of Redis 7.0: 'NX', 'XX', 'GT' or 'LT' (a server before 7.0
--           refuses it with an error, and nothing changes)
--
-- Reply: 1 when the expiry of any key was set, else 0.
local result = 0
for i = 1, #KEYS, 1 do
    local set
    if ARGV[3] ~= '' then
        set = redis.call(ARGV[1], KEYS[i], ARGV[2], ARGV[3])
    else
        set = redis.call(ARGV[1], KEYS[i], ARGV[2])
    end
    if set == 1 then
        result = 1
    end
end
return result
