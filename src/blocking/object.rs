//! The object and expiry methods, blocking: written once for every `Blocking<P>` whose `P` is
//! [`Expirable`] (every lock kind, both semaphores, the latch).

use std::time::{Duration, SystemTime};

use super::handle::Blocking;
use crate::error::Result;
use crate::object::{Expirable, ExpireTime};
use crate::options::Ttl;

impl<P: Expirable> Blocking<P> {
    /// Deletes the object as the async type's `delete` does (Redisson's `delete()`; a lock is
    /// force-unlocked); `true` when something was deleted.
    ///
    /// # Errors
    ///
    /// As the async type's `delete`;
    /// [`Error::InAsyncContext`](crate::Error::InAsyncContext) inside async code.
    pub fn delete(&self) -> Result<bool> {
        self.rt.call("delete", Expirable::delete(&self.inner))
    }

    /// `true` when the object's name exists (Redisson's `isExists()`).
    ///
    /// # Errors
    ///
    /// As [`delete`](Self::delete).
    pub fn is_exists(&self) -> Result<bool> {
        self.rt.call("is_exists", Expirable::is_exists(&self.inner))
    }

    /// Sets the time to live of the object's keys (Redisson's `expire(Duration)`); `true` when
    /// set. On a lock under the watchdog it lasts until the next renewal, as in Redisson.
    ///
    /// # Errors
    ///
    /// As [`delete`](Self::delete), plus
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a time to live under
    /// 1 ms.
    pub fn expire(&self, ttl: Duration) -> Result<bool> {
        self.rt.call("expire", Expirable::expire(&self.inner, ttl))
    }

    /// [`expire`](Self::expire) only where the keys have an expiry (Redisson's
    /// `expireIfSet`).
    ///
    /// # Errors
    ///
    /// As [`expire`](Self::expire), plus [`Error::Unsupported`](crate::Error::Unsupported)
    /// before Redis 7.0.
    pub fn expire_if_set(&self, ttl: Duration) -> Result<bool> {
        self.rt
            .call("expire_if_set", Expirable::expire_if_set(&self.inner, ttl))
    }

    /// [`expire`](Self::expire) only where the keys have none (Redisson's `expireIfNotSet`).
    ///
    /// # Errors
    ///
    /// As [`expire_if_set`](Self::expire_if_set).
    pub fn expire_if_not_set(&self, ttl: Duration) -> Result<bool> {
        self.rt.call(
            "expire_if_not_set",
            Expirable::expire_if_not_set(&self.inner, ttl),
        )
    }

    /// [`expire`](Self::expire) only where it makes the expiry later (Redisson's
    /// `expireIfGreater`).
    ///
    /// # Errors
    ///
    /// As [`expire_if_set`](Self::expire_if_set).
    pub fn expire_if_greater(&self, ttl: Duration) -> Result<bool> {
        self.rt.call(
            "expire_if_greater",
            Expirable::expire_if_greater(&self.inner, ttl),
        )
    }

    /// [`expire`](Self::expire) only where it makes the expiry earlier (Redisson's
    /// `expireIfLess`).
    ///
    /// # Errors
    ///
    /// As [`expire_if_set`](Self::expire_if_set).
    pub fn expire_if_less(&self, ttl: Duration) -> Result<bool> {
        self.rt.call(
            "expire_if_less",
            Expirable::expire_if_less(&self.inner, ttl),
        )
    }

    /// Sets the expiry of the object's keys to an instant (Redisson's `expire(Instant)`).
    ///
    /// # Errors
    ///
    /// As [`expire`](Self::expire).
    pub fn expire_at(&self, at: SystemTime) -> Result<bool> {
        self.rt
            .call("expire_at", Expirable::expire_at(&self.inner, at))
    }

    /// Removes the expiry of the object's keys (Redisson's `clearExpire()`); `true` when it had
    /// one.
    ///
    /// # Errors
    ///
    /// As [`delete`](Self::delete).
    pub fn clear_expire(&self) -> Result<bool> {
        self.rt
            .call("clear_expire", Expirable::clear_expire(&self.inner))
    }

    /// The name's time to live (Redisson's `remainTimeToLive()`).
    ///
    /// # Errors
    ///
    /// As [`delete`](Self::delete).
    pub fn remaining_ttl(&self) -> Result<Ttl> {
        self.rt
            .call("remaining_ttl", Expirable::remaining_ttl(&self.inner))
    }

    /// When the name expires (Redisson's `getExpireTime()`).
    ///
    /// # Errors
    ///
    /// As [`delete`](Self::delete).
    pub fn expire_time(&self) -> Result<ExpireTime> {
        self.rt
            .call("expire_time", Expirable::expire_time(&self.inner))
    }
}
