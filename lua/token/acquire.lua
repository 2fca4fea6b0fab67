-- token/acquire.lua: take a plain token lock, SET N T NX PX lease, or say why not.
-- Not a Redisson structure; the plain SET NX lock many services hand-write (a Redisson client
-- cannot share it; a service that hand-wrote the same SET NX + compare-and-delete can).
-- A wait's first attempt sends the plain SET N T NX PX lease instead (OK = acquired); this
-- script runs after that SET was refused and for every later poll of the wait.
--
-- KEYS[1] = lock name N (a string: the holder's token)
-- ARGV[1] = token T of this acquisition
-- ARGV[2] = lease in milliseconds (explicit lease, or the watchdog timeout)
--
-- Reply: nil    = acquired: N set to T with TTL ARGV[2] (exactly SET N T NX PX ARGV[2]);
--        'held' = N already holds T (the lock is not reentrant; nothing changed);
--        otherwise the PTTL of N in milliseconds: held by another token (-1 = no expiry).
--        A WRONGTYPE error when N holds a key of another type (nothing changed).
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return nil
end
if redis.call('get', KEYS[1]) == ARGV[1] then
    return 'held'
end
return redis.call('pttl', KEYS[1])
