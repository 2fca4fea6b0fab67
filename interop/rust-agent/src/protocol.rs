//! The JSON-lines protocol of CONFORMANCE_PROTOCOL.md: requests parsed into [`Op`]s,
//! responses rendered as lines on stdout.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

use redisson_sync::PermitId;
use serde_json::{Map, Value};

/// The lock kinds of the protocol (every one of them: this crate has them all); an unknown
/// kind is answered `unsupported`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `lock`: the reentrant lock (RLock).
    Lock,
    /// `fair`: the fair lock (RFairLock).
    Fair,
    /// `read`: the read half of a read-write lock.
    Read,
    /// `write`: the write half of a read-write lock.
    Write,
    /// `fenced`: the fenced lock (RFencedLock); acquisitions answer their `token`.
    Fenced,
    /// `spin`: the spin lock (RSpinLock).
    Spin,
    /// `nonreentrant`: the non-reentrant lock (RNonReentrantLock).
    NonReentrant,
    /// `nonreentrant_fair`: the non-reentrant fair lock (RNonReentrantFairLock).
    NonReentrantFair,
}

impl Kind {
    fn parse(kind: &str) -> Result<Self, Failure> {
        Ok(match kind {
            "lock" => Self::Lock,
            "fair" => Self::Fair,
            "read" => Self::Read,
            "write" => Self::Write,
            "fenced" => Self::Fenced,
            "spin" => Self::Spin,
            "nonreentrant" => Self::NonReentrant,
            "nonreentrant_fair" => Self::NonReentrantFair,
            "semaphore" | "psem" => {
                return Err(Failure::new(
                    Code::Unsupported,
                    format!("kind {kind:?} is only for stress and bench, not for lock ops"),
                ));
            }
            _ => {
                return Err(Failure::new(
                    Code::Unsupported,
                    format!("kind {kind:?} is not a kind of the protocol"),
                ));
            }
        })
    }
}

/// What the object and expiry ops (`obj_*`) act on: a lock kind, `semaphore`, `psem` or
/// `latch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjKind {
    Lock(Kind),
    /// `semaphore`: a `Semaphore`.
    Semaphore,
    /// `psem`: a `PermitExpirableSemaphore` (both of its keys).
    Psem,
    /// `latch`: a `CountDownLatch`.
    Latch,
}

impl ObjKind {
    fn parse(okind: &str) -> Result<Self, Failure> {
        match okind {
            "semaphore" => Ok(Self::Semaphore),
            "psem" => Ok(Self::Psem),
            "latch" => Ok(Self::Latch),
            _ => Kind::parse(okind).map(Self::Lock),
        }
    }
}

/// What `stress` and `bench` run on: a lock kind, or one of the semaphores (protocol
/// extension: `semaphore` for both ops, `psem` for `stress` only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    Lock(Kind),
    /// `semaphore`: a `Semaphore` named `name`, one permit per iteration.
    Semaphore,
    /// `psem`: a `PermitExpirableSemaphore` named `name`, one permit (no lease) per iteration.
    Psem,
}

impl Primitive {
    fn parse(kind: &str, op: &str) -> Result<Self, Failure> {
        match (kind, op) {
            ("semaphore", "stress" | "bench") => Ok(Self::Semaphore),
            ("psem", "stress") => Ok(Self::Psem),
            ("semaphore" | "psem", _) => Err(Failure::new(
                Code::Unsupported,
                format!("kind {kind:?} is not supported for op {op}"),
            )),
            _ => Kind::parse(kind).map(Self::Lock),
        }
    }
}

/// A request that parsed: its id (an integer, echoed as received) and what to do.
#[derive(Debug)]
pub struct Request {
    pub id: Value,
    pub op: Op,
}

/// The operations this agent implements.
#[derive(Debug)]
pub enum Op {
    Ping,
    /// This agent's extension (not in the protocol): the client's `stats()` and the process's
    /// resident memory, for the soak.
    Stats,
    Lock {
        kind: Kind,
        name: String,
        owner: u64,
        lease: Option<Duration>,
    },
    TryLock {
        kind: Kind,
        name: String,
        owner: u64,
        wait: Duration,
        lease: Option<Duration>,
    },
    Unlock {
        kind: Kind,
        name: String,
        owner: u64,
    },
    ForceUnlock {
        kind: Kind,
        name: String,
    },
    IsLocked {
        kind: Kind,
        name: String,
    },
    IsHeld {
        kind: Kind,
        name: String,
        owner: u64,
    },
    HoldCount {
        kind: Kind,
        name: String,
        owner: u64,
    },
    RemainingTtl {
        kind: Kind,
        name: String,
    },
    Stress(Stress),
    Bench(Bench),
    SemTrySet {
        name: String,
        permits: i32,
    },
    SemAcquire {
        name: String,
        owner: u64,
        permits: u32,
        /// `None`: wait as long as it takes.
        wait: Option<Duration>,
    },
    SemRelease {
        name: String,
        permits: u32,
    },
    SemAvailable {
        name: String,
    },
    LatchTrySet {
        name: String,
        count: u64,
    },
    LatchCountDown {
        name: String,
    },
    LatchAwait {
        name: String,
        owner: u64,
        /// `None`: wait as long as it takes.
        wait: Option<Duration>,
    },
    LatchCount {
        name: String,
    },
    PsemTrySet {
        name: String,
        permits: i32,
    },
    PsemAcquire {
        name: String,
        owner: u64,
        permits: u32,
        /// `None`: wait as long as it takes.
        wait: Option<Duration>,
        /// `None`: no lease, the permits are held until released.
        lease: Option<Duration>,
        /// The Rust-only `renew` flag: the agent keeps renewing the leases until the ids are
        /// released.
        renew: bool,
    },
    PsemTryReleaseMany {
        name: String,
        ids: Vec<PermitId>,
    },
    ObjExists {
        okind: ObjKind,
        name: String,
    },
    ObjDelete {
        okind: ObjKind,
        name: String,
    },
    ObjExpire {
        okind: ObjKind,
        name: String,
        ttl: Duration,
    },
    ObjClearExpire {
        okind: ObjKind,
        name: String,
    },
    ObjTtl {
        okind: ObjKind,
        name: String,
    },
    PsemRelease {
        name: String,
        ids: Vec<PermitId>,
    },
    PsemAvailable {
        name: String,
    },
    PsemUpdateLease {
        name: String,
        permit: PermitId,
        /// `None`: no lease.
        lease: Option<Duration>,
    },
}

#[derive(Debug)]
pub struct Stress {
    pub kind: Primitive,
    pub name: String,
    pub owner: u64,
    pub iterations: u64,
    /// Required for the lock kinds; optional and never touched for the semaphores.
    pub counter: Option<String>,
    pub hold: Duration,
    pub record: bool,
    /// Protocol extension for the fault suite: go on after errors and report every
    /// iteration in `records` (see the README's interop section).
    pub keep_going: bool,
}

#[derive(Debug)]
pub struct Bench {
    /// A lock kind or `Semaphore` (never `Psem`: answered `unsupported` when parsed).
    pub kind: Primitive,
    pub name: String,
    pub tasks: u64,
    pub iterations: u64,
    pub same_key: bool,
}

impl Op {
    /// The owner whose queue runs this op; `None` for ops that run on their own.
    pub fn owner(&self) -> Option<u64> {
        match self {
            Self::Lock { owner, .. }
            | Self::TryLock { owner, .. }
            | Self::Unlock { owner, .. }
            | Self::IsHeld { owner, .. }
            | Self::HoldCount { owner, .. }
            | Self::SemAcquire { owner, .. }
            | Self::LatchAwait { owner, .. }
            | Self::PsemAcquire { owner, .. } => Some(*owner),
            Self::Stress(stress) => Some(stress.owner),
            Self::Ping
            | Self::Stats
            | Self::ForceUnlock { .. }
            | Self::IsLocked { .. }
            | Self::RemainingTtl { .. }
            | Self::Bench(_)
            | Self::SemTrySet { .. }
            | Self::SemRelease { .. }
            | Self::SemAvailable { .. }
            | Self::LatchTrySet { .. }
            | Self::LatchCountDown { .. }
            | Self::LatchCount { .. }
            | Self::PsemTrySet { .. }
            | Self::PsemRelease { .. }
            | Self::PsemAvailable { .. }
            | Self::PsemUpdateLease { .. }
            | Self::PsemTryReleaseMany { .. }
            | Self::ObjExists { .. }
            | Self::ObjDelete { .. }
            | Self::ObjExpire { .. }
            | Self::ObjClearExpire { .. }
            | Self::ObjTtl { .. } => None,
        }
    }

    /// Lock, semaphore and latch operations carry `start_ns` and `end_ns` in their responses.
    pub fn is_timed(&self) -> bool {
        !matches!(self, Self::Ping | Self::Stats | Self::Bench(_))
    }
}

/// A request that could not be parsed, with what to answer.
#[derive(Debug)]
pub struct Rejected {
    /// The request's id, or `null` when it has no integer id.
    pub id: Value,
    pub failure: Failure,
    /// The op is a lock operation: the answer carries timestamps too.
    pub timed: bool,
}

impl Rejected {
    /// A malformed request.
    pub fn bad_request(id: Value, message: impl Into<String>) -> Self {
        Self {
            id,
            failure: Failure::bad_request(message),
            timed: false,
        }
    }
}

/// Parses one request line.
pub fn parse(line: &str) -> Result<Request, Rejected> {
    let object = match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(object)) => object,
        Ok(_) => {
            return Err(Rejected::bad_request(
                Value::Null,
                "a request must be a JSON object",
            ));
        }
        Err(e) => {
            return Err(Rejected::bad_request(
                Value::Null,
                format!("invalid JSON: {e}"),
            ));
        }
    };
    let id = match object.get("id") {
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
        _ => {
            return Err(Rejected::bad_request(
                Value::Null,
                "a request needs an integer id",
            ));
        }
    };
    let Some(op) = object.get("op").and_then(Value::as_str) else {
        return Err(Rejected::bad_request(id, "a request needs a string op"));
    };
    let timed = TIMED_OPS.contains(&op);
    match parse_op(op, &Fields(&object)) {
        Ok(op) => Ok(Request { id, op }),
        Err(failure) => Err(Rejected { id, failure, timed }),
    }
}

/// The lock, semaphore and latch operations: every response to them carries `start_ns` and
/// `end_ns`.
const TIMED_OPS: &[&str] = &[
    "lock",
    "try_lock",
    "unlock",
    "force_unlock",
    "is_locked",
    "is_held",
    "hold_count",
    "remaining_ttl",
    "stress",
    "sem_try_set",
    "sem_acquire",
    "sem_release",
    "sem_available",
    "latch_try_set",
    "latch_count_down",
    "latch_await",
    "latch_count",
    "psem_try_set",
    "psem_acquire",
    "psem_release",
    "psem_available",
    "psem_update_lease",
    "psem_try_release_many",
    "obj_exists",
    "obj_delete",
    "obj_expire",
    "obj_clear_expire",
    "obj_ttl",
];

/// The operations that take a lock `kind` (only those: `stress` and `bench` parse theirs on
/// their own, as they also take the semaphores).
const LOCK_OPS: &[&str] = &[
    "lock",
    "try_lock",
    "unlock",
    "force_unlock",
    "is_locked",
    "is_held",
    "hold_count",
    "remaining_ttl",
];

fn parse_op(op: &str, f: &Fields<'_>) -> Result<Op, Failure> {
    if op == "ping" {
        return Ok(Op::Ping);
    }
    if op == "stats" {
        return Ok(Op::Stats);
    }
    if LOCK_OPS.contains(&op) {
        return parse_lock_op(op, f);
    }
    Ok(match op {
        "stress" => {
            let kind = Primitive::parse(&f.string("kind")?, op)?;
            Op::Stress(Stress {
                kind,
                name: f.string("name")?,
                owner: f.owner()?,
                iterations: f.count("iterations", 0)?,
                counter: match kind {
                    Primitive::Lock(_) => Some(f.string("counter")?),
                    // Accepted, never touched: several permit holders may be inside at once.
                    Primitive::Semaphore | Primitive::Psem => f.optional_string("counter")?,
                },
                hold: Duration::from_micros(
                    f.optional_int("hold_us")?
                        .unwrap_or(0)
                        .max(0)
                        .unsigned_abs(),
                ),
                record: f.optional_bool("record")?.unwrap_or(false),
                keep_going: f.optional_bool("keep_going")?.unwrap_or(false),
            })
        }
        "bench" => Op::Bench(Bench {
            kind: Primitive::parse(&f.string("kind")?, op)?,
            name: f.string("name")?,
            tasks: f.count("tasks", 1)?,
            iterations: f.count("iterations", 0)?,
            same_key: f.optional_bool("same_key")?.unwrap_or(false),
        }),
        "sem_try_set" => Op::SemTrySet {
            name: f.string("name")?,
            permits: f.int32("permits")?,
        },
        "sem_acquire" => Op::SemAcquire {
            name: f.string("name")?,
            owner: f.owner()?,
            permits: f.permits(0)?,
            wait: f.wait()?,
        },
        "sem_release" => Op::SemRelease {
            name: f.string("name")?,
            permits: f.permits(0)?,
        },
        "sem_available" => Op::SemAvailable {
            name: f.string("name")?,
        },
        "latch_try_set" => Op::LatchTrySet {
            name: f.string("name")?,
            count: f.latch_count()?,
        },
        "latch_count_down" => Op::LatchCountDown {
            name: f.string("name")?,
        },
        "latch_await" => Op::LatchAwait {
            name: f.string("name")?,
            owner: f.owner()?,
            wait: f.wait()?,
        },
        "latch_count" => Op::LatchCount {
            name: f.string("name")?,
        },
        "psem_try_set" => Op::PsemTrySet {
            name: f.string("name")?,
            permits: f.int32("permits")?,
        },
        "psem_acquire" => Op::PsemAcquire {
            name: f.string("name")?,
            owner: f.owner()?,
            permits: if f.get("permits").is_some() {
                f.permits(1)?
            } else {
                1
            },
            wait: f.wait()?,
            lease: f.lease()?,
            renew: f.optional_bool("renew")?.unwrap_or(false),
        },
        "psem_try_release_many" => Op::PsemTryReleaseMany {
            name: f.string("name")?,
            ids: f.permit_ids()?,
        },
        "obj_exists" | "obj_delete" | "obj_expire" | "obj_clear_expire" | "obj_ttl" => {
            // The kind first, as the Java agent checks it: an unknown one is `unsupported`.
            let okind = ObjKind::parse(&f.string("okind")?)?;
            let name = f.string("name")?;
            match op {
                "obj_exists" => Op::ObjExists { okind, name },
                "obj_delete" => Op::ObjDelete { okind, name },
                "obj_expire" => Op::ObjExpire {
                    okind,
                    name,
                    ttl: f.ttl()?,
                },
                "obj_clear_expire" => Op::ObjClearExpire { okind, name },
                _ => Op::ObjTtl { okind, name },
            }
        }
        "psem_release" => Op::PsemRelease {
            name: f.string("name")?,
            ids: f.permit_ids()?,
        },
        "psem_available" => Op::PsemAvailable {
            name: f.string("name")?,
        },
        // The protocol's table calls the permit field `id`, which is the request id of every
        // request: the permit id travels as `permit_id` (as in the Java agent).
        "psem_update_lease" => Op::PsemUpdateLease {
            name: f.string("name")?,
            permit: f.permit_id("permit_id")?,
            lease: lease(f.int("lease_ms")?),
        },
        _ => {
            return Err(Failure::new(
                Code::Unsupported,
                format!("op {op:?} is not supported by this agent"),
            ));
        }
    })
}

/// The lock operations, on a lock `kind`.
fn parse_lock_op(op: &str, f: &Fields<'_>) -> Result<Op, Failure> {
    let kind = Kind::parse(&f.string("kind")?)?;
    let name = f.string("name")?;
    Ok(match op {
        "lock" => Op::Lock {
            kind,
            name,
            owner: f.owner()?,
            lease: f.lease()?,
        },
        "try_lock" => Op::TryLock {
            kind,
            name,
            owner: f.owner()?,
            // Negative waits make one attempt, like Java's tryLock.
            wait: Duration::from_millis(
                f.optional_int("wait_ms")?
                    .unwrap_or(0)
                    .max(0)
                    .unsigned_abs(),
            ),
            lease: f.lease()?,
        },
        "unlock" => Op::Unlock {
            kind,
            name,
            owner: f.owner()?,
        },
        "force_unlock" => Op::ForceUnlock { kind, name },
        "is_locked" => Op::IsLocked { kind, name },
        "is_held" => Op::IsHeld {
            kind,
            name,
            owner: f.owner()?,
        },
        "hold_count" => Op::HoldCount {
            kind,
            name,
            owner: f.owner()?,
        },
        _ => Op::RemainingTtl { kind, name },
    })
}

/// A lease in ms: <= 0 means none (the watchdog for locks, no expiry for permits).
fn lease(ms: i64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms.unsigned_abs()))
}

/// Typed access to the fields of a request; every failure is a `bad_request`.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    /// A present, non-null field.
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    fn string(&self, key: &str) -> Result<String, Failure> {
        match self.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(_) => Err(Failure::bad_request(format!(
                "{key} must be a non-empty string"
            ))),
            None => Err(Failure::bad_request(format!("{key} is missing"))),
        }
    }

    fn optional_string(&self, key: &str) -> Result<Option<String>, Failure> {
        self.get(key).map(|_| self.string(key)).transpose()
    }

    /// A required integer.
    fn int(&self, key: &str) -> Result<i64, Failure> {
        self.optional_int(key)?
            .ok_or_else(|| Failure::bad_request(format!("{key} is missing")))
    }

    /// A required integer that fits Java's `int` (Redisson's permit counts).
    fn int32(&self, key: &str) -> Result<i32, Failure> {
        let n = self.int(key)?;
        i32::try_from(n)
            .map_err(|_| Failure::bad_request(format!("{key} is out of range (Java's int): {n}")))
    }

    /// `permits`: a required count of at least `min` (0 or 1) that fits Java's `int`.
    fn permits(&self, min: i32) -> Result<u32, Failure> {
        let n = self.int32("permits")?;
        if n < 0 {
            // Redisson's IllegalArgumentException.
            return Err(Failure::bad_request(format!(
                "Permits amount can't be negative, got {n}"
            )));
        }
        if n < min {
            return Err(Failure::bad_request(format!(
                "permits must be at least {min}, got {n}"
            )));
        }
        Ok(n.unsigned_abs())
    }

    /// `count` of `latch_try_set`: negative counts are refused here; 0 goes to the crate,
    /// which refuses it (`InvalidArgument`: `bad_request`).
    fn latch_count(&self) -> Result<u64, Failure> {
        let n = self.int("count")?;
        u64::try_from(n)
            .map_err(|_| Failure::bad_request(format!("count must be at least 1, got {n}")))
    }

    /// `wait_ms`: absent or null means wait as long as it takes; negative counts as 0.
    fn wait(&self) -> Result<Option<Duration>, Failure> {
        Ok(self
            .optional_int("wait_ms")?
            .map(|ms| Duration::from_millis(ms.max(0).unsigned_abs())))
    }

    /// A permit id of a permit-expirable semaphore: a string of 32 hex digits.
    fn permit_id(&self, key: &str) -> Result<PermitId, Failure> {
        match self.get(key) {
            Some(v) => parse_permit_id(key, v),
            None => Err(Failure::bad_request(format!("{key} is missing"))),
        }
    }

    /// `ids`: a non-empty list of permit ids.
    fn permit_ids(&self) -> Result<Vec<PermitId>, Failure> {
        match self.get("ids") {
            Some(Value::Array(ids)) if !ids.is_empty() => {
                ids.iter().map(|v| parse_permit_id("ids", v)).collect()
            }
            Some(v) => Err(Failure::bad_request(format!(
                "ids must be a non-empty list of permit ids, got {v}"
            ))),
            None => Err(Failure::bad_request("ids is missing")),
        }
    }

    fn optional_int(&self, key: &str) -> Result<Option<i64>, Failure> {
        self.get(key)
            .map(|v| {
                v.as_i64().ok_or_else(|| {
                    Failure::bad_request(format!("{key} must be an integer, got {v}"))
                })
            })
            .transpose()
    }

    fn optional_bool(&self, key: &str) -> Result<Option<bool>, Failure> {
        self.get(key)
            .map(|v| {
                v.as_bool().ok_or_else(|| {
                    Failure::bad_request(format!("{key} must be a boolean, got {v}"))
                })
            })
            .transpose()
    }

    /// A required integer of at least `min`.
    fn count(&self, key: &str, min: u64) -> Result<u64, Failure> {
        match self.get(key).map(|v| (v, v.as_u64())) {
            Some((_, Some(n))) if n >= min => Ok(n),
            Some((v, _)) => Err(Failure::bad_request(format!(
                "{key} must be an integer of at least {min}, got {v}"
            ))),
            None => Err(Failure::bad_request(format!("{key} is missing"))),
        }
    }

    fn owner(&self) -> Result<u64, Failure> {
        self.count("owner", 1)
    }

    /// `lease_ms`: absent or <= 0 means no lease given (locks: the watchdog lease; permits:
    /// no expiry).
    fn lease(&self) -> Result<Option<Duration>, Failure> {
        Ok(self.optional_int("lease_ms")?.and_then(lease))
    }

    /// `ttl_ms`: a required time to live of at least 1 ms (as the Java agent: Redis would
    /// delete a key expired with 0).
    fn ttl(&self) -> Result<Duration, Failure> {
        match self.int("ttl_ms")? {
            ms if ms >= 1 => Ok(Duration::from_millis(ms.unsigned_abs())),
            ms => Err(Failure::bad_request(format!(
                "ttl_ms must be at least 1, got {ms}"
            ))),
        }
    }
}

fn parse_permit_id(key: &str, value: &Value) -> Result<PermitId, Failure> {
    match value {
        Value::String(s) => {
            PermitId::parse(s).map_err(|e| Failure::bad_request(format!("{key}: {e}")))
        }
        other => Err(Failure::bad_request(format!(
            "{key} must hold permit ids (strings of 32 hex digits), got {other}"
        ))),
    }
}

/// The protocol's error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    NotHeld,
    Unsupported,
    BadRequest,
    Redis,
    Timeout,
}

impl Code {
    fn as_str(self) -> &'static str {
        match self {
            Self::NotHeld => "not_held",
            Self::Unsupported => "unsupported",
            Self::BadRequest => "bad_request",
            Self::Redis => "redis",
            Self::Timeout => "timeout",
        }
    }
}

/// A failed request: an error code and a message for humans.
#[derive(Debug)]
pub struct Failure {
    pub code: Code,
    pub message: String,
}

impl Failure {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Code::BadRequest, message)
    }
}

impl From<redisson_sync::Error> for Failure {
    fn from(e: redisson_sync::Error) -> Self {
        use redisson_sync::Error;
        let code = match &e {
            e if e.is_not_held() => Code::NotHeld,
            Error::PermitNotHeld { .. } => Code::NotHeld,
            // Redisson's IllegalMonitorStateException, which the protocol calls not_held.
            Error::NotReentrant { .. } => Code::NotHeld,
            e if e.is_timeout() => Code::Timeout,
            Error::InvalidArgument(_) => Code::BadRequest,
            // Redis, WrongType, Shutdown, UnexpectedReply, and kinds added later.
            _ => Code::Redis,
        };
        Self::new(code, e.to_string())
    }
}

/// The result fields of a successful response, in output order.
pub type Reply = Vec<(&'static str, Value)>;

/// One response line.
#[derive(Debug)]
pub struct Response {
    pub id: Value,
    pub result: Result<Reply, Failure>,
    /// `(start_ns, end_ns)` for lock operations.
    pub timing: Option<(u64, u64)>,
}

impl Response {
    /// Writes the response as one line on stdout.
    pub fn emit(self) {
        let mut fields: Reply = vec![("id", self.id)];
        match self.result {
            Ok(result) => {
                fields.push(("ok", Value::Bool(true)));
                fields.extend(result);
            }
            Err(failure) => {
                fields.push(("ok", Value::Bool(false)));
                fields.push(("error", failure.code.as_str().into()));
                fields.push(("message", failure.message.into()));
            }
        }
        if let Some((start, end)) = self.timing {
            fields.push(("start_ns", start.into()));
            fields.push(("end_ns", end.into()));
        }
        emit(&fields);
    }
}

impl From<Rejected> for Response {
    fn from(rejected: Rejected) -> Self {
        let now = now_ns();
        Self {
            id: rejected.id,
            result: Err(rejected.failure),
            timing: rejected.timed.then_some((now, now)),
        }
    }
}

/// Writes one JSON object, with its fields in the given order, as one line on stdout and
/// flushes it. Lines never interleave: the whole line is written under the stdout lock.
pub fn emit(fields: &[(&str, Value)]) {
    let mut line = String::from("{");
    for (i, (key, value)) in fields.iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        // Keys are plain identifiers; `Value`'s Display is compact JSON.
        let _ = write!(line, "{comma}\"{key}\":{value}");
    }
    line.push_str("}\n");
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(line.as_bytes())
        .and_then(|()| stdout.flush())
    {
        eprintln!("redisson-sync-agent: cannot write to stdout: {e}");
    }
}

/// CLOCK_MONOTONIC in nanoseconds: comparable with the Java agent's `System.nanoTime()` and
/// with other processes on this host.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always available on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec.unsigned_abs() * 1_000_000_000 + ts.tv_nsec.unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(line: &str) -> Rejected {
        parse(line).expect_err(line)
    }

    #[test]
    fn parses_the_example_of_the_protocol() {
        let request =
            parse(r#"{"id":1,"op":"try_lock","kind":"lock","name":"order:42","owner":1}"#).unwrap();
        assert_eq!(request.id, 1);
        match request.op {
            Op::TryLock {
                kind,
                name,
                owner,
                wait,
                lease,
            } => {
                assert_eq!(
                    (kind, name.as_str(), owner, wait, lease),
                    (Kind::Lock, "order:42", 1, Duration::ZERO, None)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn non_positive_leases_mean_the_watchdog() {
        for lease in ["0", "-5", "null"] {
            let line = format!(
                r#"{{"id":1,"op":"lock","kind":"lock","name":"a","owner":1,"lease_ms":{lease}}}"#
            );
            assert!(matches!(
                parse(&line).unwrap().op,
                Op::Lock { lease: None, .. }
            ));
        }
    }

    #[test]
    fn malformed_requests_are_bad_requests_with_the_id_when_there_is_one() {
        for (line, id) in [
            ("garbage", Value::Null),
            ("[1]", Value::Null),
            (r#"{"id":"7","op":"ping"}"#, Value::Null),
            (r#"{"id":7}"#, 7.into()),
            (r#"{"id":7,"op":"lock","kind":"lock","owner":1}"#, 7.into()),
            (
                r#"{"id":7,"op":"lock","kind":"lock","name":"a","owner":0}"#,
                7.into(),
            ),
            (
                r#"{"id":7,"op":"bench","kind":"lock","name":"a","tasks":0,"iterations":1}"#,
                7.into(),
            ),
        ] {
            let r = rejected(line);
            assert_eq!((r.id, r.failure.code), (id, Code::BadRequest), "{line}");
        }
    }

    #[test]
    fn kinds_parse_and_other_kinds_and_ops_are_unsupported() {
        for (kind, parsed) in [
            ("lock", Kind::Lock),
            ("fair", Kind::Fair),
            ("read", Kind::Read),
            ("write", Kind::Write),
            ("fenced", Kind::Fenced),
            ("spin", Kind::Spin),
            ("nonreentrant", Kind::NonReentrant),
            ("nonreentrant_fair", Kind::NonReentrantFair),
        ] {
            let line = format!(r#"{{"id":1,"op":"unlock","kind":"{kind}","name":"a","owner":2}}"#);
            match parse(&line).unwrap().op {
                Op::Unlock { kind, .. } => assert_eq!(kind, parsed),
                other => panic!("{other:?}"),
            }
        }
        let r = rejected(r#"{"id":1,"op":"lock","kind":"redlock","name":"a","owner":1}"#);
        assert_eq!(r.failure.code, Code::Unsupported);
        assert!(r.failure.message.contains("redlock"));
        assert!(r.timed);
        let r = rejected(r#"{"id":1,"op":"sem_drain","name":"a"}"#);
        assert_eq!(r.failure.code, Code::Unsupported);
        assert!(!r.timed);
        assert!(matches!(
            parse(r#"{"id":1,"op":"sem_available","name":"a"}"#).unwrap().op,
            Op::SemAvailable { name } if name == "a"
        ));
    }

    #[test]
    fn semaphore_kinds_are_for_stress_and_bench_only() {
        for kind in ["semaphore", "psem"] {
            let r = rejected(&format!(
                r#"{{"id":1,"op":"lock","kind":"{kind}","name":"a","owner":1}}"#
            ));
            assert_eq!(r.failure.code, Code::Unsupported, "{kind}");
            assert!(r.timed);
            let r = rejected(&format!(
                r#"{{"id":1,"op":"is_locked","kind":"{kind}","name":"a"}}"#
            ));
            assert_eq!(r.failure.code, Code::Unsupported, "{kind}");
        }
        // stress: the counter is optional for the semaphores, required for the locks.
        for (kind, parsed) in [
            ("semaphore", Primitive::Semaphore),
            ("psem", Primitive::Psem),
        ] {
            let line = format!(
                r#"{{"id":1,"op":"stress","kind":"{kind}","name":"a","owner":1,"iterations":3}}"#
            );
            match parse(&line).unwrap().op {
                Op::Stress(s) => assert_eq!((s.kind, s.counter, s.owner), (parsed, None, 1)),
                other => panic!("{other:?}"),
            }
        }
        let r =
            rejected(r#"{"id":1,"op":"stress","kind":"lock","name":"a","owner":1,"iterations":3}"#);
        assert_eq!(r.failure.code, Code::BadRequest);
        match parse(
            r#"{"id":1,"op":"bench","kind":"semaphore","name":"a","tasks":2,"iterations":3}"#,
        )
        .unwrap()
        .op
        {
            Op::Bench(b) => assert_eq!(b.kind, Primitive::Semaphore),
            other => panic!("{other:?}"),
        }
        let r =
            rejected(r#"{"id":1,"op":"bench","kind":"psem","name":"a","tasks":2,"iterations":3}"#);
        assert_eq!(r.failure.code, Code::Unsupported);
        assert!(!r.timed);
    }

    #[test]
    fn semaphore_and_latch_ops_parse() {
        let op = |line: &str| parse(line).unwrap().op;
        match op(r#"{"id":1,"op":"sem_acquire","name":"s","owner":2,"permits":3}"#) {
            Op::SemAcquire {
                name,
                owner,
                permits,
                wait,
            } => assert_eq!((name.as_str(), owner, permits, wait), ("s", 2, 3, None)),
            other => panic!("{other:?}"),
        }
        for (wait, parsed) in [
            ("null", None),
            ("0", Some(0)),
            ("-5", Some(0)),
            ("250", Some(250)),
        ] {
            let line = format!(
                r#"{{"id":1,"op":"sem_acquire","name":"s","owner":2,"permits":0,"wait_ms":{wait}}}"#
            );
            match op(&line) {
                Op::SemAcquire { wait, permits, .. } => {
                    assert_eq!((wait, permits), (parsed.map(Duration::from_millis), 0));
                }
                other => panic!("{other:?}"),
            }
            let line =
                format!(r#"{{"id":1,"op":"latch_await","name":"l","owner":2,"wait_ms":{wait}}}"#);
            match op(&line) {
                Op::LatchAwait { wait, owner, .. } => {
                    assert_eq!((wait, owner), (parsed.map(Duration::from_millis), 2));
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            op(r#"{"id":1,"op":"sem_try_set","name":"s","permits":-4}"#),
            Op::SemTrySet { permits: -4, .. }
        ));
        assert!(matches!(
            op(r#"{"id":1,"op":"sem_release","name":"s","permits":2}"#),
            Op::SemRelease { permits: 2, .. }
        ));
        assert!(matches!(
            op(r#"{"id":1,"op":"latch_try_set","name":"l","count":0}"#),
            Op::LatchTrySet { count: 0, .. }
        ));
        assert!(matches!(
            op(r#"{"id":1,"op":"latch_count_down","name":"l"}"#),
            Op::LatchCountDown { .. }
        ));
        assert!(matches!(
            op(r#"{"id":1,"op":"latch_count","name":"l"}"#),
            Op::LatchCount { .. }
        ));
        for line in [
            r#"{"id":1,"op":"sem_acquire","name":"s","owner":2,"permits":3}"#,
            r#"{"id":1,"op":"latch_await","name":"l","owner":2}"#,
            r#"{"id":1,"op":"psem_acquire","name":"p","owner":2}"#,
        ] {
            let op = op(line);
            assert_eq!(op.owner(), Some(2), "{line}");
            assert!(op.is_timed());
        }
        for line in [
            r#"{"id":1,"op":"sem_release","name":"s","permits":3}"#,
            r#"{"id":1,"op":"latch_count_down","name":"l"}"#,
            r#"{"id":1,"op":"psem_available","name":"p"}"#,
        ] {
            let op = op(line);
            assert_eq!(op.owner(), None, "{line}");
            assert!(op.is_timed());
        }
    }

    #[test]
    fn bad_semaphore_and_latch_requests_are_timed_bad_requests() {
        for line in [
            r#"{"id":5,"op":"sem_acquire","name":"s","owner":1,"permits":-1}"#,
            r#"{"id":5,"op":"sem_acquire","name":"s","owner":1}"#,
            r#"{"id":5,"op":"sem_acquire","name":"s","permits":1}"#,
            r#"{"id":5,"op":"sem_acquire","name":"s","owner":1,"permits":2147483648}"#,
            r#"{"id":5,"op":"sem_release","name":"s","permits":-2}"#,
            r#"{"id":5,"op":"sem_try_set","name":"s","permits":2147483648}"#,
            r#"{"id":5,"op":"sem_try_set","name":"s","permits":-2147483649}"#,
            r#"{"id":5,"op":"sem_try_set","name":"s","permits":1.5}"#,
            r#"{"id":5,"op":"sem_available"}"#,
            r#"{"id":5,"op":"latch_try_set","name":"l","count":-1}"#,
            r#"{"id":5,"op":"latch_try_set","name":"l"}"#,
            r#"{"id":5,"op":"latch_await","name":"l","owner":1,"wait_ms":"1"}"#,
            r#"{"id":5,"op":"psem_try_set","name":"p","permits":4294967297}"#,
            r#"{"id":5,"op":"psem_acquire","name":"p","owner":1,"permits":0}"#,
            r#"{"id":5,"op":"psem_acquire","name":"p","owner":1,"permits":-3}"#,
            r#"{"id":5,"op":"psem_release","name":"p","ids":[]}"#,
            r#"{"id":5,"op":"psem_release","name":"p"}"#,
            r#"{"id":5,"op":"psem_release","name":"p","ids":"0123456789abcdef0123456789abcdef"}"#,
            r#"{"id":5,"op":"psem_release","name":"p","ids":["0123456789abcdef0123456789abcde"]}"#,
            r#"{"id":5,"op":"psem_release","name":"p","ids":["0123456789abcdef0123456789abcdeg"]}"#,
            r#"{"id":5,"op":"psem_release","name":"p","ids":["0123456789abcdef0123456789abcdef",7]}"#,
            r#"{"id":5,"op":"psem_update_lease","name":"p","lease_ms":100}"#,
            r#"{"id":5,"op":"psem_update_lease","name":"p","permit_id":"xyz","lease_ms":100}"#,
            r#"{"id":5,"op":"psem_update_lease","name":"p","permit_id":"0123456789abcdef0123456789abcdef"}"#,
        ] {
            let r = rejected(line);
            assert_eq!(
                (r.id, r.failure.code),
                (5.into(), Code::BadRequest),
                "{line}"
            );
            assert!(r.timed, "{line}");
        }
        let r = rejected(r#"{"id":5,"op":"sem_acquire","name":"s","owner":1,"permits":-1}"#);
        assert!(
            r.failure.message.contains("can't be negative"),
            "{}",
            r.failure.message
        );
    }

    #[test]
    fn permit_expirable_semaphore_ops_parse() {
        let op = |line: &str| parse(line).unwrap().op;
        match op(r#"{"id":1,"op":"psem_acquire","name":"p","owner":4}"#) {
            Op::PsemAcquire {
                permits,
                wait,
                lease,
                ..
            } => assert_eq!((permits, wait, lease), (1, None, None)),
            other => panic!("{other:?}"),
        }
        match op(
            r#"{"id":1,"op":"psem_acquire","name":"p","owner":4,"permits":3,"wait_ms":0,"lease_ms":1500}"#,
        ) {
            Op::PsemAcquire {
                permits,
                wait,
                lease,
                ..
            } => assert_eq!(
                (permits, wait, lease),
                (3, Some(Duration::ZERO), Some(Duration::from_millis(1500)))
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            op(r#"{"id":1,"op":"psem_acquire","name":"p","owner":4,"permits":null,"lease_ms":-1}"#),
            Op::PsemAcquire {
                permits: 1,
                lease: None,
                ..
            }
        ));
        let upper = "0123456789ABCDEF0123456789ABCDEF";
        let lower = "0123456789abcdef0123456789abcdef";
        match op(&format!(
            r#"{{"id":1,"op":"psem_release","name":"p","ids":["{upper}","{lower}"]}}"#
        )) {
            Op::PsemRelease { ids, .. } => {
                assert_eq!(ids.len(), 2);
                assert_eq!(ids[0], ids[1]);
                assert_eq!(ids[0].to_string(), lower);
            }
            other => panic!("{other:?}"),
        }
        // The permit id travels as `permit_id`: `id` is the request id.
        for (lease, parsed) in [("0", None), ("-7", None), ("2500", Some(2500))] {
            let line = format!(
                r#"{{"id":9,"op":"psem_update_lease","name":"p","permit_id":"{lower}","lease_ms":{lease}}}"#
            );
            let request = parse(&line).unwrap();
            assert_eq!(request.id, 9);
            match request.op {
                Op::PsemUpdateLease { permit, lease, .. } => {
                    assert_eq!(permit.to_string(), lower);
                    assert_eq!(lease, parsed.map(Duration::from_millis));
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            op(r#"{"id":1,"op":"psem_try_set","name":"p","permits":2}"#),
            Op::PsemTrySet { permits: 2, .. }
        ));
    }

    #[test]
    fn permit_not_held_is_not_held() {
        let failure = Failure::from(redisson_sync::Error::PermitNotHeld {
            name: "p".into(),
            ids: vec!["00".repeat(16)],
        });
        assert_eq!(failure.code, Code::NotHeld);
        let failure = Failure::from(redisson_sync::Error::InvalidArgument("x".into()));
        assert_eq!(failure.code, Code::BadRequest);
        let failure = Failure::from(redisson_sync::Error::WrongType { key: "k".into() });
        assert_eq!(failure.code, Code::Redis);
    }

    #[test]
    fn owners_route_to_their_queue() {
        let op = |line: &str| parse(line).unwrap().op;
        assert_eq!(
            op(r#"{"id":1,"op":"unlock","kind":"lock","name":"a","owner":3}"#).owner(),
            Some(3)
        );
        assert_eq!(
            op(r#"{"id":1,"op":"force_unlock","kind":"lock","name":"a"}"#).owner(),
            None
        );
        assert!(!op(r#"{"id":1,"op":"ping"}"#).is_timed());
    }
}

/// Any request line (issue 29, item 8): the parser answers every one with a request or a
/// `bad_request` / `unsupported` rejection carrying the request's id when it has one, never a
/// panic. A short fixed-seed run; `REDISSON_FUZZ_CASES` and `REDISSON_FUZZ_SEED` choose
/// another, as for the crate's `tests/fuzz_*.rs`.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use serde_json::{Map, Value, json};

    use super::*;

    fn config(cases: u32) -> Config {
        let env = |var: &str, default: u64| {
            std::env::var(var).map_or(default, |v| v.trim().parse().expect(var))
        };
        Config {
            cases: u32::try_from(env("REDISSON_FUZZ_CASES", u64::from(cases))).unwrap(),
            rng_seed: RngSeed::Fixed(env("REDISSON_FUZZ_SEED", 29)),
            failure_persistence: None,
            ..Config::default()
        }
    }

    const FIELDS: &[&str] = &[
        "kind",
        "name",
        "owner",
        "wait_ms",
        "lease_ms",
        "permits",
        "count",
        "ids",
        "permit_id",
        "iterations",
        "tasks",
        "hold_us",
        "counter",
        "record",
        "keep_going",
        "same_key",
        "okind",
        "ttl_ms",
        "renew",
    ];

    /// Values of the right and wrong types, in and out of range.
    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            prop::sample::select(vec![
                "lock",
                "fair",
                "read",
                "write",
                "fenced",
                "spin",
                "semaphore",
                "psem",
                "latch",
                "bucket",
                "",
                "a",
                "0123456789abcdef0123456789abcdef",
            ])
            .prop_map(Value::from),
            any::<String>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-3i64..4).prop_map(Value::from),
            Just(json!(u64::MAX)),
            Just(json!(i64::from(i32::MAX) + 1)),
            any::<f64>().prop_map(|f| json!(f)),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
            prop::collection::vec("[0-9a-fA-F]{30,33}", 0..3).prop_map(|v| json!(v)),
            Just(json!([1, {"a": null}])),
            Just(json!({"nested": {"deeper": []}})),
        ]
    }

    fn request() -> impl Strategy<Value = (Value, String)> {
        let mut ops: Vec<&str> = TIMED_OPS.to_vec();
        ops.extend(["ping", "stats", "bench", "stress", "no_such_op", ""]);
        let id = prop_oneof![
            4 => any::<i64>().prop_map(Value::from),
            1 => Just(json!(u64::MAX)),
            1 => value(),
        ];
        let fields = prop::collection::btree_map(prop::sample::select(FIELDS), value(), 0..8);
        (id, prop::sample::select(ops), fields).prop_map(|(id, op, fields)| {
            let mut object = Map::new();
            object.insert("id".into(), id.clone());
            object.insert("op".into(), op.into());
            for (k, v) in fields {
                object.insert(k.into(), v);
            }
            (id, Value::Object(object).to_string())
        })
    }

    proptest! {
        #![proptest_config(config(2_000))]

        #[test]
        fn any_request_is_parsed_or_rejected_with_its_id((id, line) in request()) {
            let integer = id.as_i64().is_some() || id.as_u64().is_some();
            match parse(&line) {
                Ok(request) => {
                    prop_assert!(integer, "{line}");
                    prop_assert_eq!(request.id, id);
                }
                Err(rejected) => {
                    prop_assert!(
                        matches!(rejected.failure.code, Code::BadRequest | Code::Unsupported),
                        "{line}: {:?}", rejected.failure
                    );
                    let want = if integer { id } else { Value::Null };
                    prop_assert_eq!(rejected.id, want, "{}", line);
                }
            }
        }

        #[test]
        fn any_text_is_rejected_or_parsed(line in any::<String>()) {
            if let Err(rejected) = parse(&line) {
                prop_assert_eq!(rejected.failure.code, Code::BadRequest);
            }
        }
    }
}
