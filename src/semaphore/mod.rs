//! The semaphores: Redisson's `RSemaphore` ([`Semaphore`], in [`counting`]) and
//! `RPermitExpirableSemaphore` ([`PermitExpirableSemaphore`], in [`expirable`]), each with its
//! own scripts (`lua/semaphore/`, `lua/permit_semaphore/`) and names (docs/LAYOUT.md §6.4,
//! §6.5). Both wait through the wait engine on `redisson_sc:{N}` with the permits wake policy:
//! a message carrying a count `k` wakes up to `k` of the client's waiters.

mod common;
mod counting;
mod expirable;
mod renewing;

pub use common::PermitId;
pub use counting::{Permits, Semaphore};
pub use expirable::PermitExpirableSemaphore;
pub use renewing::PermitGuard;
