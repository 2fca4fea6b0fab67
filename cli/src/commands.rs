//! The four commands: `inspect`, `list`, `watch`, `force-unlock`.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use std::fmt::Write as _;

use futures_util::{FutureExt, StreamExt};
use redisson_sync::redis;
use redisson_sync::{
    Error,
    events::{Event, EventKind, SeenBy},
    inspect::{CounterHint, HoldMode, Snapshot, StructureKind},
};

use crate::render;
use crate::{Failure, Result, Session};

/// `SCAN`'s `COUNT`.
const SCAN_COUNT: usize = 100;

/// The snapshot of `name`, or a clear error when the name holds something else.
async fn snapshot(session: &mut Session, name: &str, hint: CounterHint) -> Result<Snapshot> {
    match session.client.inspect(name).counter_hint(hint).await {
        Ok(s) => Ok(s),
        Err(Error::WrongType { key }) => Err(wrong_type(session, &key).await),
        Err(Error::Connection { source, .. }) => Err(Failure(format!(
            "cannot reach Redis at {}: {source}",
            session.place
        ))),
        Err(e) => Err(e.into()),
    }
}

/// "NAME holds a Redis list, not a Redisson ...", naming the type the server reports.
async fn wrong_type(session: &mut Session, key: &str) -> Failure {
    let kind: String = session
        .raw
        .query(redis::cmd("TYPE").arg(key))
        .await
        .unwrap_or_else(|_| "value of another type".to_owned());
    let what = match kind.as_str() {
        "hash" => "a Redis hash whose values are not hold counts".to_owned(),
        "string" => "a Redis string that is neither an integer nor a token lock's token".to_owned(),
        other => format!("a Redis {other}"),
    };
    Failure(format!(
        "{key:?} holds {what}, not a Redisson lock, semaphore or latch"
    ))
}

/// `inspect NAME [--json]`.
pub(crate) async fn inspect(
    session: &mut Session,
    name: &str,
    json: bool,
    hint: CounterHint,
) -> Result<()> {
    let s = snapshot(session, name, hint).await?;
    if json {
        println!("{}", render::json(&s));
    } else {
        print!("{}", render::text(&s));
    }
    Ok(())
}

/// Checks a `SCAN MATCH` glob: not empty, every `[` closed, no lone `\` at the end.
pub(crate) fn check_pattern(pattern: &str) -> Result<()> {
    let bad = |why: &str| Err(Failure(format!("invalid pattern {pattern:?}: {why}")));
    if pattern.is_empty() {
        return bad("it is empty (use '*' for every key)");
    }
    // As Redis's `stringmatchlen` reads it: `\` escapes the next character, also inside a
    // class; a class `[...]` ends at the first unescaped `]`.
    let mut chars = pattern.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            // The guard consumes the escaped character (and fails on a lone `\` at the end).
            '\\' if chars.next().is_none() => return bad("it ends with a lone '\\'"),
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            _ => {}
        }
    }
    if in_class {
        return bad("a '[' is never closed by ']'");
    }
    Ok(())
}

/// Keys that belong to a structure without being its name: they are never listed.
fn internal(key: &str) -> bool {
    const PREFIXES: [&str; 4] = [
        "redisson_lock_queue:",
        "redisson_lock_timeout:",
        "redisson_lock_token:",
        "redisson_unlock_latch:",
    ];
    PREFIXES.iter().any(|p| key.starts_with(p))
        || key.contains(":rwlock_timeout:")
        || key.contains(":redisson_sync:grant:")
        || (key.contains('{') && key.ends_with(":timeout"))
}

/// `list [PATTERN] [--limit N] [--json]`: SCAN (COUNT 100) over at most about `limit` keys,
/// on the server or on every master of a cluster in turn, and one line per lock, semaphore or
/// latch found. With `--name-prefix` the pattern is matched after the prefix.
pub(crate) async fn list(
    session: &mut Session,
    pattern: &str,
    limit: usize,
    json: bool,
) -> Result<()> {
    check_pattern(pattern)?;
    if limit == 0 {
        return Err(Failure("--limit must be at least 1".to_owned()));
    }
    let full = format!("{}{pattern}", glob_escape(&session.prefix));
    let count = SCAN_COUNT.min(limit);
    let mut asked = 0usize;
    let mut returned = 0usize;
    let mut seen = HashSet::new();
    let mut found = 0usize;
    let mut cut = false;
    let nodes = session.raw.scan_targets().await?;
    'nodes: for node in &nodes {
        let mut cursor: u64 = 0;
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(&full)
                .arg("COUNT")
                .arg(count);
            let (next, keys) = session.raw.scan(node, &cmd).await?;
            asked += count;
            for key in keys {
                if returned == limit {
                    cut = true;
                    break 'nodes;
                }
                returned += 1;
                let Ok(key) = String::from_utf8(key) else {
                    continue;
                };
                if internal(&key) || !seen.insert(key.clone()) {
                    continue;
                }
                let Some(name) = key.strip_prefix(session.prefix.as_str()) else {
                    continue;
                };
                match session.client.inspect(name).await {
                    Ok(s) if s.kind != StructureKind::None => {
                        found += 1;
                        if json {
                            println!("{}", render::json(&s));
                        } else {
                            println!("{}", render::line(&s));
                        }
                    }
                    Ok(_) | Err(Error::WrongType { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
            if asked >= limit || returned >= limit {
                cut = true;
                break 'nodes;
            }
        }
    }
    if cut {
        eprintln!(
            "(stopped after scanning about {} keys: --limit {limit}; more may match {pattern:?})",
            asked.max(returned)
        );
    } else if found == 0 && !json {
        eprintln!("(no lock, semaphore or latch matches {pattern:?})");
    }
    Ok(())
}

fn holder_set(s: &Snapshot) -> Vec<String> {
    s.holders.iter().map(render::holder_label).collect()
}

/// `watch`'s options.
#[derive(Debug)]
pub(crate) struct WatchOptions {
    /// `--for`: stop after this long.
    pub(crate) limit: Option<Duration>,
    /// `--json`: one object per event.
    pub(crate) json: bool,
    pub(crate) hint: CounterHint,
    /// Use keyspace notifications where the server has them on (not `--no-keyspace`).
    pub(crate) keyspace: bool,
    /// `--poll`: how often the state is read when nothing is heard.
    pub(crate) poll: Duration,
}

/// The release a handoff is told from: who left, and when that was told.
struct Release {
    from: Vec<String>,
    at: Instant,
}

/// What told an event, for people: `by message "0" on <channel>, keyspace "del" on <channel>`.
fn heard_text(event: &Event) -> String {
    let parts: Vec<String> = event
        .heard
        .iter()
        .map(|n| {
            let what = if n.channel.starts_with("__keyspace@") {
                "keyspace"
            } else {
                "message"
            };
            format!("{what} {n}")
        })
        .collect();
    match event.seen_by {
        SeenBy::Snapshot if parts.is_empty() => "seen in a snapshot".to_owned(),
        SeenBy::Snapshot => format!("seen in a snapshot (heard {})", parts.join(", ")),
        _ => format!("by {}", parts.join(", ")),
    }
}

/// One event as a line: `[+0.618s] released: <holder> (x1), by message "0" on ...`.
fn event_line(event: &Event, start: Instant) -> String {
    let at = start.elapsed().as_secs_f64();
    let mut line = format!("[+{at:.3}s] {}", event.kind.as_str().replace('_', "-"));
    if let Some(h) = &event.holder {
        let _ = write!(line, ": {}", render::holder_label(h));
        if let Some(left) = event
            .holds
            .filter(|n| *n > 0 && event.kind == EventKind::Released)
        {
            let _ = write!(line, ", {left} hold(s) left");
        }
    } else if let Some(permits) = event.permits {
        let _ = write!(line, ": {permits} permit(s)");
    }
    let _ = write!(line, ", {}", heard_text(event));
    line
}

/// `watch NAME --json`: one object per event.
fn event_json(event: &Event) -> String {
    let holder = event.holder.as_ref().map(|h| {
        serde_json::json!({
            "field": h.field,
            "client_id": h.client_id,
            "owner": h.owner,
            "count": h.count,
            "mode": h.mode.map(|m| m.as_str()),
        })
    });
    let heard: Vec<serde_json::Value> = event
        .heard
        .iter()
        .map(|n| serde_json::json!({"channel": n.channel, "payload": n.payload}))
        .collect();
    let at_ms = event
        .at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let snapshot: serde_json::Value =
        serde_json::from_str(&render::json(&event.snapshot)).unwrap_or_default();
    let mut object = serde_json::json!({
        "at_ms": at_ms,
        "event": event.kind.as_str(),
        "seen_by": event.seen_by.as_str(),
        "holder": holder,
        "holds": event.holds,
        "permits": event.permits,
        "heard": heard,
        "snapshot": snapshot,
    });
    if let Some(keyspace) = &event.keyspace {
        object["keyspace"] = serde_json::json!(keyspace.to_string());
        object["keyspace_on"] = serde_json::json!(keyspace.is_on());
    }
    object.to_string()
}

/// `watch NAME [--for SECONDS] [--json]`: the crate's event stream of the name
/// (`Client::events`): each event on a line, with the holder and what told it, a handoff when
/// a release is followed by an acquisition, and the snapshot after each read's events.
pub(crate) async fn watch(session: &mut Session, name: &str, options: WatchOptions) -> Result<()> {
    let start = Instant::now();
    let events = session
        .client
        .events(name)
        .counter_hint(options.hint)
        .poll_interval(options.poll)
        .keyspace(options.keyspace)
        .await;
    let events = match events {
        Ok(events) => events,
        Err(Error::WrongType { key }) => return Err(wrong_type(session, &key).await),
        Err(e) => {
            return Err(Failure(format!(
                "cannot watch {name:?} at {}: {e}",
                session.place
            )));
        }
    };
    if !options.json {
        let channels = events.channels();
        let (last, rest) = channels
            .split_last()
            .map_or(("", &[][..]), |(l, r)| (l.as_str(), r));
        println!(
            "watching {name:?} on {}{}{last}{}",
            rest.join(", "),
            if rest.is_empty() { "" } else { " and " },
            match options.limit {
                Some(d) => format!(" for {:.1} s", d.as_secs_f64()),
                None => " until Ctrl-C".to_owned(),
            }
        );
        let keyspace = events.keyspace();
        if keyspace.is_on() {
            println!("keyspace notifications: {keyspace}");
        } else {
            println!(
                "keyspace notifications: {keyspace}: {}; polling every {:.1} s",
                keyspace.missed(),
                options.poll.as_secs_f64()
            );
        }
    }
    let mut events = events.peekable();
    let end = options.limit.map(|d| tokio::time::Instant::now() + d);
    let until_end = async {
        match end {
            Some(end) => tokio::time::sleep_until(end).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until_end);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut released: Option<Release> = None;
    loop {
        let event = tokio::select! {
            () = &mut until_end => break,
            _ = &mut ctrl_c => break,
            event = events.next() => match event {
                Some(Ok(event)) => event,
                Some(Err(Error::Shutdown)) | None => break,
                Some(Err(e)) => {
                    eprintln!("(a read failed: {e}; trying again)");
                    continue;
                }
            },
        };
        if options.json {
            println!("{}", event_json(&event));
            let _ = std::io::stdout().flush();
            continue;
        }
        if event.kind == EventKind::Watching {
            println!("[+{:.3}s] now", start.elapsed().as_secs_f64());
        } else {
            println!("{}", event_line(&event, start));
        }
        let label = event.holder.as_ref().map(render::holder_label);
        match event.kind {
            EventKind::Released
            | EventKind::Expired
            | EventKind::ForceUnlocked
            | EventKind::Deleted
                if event.holds == Some(0) =>
            {
                let from: Vec<String> = label.into_iter().collect();
                match &mut released {
                    // Several holders that left in one read (readers).
                    Some(r) if r.at.elapsed() < Duration::from_millis(1) => r.from.extend(from),
                    _ => {
                        released = Some(Release {
                            from,
                            at: Instant::now(),
                        });
                    }
                }
            }
            EventKind::Acquired => {
                if let (Some(to), Some(r)) = (label, released.take()) {
                    println!(
                        "  handoff: {} -> {to} (taken {:.1} ms after the release was told)",
                        r.from.join(", "),
                        r.at.elapsed().as_secs_f64() * 1000.0
                    );
                }
            }
            _ => {}
        }
        // The snapshot once per read: after the last event it shows.
        let same_read = match std::pin::Pin::new(&mut events).peek().now_or_never() {
            Some(Some(Ok(next))) => next.at == event.at,
            _ => false,
        };
        if !same_read {
            for line in render::text(&event.snapshot).lines() {
                println!("  {line}");
            }
        }
        let _ = std::io::stdout().flush();
    }
    Ok(())
}

/// `text` as a glob matching itself only.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Asks on stdin; anything but `y` / `yes` (and end of input) is a no.
async fn confirm(question: String) -> bool {
    tokio::task::spawn_blocking(move || {
        print!("{question} [y/N] ");
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        match std::io::stdin().lock().read_line(&mut answer) {
            Ok(0) | Err(_) => {
                println!();
                false
            }
            Ok(_) => matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        }
    })
    .await
    .unwrap_or(false)
}

/// `force-unlock NAME [--yes]`: deletes the lock with the crate's force unlock for its kind.
pub(crate) async fn force_unlock(session: &mut Session, name: &str, yes: bool) -> Result<()> {
    let s = snapshot(session, name, CounterHint::Auto).await?;
    let client = &session.client;
    match s.kind {
        StructureKind::Semaphore | StructureKind::PermitSemaphore | StructureKind::Latch => {
            return Err(Failure(format!(
                "{name:?} is a {} (permits and counts have no holder): force-unlock only \
                 applies to locks; nothing was changed",
                match s.kind {
                    StructureKind::Latch => "count-down latch",
                    StructureKind::PermitSemaphore => "permit-expirable semaphore",
                    _ => "semaphore (or a latch: Redis cannot tell them apart)",
                }
            )));
        }
        StructureKind::Lock
        | StructureKind::Fair
        | StructureKind::Rw
        | StructureKind::Fenced
        | StructureKind::Token
            if s.is_held() => {}
        _ => {
            let what = match s.kind {
                StructureKind::Fair => format!(
                    "a fair lock without holder ({} waiter(s) queued)",
                    s.queue_len
                ),
                StructureKind::Fenced => "a free fenced lock (only its token counter)".to_owned(),
                _ => "nothing".to_owned(),
            };
            println!("{name:?} holds {what}: nothing to unlock, nothing removed");
            return Ok(());
        }
    }
    print!("{}", render::text(&s));
    // The key, with the name prefix if any.
    let key = s.name.clone();
    let holders = holder_set(&s);
    if !yes
        && !confirm(format!(
            "Force-unlock {} {key:?}, held by {}?",
            s.kind,
            holders.join(", ")
        ))
        .await
    {
        return Err(Failure(
            "not confirmed: nothing was changed (pass --yes to skip the question)".to_owned(),
        ));
    }
    let removed = match s.kind {
        StructureKind::Fair => client.fair_lock(name).force_unlock().await?,
        StructureKind::Fenced => client.fenced_lock(name).force_unlock().await?,
        StructureKind::Rw if s.mode == Some(HoldMode::Write) => {
            client.rw_lock(name).write_lock().force_unlock().await?
        }
        StructureKind::Rw => client.rw_lock(name).read_lock().force_unlock().await?,
        _ => client.lock(name).force_unlock().await?,
    };
    if !removed {
        println!(
            "{key:?} was no longer locked (released, expired or changed meanwhile): nothing removed"
        );
        return Ok(());
    }
    println!("removed {} {key:?}: {}", s.kind, holders.join(", "));
    match s.kind {
        StructureKind::Fair if s.queue_len > 0 => println!(
            "  left the queue of {} waiter(s); the head was woken",
            s.queue_len
        ),
        StructureKind::Rw if !s.read_markers.is_empty() => println!(
            "  left {} read marker key(s) to expire",
            s.read_markers.len()
        ),
        StructureKind::Fenced => {
            if let Some(token) = s.token {
                println!("  kept the token counter at {token}");
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        for good in [
            "*",
            "order:*",
            "a?c",
            "[abc]*",
            "[^a]x",
            "\\[literal\\]",
            "x[\\]]",
        ] {
            assert!(check_pattern(good).is_ok(), "{good}");
        }
        for bad in ["", "order:[", "a[bc", "trailing\\", "[\\"] {
            assert!(check_pattern(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn internal_keys() {
        for key in [
            "redisson_lock_queue:{a}",
            "redisson_lock_timeout:{a}",
            "redisson_lock_token:{a}",
            "redisson_unlock_latch:{a}:00ff",
            "{a}:6b1f7e52-3c1a-4d8e-9f00-1a2b3c4d5e6f:1:rwlock_timeout:1",
            "{a}:redisson_sync:grant:00ff",
            "{a}:timeout",
            "{t}:a:timeout",
        ] {
            assert!(internal(key), "{key}");
        }
        for key in ["a", "order:42", "session:timeout", "{t}:a"] {
            assert!(!internal(key), "{key}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(glob_escape("c:{a*}[x]"), "c:{a\\*}\\[x\\]");
    }
}
