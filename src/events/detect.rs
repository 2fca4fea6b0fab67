//! From two snapshots and what was heard between them, the events (no I/O).
//!
//! The rules (see [`EventKind`]): holders are compared by hash field. A holder that left is
//! classified by the first keyspace notification of the key that removes it (`expired`,
//! `evicted`, `del`, preceded or not by a hold's decrement), else by a message on an unlock
//! channel (the lock's hash was gone when it was published), else by the last TTL: gone after
//! it ran out is an expiry, before it a deletion. Notifications are trusted when they came;
//! their absence only tells something when keyspace notifications are known to be on.

use std::collections::HashMap;
use std::time::{Instant, SystemTime};

use super::event::{Event, EventKind, Keyspace, Notice, SeenBy};
use crate::inspect::{Holder, Snapshot, StructureKind};
use crate::options::Ttl;

/// How much earlier than its last TTL said a key may expire, as seen from here (the TTL was
/// read after the read's start, and clocks of two reads differ by scheduling).
const EXPIRY_SLACK: std::time::Duration = std::time::Duration::from_millis(25);

/// A snapshot and when it was read.
#[derive(Clone, Debug)]
pub(super) struct Read {
    pub(super) snapshot: Snapshot,
    /// When the read was sent: the TTL it returned runs from a later instant.
    pub(super) sent: Instant,
    /// When it returned.
    pub(super) done: Instant,
    pub(super) at: SystemTime,
}

impl Read {
    /// When the key would expire by the TTL this read returned, at the earliest.
    pub(super) fn expires(&self) -> Option<Instant> {
        match self.snapshot.ttl {
            Ttl::Remaining(d) => Some(self.sent + d),
            _ => None,
        }
    }
}

/// What a notice says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    /// An unlock message: the lock's hash was gone when it was published.
    Freed,
    /// A semaphore's permits came back.
    Permits,
    /// A latch reached zero (`0`).
    LatchOpened,
    /// A latch was set or deleted (`1`).
    LatchSet,
    /// A keyspace notification of the key.
    Keyspace,
}

/// The channels of one name, to tell what a notice says.
#[derive(Clone, Debug)]
pub(super) struct Channels {
    pub(super) lock: String,
    pub(super) rwlock: String,
    pub(super) semaphore: String,
    pub(super) latch: String,
    pub(super) keyspace: Option<String>,
}

impl Channels {
    fn said(&self, notice: &Notice) -> Option<Said> {
        let c = notice.channel.as_str();
        if Some(c) == self.keyspace.as_deref() {
            Some(Said::Keyspace)
        } else if c == self.lock || c == self.rwlock || c.starts_with(&format!("{}:", self.lock)) {
            Some(Said::Freed)
        } else if c == self.semaphore {
            Some(Said::Permits)
        } else if c == self.latch {
            match notice.payload.as_str() {
                "0" => Some(Said::LatchOpened),
                _ => Some(Said::LatchSet),
            }
        } else {
            None
        }
    }
}

/// What `classify` needs to know besides the two reads.
pub(super) struct Context<'a> {
    pub(super) channels: &'a Channels,
    /// Keyspace notifications are on: their absence tells something.
    pub(super) keyspace_on: bool,
}

/// The cause of a holder's (or a counter's) disappearance.
fn gone_cause(
    ctx: &Context<'_>,
    kind: StructureKind,
    said: &[(Said, &Notice)],
    before: &Read,
    now: &Read,
) -> (EventKind, SeenBy) {
    // The first keyspace notification that removes the key, and whether a hold was
    // decremented (an unlock) before it.
    let mut decremented = false;
    for (s, n) in said {
        if *s != Said::Keyspace {
            continue;
        }
        match n.payload.as_str() {
            "hincrby" | "hdel" | "incrby" | "decrby" => decremented = true,
            "expired" => return (EventKind::Expired, SeenBy::Keyspace),
            "evicted" => return (EventKind::Deleted, SeenBy::Keyspace),
            "del" => {
                let freed = said.iter().any(|(s, _)| *s == Said::Freed);
                if decremented {
                    return (EventKind::Released, SeenBy::Keyspace);
                }
                if kind == StructureKind::Token {
                    // A token lock's release is a compare-and-delete: one `del`, no message.
                    return (EventKind::Released, SeenBy::Keyspace);
                }
                if freed {
                    return (EventKind::ForceUnlocked, SeenBy::Keyspace);
                }
                if ctx.keyspace_on {
                    return (EventKind::Deleted, SeenBy::Keyspace);
                }
                break;
            }
            _ => {}
        }
    }
    if said.iter().any(|(s, _)| *s == Said::Freed) {
        return (EventKind::Released, SeenBy::Message);
    }
    if decremented && now.snapshot.ttl != Ttl::Absent {
        // A holder's decrement, the lock still there: it left (a reader among others).
        return (EventKind::Released, SeenBy::Keyspace);
    }
    if said
        .iter()
        .any(|(s, _)| matches!(s, Said::LatchOpened | Said::LatchSet))
    {
        return (EventKind::Deleted, SeenBy::Message);
    }
    let expired = before
        .expires()
        .is_some_and(|at| now.done + EXPIRY_SLACK >= at);
    if expired {
        (EventKind::Expired, SeenBy::Snapshot)
    } else if kind == StructureKind::Token || now.snapshot.ttl != Ttl::Absent {
        // A token lock publishes nothing; a holder gone while the lock remains released.
        (EventKind::Released, SeenBy::Snapshot)
    } else {
        (EventKind::Deleted, SeenBy::Snapshot)
    }
}

/// How an acquisition (or any change no message announces) was told: by a keyspace
/// notification when one was heard, else by the snapshots (a message tells a release, not who
/// took the lock).
fn seen_taken(said: &[(Said, &Notice)]) -> SeenBy {
    if said.iter().any(|(s, _)| *s == Said::Keyspace) {
        SeenBy::Keyspace
    } else {
        SeenBy::Snapshot
    }
}

/// How another change was told: by a keyspace notification or a message when one was heard,
/// else by the snapshots.
fn seen(said: &[(Said, &Notice)]) -> SeenBy {
    if said.iter().any(|(s, _)| *s == Said::Keyspace) {
        SeenBy::Keyspace
    } else if said.is_empty() {
        SeenBy::Snapshot
    } else {
        SeenBy::Message
    }
}

/// What `state` compares: everything but the TTLs (which always move) and the holders.
fn other_state(s: &Snapshot) -> impl PartialEq + use<> {
    (
        s.kind,
        s.mode,
        s.queue
            .iter()
            .map(|w| (w.field.clone(), w.deadline_ms))
            .collect::<Vec<_>>(),
        s.permits,
        s.count,
        s.acquired.clone(),
    )
}

/// The events between `before` and `now`, given what was heard (`heard`, consumed).
/// `definite` says how many of the notices arrived before `now` was sent (so their changes
/// are in it): a lock freed and taken again by the same holders between two reads is told
/// only from those.
pub(super) fn classify(
    ctx: &Context<'_>,
    before: &Read,
    now: &Read,
    heard: &[Notice],
    definite: usize,
) -> Vec<Event> {
    let said: Vec<(Said, &Notice)> = heard
        .iter()
        .filter_map(|n| ctx.channels.said(n).map(|s| (s, n)))
        .collect();
    let (p, s) = (&before.snapshot, &now.snapshot);
    let event = |kind, holder: Option<&Holder>, holds, permits, seen_by| Event {
        kind,
        name: s.name.clone(),
        holder: holder.cloned(),
        holds,
        permits,
        seen_by,
        heard: heard.to_vec(),
        keyspace: None,
        snapshot: s.clone(),
        at: now.at,
    };
    let mut events = Vec::new();

    // Holders, by field.
    let old: HashMap<&str, &Holder> = p.holders.iter().map(|h| (h.field.as_str(), h)).collect();
    let new: HashMap<&str, &Holder> = s.holders.iter().map(|h| (h.field.as_str(), h)).collect();
    let gone: Vec<&Holder> = p
        .holders
        .iter()
        .filter(|h| !new.contains_key(h.field.as_str()))
        .collect();
    if !gone.is_empty() {
        let (kind, by) = gone_cause(ctx, p.kind, &said, before, now);
        for h in gone {
            events.push(event(kind, Some(h), Some(0), None, by));
        }
    }
    // Freed (a message heard before `now` was read) yet the same holders: freed and taken
    // again between the two reads.
    let freed_before = heard[..definite.min(heard.len())]
        .iter()
        .any(|n| ctx.channels.said(n) == Some(Said::Freed));
    let retaken = freed_before
        && events.is_empty()
        && !p.holders.is_empty()
        && p.holders.iter().all(|h| new.contains_key(h.field.as_str()));
    if retaken {
        let (kind, by) = gone_cause(ctx, p.kind, &said, before, now);
        for h in &p.holders {
            events.push(event(kind, Some(h), Some(0), None, by));
        }
    }
    for h in &s.holders {
        let kind = match old.get(h.field.as_str()) {
            Some(_) if retaken => EventKind::Acquired,
            None => EventKind::Acquired,
            Some(o) if h.count > o.count => EventKind::Reentered,
            Some(o) if h.count < o.count => EventKind::Released,
            Some(_) => continue,
        };
        events.push(event(kind, Some(h), Some(h.count), None, seen_taken(&said)));
    }

    // Counters.
    let counter = |x: &Snapshot| {
        matches!(
            x.kind,
            StructureKind::Semaphore | StructureKind::PermitSemaphore | StructureKind::Latch
        )
    };
    let gone_counter = counter(p) && !counter(s) && s.ttl == Ttl::Absent;
    if gone_counter {
        let (kind, by) = gone_cause(ctx, p.kind, &said, before, now);
        let kind = if p.kind == StructureKind::Latch
            && said.iter().any(|(x, _)| *x == Said::LatchOpened)
        {
            EventKind::Opened
        } else {
            kind
        };
        events.push(event(kind, None, None, None, by));
    } else if matches!(
        (p.kind, s.kind),
        (StructureKind::Semaphore, StructureKind::Semaphore)
            | (
                StructureKind::PermitSemaphore,
                StructureKind::PermitSemaphore
            )
    ) && let (Some(a), Some(b)) = (p.permits, s.permits)
        && a != b
    {
        let (kind, by) = if b < a {
            (EventKind::Acquired, seen_taken(&said))
        } else {
            (EventKind::Released, seen(&said))
        };
        events.push(event(kind, None, None, Some((b - a).abs()), by));
    }

    if events.is_empty() && other_state(p) != other_state(s) {
        events.push(event(EventKind::Changed, None, None, None, seen(&said)));
    }
    events
}

/// The first event of a stream.
pub(super) fn watching(read: &Read, keyspace: &Keyspace) -> Event {
    Event {
        kind: EventKind::Watching,
        name: read.snapshot.name.clone(),
        holder: None,
        holds: None,
        permits: None,
        seen_by: SeenBy::Snapshot,
        heard: Vec::new(),
        keyspace: Some(keyspace.clone()),
        snapshot: read.snapshot.clone(),
        at: read.at,
    }
}

/// The event told when the subscription was re-established.
pub(super) fn gap(read: &Read) -> Event {
    let mut event = watching(read, &Keyspace::NotRequested);
    event.kind = EventKind::Gap;
    event.keyspace = None;
    event
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn snapshot(name: &str, kind: StructureKind) -> Snapshot {
        Snapshot {
            name: name.into(),
            kind,
            kind_inferred: false,
            ttl: Ttl::Absent,
            mode: None,
            holders: Vec::new(),
            queue: Vec::new(),
            queue_len: 0,
            read_markers: Vec::new(),
            token: None,
            permits: None,
            acquired: Vec::new(),
            acquired_len: 0,
            count: None,
            truncated: false,
        }
    }

    fn holder(field: &str, count: i64) -> Holder {
        let (client, owner) = field.rsplit_once(':').unwrap();
        Holder {
            field: field.into(),
            client_id: Some(client.into()),
            owner: owner.parse().ok(),
            count,
            mode: None,
            this_client: false,
        }
    }

    fn channels() -> Channels {
        Channels {
            lock: "redisson_lock__channel:{l}".into(),
            rwlock: "redisson_rwlock:{l}".into(),
            semaphore: "redisson_sc:{l}".into(),
            latch: "redisson_countdownlatch__channel__{l}".into(),
            keyspace: Some("__keyspace@0__:l".into()),
        }
    }

    fn read(s: Snapshot, sent: Instant) -> Read {
        Read {
            snapshot: s,
            sent,
            done: sent + Duration::from_millis(1),
            at: SystemTime::now(),
        }
    }

    fn held(fields: &[(&str, i64)], ttl_ms: u64) -> Snapshot {
        let mut s = snapshot("l", StructureKind::Lock);
        s.ttl = Ttl::Remaining(Duration::from_millis(ttl_ms));
        s.holders = fields.iter().map(|(f, c)| holder(f, *c)).collect();
        s
    }

    fn free() -> Snapshot {
        snapshot("l", StructureKind::None)
    }

    fn lock_msg() -> Notice {
        Notice {
            channel: "redisson_lock__channel:{l}".into(),
            payload: "0".into(),
        }
    }

    fn ks(event: &str) -> Notice {
        Notice {
            channel: "__keyspace@0__:l".into(),
            payload: event.into(),
        }
    }

    fn kinds(events: &[Event]) -> Vec<(EventKind, SeenBy, Option<String>)> {
        events
            .iter()
            .map(|e| {
                (
                    e.kind,
                    e.seen_by,
                    e.holder.as_ref().map(|h| h.field.clone()),
                )
            })
            .collect()
    }

    const A: &str = "6b1f7e52-3c1a-4d8e-9f00-1a2b3c4d5e6f:1";
    const B: &str = "6b1f7e52-3c1a-4d8e-9f00-1a2b3c4d5e6f:2";

    fn run(
        before: Snapshot,
        after: Snapshot,
        heard: &[Notice],
        ks_on: bool,
        gap_ms: u64,
    ) -> Vec<(EventKind, SeenBy, Option<String>)> {
        let t0 = Instant::now();
        let ch = channels();
        let ctx = Context {
            channels: &ch,
            keyspace_on: ks_on,
        };
        let b = read(before, t0);
        let a = read(after, t0 + Duration::from_millis(gap_ms));
        kinds(&classify(&ctx, &b, &a, heard, heard.len()))
    }

    #[test]
    fn a_release_by_message_and_by_keyspace() {
        let got = run(held(&[(A, 1)], 30_000), free(), &[lock_msg()], false, 10);
        assert_eq!(
            got,
            [(EventKind::Released, SeenBy::Message, Some(A.into()))]
        );
        let got = run(
            held(&[(A, 1)], 30_000),
            free(),
            &[ks("hincrby"), ks("del"), lock_msg()],
            true,
            10,
        );
        assert_eq!(
            got,
            [(EventKind::Released, SeenBy::Keyspace, Some(A.into()))]
        );
    }

    #[test]
    fn a_force_unlock_is_told_only_with_keyspace_notifications() {
        let got = run(
            held(&[(A, 2)], 30_000),
            free(),
            &[ks("del"), lock_msg()],
            true,
            10,
        );
        assert_eq!(
            got,
            [(EventKind::ForceUnlocked, SeenBy::Keyspace, Some(A.into()))]
        );
        let got = run(held(&[(A, 2)], 30_000), free(), &[lock_msg()], false, 10);
        assert_eq!(
            got,
            [(EventKind::Released, SeenBy::Message, Some(A.into()))]
        );
    }

    #[test]
    fn an_expiry_is_seen_or_inferred_and_a_del_is_a_deletion() {
        let got = run(held(&[(A, 1)], 50), free(), &[ks("expired")], true, 60);
        assert_eq!(
            got,
            [(EventKind::Expired, SeenBy::Keyspace, Some(A.into()))]
        );
        // Gone without anything heard once the TTL ran out: inferred.
        let got = run(held(&[(A, 1)], 50), free(), &[], false, 60);
        assert_eq!(
            got,
            [(EventKind::Expired, SeenBy::Snapshot, Some(A.into()))]
        );
        // Gone long before: a deletion, inferred; with keyspace a `del` alone.
        let got = run(held(&[(A, 1)], 30_000), free(), &[], false, 60);
        assert_eq!(
            got,
            [(EventKind::Deleted, SeenBy::Snapshot, Some(A.into()))]
        );
        let got = run(held(&[(A, 1)], 30_000), free(), &[ks("del")], true, 60);
        assert_eq!(
            got,
            [(EventKind::Deleted, SeenBy::Keyspace, Some(A.into()))]
        );
    }

    #[test]
    fn a_handoff_a_reentry_and_a_partial_release() {
        let got = run(
            held(&[(A, 1)], 30_000),
            held(&[(B, 1)], 30_000),
            &[lock_msg()],
            false,
            10,
        );
        assert_eq!(
            got,
            [
                (EventKind::Released, SeenBy::Message, Some(A.into())),
                (EventKind::Acquired, SeenBy::Snapshot, Some(B.into())),
            ]
        );
        let got = run(
            held(&[(A, 1)], 30_000),
            held(&[(A, 2)], 30_000),
            &[],
            false,
            10,
        );
        assert_eq!(
            got,
            [(EventKind::Reentered, SeenBy::Snapshot, Some(A.into()))]
        );
        let got = run(
            held(&[(A, 2)], 30_000),
            held(&[(A, 1)], 30_000),
            &[ks("hincrby"), ks("pexpire")],
            true,
            10,
        );
        assert_eq!(
            got,
            [(EventKind::Released, SeenBy::Keyspace, Some(A.into()))]
        );
        let got = run(free(), held(&[(A, 1)], 30_000), &[], false, 10);
        assert_eq!(
            got,
            [(EventKind::Acquired, SeenBy::Snapshot, Some(A.into()))]
        );
    }

    #[test]
    fn freed_and_retaken_between_two_reads() {
        let got = run(
            held(&[(A, 1)], 30_000),
            held(&[(A, 1)], 30_000),
            &[lock_msg()],
            false,
            10,
        );
        assert_eq!(
            got,
            [
                (EventKind::Released, SeenBy::Message, Some(A.into())),
                (EventKind::Acquired, SeenBy::Snapshot, Some(A.into())),
            ]
        );
        // A message that may have come after the second read was sent tells nothing.
        let t0 = Instant::now();
        let ch = channels();
        let ctx = Context {
            channels: &ch,
            keyspace_on: false,
        };
        let b = read(held(&[(A, 1)], 30_000), t0);
        let a = read(held(&[(A, 1)], 30_000), t0);
        assert!(classify(&ctx, &b, &a, &[lock_msg()], 0).is_empty());
    }

    #[test]
    fn a_token_lock_released_and_a_latch_opened() {
        let mut token = held(&[(A, 1)], 30_000);
        token.kind = StructureKind::Token;
        let got = run(token.clone(), free(), &[], false, 10);
        assert_eq!(
            got,
            [(EventKind::Released, SeenBy::Snapshot, Some(A.into()))]
        );
        let got = run(token, free(), &[ks("del")], true, 10);
        assert_eq!(
            got,
            [(EventKind::Released, SeenBy::Keyspace, Some(A.into()))]
        );

        let mut latch = snapshot("l", StructureKind::Latch);
        latch.count = Some(1);
        latch.ttl = Ttl::Persistent;
        let opened = Notice {
            channel: "redisson_countdownlatch__channel__{l}".into(),
            payload: "0".into(),
        };
        let got = run(latch.clone(), free(), &[opened], false, 10);
        assert_eq!(got, [(EventKind::Opened, SeenBy::Message, None)]);
        let mut two = latch.clone();
        two.count = Some(2);
        let got = run(two, latch, &[], false, 10);
        assert_eq!(got, [(EventKind::Changed, SeenBy::Snapshot, None)]);
    }

    #[test]
    fn semaphore_permits_taken_and_given_back() {
        let mut a = snapshot("l", StructureKind::Semaphore);
        a.permits = Some(3);
        a.ttl = Ttl::Persistent;
        let mut b = a.clone();
        b.permits = Some(1);
        let t0 = Instant::now();
        let ch = channels();
        let ctx = Context {
            channels: &ch,
            keyspace_on: false,
        };
        let events = classify(&ctx, &read(a.clone(), t0), &read(b.clone(), t0), &[], 0);
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0].kind, events[0].permits),
            (EventKind::Acquired, Some(2))
        );
        let events = classify(&ctx, &read(b, t0), &read(a, t0), &[], 0);
        assert_eq!(
            (events[0].kind, events[0].permits),
            (EventKind::Released, Some(2))
        );
    }

    #[test]
    fn keyspace_settings() {
        assert!(Keyspace::from_config("KEA").is_on());
        assert!(Keyspace::from_config("Kghx$").is_on());
        assert!(!Keyspace::from_config("").is_on());
        assert!(!Keyspace::from_config("Ex").is_on());
        assert!(!Keyspace::from_config("Kgx").is_on());
    }
}
