-- token/unlock.lua: release a plain token lock by compare-and-delete.
-- Not a Redisson structure; the plain SET NX lock's release (`if GET == token then DEL`), as
-- services that hand-write the lock do it. Nothing is published: such locks have no waiters'
-- channel (waiters poll).
--
-- KEYS[1] = lock name N
-- ARGV[1] = token T of the hold being released
--
-- Reply: 1 = N held T and was deleted;
--        0 = N does not hold T (expired, deleted, taken by another token, or a key of another
--            type): nothing changed.
-- pcall: a key of another type is not T's hold; it is left alone instead of failing.
if redis.pcall('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    return 1
end
return 0
