//! The locks: one public lock surface ([`DistributedLock`], [`surface`]) over one guard
//! ([`LockGuard`]); the single lock kinds, one file each with its own scripts and names
//! ([`reentrant`], [`fair`], [`rwlock`], [`fenced`], [`spin`], [`nonreentrant`], [`token`]),
//! each a [`HoldKind`](crate::hold::HoldKind) over the hold layer, wrapped by a
//! [`LockCore`](single::LockCore); and critical sections ([`section`]). The compositions of locks
//! (`MultiLock`, `RedLock`) live in `crate::multi`, over this surface.

mod fair;
mod fenced;
mod guard;
mod nonreentrant;
mod reentrant;
mod rwlock;
mod section;
mod single;
mod spin;
mod surface;
mod token;

pub use fair::FairLock;
pub use fenced::FencedLock;
pub use guard::LockGuard;
pub use nonreentrant::{NonReentrantFairLock, NonReentrantLock};
pub use reentrant::Lock;
pub use rwlock::{ReadLock, RwLock, WriteLock};
pub use section::WithLockOptions;
pub use spin::{SpinBackoff, SpinLock};
pub use surface::DistributedLock;
pub use token::{TokenLock, ValueFormat};

pub(crate) use guard::release_all;
pub(crate) use single::Locks;
pub(crate) use surface::{Core, Placement, lock_surface, sealed};
