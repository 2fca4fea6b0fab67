-- rwlock/read_is_locked.lua: is the read half of a read-write lock held?
-- Mirrors Redisson RedissonReadLock.isLocked (docs/LAYOUT.md §5.7, the 3.24+ form).
--
-- KEYS[1] = lock name N
--
-- Reply: 1 = mode read, or mode write with more than two fields (the writer also holds read:
--            "mode", F:write and F); 0 = otherwise (no lock, or a writer without read holds).
--        Changes nothing.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1
end
return 0
