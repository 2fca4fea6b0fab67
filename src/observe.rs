//! Metrics and tracing: what the crate reports about its primitives, and under which names.
//!
//! # Metrics
//!
//! With the `metrics` cargo feature the crate records through the [`metrics`](https://docs.rs/metrics/0.24) crate's facade
//! (0.24): whichever recorder the application installed (a Prometheus exporter, StatsD, ...)
//! receives them; the crate installs none. Without the feature nothing is recorded and the
//! `metrics` crate is not a dependency. `examples/metrics_prometheus.rs` wires a Prometheus
//! exporter.
//!
//! | name | type | labels | unit | what |
//! |---|---|---|---|---|
//! | `redisson_sync_acquisitions_total` | counter | `kind`, `outcome` | acquisitions | every acquisition (lock, `try_lock*`, semaphore acquire, latch wait), once it ends: `outcome` = `acquired`, `timed_out` (not acquired within the wait, a single attempt that found it busy included), `error` (an error ended it) or `cancelled` (its future was dropped) |
//! | `redisson_sync_wait_seconds` | histogram | `kind` | seconds | how long each acquisition took, whatever its outcome |
//! | `redisson_sync_hold_seconds` | histogram | `kind` | seconds | from the grant to the end of a hold: its guard (or counting semaphore's `Permits`) released, dropped or forgotten |
//! | `redisson_sync_held` | gauge | `kind` | holds | guards (and `Permits`) alive now |
//! | `redisson_sync_waiting` | gauge | `kind` | waiters | acquisitions waiting now: past their first attempt, until they end |
//! | `redisson_sync_renewals_total` | counter | `kind` | holds | holds whose lease the watchdog renewed (one per hold per renewal) |
//! | `redisson_sync_renewal_failures_total` | counter | `kind` | holds | holds whose renewal call failed (an error or an unexpected reply; retried at the next tick) |
//! | `redisson_sync_lost_leases_total` | counter | `kind` | holds | holds found lost while held: gone from Redis (expired, force-unlocked, taken over) or no longer vouched for (no renewal confirmed within the lease, an explicit lease that ran out) |
//! | `redisson_sync_rechecks_total` | counter | `kind` | re-checks | a waiter on pub/sub woken by its timer (the lock's TTL, a lease end, or the channel's `recheck_interval`) rather than by a message: what covers lost messages |
//! | `redisson_sync_pubsub_reconnects_total` | counter | none | connections | the pub/sub connection re-established after it was lost (dropped, or not answering its `PING`) |
//!
//! `kind` is one of `lock`, `fair`, `read`, `write`, `fenced`, `spin`, `nonreentrant`,
//! `nonreentrant_fair`, `semaphore`, `permit_semaphore`, `latch`, `token` (a
//! [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock) reports through the locks it is
//! made of). The label sets are bounded: with
//! [`Config::metrics_name_label`](crate::Config::metrics_name_label) (off by default) every
//! metric but the reconnects also gets `name`, the lock's (semaphore's, latch's) name: only for
//! applications with few, fixed names. The names are also [constants](#constants) of this
//! module, and `describe_metrics()` (with the feature) registers their descriptions and units
//! with the installed recorder.
//!
//! The permit-expirable semaphore's permits are ids, released by id from anywhere or ending
//! with their lease, so `permit_semaphore` has no hold time and no `held` gauge; a latch is
//! waited for, not held.
//!
//! # Tracing
//!
//! Every acquisition, release, renewal batch and renewal of a hold, and waiter's give-up runs
//! in a [`tracing`] span at `DEBUG` level, with the fields `lock` (the name), `kind` (as
//! above), `client_id` (the [client's id](crate::Client::id)) and `owner` (the owner's id; none
//! for semaphores and latches, whose permits nobody owns). A Redisson lock's holder field is
//! `<client_id>:<owner>`, the values Redisson logs as the lock's holder: the two sides' logs of
//! one lock match on them.
//!
//! | span | fields | where |
//! |---|---|---|
//! | `acquire` | `lock`, `kind`, `client_id`, `owner`, `wait_ms` (none: no deadline), `outcome` | one acquisition, from the call to its result, its background continuation included |
//! | `release` | `lock`, `kind`, `client_id`, `owner` | one release (explicit, on drop in the background, or undoing a grant nobody received) |
//! | `renewal_batch` | `kind` (the renewal script: `hash`, `rwlock-read`, `token_lock`), `size`, `client_id` | one watchdog script call |
//! | `renewal` | `lock`, `kind`, `client_id`, `owner` | one hold's result inside a batch |
//! | `give_up` | `lock`, `kind`, `client_id`, `owner` | the cleanup of a waiter that left without a grant (the fair lock's queue entry) |
//!
//! Levels: spans and the events of normal operation (an acquisition ended, a release done) are
//! `DEBUG`, so `INFO` stays quiet; unexpected conditions (a lost lock, a failed renewal or
//! release, a lost pub/sub connection) are `WARN`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::owner::Owner;

/// Counter `redisson_sync_acquisitions_total{kind, outcome}`: acquisitions, by how they ended.
pub const ACQUISITIONS: &str = "redisson_sync_acquisitions_total";
/// Histogram `redisson_sync_wait_seconds{kind}`: how long each acquisition took, in seconds.
pub const WAIT_SECONDS: &str = "redisson_sync_wait_seconds";
/// Histogram `redisson_sync_hold_seconds{kind}`: from the grant to the end of a hold, in
/// seconds.
pub const HOLD_SECONDS: &str = "redisson_sync_hold_seconds";
/// Gauge `redisson_sync_held{kind}`: holds (guards, `Permits`) alive now.
pub const HELD: &str = "redisson_sync_held";
/// Gauge `redisson_sync_waiting{kind}`: acquisitions waiting now.
pub const WAITING: &str = "redisson_sync_waiting";
/// Counter `redisson_sync_renewals_total{kind}`: holds renewed by the watchdog.
pub const RENEWALS: &str = "redisson_sync_renewals_total";
/// Counter `redisson_sync_renewal_failures_total{kind}`: holds whose renewal call failed.
pub const RENEWAL_FAILURES: &str = "redisson_sync_renewal_failures_total";
/// Counter `redisson_sync_lost_leases_total{kind}`: holds found lost while held.
pub const LOST_LEASES: &str = "redisson_sync_lost_leases_total";
/// Counter `redisson_sync_rechecks_total{kind}`: pub/sub waiters woken by their timer.
pub const RECHECKS: &str = "redisson_sync_rechecks_total";
/// Counter `redisson_sync_pubsub_reconnects_total`: pub/sub connections re-established.
pub const PUBSUB_RECONNECTS: &str = "redisson_sync_pubsub_reconnects_total";
/// Counter `redisson_sync_batches_total`: writes that carried the requests of two or more
/// concurrent calls as one pipeline (single server and Sentinel).
pub const BATCHES: &str = "redisson_sync_batches_total";
/// Counter `redisson_sync_batched_calls_total`: calls sent in those writes
/// ([`BATCHES`]); the two together give the mean number of calls per write.
pub const BATCHED_CALLS: &str = "redisson_sync_batched_calls_total";

/// The label of every metric but [`PUBSUB_RECONNECTS`], [`BATCHES`] and [`BATCHED_CALLS`]:
/// the primitive's kind.
pub const LABEL_KIND: &str = "kind";
/// The label of [`ACQUISITIONS`]: `acquired`, `timed_out`, `error` or `cancelled`.
pub const LABEL_OUTCOME: &str = "outcome";
/// The label with the primitive's name, only with
/// [`Config::metrics_name_label`](crate::Config::metrics_name_label).
pub const LABEL_NAME: &str = "name";

/// Registers the description and unit of every metric of the crate with the installed
/// recorder (for a Prometheus exporter, its `# HELP` lines). Call it once, after installing
/// the recorder; the metrics are recorded whether it was called or not.
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub fn describe_metrics() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

    describe_counter!(
        ACQUISITIONS,
        Unit::Count,
        "Acquisitions of locks, semaphores and latches, by kind and outcome (acquired, timed_out, error, cancelled)"
    );
    describe_histogram!(
        WAIT_SECONDS,
        Unit::Seconds,
        "How long each acquisition took, whatever its outcome"
    );
    describe_histogram!(
        HOLD_SECONDS,
        Unit::Seconds,
        "From the grant to the end of a hold (released, dropped or forgotten)"
    );
    describe_gauge!(HELD, Unit::Count, "Holds (guards, permits) alive now");
    describe_gauge!(WAITING, Unit::Count, "Acquisitions waiting now");
    describe_counter!(RENEWALS, Unit::Count, "Holds renewed by the watchdog");
    describe_counter!(
        RENEWAL_FAILURES,
        Unit::Count,
        "Holds whose renewal call failed (retried at the next tick)"
    );
    describe_counter!(
        LOST_LEASES,
        Unit::Count,
        "Holds found lost while held (gone from Redis, or not renewed within the lease)"
    );
    describe_counter!(
        RECHECKS,
        Unit::Count,
        "Pub/sub waiters woken by their timer rather than by a message"
    );
    describe_counter!(
        PUBSUB_RECONNECTS,
        Unit::Count,
        "Pub/sub connections re-established after they were lost"
    );
    describe_counter!(
        BATCHES,
        Unit::Count,
        "Writes that carried the requests of two or more concurrent calls as one pipeline"
    );
    describe_counter!(
        BATCHED_CALLS,
        Unit::Count,
        "Calls sent in writes shared with other calls"
    );
}

/// How an acquisition ended.
/// What a client keeps in memory now ([`Client::stats`](crate::Client::stats)): what a soak
/// watches for growth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// Pub/sub channels the client is subscribed to (or subscribing) for its waiters and
    /// observers.
    pub channels: usize,
    /// Waits registered on those channels.
    pub waiters: usize,
    /// Event streams ([`Client::events`](crate::Client::events)) registered on them.
    pub observers: usize,
    /// Holds the watchdog renews (one per lock and holder, however many re-entries).
    pub watched_holds: usize,
    /// Entries of the client's record of lock holds: one per lock and holder with a hold, an
    /// operation in flight or one waiting for it (none once all are over).
    pub record_slots: usize,
    /// Lock holds the record counts (held through a guard of this client).
    pub counted_holds: u64,
    /// Background tasks still running: releases of dropped guards, undos, cleanups.
    pub background_tasks: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired,
    TimedOut,
    Error,
    Cancelled,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Acquired => "acquired",
            Self::TimedOut => "timed_out",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
        }
    }

    /// The outcome of an acquisition that was granted (`Ok(true)`), ran out of time
    /// (`Ok(false)`) or failed.
    pub(crate) fn of<E>(result: Result<bool, E>) -> Self {
        match result {
            Ok(true) => Self::Acquired,
            Ok(false) => Self::TimedOut,
            Err(_) => Self::Error,
        }
    }
}

/// The metric labels of one primitive: its kind, and its name when the client's config asks
/// for it. Without the `metrics` feature it only keeps the kind (for spans).
#[derive(Clone, Debug)]
pub(crate) struct Tag {
    kind: &'static str,
    #[cfg(feature = "metrics")]
    name: Option<Arc<str>>,
}

impl Tag {
    /// The labels of the primitive `name` of `kind`; the name is a label only when
    /// `name_label` (the client's [`Config::metrics_name_label`](crate::Config)).
    pub(crate) fn new(kind: &'static str, name: &Arc<str>, name_label: bool) -> Self {
        #[cfg(not(feature = "metrics"))]
        let _ = (name, name_label);
        Self {
            kind,
            #[cfg(feature = "metrics")]
            name: name_label.then(|| name.clone()),
        }
    }

    /// Labels with the kind only.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn kind_only(kind: &'static str) -> Self {
        Self {
            kind,
            #[cfg(feature = "metrics")]
            name: None,
        }
    }

    /// The primitive's kind (`lock`, `fair`, ...).
    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }

    #[cfg(feature = "metrics")]
    fn labels(&self, outcome: Option<Outcome>) -> Vec<metrics::Label> {
        let mut labels = Vec::with_capacity(3);
        labels.push(metrics::Label::from_static_parts(LABEL_KIND, self.kind));
        if let Some(outcome) = outcome {
            labels.push(metrics::Label::from_static_parts(
                LABEL_OUTCOME,
                outcome.as_str(),
            ));
        }
        if let Some(name) = &self.name {
            labels.push(metrics::Label::new(LABEL_NAME, name.clone()));
        }
        labels
    }

    /// One acquisition ended with `outcome` after `waited`.
    pub(crate) fn acquisition_ended(&self, outcome: Outcome, waited: Duration) {
        #[cfg(feature = "metrics")]
        {
            metrics::counter!(ACQUISITIONS, self.labels(Some(outcome))).increment(1);
            metrics::histogram!(WAIT_SECONDS, self.labels(None)).record(waited.as_secs_f64());
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (outcome, waited);
    }

    /// One waiter starts waiting; it stops when the returned value is dropped.
    pub(crate) fn waiting(&self) -> Waiting {
        #[cfg(feature = "metrics")]
        {
            let gauge = metrics::gauge!(WAITING, self.labels(None));
            gauge.increment(1.0);
            Waiting { gauge }
        }
        #[cfg(not(feature = "metrics"))]
        Waiting {}
    }

    /// One hold starts; it ends (its hold time recorded) when the returned value is dropped.
    pub(crate) fn hold(&self) -> Hold {
        #[cfg(feature = "metrics")]
        {
            let labels = self.labels(None);
            let held = metrics::gauge!(HELD, labels.clone());
            held.increment(1.0);
            Hold {
                since: Instant::now(),
                held,
                time: metrics::histogram!(HOLD_SECONDS, labels),
            }
        }
        #[cfg(not(feature = "metrics"))]
        Hold {}
    }

    /// The watchdog renewed one hold.
    pub(crate) fn renewed(&self) {
        #[cfg(feature = "metrics")]
        metrics::counter!(RENEWALS, self.labels(None)).increment(1);
    }

    /// The renewal call of one hold failed.
    pub(crate) fn renewal_failed(&self) {
        #[cfg(feature = "metrics")]
        metrics::counter!(RENEWAL_FAILURES, self.labels(None)).increment(1);
    }

    /// One hold was found lost.
    pub(crate) fn lease_lost(&self) {
        #[cfg(feature = "metrics")]
        metrics::counter!(LOST_LEASES, self.labels(None)).increment(1);
    }

    /// A pub/sub waiter was woken by its timer.
    pub(crate) fn rechecked(&self) {
        #[cfg(feature = "metrics")]
        metrics::counter!(RECHECKS, self.labels(None)).increment(1);
    }
}

/// The pub/sub connection was re-established after it was lost.
pub(crate) fn pubsub_reconnected() {
    #[cfg(feature = "metrics")]
    metrics::counter!(PUBSUB_RECONNECTS).increment(1);
}

/// One write carried `calls` concurrent calls as a pipeline.
pub(crate) fn batch_written(calls: usize) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(BATCHES).increment(1);
        metrics::counter!(BATCHED_CALLS).increment(calls as u64);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = calls;
}

/// A waiter counted in the `waiting` gauge while this lives.
#[derive(Debug)]
pub(crate) struct Waiting {
    #[cfg(feature = "metrics")]
    gauge: metrics::Gauge,
}

#[cfg(feature = "metrics")]
impl Drop for Waiting {
    fn drop(&mut self) {
        self.gauge.decrement(1.0);
    }
}

/// A hold counted in the `held` gauge while this lives; its hold time is recorded when it is
/// dropped.
#[derive(Debug)]
pub(crate) struct Hold {
    #[cfg(feature = "metrics")]
    since: Instant,
    #[cfg(feature = "metrics")]
    held: metrics::Gauge,
    #[cfg(feature = "metrics")]
    time: metrics::Histogram,
}

#[cfg(feature = "metrics")]
impl Drop for Hold {
    fn drop(&mut self) {
        self.held.decrement(1.0);
        self.time.record(self.since.elapsed().as_secs_f64());
    }
}

/// One acquisition, from its call to its end: records its outcome and wait time when
/// [`ended`](Self::ended), or as cancelled when dropped before.
#[derive(Debug)]
pub(crate) struct Acquisition {
    tag: Tag,
    started: Instant,
    ended: bool,
}

impl Acquisition {
    pub(crate) fn start(tag: Tag) -> Self {
        Self {
            tag,
            started: Instant::now(),
            ended: false,
        }
    }

    /// Records the outcome; returns how long the acquisition took.
    pub(crate) fn ended(mut self, outcome: Outcome) -> Duration {
        self.ended = true;
        let waited = self.started.elapsed();
        self.tag.acquisition_ended(outcome, waited);
        waited
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        if !self.ended {
            self.tag
                .acquisition_ended(Outcome::Cancelled, self.started.elapsed());
        }
    }
}

/// What the spans of one primitive's operation carry: its kind, name, client and owner.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Subject<'a> {
    pub(crate) kind: &'static str,
    pub(crate) name: &'a Arc<str>,
    pub(crate) client_id: &'a str,
    /// `None` for primitives nobody owns (semaphores, latches).
    pub(crate) owner: Option<Owner>,
}

impl Subject<'_> {
    /// The span of one acquisition waiting at most `wait` (`None`: no deadline).
    pub(crate) fn acquire_span(&self, wait: Option<Duration>) -> tracing::Span {
        tracing::debug_span!(
            "acquire",
            lock = %self.name,
            kind = self.kind,
            client_id = self.client_id,
            owner = self.owner.map(Owner::id),
            wait_ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            outcome = tracing::field::Empty,
        )
    }

    /// The span of one release.
    pub(crate) fn release_span(&self) -> tracing::Span {
        tracing::debug_span!(
            "release",
            lock = %self.name,
            kind = self.kind,
            client_id = self.client_id,
            owner = self.owner.map(Owner::id),
        )
    }

    /// The span of a waiter's give-up cleanup.
    pub(crate) fn give_up_span(&self) -> tracing::Span {
        tracing::debug_span!(
            "give_up",
            lock = %self.name,
            kind = self.kind,
            client_id = self.client_id,
            owner = self.owner.map(Owner::id),
        )
    }

    /// The span of one hold's renewal result within a batch.
    pub(crate) fn renewal_span(&self) -> tracing::Span {
        tracing::debug_span!(
            "renewal",
            lock = %self.name,
            kind = self.kind,
            client_id = self.client_id,
            owner = self.owner.map(Owner::id),
        )
    }
}

/// The span of one watchdog script call: `size` holds renewed the `kind` way.
pub(crate) fn renewal_batch_span(
    kind: &'static str,
    size: usize,
    client_id: &str,
) -> tracing::Span {
    tracing::debug_span!("renewal_batch", kind, size, client_id)
}

/// Ends an acquisition that was granted (`Ok(true)`), ran out of time (`Ok(false)`) or failed:
/// records its metrics, and its outcome on its span with a `DEBUG` event.
pub(crate) fn acquisition_ended<E: std::fmt::Display>(
    acquisition: Acquisition,
    span: &tracing::Span,
    result: Result<bool, E>,
) {
    let outcome = Outcome::of(result.as_ref().map(|granted| *granted));
    let waited = acquisition.ended(outcome);
    span.record("outcome", outcome.as_str());
    span.in_scope(|| match result {
        Err(e) => tracing::debug!(
            waited_ms = waited.as_millis() as u64,
            error = %e,
            "acquisition failed"
        ),
        _ => tracing::debug!(
            waited_ms = waited.as_millis() as u64,
            outcome = outcome.as_str(),
            "acquisition ended"
        ),
    });
}
