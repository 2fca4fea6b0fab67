//! The `redisson-sync` binary against a throwaway `redis-server`, with structures made by the
//! crate: `inspect --json` field by field for every kind, the table, `list`, `force-unlock`,
//! `watch` showing a handoff and the events of a lock (`--json`), and the errors (unreachable
//! server, cluster and Sentinels, a name of another type, a bad pattern). Then every topology
//! and option: a Redis Cluster (`list` scans every master), a master behind Sentinel, TLS with
//! a CA file and an ACL user whose password comes from the environment and is never printed,
//! a name prefix.

use std::future::Future;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redisson_sync::redis::{self, AsyncCommands, aio::MultiplexedConnection};
use redisson_sync::{Client, LockOptions, Owner};
use serde_json::{Value, json};
use testkit::RedisServer;

const BIN: &str = env!("CARGO_BIN_EXE_redisson-sync");

/// Runs the binary with `--redis <server>` and `args`, stdin closed.
async fn cli(server: &RedisServer, args: &[&str]) -> Output {
    cli_raw(&["--redis", &server.url()], args).await
}

async fn cli_raw(before: &[&str], args: &[&str]) -> Output {
    tokio::process::Command::new(BIN)
        .args(before)
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("REDISSON_SYNC_PASSWORD")
        .env_remove("REDISSON_SYNC_USER")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

/// A port nobody listens on.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// The output of a run that must have succeeded.
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        stdout(out),
        stderr(out)
    );
    stdout(out)
}

/// `inspect NAME --json` (plus `extra`), parsed.
async fn inspect_json(server: &RedisServer, name: &str, extra: &[&str]) -> Value {
    let mut args = vec!["inspect", name, "--json"];
    args.extend_from_slice(extra);
    let out = ok(&cli(server, &args).await);
    assert_eq!(out.lines().count(), 1, "one JSON object on one line: {out}");
    serde_json::from_str(&out).unwrap()
}

/// Takes `ttl_ms` out of `v` (checking it is within `range`) so the rest can be compared
/// exactly.
fn take_ttl(v: &mut Value, range: std::ops::RangeInclusive<i64>) {
    let ttl = v.as_object_mut().unwrap().remove("ttl_ms").expect("ttl_ms");
    let ttl = ttl.as_i64().unwrap();
    assert!(range.contains(&ttl), "ttl_ms {ttl} not in {range:?}");
}

fn client(server: &RedisServer) -> Client {
    Client::builder()
        .url(server.url())
        .recheck_interval(Duration::from_millis(200))
        .build()
        .unwrap()
}

fn owner(n: u64) -> LockOptions {
    LockOptions::new()
        .owner(Owner::new(n))
        .lease(Duration::from_secs(60))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn numsub(raw: &mut MultiplexedConnection, channel: &str) -> i64 {
    let reply: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(raw)
        .await
        .unwrap();
    reply[0].1
}

async fn wait_numsub(raw: &mut MultiplexedConnection, channel: &str, want: i64) {
    let start = Instant::now();
    while numsub(raw, channel).await != want {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "NUMSUB {channel} never reached {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn llen(raw: &mut MultiplexedConnection, key: &str) -> usize {
    raw.llen(key).await.unwrap()
}

#[tokio::test]
async fn inspect_json_of_a_lock_held_twice() {
    let server = RedisServer::start();
    let c = client(&server);
    let lock = c.lock("order:42");
    let _g1 = lock.lock_with_options(&owner(7)).await.unwrap();
    let _g2 = lock.lock_with_options(&owner(7)).await.unwrap();
    let mut v = inspect_json(&server, "order:42", &[]).await;
    take_ttl(&mut v, 50_000..=60_000);
    assert_eq!(
        v,
        json!({
            "name": "order:42",
            "kind": "lock",
            "holders": [{"client_id": c.id(), "owner": 7, "count": 2}],
            "queue": [],
        })
    );
    // The fields in the documented order.
    let out = ok(&cli(&server, &["inspect", "order:42", "--json"]).await);
    assert!(
        out.starts_with(r#"{"name":"order:42","kind":"lock","ttl_ms":"#),
        "{out}"
    );
    assert!(
        out.ends_with(&format!(
            r#","holders":[{{"client_id":"{}","owner":7,"count":2}}],"queue":[]}}
"#,
            c.id()
        )),
        "{out}"
    );
    // Nothing there: kind none, TTL -2.
    let v = inspect_json(&server, "nothing", &[]).await;
    assert_eq!(
        v,
        json!({"name": "nothing", "kind": "none", "ttl_ms": -2, "holders": [], "queue": []})
    );
}

#[tokio::test]
async fn inspect_json_of_a_fair_lock_with_two_waiters() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let lock = c.fair_lock("jobs");
    let _held = lock.lock_with_options(&owner(1)).await.unwrap();
    let mut waiters = Vec::new();
    for (i, n) in [2u64, 3].into_iter().enumerate() {
        let lock = lock.clone();
        waiters.push(tokio::spawn(async move {
            lock.try_lock_with_options(Duration::from_secs(20), &owner(n))
                .await
        }));
        let start = Instant::now();
        while llen(&mut raw, "redisson_lock_queue:{jobs}").await != i + 1 {
            assert!(start.elapsed() < Duration::from_secs(5));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let mut deadlines = Vec::new();
    for n in [2, 3] {
        let score: f64 = raw
            .zscore("redisson_lock_timeout:{jobs}", format!("{}:{n}", c.id()))
            .await
            .unwrap();
        deadlines.push(score as i64);
    }
    let mut v = inspect_json(&server, "jobs", &[]).await;
    take_ttl(&mut v, 50_000..=60_000);
    assert_eq!(
        v,
        json!({
            "name": "jobs",
            "kind": "fair",
            "holders": [{"client_id": c.id(), "owner": 1, "count": 1}],
            "queue": [
                {"client_id": c.id(), "owner": 2, "deadline_ms": deadlines[0]},
                {"client_id": c.id(), "owner": 3, "deadline_ms": deadlines[1]},
            ],
        })
    );
    assert_eq!(deadlines[1] - deadlines[0], 20_000);
    assert!(deadlines[0] > now_ms() + 70_000);
    for w in waiters {
        w.abort();
    }
}

#[tokio::test]
async fn inspect_json_of_read_write_and_fenced_locks() {
    let server = RedisServer::start();
    let c = client(&server);
    let read = c.rw_lock("doc").read_lock();
    let _r1 = read.lock_with_options(&owner(1)).await.unwrap();
    let _r2 = read.lock_with_options(&owner(2)).await.unwrap();
    let mut v = inspect_json(&server, "doc", &[]).await;
    take_ttl(&mut v, 50_000..=60_000);
    let mut holders = v["holders"].as_array().unwrap().clone();
    holders.sort_by_key(|h| h["owner"].as_u64());
    assert_eq!(
        holders,
        [
            json!({"client_id": c.id(), "owner": 1, "count": 1, "mode": "read"}),
            json!({"client_id": c.id(), "owner": 2, "count": 1, "mode": "read"}),
        ]
    );
    assert_eq!(v["kind"], "rw");
    assert_eq!(v["mode"], "read");
    let mut markers: Vec<(String, i64)> = v["markers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["key"].as_str().unwrap().to_owned(),
                m["ttl_ms"].as_i64().unwrap(),
            )
        })
        .collect();
    markers.sort();
    assert_eq!(markers.len(), 2);
    for (i, (key, ttl)) in markers.iter().enumerate() {
        assert_eq!(
            *key,
            format!("{{doc}}:{}:{}:rwlock_timeout:1", c.id(), i + 1)
        );
        assert!((50_000..=60_000).contains(ttl), "{ttl}");
    }
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 6, "{keys:?}"); // name kind holders queue mode markers

    let write = c.rw_lock("page").write_lock();
    let _w = write.lock_with_options(&owner(9)).await.unwrap();
    let mut v = inspect_json(&server, "page", &[]).await;
    take_ttl(&mut v, 50_000..=60_000);
    assert_eq!(
        v,
        json!({
            "name": "page",
            "kind": "rw",
            "mode": "write",
            "holders": [{"client_id": c.id(), "owner": 9, "count": 1, "mode": "write"}],
            "queue": [],
            "markers": [],
        })
    );

    let fenced = c.fenced_lock("ledger");
    let (_f1, token) = fenced.try_lock_and_get_token().await.unwrap().unwrap();
    assert_eq!(token, 1);
    let mut v = inspect_json(&server, "ledger", &[]).await;
    take_ttl(&mut v, 20_000..=30_000);
    assert_eq!(v["kind"], "fenced");
    assert_eq!(v["token"], 1);
    assert_eq!(v["holders"][0]["client_id"], c.id());
    assert_eq!(v["holders"][0]["count"], 1);
}

#[tokio::test]
async fn inspect_json_of_semaphores_and_a_latch() {
    let server = RedisServer::start();
    let c = client(&server);
    let sem = c.semaphore("pool");
    assert!(sem.try_set_permits(5).await.unwrap());
    let _permits = sem.acquire(2).await.unwrap();
    let v = inspect_json(&server, "pool", &[]).await;
    assert_eq!(
        v,
        json!({
            "name": "pool", "kind": "semaphore", "ttl_ms": -1, "holders": [], "queue": [],
            "permits": 3, "kind_inferred": true,
        })
    );
    let v = inspect_json(&server, "pool", &["--as", "semaphore"]).await;
    assert_eq!(v.get("kind_inferred"), None);

    let psem = c.permit_expirable_semaphore("slots");
    assert!(psem.try_set_permits(2).await.unwrap());
    let ids = psem.acquire(1, None).await.unwrap();
    let v = inspect_json(&server, "slots", &[]).await;
    assert_eq!(
        v,
        json!({
            "name": "slots", "kind": "permit_semaphore", "ttl_ms": -1, "holders": [], "queue": [],
            "permits": 1, "acquired": [{"id": ids[0].to_string(), "expires_ms": null}],
        })
    );

    let latch = c.count_down_latch("ready");
    assert!(latch.try_set_count(3).await.unwrap());
    let v = inspect_json(&server, "ready", &["--as", "latch"]).await;
    assert_eq!(
        v,
        json!({
            "name": "ready", "kind": "latch", "ttl_ms": -1, "holders": [], "queue": [], "count": 3,
        })
    );
}

#[tokio::test]
async fn inspect_prints_a_table() {
    let server = RedisServer::start();
    let c = client(&server);
    let _g = c
        .lock("order:42")
        .lock_with_options(&owner(7))
        .await
        .unwrap();
    let out = ok(&cli(&server, &["inspect", "order:42"]).await);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "name:     order:42");
    assert_eq!(lines[1], "kind:     lock");
    assert!(
        lines[2].starts_with("ttl:      5") && lines[2].ends_with(" s"),
        "{out}"
    );
    assert_eq!(lines[3], "holders:  1");
    assert_eq!(
        lines[4].split_whitespace().collect::<Vec<_>>(),
        ["CLIENT", "ID", "OWNER", "COUNT"]
    );
    assert_eq!(
        lines[5].split_whitespace().collect::<Vec<_>>(),
        [c.id(), "7", "1"]
    );
    assert_eq!(lines.len(), 6, "{out}");
}

#[tokio::test]
async fn list_reports_each_structure_once_and_skips_internal_keys() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let _lock = c.lock("lock:a").lock_with_options(&owner(1)).await.unwrap();
    let _fenced = c
        .fenced_lock("lock:f")
        .lock_with_options(&owner(1))
        .await
        .unwrap();
    let _read = c
        .rw_lock("lock:rw")
        .read_lock()
        .lock_with_options(&owner(1))
        .await
        .unwrap();
    let sem = c.semaphore("sem:s");
    assert!(sem.try_set_permits(4).await.unwrap());
    let _permits = sem.acquire(1).await.unwrap(); // leaves a grant marker
    let psem = c.permit_expirable_semaphore("sem:p");
    assert!(psem.try_set_permits(2).await.unwrap());
    let _ids = psem.acquire(1, None).await.unwrap();
    let () = raw.rpush("a-list", "x").await.unwrap();
    let () = raw.set("a-text", "hello").await.unwrap();

    let out = ok(&cli(&server, &["list"]).await);
    let mut lines: Vec<(String, String)> = out
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap().to_owned(), w.next().unwrap().to_owned())
        })
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            ("fenced".to_owned(), "lock:f".to_owned()),
            ("lock".to_owned(), "lock:a".to_owned()),
            ("permit_semaphore".to_owned(), "sem:p".to_owned()),
            ("rw".to_owned(), "lock:rw".to_owned()),
            ("semaphore".to_owned(), "sem:s".to_owned()),
        ],
        "{out}"
    );
    let a = out.lines().find(|l| l.contains("lock:a")).unwrap();
    assert!(a.contains("holders=1"), "{a}");

    // A pattern, and JSON lines.
    let out = ok(&cli(&server, &["list", "lock:*", "--json"]).await);
    let mut names: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["lock:a", "lock:f", "lock:rw"]);

    // Bounded: --limit 1 examines one key and says so.
    let out = cli(&server, &["list", "--limit", "1"]).await;
    ok(&out);
    assert!(stdout(&out).lines().count() <= 1);
    assert!(
        stderr(&out).contains("stopped after scanning"),
        "{}",
        stderr(&out)
    );

    // Nothing matches.
    let out = cli(&server, &["list", "zzz*"]).await;
    assert_eq!(ok(&out), "");
    assert!(stderr(&out).contains("no lock, semaphore or latch matches"));
}

#[tokio::test]
async fn force_unlock_removes_the_lock_of_each_kind_and_refuses_the_rest() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let _g = c.lock("lock:a").lock_with_options(&owner(5)).await.unwrap();

    // Without --yes and without a terminal: not confirmed, nothing changed.
    let out = cli(&server, &["force-unlock", "lock:a"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not confirmed"), "{}", stderr(&out));
    assert!(raw.exists::<_, bool>("lock:a").await.unwrap());

    let out = ok(&cli(&server, &["force-unlock", "lock:a", "--yes"]).await);
    assert!(
        out.contains(&format!("removed lock \"lock:a\": {}:5 (x1)", c.id())),
        "{out}"
    );
    assert!(!raw.exists::<_, bool>("lock:a").await.unwrap());

    let _w = c
        .rw_lock("rw")
        .write_lock()
        .lock_with_options(&owner(6))
        .await
        .unwrap();
    let out = ok(&cli(&server, &["force-unlock", "rw", "--yes"]).await);
    assert!(
        out.contains(&format!("removed rw \"rw\": {}:6:write (write x1)", c.id())),
        "{out}"
    );
    assert!(!raw.exists::<_, bool>("rw").await.unwrap());

    let _r = c
        .rw_lock("rr")
        .read_lock()
        .lock_with_options(&owner(6))
        .await
        .unwrap();
    let out = ok(&cli(&server, &["force-unlock", "rr", "-y"]).await);
    assert!(out.contains("left 1 read marker key(s) to expire"), "{out}");
    assert!(!raw.exists::<_, bool>("rr").await.unwrap());

    let fair = c.fair_lock("fq");
    let _f = fair.lock_with_options(&owner(1)).await.unwrap();
    // Without waiters a fair lock is a plain lock hash; with one (queued by hand, as a Java
    // waiter would be) it is a fair lock, and its queue stays.
    let java = "6b1f7e52-3c1a-4d8e-9f00-1a2b3c4d5e6f:57";
    let () = raw.rpush("redisson_lock_queue:{fq}", java).await.unwrap();
    let () = raw
        .zadd("redisson_lock_timeout:{fq}", java, now_ms() + 60_000)
        .await
        .unwrap();
    let out = ok(&cli(&server, &["force-unlock", "fq", "-y"]).await);
    assert!(out.contains("removed fair \"fq\""), "{out}");
    assert!(
        out.contains("left the queue of 1 waiter(s); the head was woken"),
        "{out}"
    );
    assert!(!raw.exists::<_, bool>("fq").await.unwrap());
    assert_eq!(llen(&mut raw, "redisson_lock_queue:{fq}").await, 1);

    let fenced = c.fenced_lock("fl");
    let _t = fenced.lock_with_options(&owner(1)).await.unwrap();
    let out = ok(&cli(&server, &["force-unlock", "fl", "-y"]).await);
    assert!(out.contains("kept the token counter at 1"), "{out}");
    assert!(!raw.exists::<_, bool>("fl").await.unwrap());

    // Nothing to unlock.
    let out = ok(&cli(&server, &["force-unlock", "fl", "-y"]).await);
    assert!(out.contains("nothing to unlock"), "{out}");
    let out = ok(&cli(&server, &["force-unlock", "nothing", "-y"]).await);
    assert!(out.contains("nothing to unlock"), "{out}");

    // Semaphores and latches have no holder to remove.
    assert!(c.semaphore("sem").try_set_permits(2).await.unwrap());
    let out = cli(&server, &["force-unlock", "sem", "--yes"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("force-unlock only applies to locks"),
        "{}",
        stderr(&out)
    );
    let value: i64 = raw.get("sem").await.unwrap();
    assert_eq!(value, 2);
}

/// Starts `watch NAME --for SECONDS` and returns once it printed its first snapshot (it is
/// subscribed by then), with a task collecting all of its output.
async fn start_watch(
    server: &RedisServer,
    name: &str,
    secs: &str,
) -> (tokio::process::Child, tokio::task::JoinHandle<String>) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = tokio::process::Command::new(BIN)
        .args(["--redis", &server.url(), "watch", name, "--for", secs])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut text = String::new();
    // The header and the keyspace line, then the "now" line: the subscriptions are in place.
    for _ in 0..3 {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("watch printed nothing")
            .unwrap()
            .expect("watch ended early");
        text.push_str(&line);
        text.push('\n');
    }
    assert!(text.trim_end().ends_with("] now"), "{text}");
    let rest = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    (child, rest)
}

/// Waits for the watch to end by itself (`--for`) and returns all it printed.
async fn finish_watch(
    mut child: tokio::process::Child,
    rest: tokio::task::JoinHandle<String>,
) -> String {
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("watch did not stop after --for")
        .unwrap();
    assert!(status.success(), "{status:?}");
    rest.await.unwrap()
}

#[tokio::test]
async fn watch_shows_a_handoff() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let lock = c.lock("hot");
    let held = lock.lock_with_options(&owner(1)).await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock_with_options(&owner(2)).await })
    };
    // The waiter's subscription (the crate's pub/sub connection).
    wait_numsub(&mut raw, "redisson_lock__channel:{hot}", 1).await;

    let (watch, output) = start_watch(&server, "hot", "2").await;
    assert_eq!(numsub(&mut raw, "redisson_lock__channel:{hot}").await, 2);
    held.unlock().await.unwrap();
    let taken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    let text = finish_watch(watch, output).await;
    let (a, b) = (format!("{}:1 (x1)", c.id()), format!("{}:2 (x1)", c.id()));
    assert!(
        text.starts_with("watching \"hot\" on redisson_lock__channel:{hot}, "),
        "{text}"
    );
    assert!(
        text.contains("message \"0\" on redisson_lock__channel:{hot}"),
        "{text}"
    );
    assert!(text.contains(&format!("released: {a}")), "{text}");
    assert!(text.contains(&format!("acquired: {b}")), "{text}");
    assert!(text.contains(&format!("handoff: {a} -> {b}")), "{text}");
    taken.unlock().await.unwrap();
}

#[tokio::test]
async fn watch_sees_a_fair_handoff_on_the_head_waiters_channel() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let c = client(&server);
    let lock = c.fair_lock("queue");
    let held = lock.lock_with_options(&owner(1)).await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock_with_options(&owner(2)).await })
    };
    let head = format!("redisson_lock__channel:{{queue}}:{}:2", c.id());
    wait_numsub(&mut raw, &head, 1).await;

    let (watch, output) = start_watch(&server, "queue", "2").await;
    // The head waiter's own channel is observed (no pattern subscription).
    let patterns: i64 = redis::cmd("PUBSUB")
        .arg("NUMPAT")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(patterns, 0);
    assert_eq!(numsub(&mut raw, &head).await, 2);
    held.unlock().await.unwrap();
    let taken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    let text = finish_watch(watch, output).await;
    assert!(text.contains(&format!("message \"0\" on {head}")), "{text}");
    assert!(text.contains("kind:     fair"), "{text}");
    let (a, b) = (format!("{}:1 (x1)", c.id()), format!("{}:2 (x1)", c.id()));
    assert!(text.contains(&format!("handoff: {a} -> {b}")), "{text}");
    taken.unlock().await.unwrap();
}

#[tokio::test]
async fn clear_errors() {
    // An unreachable server: a port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("redis://127.0.0.1:{port}");
    let out = cli_raw(&["--redis", &url], &["inspect", "x"]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("error: cannot reach Redis at {url}: ")),
        "{err}"
    );
    assert!(err.to_lowercase().contains("refused"), "{err}");
    assert!(stdout(&out).is_empty());

    // A URL's password is never shown (issue 29, item 8), reachable or not, valid or not.
    let secret = format!("redis://app:s3cret@127.0.0.1:{port}");
    let out = cli_raw(&["--redis", &secret], &["inspect", "x"]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let shown = format!("redis://app:***@127.0.0.1:{port}");
    assert!(
        err.starts_with(&format!("error: cannot reach Redis at {shown}: ")),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
    let out = cli_raw(&["--redis", "redis://app:s3cret@h:port"], &["inspect", "x"]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: invalid Redis URL redis://app:***@h:port: "),
        "{err}"
    );
    assert!(!err.contains("s3cret") && stdout(&out).is_empty(), "{err}");

    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let () = raw.rpush("queue-of-jobs", "x").await.unwrap();
    let out = cli(&server, &["inspect", "queue-of-jobs"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: \"queue-of-jobs\" holds a Redis list, not a Redisson lock, semaphore or latch\n"
    );
    let () = raw.set("greeting", "hello").await.unwrap();
    let out = cli(&server, &["inspect", "greeting", "--json"]).await;
    assert!(
        stderr(&out).contains("a Redis string that is neither an integer nor a token lock"),
        "{}",
        stderr(&out)
    );
    let out = cli(&server, &["force-unlock", "queue-of-jobs", "--yes"]).await;
    assert!(
        stderr(&out).contains("holds a Redis list"),
        "{}",
        stderr(&out)
    );

    for (pattern, why) in [
        ("order:[", "a '[' is never closed by ']'"),
        ("", "it is empty"),
        ("a\\", "it ends with a lone '\\'"),
    ] {
        let out = cli(&server, &["list", pattern]).await;
        assert_eq!(out.status.code(), Some(1), "{pattern:?}");
        assert!(
            stderr(&out).starts_with(&format!("error: invalid pattern {pattern:?}: {why}")),
            "{}",
            stderr(&out)
        );
    }

    // Nobody at the cluster's seed nodes, nor at the Sentinels.
    let seeds = format!("redis://127.0.0.1:{port},redis://127.0.0.1:{}", free_port());
    let out = cli_raw(&["--cluster", &seeds], &["list"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .starts_with("error: cannot reach Redis at the Redis Cluster of redis://127.0.0.1:"),
        "{}",
        stderr(&out)
    );
    let sentinel = format!("redis://127.0.0.1:{port}");
    let out = cli_raw(
        &["--sentinel", &sentinel, "--master", "mymaster"],
        &["inspect", "x"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no Sentinel named the master"),
        "{}",
        stderr(&out)
    );
    // --help no longer says the topologies are unsupported.
    let help = ok(&cli_raw(&["--help"], &[]).await);
    assert!(!help.contains("not supported"), "{help}");
    for flag in [
        "--cluster",
        "--sentinel",
        "--master",
        "--user",
        "--password",
        "--tls-ca",
        "--name-prefix",
    ] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
    // --redis and --cluster together: a usage error.
    let out = cli_raw(
        &[
            "--redis",
            &server.url(),
            "--cluster",
            "redis://127.0.0.1:7000",
        ],
        &["list"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
}

/// `watch NAME --json --for SECONDS` to its end: one JSON object per line.
async fn watch_json(
    before: &[&str],
    name: &str,
    secs: &str,
    during: impl Future<Output = ()>,
) -> Vec<Value> {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = tokio::process::Command::new(BIN)
        .args(before)
        .args(["watch", name, "--json", "--for", secs])
        .env_remove("REDISSON_SYNC_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(15), lines.next_line())
        .await
        .expect("watch printed nothing")
        .unwrap()
        .expect("watch ended early");
    let mut out = vec![serde_json::from_str::<Value>(&first).unwrap()];
    assert_eq!(out[0]["event"], "watching", "{first}");
    during.await;
    while let Ok(Some(line)) = lines.next_line().await {
        out.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}")));
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    out
}

/// `(event, seen_by, owner)` of each event after the first.
fn summary(events: &[Value]) -> Vec<(String, String, Option<u64>)> {
    events[1..]
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap().to_owned(),
                e["seen_by"].as_str().unwrap().to_owned(),
                e["holder"]["owner"].as_u64(),
            )
        })
        .collect()
}

fn s3(a: &str, b: &str, o: Option<u64>) -> (String, String, Option<u64>) {
    (a.to_owned(), b.to_owned(), o)
}

#[tokio::test]
async fn watch_json_tells_each_event_of_a_lock() {
    let server = RedisServer::start_with(&["--notify-keyspace-events", "KA"]);
    let c = client(&server);
    let lock = c.lock("evt");
    let url = server.url();
    let events = watch_json(&["--redis", &url], "evt", "3", async {
        let g = lock.lock_with_options(&owner(1)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(lock.force_unlock().await.unwrap());
        drop(g);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let short = LockOptions::new()
            .owner(Owner::new(2))
            .lease(Duration::from_millis(400));
        let _g = lock.lock_with_options(&short).await.unwrap();
        tokio::time::sleep(Duration::from_millis(800)).await;
    })
    .await;
    assert_eq!(events[0]["keyspace_on"], true, "{}", events[0]);
    assert_eq!(
        summary(&events),
        [
            s3("acquired", "keyspace", Some(1)),
            s3("force_unlocked", "keyspace", Some(1)),
            s3("acquired", "keyspace", Some(2)),
            s3("expired", "keyspace", Some(2)),
        ]
    );
    assert_eq!(events[1]["holder"]["client_id"], c.id());
    assert_eq!(events[2]["heard"][0]["payload"], "del");
    assert_eq!(events[4]["snapshot"]["kind"], "none");
    c.shutdown().await;
}

#[tokio::test]
async fn a_cluster_list_scans_every_master_and_watch_follows_a_handoff() {
    let cluster = testkit::RedisCluster::start();
    let seeds = cluster.seed_urls().join(",");
    let c = Client::builder()
        .cluster(cluster.seed_urls())
        .connect()
        .await
        .unwrap();
    // Locks on every master.
    let names: Vec<String> = (0..12).map(|i| format!("cl:{i}")).collect();
    let mut masters = std::collections::BTreeSet::new();
    let mut guards = Vec::new();
    for name in &names {
        masters.insert(cluster.node_for_key(name).port);
        guards.push(c.lock(name).lock_with_options(&owner(1)).await.unwrap());
    }
    assert_eq!(masters.len(), 3, "the names cover every master");
    let out = ok(&cli_raw(&["--cluster", &seeds], &["list", "cl:*", "--json"]).await);
    let mut listed: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    listed.sort();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(listed, expected);
    let v: Value = serde_json::from_str(&ok(&cli_raw(
        &["--cluster", &seeds],
        &["inspect", "cl:3", "--json"],
    )
    .await))
    .unwrap();
    assert_eq!(v["holders"][0]["client_id"], c.id());

    // A handoff on a sharded channel (the crate's default pub/sub mode, AUTO).
    let lock = c.lock("cl:hot");
    let held = lock.lock_with_options(&owner(1)).await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock_with_options(&owner(2)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let events = watch_json(&["--cluster", &seeds], "cl:hot", "2", async {
        held.unlock().await.unwrap();
    })
    .await;
    assert_eq!(events[0]["keyspace_on"], false);
    assert!(
        events[0]["keyspace"]
            .as_str()
            .unwrap()
            .contains("Redis Cluster"),
        "{}",
        events[0]
    );
    assert_eq!(
        summary(&events),
        [
            s3("released", "message", Some(1)),
            s3("acquired", "snapshot", Some(2))
        ]
    );
    waiter.await.unwrap().unwrap().unlock().await.unwrap();
    for g in guards {
        g.unlock().await.unwrap();
    }
    c.shutdown().await;
}

#[tokio::test]
async fn behind_sentinel_inspect_and_watch() {
    let setup = testkit::RedisSentinel::start();
    let sentinels = setup.sentinel_urls().join(",");
    let c = Client::builder()
        .sentinel(setup.sentinel_urls(), setup.master_name())
        .connect()
        .await
        .unwrap();
    let lock = c.lock("sn");
    let held = lock.lock_with_options(&owner(4)).await.unwrap();
    let target = [
        "--sentinel",
        sentinels.as_str(),
        "--master",
        setup.master_name(),
    ];
    let v: Value =
        serde_json::from_str(&ok(&cli_raw(&target, &["inspect", "sn", "--json"]).await)).unwrap();
    assert_eq!(
        v["holders"],
        json!([{"client_id": c.id(), "owner": 4, "count": 1}])
    );
    let out = ok(&cli_raw(&target, &["list"]).await);
    assert!(out.contains("lock             sn  "), "{out}");
    let events = watch_json(&target, "sn", "1.5", async {
        held.unlock().await.unwrap();
    })
    .await;
    assert_eq!(summary(&events), [s3("released", "message", Some(4))]);
    c.shutdown().await;
}

#[tokio::test]
async fn tls_an_acl_user_from_the_environment_and_a_prefix() {
    // Skipped on a server build without TLS (Valkey 9.1.2's wheel), as tests/tls.rs does.
    let build = testkit::ServerBuild::current();
    if !build.supports_tls() {
        eprintln!("skipped: server build {} has no TLS", build.name());
        return;
    }
    let files = testkit::TlsFiles::generate();
    let (server, tls_port) = RedisServer::start_tls(&files, &[]);
    let mut raw = server.conn().await;
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("cli-user")
        .arg("on")
        .arg(">s3cret-pw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query_async(&mut raw)
        .await
        .unwrap();
    let c = Client::builder()
        .url(server.url())
        .key_prefix("app:")
        .build()
        .unwrap();
    let bare = client(&server);
    let held = c.lock("order").lock_with_options(&owner(9)).await.unwrap();
    let other = bare
        .lock("order")
        .lock_with_options(&owner(1))
        .await
        .unwrap();
    let url = format!("rediss://127.0.0.1:{tls_port}");
    let ca = files.ca_cert().to_string_lossy().into_owned();
    let target = [
        "--redis",
        url.as_str(),
        "--tls-ca",
        ca.as_str(),
        "--user",
        "cli-user",
        "--name-prefix",
        "app:",
    ];
    let run = |args: &'static [&'static str], password: &'static str| async move {
        tokio::process::Command::new(BIN)
            .args(target)
            .args(args)
            .env_remove("REDIS_URL")
            .env("REDISSON_SYNC_PASSWORD", password)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap()
    };
    let v: Value =
        serde_json::from_str(&ok(&run(&["inspect", "order", "--json"], "s3cret-pw").await))
            .unwrap();
    assert_eq!(v["name"], "app:order");
    assert_eq!(
        v["holders"],
        json!([{"client_id": c.id(), "owner": 9, "count": 1}])
    );
    // `list` matches after the prefix: the bare `order` is not listed.
    let out = ok(&run(&["list", "*"], "s3cret-pw").await);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains("app:order"), "{out}");
    // A wrong password: refused, and no password printed.
    let out = run(&["inspect", "order"], "wrong-pw").await;
    assert_eq!(out.status.code(), Some(1));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        !text.contains("wrong-pw") && !text.contains("s3cret"),
        "{text}"
    );
    assert!(
        text.contains("cannot reach Redis at rediss://127.0.0.1:"),
        "{text}"
    );
    // Without the CA file the certificate is refused.
    let out = cli_raw(&["--redis", &url], &["inspect", "order"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    // Force-unlock through the prefix removes app:order only.
    let out = ok(&run(&["force-unlock", "order", "--yes"], "s3cret-pw").await);
    assert!(out.contains("removed lock \"app:order\""), "{out}");
    assert!(!out.contains("s3cret"), "{out}");
    let exists: bool = raw.exists("order").await.unwrap();
    assert!(exists);
    let exists: bool = raw.exists("app:order").await.unwrap();
    assert!(!exists);
    drop(held);
    other.unlock().await.unwrap();
    // --help shows the environment variable, never its value.
    let help = tokio::process::Command::new(BIN)
        .arg("--help")
        .env("REDISSON_SYNC_PASSWORD", "s3cret-pw")
        .output()
        .await
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("REDISSON_SYNC_PASSWORD"), "{help}");
    assert!(!help.contains("s3cret"), "{help}");
    c.shutdown().await;
    bare.shutdown().await;
}
