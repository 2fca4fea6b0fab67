-- inspect/snapshot.lua: everything stored under one name, read in one call, changing nothing.
-- Not a Redisson script: it serves the crate's Client::inspect (src/inspect/), and reads the
-- keys Redisson's RLock, RFairLock, RReadWriteLock, RFencedLock, RSemaphore,
-- RPermitExpirableSemaphore and RCountDownLatch write (docs/LAYOUT.md §2, §4.1, §5.1, §6.2,
-- §6.4 - §6.6). Read only: it calls TYPE, PTTL, HLEN, HGET, HGETALL, HSCAN, STRLEN, GET, LLEN,
-- LRANGE, ZSCORE, ZCARD, ZRANGE and PUBSUB NUMSUB, never a command that writes, and reads a key
-- only after TYPE said it has the type the command needs.
--
-- KEYS[1] = name N
-- KEYS[2] = fair lock queue redisson_lock_queue:{N} (a list of holder fields, §4.1)
-- KEYS[3] = fair lock deadlines redisson_lock_timeout:{N} (a zset scored in epoch ms, §4.1)
-- KEYS[4] = fenced lock token counter redisson_lock_token:{N} (a string, §6.2)
-- KEYS[5] = acquired permits {N}:timeout (a zset of raw permit ids scored in epoch ms, §6.5)
-- ARGV[1] = keyPrefix of the read-write lock's marker keys: {N}, or N when N contains '{'
--           (§5.1); reader G's k-th marker is ARGV[1] .. ':' .. G .. ':rwlock_timeout:' .. k
-- ARGV[2] = limit: at most this many hash fields, queue entries, permits and marker keys are
--           listed (the counts below say how many there are)
-- ARGV[3] = semaphore channel redisson_sc:{N} (§6.4)
-- ARGV[4] = latch channel redisson_countdownlatch__channel__{N} (§6.6)
--
-- Reply: an array of 17 entries (false is read as nil):
--   [1] TYPE N   [2] PTTL N
--   [3] a hash N: HLEN; a string N: STRLEN; else 0
--   [4] a hash N: flat field, value list of at most `limit` fields (all of them when HLEN <=
--       limit); a string N of at most 256 bytes (a counter, or a token lock's token): its
--       value; else false
--   [5] a hash N: HGET N mode; else false
--   [6] TYPE queue   [7] LLEN queue   [8] flat field, deadline list of the first `limit`
--       waiters, head first; the deadline is ZSCORE of KEYS[3], false when missing
--   [9] TYPE deadlines   [10] ZCARD deadlines
--   [11] TYPE token   [12] the token when a string of at most 20 bytes, else false
--   [13] TYPE permits   [14] ZCARD permits   [15] flat id, score list of the first `limit`
--        permits by score (ZRANGE 0 limit-1 WITHSCORES)
--   [16] read-write lock (hash with a mode): flat marker key, PTTL list for every reader field
--        G (not 'mode', not ending in ':write') with an integer count v, k = 1 .. v, at most
--        `limit` keys in all; else empty
--   [17] an integer-looking string N: flat PUBSUB NUMSUB reply of ARGV[3] and ARGV[4]
local limit = tonumber(ARGV[2])
local kind = redis.call('type', KEYS[1]).ok
local reply = {kind, redis.call('pttl', KEYS[1]), 0, false, false}
if kind == 'hash' then
    local len = redis.call('hlen', KEYS[1])
    reply[3] = len
    if len <= limit then
        reply[4] = redis.call('hgetall', KEYS[1])
    else
        local fields = {}
        local cursor = '0'
        repeat
            local page = redis.call('hscan', KEYS[1], cursor, 'count', limit)
            cursor = page[1]
            for i = 1, #page[2] do
                fields[#fields + 1] = page[2][i]
            end
        until cursor == '0' or #fields >= 2 * limit
        reply[4] = fields
    end
    reply[5] = redis.call('hget', KEYS[1], 'mode')
elseif kind == 'string' then
    local len = redis.call('strlen', KEYS[1])
    reply[3] = len
    if len <= 256 then
        reply[4] = redis.call('get', KEYS[1])
    end
end

local queue_kind = redis.call('type', KEYS[2]).ok
local deadlines_kind = redis.call('type', KEYS[3]).ok
reply[6] = queue_kind
reply[7] = 0
reply[8] = {}
if queue_kind == 'list' then
    reply[7] = redis.call('llen', KEYS[2])
    local waiters = redis.call('lrange', KEYS[2], 0, limit - 1)
    for i = 1, #waiters do
        reply[8][2 * i - 1] = waiters[i]
        local deadline = false
        if deadlines_kind == 'zset' then
            deadline = redis.call('zscore', KEYS[3], waiters[i])
        end
        reply[8][2 * i] = deadline
    end
end
reply[9] = deadlines_kind
reply[10] = 0
if deadlines_kind == 'zset' then
    reply[10] = redis.call('zcard', KEYS[3])
end

local token_kind = redis.call('type', KEYS[4]).ok
reply[11] = token_kind
reply[12] = false
if token_kind == 'string' and redis.call('strlen', KEYS[4]) <= 20 then
    reply[12] = redis.call('get', KEYS[4])
end

local permits_kind = redis.call('type', KEYS[5]).ok
reply[13] = permits_kind
reply[14] = 0
reply[15] = {}
if permits_kind == 'zset' then
    reply[14] = redis.call('zcard', KEYS[5])
    reply[15] = redis.call('zrange', KEYS[5], 0, limit - 1, 'withscores')
end

reply[16] = {}
if kind == 'hash' and reply[5] then
    local fields = reply[4]
    local markers = reply[16]
    for i = 1, #fields, 2 do
        local field = fields[i]
        local count = tonumber(fields[i + 1])
        if field ~= 'mode' and string.sub(field, -6) ~= ':write' and count ~= nil then
            local k = 1
            while k <= count and #markers < 2 * limit do
                local key = ARGV[1] .. ':' .. field .. ':rwlock_timeout:' .. k
                markers[#markers + 1] = key
                markers[#markers + 1] = redis.call('pttl', key)
                k = k + 1
            end
        end
    end
end

reply[17] = {}
if kind == 'string' and reply[4] and string.match(reply[4], '^%-?%d+$') then
    reply[17] = redis.call('pubsub', 'numsub', ARGV[3], ARGV[4])
end
return reply
