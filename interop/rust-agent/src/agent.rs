//! What each operation does with the crate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redisson_sync::{
    Client, DistributedLock, Error, Expirable, LockOptions, Owner, PermitId, Permits,
};
use serde_json::{Value, json};

use crate::bench;
use crate::counter::Counter;
use crate::holds::Holds;
use crate::locks::{any_lock, with_kind};
use crate::protocol::{
    Code, Failure, Kind, ObjKind, Op, Primitive, Reply, Request, Response, Stress, now_ns,
};

/// First owner id of the `bench` tasks: far above the owners a driver numbers from 1.
const BENCH_OWNER_BASE: u64 = 1 << 40;

/// The agent's state, shared by every task.
pub struct Agent {
    pub client: Client,
    counter: Counter,
    holds: Holds,
    next_bench_owner: AtomicU64,
}

impl Agent {
    pub fn new(client: Client, counter: Counter) -> Self {
        Self {
            client,
            counter,
            holds: Holds::default(),
            next_bench_owner: AtomicU64::new(BENCH_OWNER_BASE),
        }
    }

    /// Runs one request and builds its response; lock operations are timed.
    pub async fn handle(&self, request: Request) -> Response {
        let timed = request.op.is_timed();
        let start = now_ns();
        let result = self.run(request.op).await;
        let end = now_ns();
        Response {
            id: request.id,
            result,
            timing: timed.then_some((start, end)),
        }
    }

    /// Forgets every lock held through the protocol (end of input): they stay in Redis until
    /// their leases end.
    pub fn forget_all(&self) {
        self.holds.forget_all();
    }

    /// A fresh owner for one `bench` task, never used before in this process.
    pub fn bench_owner(&self) -> Owner {
        Owner::new(self.next_bench_owner.fetch_add(1, Ordering::Relaxed))
    }

    async fn run(&self, op: Op) -> Result<Reply, Failure> {
        match op {
            Op::Ping => Ok(vec![]),
            Op::Stats => {
                let s = self.client.stats();
                Ok(vec![
                    ("channels", s.channels.into()),
                    ("waiters", s.waiters.into()),
                    ("observers", s.observers.into()),
                    ("watched_holds", s.watched_holds.into()),
                    ("record_slots", s.record_slots.into()),
                    ("counted_holds", s.counted_holds.into()),
                    ("background_tasks", s.background_tasks.into()),
                    ("agent_holds", self.holds.kept().into()),
                ])
            }
            Op::Lock {
                kind,
                name,
                owner,
                lease,
            } => {
                let guard = self
                    .lock(kind, &name)?
                    .lock_with_options(&options(owner, lease))
                    .await?;
                let reply = token_reply(&guard);
                self.holds.push(kind, name, guard);
                Ok(reply)
            }
            Op::TryLock {
                kind,
                name,
                owner,
                wait,
                lease,
            } => {
                let guard = self
                    .lock(kind, &name)?
                    .try_lock_with_options(wait, &options(owner, lease))
                    .await?;
                let mut reply = vec![("acquired", guard.is_some().into())];
                if let Some(guard) = guard {
                    reply.extend(token_reply(&guard));
                    self.holds.push(kind, name, guard);
                }
                Ok(reply)
            }
            Op::Unlock { kind, name, owner } => self.unlock(kind, &name, owner).await,
            Op::ForceUnlock { kind, name } => {
                let released = self.lock(kind, name)?.force_unlock().await?;
                Ok(vec![("released", released.into())])
            }
            Op::IsLocked { kind, name } => {
                let locked = self.lock(kind, name)?.is_locked().await?;
                Ok(vec![("locked", locked.into())])
            }
            Op::IsHeld { kind, name, owner } => {
                let owner = Owner::new(owner);
                let held = with_kind!(&self.client, kind, name, |lock| lock
                    .is_held_by(owner)
                    .await?);
                Ok(vec![("held", held.into())])
            }
            Op::HoldCount { kind, name, owner } => {
                let owner = Owner::new(owner);
                let count = with_kind!(&self.client, kind, name, |lock| lock
                    .hold_count(owner)
                    .await?);
                Ok(vec![("count", count.into())])
            }
            Op::RemainingTtl { kind, name } => {
                let ttl = with_kind!(&self.client, kind, name, |lock| lock
                    .remaining_ttl()
                    .await?);
                Ok(vec![("ttl_ms", ttl.as_redis_millis().into())])
            }
            Op::Stress(stress) => self.stress(stress).await,
            Op::Bench(spec) => bench::run(&self.client, || self.bench_owner(), spec).await,
            Op::SemTrySet { name, permits } => {
                let set = self.client.semaphore(name).try_set_permits(permits).await?;
                Ok(vec![("set", set.into())])
            }
            Op::SemAcquire {
                name,
                permits,
                wait,
                ..
            } => {
                let semaphore = self.client.semaphore(name);
                // The permits stay taken: the driver gives them back with `sem_release`.
                let acquired = match wait {
                    None => {
                        semaphore.acquire(permits).await?.forget();
                        true
                    }
                    Some(wait) if wait.is_zero() => semaphore
                        .try_acquire(permits)
                        .await?
                        .map(Permits::forget)
                        .is_some(),
                    Some(wait) => semaphore
                        .try_acquire_for(permits, wait)
                        .await?
                        .map(Permits::forget)
                        .is_some(),
                };
                Ok(vec![("acquired", acquired.into())])
            }
            Op::SemRelease { name, permits } => {
                self.client.semaphore(name).release(permits).await?;
                Ok(vec![])
            }
            Op::SemAvailable { name } => {
                let permits = self.client.semaphore(name).available_permits().await?;
                Ok(vec![("permits", permits.into())])
            }
            Op::LatchTrySet { name, count } => {
                let set = self
                    .client
                    .count_down_latch(name)
                    .try_set_count(count)
                    .await?;
                Ok(vec![("set", set.into())])
            }
            Op::LatchCountDown { name } => {
                self.client.count_down_latch(name).count_down().await?;
                Ok(vec![])
            }
            Op::LatchAwait { name, wait, .. } => {
                let latch = self.client.count_down_latch(name);
                let opened = match wait {
                    None => {
                        latch.await_open().await?;
                        true
                    }
                    Some(wait) => latch.await_for(wait).await?,
                };
                Ok(vec![("opened", opened.into())])
            }
            Op::LatchCount { name } => {
                let count = self.client.count_down_latch(name).count().await?;
                Ok(vec![("count", count.into())])
            }
            Op::PsemTrySet { name, permits } => {
                let set = self
                    .client
                    .permit_expirable_semaphore(name)
                    .try_set_permits(permits)
                    .await?;
                Ok(vec![("set", set.into())])
            }
            Op::PsemAcquire {
                name,
                permits,
                wait,
                lease,
                renew,
                ..
            } => {
                let semaphore = self.client.permit_expirable_semaphore(&name);
                if renew {
                    let Some(lease) = lease else {
                        return Err(Failure::bad_request(
                            "psem_acquire with renew needs a lease_ms to renew",
                        ));
                    };
                    let guard = match wait {
                        None => Some(semaphore.acquire_renewing(permits, lease).await?),
                        Some(wait) => {
                            semaphore
                                .try_acquire_renewing_for(permits, wait, lease)
                                .await?
                        }
                    };
                    return Ok(match guard {
                        Some(guard) => {
                            let ids: Vec<Value> =
                                guard.ids().iter().map(|id| id.to_string().into()).collect();
                            self.holds.push_renewing(guard);
                            vec![("acquired", true.into()), ("ids", ids.into())]
                        }
                        None => vec![("acquired", false.into())],
                    });
                }
                let ids = match wait {
                    None => Some(semaphore.acquire(permits, lease).await?),
                    Some(wait) if wait.is_zero() => semaphore.try_acquire(permits, lease).await?,
                    Some(wait) => semaphore.try_acquire_for(permits, wait, lease).await?,
                };
                Ok(match ids {
                    Some(ids) => vec![
                        ("acquired", true.into()),
                        ("ids", ids.iter().map(PermitId::to_string).collect()),
                    ],
                    None => vec![("acquired", false.into())],
                })
            }
            Op::PsemTryReleaseMany { name, ids } => {
                let semaphore = self.client.permit_expirable_semaphore(&name);
                self.holds.stop_renewing(semaphore.name(), &ids);
                let released = semaphore.try_release_many(&ids).await?;
                Ok(vec![("released", released.into())])
            }
            Op::ObjExists { okind, name } => {
                let exists = self.object(okind, name).is_exists().await?;
                Ok(vec![("exists", exists.into())])
            }
            Op::ObjDelete { okind, name } => {
                let deleted = self.object(okind, name).delete().await?;
                Ok(vec![("deleted", deleted.into())])
            }
            Op::ObjExpire { okind, name, ttl } => {
                let set = self.object(okind, name).expire(ttl).await?;
                Ok(vec![("set", set.into())])
            }
            Op::ObjClearExpire { okind, name } => {
                let cleared = self.object(okind, name).clear_expire().await?;
                Ok(vec![("cleared", cleared.into())])
            }
            Op::ObjTtl { okind, name } => {
                let ttl = self.object(okind, name).remaining_ttl().await?;
                Ok(vec![("ttl_ms", ttl.as_redis_millis().into())])
            }
            Op::PsemRelease { name, ids } => {
                let semaphore = self.client.permit_expirable_semaphore(&name);
                self.holds.stop_renewing(semaphore.name(), &ids);
                // All or nothing: an unknown or expired id releases none and answers false.
                let released = match semaphore.release(&ids).await {
                    Ok(()) => true,
                    Err(Error::PermitNotHeld { .. }) => false,
                    Err(e) => return Err(e.into()),
                };
                Ok(vec![("released", released.into())])
            }
            Op::PsemAvailable { name } => {
                let permits = self
                    .client
                    .permit_expirable_semaphore(name)
                    .available_permits()
                    .await?;
                Ok(vec![("permits", permits.into())])
            }
            Op::PsemUpdateLease {
                name,
                permit,
                lease,
            } => {
                let updated = self
                    .client
                    .permit_expirable_semaphore(name)
                    .update_lease_time(&permit, lease)
                    .await?;
                Ok(vec![("updated", updated.into())])
            }
        }
    }

    /// The object of `okind` named `name`, for the object and expiry ops.
    fn object(&self, okind: ObjKind, name: String) -> Box<dyn Expirable> {
        match okind {
            ObjKind::Lock(kind) => {
                with_kind!(&self.client, kind, name, |lock| Box::new(lock)
                    as Box<dyn Expirable>)
            }
            ObjKind::Semaphore => Box::new(self.client.semaphore(name)),
            ObjKind::Psem => Box::new(self.client.permit_expirable_semaphore(name)),
            ObjKind::Latch => Box::new(self.client.count_down_latch(name)),
        }
    }

    /// The lock of `kind` named `name`.
    pub fn lock(
        &self,
        kind: Kind,
        name: impl Into<String>,
    ) -> Result<Box<dyn DistributedLock>, Failure> {
        any_lock(&self.client, kind, name)
    }

    /// Releases the newest hold of `owner`. Without a stored hold the answer is `not_held`
    /// without asking Redis; when Redis says the owner does not hold the lock, the owner's
    /// other stored holds are stale and are forgotten.
    async fn unlock(&self, kind: Kind, name: &str, owner: u64) -> Result<Reply, Failure> {
        let Some(guard) = self.holds.pop(kind, name, owner) else {
            return Err(Failure::new(
                Code::NotHeld,
                format!("{name} is not held by owner {owner}"),
            ));
        };
        match guard.unlock().await {
            Ok(()) => Ok(vec![]),
            Err(e) => {
                if e.is_not_held() {
                    self.holds.forget(kind, name, owner);
                }
                Err(e.into())
            }
        }
    }

    /// `iterations` critical sections: under a lock, incrementing the shared counter (reading
    /// it, for `read`); under one permit of a semaphore, only the sleep.
    async fn stress(&self, spec: Stress) -> Result<Reply, Failure> {
        if spec.keep_going {
            return self.stress_keep_going(spec).await;
        }
        let mut intervals = Vec::new();
        let record = |intervals: &mut Vec<Value>, acquired_ns: u64, releasing_ns: u64| {
            if spec.record {
                intervals.push(json!([acquired_ns, releasing_ns]));
            }
        };
        match spec.kind {
            Primitive::Lock(kind) => {
                let lock = self.lock(kind, &spec.name)?;
                let counter = spec
                    .counter
                    .as_deref()
                    .ok_or_else(|| Failure::bad_request("counter is missing"))?;
                let options = options(spec.owner, None);
                for _ in 0..spec.iterations {
                    let guard = lock.lock_with_options(&options).await?;
                    let acquired_ns = now_ns();
                    let section = if kind == Kind::Read {
                        self.read(counter, spec.hold).await
                    } else {
                        self.increment(counter, spec.hold).await
                    };
                    let releasing_ns = now_ns();
                    let released = guard.unlock().await;
                    section?;
                    released?;
                    record(&mut intervals, acquired_ns, releasing_ns);
                }
            }
            Primitive::Semaphore => {
                let semaphore = self.client.semaphore(&spec.name);
                for _ in 0..spec.iterations {
                    let permits = semaphore.acquire(1).await?;
                    let acquired_ns = now_ns();
                    sleep(spec.hold).await;
                    let releasing_ns = now_ns();
                    permits.release().await?;
                    record(&mut intervals, acquired_ns, releasing_ns);
                }
            }
            Primitive::Psem => {
                let semaphore = self.client.permit_expirable_semaphore(&spec.name);
                for _ in 0..spec.iterations {
                    let ids = semaphore.acquire(1, None).await?;
                    let acquired_ns = now_ns();
                    sleep(spec.hold).await;
                    let releasing_ns = now_ns();
                    semaphore.release(&ids).await?;
                    record(&mut intervals, acquired_ns, releasing_ns);
                }
            }
        }
        let mut reply = vec![("done", spec.iterations.into())];
        if spec.record {
            reply.push(("intervals", Value::Array(intervals)));
        }
        Ok(reply)
    }

    /// The critical section of `stress` under a read lock: GET, sleep.
    pub(crate) async fn read(&self, counter: &str, hold: Duration) -> Result<(), Failure> {
        self.counter.get(counter).await?;
        sleep(hold).await;
        Ok(())
    }

    /// The critical section of `stress`: GET, sleep, SET value + 1.
    pub(crate) async fn increment(&self, counter: &str, hold: Duration) -> Result<(), Failure> {
        let value = self.counter.get(counter).await?;
        sleep(hold).await;
        let next = value.checked_add(1).ok_or_else(|| {
            Failure::new(Code::Redis, format!("counter {counter:?} is at i64::MAX"))
        })?;
        self.counter.set(counter, next).await
    }
}

/// Holds a critical section of `stress` for `hold` (no sleep at all for zero).
async fn sleep(hold: Duration) {
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
}

/// `token` for a fenced lock's guard (the protocol's `lock` / `try_lock` result); nothing for
/// the other kinds.
fn token_reply(guard: &redisson_sync::LockGuard) -> Reply {
    guard
        .token()
        .map(|token| vec![("token", token.into())])
        .unwrap_or_default()
}

/// Acquisition options for protocol owner `owner`; no lease means the watchdog lease.
fn options(owner: u64, lease: Option<Duration>) -> LockOptions {
    let options = LockOptions::new().owner(Owner::new(owner));
    match lease {
        Some(lease) => options.lease(lease),
        None => options,
    }
}
