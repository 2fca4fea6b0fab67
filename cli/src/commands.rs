//! The four commands: `inspect`, `list`, `watch`, `force-unlock`.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redisson_sync::redis;
use redisson_sync::{CounterHint, Error, HoldMode, Snapshot, StructureKind};

use crate::render;
use crate::{Failure, Result, Session};

/// `SCAN`'s `COUNT`.
const SCAN_COUNT: usize = 100;

/// How often `watch` re-reads the snapshot without a message.
const WATCH_TICK: Duration = Duration::from_secs(1);

/// How long after a message `watch` reads once more, to see who took the lock.
const WATCH_FOLLOW_UP: Duration = Duration::from_millis(100);

/// The snapshot of `name`, or a clear error when the name holds something else.
async fn snapshot(session: &mut Session, name: &str, hint: CounterHint) -> Result<Snapshot> {
    match session.client.inspect(name).counter_hint(hint).await {
        Ok(s) => Ok(s),
        Err(Error::WrongType { key }) => Err(wrong_type(session, &key).await),
        Err(Error::Redis(e)) if e.is_connection_refusal() || e.is_io_error() => Err(Failure(
            format!("cannot reach Redis at {}: {e}", session.url),
        )),
        Err(e) => Err(e.into()),
    }
}

/// "NAME holds a Redis list, not a Redisson ...", naming the type the server reports.
async fn wrong_type(session: &mut Session, key: &str) -> Failure {
    let kind: String = redis::cmd("TYPE")
        .arg(key)
        .query_async(&mut session.raw)
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
/// and one line per lock, semaphore or latch found.
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
    let count = SCAN_COUNT.min(limit);
    let mut cursor: u64 = 0;
    let mut asked = 0usize;
    let mut returned = 0usize;
    let mut seen = HashSet::new();
    let mut found = 0usize;
    let mut cut = false;
    let complete = loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count)
            .query_async(&mut session.raw)
            .await?;
        asked += count;
        for key in keys {
            if returned == limit {
                cut = true;
                break;
            }
            returned += 1;
            let Ok(key) = String::from_utf8(key) else {
                continue;
            };
            if internal(&key) || !seen.insert(key.clone()) {
                continue;
            }
            match session.client.inspect(&key).await {
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
        if cursor == 0 && !cut {
            break true;
        }
        if cut || asked >= limit || returned >= limit {
            break false;
        }
    };
    if !complete {
        eprintln!(
            "(stopped after scanning about {} keys: --limit {limit}; more may match {pattern:?})",
            asked.max(returned)
        );
    } else if found == 0 && !json {
        eprintln!("(no lock, semaphore or latch matches {pattern:?})");
    }
    Ok(())
}

/// What `watch` compares between two reads: everything but the TTLs, which always move.
fn state(s: &Snapshot) -> impl PartialEq + use<> {
    (
        s.kind,
        s.mode,
        s.holders
            .iter()
            .map(|h| (h.field.clone(), h.count))
            .collect::<Vec<_>>(),
        s.queue
            .iter()
            .map(|w| (w.field.clone(), w.deadline_ms))
            .collect::<Vec<_>>(),
        s.token,
        s.permits,
        s.count,
        s.acquired.clone(),
    )
}

fn holder_set(s: &Snapshot) -> Vec<String> {
    s.holders.iter().map(render::holder_label).collect()
}

/// Follows one name for `watch`: the last snapshot, and the last release not yet followed by
/// an acquisition (to report the handoff).
struct Follower {
    start: Instant,
    last: Option<Snapshot>,
    released: Option<(Vec<String>, Instant)>,
}

impl Follower {
    /// Prints the new snapshot when `always` or when it changed, with what changed.
    fn show(&mut self, s: Snapshot, why: &str, always: bool) {
        let changed = self.last.as_ref().is_none_or(|l| state(l) != state(&s));
        if !(always || changed) {
            self.last = Some(s);
            return;
        }
        let at = self.start.elapsed().as_secs_f64();
        println!("[+{at:.3}s] {why}");
        let before = self.last.as_ref().map(holder_set).unwrap_or_default();
        let after = holder_set(&s);
        let gone: Vec<&String> = before.iter().filter(|h| !after.contains(h)).collect();
        let came: Vec<&String> = after.iter().filter(|h| !before.contains(h)).collect();
        if self.last.is_some() {
            for h in &gone {
                println!("  released: {h}");
            }
            for h in &came {
                println!("  acquired: {h}");
            }
        }
        if !gone.is_empty() {
            self.released = Some((gone.iter().map(|h| (*h).clone()).collect(), Instant::now()));
        }
        if !came.is_empty()
            && let Some((from, when)) = self.released.take()
        {
            let to: Vec<&str> = came.iter().map(|h| h.as_str()).collect();
            // Seen in one read: the release and the acquisition were too close to tell.
            let gap = if gone.is_empty() {
                format!(
                    " (taken {:.1} ms after the release was seen)",
                    when.elapsed().as_secs_f64() * 1000.0
                )
            } else {
                String::new()
            };
            println!("  handoff: {} -> {}{gap}", from.join(", "), to.join(", "));
        }
        for line in render::text(&s).lines() {
            println!("  {line}");
        }
        let _ = std::io::stdout().flush();
        self.last = Some(s);
    }
}

/// `watch NAME [--for SECONDS]`: subscribes to every channel the structure may publish on
/// and re-reads it on each message, 100 ms after each message, and every second (printed then
/// only when it changed).
pub(crate) async fn watch(
    session: &mut Session,
    name: &str,
    limit: Option<Duration>,
    hint: CounterHint,
) -> Result<()> {
    let lock_channel = prefix_name("redisson_lock__channel", name);
    let channels = [
        lock_channel.clone(),
        prefix_name("redisson_rwlock", name),
        prefix_name("redisson_sc", name),
        format!("redisson_countdownlatch__channel__{{{name}}}"),
    ];
    // The fair lock wakes its head on the head's own channel, `<lock channel>:<field>`.
    let fair_pattern = format!("{}:*", glob_escape(&lock_channel));
    let mut pubsub = session
        .redis
        .get_async_pubsub()
        .await
        .map_err(|e| Failure(format!("cannot subscribe at {}: {e}", session.url)))?;
    for channel in &channels {
        pubsub.subscribe(channel).await?;
    }
    pubsub.psubscribe(&fair_pattern).await?;
    let mut messages = pubsub.into_on_message();

    let mut follower = Follower {
        start: Instant::now(),
        last: None,
        released: None,
    };
    println!(
        "watching {name:?} on {}, {} and {fair_pattern}{}",
        channels[..3].join(", "),
        channels[3],
        match limit {
            Some(d) => format!(" for {:.1} s", d.as_secs_f64()),
            None => " until Ctrl-C".to_owned(),
        }
    );
    let s = snapshot(session, name, hint).await?;
    follower.show(s, "now", true);

    let end = limit.map(|d| tokio::time::Instant::now() + d);
    let until_end = async {
        match end {
            Some(end) => tokio::time::sleep_until(end).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until_end);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + WATCH_TICK, WATCH_TICK);
    let mut follow_up: Option<tokio::time::Instant> = None;
    let mut subscribed = true;
    loop {
        let follow = async {
            match follow_up {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut until_end => break,
            _ = &mut ctrl_c => break,
            message = messages.next(), if subscribed => match message {
                Some(msg) => {
                    let payload = String::from_utf8_lossy(msg.get_payload_bytes()).into_owned();
                    let why = format!("message {payload:?} on {}", msg.get_channel_name());
                    let s = snapshot(session, name, hint).await?;
                    follower.show(s, &why, true);
                    follow_up = Some(tokio::time::Instant::now() + WATCH_FOLLOW_UP);
                }
                None => {
                    eprintln!("(the subscription connection closed; re-reading every second only)");
                    subscribed = false;
                }
            },
            () = follow => {
                follow_up = None;
                let s = snapshot(session, name, hint).await?;
                follower.show(s, "after the message", false);
            }
            _ = tick.tick() => {
                let s = snapshot(session, name, hint).await?;
                follower.show(s, "changed", false);
            }
        }
    }
    Ok(())
}

/// Redisson's `prefixName` (docs/LAYOUT.md §1.2): `prefix:{name}`, or `prefix:name` when the
/// name contains `{`.
fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
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
    let holders = holder_set(&s);
    if !yes
        && !confirm(format!(
            "Force-unlock {} {name:?}, held by {}?",
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
            "{name:?} was no longer locked (released, expired or changed meanwhile): nothing removed"
        );
        return Ok(());
    }
    println!("removed {} {name:?}: {}", s.kind, holders.join(", "));
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
        assert_eq!(prefix_name("p", "a"), "p:{a}");
        assert_eq!(prefix_name("p", "{t}:a"), "p:{t}:a");
        assert_eq!(glob_escape("c:{a*}[x]"), "c:{a\\*}\\[x\\]");
    }
}
