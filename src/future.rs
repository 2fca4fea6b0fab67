//! Boxed futures: what the crate's object-safe traits (the lock kinds, the wait engine's
//! acquisitions, the credentials provider) return.

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
