//! Capability detection at connect (issue 26), on whichever server build the testkit runs
//! (`REDISSON_SYNC_SERVER`): what `Client::capabilities` reports agrees with what the server
//! answers to the same commands sent by hand (no version is assumed); a server without Lua
//! or a user refused the script commands fails `connect()` naming them; a user without
//! `CLIENT INFO` connects, with the cut-off falling back to `CLIENT ID`; scripts flushed
//! while 64 tasks lock and unlock are loaded and sent again, never run twice; a script the
//! server refuses is `Error::ScriptRefused` at once, sent once.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{command_stats, unique_name};
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Error, LockOptions, Owner, Supported};
use testkit::{FaultProxy, RedisCluster, RedisServer};

/// What the server answers `cmd` with, as the crate classifies it.
async fn by_hand(raw: &mut MultiplexedConnection, cmd: &redis::Cmd) -> Supported {
    match cmd.query_async::<redis::Value>(raw).await {
        Ok(_) => Supported::Yes,
        Err(e) if e.code() == Some("NOPERM") => Supported::Denied,
        Err(_) => Supported::No,
    }
}

async fn acl(
    raw: &mut MultiplexedConnection,
    user: &str,
    rules: &[&str],
) -> redis::RedisResult<()> {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(">pw");
    for rule in rules {
        cmd.arg(*rule);
    }
    cmd.query_async(raw).await
}

fn url_of(server: &RedisServer, user: &str) -> String {
    format!("redis://{user}:pw@127.0.0.1:{}", server.port())
}

#[tokio::test]
async fn the_capabilities_agree_with_the_server() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = Client::builder().url(server.url()).connect().await.unwrap();
    let caps = client.capabilities().await.unwrap();
    assert!(caps.scripts_allowed() && caps.lua(), "{caps}");
    assert_ne!(caps.server, "unknown");
    let sharded = by_hand(&mut raw, redis::cmd("PUBSUB").arg("SHARDNUMSUB")).await;
    assert_eq!(caps.sharded_pubsub, sharded, "{caps}");
    let info = by_hand(&mut raw, redis::cmd("CLIENT").arg("INFO")).await;
    assert_eq!(caps.client_info, info, "{caps}");
    let pexpiretime = by_hand(&mut raw, redis::cmd("PEXPIRETIME").arg("k")).await;
    assert_eq!(caps.pexpiretime, pexpiretime, "{caps}");
    assert_eq!(caps.wait, Supported::Yes, "{caps}");
    assert_eq!(caps.client_kill, Supported::Yes, "{caps}");
    // The probe's filters match no connection: the test's own is still there.
    let pong: String = redis::cmd("PING").query_async(&mut raw).await.unwrap();
    assert_eq!(pong, "PONG");
    // A client built without connect() probes at its first call, with the same answer.
    let lazy = Client::open(server.url()).unwrap();
    assert_eq!(lazy.capabilities().await.unwrap(), caps);
    eprintln!("{caps}");
    lazy.shutdown().await;
    client.shutdown().await;
    assert!(client.capabilities().await.unwrap_err().is_shutdown());
}

#[tokio::test]
async fn a_user_refused_the_script_commands_fails_at_connect_naming_them() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    for (user, rules) in [
        (
            "noscripts",
            &["~*", "&*", "+@all", "-evalsha", "-script"][..],
        ),
        ("noscripting", &["~*", "&*", "+@all", "-@scripting"][..]),
    ] {
        acl(&mut raw, user, rules).await.unwrap();
        let e = Client::builder()
            .url(url_of(&server, user))
            .username(user)
            .connect()
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{user}: {e:?}");
        let text = e.to_string();
        assert!(
            text.contains("EVALSHA and SCRIPT LOAD") && text.contains(user),
            "{text}"
        );
        assert!(!text.contains("pw@"), "the password is not printed: {text}");
    }
    // Nothing was written.
    assert_eq!(common::dbsize(&mut raw).await, 0);
}

#[tokio::test]
async fn a_server_without_lua_fails_at_connect_saying_so() {
    // As a build without Lua answers: EVALSHA and SCRIPT are unknown commands.
    let server = RedisServer::start_with(&[
        "--rename-command",
        "EVALSHA",
        "",
        "--rename-command",
        "SCRIPT",
        "",
        "--rename-command",
        "EVAL",
        "",
    ]);
    let e = Client::builder()
        .url(server.url())
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("cannot run Lua scripts") && text.contains("EVALSHA and SCRIPT LOAD"),
        "{text}"
    );
    let caps = Client::open(server.url())
        .unwrap()
        .capabilities()
        .await
        .unwrap();
    assert!(!caps.lua() && caps.scripts == Supported::No, "{caps}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_client_info_a_request_of_unknown_outcome_is_still_cut_off() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // A user refused CLIENT INFO alone (where the server has subcommand rules).
    if let Err(e) = acl(&mut raw, "noinfo", &["~*", "&*", "+@all", "-client|info"]).await {
        eprintln!("skipped: this server has no ACL rules for subcommands ({e})");
        return;
    }
    let proxy = FaultProxy::start(server.addr());
    let url = format!("redis://noinfo:pw@127.0.0.1:{}", proxy.addr().port());
    let client = Client::builder().url(&url).connect().await.unwrap();
    let caps = client.capabilities().await.unwrap();
    assert_eq!(caps.client_info, Supported::Denied, "{caps}");
    assert!(caps.client_kill.is_yes(), "{caps}");
    let opts = LockOptions::new().owner(Owner::new(1));
    // Scripts loaded first, so the reset hits the acquire itself.
    let warm = unique_name("caps-warm");
    client
        .lock(&warm)
        .lock_with_options(&opts)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let name = unique_name("caps-noinfo");
    let trigger = proxy.reset_after(name.as_bytes());
    let first = client.lock(&name).lock_with_options(&opts).await;
    assert!(trigger.fired(), "the proxy did not reset");
    let field = format!("{}:1", client.id());
    let count: Option<u32> = redis::cmd("HGET")
        .arg(&name)
        .arg(&field)
        .query_async(&mut raw)
        .await
        .unwrap();
    match first {
        // Handed out: exactly one hold.
        Ok(guard) => {
            assert_eq!(count, Some(1));
            guard.unlock().await.unwrap();
        }
        // Undone (cut off by CLIENT ID, then read): nothing left.
        Err(e) => assert_eq!(count, None, "lock() failed ({e}) and left a hold"),
    }
    let guard = client.lock(&name).lock_with_options(&opts).await.unwrap();
    guard.unlock().await.unwrap();
    let left: bool = redis::cmd("EXISTS")
        .arg(&name)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(!left);
    client.shutdown().await;
}

/// 64 tasks lock and unlock (each its own owner, 8 names) while the scripts are flushed again
/// and again: every call succeeds, the counter each lock guards is exact (no two holders), and
/// nothing is left (an acquire run twice would leave a hold behind).
async fn flushed_under_load(
    client: &Client,
    flush: impl FnOnce(Arc<AtomicBool>) -> tokio::task::JoinHandle<u64>,
) {
    const TASKS: u64 = 64;
    const ROUNDS: u64 = 15;
    let names: Arc<Vec<String>> = Arc::new((0..8).map(|_| unique_name("{caps}-flush")).collect());
    let counters = Arc::new(std::sync::Mutex::new(vec![0u64; names.len()]));
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = flush(stop.clone());
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let client = client.clone();
        let names = names.clone();
        let counters = counters.clone();
        tasks.push(tokio::spawn(async move {
            let opts = LockOptions::new().owner(Owner::new(t + 1));
            for round in 0..ROUNDS {
                let i = ((t + round) % names.len() as u64) as usize;
                let guard = client
                    .lock(&names[i])
                    .lock_with_options(&opts)
                    .await
                    .unwrap_or_else(|e| panic!("task {t} round {round}: lock: {e}"));
                {
                    let mut c = counters.lock().unwrap();
                    c[i] += 1;
                }
                guard
                    .unlock()
                    .await
                    .unwrap_or_else(|e| panic!("task {t} round {round}: unlock: {e}"));
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let flushes = flusher.await.unwrap();
    assert!(flushes > 0, "the scripts were never flushed");
    let total: u64 = counters.lock().unwrap().iter().sum();
    assert_eq!(total, TASKS * ROUNDS);
    for name in names.iter() {
        assert!(
            !client.lock(name).is_locked().await.unwrap(),
            "{name} left held"
        );
    }
    eprintln!(
        "{} lock/unlock pairs, {flushes} SCRIPT FLUSHes",
        TASKS * ROUNDS
    );
}

/// Flushes the scripts of every server of `conns`, back to back, until `done` is set; the
/// number of flushes.
fn flusher(
    mut conns: Vec<MultiplexedConnection>,
    done: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut n = 0;
        // Bounded: the workers end it long before.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        for _ in 0..2_000_000 {
            if done.load(Ordering::Relaxed) || tokio::time::Instant::now() > deadline {
                break;
            }
            for conn in &mut conns {
                let () = redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query_async(conn)
                    .await
                    .unwrap();
            }
            n += 1;
            // Back to back: a flush can land between a script's load and its run.
            tokio::task::yield_now().await;
        }
        n
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_flushed_while_64_tasks_lock_and_unlock_on_a_server() {
    let server = RedisServer::start();
    let client = Client::builder()
        .url(server.url())
        .pool_size(4)
        .connect()
        .await
        .unwrap();
    let conn = server.conn().await;
    flushed_under_load(&client, move |stop| flusher(vec![conn], stop)).await;
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_flushed_while_64_tasks_lock_and_unlock_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let client = Client::builder()
        .cluster(cluster.seed_urls())
        .connect()
        .await
        .unwrap();
    let mut conns = Vec::new();
    for node in cluster.nodes() {
        conns.push(cluster.server(node.index).conn().await);
    }
    flushed_under_load(&client, move |stop| flusher(conns, stop)).await;
    client.shutdown().await;
}

#[tokio::test]
async fn a_script_the_server_refuses_is_script_refused_at_once_and_sent_once() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    // May run every command, on app:* keys and the lock channels only.
    acl(
        &mut raw,
        "app",
        &["~app:*", "~redisson_lock__channel:*", "&*", "+@all"],
    )
    .await
    .unwrap();
    let client = Client::builder()
        .url(url_of(&server, "app"))
        .connect()
        .await
        .unwrap();
    let ok = client.lock("app:1").lock().await.unwrap();
    ok.unlock().await.unwrap();
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut raw)
        .await
        .unwrap();
    // lock() waits forever for a busy lock: a refusal must end it at once.
    let e = tokio::time::timeout(Duration::from_secs(10), client.lock("outside").lock())
        .await
        .expect("a refused script is not retried")
        .unwrap_err();
    match &e {
        Error::ScriptRefused { operation, key, .. } => {
            assert!(!operation.is_empty() && key == "outside", "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("refused to run"), "{e}");
    let stats = command_stats(&mut raw, "evalsha").await;
    assert_eq!(
        stats.calls + stats.rejected_calls,
        1,
        "the refused script was sent once"
    );
    assert_eq!(common::dbsize(&mut raw).await, 0);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_pubsub_modes_follow_the_probe() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::builder().masters(3).start())
        .await
        .unwrap();
    let mut raw = cluster.server(0).conn().await;
    let sharded = by_hand(&mut raw, redis::cmd("PUBSUB").arg("SHARDNUMSUB")).await;
    let auto = Client::builder()
        .cluster(cluster.seed_urls())
        .connect()
        .await
        .unwrap();
    assert_eq!(auto.capabilities().await.unwrap().sharded_pubsub, sharded);
    // Auto works either way (classic without sharded pub/sub).
    let guard = auto.lock(unique_name("caps-auto")).lock().await.unwrap();
    guard.unlock().await.unwrap();
    auto.shutdown().await;
    for mode in [
        redisson_sync::config::PubSubMode::Sharded,
        redisson_sync::config::PubSubMode::Both,
    ] {
        let result = Client::builder()
            .cluster(cluster.seed_urls())
            .pubsub(mode)
            .connect()
            .await;
        match (sharded, result) {
            (Supported::Yes, Ok(client)) => client.shutdown().await,
            (Supported::Yes, Err(e)) => panic!("{mode:?}: {e}"),
            (_, Ok(_)) => panic!("{mode:?} connected without sharded pub/sub"),
            (_, Err(e)) => assert!(
                matches!(&e, Error::Topology(m) if m.contains("needs sharded pub/sub") && m.contains("Classic or Auto")),
                "{mode:?}: {e}"
            ),
        }
    }
}
