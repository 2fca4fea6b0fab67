//! `bench`: concurrent acquire+release loops, each task its own owner.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use redisson_sync::{Client, DistributedLock, LockOptions, Owner, Semaphore};

use tokio::task::JoinSet;

use crate::locks::any_lock;
use crate::protocol::{Bench, Code, Failure, Primitive, Reply};

/// What one task of a bench acquires and releases.
enum Pair {
    /// A lock, for the task's own owner (watchdog lease).
    Lock(Box<dyn DistributedLock>, LockOptions),
    /// One permit of a semaphore.
    Semaphore(Semaphore),
}

impl Pair {
    async fn run(&self) -> redisson_sync::Result<()> {
        match self {
            Self::Lock(lock, options) => lock.lock_with_options(options).await?.unlock().await,
            Self::Semaphore(semaphore) => semaphore.acquire(1).await?.release().await,
        }
    }
}

/// Runs `spec.tasks` loops of `spec.iterations` acquire/release pairs and reports the per-pair
/// latencies: lock/unlock (watchdog lease), or for `semaphore` acquire(1)/release of a
/// semaphore whose permits were set to 1 before the loops (when it did not exist). The key is
/// `name` when `same_key`, else `name:<task>`. The first failure ends the bench (the other
/// loops are dropped; the crate undoes what they were doing). Each task's owner comes from
/// `next_owner`.
pub async fn run(
    client: &Client,
    next_owner: impl Fn() -> Owner,
    spec: Bench,
) -> Result<Reply, Failure> {
    let key = |task: u64| {
        if spec.same_key {
            spec.name.clone()
        } else {
            format!("{}:{task}", spec.name)
        }
    };
    let pairs: Vec<Pair> = match spec.kind {
        Primitive::Lock(kind) => (0..spec.tasks)
            .map(|task| {
                let options = LockOptions::new().owner(next_owner());
                Ok(Pair::Lock(any_lock(client, kind, key(task))?, options))
            })
            .collect::<Result<_, Failure>>()?,
        Primitive::Semaphore => {
            let keys: BTreeSet<String> = (0..spec.tasks).map(key).collect();
            for key in keys {
                client.semaphore(key).try_set_permits(1).await?;
            }
            (0..spec.tasks)
                .map(|task| Pair::Semaphore(client.semaphore(key(task))))
                .collect()
        }
        Primitive::Psem => {
            return Err(Failure::new(
                Code::Unsupported,
                "kind \"psem\" is not supported for op bench",
            ));
        }
    };
    let started = Instant::now();
    let mut loops = JoinSet::new();
    for pair in pairs {
        let iterations = spec.iterations;
        loops.spawn(async move {
            let mut latencies = Vec::new();
            for _ in 0..iterations {
                let started = Instant::now();
                pair.run().await?;
                latencies.push(started.elapsed());
            }
            Ok::<_, redisson_sync::Error>(latencies)
        });
    }
    let mut latencies = Vec::new();
    while let Some(joined) = loops.join_next().await {
        match joined {
            Ok(Ok(task_latencies)) => latencies.extend(task_latencies),
            Ok(Err(e)) => return Err(e.into()),
            Err(e) => return Err(Failure::new(Code::Redis, format!("bench task failed: {e}"))),
        }
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    Ok(vec![
        ("ops", latencies.len().into()),
        ("elapsed_ns", nanos(elapsed).into()),
        ("p50_us", micros(percentile(&latencies, 50)).into()),
        ("p99_us", micros(percentile(&latencies, 99)).into()),
        ("max_us", micros(latencies.last().copied()).into()),
    ])
}

/// Nearest-rank percentile of sorted samples; `None` when there are none.
fn percentile(sorted: &[Duration], p: usize) -> Option<Duration> {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

fn micros(d: Option<Duration>) -> f64 {
    // From whole nanoseconds, so that the value prints as at most three decimals.
    d.map_or(0.0, |d| nanos(d) as f64 / 1000.0)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile(&samples, 50), Some(Duration::from_micros(50)));
        assert_eq!(percentile(&samples, 99), Some(Duration::from_micros(99)));
        assert_eq!(
            percentile(&samples[..1], 99),
            Some(Duration::from_micros(1))
        );
        assert_eq!(percentile(&[], 50), None);
        assert_eq!(micros(Some(Duration::from_nanos(897_513))), 897.513);
    }
}
