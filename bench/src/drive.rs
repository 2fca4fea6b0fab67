//! Driving the conformance agents (`bench`, `stress`, lock ops) and reading what Redis counted
//! (`INFO commandstats`).

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use interop_scenarios::agent::Agent;
use redis::Connection;
use serde_json::{Value, json};

use crate::handoff::Interval;

/// Why a measurement did not happen.
#[derive(Debug)]
pub enum Error {
    /// The agent answered `unsupported` (a kind it does not have yet): the scenario is
    /// reported as not run, and the run goes on.
    Unsupported(String),
    /// Anything else (a protocol error, a wrong counter, an overlap): the run fails.
    Failed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsupported(m) | Self::Failed(m) => f.write_str(m),
        }
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Sends `request` and waits up to `timeout` for its response, which must be `ok`.
pub fn call(agent: &Agent, request: Value, timeout: Duration) -> Result<Value> {
    let id = agent.send(request.clone())?;
    check(agent, &request, agent.wait(id, timeout)?)
}

/// Turns a response into a result: `unsupported` → [`Error::Unsupported`], other errors →
/// [`Error::Failed`].
pub fn check(agent: &Agent, request: &Value, reply: Value) -> Result<Value> {
    if reply["ok"] == true {
        return Ok(reply);
    }
    let what = format!("{} {} {}", agent.label, request["op"], request["kind"]);
    if reply["error"] == "unsupported" {
        Err(Error::Unsupported(format!(
            "kind {} unsupported by {} ({})",
            request["kind"], agent.label, reply["message"]
        )))
    } else {
        Err(Error::Failed(format!("{what} failed: {reply}")))
    }
}

/// The answer to one `bench` request.
#[derive(Debug, Clone, Copy)]
pub struct BenchRun {
    pub ops: u64,
    pub elapsed_ns: u64,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl BenchRun {
    /// Acquire+release pairs per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }
}

/// `bench`: `tasks` loops of `iterations` acquire+release pairs of `kind`.
pub fn bench(
    agent: &Agent,
    kind: &str,
    name: &str,
    tasks: u64,
    iterations: u64,
    same_key: bool,
) -> Result<BenchRun> {
    let request = json!({"op": "bench", "kind": kind, "name": name, "tasks": tasks,
        "iterations": iterations, "same_key": same_key});
    let reply = call(agent, request, Duration::from_secs(300))?;
    let number = |field: &str| {
        reply[field]
            .as_f64()
            .ok_or_else(|| format!("{}: bench reply without {field}: {reply}", agent.label))
    };
    let run = BenchRun {
        ops: number("ops")? as u64,
        elapsed_ns: number("elapsed_ns")? as u64,
        p50_us: number("p50_us")?,
        p99_us: number("p99_us")?,
    };
    if run.ops != tasks * iterations {
        return Err(Error::Failed(format!(
            "{}: bench did {} pairs, asked for {tasks} x {iterations}",
            agent.label, run.ops
        )));
    }
    Ok(run)
}

/// One owner's part in a [`stress`] run.
#[derive(Clone, Copy)]
pub struct StressPart<'a> {
    pub agent: &'a Agent,
    pub owner: u64,
    pub kind: &'static str,
    pub iterations: u64,
}

/// The sections of a [`stress`] run and its wall time.
#[derive(Debug)]
pub struct StressRun {
    /// Per part, in the order given: its recorded sections, `owner` = the part's index.
    pub intervals: Vec<Vec<Interval>>,
    pub wall: Duration,
}

/// Starts every part's `stress` (with `record`) at once on lock `name` and counter `counter`,
/// waits for all, and checks the counter: it must equal the iterations of every part that
/// is not a reader.
pub fn stress(
    con: &mut Connection,
    name: &str,
    counter: &str,
    parts: &[StressPart<'_>],
) -> Result<StressRun> {
    let started = Instant::now();
    let mut sent = Vec::new();
    for part in parts {
        let request = json!({"op": "stress", "kind": part.kind, "name": name, "owner": part.owner,
            "iterations": part.iterations, "counter": counter, "record": true});
        sent.push((part.agent.send(request.clone())?, request));
    }
    // Wait for all before judging, so that no agent is left busy when an error is reported.
    let replies: Vec<_> = parts
        .iter()
        .zip(&sent)
        .map(|(part, (id, _))| part.agent.wait(*id, Duration::from_secs(600)))
        .collect();
    let wall = started.elapsed();
    let mut intervals = Vec::new();
    for (index, ((part, (_, request)), reply)) in parts.iter().zip(&sent).zip(replies).enumerate() {
        let reply = check(part.agent, request, reply?)?;
        let list = reply["intervals"].as_array().cloned().unwrap_or_default();
        if list.len() as u64 != part.iterations {
            return Err(Error::Failed(format!(
                "{}: stress recorded {} intervals for {} iterations",
                part.agent.label,
                list.len(),
                part.iterations
            )));
        }
        let mut mine = Vec::with_capacity(list.len());
        for pair in list {
            match (pair[0].as_u64(), pair[1].as_u64()) {
                (Some(acquired_ns), Some(releasing_ns)) => mine.push(Interval {
                    owner: index,
                    acquired_ns,
                    releasing_ns,
                }),
                _ => return Err(Error::Failed(format!("bad interval {pair}"))),
            }
        }
        intervals.push(mine);
    }
    let expected: u64 = parts
        .iter()
        .filter(|p| p.kind != "read")
        .map(|p| p.iterations)
        .sum();
    let value: Option<u64> = redis::cmd("GET")
        .arg(counter)
        .query(con)
        .map_err(|e| format!("redis: {e}"))?;
    if value.unwrap_or(0) != expected {
        return Err(Error::Failed(format!(
            "stress on {name}: counter is {value:?}, expected {expected}: mutual exclusion broken"
        )));
    }
    Ok(StressRun { intervals, wall })
}

/// Commands the harness itself sends to look at Redis; never counted.
const HARNESS: &[&str] = &[
    "info",
    "config|resetstat",
    "config|get",
    "pubsub|numsub",
    "client|list",
    "llen",
    "flushall",
    "script|load",
];

/// Commands a client sends itself (as opposed to the data commands its Lua scripts run, which
/// `INFO commandstats` counts too). A lock operation of either implementation only reaches
/// data through scripts, so everything else it sends is in this list.
const CLIENT_SENT: &[&str] = &[
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "ping",
    "hello",
    "select",
    "auth",
    "multi",
    "exec",
    "wait",
    "script|exists",
];

/// Calls per command name (`INFO commandstats`), split into what clients sent and what
/// scripts ran.
#[derive(Debug, Clone, Default)]
pub struct Commands {
    /// Sent by the clients (see [`CLIENT_SENT`]; also `client|…` such as `client|setinfo`).
    pub sent: BTreeMap<String, u64>,
    /// Run inside scripts, or sent as plain data commands (the `stress` counter's GET/SET).
    pub data: BTreeMap<String, u64>,
}

impl Commands {
    /// Client-sent commands in all.
    pub fn sent_total(&self) -> u64 {
        self.sent.values().sum()
    }
}

/// `CONFIG RESETSTAT`.
pub fn reset_stats(con: &mut Connection) -> Result<()> {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(con)
        .map_err(|e| Error::Failed(format!("redis: {e}")))
}

/// `INFO commandstats`, without the harness's own commands.
pub fn command_stats(con: &mut Connection) -> Result<Commands> {
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .map_err(|e| format!("redis: {e}"))?;
    Ok(parse_commandstats(&text))
}

fn parse_commandstats(text: &str) -> Commands {
    let mut commands = Commands::default();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((name, stats)) = rest.split_once(':') else {
            continue;
        };
        let calls = stats
            .split(',')
            .find_map(|kv| kv.strip_prefix("calls="))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        if calls == 0 || HARNESS.contains(&name) {
            continue;
        }
        if CLIENT_SENT.contains(&name) || name.starts_with("client|") {
            commands.sent.insert(name.to_owned(), calls);
        } else {
            commands.data.insert(name.to_owned(), calls);
        }
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_commandstats() {
        let text = "# Commandstats\r\n\
            cmdstat_evalsha:calls=20,usec=100,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_hincrby:calls=20,usec=10,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_config|resetstat:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_client|setinfo:calls=2,usec=1,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_subscribe:calls=3,usec=1,usec_per_call=0.33,rejected_calls=0,failed_calls=0\r\n";
        let c = parse_commandstats(text);
        assert_eq!(c.sent_total(), 25);
        assert_eq!(c.sent["evalsha"], 20);
        assert_eq!(c.data["hincrby"], 20);
        assert!(!c.sent.contains_key("config|resetstat"));
    }
}
