//! The `redisson-sync` binary against a throwaway `redis-server`, with structures made by the
//! crate: `inspect --json` field by field for every kind, the table, `list`, `force-unlock`,
//! `watch` showing a handoff, and the errors (unreachable server, a name of another type, a
//! bad pattern, cluster and sentinel not supported yet).

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
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
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
    // The header, then the "now" line: the subscriptions are in place.
    for _ in 0..2 {
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
    let patterns: i64 = redis::cmd("PUBSUB")
        .arg("NUMPAT")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(patterns, 1);
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

    let out = cli_raw(
        &["--cluster", "redis://127.0.0.1:7000,redis://127.0.0.1:7001"],
        &["list"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not supported until the crate's cluster/sentinel support lands"),
        "{}",
        stderr(&out)
    );
    let out = cli_raw(
        &[
            "--sentinel",
            "redis://127.0.0.1:26379",
            "--master",
            "mymaster",
        ],
        &["inspect", "x"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Sentinel mode is not supported until"),
        "{}",
        stderr(&out)
    );
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
