-- semaphore/release.lua: give permits (back) to a semaphore and wake waiters.
-- Mirrors Redisson RedissonSemaphore.releaseAsync and releaseIfExistsAsync (docs/LAYOUT.md
-- §6.4), plus the deletion of this crate's grant marker (§12).
--
-- KEYS[1] = semaphore name N
-- KEYS[2] = channel redisson_sc:{N}
-- KEYS[3] = (optional) the grant marker of the acquisition these permits came from
--           (docs/LAYOUT.md §12): deleted with the release
-- ARGV[1] = permits released (>= 1)
-- ARGV[2] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
-- ARGV[3] = 'if_exists' to release only when N exists (releaseIfExists); anything else
--           creates N when missing (release)
--
-- Reply: 1 = released: N incremented, its new value published on KEYS[2] (KEYS[3] deleted);
--        0 = N missing and ARGV[3] = 'if_exists' (nothing changed).
if ARGV[3] == 'if_exists' and redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
if KEYS[3] ~= nil then
    redis.call('del', KEYS[3])
end
for verb in string.gmatch(ARGV[2], '%S+') do redis.call(verb, KEYS[2], value) end
return 1
