// The user guide: documentation only, no code; each page is a file of docs/guide/.
#![doc = include_str!("../../docs/guide/contents.md")]

// Reading order; rustdoc lists the pages alphabetically.

#[doc = include_str!("../../docs/guide/choosing.md")]
pub mod choosing {}

#[doc = include_str!("../../docs/guide/lock.md")]
pub mod lock {}

#[doc = include_str!("../../docs/guide/owners.md")]
pub mod owners {}

#[doc = include_str!("../../docs/guide/fair_lock.md")]
pub mod fair_lock {}

#[doc = include_str!("../../docs/guide/rw_lock.md")]
pub mod rw_lock {}

#[doc = include_str!("../../docs/guide/fenced_lock.md")]
pub mod fenced_lock {}

#[doc = include_str!("../../docs/guide/spin_lock.md")]
pub mod spin_lock {}

#[doc = include_str!("../../docs/guide/non_reentrant.md")]
pub mod non_reentrant {}

#[doc = include_str!("../../docs/guide/multi_lock.md")]
pub mod multi_lock {}

#[doc = include_str!("../../docs/guide/token_lock.md")]
pub mod token_lock {}

#[doc = include_str!("../../docs/guide/semaphores.md")]
pub mod semaphores {}

#[doc = include_str!("../../docs/guide/latch.md")]
pub mod latch {}

#[doc = include_str!("../../docs/guide/blocking.md")]
pub mod blocking {}

#[doc = include_str!("../../docs/guide/waiting_and_shutdown.md")]
pub mod waiting_and_shutdown {}

#[doc = include_str!("../../docs/guide/java_interop.md")]
pub mod java_interop {}

#[doc = include_str!("../../docs/guide/java_names.md")]
pub mod java_names {}

#[doc = include_str!("../../docs/guide/compatibility.md")]
pub mod compatibility {}

#[doc = include_str!("../../docs/guide/configuration.md")]
pub mod configuration {}

#[doc = include_str!("../../docs/guide/cluster.md")]
pub mod cluster {}

#[doc = include_str!("../../docs/guide/sentinel.md")]
pub mod sentinel {}

#[doc = include_str!("../../docs/guide/tls_and_credentials.md")]
pub mod tls_and_credentials {}

#[doc = include_str!("../../docs/guide/replica_sync.md")]
pub mod replica_sync {}

#[doc = include_str!("../../docs/guide/failure_behaviour.md")]
pub mod failure_behaviour {}

#[doc = include_str!("../../docs/guide/metrics.md")]
pub mod metrics {}

#[doc = include_str!("../../docs/guide/inspection.md")]
pub mod inspection {}

#[doc = include_str!("../../docs/guide/events.md")]
pub mod events {}

#[doc = include_str!("../../docs/guide/performance.md")]
pub mod performance {}
