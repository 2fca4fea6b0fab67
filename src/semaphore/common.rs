//! What both semaphores share: their arguments as Redis takes them, the client's clock, the
//! script that sets their permits, and the id of a permit.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use crate::conn::Script;
use crate::error::{Error, Result};

/// `lua/semaphore/try_set.lua`: RedissonSemaphore.trySetPermitsAsync (also the
/// permit-expirable semaphore's, which has the same effects).
pub(super) static TRY_SET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/semaphore/try_set.lua")));

/// Milliseconds since the Unix epoch by this host's clock: what the permit-expirable
/// semaphore's scores are, as in Redisson (which also uses the client's clock).
pub(crate) use crate::clock::epoch_ms as now_epoch_ms;

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
    crate::options::millis(what, d).map(|ms| ms as i64)
}

/// The id of one permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore): 16 random bytes, stored raw in
/// Redis and shown (and parsed) as 32 lowercase hex characters, exactly as Redisson's API
/// returns and accepts them. Ids made by Java parse here, and the other way round.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PermitId(pub(super) [u8; 16]);

impl PermitId {
    pub(super) fn random() -> Self {
        Self(uuid::Uuid::new_v4().into_bytes())
    }

    /// Parses the 32-character hex form (either case).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] unless `hex` is exactly 32 hex characters.
    pub fn parse(hex: &str) -> Result<Self> {
        let bytes = hex.as_bytes();
        if bytes.len() != 32 {
            // Echoed only when short: a message does not repeat a megabyte of input.
            let count = hex.chars().count();
            return Err(Error::InvalidArgument(if bytes.len() <= 64 {
                format!("a permit id is 32 hex characters, got {count} characters: {hex:?}")
            } else {
                format!("a permit id is 32 hex characters, got {count} characters")
            }));
        }
        let mut id = [0u8; 16];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let digit = |c: u8| (c as char).to_digit(16);
            match (digit(pair[0]), digit(pair[1])) {
                (Some(hi), Some(lo)) => id[i] = (hi * 16 + lo) as u8,
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "a permit id is 32 hex characters, got {hex:?}"
                    )));
                }
            }
        }
        Ok(Self(id))
    }

    /// The raw 16 bytes, as stored in Redis.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

impl FromStr for PermitId {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}
