//! The test matrix over every lock kind: [`Kind`] (the nine single locks, each with what the
//! tests need to know to assert its exact effects), [`per_kind!`] (one test per kind from one
//! list, with reasoned exclusions), and [`AnyLock`] (a lock of any kind, as the tests use it).
//!
//! What each kind writes, publishes and refuses is Redisson's layout (docs/LAYOUT.md §2 the
//! lock, §4 the fair lock, §5 the read-write lock, §6.1-6.3 the spin, fenced and non-reentrant
//! locks) and this crate's own token lock (`src/lock/token.rs`, not a Redisson structure).

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redisson_sync::{
    Client, DistributedLock, FairLock, FencedLock, Lock, NonReentrantFairLock, NonReentrantLock,
    Owner, ReadLock, SpinLock, TokenLock, Ttl, ValueFormat, WithLockOptions, WriteLock,
};

use super::{
    POLL_LIMIT, State, channel, command_stats, exists, field, hash, now_ms, numsub, queue,
    queue_key, script_calls, timeouts_key, token_key, wait_llen, waiter_channel,
};

/// Every single lock kind of the crate. The tests of a property every lock promises (cancel
/// safety, release on drop, the watchdog, restarts, errors, faults, sections, validity) run
/// once per kind ([`per_kind!`](crate::common::per_kind)), and ask the kind what to expect: the
/// methods below say what a hold writes, where a release publishes, whether waiters queue or
/// poll, whether the same owner may re-enter, for names without `{`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The reentrant lock, `client.lock(name)` (Redisson's `RLock`).
    Lock,
    /// The fair lock, `client.fair_lock(name)` (`RFairLock`): a waiter queue.
    Fair,
    /// The read half of a read-write lock, `client.rw_lock(name).read_lock()`.
    Read,
    /// The write half of a read-write lock, `client.rw_lock(name).write_lock()`.
    Write,
    /// The fenced lock, `client.fenced_lock(name)` (`RFencedLock`): the lock's hash, plus a
    /// token counter every grant increments.
    Fenced,
    /// The spin lock, `client.spin_lock(name)` (`RSpinLock`): the lock's hash, an unlock that
    /// publishes nothing, waiters that poll.
    Spin,
    /// The non-reentrant lock, `client.non_reentrant_lock(name)` (`RNonReentrantLock`).
    NonReentrant,
    /// The non-reentrant fair lock, `client.non_reentrant_fair_lock(name)`
    /// (`RNonReentrantFairLock`).
    NonReentrantFair,
    /// The token lock, `client.token_lock(name)` with values `<client id>:<owner id>`
    /// ([`ValueFormat::ClientIdAndOwner`], the value a Java `<uuid>:<threadId>` service
    /// writes): a string `SET NX PX`, compare-and-delete, waiters that poll. Not a Redisson
    /// structure. This format, not the default random one, so that a hold's value says whose
    /// it is (the tests assert it exactly, as the hash kinds' fields) and a re-entry of the same
    /// owner is the same holder; what only the random format does (a fresh value per
    /// acquisition, and its exact resolution of a lost reply) is in `tests/token_lock.rs`.
    Token,
}

/// What a second acquire by the owner that holds the lock does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reentry {
    /// It is granted: the holder's count goes up by one (the reentrant kinds).
    Counts,
    /// It fails at once with `Error::NotReentrant`, nothing sent to Redis, the hold unchanged
    /// (the non-reentrant kinds, and the token lock, whose holder is its value).
    Refused,
}

/// A holder field no client has (a v4 UUID of zeros): the stand-in waiter that
/// [`Kind::queue_stand_in`] puts at the head of a fair lock's queue.
pub const STAND_IN_WAITER: &str = "00000000-0000-4000-8000-000000000000:1";

/// The holder of a foreign hold ([`Kind::foreign_hold`]): another client's owner 1, as a Java
/// service would write it.
pub const FOREIGN_HOLDER: &str = "0f0e0d0c-0b0a-4908-8706-050403020100:1";

/// A key of a type that is not the lock's, written at a lock's name by the error tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreign {
    /// The string `payload`, without TTL.
    String,
    /// The list `[y, x]` (`LPUSH x y`), without TTL.
    List,
    /// The hash `{some-uuid:1: 1}` (a Redisson lock's holder), with a 20 s TTL.
    Hash,
}

impl Foreign {
    /// Writes this key at `key`.
    pub async fn write(self, raw: &mut MultiplexedConnection, key: &str) {
        match self {
            Self::String => {
                let () = raw.set(key, "payload").await.unwrap();
            }
            Self::List => {
                let () = raw.lpush(key, &["x", "y"]).await.unwrap();
            }
            Self::Hash => {
                let () = raw.hset(key, "some-uuid:1", 1).await.unwrap();
                let () = raw.pexpire(key, 20_000).await.unwrap();
            }
        }
    }

    /// Asserts that `key` is exactly as [`write`](Self::write) left it (its TTL too).
    pub async fn assert_unchanged(self, raw: &mut MultiplexedConnection, key: &str) {
        let ttl = super::pttl(raw, key).await;
        match self {
            Self::String => {
                assert_eq!(super::key_type(raw, key).await, "string");
                assert_eq!(super::value(raw, key).await.as_deref(), Some("payload"));
                assert_eq!(ttl, -1, "{key}");
            }
            Self::List => {
                assert_eq!(super::key_type(raw, key).await, "list");
                let l: Vec<String> = raw.lrange(key, 0, -1).await.unwrap();
                assert_eq!(l, ["y", "x"]);
                assert_eq!(ttl, -1, "{key}");
            }
            Self::Hash => {
                assert_eq!(super::key_type(raw, key).await, "hash");
                assert_eq!(
                    hash(raw, key).await,
                    vec![("some-uuid:1".to_owned(), "1".to_owned())]
                );
                assert!((15_000..=20_000).contains(&ttl), "{key}: pttl {ttl}");
            }
        }
    }
}

/// What the acquire and release scripts Redis ran wrote, from `INFO commandstats` (reset
/// before, see [`reset_stats`](super::reset_stats)): the calls of a kind's grant command and of
/// its release command ([`Kind::grant_command`], [`Kind::release_command`]), which may be the
/// same command.
#[derive(Debug)]
pub struct Writes {
    kind: Kind,
    grants: u64,
    releases: u64,
}

impl Writes {
    /// The counters now.
    pub async fn read(kind: Kind, raw: &mut MultiplexedConnection) -> Self {
        let (grant, _) = kind.grant_command();
        Self {
            kind,
            grants: command_stats(raw, grant).await.calls,
            releases: command_stats(raw, kind.release_command()).await.calls,
        }
    }

    fn same_command(&self) -> bool {
        self.kind.grant_command().0 == self.kind.release_command()
    }

    /// At least `n` grants ran.
    pub fn granted(&self, n: u64) -> bool {
        self.grants >= n * self.kind.grant_command().1
    }

    /// At least one grant ran, and its undo.
    pub fn granted_and_undone(&self) -> bool {
        if self.same_command() {
            self.grants >= 2
        } else {
            self.granted(1) && self.releases >= 1
        }
    }

    /// As many releases ran as grants: every grant was undone.
    pub fn all_undone(&self) -> bool {
        if self.same_command() {
            self.grants.is_multiple_of(2)
        } else {
            self.grants == self.releases * self.kind.grant_command().1
        }
    }
}

impl Kind {
    /// Every kind, the reentrant lock first: the one list the matrix runs over.
    pub const ALL: [Self; 9] = [
        Self::Lock,
        Self::Fair,
        Self::Read,
        Self::Write,
        Self::Fenced,
        Self::Spin,
        Self::NonReentrant,
        Self::NonReentrantFair,
        Self::Token,
    ];

    /// The kind's name in test names: `lock`, `fair`, `read`, `write`, `fenced`, `spin`,
    /// `nonreentrant`, `nonreentrant_fair`, `token`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Fair => "fair",
            Self::Read => "read",
            Self::Write => "write",
            Self::Fenced => "fenced",
            Self::Spin => "spin",
            Self::NonReentrant => "nonreentrant",
            Self::NonReentrantFair => "nonreentrant_fair",
            Self::Token => "token",
        }
    }

    /// The lock of this kind named `name`, through `client`.
    pub fn any(&self, client: &Client, name: &str) -> AnyLock {
        match self {
            Self::Lock => AnyLock::Lock(client.lock(name)),
            Self::Fair => AnyLock::Fair(client.fair_lock(name)),
            Self::Read => AnyLock::Read(client.rw_lock(name).read_lock()),
            Self::Write => AnyLock::Write(client.rw_lock(name).write_lock()),
            Self::Fenced => AnyLock::Fenced(client.fenced_lock(name)),
            Self::Spin => AnyLock::Spin(client.spin_lock(name)),
            Self::NonReentrant => AnyLock::NonReentrant(client.non_reentrant_lock(name)),
            Self::NonReentrantFair => {
                AnyLock::NonReentrantFair(client.non_reentrant_fair_lock(name))
            }
            Self::Token => AnyLock::Token(
                client
                    .token_lock(name)
                    .with_format(ValueFormat::ClientIdAndOwner),
            ),
        }
    }

    /// A kind whose hold on the same name keeps a hold of this kind out (and the other way
    /// round): the write half for the read half (readers share), the kind itself otherwise.
    pub fn rival(&self) -> Self {
        match self {
            Self::Read => Self::Write,
            other => *other,
        }
    }

    /// The Redis type of the lock key: `"string"` for the token lock, `"hash"` otherwise.
    pub fn key_type(&self) -> &'static str {
        match self {
            Self::Token => "string",
            _ => "hash",
        }
    }

    /// Whether the lock is a hash of holder fields and hold counts (every kind but the token
    /// lock): only those have the per-owner queries `hold_count` and `is_held_by`.
    pub fn counts_holds(&self) -> bool {
        *self != Self::Token
    }

    /// What a re-entry by the holding owner does.
    pub fn reentry(&self) -> Reentry {
        match self {
            Self::NonReentrant | Self::NonReentrantFair | Self::Token => Reentry::Refused,
            _ => Reentry::Counts,
        }
    }

    /// Whether the same owner may hold the lock more than once.
    pub fn reentrant(&self) -> bool {
        self.reentry() == Reentry::Counts
    }

    /// Whether a grant draws a fencing token (`LockGuard::token()` is `Some`): the fenced lock.
    pub fn draws_token(&self) -> bool {
        *self == Self::Fenced
    }

    /// Whether waiters poll (with back-off) instead of subscribing: the spin and token locks,
    /// whose releases publish nothing.
    pub fn polls(&self) -> bool {
        matches!(self, Self::Spin | Self::Token)
    }

    /// Whether a waiting acquire queues itself in Redis (the fair kinds' queue and deadlines),
    /// which a waiter that gives up must leave.
    pub fn queues_waiters(&self) -> bool {
        matches!(self, Self::Fair | Self::NonReentrantFair)
    }

    /// The holder id a hold of `owner` through `client` writes: the hash field
    /// `<client id>:<owner id>` (`<client id>:<owner id>:write` for the write half), and the
    /// same `<client id>:<owner id>` as the token lock's value. It is `LockGuard::holder()`.
    pub fn field(&self, client: &Client, owner: Owner) -> String {
        match self {
            Self::Write => format!("{}:write", field(client, owner)),
            _ => field(client, owner),
        }
    }

    /// The `mode` field the halves of a read-write lock write next to the holder's field.
    pub fn mode(&self) -> Option<&'static str> {
        match self {
            Self::Read => Some("read"),
            Self::Write => Some("write"),
            _ => None,
        }
    }

    /// The lock key (as [`state`](super::state) reads it) when `holder` alone holds it `count`
    /// times: the hash `[(holder, count)]` (plus `("mode", "read" | "write")` for the halves),
    /// or for the token lock the value `holder` (which is held once at most).
    pub fn state_of(&self, holder: &str, count: u64) -> State {
        if *self == Self::Token {
            assert_eq!(count, 1, "a token lock is held once at most");
            return State::Value(holder.to_owned());
        }
        let mut all = vec![(holder.to_owned(), count.to_string())];
        if let Some(mode) = self.mode() {
            all.push(("mode".to_owned(), mode.to_owned()));
        }
        all.sort();
        State::Hash(all)
    }

    /// [`state_of`](Self::state_of) the holder of `owner` through `client`.
    pub fn hold_state(&self, client: &Client, owner: Owner, count: u64) -> State {
        self.state_of(&self.field(client, owner), count)
    }

    /// How many holds `holder` has on `name`, read from Redis: `HGET name holder` for the hash
    /// kinds, 1 or 0 as the token lock's key holds that value or not.
    pub async fn count_in_redis(
        &self,
        raw: &mut MultiplexedConnection,
        name: &str,
        holder: &str,
    ) -> u64 {
        if *self == Self::Token {
            let v: Option<String> = raw.get(name).await.unwrap();
            return u64::from(v.as_deref() == Some(holder));
        }
        let n: Option<u64> = raw.hget(name, holder).await.unwrap();
        n.unwrap_or(0)
    }

    /// The channel a release that frees `name` publishes on, or `None` for the kinds that
    /// publish nothing (spin, token: their waiters poll): `redisson_lock__channel:{name}` for
    /// the lock, the fenced and the non-reentrant lock, `redisson_rwlock:{name}` for both
    /// halves. The fair kinds publish only to the head of their waiter queue, on that waiter's
    /// own channel, and only when there is a head: this is the channel of the stand-in head
    /// [`queue_stand_in`](Self::queue_stand_in) puts there,
    /// `redisson_lock__channel:{name}:<STAND_IN_WAITER>`.
    pub fn channel(&self, name: &str) -> Option<String> {
        match self {
            Self::Lock | Self::Fenced | Self::NonReentrant => Some(channel(name)),
            Self::Fair | Self::NonReentrantFair => Some(waiter_channel(name, STAND_IN_WAITER)),
            Self::Read | Self::Write => Some(format!("redisson_rwlock:{{{name}}}")),
            Self::Spin | Self::Token => None,
        }
    }

    /// The channel a waiter of this kind whose holder id is `waiter` subscribes to, or `None`
    /// for the kinds whose waiters poll: the channel every waiter of the name shares
    /// ([`channel`](Self::channel)), the waiter's own for the fair kinds.
    pub fn waiter_channel(&self, name: &str, waiter: &str) -> Option<String> {
        match self {
            Self::Fair | Self::NonReentrantFair => Some(waiter_channel(name, waiter)),
            _ => self.channel(name),
        }
    }

    /// The pattern of every channel naming a lock whose name starts with `prefix` (a raw
    /// subscription to it sees every message any kind publishes about such a lock:
    /// `*{<prefix>*`).
    pub fn channels_of(prefix: &str) -> String {
        format!("*{{{prefix}*")
    }

    /// The message a release that frees the lock publishes: `0`, and `1` for the write half
    /// (Redisson's `READ_UNLOCK_MESSAGE`, which wakes every waiter); `None` for the kinds that
    /// publish nothing.
    pub fn release_message(&self) -> Option<&'static str> {
        match self {
            Self::Write => Some("1"),
            Self::Spin | Self::Token => None,
            _ => Some("0"),
        }
    }

    /// The marker keys of `count` read holds of `holder` on `name`,
    /// `{name}:<holder>:rwlock_timeout:<k>` for `k = 1..=count`, each with its hold's lease
    /// as TTL; none for the other kinds.
    pub fn markers(&self, name: &str, holder: &str, count: u64) -> Vec<String> {
        match self {
            Self::Read => (1..=count)
                .map(|k| format!("{{{name}}}:{holder}:rwlock_timeout:{k}"))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Every key `count` holds of `holder` on `name` write, each with the lease as TTL: the
    /// lock key, and the read half's [`markers`](Self::markers).
    pub fn hold_keys(&self, name: &str, holder: &str, count: u64) -> Vec<String> {
        let mut keys = vec![name.to_owned()];
        keys.extend(self.markers(name, holder, count));
        keys
    }

    /// The keys a grant on `name` writes that outlive every hold: the fenced lock's token
    /// counter `redisson_lock_token:{name}` (a string without TTL, by design, as in Redisson);
    /// none for the other kinds.
    pub fn lasting_keys(&self, name: &str) -> Vec<String> {
        match self {
            Self::Fenced => vec![token_key(name)],
            _ => Vec::new(),
        }
    }

    /// Asserts the lasting keys of every name of `names` once grants were made on it: each
    /// one there, without TTL, a positive count (the fenced lock's token counters); and that
    /// the server holds nothing else when `only` is set. Returns the number of lasting keys.
    pub async fn assert_lasting_keys(
        &self,
        raw: &mut MultiplexedConnection,
        names: &[&str],
        only: bool,
    ) -> u64 {
        let mut expected: Vec<String> = names.iter().flat_map(|n| self.lasting_keys(n)).collect();
        expected.sort();
        for key in &expected {
            let v: u64 = raw.get(key).await.unwrap();
            assert!(v > 0, "{key}: {v}");
            assert_eq!(super::pttl(raw, key).await, -1, "{key} has a TTL");
        }
        if only {
            assert_eq!(
                super::all_keys(raw).await,
                expected,
                "{:?}",
                super::describe_keys(raw).await
            );
        }
        expected.len() as u64
    }

    /// Asserts that nothing is left of this kind's holds on `names` but its lasting keys (the
    /// fenced lock's token counters): the server holds exactly those.
    pub async fn assert_nothing_left(&self, raw: &mut MultiplexedConnection, names: &[&str]) {
        let lasting = self.assert_lasting_keys(raw, names, true).await;
        assert_eq!(super::dbsize(raw).await, lasting);
    }

    /// Loads the kind's acquire and unlock scripts through `client` (a lock and unlock of a
    /// throwaway name), so that from then on each goes out as one `EVALSHA`.
    pub async fn warm_up(&self, client: &Client) {
        let opts = redisson_sync::LockOptions::new().owner(Owner::new(1));
        self.any(client, &super::unique_name("warm"))
            .lock_with_options(&opts)
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
    }

    /// The waiter queue keys of the fair kinds' `name` (its queue and its deadlines); none for
    /// the other kinds. Both must be absent once every waiter has left.
    pub fn waiter_keys(&self, name: &str) -> Vec<String> {
        if self.queues_waiters() {
            vec![queue_key(name), timeouts_key(name)]
        } else {
            Vec::new()
        }
    }

    /// Polls (every 10 ms) until no waiter is queued on `name`: the fair kinds' queue and
    /// deadline keys are absent (a waiter that gives up leaves the queue, in the background
    /// when its future was dropped); panics after 5 s. Returns at once for the other kinds.
    pub async fn wait_no_waiters(&self, raw: &mut MultiplexedConnection, name: &str) {
        let start = Instant::now();
        for key in self.waiter_keys(name) {
            while exists(raw, &key).await {
                assert!(
                    start.elapsed() < POLL_LIMIT,
                    "waiters left on {name}: queue {:?}, deadlines {:?}",
                    queue(raw, name).await,
                    raw.zrange_withscores::<_, Vec<(String, f64)>>(timeouts_key(name), 0, -1)
                        .await
                        .unwrap()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// Waits (bounded, 5 s) until `waiters` acquires of this kind on `name`, made by `clients`
    /// clients, are parked: the fair kinds' queue holds `waiters` entries; the kinds that
    /// subscribe have `clients` subscriptions to their channel; the kinds that poll have made
    /// at least `waiters + 1` attempts more since `polls_before` (a [`script_calls`] count
    /// taken before the waiters started), so each of them is polling.
    pub async fn wait_parked(
        &self,
        raw: &mut MultiplexedConnection,
        name: &str,
        clients: i64,
        waiters: usize,
        polls_before: u64,
    ) {
        if self.queues_waiters() {
            wait_llen(raw, name, waiters).await;
        } else if let Some(ch) = self.channel(name) {
            super::wait_numsub(raw, &ch, clients).await;
        } else {
            let start = Instant::now();
            loop {
                let polls = script_calls(raw).await - polls_before;
                if polls > waiters as u64 {
                    return;
                }
                assert!(
                    start.elapsed() < POLL_LIMIT,
                    "{waiters} waiters polled only {polls} times"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// For the fair kinds, which publish a release only to the head of their waiter queue:
    /// queues [`STAND_IN_WAITER`] (deadline a minute ahead) as that head, so that the next
    /// release of `name` publishes on [`channel`](Self::channel). Call it while the lock is
    /// held (a queued head keeps every other acquirer out of a free fair lock), and
    /// [`dequeue_stand_in`](Self::dequeue_stand_in) once the release was seen. Does nothing
    /// for the other kinds.
    pub async fn queue_stand_in(&self, raw: &mut MultiplexedConnection, name: &str) {
        if self.queues_waiters() {
            let () = raw
                .zadd(timeouts_key(name), STAND_IN_WAITER, now_ms() + 60_000)
                .await
                .unwrap();
            let () = raw.rpush(queue_key(name), STAND_IN_WAITER).await.unwrap();
        }
    }

    /// Takes [`STAND_IN_WAITER`] out of the fair lock's queue again (the queue and deadline
    /// keys go with it when it was the only waiter). Does nothing for the other kinds.
    pub async fn dequeue_stand_in(&self, raw: &mut MultiplexedConnection, name: &str) {
        if self.queues_waiters() {
            let () = raw.lrem(queue_key(name), 0, STAND_IN_WAITER).await.unwrap();
            let () = raw.zrem(timeouts_key(name), STAND_IN_WAITER).await.unwrap();
        }
    }

    /// Writes a hold of another client ([`FOREIGN_HOLDER`], a Java service's) on `name`
    /// expiring in `ttl_ms`, as this kind would see it held: the holder's field with count 1
    /// (and `mode write` for the halves, so that readers wait too), or the token lock's value.
    pub async fn foreign_hold(&self, raw: &mut MultiplexedConnection, name: &str, ttl_ms: u64) {
        match self {
            Self::Token => {
                let () = raw.pset_ex(name, FOREIGN_HOLDER, ttl_ms).await.unwrap();
            }
            Self::Read | Self::Write => {
                let () = raw
                    .hset_multiple(
                        name,
                        &[("mode", "write"), (&format!("{FOREIGN_HOLDER}:write"), "1")],
                    )
                    .await
                    .unwrap();
                let _: bool = raw.pexpire(name, ttl_ms as i64).await.unwrap();
            }
            _ => {
                let () = raw.hset(name, FOREIGN_HOLDER, 1).await.unwrap();
                let _: bool = raw.pexpire(name, ttl_ms as i64).await.unwrap();
            }
        }
    }

    /// The two keys of another type than the lock's, for the error tests: a string and a
    /// list for the hash kinds, a hash (a Redisson lock) and a list for the token lock.
    pub fn foreign_types(&self) -> [Foreign; 2] {
        match self {
            Self::Token => [Foreign::Hash, Foreign::List],
            _ => [Foreign::String, Foreign::List],
        }
    }

    /// Whether `is_locked` and `force_unlock` read the lock's `mode` field first (the halves,
    /// as Redisson's scripts do), so that on a key of another type they report `WrongType`;
    /// the other kinds run `EXISTS` / `DEL`, which take a key of any type.
    pub fn reads_mode(&self) -> bool {
        matches!(self, Self::Read | Self::Write)
    }

    /// The unlock script of the kind (`lua/<dir>/<file>.lua`), whose SHA its `EVALSHA` names.
    pub fn unlock_script(&self) -> &'static str {
        match self {
            Self::Lock | Self::Fenced | Self::NonReentrant => {
                include_str!("../../lua/lock/unlock.lua")
            }
            Self::Fair | Self::NonReentrantFair => include_str!("../../lua/fair/unlock.lua"),
            Self::Read => include_str!("../../lua/rwlock/read_unlock.lua"),
            Self::Write => include_str!("../../lua/rwlock/write_unlock.lua"),
            Self::Spin => include_str!("../../lua/spin/unlock.lua"),
            Self::Token => include_str!("../../lua/token/unlock.lua"),
        }
    }

    /// The watchdog's renewal script of the kind: `lua/rwlock/renew_read.lua` for read holds
    /// (it renews their marker keys too), `lua/token/renew.lua` (compare-and-`PEXPIRE`) for the
    /// token lock, `lua/lock/renew.lua` (the holder's hash field) for every other kind. Each
    /// takes `KEYS = names`, `ARGV = [lease, holder of KEYS[1], ...]` (the read script a marker
    /// prefix after each holder).
    pub fn renew_script(&self) -> &'static str {
        match self {
            Self::Read => include_str!("../../lua/rwlock/renew_read.lua"),
            Self::Token => include_str!("../../lua/token/renew.lua"),
            _ => include_str!("../../lua/lock/renew.lua"),
        }
    }

    /// The command (as `INFO commandstats` names it) a grant on a free lock writes the hold
    /// with, and how many times: `HINCRBY` once for the lock-hash kinds (lock, fenced, spin,
    /// non-reentrant), `HSET` once for the fair kinds, `HSET` twice (the holder's field and
    /// `mode`) for the halves, `SET` once for the token lock.
    pub fn grant_command(&self) -> (&'static str, u64) {
        match self {
            Self::Lock | Self::Fenced | Self::Spin | Self::NonReentrant => ("hincrby", 1),
            Self::Fair | Self::NonReentrantFair => ("hset", 1),
            Self::Read | Self::Write => ("hset", 2),
            Self::Token => ("set", 1),
        }
    }

    /// The command one release (or the undo of a grant) runs once: `HINCRBY` for the hash
    /// kinds, `DEL` for the token lock.
    pub fn release_command(&self) -> &'static str {
        match self {
            Self::Token => "del",
            _ => "hincrby",
        }
    }

    /// A label for messages: the kind and one more detail.
    pub fn with(&self, detail: impl std::fmt::Debug) -> String {
        format!("{self}/{detail:?}")
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// One test per lock kind, from the one list [`Kind::ALL`]:
/// `per_kind!(#[attributes] async fn NAME);` next to `async fn NAME(kind: Kind)` defines the
/// module `NAME` with the tests `lock`, `fair`, `read`, `write`, `fenced`, `spin`,
/// `nonreentrant`, `nonreentrant_fair` and `token`, each calling `NAME` with its kind (a failure
/// names the kind: `NAME::read`); `per_kind!(#[test] fn NAME);` does the same for a plain
/// `fn NAME(kind: Kind)`. The attributes (`#[tokio::test(...)]`, `#[test]`) go on each test.
///
/// A kind the property does not apply to is excluded in the invocation, with the reason:
/// `per_kind!(#[tokio::test] async fn NAME; except { spin: "why", token: "why" });` makes its
/// test an empty `#[ignore = "why"]` one (listed as ignored, with the reason, in every run).
/// Prefer asserting the kind's own behaviour ([`Kind`] says what it is) to an exclusion. A kind
/// for which the test finds a bug of the crate is listed as `bug { nonreentrant: "bug: …" }`
/// (after `except { … }`, which may be empty): its test is the real one, `#[ignore]`d with the
/// reason, so that `cargo test -- --ignored` shows the failure.
///
/// `per_kind!(at_once multi_thread(2), async fn NAME);` (or `at_once current_thread`: the
/// runtime `#[tokio::test]` would build, a [`Flavor`](crate::common::Flavor)) makes the same
/// nine tests, whose bodies run at
/// once, each on a thread and runtime of its own ([`Batch`](crate::common::Batch)): for groups
/// whose tests mostly wait on timers, so that the group takes about as long as its slowest
/// test instead of nine tests in a row. It takes the same `; except { … }` (its kinds are not
/// started).
#[allow(unused_macros)]
macro_rules! per_kind {
    (at_once multi_thread($n:literal), async fn $name:ident
        $(; except { $($ex:ident : $why:literal),* $(,)? })?) => {
        $crate::common::per_kind!(@at_once crate::common::Flavor::MultiThread($n), $name,
            [$($($ex: $why),*)?]);
    };
    (at_once current_thread, async fn $name:ident
        $(; except { $($ex:ident : $why:literal),* $(,)? })?) => {
        $crate::common::per_kind!(@at_once crate::common::Flavor::CurrentThread, $name,
            [$($($ex: $why),*)?]);
    };
    (@at_once $flavor:expr, $name:ident, [$($ex:ident : $why:literal),*]) => {
        mod $name {
            static BATCH: crate::common::Batch = crate::common::Batch::new(&[$(stringify!($ex)),*]);
            fn body(kind: crate::common::Kind) -> futures_util::future::LocalBoxFuture<'static, ()> {
                Box::pin(super::$name(kind))
            }
            $crate::common::per_kind_test!(@at_once $flavor, [$($ex: $why),*],
                lock Lock, fair Fair, read Read, write Write, fenced Fenced, spin Spin,
                nonreentrant NonReentrant, nonreentrant_fair NonReentrantFair, token Token
            );
        }
    };
    ($(#[$attr:meta])* async fn $name:ident) => {
        $crate::common::per_kind!($(#[$attr])* async fn $name; except {});
    };
    ($(#[$attr:meta])* fn $name:ident) => {
        $crate::common::per_kind!($(#[$attr])* fn $name; except {});
    };
    ($(#[$attr:meta])* async fn $name:ident; except { $($ex:ident : $why:literal),* $(,)? }
        $(; bug { $($bug:ident : $bwhy:literal),* $(,)? })?) => {
        mod $name {
            $crate::common::per_kind_test!(
                [$(#[$attr])*] async $name [$($ex: $why),*] [$($($bug: $bwhy),*)?]
                lock Lock, fair Fair, read Read, write Write, fenced Fenced, spin Spin,
                nonreentrant NonReentrant, nonreentrant_fair NonReentrantFair, token Token
            );
        }
    };
    ($(#[$attr:meta])* fn $name:ident; except { $($ex:ident : $why:literal),* $(,)? }
        $(; bug { $($bug:ident : $bwhy:literal),* $(,)? })?) => {
        mod $name {
            $crate::common::per_kind_test!(
                [$(#[$attr])*] sync $name [$($ex: $why),*] [$($($bug: $bwhy),*)?]
                lock Lock, fair Fair, read Read, write Write, fenced Fenced, spin Spin,
                nonreentrant NonReentrant, nonreentrant_fair NonReentrantFair, token Token
            );
        }
    };
}
#[allow(unused_imports)]
pub(crate) use per_kind;

/// The tests of [`per_kind!`]: for each `label Variant`, the test `label` calling the function
/// with `Kind::Variant`; an empty ignored test with the reason when `label` is excluded; the
/// real test, ignored with the reason, when `label` is listed as a bug. (The lists become
/// literal arms of a local macro, which is how a `macro_rules!` compares two names.)
#[allow(unused_macros)]
macro_rules! per_kind_test {
    (@at_once $flavor:expr, [$($ex:ident : $why:literal),*], $($label:ident $variant:ident),*) => {
        macro_rules! one_kind {
            $( ($ex, $v:ident) => {
                #[test]
                #[ignore = $why]
                fn $ex() {}
            }; )*
            ($l:ident, $v:ident) => {
                #[test]
                fn $l() {
                    BATCH.run(module_path!(), crate::common::Kind::$v, body, $flavor);
                }
            };
        }
        $( one_kind!($label, $variant); )*
    };
    (@run [$($attr:tt)*] [$($more:tt)*] async $name:ident $label:ident $variant:ident) => {
        $($attr)*
        $($more)*
        async fn $label() {
            super::$name(crate::common::Kind::$variant).await;
        }
    };
    (@run [$($attr:tt)*] [$($more:tt)*] sync $name:ident $label:ident $variant:ident) => {
        $($attr)*
        $($more)*
        fn $label() {
            super::$name(crate::common::Kind::$variant);
        }
    };
    ($attrs:tt $sync:ident $name:ident [$($ex:ident : $why:literal),*]
        [$($bug:ident : $bwhy:literal),*] $($label:ident $variant:ident),*) => {
        macro_rules! one_kind {
            $( ($ex, $v:ident) => {
                #[test]
                #[ignore = $why]
                fn $ex() {}
            }; )*
            $( ($bug, $v:ident) => {
                $crate::common::per_kind_test!(@run $attrs [#[ignore = $bwhy]] $sync $name $bug $v);
            }; )*
            ($l:ident, $v:ident) => {
                $crate::common::per_kind_test!(@run $attrs [] $sync $name $l $v);
            };
        }
        $( one_kind!($label, $variant); )*
    };
}
#[allow(unused_imports)]
pub(crate) use per_kind_test;

/// A single lock of any kind, as the tests use it: the lock surface (it derefs to
/// `dyn DistributedLock`) plus the queries of its holds, which each kind has as inherent
/// methods (`hold_count`, `is_held_by`: the hash-based kinds; `remaining_ttl`: every kind).
#[derive(Clone, Debug)]
pub enum AnyLock {
    Lock(Lock),
    Fair(FairLock),
    Read(ReadLock),
    Write(WriteLock),
    Fenced(FencedLock),
    Spin(SpinLock),
    NonReentrant(NonReentrantLock),
    NonReentrantFair(NonReentrantFairLock),
    Token(TokenLock),
}

/// `$body` with `$lock` bound to the concrete lock inside an [`AnyLock`].
macro_rules! each_lock {
    ($any:expr, $lock:ident => $body:expr) => {
        match $any {
            AnyLock::Lock($lock) => $body,
            AnyLock::Fair($lock) => $body,
            AnyLock::Read($lock) => $body,
            AnyLock::Write($lock) => $body,
            AnyLock::Fenced($lock) => $body,
            AnyLock::Spin($lock) => $body,
            AnyLock::NonReentrant($lock) => $body,
            AnyLock::NonReentrantFair($lock) => $body,
            AnyLock::Token($lock) => $body,
        }
    };
}

/// `$body` with `$lock` bound to the concrete lock of a hash-based kind; the token lock has no
/// per-owner hold count ([`Kind::counts_holds`]).
macro_rules! each_hash_lock {
    ($any:expr, $lock:ident => $body:expr) => {
        match $any {
            AnyLock::Lock($lock) => $body,
            AnyLock::Fair($lock) => $body,
            AnyLock::Read($lock) => $body,
            AnyLock::Write($lock) => $body,
            AnyLock::Fenced($lock) => $body,
            AnyLock::Spin($lock) => $body,
            AnyLock::NonReentrant($lock) => $body,
            AnyLock::NonReentrantFair($lock) => $body,
            AnyLock::Token(_) => panic!("a token lock counts no holds per owner"),
        }
    };
}

impl std::ops::Deref for AnyLock {
    type Target = dyn DistributedLock;

    fn deref(&self) -> &Self::Target {
        each_lock!(self, lock => lock)
    }
}

impl AnyLock {
    /// The lock as a trait object (what `MultiLock::new` and `RedLock::new` take).
    pub fn into_dyn(self) -> Box<dyn DistributedLock> {
        each_lock!(self, lock => Box::new(lock))
    }

    /// How many times `owner` holds the lock (`HGET`); the hash-based kinds only.
    pub async fn hold_count(&self, owner: Owner) -> redisson_sync::Result<u64> {
        each_hash_lock!(self, lock => lock.hold_count(owner).await)
    }

    /// Whether `owner` holds the lock (`HEXISTS`); the hash-based kinds only.
    pub async fn is_held_by(&self, owner: Owner) -> redisson_sync::Result<bool> {
        each_hash_lock!(self, lock => lock.is_held_by(owner).await)
    }

    /// The lock's remaining lease (`PTTL`).
    pub async fn remaining_ttl(&self) -> redisson_sync::Result<Ttl> {
        each_lock!(self, lock => lock.remaining_ttl().await)
    }

    /// The kind's inherent `with_lock` (its section need not be `Send`).
    pub async fn with_lock<F, Fut, T, E>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
        E: From<redisson_sync::Error>,
    {
        each_lock!(self, lock => lock.with_lock(f).await)
    }

    /// The kind's inherent `with_lock_options`.
    pub async fn with_lock_options<F, Fut, T, E>(
        &self,
        options: &WithLockOptions,
        f: F,
    ) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
        E: From<redisson_sync::Error>,
    {
        each_lock!(self, lock => lock.with_lock_options(options, f).await)
    }

    /// The kind's inherent `try_with_lock`.
    pub async fn try_with_lock<F, Fut, T, E>(
        &self,
        wait: Duration,
        options: &WithLockOptions,
        f: F,
    ) -> Result<Option<T>, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
        E: From<redisson_sync::Error>,
    {
        each_lock!(self, lock => lock.try_with_lock(wait, options, f).await)
    }
}

/// Asserts that a [`numsub`] of `channel` is `want` right now (for the kinds that have a
/// channel; nothing to check for the others).
pub async fn assert_numsub(raw: &mut MultiplexedConnection, channel: Option<&str>, want: i64) {
    if let Some(ch) = channel {
        assert_eq!(numsub(raw, ch).await, want, "{ch}");
    }
}
