//! The semaphores: Redisson's `RSemaphore` ([`Semaphore`], in [`counting`]) and
//! `RPermitExpirableSemaphore` ([`PermitExpirableSemaphore`], in [`expirable`]), each with its
//! own scripts (`lua/semaphore/`, `lua/permit_semaphore/`) and names (docs/LAYOUT.md §6.4,
//! §6.5). Both wait through the wait engine on `redisson_sc:{N}` with the permits wake policy:
//! a message carrying a count `k` wakes up to `k` of the client's waiters.

mod counting;
mod expirable;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;

use crate::error::{Error, Result};
use crate::lock::unexpected;

pub use counting::{Permits, Semaphore};
pub use expirable::{PermitExpirableSemaphore, PermitId};

/// An integer reply of a script or command (nil counts as 0, as Redisson's `LongCodec` does).
pub(crate) fn int_reply(script: &'static str, value: Value) -> Result<i64> {
    match value {
        Value::Int(n) => Ok(n),
        Value::Nil => Ok(0),
        Value::BulkString(ref s) => std::str::from_utf8(s)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| unexpected(script, &value)),
        other => Err(unexpected(script, &other)),
    }
}

/// A 0/1 reply as a bool.
pub(crate) fn bool_reply(script: &'static str, value: Value) -> Result<bool> {
    match value {
        Value::Int(1) => Ok(true),
        Value::Int(0) | Value::Nil => Ok(false),
        other => Err(unexpected(script, &other)),
    }
}

/// Milliseconds since the Unix epoch by this host's clock: what the permit-expirable
/// semaphore's scores are, as in Redisson (which also uses the client's clock).
pub(crate) fn now_epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Permits asked for in one call: at least one (Redisson rejects negative counts; this crate
/// takes `u32`, so they cannot be expressed) and no more than Java's `int` holds.
pub(crate) fn check_permits(permits: u32) -> Result<()> {
    if permits > i32::MAX as u32 {
        return Err(Error::InvalidArgument(format!(
            "at most {} permits can be asked for at once (Java's int), got {permits}",
            i32::MAX
        )));
    }
    Ok(())
}

/// A time to live or lease in whole milliseconds (at least 1 ms).
pub(crate) fn duration_ms(what: &str, d: Duration) -> Result<i64> {
    // At most 2^62: an i64.
    crate::lock::millis(what, d).map(|ms| ms as i64)
}
