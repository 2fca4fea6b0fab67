//! `stress` with `"keep_going": true` (an extension of the protocol for the fault suite):
//! every iteration is reported in `records`, and an error ends the iteration, not the op.
//!
//! A record is `{requested_ns, acquired_ns, releasing_ns, released_ns, section, unlock}`, plus
//! `token` for a fenced lock and `lost_ns` when the guard's lost signal fired before its
//! release returned (the instant this agent saw it). `section` is `ok` or `error` (the counter
//! read or write failed); `unlock` is `ok`, `not_held` (Redis showed the hold gone), `lost`
//! (the guard had already reported the loss) or `error`.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use redisson_sync::{Error, Owner};
use serde_json::{Value, json};

use crate::agent::Agent;
use crate::protocol::{Failure, Kind, Primitive, Reply, Stress, now_ns};

/// How many distinct error messages a reply quotes.
const SAMPLES: usize = 5;
/// Pause after a failed acquire, so a dead server is not hammered.
const BACKOFF: Duration = Duration::from_millis(20);

/// Errors of one `stress` op: how many, and the first distinct few.
#[derive(Default)]
struct Errors {
    count: u64,
    samples: Vec<String>,
}

impl Errors {
    fn note(&mut self, message: String) {
        self.count += 1;
        if self.samples.len() < SAMPLES && !self.samples.contains(&message) {
            self.samples.push(message);
        }
    }
}

/// One acquired iteration.
struct Record {
    requested_ns: u64,
    acquired_ns: u64,
    releasing_ns: u64,
    released_ns: u64,
    section_ok: bool,
    unlock: &'static str,
    token: Option<u64>,
    lost_ns: Option<u64>,
}

impl Record {
    fn json(&self) -> Value {
        let mut value = json!({
            "requested_ns": self.requested_ns,
            "acquired_ns": self.acquired_ns,
            "releasing_ns": self.releasing_ns,
            "released_ns": self.released_ns,
            "section": if self.section_ok { "ok" } else { "error" },
            "unlock": self.unlock,
        });
        if let Some(token) = self.token {
            value["token"] = token.into();
        }
        if let Some(lost_ns) = self.lost_ns {
            value["lost_ns"] = lost_ns.into();
        }
        value
    }
}

/// The `unlock` outcome of a release result, noting real errors.
fn outcome(result: Result<(), Error>, errors: &mut Errors) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(Error::LeaseLost { .. }) => "lost",
        Err(e) if e.is_not_held() || matches!(e, Error::PermitNotHeld { .. }) => "not_held",
        Err(e) => {
            errors.note(e.to_string());
            "error"
        }
    }
}

impl Agent {
    pub async fn stress_keep_going(&self, spec: Stress) -> Result<Reply, Failure> {
        let mut errors = Errors::default();
        let mut records = Vec::new();
        for _ in 0..spec.iterations {
            let record = match spec.kind {
                Primitive::Lock(kind) => self.lock_iteration(kind, &spec, &mut errors).await?,
                Primitive::Semaphore => self.semaphore_iteration(&spec, &mut errors).await,
                Primitive::Psem => self.psem_iteration(&spec, &mut errors).await,
            };
            match record {
                Some(record) => records.push(record),
                None => tokio::time::sleep(BACKOFF).await,
            }
        }
        let mut reply = vec![
            ("done", spec.iterations.into()),
            ("acquired", records.len().into()),
            ("errors", errors.count.into()),
            ("error_samples", errors.samples.into()),
        ];
        if spec.record {
            let intervals = records
                .iter()
                .map(|r| json!([r.acquired_ns, r.releasing_ns]))
                .collect();
            reply.push(("intervals", Value::Array(intervals)));
        }
        reply.push((
            "records",
            Value::Array(records.iter().map(Record::json).collect()),
        ));
        Ok(reply)
    }

    /// One iteration on a lock kind: `None` when the acquire failed. A counter holding
    /// something else than a number is the driver's mistake and ends the op.
    async fn lock_iteration(
        &self,
        kind: Kind,
        spec: &Stress,
        errors: &mut Errors,
    ) -> Result<Option<Record>, Failure> {
        let lock = self.lock(kind, &spec.name)?;
        let counter = spec
            .counter
            .as_deref()
            .ok_or_else(|| Failure::bad_request("counter is missing"))?;
        let options = redisson_sync::LockOptions::new().owner(Owner::new(spec.owner));
        let requested_ns = now_ns();
        let guard = match lock.lock_with_options(&options).await {
            Ok(guard) => guard,
            Err(e) => {
                errors.note(e.to_string());
                return Ok(None);
            }
        };
        let acquired_ns = now_ns();
        let section = async {
            if kind == Kind::Read {
                self.read(counter, spec.hold).await
            } else {
                self.increment(counter, spec.hold).await
            }
        };
        let (section, mut lost_ns) = watch_lost(section, guard.lost()).await;
        let section_ok = match section {
            Ok(()) => true,
            Err(failure) if failure.code == crate::protocol::Code::BadRequest => {
                return Err(failure);
            }
            Err(failure) => {
                errors.note(failure.message);
                false
            }
        };
        let releasing_ns = now_ns();
        let token = guard.token();
        if lost_ns.is_none() && guard.is_lost() {
            lost_ns = Some(releasing_ns);
        }
        let unlock = outcome(guard.unlock().await, errors);
        Ok(Some(Record {
            requested_ns,
            acquired_ns,
            releasing_ns,
            released_ns: now_ns(),
            section_ok,
            unlock,
            token,
            lost_ns,
        }))
    }

    async fn semaphore_iteration(&self, spec: &Stress, errors: &mut Errors) -> Option<Record> {
        let semaphore = self.client.semaphore(&spec.name);
        let requested_ns = now_ns();
        let permits = semaphore
            .acquire(1)
            .await
            .map_err(|e| errors.note(e.to_string()))
            .ok()?;
        let acquired_ns = now_ns();
        hold(spec.hold).await;
        let releasing_ns = now_ns();
        let unlock = outcome(permits.release().await, errors);
        Some(Record {
            requested_ns,
            acquired_ns,
            releasing_ns,
            released_ns: now_ns(),
            section_ok: true,
            unlock,
            token: None,
            lost_ns: None,
        })
    }

    async fn psem_iteration(&self, spec: &Stress, errors: &mut Errors) -> Option<Record> {
        let semaphore = self.client.permit_expirable_semaphore(&spec.name);
        let requested_ns = now_ns();
        let ids = semaphore
            .acquire(1, None)
            .await
            .map_err(|e| errors.note(e.to_string()))
            .ok()?;
        let acquired_ns = now_ns();
        hold(spec.hold).await;
        let releasing_ns = now_ns();
        let unlock = outcome(semaphore.release(&ids).await, errors);
        Some(Record {
            requested_ns,
            acquired_ns,
            releasing_ns,
            released_ns: now_ns(),
            section_ok: true,
            unlock,
            token: None,
            lost_ns: None,
        })
    }
}

/// Runs `section` to its end, noting the instant `lost` resolves if it does meanwhile.
async fn watch_lost<T>(
    section: impl Future<Output = T>,
    lost: impl Future<Output = ()>,
) -> (T, Option<u64>) {
    let mut section = pin!(section);
    let mut lost = pin!(lost);
    let mut lost_ns = None;
    loop {
        tokio::select! {
            biased;
            result = &mut section => return (result, lost_ns),
            () = &mut lost, if lost_ns.is_none() => lost_ns = Some(now_ns()),
        }
    }
}

async fn hold(hold: Duration) {
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
}
