//! What an inspection finds at a name: a [`Snapshot`] with the [`StructureKind`], the holders,
//! waiters, read markers and permits, and how a bare integer is read ([`CounterHint`]).

use std::fmt;

use crate::options::Ttl;
use crate::semaphore::PermitId;

/// The kind of structure found at a name, from its Redis layout alone (docs/LAYOUT.md).
///
/// The rules, in order:
///
/// * A **hash** `N` whose values are all integers (hold counts) is a lock:
///   * with a `mode` field (`read` or `write`): [`Rw`](Self::Rw), a read-write lock;
///   * else, when the fair lock's queue `redisson_lock_queue:{N}` or its deadlines
///     `redisson_lock_timeout:{N}` exist: [`Fair`](Self::Fair);
///   * else, when the fenced lock's counter `redisson_lock_token:{N}` exists:
///     [`Fenced`](Self::Fenced);
///   * else [`Lock`](Self::Lock). A spin lock and a non-reentrant lock store exactly what a
///     reentrant lock stores, and so does a fair lock nobody waits for (its queue keys exist
///     only while waiters are queued): they are reported as `Lock` too.
/// * A **string** `N` holding an integer:
///   * with the acquired-permits zset `{N}:timeout`: [`PermitSemaphore`](Self::PermitSemaphore);
///   * else a [`Semaphore`](Self::Semaphore) or a [`Latch`](Self::Latch), which Redis cannot
///     tell apart (both are a bare integer). A value of 0 or below is a semaphore (a latch is
///     deleted when it reaches 0). Otherwise the caller's [`CounterHint`] decides; without one
///     ([`CounterHint::Auto`]) it is a latch only when someone waits on the latch's channel
///     (`redisson_countdownlatch__channel__{N}` has subscribers) and nobody on the
///     semaphore's (`redisson_sc:{N}`), and a semaphore otherwise;
///     [`Snapshot::kind_inferred`] is then `true`.
/// * **No key** `N`:
///   * the fair lock's queue or deadlines exist (waiters, no holder): [`Fair`](Self::Fair);
///   * else the zset `{N}:timeout` exists (every permit acquired, `N` deleted by hand):
///     [`PermitSemaphore`](Self::PermitSemaphore);
///   * else the fenced lock's counter exists (a free fenced lock keeps its counter for ever):
///     [`Fenced`](Self::Fenced), with its token and no holder;
///   * else [`None`](Self::None).
/// * Anything else (a list, a set, a hash with a value that is not a count, a string that is
///   not an integer) is not a Redisson structure of this crate: [`Error::WrongType`](crate::Error::WrongType).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum StructureKind {
    /// A reentrant lock's hash (`RLock`; also `RSpinLock` and the non-reentrant lock), §2.
    Lock,
    /// A fair lock (`RFairLock`): the lock hash and/or its waiter queue, §4.
    Fair,
    /// A read-write lock (`RReadWriteLock`): a lock hash with a `mode` field, §5.
    Rw,
    /// A fenced lock (`RFencedLock`): a lock hash and/or its token counter, §6.2.
    Fenced,
    /// A counting semaphore (`RSemaphore`): an integer string, §6.4.
    Semaphore,
    /// A permit-expirable semaphore (`RPermitExpirableSemaphore`): an integer string and the
    /// zset of acquired permits, §6.5.
    PermitSemaphore,
    /// A count-down latch (`RCountDownLatch`): an integer string, §6.6.
    Latch,
    /// A [`TokenLock`](crate::TokenLock) (not a Redisson structure): a string holding the
    /// holder's token, shown as its one holder (parsed into client id and owner when it has
    /// the `<uuid>:<owner>` or `<uuid>` shape).
    Token,
    /// Nothing at all under the name.
    None,
}

impl StructureKind {
    /// The kind's short name: `lock`, `fair`, `rw`, `fenced`, `semaphore`,
    /// `permit_semaphore`, `latch`, `token` or `none` (the CLI's `kind`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Fair => "fair",
            Self::Rw => "rw",
            Self::Fenced => "fenced",
            Self::Semaphore => "semaphore",
            Self::PermitSemaphore => "permit_semaphore",
            Self::Latch => "latch",
            Self::Token => "token",
            Self::None => "none",
        }
    }

    /// `true` for the lock kinds (`Lock`, `Fair`, `Rw`, `Fenced`, `Token`).
    pub fn is_lock(&self) -> bool {
        matches!(
            self,
            Self::Lock | Self::Fair | Self::Rw | Self::Fenced | Self::Token
        )
    }
}

impl fmt::Display for StructureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The mode of a read-write lock, and of each of its holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HoldMode {
    /// A read hold (a reader field `<client id>:<owner>`), or a lock in mode `read`.
    Read,
    /// A write hold (a field `<client id>:<owner>:write`), or a lock in mode `write`.
    Write,
}

impl HoldMode {
    /// `read` or `write`, as Redisson writes the `mode` field.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

impl fmt::Display for HoldMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One holder of a lock: one field of the lock hash.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The hash field as stored: `<client id>:<owner>`, with `:write` for a writer.
    pub field: String,
    /// The client id (a UUID, the first 36 characters of the field); `None` when the field
    /// does not have the form `<36-character uuid>:<decimal>`.
    pub client_id: Option<String>,
    /// The owner: this crate's owner id, or the Java thread id; `None` when the field does not
    /// parse.
    pub owner: Option<u64>,
    /// The hold count (the field's value).
    pub count: i64,
    /// For a read-write lock, whether this is a read or a write hold; `None` for other locks.
    pub mode: Option<HoldMode>,
    /// `true` when the holder is the inspecting client (its client id is this client's).
    pub this_client: bool,
}

/// One waiter in a fair lock's queue.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiter {
    /// The queue entry as stored: the waiter's holder field `<client id>:<owner>`.
    pub field: String,
    /// The client id; `None` when the field does not parse (as for [`Holder::client_id`]).
    pub client_id: Option<String>,
    /// The owner (owner id or Java thread id); `None` when the field does not parse.
    pub owner: Option<u64>,
    /// The waiter's deadline in epoch milliseconds: its score in `redisson_lock_timeout:{N}`,
    /// the instant by which it must have taken the lock (docs/LAYOUT.md §4.4). `None` when the
    /// deadline zset has no entry for it.
    pub deadline_ms: Option<i64>,
    /// `true` when the waiter is the inspecting client.
    pub this_client: bool,
}

/// One read hold's timeout marker key of a read-write lock (docs/LAYOUT.md §5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadMarker {
    /// The reader field the marker belongs to.
    pub holder: String,
    /// Which of the reader's holds: `1 ..= count`.
    pub index: u64,
    /// The marker's key: `{N}:<holder>:rwlock_timeout:<index>`.
    pub key: String,
    /// The marker's TTL: the lease left to that hold ([`Ttl::Absent`] once it expired).
    pub ttl: Ttl,
}

/// One acquired permit of a permit-expirable semaphore (docs/LAYOUT.md §6.5).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcquiredPermit {
    /// The permit id as lowercase hex (32 characters for the ids Redisson and this crate make).
    pub id: String,
    /// When its lease ends, in epoch milliseconds; `None` for a permit without lease (score
    /// `922337203685477`). A past value means the permit expired and is reclaimed by the next
    /// operation on the semaphore.
    pub expires_ms: Option<i64>,
}

impl AcquiredPermit {
    /// The id as a [`PermitId`], to release it; `None` when it is not 16 bytes.
    pub fn permit_id(&self) -> Option<PermitId> {
        PermitId::parse(&self.id).ok()
    }
}

/// What [`Client::inspect`](crate::Client::inspect) found at a name.
///
/// Fields that do not apply to the kind are empty or `None`: `holders` for the lock kinds,
/// `queue` for the fair lock, `read_markers` and `mode` for the read-write lock, `token` for
/// the fenced lock, `permits` for the semaphores, `acquired` for the permit-expirable
/// semaphore, `count` for the latch.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Snapshot {
    /// The name inspected: the structure's main key.
    pub name: String,
    /// What lives there.
    pub kind: StructureKind,
    /// `true` when the kind was chosen between semaphore and latch by the subscriber rule
    /// of [`StructureKind`], not read from the layout or given by the caller.
    pub kind_inferred: bool,
    /// The TTL of the main key (`PTTL N`): [`Ttl::Absent`] when there is no key `N`.
    pub ttl: Ttl,
    /// The mode of a read-write lock: `write` while a writer holds it.
    pub mode: Option<HoldMode>,
    /// The holders of a lock, one per hash field (the `mode` field excepted), in the order
    /// Redis lists them.
    pub holders: Vec<Holder>,
    /// The fair lock's waiters, head first.
    pub queue: Vec<Waiter>,
    /// How many waiters the fair lock's queue holds (`LLEN`; more than `queue` lists when the
    /// listing was cut at the limit).
    pub queue_len: u64,
    /// The read holds' timeout markers of a read-write lock, by holder and index, with their
    /// TTLs.
    pub read_markers: Vec<ReadMarker>,
    /// The fenced lock's last token (`redisson_lock_token:{N}`): the token of the current
    /// holder's latest acquisition, if it holds.
    pub token: Option<u64>,
    /// The available permits of a semaphore (may be negative for `RSemaphore`).
    pub permits: Option<i64>,
    /// The acquired permits of a permit-expirable semaphore, earliest lease end first.
    pub acquired: Vec<AcquiredPermit>,
    /// How many permits are acquired (`ZCARD {N}:timeout`).
    pub acquired_len: u64,
    /// The count of a count-down latch.
    pub count: Option<i64>,
    /// `true` when a listing (hash fields, waiters, permits, markers) was cut at the limit.
    pub truncated: bool,
}

impl Snapshot {
    /// `true` when the structure is a lock with at least one holder.
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }
}

/// How an inspection reads a plain integer string, which a semaphore and a count-down latch
/// both are (see [`StructureKind`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterHint {
    /// Decide by the rule of [`StructureKind`]: a latch only when its channel has subscribers
    /// and the semaphore's has none.
    #[default]
    Auto,
    /// Report a positive integer string as a [`StructureKind::Semaphore`].
    Semaphore,
    /// Report a positive integer string as a [`StructureKind::Latch`].
    Latch,
}
