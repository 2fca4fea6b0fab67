//! Results of a run and how they are written: a table on stdout, `BENCHMARKS.md`, and the raw
//! samples as CSV.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::drive::Commands;
use crate::stats::median;

/// Which way is better for a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
}

/// A target on the Rust figure: its text and whether it was met.
#[derive(Debug, Clone)]
pub struct Target {
    pub text: String,
    pub met: bool,
}

/// One line of the results table: medians over the repetitions.
#[derive(Debug, Clone)]
pub struct Row {
    pub scenario: &'static str,
    pub metric: String,
    pub unit: &'static str,
    pub better: Better,
    pub rust: Option<f64>,
    pub java: Option<f64>,
    /// The server's limit measured in the same run (redis-benchmark), or the ideal count.
    pub ceiling: Option<f64>,
    /// The bare client (one redis-rs connection, the same scripts) in the same run.
    pub bare: Option<f64>,
    pub target: Option<Target>,
}

impl Row {
    /// Rust / Redisson.
    pub fn vs_java(&self) -> Option<f64> {
        ratio_of(self.rust?, self.java?)
    }

    /// Rust / ceiling.
    pub fn vs_ceiling(&self) -> Option<f64> {
        ratio_of(self.rust?, self.ceiling?)
    }

    /// Rust / the bare client.
    pub fn vs_bare(&self) -> Option<f64> {
        ratio_of(self.rust?, self.bare?)
    }

    /// Whether Rust is at least as good as Redisson on this figure.
    pub fn rust_ahead(&self) -> Option<bool> {
        let (r, j) = (self.rust?, self.java?);
        Some(match self.better {
            Better::Lower => r <= j,
            Better::Higher => r >= j,
        })
    }
}

/// `a / b`, or `None` when `b` is 0.
fn ratio_of(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

/// One repetition's figure, for the CSV.
#[derive(Debug, Clone)]
pub struct Sample {
    pub scenario: &'static str,
    pub metric: String,
    pub who: &'static str,
    pub rep: usize,
    pub value: f64,
}

/// Commands per operation for one situation, per implementation.
#[derive(Debug, Clone, Default)]
pub struct CommandCounts {
    pub label: String,
    /// Per implementation (`rust`, `java`): commands summed over repetitions, and operations.
    pub by_impl: BTreeMap<&'static str, (Commands, u64)>,
}

impl CommandCounts {
    pub fn add(&mut self, who: &'static str, commands: &Commands, ops: u64) {
        let entry = self.by_impl.entry(who).or_default();
        for (name, calls) in &commands.sent {
            *entry.0.sent.entry(name.clone()).or_default() += calls;
        }
        for (name, calls) in &commands.data {
            *entry.0.data.entry(name.clone()).or_default() += calls;
        }
        entry.1 += ops;
    }

    /// Client-sent commands per operation.
    pub fn per_op(&self, who: &str) -> Option<f64> {
        let (c, ops) = self.by_impl.get(who)?;
        (*ops > 0).then(|| c.sent_total() as f64 / *ops as f64)
    }
}

/// One `redis-benchmark` figure (median over repetitions).
#[derive(Debug, Clone)]
pub struct CeilingLine {
    pub what: String,
    pub clients: usize,
    pub pipeline: usize,
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// Everything a run found.
#[derive(Debug, Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub samples: Vec<Sample>,
    pub ceilings: Vec<CeilingLine>,
    pub commands: Vec<CommandCounts>,
    /// (scenario, reason)
    pub not_run: Vec<(String, String)>,
    /// Free-form findings, one line each.
    pub notes: Vec<String>,
    /// S3 handoff latencies (µs) across 2 processes, all repetitions, per implementation.
    pub handoffs: BTreeMap<&'static str, Vec<f64>>,
    /// Round trip (redis-benchmark PING p50 at one connection, µs), median.
    pub rtt_us: Option<f64>,
    /// Whether targets are judged (not in quick mode, whose counts are too small).
    pub judge: bool,
    /// The scale tables of S13–S15 (Markdown, one per scenario).
    pub scale: Vec<String>,
}

impl Report {
    /// Records one repetition's figure.
    pub fn sample(
        &mut self,
        scenario: &'static str,
        metric: &str,
        who: &'static str,
        rep: usize,
        value: f64,
    ) {
        self.samples.push(Sample {
            scenario,
            metric: metric.to_owned(),
            who,
            rep,
            value,
        });
    }

    /// The median of the samples recorded for (scenario, metric, who).
    pub fn median_of(&self, scenario: &str, metric: &str, who: &str) -> Option<f64> {
        let values: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.scenario == scenario && s.metric == metric && s.who == who)
            .map(|s| s.value)
            .collect();
        median(&values)
    }

    /// A row from the recorded samples of `metric` (`rust`, `java`, `ceiling`, `bare`).
    pub fn row(
        &mut self,
        scenario: &'static str,
        metric: &str,
        unit: &'static str,
        better: Better,
    ) -> &mut Row {
        let row = Row {
            scenario,
            metric: metric.to_owned(),
            unit,
            better,
            rust: self.median_of(scenario, metric, "rust"),
            java: self.median_of(scenario, metric, "java"),
            ceiling: self.median_of(scenario, metric, "ceiling"),
            bare: self.median_of(scenario, metric, "bare"),
            target: None,
        };
        self.rows.push(row);
        self.rows.last_mut().expect("just pushed")
    }

    /// The raw samples as CSV.
    pub fn csv(&self) -> String {
        let mut out = String::from("scenario,metric,who,rep,value\n");
        for s in &self.samples {
            let _ = writeln!(
                out,
                "{},\"{}\",{},{},{}",
                s.scenario,
                s.metric.replace('"', "'"),
                s.who,
                s.rep,
                s.value
            );
        }
        out
    }

    /// The results table in Markdown.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| | figure | Rust | Redisson | ceiling | bare | Rust/Redisson | Rust/ceiling | Rust/bare | target (on Rust) | Rust ≥ Redisson |\n\
             |---|---|--:|--:|--:|--:|--:|--:|--:|---|:-:|\n",
        );
        for r in &self.rows {
            let target = match &r.target {
                Some(t) if !self.judge => format!("not judged (quick): {}", t.text),
                Some(t) => format!("{} {}", if t.met { "met:" } else { "**missed**:" }, t.text),
                None => String::new(),
            };
            let ahead = match r.rust_ahead() {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "",
            };
            let _ = writeln!(
                out,
                "| {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.scenario,
                r.metric,
                r.unit,
                number(r.rust),
                number(r.java),
                number(r.ceiling),
                number(r.bare),
                ratio(r.vs_java()),
                ratio(r.vs_ceiling()),
                ratio(r.vs_bare()),
                target,
                ahead
            );
        }
        out
    }

    /// Commands per operation, per command name.
    pub fn commands_table(&self) -> String {
        let mut out = String::from(
            "| situation | impl | client-sent per op | by command (per op) | inside scripts and data (per op) |\n\
             |---|---|--:|---|---|\n",
        );
        for c in &self.commands {
            for (who, (commands, ops)) in &c.by_impl {
                let per = |m: &BTreeMap<String, u64>| {
                    m.iter()
                        .map(|(n, calls)| {
                            format!("{} {:.3}", n.to_uppercase(), *calls as f64 / *ops as f64)
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} |",
                    c.label,
                    who_name(who),
                    number(c.per_op(who)),
                    per(&commands.sent),
                    per(&commands.data)
                );
            }
        }
        out
    }

    /// The redis-benchmark figures: medians over the repetitions of each configuration.
    pub fn ceiling_table(&self) -> String {
        let mut out = String::from(
            "| command | -c | -P | runs | requests/s | p50 (µs) | p99 (µs) |\n|---|--:|--:|--:|--:|--:|--:|\n",
        );
        let mut seen = Vec::new();
        for c in &self.ceilings {
            let key = (&c.what, c.clients, c.pipeline);
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let same: Vec<&CeilingLine> = self
                .ceilings
                .iter()
                .filter(|o| (&o.what, o.clients, o.pipeline) == key)
                .collect();
            let med = |f: fn(&CeilingLine) -> f64| {
                median(&same.iter().map(|c| f(c)).collect::<Vec<_>>()).unwrap_or(0.0)
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.0} | {:.0} | {:.0} |",
                c.what,
                c.clients,
                c.pipeline,
                same.len(),
                med(|c| c.rps),
                med(|c| c.p50_us),
                med(|c| c.p99_us)
            );
        }
        out
    }
}

/// `rust` → `Rust`, `java` → `Redisson`.
pub fn who_name(who: &str) -> &str {
    match who {
        "rust" => "Rust",
        "java" => "Redisson",
        other => other,
    }
}

/// A figure with sensible precision; `–` when absent.
pub fn number(value: Option<f64>) -> String {
    match value {
        None => "–".into(),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "–".into(), |v| format!("{v:.2}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_from_samples() {
        let mut report = Report::default();
        for (rep, (r, j)) in [(100.0, 200.0), (120.0, 180.0), (110.0, 260.0)]
            .into_iter()
            .enumerate()
        {
            report.sample("S1", "p50", "rust", rep, r);
            report.sample("S1", "p50", "java", rep, j);
        }
        report.sample("S1", "p50", "ceiling", 0, 100.0);
        report.sample("S1", "p50", "bare", 0, 88.0);
        let row = report.row("S1", "p50", "µs", Better::Lower).clone();
        assert_eq!(
            (row.rust, row.java, row.ceiling, row.bare),
            (Some(110.0), Some(200.0), Some(100.0), Some(88.0))
        );
        assert_eq!(row.vs_java(), Some(0.55));
        assert_eq!(row.vs_bare(), Some(1.25));
        assert_eq!(row.rust_ahead(), Some(true));
        assert!(
            report
                .table()
                .contains("| S1 | p50 (µs) | 110 | 200 | 100 | 88.0 | 0.55 | 1.10 | 1.25 |")
        );
    }
}
