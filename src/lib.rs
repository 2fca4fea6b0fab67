#![doc = include_str!("../docs/guide/index.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(rust_2018_idioms)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(not(test), deny(clippy::panic, clippy::print_stdout))]

// The layers, bottom up (README, "Architecture"; tests/architecture.rs keeps them): the base
// (errors, settings, names, reply decoding, metrics); the connection seam; the services on
// top of it (pub/sub, watchdog); the client's shared state; the wait engine; the hold layer
// (locks only); the primitives over the engine (the locks and their one surface, the
// compositions of locks, the semaphores, the latch); inspection and events; the client facade;
// the blocking API over it.
mod clock;
pub mod config;
mod credentials;
mod error;
mod fasthash;
mod future;
mod layout;
mod names;
pub mod observe;
mod options;
mod owner;
mod reply;

mod conn;
mod pubsub;
mod tasks;
mod watchdog;

mod shared;
mod wait;

mod hold;
mod object;

mod latch;
mod lock;
mod multi;
mod semaphore;

pub mod events;
pub mod inspect;

mod client;

pub mod blocking;

pub mod guide;

pub use client::{Client, ClientBuilder};
pub use config::Config;
pub use conn::{Capabilities, Supported};
pub use error::{BuildError, Error, Result};
pub use latch::CountDownLatch;
pub use lock::{
    DistributedLock, FairLock, FencedLock, Lock, LockGuard, NonReentrantFairLock, NonReentrantLock,
    ReadLock, RwLock, SpinBackoff, SpinLock, TokenLock, ValueFormat, WithLockOptions, WriteLock,
};
pub use multi::{MultiLock, RedLock};
pub use object::{Expirable, ExpireTime};
pub use options::{LockOptions, Ttl};
pub use owner::Owner;
pub use redis;
pub use semaphore::{PermitExpirableSemaphore, PermitGuard, PermitId, Permits, Semaphore};

/// This crate's version, e.g. for a health endpoint or a conformance report.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
