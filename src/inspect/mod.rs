//! Inspection: a typed, read-only snapshot of whatever Redisson structure lives at a name
//! ([`Client::inspect`](crate::Client::inspect)).
//!
//! One script, `lua/inspect/snapshot.lua`, reads in one round trip every key a structure of
//! any kind may have under the name (docs/LAYOUT.md §2, §4.1, §5.1, §6.2, §6.4–§6.6): the
//! name itself, the fair lock's queue and deadlines, the fenced lock's token counter, the
//! permit-expirable semaphore's permits and the read holds' marker keys. It calls only
//! commands that read, so an inspection never changes a key, a value or a TTL. `parse`
//! decides the kind from what it found (rules on [`StructureKind`]).

mod parse;
mod snapshot;

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, LazyLock};

use crate::conn::{Call, Script};
use crate::error::{Error, Result};
use crate::layout;
use crate::shared::Shared;

pub use snapshot::{
    AcquiredPermit, CounterHint, HoldMode, Holder, ReadMarker, Snapshot, StructureKind, Waiter,
};

/// `lua/inspect/snapshot.lua`: every key of every kind under one name, read only.
static SNAPSHOT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/inspect/snapshot.lua")));

/// The default of [`Inspect::limit`]: how many hash fields, waiters, permits and marker keys
/// an inspection lists at most.
const DEFAULT_LIMIT: usize = 1000;

/// An inspection of one name, made by [`Client::inspect`](crate::Client::inspect): `.await`
/// it for the [`Snapshot`], after setting options if needed.
///
/// # Examples
///
/// ```rust,no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), redisson_sync::Error> {
/// use redisson_sync::{inspect::CounterHint, Client};
///
/// let client = Client::open("redis://127.0.0.1:6379").unwrap();
/// let snapshot = client.inspect("order:42").await?;
/// for holder in &snapshot.holders {
///     println!("{:?} x{} (mine: {})", holder.owner, holder.count, holder.this_client);
/// }
/// let latch = client.inspect("batch:ready").counter_hint(CounterHint::Latch).await?;
/// println!("{} {:?}", latch.kind, latch.count);
/// # Ok(())
/// # }
/// ```
#[must_use = "an inspection does nothing until awaited"]
pub struct Inspect {
    shared: Arc<Shared>,
    name: String,
    hint: CounterHint,
    limit: usize,
}

impl fmt::Debug for Inspect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inspect")
            .field("name", &self.name)
            .field("hint", &self.hint)
            .field("limit", &self.limit)
            .finish()
    }
}

impl Inspect {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        Self {
            shared,
            name,
            hint: CounterHint::Auto,
            limit: DEFAULT_LIMIT,
        }
    }

    /// How to read a positive integer string: as a semaphore, as a latch, or by the
    /// subscriber rule ([`CounterHint::Auto`], the default).
    pub fn counter_hint(mut self, hint: CounterHint) -> Self {
        self.hint = hint;
        self
    }

    /// Lists at most `limit` hash fields, waiters, permits and marker keys (default 1000);
    /// [`Snapshot::truncated`] says when a listing was cut.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Reads the snapshot: one script call, which changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the name holds something that is not one of the structures
    /// of [`StructureKind`] (a list, a set, a hash that is not a lock, a string that is not an
    /// integer); [`Error::InvalidArgument`] for a limit of 0; [`Error::Redis`],
    /// [`Error::Timeout`], [`Error::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    pub async fn run(self) -> Result<Snapshot> {
        if self.limit == 0 {
            return Err(Error::InvalidArgument(
                "an inspection limit must be at least 1".into(),
            ));
        }
        self.shared.ensure_open()?;
        let name = self.name.as_str();
        let queue = layout::fair_queue(name);
        let deadlines = layout::fair_timeouts(name);
        let token = layout::fenced_token(name);
        let permits = layout::permit_timeouts(name);
        let mut invocation = SNAPSHOT.prepare_invoke();
        invocation
            .key(name)
            .key(&queue)
            .key(&deadlines)
            .key(&token)
            .key(&permits)
            .arg(layout::rwlock_key_prefix(name))
            .arg(self.limit)
            .arg(layout::semaphore_channel(name))
            .arg(layout::latch_channel(name));
        let reply = self
            .shared
            .conn
            .call(Call::read_script("inspect", name, &invocation))
            .await?;
        let raw = parse::Reply::decode(&reply)?;
        raw.snapshot(name, &self.shared.id, self.hint)
    }
}

impl IntoFuture for Inspect {
    type Output = Result<Snapshot>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Snapshot>> + Send + 'static>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}
