//! Renewal kinds: how the watchdog renews one kind of hold.

use std::fmt;

use crate::conn::{Script, ScriptInvocation};

/// One kind of renewable hold: its batch script and what each hold adds to a batch.
///
/// The watchdog batches holds by [`kind`](Self::kind): holds of one kind go to its own script,
/// up to `watchdog_batch_size` per call, never mixed with another kind's. A primitive whose
/// holds renew differently implements this next to its other scripts; the watchdog needs no
/// change for it.
///
/// A batch script gets `ARGV[1]` = the lease in milliseconds, then (with
/// [`BatchArgs::NowAndVerb`]) `ARGV[2]` = now in epoch ms and `ARGV[3]` = the publish verb(s),
/// then what [`add`](Self::add) puts for each hold, and replies an array with one integer per
/// hold, in order: `1` renewed, `0` the holder is gone.
pub(crate) trait Renewal: fmt::Debug + Send + Sync + 'static {
    /// A name unique to this kind of renewal (batch key, logs).
    fn kind(&self) -> &'static str;

    /// The batch script.
    fn script(&self) -> &'static Script;

    /// Adds one hold, `field` holding `key`, to a batch: its KEY and its ARGV entries.
    fn add(&self, batch: &mut ScriptInvocation<'static>, key: &str, field: &str);

    /// What a batch of this kind takes after the lease: nothing (the locks), or the client's
    /// clock and the publish verb (the permits, whose leases end at an epoch millisecond and
    /// whose expired neighbours are reclaimed and published on the way).
    fn batch_args(&self) -> BatchArgs {
        BatchArgs::None
    }
}

/// See [`Renewal::batch_args`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BatchArgs {
    None,
    NowAndVerb,
}
