//! Options of one acquisition, what `PTTL` says about a key, and durations as Redis takes
//! them.

use std::time::Duration;

use crate::config::MAX_LEASE_MS;
use crate::error::{Error, Result};
use crate::owner::Owner;

/// A lease in whole milliseconds, as the scripts take it.
pub(crate) fn lease_millis(lease: Duration) -> Result<u64> {
    millis("lease", lease)
}

/// A lease or time to live (`what`, for the error) in whole milliseconds, as Redis takes it:
/// at least 1 ms, at most 2^62 ms.
pub(crate) fn millis(what: &str, d: Duration) -> Result<u64> {
    let ms = d.as_millis();
    if ms == 0 {
        return Err(Error::InvalidArgument(format!(
            "a {what} must be at least 1 ms, got {d:?}"
        )));
    }
    if ms > u128::from(MAX_LEASE_MS) {
        return Err(Error::InvalidArgument(format!(
            "a {what} must be at most 2^62 ms (Redis rejects later expiry times), got {d:?}"
        )));
    }
    Ok(ms as u64)
}

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
    fn leases_are_whole_milliseconds_that_redis_accepts() {
        assert!(lease_millis(Duration::ZERO).is_err());
        assert!(lease_millis(Duration::from_micros(999)).is_err());
        assert_eq!(lease_millis(Duration::from_millis(1)).unwrap(), 1);
        assert_eq!(lease_millis(Duration::from_micros(1500)).unwrap(), 1);
        let max = Duration::from_millis(MAX_LEASE_MS);
        assert_eq!(lease_millis(max).unwrap(), 1 << 62);
        let err = lease_millis(max + Duration::from_millis(1)).unwrap_err();
        assert!(err.to_string().contains("at most 2^62 ms"), "{err}");
        assert!(lease_millis(Duration::MAX).is_err());
    }

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
