//! Boxed futures: what the crate's object-safe traits (the lock kinds, the wait engine's
//! acquisitions, the credentials provider) return.

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The largest block glibc's malloc serves from its per-thread cache; larger ones take its
/// general path. A call's and an acquisition's futures are boxed once each, and tests keep
/// both within it (about 1,200 instructions per lock pair more when they were 2,448 and 2,232
/// bytes).
#[cfg(test)]
pub(crate) const SMALL_BLOCK: usize = 1032;
