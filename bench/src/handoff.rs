//! Handoff latency of a contended lock, from the critical sections `stress` records.
//!
//! Every owner loops lock → section → unlock → lock again, so from its first acquisition to
//! its last it is always either in its section or waiting for the lock. All sections of all
//! owners, sorted by `acquired_ns`, therefore form a chain, and each step from one section to
//! the next is one of:
//! - a **handoff**: the next section belongs to another owner that had acquired at least once
//!   before, so it was already waiting when the previous holder released. Its latency is
//!   `next.acquired_ns − previous.releasing_ns`: the holder's unlock round trip, the wake-up
//!   (pub/sub message) and the waiter's acquire;
//! - a **re-acquisition** by the same owner (it unlocked and won the lock again, possibly
//!   while others were waiting);
//! - an owner's **first** section, which is not counted (it may not have been waiting).

/// One critical section of one owner, on the host's CLOCK_MONOTONIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// Any number that is distinct per (agent, owner).
    pub owner: usize,
    pub acquired_ns: u64,
    pub releasing_ns: u64,
}

/// What the chain of sections shows.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Handoffs {
    /// Handoff latencies in microseconds, in chain order.
    pub latencies_us: Vec<f64>,
    /// Steps where the same owner took the lock again.
    pub reacquired: usize,
    /// Steps into an owner's first section.
    pub first: usize,
    /// Pairs of consecutive sections that overlap (must be 0 for an exclusive lock).
    pub overlaps: usize,
}

/// Classifies the steps of the chain of `intervals` (in any order).
pub fn analyse(mut intervals: Vec<Interval>) -> Handoffs {
    intervals.sort_by_key(|i| (i.acquired_ns, i.releasing_ns));
    let mut result = Handoffs::default();
    let mut seen = std::collections::HashSet::new();
    if let Some(first) = intervals.first() {
        seen.insert(first.owner);
    }
    for pair in intervals.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        if next.acquired_ns < prev.releasing_ns {
            result.overlaps += 1;
        }
        if !seen.insert(next.owner) {
            if next.owner == prev.owner {
                result.reacquired += 1;
            } else {
                let ns = next.acquired_ns.saturating_sub(prev.releasing_ns);
                result.latencies_us.push(ns as f64 / 1000.0);
            }
        } else {
            result.first += 1;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(owner: usize, acquired_ns: u64, releasing_ns: u64) -> Interval {
        Interval {
            owner,
            acquired_ns,
            releasing_ns,
        }
    }

    #[test]
    fn classifies_steps() {
        let chain = vec![
            iv(2, 3_000, 3_500), // owner 2's first section
            iv(1, 1_000, 2_000),
            iv(1, 5_000, 6_000), // handoff 3.5 -> 5: 1.5 µs
            iv(1, 6_100, 6_200), // re-acquired by 1
            iv(2, 6_500, 7_000), // handoff 6.2 -> 6.5: 0.3 µs
        ];
        let h = analyse(chain);
        assert_eq!(h.latencies_us, vec![1.5, 0.3]);
        assert_eq!((h.reacquired, h.first, h.overlaps), (1, 1, 0));
    }

    #[test]
    fn counts_overlaps() {
        let h = analyse(vec![iv(1, 0, 10), iv(2, 5, 20)]);
        assert_eq!(h.overlaps, 1);
        assert!(analyse(vec![]).latencies_us.is_empty());
    }
}
