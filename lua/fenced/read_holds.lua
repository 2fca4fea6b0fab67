-- fenced/read_holds.lua: what a fenced lock shows of one holder, read after a request of
-- unknown outcome was cut off (this crate's own, docs/LAYOUT.md §12 (b); Redisson has no such
-- script): the holder's hold count and the token counter, read together, so that a grant
-- found this way comes with the token it drew (nobody else can have drawn one since: the
-- holder holds the lock).
--
-- KEYS[1] = lock name N (a hash: field = holder, value = hold count)
-- KEYS[2] = token counter redisson_lock_token:{N}
-- ARGV[1] = holder field F
--
-- Reply: {count, token} as strings: F's hold count ('0' when absent) and the counter ('0'
--        when absent). Read only.
local count = redis.call('hget', KEYS[1], ARGV[1])
local token = redis.call('get', KEYS[2])
return {count or '0', token or '0'}
