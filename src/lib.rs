#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(rust_2018_idioms)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(not(test), deny(clippy::panic, clippy::print_stdout))]

// The layers, bottom up (README, "Architecture"): names and settings; the connection seam;
// the services on top of it (pub/sub, watchdog); the client's shared state and its record of
// holds; the wait engine; the primitives; the client facade.
mod config;
mod credentials;
mod error;
mod fasthash;
mod layout;
mod names;
pub mod observe;
mod options;
mod owner;

mod conn;
mod pubsub;
mod tasks;
mod watchdog;

mod holds;
mod shared;
mod wait;

mod latch;
mod lock;
mod multi;
mod semaphore;
mod token_lock;
mod with_lock;

mod inspect;

mod client;

pub use client::{Client, ClientBuilder};
pub use config::{Config, PubSubMode, SyncReplicas};
pub use credentials::{Credentials, CredentialsError, CredentialsProvider};
pub use error::{BuildError, Error, Result};
pub use inspect::{
    AcquiredPermit, CounterHint, HoldMode, Holder, Inspect, ReadMarker, Snapshot, StructureKind,
    Waiter,
};
pub use latch::CountDownLatch;
pub use lock::{
    AnyLock, DistributedLock, FairLock, FencedLock, Lock, LockGuard, NonReentrantFairLock,
    NonReentrantLock, ReadLock, RwLock, SpinBackoff, SpinLock, WriteLock,
};
pub use multi::{MultiLock, MultiLockGuard, RedLock};
pub use names::NameMapper;
pub use options::{LockOptions, Ttl};
pub use owner::Owner;
pub use redis;
pub use semaphore::{PermitExpirableSemaphore, PermitId, Permits, Semaphore};
pub use token_lock::{TokenFormat, TokenGuard, TokenLock};
pub use with_lock::WithLockOptions;

/// This crate's version, e.g. for a health endpoint or a conformance report.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
