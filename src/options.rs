//! Options of one acquisition, and what `PTTL` says about a key.

use std::time::Duration;

use crate::owner::Owner;

/// Options for one acquisition: an explicit lease and/or an explicit owner.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redisson_sync::{LockOptions, Owner};
///
/// let opts = LockOptions::new().lease(Duration::from_secs(10)).owner(Owner::new(7));
/// assert_eq!(opts.lease_time(), Some(Duration::from_secs(10)));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockOptions {
    lease: Option<Duration>,
    owner: Option<Owner>,
}

impl LockOptions {
    /// No lease (the watchdog renews the lock while its guard lives) and the current owner.
    pub fn new() -> Self {
        Self::default()
    }

    /// An explicit lease: the lock expires this long after it is granted, and is never renewed
    /// (Redisson's `lock(leaseTime, unit)`). Must be at least 1 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Acquire for this owner instead of [`Owner::current`] (Redisson's `threadId` overloads).
    pub fn owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The explicit lease, if any.
    pub fn lease_time(&self) -> Option<Duration> {
        self.lease
    }

    /// The explicit owner, if any.
    pub fn explicit_owner(&self) -> Option<Owner> {
        self.owner
    }
}

/// What `PTTL` says about a lock key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// The key does not exist (`PTTL` = -2): the lock is free.
    Absent,
    /// The key exists without expiry (`PTTL` = -1).
    Persistent,
    /// The key expires after this long.
    Remaining(Duration),
}

impl Ttl {
    pub(crate) fn from_pttl(ms: i64) -> Self {
        match ms {
            -1 => Self::Persistent,
            ms if ms < 0 => Self::Absent,
            ms => Self::Remaining(Duration::from_millis(ms.unsigned_abs())),
        }
    }

    /// The value as Redis and Redisson's `remainTimeToLive()` report it: -2, -1 or milliseconds.
    pub fn as_redis_millis(self) -> i64 {
        match self {
            Self::Absent => -2,
            Self::Persistent => -1,
            Self::Remaining(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_maps_pttl_replies() {
        assert_eq!(Ttl::from_pttl(-2), Ttl::Absent);
        assert_eq!(Ttl::from_pttl(-1), Ttl::Persistent);
        assert_eq!(Ttl::from_pttl(0), Ttl::Remaining(Duration::ZERO));
        assert_eq!(
            Ttl::from_pttl(1500),
            Ttl::Remaining(Duration::from_millis(1500))
        );
        for ms in [-2, -1, 0, 1500] {
            assert_eq!(Ttl::from_pttl(ms).as_redis_millis(), ms);
        }
    }
}
