-- object/clear_expire.lua: remove the expiry of every key of one object.
-- Mirrors Redisson RedissonExpirable's clearExpire script (clearExpireAsync with the object's
-- keys).
--
-- KEYS = the object's keys (its name first)
--
-- Reply: 1 when any key had an expiry (now removed), else 0.
local result = 0
for i = 1, #KEYS, 1 do
    if redis.call('persist', KEYS[i]) == 1 then
        result = 1
    end
end
return result
