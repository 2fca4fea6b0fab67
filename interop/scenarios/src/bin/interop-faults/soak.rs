//! The soak (`scripts/soak`, `interop-faults --soak`): the fault suite's load on one server,
//! paced, with the nemesis at a low rate, sampled every `--sample` seconds for what leaks show
//! in: each agent's resident memory and open connections (through its fault proxy), the Rust
//! agents' `Client::stats()` (channels, waiters, renewed holds, record slots, background tasks;
//! the agent's `stats` op), the server's clients and pub/sub channels, and per window the
//! acquisition latency of the holds recorded. Writes `soak.csv` and `soak.svg` and judges the
//! Rust side's growth ([`judge`]).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use interop_scenarios::agent::Agent;
use serde_json::{Value, json};
use testkit::history::Hold;
use testkit::{FaultProxy, RedisServer};

/// The Rust agents' pool (the crate's default `pool_size`), their pub/sub connection and one
/// being replaced after a fault: what their open connections may never exceed.
pub const RUST_CONNECTIONS_BOUND: u64 = 16 + 1 + 1;
/// The record of holds keeps a slot only while a hold, an operation or a wait on it lives (0
/// once the load ends): the soak's agents have far fewer of those at once, and a slot leaked
/// per hold would cross this within a minute.
pub const RECORD_SLOTS_BOUND: u64 = 16 * 256;
/// Resident memory may grow by this factor plus [`RSS_SLACK_KB`] from the second quarter of the
/// run to the last (medians): see RELIABILITY.md, "Soak".
pub const RSS_FACTOR: f64 = 1.25;
pub const RSS_SLACK_KB: f64 = 4096.0;

/// The Rust agents' stats fields, in the CSV's order.
const STATS: [&str; 8] = [
    "channels",
    "waiters",
    "observers",
    "watched_holds",
    "record_slots",
    "counted_holds",
    "background_tasks",
    "agent_holds",
];

/// What one agent showed at one sample (`None`: could not be read, e.g. the agent was paused).
#[derive(Clone, Debug, Default)]
pub struct AgentSample {
    pub rss_kb: Option<u64>,
    pub connections: Option<u64>,
    /// The Rust agents' `stats` reply.
    pub stats: Option<Value>,
}

#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// Seconds since the start.
    pub at_s: f64,
    pub at_ns: u64,
    pub agents: Vec<AgentSample>,
    /// `CLIENT LIST` lines (the sampler's own connection included), pub/sub channels with
    /// subscribers (`PUBSUB CHANNELS` + `PUBSUB SHARDCHANNELS`), `used_memory`.
    pub server_clients: Option<u64>,
    pub server_channels: Option<u64>,
    pub used_memory_kb: Option<u64>,
}

/// Resident memory of `pid` in KiB (`VmRSS`).
fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The Rust agent's `stats`, waiting at most 5 s (a paused agent answers later; that reply is
/// never read).
fn stats(agent: &Agent) -> Option<Value> {
    let id = agent.send(json!({"op": "stats"})).ok()?;
    let reply = agent.wait(id, Duration::from_secs(5)).ok()?;
    (reply["ok"] == true).then_some(reply)
}

/// Takes one sample.
pub fn sample(
    agents: &[Agent],
    proxies: &[FaultProxy],
    server: &Mutex<RedisServer>,
    started: Instant,
    now_ns: u64,
) -> Sample {
    let at_s = started.elapsed().as_secs_f64();
    let agents = agents
        .iter()
        .enumerate()
        .map(|(i, agent)| AgentSample {
            rss_kb: agent.pid().and_then(rss_kb),
            connections: proxies.get(i).map(FaultProxy::open_connections),
            stats: agent
                .label
                .starts_with("rust")
                .then(|| stats(agent))
                .flatten(),
        })
        .collect();
    let url = server.lock().unwrap_or_else(|e| e.into_inner()).url();
    let mut s = Sample {
        at_s,
        at_ns: now_ns,
        agents,
        ..Sample::default()
    };
    let Ok(client) = redis::Client::open(url) else {
        return s;
    };
    let Ok(mut con) = client.get_connection_with_timeout(Duration::from_secs(2)) else {
        return s;
    };
    let _ = con.set_read_timeout(Some(Duration::from_secs(2)));
    let list: Option<String> = redis::cmd("CLIENT").arg("LIST").query(&mut con).ok();
    s.server_clients = list.map(|l| l.lines().count() as u64);
    let channels: Option<Vec<String>> = redis::cmd("PUBSUB").arg("CHANNELS").query(&mut con).ok();
    let shard: Vec<String> = redis::cmd("PUBSUB")
        .arg("SHARDCHANNELS")
        .query(&mut con)
        .unwrap_or_default();
    s.server_channels = channels.map(|c| (c.len() + shard.len()) as u64);
    let info: Option<String> = redis::cmd("INFO").arg("memory").query(&mut con).ok();
    s.used_memory_kb = info.and_then(|i| {
        i.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|b| b / 1024)
    });
    s
}

/// Samples every `every` until `stop`, bounded by the run's length.
pub fn sampler(
    agents: &[Agent],
    proxies: &[FaultProxy],
    server: &Mutex<RedisServer>,
    every: Duration,
    started: Instant,
    deadline: Instant,
    stop: &AtomicBool,
) -> Vec<Sample> {
    let now_ns = crate::now_ns;
    let mut samples = vec![sample(agents, proxies, server, started, now_ns())];
    let bound = 2 + deadline.saturating_duration_since(started).as_secs() / every.as_secs().max(1);
    let mut next = started + every;
    for _ in 0..bound {
        while Instant::now() < next {
            if stop.load(Ordering::Relaxed) {
                return samples;
            }
            std::thread::sleep(Duration::from_millis(100).min(next - Instant::now()));
        }
        samples.push(sample(agents, proxies, server, started, now_ns()));
        next += every;
    }
    samples
}

/// p50 and p99 of the acquisition latency (ms) of the holds acquired in each sample's window
/// (from the sample before it).
pub fn latencies(samples: &[Sample], holds: &[Hold]) -> Vec<Option<(f64, f64)>> {
    let mut acquired: Vec<(u64, u64)> = holds
        .iter()
        .filter(|h| h.acquired_ns > 0 && h.acquired_ns >= h.requested_ns)
        .map(|h| (h.acquired_ns, h.acquired_ns - h.requested_ns))
        .collect();
    acquired.sort_unstable();
    let mut from = 0;
    samples
        .iter()
        .map(|s| {
            let mut window: Vec<u64> = acquired
                .iter()
                .filter(|(at, _)| (from..s.at_ns).contains(at))
                .map(|(_, latency)| *latency)
                .collect();
            from = s.at_ns;
            if window.is_empty() {
                return None;
            }
            window.sort_unstable();
            let pick = |q: f64| {
                let i = ((window.len() - 1) as f64 * q).round() as usize;
                window[i] as f64 / 1e6
            };
            Some((pick(0.50), pick(0.99)))
        })
        .collect()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// `soak.csv`: one row per sample.
pub fn csv(labels: &[String], samples: &[Sample], latency: &[Option<(f64, f64)>]) -> String {
    let mut header = vec!["at_s".to_string()];
    for label in labels {
        header.push(format!("{label} rss_kb"));
        header.push(format!("{label} connections"));
        if label.starts_with("rust") {
            header.extend(STATS.iter().map(|f| format!("{label} {f}")));
        }
    }
    header.extend(
        [
            "server clients",
            "server channels",
            "server used_memory_kb",
            "acquire p50 ms",
            "acquire p99 ms",
        ]
        .map(String::from),
    );
    let mut text = header.join(",") + "\n";
    for (s, lat) in samples.iter().zip(latency) {
        let mut row = vec![format!("{:.1}", s.at_s)];
        for (label, a) in labels.iter().zip(&s.agents) {
            row.push(opt(a.rss_kb));
            row.push(opt(a.connections));
            if label.starts_with("rust") {
                for f in STATS {
                    row.push(opt(a.stats.as_ref().and_then(|v| v[f].as_u64())));
                }
            }
        }
        row.push(opt(s.server_clients));
        row.push(opt(s.server_channels));
        row.push(opt(s.used_memory_kb));
        row.push(opt(lat.map(|l| format!("{:.2}", l.0))));
        row.push(opt(lat.map(|l| format!("{:.2}", l.1))));
        text += &(row.join(",") + "\n");
    }
    text
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// The growth bounds on the Rust side (the Java agents are shown, not judged: Redisson's pools
/// and the JVM's heap grow by their own rules). Returns the failures, and the lines of the
/// report.
pub fn judge(
    labels: &[String],
    samples: &[Sample],
    end: &[Option<Value>],
) -> (Vec<String>, String) {
    let mut failures = Vec::new();
    let mut text = String::new();
    let n = samples.len();
    for (i, label) in labels.iter().enumerate() {
        let rss: Vec<(usize, f64)> = samples
            .iter()
            .enumerate()
            .filter_map(|(k, s)| s.agents[i].rss_kb.map(|r| (k, r as f64)))
            .collect();
        let quarter = |q: usize| -> Option<f64> {
            median(
                rss.iter()
                    .filter(|(k, _)| k * 4 / n.max(1) == q)
                    .map(|(_, r)| *r)
                    .collect(),
            )
        };
        let (second, last) = (quarter(1), quarter(3));
        let conns_max = samples.iter().filter_map(|s| s.agents[i].connections).max();
        let _ = writeln!(
            text,
            "{label}: RSS {} -> {} MiB (medians of the second and last quarter), connections at most {}",
            second.map_or("?".into(), |v| format!("{:.1}", v / 1024.0)),
            last.map_or("?".into(), |v| format!("{:.1}", v / 1024.0)),
            opt(conns_max)
        );
        if !label.starts_with("rust") {
            continue;
        }
        if let (Some(a), Some(b)) = (second, last)
            && b > a * RSS_FACTOR + RSS_SLACK_KB
        {
            failures.push(format!(
                "{label}: resident memory grew from {:.1} to {:.1} MiB (bound: x{RSS_FACTOR} + {} MiB)",
                a / 1024.0,
                b / 1024.0,
                RSS_SLACK_KB / 1024.0
            ));
        }
        if let Some(c) = conns_max
            && c > RUST_CONNECTIONS_BOUND
        {
            failures.push(format!(
                "{label}: {c} open connections (bound {RUST_CONNECTIONS_BOUND})"
            ));
        }
        let slots = samples
            .iter()
            .filter_map(|s| s.agents[i].stats.as_ref()?["record_slots"].as_u64())
            .max()
            .unwrap_or(0);
        if slots > RECORD_SLOTS_BOUND {
            failures.push(format!(
                "{label}: {slots} record slots (bound {RECORD_SLOTS_BOUND})"
            ));
        }
        match end.get(i).cloned().flatten() {
            Some(stats) => {
                let _ = writeln!(text, "{label} after the load: {}", stats_line(&stats));
                for f in [
                    "channels",
                    "waiters",
                    "observers",
                    "watched_holds",
                    "record_slots",
                    "counted_holds",
                    "background_tasks",
                ] {
                    let v = stats[f].as_u64().unwrap_or(u64::MAX);
                    if v != 0 {
                        failures.push(format!("{label}: {f} = {v} after the load ended"));
                    }
                }
            }
            None => failures.push(format!("{label}: no stats after the load")),
        }
    }
    (failures, text)
}

pub fn stats_line(stats: &Value) -> String {
    STATS
        .iter()
        .map(|f| format!("{f} {}", opt(stats[*f].as_u64())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `true` once the Rust agent's client holds nothing: no channel, waiter, renewal, counted
/// hold or background task.
pub fn idle(stats: &Value) -> bool {
    [
        "channels",
        "waiters",
        "observers",
        "watched_holds",
        "counted_holds",
        "background_tasks",
    ]
    .iter()
    .all(|f| stats[*f].as_u64() == Some(0))
}

/// Waits up to `patience` for the Rust agents' clients to settle after the load (releases in
/// the background, unsubscriptions); returns their last stats.
pub fn settle(agents: &[Agent], patience: Duration) -> Vec<Option<Value>> {
    let until = Instant::now() + patience;
    loop {
        let all: Vec<Option<Value>> = agents
            .iter()
            .map(|a| a.label.starts_with("rust").then(|| stats(a)).flatten())
            .collect();
        let settled = agents
            .iter()
            .zip(&all)
            .all(|(a, s)| !a.label.starts_with("rust") || s.as_ref().is_some_and(idle));
        if settled || Instant::now() >= until {
            return all;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `soak.svg`: four panels over time: resident memory per agent, open connections per
/// agent, the Rust agents' registries, acquisition latency.
pub fn svg(
    labels: &[String],
    samples: &[Sample],
    latency: &[Option<(f64, f64)>],
    title: &str,
) -> String {
    type Series = (String, Vec<(f64, f64)>);
    let xs: Vec<f64> = samples.iter().map(|s| s.at_s / 60.0).collect();
    let series = |f: &dyn Fn(&Sample, usize) -> Option<f64>, label: &str, i: usize| -> Series {
        (
            label.to_string(),
            samples
                .iter()
                .enumerate()
                .filter_map(|(k, s)| f(s, i).map(|y| (xs[k], y)))
                .collect(),
        )
    };
    let mut panels: Vec<(&str, Vec<Series>)> = Vec::new();
    panels.push((
        "resident memory (MiB)",
        labels
            .iter()
            .enumerate()
            .map(|(i, l)| series(&|s, i| s.agents[i].rss_kb.map(|v| v as f64 / 1024.0), l, i))
            .collect(),
    ));
    let mut conns: Vec<Series> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| series(&|s, i| s.agents[i].connections.map(|v| v as f64), l, i))
        .collect();
    conns.push(series(
        &|s, _| s.server_clients.map(|v| v as f64),
        "server: clients",
        0,
    ));
    conns.push(series(
        &|s, _| s.server_channels.map(|v| v as f64),
        "server: channels",
        0,
    ));
    panels.push(("connections and channels", conns));
    let mut registry = Vec::new();
    for (i, l) in labels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("rust"))
    {
        for f in [
            "waiters",
            "watched_holds",
            "record_slots",
            "background_tasks",
        ] {
            registry.push(series(
                &|s, i| s.agents[i].stats.as_ref()?[f].as_u64().map(|v| v as f64),
                &format!("{l} {f}"),
                i,
            ));
        }
    }
    panels.push(("Rust clients' registries (Client::stats)", registry));
    let lat = |q: usize| -> Vec<(f64, f64)> {
        latency
            .iter()
            .enumerate()
            .filter_map(|(k, l)| l.map(|l| (xs[k], if q == 0 { l.0 } else { l.1 })))
            .collect()
    };
    panels.push((
        "acquire latency per window (ms)",
        vec![("p50".into(), lat(0)), ("p99".into(), lat(1))],
    ));

    const COLORS: [&str; 10] = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
        "#bcbd22", "#17becf",
    ];
    let (w, ph, left, right, top) = (900.0, 220.0, 60.0, 250.0, 40.0);
    let height = top + panels.len() as f64 * (ph + 50.0);
    let x_max = xs.last().copied().unwrap_or(1.0).max(1e-9);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"20\" font-size=\"14\">{}</text>\n",
        escape(title)
    );
    for (p, (name, series)) in panels.iter().enumerate() {
        let y0 = top + p as f64 * (ph + 50.0) + 20.0;
        let pw = w - left - right;
        let y_max = series
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|(_, y)| *y))
            .fold(0.0_f64, f64::max)
            .max(1.0)
            * 1.1;
        let _ = writeln!(
            out,
            "<text x=\"{left}\" y=\"{}\" font-weight=\"bold\">{}</text>\n\
             <rect x=\"{left}\" y=\"{y0}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.0}</text>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.1} min</text>",
            y0 - 5.0,
            escape(name),
            left - 4.0,
            y0 + 10.0,
            y_max,
            left - 4.0,
            y0 + ph,
            left + pw,
            y0 + ph + 14.0,
            x_max
        );
        for (k, (label, pts)) in series.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            let points: Vec<String> = pts
                .iter()
                .map(|(x, y)| {
                    format!(
                        "{:.1},{:.1}",
                        left + x / x_max * pw,
                        y0 + ph - y / y_max * ph
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\n\
                 <text x=\"{}\" y=\"{}\" fill=\"{color}\">{}</text>",
                points.join(" "),
                left + pw + 8.0,
                y0 + 12.0 + k as f64 * 13.0,
                escape(label)
            );
        }
    }
    out + "</svg>\n"
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes the soak's files into `out` and returns the report's lines and failures.
pub fn finish(
    out: &Path,
    labels: &[String],
    samples: &[Sample],
    holds: &[Hold],
    end: &[Option<Value>],
    title: &str,
) -> Result<(Vec<String>, String), String> {
    let latency = latencies(samples, holds);
    std::fs::write(out.join("soak.csv"), csv(labels, samples, &latency))
        .map_err(|e| e.to_string())?;
    std::fs::write(out.join("soak.svg"), svg(labels, samples, &latency, title))
        .map_err(|e| e.to_string())?;
    let (failures, mut text) = judge(labels, samples, end);
    let lat: Vec<(f64, f64)> = latency.iter().flatten().copied().collect();
    if let (Some(first), Some(last)) = (lat.first(), lat.last()) {
        let _ = writeln!(
            text,
            "acquire latency p50/p99: first window {:.2}/{:.2} ms, last window {:.2}/{:.2} ms, worst p99 {:.2} ms",
            first.0,
            first.1,
            last.0,
            last.1,
            lat.iter().map(|l| l.1).fold(0.0, f64::max)
        );
    }
    let _ = writeln!(
        text,
        "{} samples; soak.csv and soak.svg written",
        samples.len()
    );
    Ok((failures, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(k: usize, rss_kb: u64, connections: u64, stats: Value) -> Sample {
        Sample {
            at_s: k as f64 * 10.0,
            at_ns: (k as u64 + 1) * 10_000_000_000,
            agents: vec![AgentSample {
                rss_kb: Some(rss_kb),
                connections: Some(connections),
                stats: Some(stats),
            }],
            ..Sample::default()
        }
    }

    fn quiet() -> Value {
        json!({"channels": 0, "waiters": 0, "observers": 0, "watched_holds": 0,
               "record_slots": 0, "counted_holds": 0, "background_tasks": 0, "agent_holds": 0})
    }

    #[test]
    fn a_flat_run_passes_and_growth_connections_and_leftovers_fail() {
        let labels = vec!["rust#1".to_string()];
        let flat: Vec<Sample> = (0..12)
            .map(|k| at(k, 20_000 + k as u64 * 10, 5, quiet()))
            .collect();
        let (failures, text) = judge(&labels, &flat, &[Some(quiet())]);
        assert!(failures.is_empty(), "{failures:?}");
        assert!(text.contains("connections at most 5"), "{text}");

        // 20 MiB to 40 MiB: beyond x1.25 + 4 MiB.
        let grown: Vec<Sample> = (0..12)
            .map(|k| at(k, 20_000 + k as u64 * 2_000, 5, quiet()))
            .collect();
        let (failures, _) = judge(&labels, &grown, &[Some(quiet())]);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("resident memory grew"), "{failures:?}");

        let mut busy = flat.clone();
        busy[7].agents[0].connections = Some(RUST_CONNECTIONS_BOUND + 1);
        let mut left = quiet();
        left["waiters"] = json!(1);
        left["record_slots"] = json!(2);
        let (failures, _) = judge(&labels, &busy, &[Some(left)]);
        assert_eq!(
            failures,
            [
                format!(
                    "rust#1: {} open connections (bound {RUST_CONNECTIONS_BOUND})",
                    RUST_CONNECTIONS_BOUND + 1
                ),
                "rust#1: waiters = 1 after the load ended".to_string(),
                "rust#1: record_slots = 2 after the load ended".to_string(),
            ]
        );
        let (failures, _) = judge(&labels, &flat, &[None]);
        assert_eq!(failures, ["rust#1: no stats after the load"]);
    }

    #[test]
    fn java_agents_are_shown_not_judged() {
        let labels = vec!["java#1".to_string()];
        let grown: Vec<Sample> = (0..12)
            .map(|k| at(k, 100_000 + k as u64 * 50_000, 90, Value::Null))
            .collect();
        let (failures, text) = judge(&labels, &grown, &[None]);
        assert!(failures.is_empty(), "{failures:?}");
        assert!(text.starts_with("java#1: RSS"), "{text}");
    }

    #[test]
    fn latencies_are_per_window() {
        let samples: Vec<Sample> = (0..3).map(|k| at(k, 1, 1, quiet())).collect();
        let hold = |requested_ns: u64, acquired_ns: u64| Hold {
            process: "rust#1".into(),
            crate_side: true,
            owner: 1,
            kind: "lock".into(),
            name: "n".into(),
            access: testkit::history::Access::Exclusive,
            requested_ns,
            acquired_ns,
            releasing_ns: acquired_ns,
            token: None,
            lost_ns: None,
            released_ok: true,
        };
        // Windows end at 10 s, 20 s and 30 s.
        let holds = vec![
            hold(5_000_000_000, 5_002_000_000),
            hold(12_000_000_000, 12_004_000_000),
            hold(13_000_000_000, 13_008_000_000),
        ];
        let lat = latencies(&samples, &holds);
        assert_eq!(lat, [Some((2.0, 2.0)), Some((8.0, 8.0)), None]);
    }
}
