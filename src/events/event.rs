//! What an event stream tells: [`Event`], its [`EventKind`], how it was told ([`SeenBy`],
//! [`Notice`]) and whether keyspace notifications are used ([`Keyspace`]).

use std::fmt;
use std::time::SystemTime;

use crate::inspect::{Holder, Snapshot};

/// What happened at the name. The holder of an event is the one the snapshots show; what was
/// heard says why a holder left:
///
/// | kind | with keyspace notifications on | without |
/// |---|---|---|
/// | [`Acquired`](Self::Acquired) | seen at once (`hset`/`hincrby`/`set`) | seen at the next read: after an unlock message (a handoff) or at the next poll |
/// | [`Released`](Self::Released) | `hincrby`/`hdel` on the lock, then `del` | an unlock message, the lock gone (or a holder gone while the lock remains) |
/// | [`Expired`](Self::Expired) | `expired` | inferred: the lock gone without message once its last TTL ran out |
/// | [`ForceUnlocked`](Self::ForceUnlocked) | `del` alone, with the unlock message | *not told apart from `Released`*: both delete the lock and publish the same message |
/// | [`Deleted`](Self::Deleted) | `del` alone, no message (a `DEL`, or an eviction) | the lock gone without message before its TTL ran out |
///
/// A spin lock's and a token lock's releases publish nothing: without keyspace notifications
/// a spin lock's release is reported as `Deleted`, a token lock's as `Released` (a token
/// lock's `DEL` then looks the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// The first event of every stream: the state when the stream started (its subscriptions
    /// confirmed), and, in [`Event::keyspace`], whether keyspace notifications are used.
    Watching,
    /// A new holder (lock kinds: a new hash field), or permits taken from a semaphore
    /// ([`Event::permits`]).
    Acquired,
    /// A holder's hold count went up.
    Reentered,
    /// A holder released a hold ([`Event::holds`] left, 0 when it left), or permits came
    /// back to a semaphore ([`Event::permits`]).
    Released,
    /// The structure's key expired (its lease ran out), taking its holders with it.
    Expired,
    /// The lock was removed whoever held it (Redisson's `forceUnlock()`, `delete()`, the
    /// crate's `force_unlock`, the CLI's `force-unlock`).
    ForceUnlocked,
    /// The key was deleted without an unlock message (a `DEL`, an eviction).
    Deleted,
    /// A count-down latch reached zero (its key deleted, `0` on its channel).
    Opened,
    /// Any other change: a fair lock's queue, a latch's count, a semaphore created, a
    /// read-write lock's mode.
    Changed,
    /// The subscription was re-established (a reconnection, a Sentinel failover, a moved
    /// slot): messages may have been lost, so what changed meanwhile is told from snapshots.
    Gap,
}

impl EventKind {
    /// `watching`, `acquired`, `reentered`, `released`, `expired`, `force_unlocked`,
    /// `deleted`, `opened`, `changed` or `gap` (the CLI's `event`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Watching => "watching",
            Self::Acquired => "acquired",
            Self::Reentered => "reentered",
            Self::Released => "released",
            Self::Expired => "expired",
            Self::ForceUnlocked => "force_unlocked",
            Self::Deleted => "deleted",
            Self::Opened => "opened",
            Self::Changed => "changed",
            Self::Gap => "gap",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an event was told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SeenBy {
    /// A message on one of the structure's channels (an unlock message, a semaphore's or a
    /// latch's), with the snapshots around it.
    Message,
    /// A keyspace notification of the structure's key (`expired`, `del`, `hincrby`, ...).
    Keyspace,
    /// Only the difference between two snapshots (and the last TTL): inferred, not heard.
    Snapshot,
}

impl SeenBy {
    /// `message`, `keyspace` or `snapshot`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Keyspace => "keyspace",
            Self::Snapshot => "snapshot",
        }
    }
}

impl fmt::Display for SeenBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One message or keyspace notification heard on a channel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Notice {
    /// The channel: `redisson_lock__channel:{N}`, `__keyspace@0__:N`, ...
    pub channel: String,
    /// The payload (lossy UTF-8): `0`, `1`, a permit count, or a keyspace event (`del`).
    pub payload: String,
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} on {}", self.payload, self.channel)
    }
}

/// Whether an event stream uses keyspace notifications, and why not
/// ([`EventStream::keyspace`](super::EventStream::keyspace), [`Event::keyspace`] of the first
/// event).
///
/// They need `notify-keyspace-events` with `K` and the classes `g`, `h`, `x` and `$` (or `A`),
/// e.g. `CONFIG SET notify-keyspace-events KA`. Without them an expiry is inferred from a
/// snapshot rather than seen, a force unlock looks like a release, a `DEL` is told from an
/// expiry by the last TTL only, and an acquisition of a free lock is seen at the next poll.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Keyspace {
    /// On: the server's `notify-keyspace-events` has every class needed.
    On {
        /// The server's `notify-keyspace-events`.
        config: String,
    },
    /// Off, or missing a class: the stream subscribes anyway (notifications are used if they
    /// are turned on later) but tells nothing from their absence.
    Off {
        /// The server's `notify-keyspace-events` (empty: off).
        config: String,
    },
    /// The setting could not be read (`CONFIG GET` refused: an ACL user without `@admin`,
    /// a managed Redis): subscribed, notifications used when they come, their absence not.
    Unknown {
        /// Why it could not be read.
        reason: String,
    },
    /// Not usable here: in a Redis Cluster, keyspace notifications are published only on the
    /// node holding the key, and a subscription is routed by the channel's name, which
    /// reaches that node only when the name has a hash tag (`{order}:42`).
    Unsupported {
        /// Why.
        reason: String,
    },
    /// Not asked for ([`Events::keyspace`](super::Events::keyspace)`(false)`).
    NotRequested,
}

impl Keyspace {
    /// `true` when the server has every class the stream needs.
    pub fn is_on(&self) -> bool {
        matches!(self, Self::On { .. })
    }

    /// What the stream misses without them: empty when [`is_on`](Self::is_on).
    pub fn missed(&self) -> &'static str {
        if self.is_on() {
            ""
        } else {
            "an expiry is inferred from a snapshot (the key gone, no message, its last TTL run \
             out) rather than seen; a force unlock is reported as a release; a DEL is told from \
             an expiry by the last TTL only; an acquisition of a free lock is seen at the next \
             poll"
        }
    }

    /// The settings `notify-keyspace-events` needs for the stream: `K` and `g`, `h`, `x`,
    /// `$` (or `A`, which has them all).
    pub(crate) fn from_config(config: &str) -> Self {
        let has = |c| config.contains(c);
        let classes = has('A') || ['g', 'h', 'x', '$'].into_iter().all(has);
        if has('K') && classes {
            Self::On {
                config: config.to_owned(),
            }
        } else {
            Self::Off {
                config: config.to_owned(),
            }
        }
    }
}

impl fmt::Display for Keyspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::On { config } => write!(f, "on (notify-keyspace-events {config:?})"),
            Self::Off { config } => write!(
                f,
                "off (notify-keyspace-events {config:?}; needs K and A, or K with g, h, x and $)"
            ),
            Self::Unknown { reason } => write!(f, "unknown ({reason})"),
            Self::Unsupported { reason } => write!(f, "not used ({reason})"),
            Self::NotRequested => f.write_str("not requested"),
        }
    }
}

/// One thing that happened at the name, as told by [`EventStream`](super::EventStream).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The name (the structure's key, after the client's name mapper).
    pub name: String,
    /// The holder concerned (lock kinds): as it is now for `Acquired`, `Reentered` and a
    /// partial `Released`; as it was last seen for one that left (`Released`, `Expired`,
    /// `ForceUnlocked`, `Deleted`). Its `client_id` and `owner` are a Java client's UUID and
    /// thread id for a Redisson holder.
    pub holder: Option<Holder>,
    /// The holder's hold count after the event: 0 when it left.
    pub holds: Option<i64>,
    /// How many permits a semaphore's `Acquired` or `Released` concerns.
    pub permits: Option<i64>,
    /// How it was told.
    pub seen_by: SeenBy,
    /// The messages and keyspace notifications heard since the snapshot before (in order).
    pub heard: Vec<Notice>,
    /// Whether keyspace notifications are used: on the first event ([`EventKind::Watching`]).
    pub keyspace: Option<Keyspace>,
    /// The state read after the event.
    pub snapshot: Snapshot,
    /// When that read returned.
    pub at: SystemTime,
}
