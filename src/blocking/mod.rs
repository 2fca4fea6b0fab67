//! The blocking API, for sync Rust (CLI tools, build scripts, threads of a sync service, FFI):
//! a [`Client`] and every primitive, guard and method of the async API as calls that block the
//! calling thread, like `reqwest::blocking`. The locks are the same locks: a thread holding
//! one excludes async tasks and Java threads alike. The [guide page](crate::guide::blocking)
//! tells the whole story.
//!
//! ```rust,no_run
//! use std::time::Duration;
//! use redisson_sync::{blocking, Error};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//!     let client = blocking::Client::builder().url("redis://127.0.0.1:6379").connect()?;
//!     let lock = client.lock("order:42"); // the same lock as Java's getLock("order:42")
//!
//!     let total = lock.with_lock(|| Ok::<_, Error>(6 * 7))?;
//!     println!("{total}");
//!
//!     let guard = lock.lock()?; // this thread is the owner
//!     guard.unlock()?;
//!
//!     if let Some(guard) = lock.try_lock_with_lease(Duration::from_secs(2), Duration::from_secs(10))? {
//!         guard.unlock()?;
//!     }
//!
//!     client.shutdown()?; // before exit: completes the releases of dropped guards
//!     Ok(())
//! }
//! ```
//!
//! # One handle type, written once
//!
//! Every primitive is a [`Blocking<P>`](Blocking) over the async one: the lock methods exist
//! once for every `P:` [`DistributedLock`](crate::DistributedLock), the object and expiry
//! methods once for every `P:` [`Expirable`](crate::Expirable), and each semaphore, the latch
//! and the kinds with methods of their own (fenced tokens, read-write halves, hold counts) add
//! theirs. The aliases ([`Lock`], [`FairLock`], [`Semaphore`], ...) name the usual ones. A
//! blocking guard ([`LockGuard`], [`Permits`], [`PermitGuard`]) wraps the async guard.
//!
//! # The runtime
//!
//! The client owns a current-thread Tokio runtime driven by a thread of its own (one thread
//! per client, as `reqwest::blocking`), on which the async client is built
//! ([`ClientBuilder::runtime`](crate::ClientBuilder::runtime)): that thread drives every I/O
//! and timer, and runs the client's background work (connections, pub/sub, the watchdog,
//! releases of dropped guards). A call does not travel to that thread: it runs on the calling
//! thread (`Handle::block_on`), so it borrows its arguments, many threads call at once without
//! queueing behind one another's work, and the caller is not inside a task. The runtime stops
//! when the client's last handle (client, primitive or guard) is dropped, after completing
//! scheduled releases as [`Client::shutdown`] does.
//!
//! # Owners
//!
//! Reentrancy is per owner, as in the async API, and the owner of a blocking call is **the
//! calling thread**: every acquisition captures [`Owner::current`](crate::Owner::current) on
//! the caller's thread (a thread owner, numbered from 2^62) and passes it as the
//! [`LockOptions::owner`](crate::LockOptions::owner), unless the options name one. Two threads
//! exclude each other; one thread re-enters; the hash field is `<client id>:<thread owner id>`.
//! A guard may be released from another thread (it carries its owner).
//!
//! # Inside async code: refused
//!
//! A call made where a Tokio runtime is current (an async task, a `block_on`, this client's
//! own thread) returns [`Error::InAsyncContext`](crate::Error::InAsyncContext) at once,
//! without touching Redis, instead of blocking a thread the runtime needs (which can deadlock:
//! the holder it waits for may be a task of that very thread). `reqwest::blocking` panics
//! there; an error is easier to handle and to test. Tokio cannot tell a `spawn_blocking`
//! closure from an async task, so calls there are refused too unless wrapped in
//! [`allow_in_runtime`]. Building a client and dropping handles or guards are allowed
//! anywhere.

mod client;
mod events;
mod guard;
mod handle;
mod latch;
mod lock;
mod object;
mod runtime;
mod semaphore;

pub use client::{Client, ClientBuilder};
pub use events::EventIter;
pub use guard::LockGuard;
pub use handle::Blocking;
pub use lock::{CompositePart, HoldQueries};
pub use runtime::allow_in_runtime;
pub use semaphore::{PermitGuard, Permits};

/// A blocking reentrant lock ([`Lock`](crate::Lock)).
pub type Lock = Blocking<crate::lock::Lock>;
/// A blocking fair lock ([`FairLock`](crate::FairLock)).
pub type FairLock = Blocking<crate::lock::FairLock>;
/// A blocking read-write lock ([`RwLock`](crate::RwLock)), with blocking halves.
pub type RwLock = Blocking<crate::lock::RwLock>;
/// The read half of a blocking read-write lock ([`ReadLock`](crate::ReadLock)).
pub type ReadLock = Blocking<crate::lock::ReadLock>;
/// The write half of a blocking read-write lock ([`WriteLock`](crate::WriteLock)).
pub type WriteLock = Blocking<crate::lock::WriteLock>;
/// A blocking fenced lock ([`FencedLock`](crate::FencedLock)).
pub type FencedLock = Blocking<crate::lock::FencedLock>;
/// A blocking spin lock ([`SpinLock`](crate::SpinLock)).
pub type SpinLock = Blocking<crate::lock::SpinLock>;
/// A blocking non-reentrant lock ([`NonReentrantLock`](crate::NonReentrantLock)).
pub type NonReentrantLock = Blocking<crate::lock::NonReentrantLock>;
/// A blocking non-reentrant fair lock ([`NonReentrantFairLock`](crate::NonReentrantFairLock)).
pub type NonReentrantFairLock = Blocking<crate::lock::NonReentrantFairLock>;
/// A blocking token lock ([`TokenLock`](crate::TokenLock)).
pub type TokenLock = Blocking<crate::lock::TokenLock>;
/// A blocking multi-lock ([`MultiLock`](crate::MultiLock)).
pub type MultiLock = Blocking<crate::multi::MultiLock>;
/// A blocking RedLock ([`RedLock`](crate::RedLock)).
pub type RedLock = Blocking<crate::multi::RedLock>;
/// A blocking counting semaphore ([`Semaphore`](crate::Semaphore)).
pub type Semaphore = Blocking<crate::semaphore::Semaphore>;
/// A blocking permit-expirable semaphore
/// ([`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore)).
pub type PermitExpirableSemaphore = Blocking<crate::semaphore::PermitExpirableSemaphore>;
/// A blocking count-down latch ([`CountDownLatch`](crate::CountDownLatch)).
pub type CountDownLatch = Blocking<crate::latch::CountDownLatch>;
/// A lock of any kind, picked at run time ([`Blocking::boxed`]).
pub type AnyLock = Blocking<Box<dyn crate::lock::DistributedLock>>;
