//! The server's own limit: `redis-benchmark` running the crate's acquire and release scripts
//! (EVALSHA of the exact text of `lua/lock/acquire.lua` and `lua/lock/unlock.lua`).
//!
//! - Acquire runs on a fresh random key per request (`rl:__rand_int__`, `-r 1000000`), so it
//!   takes the "create the hash" branch (`exists` → `hincrby` → `pexpire`), as the first hold
//!   of a free lock does.
//! - Release runs on one pre-created hash `rl:held` whose holder field has a huge count, so
//!   every request takes the "hold released, others remain" branch (`hexists` → `hincrby -1`
//!   → `pexpire`). A full release (`hexists` → `hincrby -1` → `del` → `PUBLISH` to a channel
//!   without subscribers) costs about the same, but cannot be repeated on one key without
//!   re-acquiring it, which would measure a pair instead.
//!
//! The ceiling for lock+unlock pairs is the harmonic combination `1 / (1/R_lock + 1/R_unlock)`.

use std::path::Path;
use std::process::Command;

use redis::Connection;

/// A holder field as either implementation writes it: `<client UUID>:<thread or owner id>`.
pub const FIELD: &str = "6b3f8c1e-2d4a-4c7b-9e15-0a8d7f3c2b91:1";
/// The key every release request of [`unlock_args`] works on.
const HELD_KEY: &str = "rl:held";

/// The SHAs of the two scripts, loaded into the server.
#[derive(Debug, Clone)]
pub struct Scripts {
    pub acquire: String,
    pub unlock: String,
}

/// Loads `lua/lock/acquire.lua` and `lua/lock/unlock.lua` (from the repository at `root`)
/// with `SCRIPT LOAD`, byte for byte, so the SHAs are the ones the crate sends.
pub fn load(con: &mut Connection, root: &Path) -> Result<Scripts, String> {
    let load = |con: &mut Connection, file: &str| -> Result<String, String> {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(text)
            .query(con)
            .map_err(|e| format!("SCRIPT LOAD {file}: {e}"))
    };
    Ok(Scripts {
        acquire: load(con, "lua/lock/acquire.lua")?,
        unlock: load(con, "lua/lock/unlock.lua")?,
    })
}

/// `EVALSHA <acquire> 1 rl:__rand_int__ 30000 <field>`: a first hold on a fresh key, with the
/// 30 s watchdog lease.
pub fn acquire_args(scripts: &Scripts) -> Vec<String> {
    [
        "EVALSHA",
        &scripts.acquire,
        "1",
        "rl:__rand_int__",
        "30000",
        FIELD,
    ]
    .map(String::from)
    .to_vec()
}

/// `EVALSHA <unlock> 2 rl:held redisson_lock__channel:{rl:held} 0 30000 <field> PUBLISH`.
pub fn unlock_args(scripts: &Scripts) -> Vec<String> {
    let channel = format!("redisson_lock__channel:{{{HELD_KEY}}}");
    [
        "EVALSHA",
        &scripts.unlock,
        "2",
        HELD_KEY,
        &channel,
        "0",
        "30000",
        FIELD,
        "PUBLISH",
    ]
    .map(String::from)
    .to_vec()
}

/// Empties the database and creates the held hash [`unlock_args`] releases from.
pub fn reset(con: &mut Connection) -> Result<(), String> {
    redis::cmd("FLUSHALL")
        .query::<()>(con)
        .and_then(|()| {
            redis::cmd("HSET")
                .arg(HELD_KEY)
                .arg(FIELD)
                .arg(1_000_000_000_000_i64)
                .query::<()>(con)
        })
        .map_err(|e| format!("redis: {e}"))
}

/// One `redis-benchmark` result.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    /// Requests per second.
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// Runs `redis-benchmark -p port -c clients -P pipeline -n requests -r 1000000 --csv <args>`.
pub fn run(
    port: u16,
    clients: usize,
    pipeline: usize,
    requests: usize,
    args: &[String],
) -> Result<Run, String> {
    let output = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
        .args(["-n", &requests.to_string(), "-r", "1000000", "--csv"])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run redis-benchmark (package redis-tools): {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "redis-benchmark {}: {}\n{}",
            output.status,
            stdout.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    parse_csv(&stdout).ok_or_else(|| format!("redis-benchmark: unexpected output: {stdout}"))
}

/// Reads the `--csv` output: a header (`"test","rps",…,"p50_latency_ms",…`) and one row.
fn parse_csv(text: &str) -> Option<Run> {
    let rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| l.starts_with('"'))
        .map(|l| {
            l.trim()
                .trim_matches('"')
                .split("\",\"")
                .map(str::to_owned)
                .collect()
        })
        .collect();
    let header = rows
        .iter()
        .find(|r| r.first().is_some_and(|c| c == "test"))?;
    let row = rows
        .iter()
        .rev()
        .find(|r| r.first() != Some(&"test".into()))?;
    let col = |name: &str| -> Option<f64> {
        let i = header.iter().position(|c| c == name)?;
        row.get(i)?.parse().ok()
    };
    Some(Run {
        rps: col("rps")?,
        p50_us: col("p50_latency_ms")? * 1000.0,
        p99_us: col("p99_latency_ms")? * 1000.0,
    })
}

/// Lock+unlock pairs per second when each pair costs one request of each script.
pub fn pair_rate(lock_rps: f64, unlock_rps: f64) -> f64 {
    1.0 / (1.0 / lock_rps + 1.0 / unlock_rps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis_benchmark_csv() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
                    \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                    \"EVALSHA abc 1 rl:__rand_int__ 30000 f:1\",\"5078.00\",\"0.190\",\"0.080\",\
                    \"0.151\",\"0.300\",\"0.511\",\"2.000\"\n";
        let run = parse_csv(text).unwrap();
        assert_eq!(run.rps, 5078.0);
        assert!((run.p50_us - 151.0).abs() < 1e-9);
        assert!((run.p99_us - 511.0).abs() < 1e-9);
        assert!(parse_csv("garbage").is_none());
    }

    #[test]
    fn harmonic_pair_rate() {
        assert!((pair_rate(100.0, 100.0) - 50.0).abs() < 1e-9);
    }
}
