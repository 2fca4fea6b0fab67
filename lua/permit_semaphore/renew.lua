-- permit_semaphore/renew.lua: the watchdog's batched renewal of renewing permits' leases.
-- Redisson's RedissonPermitExpirableSemaphore.updateLeaseTimeAsync (docs/LAYOUT.md §6.5), for
-- the permits of several acquisitions in one call (this crate's renewing permits: Redisson
-- has no renewal of its own, and Java sees ordinary permits whose lease ends later): expired
-- permits are reclaimed first, then every id still held gets the new lease end.
--
-- ARGV[1] = the lease in milliseconds
-- ARGV[2] = now (epoch ms, the client's clock as in Redisson)
-- ARGV[3] = publish verb(s), run in turn: PUBLISH, SPUBLISH (sharded pub/sub) or 'SPUBLISH PUBLISH' (both)
-- per acquisition i (1-based):
--   KEYS[3i-2] = semaphore name N, KEYS[3i-1] = {N}:timeout, KEYS[3i] = channel redisson_sc:{N}
--   ARGV[3+i]  = its permit ids, each as 32 hex characters, comma-separated
--
-- Reply: an array with one integer per acquisition: 1 = every id still held, its lease now
--        ends at ARGV[2] + ARGV[1]; 0 = one of them is gone (released, expired, deleted), and
--        none of that acquisition's ids changed.
local renewed = {}
local deadline = tonumber(ARGV[2]) + tonumber(ARGV[1])
for i = 1, #KEYS / 3 do
    local name, timeouts, channel = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local t = redis.call('type', timeouts).ok
    if t ~= 'zset' then
        -- Gone (deleted, every permit released or expired), or a key of another type.
        renewed[i] = 0
    else
        local expired = redis.call('zrangebyscore', timeouts, 0, ARGV[2], 'limit', 0, -1)
        if #expired > 0 then
            redis.call('zrem', timeouts, unpack(expired))
            local value = redis.pcall('incrby', name, #expired)
            if type(value) == 'number' and value > 0 then
                for verb in string.gmatch(ARGV[3], '%S+') do redis.call(verb, channel, value) end
            end
        end
        local ids = {}
        local held = 1
        for hex in string.gmatch(ARGV[3 + i], '[^,]+') do
            local id = (hex:gsub('..', function(cc) return string.char(tonumber(cc, 16)) end))
            if redis.call('zscore', timeouts, id) == false then
                held = 0
                break
            end
            table.insert(ids, id)
        end
        if held == 1 then
            for _, id in ipairs(ids) do
                redis.call('zadd', timeouts, deadline, id)
            end
        end
        renewed[i] = held
    end
end
return renewed
