//! The JSON-lines protocol of CONFORMANCE_PROTOCOL.md: requests parsed into [`Op`]s,
//! responses rendered as lines on stdout.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

use serde_json::{Map, Value};

/// The lock kinds of the protocol that this crate has; the others (`fenced`, `spin`,
/// `nonreentrant`) are answered `unsupported`.
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
}

impl Kind {
    fn parse(kind: &str) -> Result<Self, Failure> {
        Ok(match kind {
            "lock" => Self::Lock,
            "fair" => Self::Fair,
            "read" => Self::Read,
            "write" => Self::Write,
            _ => {
                return Err(Failure::new(
                    Code::Unsupported,
                    format!("kind {kind:?} is not supported by this crate yet"),
                ));
            }
        })
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
}

#[derive(Debug)]
pub struct Stress {
    pub kind: Kind,
    pub name: String,
    pub owner: u64,
    pub iterations: u64,
    pub counter: String,
    pub hold: Duration,
    pub record: bool,
}

#[derive(Debug)]
pub struct Bench {
    pub kind: Kind,
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
            | Self::HoldCount { owner, .. } => Some(*owner),
            Self::Stress(stress) => Some(stress.owner),
            Self::Ping
            | Self::ForceUnlock { .. }
            | Self::IsLocked { .. }
            | Self::RemainingTtl { .. }
            | Self::Bench(_) => None,
        }
    }

    /// Lock operations carry `start_ns` and `end_ns` in their responses.
    pub fn is_timed(&self) -> bool {
        !matches!(self, Self::Ping | Self::Bench(_))
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

/// The lock operations: every response to them carries `start_ns` and `end_ns`.
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
];

fn parse_op(op: &str, f: &Fields<'_>) -> Result<Op, Failure> {
    if op == "ping" {
        return Ok(Op::Ping);
    }
    if !TIMED_OPS.contains(&op) && op != "bench" {
        return Err(Failure::new(
            Code::Unsupported,
            format!("op {op:?} is not supported by this agent"),
        ));
    }
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
        "remaining_ttl" => Op::RemainingTtl { kind, name },
        "stress" => Op::Stress(Stress {
            kind,
            name,
            owner: f.owner()?,
            iterations: f.count("iterations", 0)?,
            counter: f.string("counter")?,
            hold: Duration::from_micros(
                f.optional_int("hold_us")?
                    .unwrap_or(0)
                    .max(0)
                    .unsigned_abs(),
            ),
            record: f.optional_bool("record")?.unwrap_or(false),
        }),
        _ => Op::Bench(Bench {
            kind,
            name,
            tasks: f.count("tasks", 1)?,
            iterations: f.count("iterations", 0)?,
            same_key: f.optional_bool("same_key")?.unwrap_or(false),
        }),
    })
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

    /// `lease_ms`: absent or <= 0 means the watchdog lease.
    fn lease(&self) -> Result<Option<Duration>, Failure> {
        Ok(self
            .optional_int("lease_ms")?
            .filter(|&ms| ms > 0)
            .map(|ms| Duration::from_millis(ms.unsigned_abs())))
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
        ] {
            let line = format!(r#"{{"id":1,"op":"unlock","kind":"{kind}","name":"a","owner":2}}"#);
            match parse(&line).unwrap().op {
                Op::Unlock { kind, .. } => assert_eq!(kind, parsed),
                other => panic!("{other:?}"),
            }
        }
        let r = rejected(r#"{"id":1,"op":"lock","kind":"fenced","name":"a","owner":1}"#);
        assert_eq!(r.failure.code, Code::Unsupported);
        assert!(r.failure.message.contains("fenced"));
        assert!(r.timed);
        let r = rejected(r#"{"id":1,"op":"sem_available","name":"a"}"#);
        assert_eq!(r.failure.code, Code::Unsupported);
        assert!(!r.timed);
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
