//! The history checker of the fault suite: given every hold recorded by every lock user (in
//! any process, on CLOCK_MONOTONIC) and every fault injected meanwhile, it finds
//!
//! - **overlaps**: a holder granted while another one held an exclusive lock (two reads may
//!   overlap; a semaphore may have as many holders as permits), each classified as
//!   *expected* (the earlier holder's lease could have run out before the overlap began, or
//!   the lock's state was wiped, or the crate had told the holder it lost the lock) or a
//!   *violation*;
//! - **fencing tokens** that do not strictly increase in grant order;
//! - **lost wake-ups**: a lock left free for longer than the wake-up bound while someone was
//!   waiting for it and no fault could explain the wait.
//!
//! It is pure computation over what it is given: the fault suite (`scripts/faults`) feeds it,
//! its unit tests pin the rules.
//!
//! # The rules
//!
//! A hold is the interval `[acquired_ns, releasing_ns]`: from just after the acquire returned
//! to just before the release was sent, a subset of the time Redis kept the hold. When a hold
//! `L` is granted at `t` while another holder's `E` covers `t` (and their kinds conflict), the
//! overlap is **expected** when one of these holds, in this order:
//!
//! 1. `wiped`: a fault that may lose data ([`FaultClass::may_lose_data`]: a restart without
//!    persistence, a cluster master killed before its replica was promoted, a Sentinel
//!    failover until the old master's demotion) overlapped `[E.requested_ns, t]`;
//!    `evicted`, the same for one name: the server evicted one of the lock's keys (its name,
//!    or a key with `{name}` in it) and the nemesis heard it ([`Eviction`]) after `E`'s
//!    acquire was sent and no later than [`EVICTION_HEARD_WITHIN`] after `t`;
//! 2. `signalled`: the crate's lost signal fired for `E` at or before `t`;
//! 3. `lease`: during `[E.requested_ns, t]`, `E`'s renewals could not reach Redis (its process
//!    stopped, its link frozen, black-holed or reset, Redis stalled or down) for one stretch of
//!    at least [`Params::lease_loss_ns`] (a watchdog lease minus one renewal period: the
//!    shortest blackout that can let a watchdog lease run out). The stretch counts from the
//!    request, not from `E.acquired_ns`: Redis may have granted the hold at once, and a
//!    process stopped before the reply was read takes `acquired_ns` only when it runs again,
//!    after the lease it never renewed may have run out;
//! 4. `stalled-renewal`, for Redisson's holders only: a fault kept `E`'s renewals from Redis
//!    for any time within `[E.requested_ns, t]`, and `t` is at least one lease
//!    ([`Params::lease_ns`]) after `E`'s acquire was sent. Redisson renews all of a client's
//!    holds in one chain and schedules the next renewal only when the last one has finished;
//!    one that meets a dead connection finishes after its retries, which can outlast a short
//!    lease. The crate's holders must have fired their lost signal instead (rule 2);
//!
//! and `E`'s own release did not succeed (a holder whose lease ran out must find its release
//! refused; not required of the fair kinds, whose release of a lock that no longer exists
//! reports success, as Redisson's does). Anything else is a **violation**. A semaphore
//! over-grant is expected only when the semaphore was wiped, or its key evicted at any time
//! before (its count is set again, and a permit taken before the eviction is added back to
//! it when released).
//!
//! A **gap** is a stretch during which a lock had no holder (a semaphore: fewer holders than
//! permits) while a waiter, which asked before the gap began, got it only after the gap. The
//! gap counts from the later of its start and the end of the last fault that overlapped it;
//! it is a **lost wake-up** when that is longer than the bound: [`Params::rust_wakeup_ns`]
//! when a waiter of the crate waited, else [`Params::java_wakeup_ns`] (Redisson falls back on
//! the holder's TTL), plus [`Params::fair_wait_ns`] for the fair kinds (a waiter that gave up
//! keeps the head of the queue until its slot times out). A fair gap only Redisson waited
//! through is bounded by at least that and a lease plus a slot for every other owner of the
//! name: Redisson's fair waiter, its wake-up message lost, sleeps out the reply it got on
//! joining the queue, the time until the waiter before it must have taken the lock. Plus one
//! lease ([`Params::lease_ns`])
//! when an acquire of that name failed during the gap ([`Unanswered`]): Redis may have run an
//! acquire whose reply the client never read (its response timeout ran out while a fault held
//! the reply back, or the connection broke under it), and that grant, which no one uses or
//! releases, keeps the lock until its lease runs out. Redisson leaves such a grant to its
//! lease; the crate settles an acquire whose reply it lost, and gives back what it finds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// How two holds of one name may coexist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// One holder at a time.
    Exclusive,
    /// Shares with other reads, not with writes or exclusive holds.
    Read,
    /// At most this many holders at once (a semaphore with as many permits).
    Permits(u32),
}

/// One recorded hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The process, e.g. `rust#1` or `java#2`.
    pub process: String,
    /// `true` for a process using this crate (which has a lost signal).
    pub crate_side: bool,
    /// The owner (logical thread) within the process.
    pub owner: u64,
    /// The protocol kind, e.g. `lock`, `read`, `fenced`, `semaphore`.
    pub kind: String,
    /// The lock's name: holds of one name conflict (`read` and `write` share theirs).
    pub name: String,
    /// How this hold may coexist with others of its name.
    pub access: Access,
    /// When the acquire was asked for.
    pub requested_ns: u64,
    /// Just after the acquire returned.
    pub acquired_ns: u64,
    /// Just before the release was sent.
    pub releasing_ns: u64,
    /// The fencing token, for a fenced lock.
    pub token: Option<u64>,
    /// When the crate's lost signal fired, if it did before the release returned.
    pub lost_ns: Option<u64>,
    /// Whether the release succeeded (Redis still had the hold and released it).
    pub released_ok: bool,
}

impl Hold {
    fn holder(&self) -> (&str, u64) {
        (&self.process, self.owner)
    }

    fn covers(&self, t: u64) -> bool {
        self.acquired_ns < t && t < self.releasing_ns
    }

    fn is_fair(&self) -> bool {
        self.kind.contains("fair")
    }
}

/// The classes of fault the nemesis injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultClass {
    /// SIGSTOP .. SIGCONT of one process.
    Pause,
    /// The proxy delays one process's traffic.
    LinkDelay,
    /// The proxy holds one process's traffic.
    LinkFreeze,
    /// The proxy drops one process's traffic.
    LinkBlackhole,
    /// The proxy resets one process's connections (and refuses new ones meanwhile).
    LinkReset,
    /// `CLIENT PAUSE <ms> WRITE`: scripts and publishes stall.
    ClientPauseWrite,
    /// `DEBUG SLEEP`: Redis answers nothing.
    DebugSleep,
    /// `CLIENT KILL TYPE pubsub`: every subscription connection is closed.
    KillPubsub,
    /// Redis killed and restarted with its append-only file (`appendfsync always`).
    RestartAof,
    /// Redis killed and restarted with its data gone.
    RestartWiped,
    /// Redis Cluster: `CLUSTER FAILOVER` on a replica (a manual failover, no data lost).
    Failover,
    /// Redis Cluster: a master killed (SIGKILL) and its replica promoted; what the replica had
    /// not received yet is lost.
    MasterKill,
    /// Redis Sentinel: `SENTINEL FAILOVER`, a replica promoted without stopping the old master
    /// first; what the old master took in the instant before its demotion is lost.
    SentinelFailover,
    /// Redis Sentinel: a failover the Sentinels started on their own, after another fault
    /// stalled the master for longer than their `down-after-milliseconds` (a `CLIENT PAUSE
    /// WRITE` also holds up their `PUBLISH`, and their `PING`s behind it). It lasts from the
    /// start of the stall until the old master is demoted; what the old master took after
    /// the promotion is lost. The nemesis never picks it; it records it when it sees one.
    AutoFailover,
    /// `maxmemory` set below the memory the server uses, with `noeviction` and the server full
    /// of data without TTL: Redis refuses every write that may grow memory (most acquires,
    /// most releases) and runs the rest (renewals). It lasts until the locks whose release was
    /// refused meanwhile have run out their lease.
    MemoryFull,
    /// An evicting policy with the server full of data without TTL and kept at its limit: it
    /// evicts what the policy may (with a `volatile-*` policy the locks first), per key, as the
    /// [`Eviction`]s recorded with the run say.
    Eviction,
}

impl FaultClass {
    /// Every class, in report order.
    pub const ALL: [Self; 16] = [
        Self::Pause,
        Self::LinkDelay,
        Self::LinkFreeze,
        Self::LinkBlackhole,
        Self::LinkReset,
        Self::ClientPauseWrite,
        Self::DebugSleep,
        Self::KillPubsub,
        Self::RestartAof,
        Self::RestartWiped,
        Self::Failover,
        Self::MasterKill,
        Self::SentinelFailover,
        Self::AutoFailover,
        Self::MemoryFull,
        Self::Eviction,
    ];

    /// A short name for tables and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pause => "sigstop",
            Self::LinkDelay => "link-delay",
            Self::LinkFreeze => "link-freeze",
            Self::LinkBlackhole => "link-blackhole",
            Self::LinkReset => "link-reset",
            Self::ClientPauseWrite => "client-pause-write",
            Self::DebugSleep => "debug-sleep",
            Self::KillPubsub => "kill-pubsub",
            Self::RestartAof => "restart-aof",
            Self::RestartWiped => "restart-wiped",
            Self::Failover => "cluster-failover",
            Self::MasterKill => "master-kill",
            Self::SentinelFailover => "sentinel-failover",
            Self::AutoFailover => "auto-failover",
            Self::MemoryFull => "oom-noeviction",
            Self::Eviction => "oom-evicting",
        }
    }

    /// The class of this [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Whether the lock state it hits may be lost: a restart without persistence, a master
    /// killed or failed over before its replica had everything. (An eviction loses keys one by
    /// one: [`Eviction`]s say which.)
    pub fn may_lose_data(self) -> bool {
        matches!(
            self,
            Self::RestartWiped | Self::MasterKill | Self::SentinelFailover | Self::AutoFailover
        )
    }

    /// Whether, while it lasts, it keeps `process`'s renewals from reaching Redis when it
    /// targets `target` (`None`: the server, every process).
    fn blocks_renewals_of(self, target: Option<&str>, process: &str) -> bool {
        match self {
            Self::Pause | Self::LinkFreeze | Self::LinkBlackhole | Self::LinkReset => {
                target == Some(process)
            }
            Self::ClientPauseWrite
            | Self::DebugSleep
            | Self::RestartAof
            | Self::RestartWiped
            | Self::Failover
            | Self::MasterKill
            | Self::SentinelFailover
            | Self::AutoFailover => true,
            // A delay shorter than a renewal period only shifts renewals; a killed
            // subscription does not touch them; at the memory limit Redis still runs
            // renewals (`PEXPIRE` may not grow memory), and an eviction is judged per key.
            Self::LinkDelay | Self::KillPubsub | Self::MemoryFull | Self::Eviction => false,
        }
    }
}

/// One injected fault, from injection to healing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// What it was.
    pub class: FaultClass,
    /// The process it hit; `None` for the server (every process).
    pub target: Option<String>,
    /// When it was injected.
    pub start_ns: u64,
    /// When it was healed (equal to `start_ns` for an instant fault).
    pub end_ns: u64,
}

impl Fault {
    fn overlaps(&self, from: u64, to: u64) -> bool {
        self.start_ns <= to && self.end_ns >= from
    }
}

/// One key the server evicted, as the nemesis heard it (a keyspace notification).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    /// The evicted key.
    pub key: String,
    /// When the notification was heard: shortly after the eviction.
    pub at_ns: u64,
}

impl Eviction {
    /// Whether the key is one of the lock (or semaphore) `name`'s: `name` itself or a key with
    /// `{name}` in it (queues, markers, token counters, permit sets).
    pub fn hits(&self, name: &str) -> bool {
        self.key == name || self.key.contains(&format!("{{{name}}}"))
    }
}

/// A request of a lock user that failed (a response timeout, a broken connection) while it
/// may have been acquiring `name`: Redis may have granted what the client never learnt of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unanswered {
    /// The lock's name.
    pub name: String,
    /// The process and owner that sent it, when known: a release of theirs that failed
    /// leaves their hold in Redis, and their own later acquires re-enter it (a reentrant
    /// kind, as Redisson's), so it lasts until a lease after their last release.
    pub holder: Option<(String, u64)>,
    /// When the request was sent, and when its caller had the error (or, for a batch of
    /// requests, the batch's start and end).
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
}

/// How long after the later grant an eviction may still be heard and explain an overlap: the
/// notification reaches the nemesis a little after the eviction, which came before the grant.
pub const EVICTION_HEARD_WITHIN: u64 = 500_000_000;

/// The checker's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// The watchdog lease of both sides' holds.
    pub lease_ns: u64,
    /// The shortest renewal blackout that can let a watchdog lease run out: the lease minus
    /// one renewal period.
    pub lease_loss_ns: u64,
    /// How long after a lock is free (and no fault is active) a waiter of the crate may
    /// still wait: its re-check interval plus slack.
    pub rust_wakeup_ns: u64,
    /// The same for Redisson's waiters, which fall back on the holder's TTL.
    pub java_wakeup_ns: u64,
    /// The fair-lock waiter slot, added to the bound of the fair kinds.
    pub fair_wait_ns: u64,
}

/// One overlap of two holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The lock's name.
    pub name: String,
    /// The kinds of the earlier and the later hold.
    pub kinds: (String, String),
    /// The earlier and the later holder, as `process/owner`.
    pub holders: (String, String),
    /// When the later hold was granted.
    pub at_ns: u64,
    /// How long they overlapped.
    pub for_ns: u64,
    /// Why it was expected (`wiped`, `signalled`, `lease`, `stalled-renewal`), or `None` for
    /// a violation.
    pub reason: Option<&'static str>,
    /// For a violation: what made it one.
    pub detail: String,
}

/// A waiter left waiting longer than the bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// The lock's name.
    pub name: String,
    /// Its kind(s).
    pub kind: String,
    /// When the lock became free, and when the next hold was granted.
    pub from_ns: u64,
    /// When the next hold was granted.
    pub to_ns: u64,
    /// The gap counted from the end of the last fault overlapping it.
    pub after_faults_ns: u64,
    /// The bound it was held to.
    pub bound_ns: u64,
}

/// Per kind figures of a report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindFigures {
    /// Holds recorded.
    pub sections: u64,
    /// Overlaps classified as expected.
    pub expected: u64,
    /// Overlaps that are violations.
    pub violations: u64,
    /// Fencing tokens out of grant order.
    pub token_violations: u64,
    /// Lost wake-ups.
    pub lost_wakeups: u64,
    /// The longest a waiter waited after the lock was free and every fault healed.
    pub max_wakeup_ns: u64,
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Figures per kind (`read` and `write` apart).
    pub kinds: BTreeMap<String, KindFigures>,
    /// Faults per class.
    pub faults: BTreeMap<&'static str, u64>,
    /// Every overlap.
    pub overlaps: Vec<Overlap>,
    /// Fencing tokens out of order, described.
    pub token_violations: Vec<String>,
    /// Lost wake-ups.
    pub lost_wakeups: Vec<Gap>,
    /// The longest wait, after every fault had healed, in a gap that began within a second
    /// of a killed subscription (so its unlock message may have been lost).
    pub max_wakeup_after_lost_message_ns: u64,
    /// Gaps longer than their usual bound, judged with one more lease because an acquire of
    /// the name failed meanwhile ([`Unanswered`]).
    pub gaps_after_unanswered: u64,
    /// The longest of those, counted from the end of the faults.
    pub max_wakeup_after_unanswered_ns: u64,
}

impl Report {
    /// Overlaps that are violations.
    pub fn violations(&self) -> impl Iterator<Item = &Overlap> {
        self.overlaps.iter().filter(|o| o.reason.is_none())
    }

    /// Whether nothing unexplained was found.
    pub fn is_clean(&self) -> bool {
        self.violations().next().is_none()
            && self.token_violations.is_empty()
            && self.lost_wakeups.is_empty()
    }

    /// The report as a plain-text table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<18} {:>8} {:>9} {:>10} {:>7} {:>8} {:>12}",
            "kind", "sections", "expected", "violations", "tokens", "lost-wu", "max-wake ms"
        );
        let mut total = KindFigures::default();
        for (kind, f) in &self.kinds {
            let _ = writeln!(
                out,
                "{:<18} {:>8} {:>9} {:>10} {:>7} {:>8} {:>12.1}",
                kind,
                f.sections,
                f.expected,
                f.violations,
                f.token_violations,
                f.lost_wakeups,
                ms(f.max_wakeup_ns)
            );
            total.sections += f.sections;
            total.expected += f.expected;
            total.violations += f.violations;
            total.token_violations += f.token_violations;
            total.lost_wakeups += f.lost_wakeups;
            total.max_wakeup_ns = total.max_wakeup_ns.max(f.max_wakeup_ns);
        }
        let _ = writeln!(
            out,
            "{:<18} {:>8} {:>9} {:>10} {:>7} {:>8} {:>12.1}",
            "total",
            total.sections,
            total.expected,
            total.violations,
            total.token_violations,
            total.lost_wakeups,
            ms(total.max_wakeup_ns)
        );
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        let _ = writeln!(out, "faults: {}", faults.join(", "));
        let mut reasons: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for o in &self.overlaps {
            let side = o.holders.0.split('#').next().unwrap_or("?");
            *reasons
                .entry((o.reason.unwrap_or("VIOLATION"), side))
                .or_default() += 1;
        }
        let reasons: Vec<String> = reasons
            .iter()
            .map(|((r, side), n)| format!("{r} {n} (earlier holder {side})"))
            .collect();
        let _ = writeln!(
            out,
            "overlaps by reason: {}",
            if reasons.is_empty() {
                "none".to_string()
            } else {
                reasons.join(", ")
            }
        );
        let _ = writeln!(
            out,
            "max wake-up after a lost message: {:.1} ms",
            ms(self.max_wakeup_after_lost_message_ns)
        );
        let _ = writeln!(
            out,
            "gaps beyond the bound while an acquire of the name failed (a grant no one read, \
             held until its lease ran out; one lease added): {}, longest {:.1} ms",
            self.gaps_after_unanswered,
            ms(self.max_wakeup_after_unanswered_ns)
        );
        for o in self.violations() {
            let _ = writeln!(
                out,
                "VIOLATION {} {}/{} {} then {} at {} for {:.1} ms: {}",
                o.name,
                o.kinds.0,
                o.kinds.1,
                o.holders.0,
                o.holders.1,
                o.at_ns,
                ms(o.for_ns),
                o.detail
            );
        }
        for t in &self.token_violations {
            let _ = writeln!(out, "TOKEN {t}");
        }
        for g in &self.lost_wakeups {
            let _ = writeln!(
                out,
                "LOST WAKE-UP {} ({}) free {}..{}: {:.1} ms after faults (bound {:.1} ms)",
                g.name,
                g.kind,
                g.from_ns,
                g.to_ns,
                ms(g.after_faults_ns),
                ms(g.bound_ns)
            );
        }
        out
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Checks `holds` against `faults`.
pub fn check(holds: &[Hold], faults: &[Fault], params: &Params) -> Report {
    check_with_evictions(holds, faults, &[], params)
}

/// Checks `holds` against `faults` and the keys the server evicted meanwhile.
pub fn check_with_evictions(
    holds: &[Hold],
    faults: &[Fault],
    evictions: &[Eviction],
    params: &Params,
) -> Report {
    check_all(holds, faults, evictions, &[], params)
}

/// Checks `holds` against `faults`, the keys the server evicted meanwhile, and the acquires
/// that failed (which may have left a grant no one read).
pub fn check_all(
    holds: &[Hold],
    faults: &[Fault],
    evictions: &[Eviction],
    unanswered: &[Unanswered],
    params: &Params,
) -> Report {
    let mut report = Report::default();
    for fault in faults {
        *report.faults.entry(fault.class.name()).or_default() += 1;
    }
    let mut by_name: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in holds {
        by_name.entry(&hold.name).or_default().push(hold);
        report.kinds.entry(hold.kind.clone()).or_default().sections += 1;
    }
    for (name, mut list) in by_name {
        list.sort_by_key(|h| h.acquired_ns);
        // This name's evictions, once (an hour's soak hears thousands of evicted keys).
        let mut evicted: Vec<u64> = evictions
            .iter()
            .filter(|e| e.hits(name))
            .map(|e| e.at_ns)
            .collect();
        evicted.sort_unstable();
        let lost = Lost {
            faults,
            evicted: &evicted,
        };
        overlaps(name, &list, &lost, params, &mut report);
        tokens(name, &list, &lost, &mut report);
        let failed: Vec<&Unanswered> = unanswered.iter().filter(|u| u.name == name).collect();
        gaps(name, &list, faults, &failed, params, &mut report);
    }
    report
}

fn conflicts(a: &Hold, b: &Hold) -> bool {
    !(a.access == Access::Read && b.access == Access::Read)
}

/// What may have lost one name's lock state: faults that lose data, and the times its keys
/// were heard evicted (sorted).
struct Lost<'a> {
    faults: &'a [Fault],
    evicted: &'a [u64],
}

impl Lost<'_> {
    /// Why the name's state may have been lost between `from` and `to`, if it may.
    fn between(&self, from: u64, to: u64) -> Option<&'static str> {
        if wiped_between(self.faults, from, to) {
            return Some("wiped");
        }
        let first = self.evicted.partition_point(|&at| at < from);
        self.evicted
            .get(first)
            .is_some_and(|&at| at <= to.saturating_add(EVICTION_HEARD_WITHIN))
            .then_some("evicted")
    }
}

fn overlaps(name: &str, list: &[&Hold], lost: &Lost<'_>, params: &Params, report: &mut Report) {
    // The earlier holds not yet released at the current acquire, in list order: `list` is
    // sorted by acquire time, so a hold released by one acquire's time covers no later one
    // (an hour's soak has hundreds of thousands of holds: no scan of all earlier ones).
    let mut open: Vec<&Hold> = Vec::new();
    for later in list {
        let t = later.acquired_ns;
        open.retain(|e| e.releasing_ns > t);
        let active: Vec<&Hold> = open
            .iter()
            .copied()
            .filter(|e| e.covers(t) && e.holder() != later.holder())
            .collect();
        open.push(later);
        if let Access::Permits(permits) = later.access {
            if active.len() < permits as usize {
                continue;
            }
            let first = active.iter().map(|e| e.acquired_ns).min().unwrap_or(t);
            // An evicted semaphore's count is wrong from then on: it is set again, and a
            // release of a permit taken before the eviction adds that permit to the new count.
            let reason = if wiped_between(lost.faults, first, t) {
                Some("wiped")
            } else {
                lost.between(0, t)
            };
            let earliest = active
                .iter()
                .min_by_key(|e| e.acquired_ns)
                .copied()
                .unwrap_or(later);
            push_overlap(
                report,
                name,
                earliest,
                later,
                reason,
                format!("{} holders of {permits} permits", active.len() + 1),
            );
            continue;
        }
        for earlier in active.into_iter().filter(|e| conflicts(e, later)) {
            let (reason, detail) = classify(earlier, t, lost, params);
            push_overlap(report, name, earlier, later, reason, detail);
        }
    }
}

fn classify(
    earlier: &Hold,
    t: u64,
    lost: &Lost<'_>,
    params: &Params,
) -> (Option<&'static str>, String) {
    let faults = lost.faults;
    // A wipe destroyed the earlier hold, whatever its release said afterwards: a release whose
    // reply was lost in the restart is settled by reading the hold count, and a count of 0
    // cannot tell a release that ran from a hold that was wiped (the crate reports success).
    // An eviction of the lock's keys did the same to this one lock. Both count from the
    // request: Redis may have granted the hold as soon as it was sent.
    if let Some(reason) = lost.between(earlier.requested_ns, t) {
        return (Some(reason), String::new());
    }
    // Otherwise a successful release proves Redis still had the hold, except for the fair
    // kinds: their release of a lock that no longer exists reports success (Redisson's fair
    // unlock script, docs/LAYOUT.md §4.7, which the crate follows).
    if earlier.released_ok && !earlier.is_fair() {
        return (
            None,
            "the earlier holder's release succeeded: Redis had both holds".into(),
        );
    }
    if earlier.lost_ns.is_some_and(|lost| lost <= t) {
        return (Some("signalled"), String::new());
    }
    // From the request on: Redis may have granted the hold at any time after it was sent, and
    // a process stopped (or a link cut) between that grant and the reply's arrival renews
    // nothing while the lease runs; the hold's `acquired_ns` is only taken once it runs again.
    let blackout = longest_blackout(faults, &earlier.process, earlier.requested_ns, t);
    if blackout >= params.lease_loss_ns {
        return (Some("lease"), String::new());
    }
    // Redisson renews every watchdog hold of a client in one chain: the next renewal is
    // scheduled only when the last one has finished, and one that meets a dead connection
    // finishes only after its retries (seconds, its `timeout` and `retryAttempts`). So a
    // fault shorter than the lease can still let a lease run out; the evidence that it did
    // is a release Redis refused, and the overlap beginning a full lease after the acquire
    // was sent (no lease runs out sooner). The crate's holders are not judged by this rule:
    // they must have their lost signal.
    if !earlier.crate_side
        && blackout > 0
        && t >= earlier.requested_ns.saturating_add(params.lease_ns)
    {
        return (Some("stalled-renewal"), String::new());
    }
    let mut detail = format!(
        "longest renewal blackout {:.1} ms < {:.1} ms",
        ms(blackout),
        ms(params.lease_loss_ns)
    );
    if earlier.crate_side {
        let _ = write!(
            detail,
            "; lost signal {}",
            earlier.lost_ns.map_or("never fired".into(), |l| format!(
                "fired {:.1} ms after",
                ms(l - t)
            ))
        );
    }
    (None, detail)
}

fn push_overlap(
    report: &mut Report,
    name: &str,
    earlier: &Hold,
    later: &Hold,
    reason: Option<&'static str>,
    detail: String,
) {
    let figures = report.kinds.entry(later.kind.clone()).or_default();
    if reason.is_some() {
        figures.expected += 1;
    } else {
        figures.violations += 1;
    }
    report.overlaps.push(Overlap {
        name: name.to_owned(),
        kinds: (earlier.kind.clone(), later.kind.clone()),
        holders: (
            format!("{}/{}", earlier.process, earlier.owner),
            format!("{}/{}", later.process, later.owner),
        ),
        at_ns: later.acquired_ns,
        for_ns: earlier.releasing_ns.min(later.releasing_ns) - later.acquired_ns,
        reason,
        detail,
    });
}

fn wiped_between(faults: &[Fault], from: u64, to: u64) -> bool {
    faults
        .iter()
        .any(|f| f.class.may_lose_data() && f.overlaps(from, to))
}

/// The longest single stretch within `[from, to]` during which some fault kept `process`'s
/// renewals from Redis (overlapping or touching faults joined).
fn longest_blackout(faults: &[Fault], process: &str, from: u64, to: u64) -> u64 {
    let mut spans: Vec<(u64, u64)> = faults
        .iter()
        .filter(|f| {
            f.class.blocks_renewals_of(f.target.as_deref(), process) && f.overlaps(from, to)
        })
        .map(|f| (f.start_ns.max(from), f.end_ns.min(to)))
        .collect();
    spans.sort_unstable();
    let mut longest = 0;
    let mut current: Option<(u64, u64)> = None;
    for (start, end) in spans {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                longest = longest.max(e - s);
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = current {
        longest = longest.max(e - s);
    }
    longest
}

fn tokens(name: &str, list: &[&Hold], lost: &Lost<'_>, report: &mut Report) {
    let fenced: Vec<&Hold> = list.iter().copied().filter(|h| h.token.is_some()).collect();
    for pair in fenced.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let (ta, tb) = (a.token.unwrap_or(0), b.token.unwrap_or(0));
        if tb > ta {
            continue;
        }
        // A wiped (or evicted) counter starts over; holds that overlapped are judged as an
        // overlap.
        if lost.between(a.requested_ns, b.acquired_ns).is_some() || a.covers(b.acquired_ns) {
            continue;
        }
        report
            .kinds
            .entry(b.kind.clone())
            .or_default()
            .token_violations += 1;
        report.token_violations.push(format!(
            "{name}: token {tb} ({}/{}) granted after token {ta} ({}/{})",
            b.process, b.owner, a.process, a.owner
        ));
    }
}

fn gaps(
    name: &str,
    list: &[&Hold],
    faults: &[Fault],
    unanswered: &[&Unanswered],
    params: &Params,
    report: &mut Report,
) {
    let capacity = match list.first().map(|h| h.access) {
        Some(Access::Permits(n)) => n as usize,
        _ => 1,
    };
    // Sweep the holds' start and end events: the stretches with fewer holders than capacity.
    let mut events: Vec<(u64, i64)> = Vec::with_capacity(list.len() * 2);
    for h in list {
        events.push((h.acquired_ns, 1));
        events.push((h.releasing_ns, -1));
    }
    events.sort_unstable();
    let mut held = 0_i64;
    let mut free_since = None;
    let mut free: Vec<(u64, u64)> = Vec::new();
    for (t, delta) in events {
        let was_free = (held as usize) < capacity;
        held += delta;
        let is_free = (held as usize) < capacity;
        match (was_free, is_free) {
            (true, false) => {
                if let Some(since) = free_since.take() {
                    free.push((since, t));
                }
            }
            (false, true) => free_since = Some(t),
            _ => {}
        }
    }
    let kind_label = {
        let kinds: BTreeSet<&str> = list.iter().map(|h| h.kind.as_str()).collect();
        kinds.into_iter().collect::<Vec<_>>().join("+")
    };
    // `list` is sorted by acquire time: the waiters of a free stretch are among the holds
    // acquired at or after its end, and once every hold from some index on was requested after
    // its start (the suffix minimum of the request times), none further can be one.
    let mut requested_min: Vec<u64> = list.iter().map(|h| h.requested_ns).collect();
    for i in (0..requested_min.len().saturating_sub(1)).rev() {
        requested_min[i] = requested_min[i].min(requested_min[i + 1]);
    }
    // Once per name, not per gap: scans of every hold.
    let any_fair = list.iter().any(|h| h.is_fair());
    let contenders = list
        .iter()
        .map(|h| (h.process.as_str(), h.owner))
        .collect::<BTreeSet<_>>()
        .len() as u64;
    for (from, to) in free {
        let first = list.partition_point(|h| h.acquired_ns < to);
        let waiters: Vec<&Hold> = list[first..]
            .iter()
            .zip(&requested_min[first..])
            .take_while(|(_, min)| **min <= from)
            .map(|(h, _)| *h)
            .filter(|h| h.requested_ns <= from)
            .collect();
        if waiters.is_empty() {
            continue;
        }
        let healed = faults
            .iter()
            .filter(|f| f.overlaps(from, to))
            .map(|f| f.end_ns)
            .max()
            .unwrap_or(from)
            .max(from);
        let after_faults = to.saturating_sub(healed);
        let lost_message = faults.iter().any(|f| {
            f.class == FaultClass::KillPubsub
                && f.start_ns <= to
                && f.end_ns + 1_000_000_000 >= from
        });
        if lost_message {
            report.max_wakeup_after_lost_message_ns =
                report.max_wakeup_after_lost_message_ns.max(after_faults);
        }
        let mut bound = if waiters.iter().any(|w| w.crate_side) {
            params.rust_wakeup_ns
        } else {
            params.java_wakeup_ns
        };
        if any_fair || waiters.iter().any(|w| w.is_fair()) {
            bound = params.java_wakeup_ns.max(bound) + params.fair_wait_ns;
            if !waiters.iter().any(|w| w.crate_side) {
                // A Redisson fair waiter whose wake-up message is lost sleeps out the reply it
                // got on joining the queue: the time until the waiter before it must have
                // taken the lock (docs/LAYOUT.md §4.4), up to a lease and a slot for each
                // owner that can be queued ahead of it.
                let ahead = contenders.saturating_sub(1);
                bound = bound
                    .max(params.java_wakeup_ns + params.lease_ns + ahead * params.fair_wait_ns);
            }
        }
        // A grant no one read holds the lock for at most a lease after Redis ran it, which was
        // no later than the failed request's end or the end of a fault holding it back. A
        // hold whose release failed lasts as long, or, re-entered by its owner's later holds,
        // until a lease after the last of them.
        let ran_by = |u: &Unanswered| {
            let own_last = u.holder.as_ref().map_or(0, |(process, owner)| {
                list.iter()
                    .filter(|h| {
                        h.process == *process
                            && h.owner == *owner
                            && h.acquired_ns >= u.start_ns
                            && h.releasing_ns <= to
                    })
                    .map(|h| h.releasing_ns)
                    .max()
                    .unwrap_or(0)
            });
            faults
                .iter()
                .filter(|f| f.overlaps(u.start_ns, u.end_ns))
                .map(|f| f.end_ns)
                .fold(u.end_ns.max(own_last), u64::max)
        };
        if after_faults > bound
            && unanswered
                .iter()
                .any(|u| u.start_ns <= to && from <= ran_by(u) + params.lease_ns)
        {
            bound += params.lease_ns;
            report.gaps_after_unanswered += 1;
            report.max_wakeup_after_unanswered_ns =
                report.max_wakeup_after_unanswered_ns.max(after_faults);
        }
        let figures = report.kinds.entry(waiters[0].kind.clone()).or_default();
        figures.max_wakeup_ns = figures.max_wakeup_ns.max(after_faults);
        if after_faults > bound {
            figures.lost_wakeups += 1;
            report.lost_wakeups.push(Gap {
                name: name.to_owned(),
                kind: kind_label.clone(),
                from_ns: from,
                to_ns: to,
                after_faults_ns: after_faults,
                bound_ns: bound,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn params() -> Params {
        Params {
            lease_ns: 3000 * MS,
            lease_loss_ns: 2000 * MS,
            rust_wakeup_ns: 2000 * MS,
            java_wakeup_ns: 4000 * MS,
            fair_wait_ns: 5000 * MS,
        }
    }

    fn hold(process: &str, kind: &str, acquired_ms: u64, releasing_ms: u64) -> Hold {
        Hold {
            process: process.into(),
            crate_side: process.starts_with("rust"),
            owner: 1,
            kind: kind.into(),
            name: "n".into(),
            access: match kind {
                "read" => Access::Read,
                "semaphore" => Access::Permits(2),
                _ => Access::Exclusive,
            },
            requested_ns: acquired_ms * MS,
            acquired_ns: acquired_ms * MS,
            releasing_ns: releasing_ms * MS,
            token: None,
            lost_ns: None,
            released_ok: true,
        }
    }

    fn fault(class: FaultClass, target: Option<&str>, start_ms: u64, end_ms: u64) -> Fault {
        Fault {
            class,
            target: target.map(str::to_owned),
            start_ns: start_ms * MS,
            end_ns: end_ms * MS,
        }
    }

    #[test]
    fn disjoint_holds_and_overlapping_reads_are_clean() {
        let holds = [
            hold("rust#1", "write", 0, 10),
            hold("java#1", "read", 20, 40),
            hold("rust#2", "read", 25, 30),
            hold("java#2", "write", 41, 50),
        ];
        let report = check(&holds, &[], &params());
        assert!(report.is_clean(), "{}", report.table());
        assert!(report.overlaps.is_empty());
        assert_eq!(report.kinds["read"].sections, 2);
    }

    #[test]
    fn an_unexplained_overlap_is_a_violation_and_a_blackout_explains_one() {
        let mut first = hold("rust#2", "lock", 0, 5000);
        first.released_ok = false;
        let holds = [first, hold("rust#1", "lock", 4000, 4100)];
        let report = check(&holds, &[], &params());
        assert_eq!(report.violations().count(), 1, "{}", report.table());
        assert_eq!(report.kinds["lock"].violations, 1);

        // A 1.5 s freeze of the earlier holder's link cannot let its lease run out...
        let short = [fault(FaultClass::LinkFreeze, Some("rust#2"), 1000, 2500)];
        assert_eq!(check(&holds, &short, &params()).violations().count(), 1);
        // ...nor a long one of someone else's...
        let other = [fault(FaultClass::LinkFreeze, Some("java#1"), 1000, 3500)];
        assert_eq!(check(&holds, &other, &params()).violations().count(), 1);
        // ...but a 2.5 s one can, and so can a pause joined to a stall.
        let long = [fault(FaultClass::LinkFreeze, Some("rust#2"), 1000, 3500)];
        let report = check(&holds, &long, &params());
        assert!(report.is_clean(), "{}", report.table());
        assert_eq!(report.overlaps[0].reason, Some("lease"));
        let joined = [
            fault(FaultClass::Pause, Some("rust#2"), 1000, 2000),
            fault(FaultClass::DebugSleep, None, 2000, 3100),
        ];
        assert!(check(&holds, &joined, &params()).is_clean());
    }

    #[test]
    fn a_released_earlier_hold_is_a_violation_unless_a_wipe_destroyed_it() {
        let holds = [
            hold("rust#1", "lock", 0, 5000),
            hold("java#1", "lock", 4000, 4100),
        ];
        // Even a long blackout or an early lost signal does not explain it: Redis had both.
        let blackout = [fault(FaultClass::LinkFreeze, Some("rust#1"), 1000, 3900)];
        let report = check(&holds, &blackout, &params());
        assert_eq!(report.violations().count(), 1);
        assert!(report.overlaps[0].detail.contains("release succeeded"));
        // A wipe during the hold: the release's success was a settled lost reply.
        let faults = [fault(FaultClass::RestartWiped, None, 100, 200)];
        let report = check(&holds, &faults, &params());
        assert!(report.is_clean(), "{}", report.table());
        assert_eq!(report.overlaps[0].reason, Some("wiped"));
    }

    #[test]
    fn a_wipe_or_an_early_lost_signal_explains_an_overlap_a_late_signal_does_not() {
        let mut first = hold("rust#1", "fenced", 0, 5000);
        first.released_ok = false;
        let holds = [first.clone(), hold("java#1", "fenced", 4000, 4100)];
        let wiped = [fault(FaultClass::RestartWiped, None, 100, 300)];
        assert_eq!(
            check(&holds, &wiped, &params()).overlaps[0].reason,
            Some("wiped")
        );

        first.lost_ns = Some(3999 * MS);
        let signalled = [first.clone(), hold("java#1", "fenced", 4000, 4100)];
        assert_eq!(
            check(&signalled, &[], &params()).overlaps[0].reason,
            Some("signalled")
        );
        first.lost_ns = Some(4001 * MS);
        let late = [first, hold("java#1", "fenced", 4000, 4100)];
        let report = check(&late, &[], &params());
        assert_eq!(report.violations().count(), 1);
        assert!(report.overlaps[0].detail.contains("fired 1.0 ms after"));
    }

    #[test]
    fn a_blackout_between_the_request_and_its_reply_counts() {
        // Redis grants at once; the holder's process is stopped before it reads the reply and
        // notes the hold only when it runs again, 3.3 s later, with its lease gone: another
        // thread of the same process takes the lock 5 ms after. (A fair kind: its release of
        // a lock that is gone reports success, so that proves nothing.)
        let mut first = hold("java#1", "nonreentrant_fair", 3305, 3320);
        first.requested_ns = 0;
        let mut later = hold("java#1", "nonreentrant_fair", 3310, 3330);
        later.owner = 2;
        let holds = [first.clone(), later.clone()];
        let stopped = [fault(FaultClass::Pause, Some("java#1"), 10, 3300)];
        let report = check(&holds, &stopped, &params());
        assert_eq!(report.overlaps.len(), 1, "{}", report.table());
        assert_eq!(report.overlaps[0].reason, Some("lease"));
        assert!(report.is_clean(), "{}", report.table());

        // A stop shorter than the lease loss, within a lease of the request, explains nothing
        // (a lease after it, rule 4 would: Redisson's renewal chain may stall behind it)...
        let mut first_short = hold("java#1", "nonreentrant_fair", 2505, 2520);
        first_short.requested_ns = 1000 * MS;
        let mut later_short = hold("java#1", "nonreentrant_fair", 2510, 2530);
        later_short.owner = 2;
        let short = [fault(FaultClass::Pause, Some("java#1"), 1010, 2500)];
        let report = check(&[first_short, later_short], &short, &params());
        assert_eq!(report.violations().count(), 1, "{}", report.table());
        // ...nor does a long one that was over before the request was sent.
        let mut first_late = first;
        first_late.requested_ns = 3301 * MS;
        let before = [first_late, later];
        assert_eq!(check(&before, &stopped, &params()).violations().count(), 1);
    }

    #[test]
    fn a_short_fault_explains_a_redisson_lease_running_out_only_a_lease_after_the_acquire() {
        // Redisson's renewal chain stalls behind a 1 s restart; its 3 s lease runs out.
        let mut first = hold("java#1", "fenced", 0, 5000);
        first.released_ok = false;
        let restart = [fault(FaultClass::RestartAof, None, 1, 1050)];
        let later = |at: u64| hold("rust#1", "fenced", at, at + 10);
        let report = check(&[first.clone(), later(3010)], &restart, &params());
        assert_eq!(report.overlaps[0].reason, Some("stalled-renewal"));
        assert!(report.is_clean(), "{}", report.table());

        // Sooner than a lease after the acquire was sent: no lease ran out.
        let report = check(&[first.clone(), later(2990)], &restart, &params());
        assert_eq!(report.violations().count(), 1, "{}", report.table());
        // No fault touched the hold: nothing kept its renewals from Redis.
        let report = check(&[first.clone(), later(3010)], &[], &params());
        assert_eq!(report.violations().count(), 1, "{}", report.table());
        // A fault on another process does not touch this one's renewals.
        let elsewhere = [fault(FaultClass::Pause, Some("java#2"), 1, 1050)];
        let report = check(&[first.clone(), later(3010)], &elsewhere, &params());
        assert_eq!(report.violations().count(), 1, "{}", report.table());
        // Redis had both holds: the release succeeded.
        let mut released = first.clone();
        released.released_ok = true;
        let report = check(&[released, later(3010)], &restart, &params());
        assert_eq!(report.violations().count(), 1, "{}", report.table());
        // The crate's holders must have their lost signal.
        let mut ours = first;
        ours.process = "rust#2".into();
        ours.crate_side = true;
        let report = check(&[ours, later(3010)], &restart, &params());
        assert_eq!(report.violations().count(), 1, "{}", report.table());
        assert!(
            report.overlaps[0]
                .detail
                .contains("lost signal never fired")
        );
    }

    #[test]
    fn a_failover_the_sentinels_started_on_their_own_may_lose_data() {
        let mut a = hold("rust#1", "fenced", 10, 11);
        a.token = Some(7);
        let mut b = hold("rust#1", "fenced", 20, 21);
        b.token = Some(7);
        let auto = [fault(FaultClass::AutoFailover, None, 5, 30)];
        assert!(check(&[a.clone(), b.clone()], &auto, &params()).is_clean());
        assert_eq!(check(&[a, b], &[], &params()).token_violations.len(), 1);
        assert!(FaultClass::AutoFailover.may_lose_data());
        assert!(!FaultClass::ClientPauseWrite.may_lose_data());
    }

    #[test]
    fn a_fair_release_of_a_vanished_lock_is_no_proof_of_a_double_hold() {
        // Redisson's fair unlock reports success when the lock key is gone.
        let first = hold("java#1", "fair", 0, 5000);
        let holds = [first, hold("rust#1", "fair", 4000, 4100)];
        let wiped = [fault(FaultClass::RestartWiped, None, 100, 300)];
        let report = check(&holds, &wiped, &params());
        assert!(report.is_clean(), "{}", report.table());
        assert_eq!(report.overlaps[0].reason, Some("wiped"));
        // Without an explanation it is still a violation.
        assert_eq!(check(&holds, &[], &params()).violations().count(), 1);
    }

    #[test]
    fn semaphores_may_have_as_many_holders_as_permits() {
        let holds = [
            hold("rust#1", "semaphore", 0, 100),
            hold("java#1", "semaphore", 10, 100),
            hold("rust#2", "semaphore", 20, 30),
        ];
        let report = check(&holds, &[], &params());
        assert_eq!(report.violations().count(), 1, "{}", report.table());
        assert!(report.overlaps[0].detail.contains("3 holders of 2 permits"));
        let two = &holds[..2];
        assert!(check(two, &[], &params()).is_clean());
    }

    #[test]
    fn tokens_must_rise_in_grant_order_unless_the_counter_was_wiped() {
        let mut a = hold("rust#1", "fenced", 0, 10);
        a.token = Some(5);
        let mut b = hold("java#1", "fenced", 20, 30);
        b.token = Some(5);
        let report = check(&[a.clone(), b.clone()], &[], &params());
        assert_eq!(report.token_violations.len(), 1, "{}", report.table());
        let wiped = [fault(FaultClass::RestartWiped, None, 12, 15)];
        assert!(check(&[a.clone(), b.clone()], &wiped, &params()).is_clean());
        b.token = Some(6);
        assert!(check(&[a, b], &[], &params()).is_clean());
    }

    #[test]
    fn a_waiter_left_waiting_past_the_bound_is_a_lost_wake_up_unless_a_fault_explains_it() {
        let mut waiter = hold("rust#2", "lock", 3100, 3200);
        waiter.requested_ns = 50 * MS;
        let holds = [hold("rust#1", "lock", 0, 100), waiter.clone()];
        let report = check(&holds, &[], &params());
        assert_eq!(report.lost_wakeups.len(), 1, "{}", report.table());
        assert_eq!(report.lost_wakeups[0].after_faults_ns, 3000 * MS);

        // A freeze until 2000 ms leaves 1.1 s: within the bound.
        let faults = [fault(FaultClass::LinkFreeze, Some("rust#2"), 500, 2000)];
        let report = check(&holds, &faults, &params());
        assert!(report.is_clean(), "{}", report.table());
        assert_eq!(report.kinds["lock"].max_wakeup_ns, 1100 * MS);

        // Redisson's waiters are held to the TTL fallback, fair locks to the slot too.
        let mut java = waiter.clone();
        java.process = "java#2".into();
        java.crate_side = false;
        assert!(check(&[holds[0].clone(), java], &[], &params()).is_clean());
        let mut fair = [hold("rust#1", "fair", 0, 100), waiter];
        fair[1].kind = "fair".into();
        assert!(check(&fair, &[], &params()).is_clean());
    }

    fn evicted(key: &str, at_ms: u64) -> Eviction {
        Eviction {
            key: key.into(),
            at_ns: at_ms * MS,
        }
    }

    #[test]
    fn an_eviction_explains_an_overlap_of_its_own_lock_only_and_only_after_the_acquire() {
        let mut first = hold("rust#1", "lock", 1000, 5000);
        first.released_ok = false;
        let holds = [first.clone(), hold("java#1", "lock", 4000, 4100)];
        let faults = [fault(FaultClass::Eviction, None, 3000, 3900)];
        // Heard during the hold, before the later grant (or just after it): expected.
        for at in [3100, 4200] {
            let report = check_with_evictions(&holds, &faults, &[evicted("n", at)], &params());
            assert!(report.is_clean(), "{}", report.table());
            assert_eq!(report.overlaps[0].reason, Some("evicted"));
        }
        // A key of the lock's own: a marker, a queue.
        let marker = evicted("{n}:x:rwlock_timeout:1", 3100);
        assert!(check_with_evictions(&holds, &faults, &[marker], &params()).is_clean());
        // Another lock's key, one evicted before the earlier acquire was sent, or heard long
        // after the later grant: nothing explains it.
        for e in [
            evicted("m", 3100),
            evicted("{m}", 3100),
            evicted("n", 900),
            evicted("n", 4600),
        ] {
            let report = check_with_evictions(&holds, &faults, std::slice::from_ref(&e), &params());
            assert_eq!(report.violations().count(), 1, "{e:?}: {}", report.table());
        }
        // The fault alone is no explanation: it is judged per key.
        assert_eq!(check(&holds, &faults, &params()).violations().count(), 1);
        assert!(!FaultClass::Eviction.may_lose_data());
        assert!(!FaultClass::MemoryFull.blocks_renewals_of(None, "rust#1"));
        // As with a wipe, the eviction destroyed the hold whatever its release said after.
        let mut released = first;
        released.released_ok = true;
        let holds = [released, hold("java#1", "lock", 4000, 4100)];
        let e = [evicted("n", 3100)];
        assert!(check_with_evictions(&holds, &faults, &e, &params()).is_clean());
    }

    #[test]
    fn an_evicted_counter_or_semaphore_starts_over() {
        let mut a = hold("rust#1", "fenced", 0, 10);
        a.token = Some(5);
        let mut b = hold("java#1", "fenced", 20, 30);
        b.token = Some(1);
        let counter = [evicted("redisson_lock_token:{n}", 12)];
        assert!(check_with_evictions(&[a.clone(), b.clone()], &[], &counter, &params()).is_clean());
        assert_eq!(check(&[a, b], &[], &params()).token_violations.len(), 1);

        let holds = [
            hold("rust#1", "semaphore", 0, 100),
            hold("java#1", "semaphore", 10, 100),
            hold("rust#2", "semaphore", 20, 30),
        ];
        let permits = [evicted("n", 15)];
        assert!(check_with_evictions(&holds, &[], &permits, &params()).is_clean());
        // Long before: the count set again then may still be too high.
        let before = [evicted("n", 0)];
        assert!(check_with_evictions(&holds, &[], &before, &params()).is_clean());
        // After the over-grant began: no explanation.
        let after = [evicted("n", 600)];
        assert_eq!(
            check_with_evictions(&holds, &[], &after, &params())
                .violations()
                .count(),
            1
        );
        assert_eq!(check(&holds, &[], &params()).violations().count(), 1);
    }

    #[test]
    fn a_failed_acquire_during_a_gap_adds_one_lease_to_its_bound() {
        // Free from 100 ms to 3100 ms while rust#2 waited: 3000 ms, over the 2000 ms bound.
        let mut waiter = hold("rust#2", "lock", 3100, 3200);
        waiter.requested_ns = 50 * MS;
        let holds = [hold("rust#1", "lock", 0, 100), waiter];
        let failed = |start_ms: u64, end_ms: u64| Unanswered {
            name: "n".into(),
            holder: None,
            start_ns: start_ms * MS,
            end_ns: end_ms * MS,
        };
        let report = check(&holds, &[], &params());
        assert_eq!(report.lost_wakeups.len(), 1);
        assert_eq!(report.gaps_after_unanswered, 0);

        // java#1's acquire failed as the lock came free: its grant may have held it a lease.
        let report = check_all(&holds, &[], &[], &[failed(90, 120)], &params());
        assert!(report.is_clean(), "{}", report.table());
        assert_eq!(report.gaps_after_unanswered, 1);
        assert_eq!(report.max_wakeup_after_unanswered_ns, 3000 * MS);

        // One of another name, or one that ended more than a lease before the gap began,
        // explains nothing.
        let other = Unanswered {
            name: "m".into(),
            ..failed(90, 120)
        };
        let mut early_holds = holds.clone();
        early_holds[0] = hold("rust#1", "lock", 0, 4000);
        early_holds[1] = {
            let mut w = hold("rust#2", "lock", 7000, 7100);
            w.requested_ns = 3900 * MS;
            w
        };
        for (holds, failed) in [(&holds, other), (&early_holds, failed(0, 900))] {
            let report = check_all(holds, &[], &[], &[failed], &params());
            assert_eq!(report.lost_wakeups.len(), 1, "{}", report.table());
            assert_eq!(report.gaps_after_unanswered, 0);
        }

        // A fault that held the failed request back lets Redis run it as late as the fault's
        // end: the lease counts from there.
        let held_back = [fault(FaultClass::LinkFreeze, Some("java#1"), 500, 3500)];
        let report = check_all(&early_holds, &held_back, &[], &[failed(0, 900)], &params());
        assert!(report.is_clean(), "{}", report.table());

        // A release of rust#1/1 failed at 0..100 ms; its later holds (re-entering the hold
        // left in Redis) ran to 4000 ms; then the lock was free to no one for 3000 ms.
        let mut starved = hold("rust#2", "lock", 7000, 7100);
        starved.requested_ns = 50 * MS;
        let reentered = [hold("rust#1", "lock", 200, 4000), starved];
        let mut own = failed(0, 100);
        own.holder = Some(("rust#1".into(), 1));
        let report = check_all(&reentered, &[], &[], &[own.clone()], &params());
        assert!(report.is_clean(), "{}", report.table());
        // Another owner's failure explains nothing there.
        own.holder = Some(("rust#1".into(), 2));
        let report = check_all(&reentered, &[], &[], &[own], &params());
        assert_eq!(report.lost_wakeups.len(), 1, "{}", report.table());

        // A gap longer than the bound plus a lease stays a lost wake-up.
        let mut late = hold("rust#2", "lock", 5200, 5300);
        late.requested_ns = 50 * MS;
        let holds = [hold("rust#1", "lock", 0, 100), late];
        let report = check_all(&holds, &[], &[], &[failed(90, 120)], &params());
        assert_eq!(report.lost_wakeups.len(), 1);
        assert_eq!(report.lost_wakeups[0].bound_ns, 5000 * MS);
    }

    #[test]
    fn a_java_fair_waiter_may_sleep_out_the_reply_it_got_on_joining_the_queue() {
        // Four owners held the fair lock before java#1/1 released it at 1100 ms; java#1/2,
        // queued since 50 ms, took it after the lock was free for `gap_ms`.
        let holds_with = |waiter_process: &str, gap_ms: u64| {
            let mut holds: Vec<Hold> = ["rust#1", "rust#2", "java#2"]
                .iter()
                .enumerate()
                .map(|(i, p)| hold(p, "fair", 100 * i as u64, 100 * i as u64 + 50))
                .collect();
            holds.push(hold("java#1", "fair", 1000, 1100));
            let mut waiter = hold(waiter_process, "fair", 1100 + gap_ms, 1200 + gap_ms);
            waiter.owner = 2;
            waiter.requested_ns = 50 * MS;
            holds.push(waiter);
            holds
        };
        // 20 s: over the 9 s of a Java waiter (4 s) and a slot (5 s), within a lease (3 s) and
        // a slot for each of the four other owners (20 s) after the 4 s.
        let report = check(&holds_with("java#1", 20_000), &[], &params());
        assert!(report.is_clean(), "{}", report.table());
        assert_eq!(report.kinds["fair"].max_wakeup_ns, 20_000 * MS);
        // Longer than that stays a lost wake-up.
        let report = check(&holds_with("java#1", 27_500), &[], &params());
        assert_eq!(report.lost_wakeups.len(), 1, "{}", report.table());
        assert_eq!(report.lost_wakeups[0].bound_ns, 27_000 * MS);
        // A waiter of the crate keeps the bound of a slot: the crate re-polls by the head's
        // deadline (docs/LAYOUT.md §4.4).
        let report = check(&holds_with("rust#1", 20_000), &[], &params());
        assert_eq!(report.lost_wakeups.len(), 1, "{}", report.table());
        assert_eq!(report.lost_wakeups[0].bound_ns, 9_000 * MS);
    }

    #[test]
    fn the_longest_gap_after_a_killed_subscription_is_reported() {
        let mut waiter = hold("rust#2", "lock", 900, 950);
        waiter.requested_ns = 50 * MS;
        let holds = [hold("rust#1", "lock", 0, 100), waiter];
        let faults = [fault(FaultClass::KillPubsub, None, 90, 90)];
        let report = check(&holds, &faults, &params());
        assert_eq!(report.max_wakeup_after_lost_message_ns, 800 * MS);
        assert_eq!(report.faults["kill-pubsub"], 1);
    }
}
