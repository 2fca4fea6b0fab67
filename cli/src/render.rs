//! How a snapshot is printed: a table for people, one JSON object for programs, one line for
//! `list`.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use redisson_sync::{
    Ttl,
    inspect::{Holder, Snapshot, StructureKind},
};
use serde::Serialize;

/// This host's clock in epoch milliseconds (the clock of the fair lock's deadlines).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `-2`, `-1` or the milliseconds left, as `PTTL` says.
fn ttl_ms(ttl: Ttl) -> i64 {
    ttl.as_redis_millis()
}

/// A TTL for people: `- (no key)`, `persistent (no expiry)`, `29.873 s`.
pub(crate) fn ttl_text(ttl: Ttl) -> String {
    match ttl {
        Ttl::Absent => "- (no key)".to_owned(),
        Ttl::Persistent => "persistent (no expiry)".to_owned(),
        Ttl::Remaining(d) => format!("{:.3} s", d.as_secs_f64()),
    }
}

/// An epoch-ms instant relative to now: `in 12.345 s`, `3.000 s ago`.
fn relative(at_ms: i64) -> String {
    let delta = at_ms - now_ms();
    if delta >= 0 {
        format!("in {:.3} s", delta as f64 / 1000.0)
    } else {
        format!("{:.3} s ago", -delta as f64 / 1000.0)
    }
}

/// A holder (or waiter) for one line: `<client id>:<owner>` as stored.
pub(crate) fn holder_label(h: &Holder) -> String {
    let mut s = h.field.clone();
    if let Some(mode) = h.mode {
        let _ = write!(s, " ({mode} x{})", h.count);
    } else {
        let _ = write!(s, " (x{})", h.count);
    }
    s
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// The kind, with a word on how it was told.
fn kind_text(s: &Snapshot) -> String {
    let mut text = s.kind.to_string();
    if let Some(mode) = s.mode {
        let _ = write!(text, " (mode {mode})");
    }
    if s.kind_inferred {
        text.push_str(match s.kind {
            StructureKind::Latch => {
                " (a bare integer, read as a latch: waiters listen on the latch's channel)"
            }
            _ => " (a bare integer: a semaphore, or a latch nobody waits on; --as latch reads it as one)",
        });
    }
    text
}

/// Columns padded to their widest cell, two spaces apart, each line indented by two.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: Vec<&str>| {
        let mut l = String::from("  ");
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                let _ = write!(l, "{cell:<w$}  ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// The snapshot as a table.
pub(crate) fn text(s: &Snapshot) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "name:     {}", s.name);
    let _ = writeln!(out, "kind:     {}", kind_text(s));
    let _ = writeln!(out, "ttl:      {}", ttl_text(s.ttl));
    if let Some(token) = s.token {
        let _ = writeln!(out, "token:    {token}");
    }
    if let Some(permits) = s.permits {
        let _ = writeln!(out, "permits:  {permits} available");
    }
    if let Some(count) = s.count {
        let _ = writeln!(out, "count:    {count}");
    }
    if s.kind.is_lock() {
        let _ = writeln!(out, "holders:  {}", s.holders.len());
        if !s.holders.is_empty() {
            let rw = s.kind == StructureKind::Rw;
            let mut header = vec!["CLIENT ID", "OWNER", "COUNT"];
            if rw {
                header.push("MODE");
            }
            let rows: Vec<Vec<String>> = s
                .holders
                .iter()
                .map(|h| {
                    let mut row = vec![
                        h.client_id.clone().unwrap_or_else(|| h.field.clone()),
                        opt(h.owner),
                        h.count.to_string(),
                    ];
                    if rw {
                        row.push(opt(h.mode));
                    }
                    row
                })
                .collect();
            table(&mut out, &header, &rows);
        }
    }
    if s.kind == StructureKind::Fair {
        let _ = writeln!(out, "queue:    {} waiting", s.queue_len);
        if !s.queue.is_empty() {
            let rows: Vec<Vec<String>> = s
                .queue
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    vec![
                        (i + 1).to_string(),
                        w.client_id.clone().unwrap_or_else(|| w.field.clone()),
                        opt(w.owner),
                        w.deadline_ms.map_or_else(
                            || "- (none)".to_owned(),
                            |d| format!("{d} ({})", relative(d)),
                        ),
                    ]
                })
                .collect();
            table(
                &mut out,
                &["#", "CLIENT ID", "OWNER", "DEADLINE (EPOCH MS)"],
                &rows,
            );
        }
    }
    if s.kind == StructureKind::Rw {
        let _ = writeln!(
            out,
            "markers:  {} read hold timeout key(s)",
            s.read_markers.len()
        );
        if !s.read_markers.is_empty() {
            let rows: Vec<Vec<String>> = s
                .read_markers
                .iter()
                .map(|m| vec![m.key.clone(), ttl_text(m.ttl)])
                .collect();
            table(&mut out, &["KEY", "TTL"], &rows);
        }
    }
    if s.kind == StructureKind::PermitSemaphore {
        let _ = writeln!(out, "acquired: {}", s.acquired_len);
        if !s.acquired.is_empty() {
            let rows: Vec<Vec<String>> = s
                .acquired
                .iter()
                .map(|p| {
                    vec![
                        p.id.clone(),
                        p.expires_ms.map_or_else(
                            || "never (no lease)".to_owned(),
                            |e| format!("{e} ({})", relative(e)),
                        ),
                    ]
                })
                .collect();
            table(&mut out, &["PERMIT ID", "EXPIRES (EPOCH MS)"], &rows);
        }
    }
    if s.truncated {
        out.push_str("(listings cut at the limit)\n");
    }
    out
}

/// `client_id` and `owner` of a holder or waiter: the parsed parts, or the raw field as
/// `client_id` (and a null owner) when it does not have the `<uuid>:<decimal>` form.
fn who(field: &str, client_id: Option<&String>, owner: Option<u64>) -> (String, Option<u64>) {
    match client_id {
        Some(id) => (id.clone(), owner),
        None => (field.to_owned(), None),
    }
}

/// The JSON object of a snapshot, fields in this order.
#[derive(Serialize)]
struct JsonSnapshot<'a> {
    name: &'a str,
    kind: &'static str,
    ttl_ms: i64,
    holders: Vec<JsonHolder>,
    queue: Vec<JsonWaiter>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    permits: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    markers: Option<Vec<JsonMarker<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    acquired: Option<Vec<JsonPermit<'a>>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    kind_inferred: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

#[derive(Serialize)]
struct JsonHolder {
    client_id: String,
    owner: Option<u64>,
    count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'static str>,
}

#[derive(Serialize)]
struct JsonWaiter {
    client_id: String,
    owner: Option<u64>,
    deadline_ms: Option<i64>,
}

#[derive(Serialize)]
struct JsonMarker<'a> {
    key: &'a str,
    holder: &'a str,
    index: u64,
    ttl_ms: i64,
}

#[derive(Serialize)]
struct JsonPermit<'a> {
    id: &'a str,
    expires_ms: Option<i64>,
}

/// The snapshot as one JSON object: `name`, `kind`, `ttl_ms`, `holders`, `queue`, and when
/// they apply `token`, `permits`, `count`, `mode`, `markers`, `acquired`, `kind_inferred`,
/// `truncated`.
pub(crate) fn json(s: &Snapshot) -> String {
    let rw = s.kind == StructureKind::Rw;
    let holders = s
        .holders
        .iter()
        .map(|h| {
            let bare = h.field.strip_suffix(":write").filter(|_| rw);
            let (client_id, owner) = who(bare.unwrap_or(&h.field), h.client_id.as_ref(), h.owner);
            JsonHolder {
                client_id,
                owner,
                count: h.count,
                mode: h.mode.map(|m| m.as_str()),
            }
        })
        .collect();
    let queue = s
        .queue
        .iter()
        .map(|w| {
            let (client_id, owner) = who(&w.field, w.client_id.as_ref(), w.owner);
            JsonWaiter {
                client_id,
                owner,
                deadline_ms: w.deadline_ms,
            }
        })
        .collect();
    let markers = rw.then(|| {
        s.read_markers
            .iter()
            .map(|m| JsonMarker {
                key: &m.key,
                holder: &m.holder,
                index: m.index,
                ttl_ms: ttl_ms(m.ttl),
            })
            .collect()
    });
    let acquired = (s.kind == StructureKind::PermitSemaphore).then(|| {
        s.acquired
            .iter()
            .map(|p| JsonPermit {
                id: &p.id,
                expires_ms: p.expires_ms,
            })
            .collect()
    });
    let object = JsonSnapshot {
        name: &s.name,
        kind: s.kind.as_str(),
        ttl_ms: ttl_ms(s.ttl),
        holders,
        queue,
        token: s.token,
        permits: s.permits,
        count: s.count,
        mode: s.mode.map(|m| m.as_str()),
        markers,
        acquired,
        kind_inferred: s.kind_inferred,
        truncated: s.truncated,
    };
    // Strings, integers and nulls only: serializing cannot fail.
    serde_json::to_string(&object).expect("a snapshot serializes")
}

/// The snapshot on one line, for `list`: kind, name, TTL and what it holds.
pub(crate) fn line(s: &Snapshot) -> String {
    let mut out = format!("{:<16} {}", s.kind.as_str(), s.name);
    let _ = write!(out, "  ttl={}", ttl_ms(s.ttl));
    if s.kind.is_lock() {
        let _ = write!(out, "  holders={}", s.holders.len());
        if let Some(mode) = s.mode {
            let _ = write!(out, "  mode={mode}");
        }
    }
    if s.kind == StructureKind::Fair {
        let _ = write!(out, "  queue={}", s.queue_len);
    }
    if let Some(token) = s.token {
        let _ = write!(out, "  token={token}");
    }
    if let Some(permits) = s.permits {
        let _ = write!(out, "  permits={permits}");
    }
    if s.kind == StructureKind::PermitSemaphore {
        let _ = write!(out, "  acquired={}", s.acquired_len);
    }
    if let Some(count) = s.count {
        let _ = write!(out, "  count={count}");
    }
    out
}
