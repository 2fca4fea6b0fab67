//! The hold layer: one hold of a lock, whatever its kind, from the acquire that grants it to
//! the release that ends it (docs/LAYOUT.md §12).
//!
//! A lock kind says what differs ([`HoldKind`]: its scripts, channel, holder ids, and how it
//! counts and settles its holds); this layer does the rest once for every kind:
//!
//! - [`HoldAcquire`]: one owner's acquisition as the wait engine drives it, with the client's
//!   hold count passed to the script and an acquire of unknown outcome resolved;
//! - [`release`](release::release): one hold given back, a release of unknown outcome settled;
//! - [`Held`]: the hold a guard owns, renewed by the watchdog or leased, released on drop;
//! - [`Record`]: the client's own record of its holds, per lock name and holder (locks only:
//!   the other primitives do not keep one).

mod acquire;
mod held;
mod kind;
mod record;
mod release;

pub(crate) use acquire::HoldAcquire;
pub(crate) use held::Held;
pub(crate) use kind::{
    AcquireReply, AcquireRequest, Evidence, Fields, HoldKind, HoldSpec, ReleaseReply,
    ReleaseRequest, acquire_reply, count_reply, hold_count_reply, on_unlock_messages,
    release_reply, send_acquire,
};
pub(crate) use record::Record;
