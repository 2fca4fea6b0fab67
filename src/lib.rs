#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(rust_2018_idioms)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(not(test), deny(clippy::panic, clippy::print_stdout))]

mod acquire;
mod client;
mod config;
mod connection;
mod detach;
mod error;
mod fair;
mod guard;
mod handle;
mod kind;
mod lock;
mod naming;
mod owner;
mod pubsub;
mod rwlock;
mod scripts;
mod watchdog;

pub use client::{Client, ClientBuilder};
pub use config::Config;
pub use error::{BuildError, Error, Result};
pub use fair::FairLock;
pub use guard::LockGuard;
pub use handle::{LockOptions, Ttl};
pub use lock::Lock;
pub use owner::Owner;
pub use redis;
pub use rwlock::{ReadLock, RwLock, WriteLock};

/// This crate's version, e.g. for a health endpoint or a conformance report.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
