//! The least-privilege ACL user of docs/servers.md (`testkit::acl`): with exactly those rules
//! (keys, channels, commands), every primitive works, waiters are woken by message, the
//! capabilities are all there, and the server logs no refusal (`ACL LOG`), on a single server
//! and on a cluster. docs/servers.md quotes the same rules.

mod common;

use std::time::Duration;

use common::unique_name;
use redis::aio::MultiplexedConnection;
use redisson_sync::{Client, Supported};
use testkit::{RedisCluster, RedisServer, acl};

const PREFIX: &str = "app:";

/// Creates the user `app` with the documented rules, less those of newer servers this one
/// refuses (`Unknown command`: probed, one rule at a time).
async fn set_user(raw: &mut MultiplexedConnection) {
    let mut rules = acl::rules(PREFIX, true);
    for _ in 0..=acl::NEWER_COMMANDS.len() {
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER")
            .arg("app")
            .arg("reset")
            .arg("on")
            .arg(">pw");
        for rule in &rules {
            cmd.arg(rule);
        }
        match cmd.query_async::<()>(raw).await {
            Ok(()) => break,
            Err(e) => {
                let refused = acl::NEWER_COMMANDS
                    .iter()
                    .find(|r| e.to_string().contains(&format!("'{r}'")))
                    .unwrap_or_else(|| panic!("ACL SETUSER: {e}"));
                eprintln!("this server does not know {refused}");
                rules.retain(|r| r != refused);
            }
        }
    }
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query_async(raw)
        .await
        .unwrap();
}

async fn acl_log(raw: &mut MultiplexedConnection) -> Vec<redis::Value> {
    redis::cmd("ACL").arg("LOG").query_async(raw).await.unwrap()
}

/// Every primitive once, a waiter of each waiting kind woken by message.
async fn every_primitive(client: &Client) {
    let caps = client.capabilities().await.unwrap();
    assert!(caps.scripts_allowed(), "{caps}");
    assert_eq!(caps.client_info, Supported::Yes, "{caps}");
    assert_eq!(caps.client_kill, Supported::Yes, "{caps}");
    assert_eq!(caps.wait, Supported::Yes, "{caps}");
    let name = |p: &str| unique_name(p);

    // Reentrant lock, with a waiter woken by the unlock message.
    let bare = name("lp-lock");
    let lock = client.lock(&bare);
    let held = lock.lock().await.unwrap();
    let again = lock.lock().await.unwrap();
    again.unlock().await.unwrap();
    let other = client.lock(&bare);
    let waiter = tokio::spawn(async move { other.lock().await.map(|g| g.name().to_owned()) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    held.unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got, lock.name());
    client.lock(&bare).force_unlock().await.unwrap();

    for guard in [
        client.fair_lock(name("lp-fair")).lock().await.unwrap(),
        client.fenced_lock(name("lp-fenced")).lock().await.unwrap(),
        client.spin_lock(name("lp-spin")).lock().await.unwrap(),
        client
            .non_reentrant_lock(name("lp-nr"))
            .lock()
            .await
            .unwrap(),
        client
            .non_reentrant_fair_lock(name("lp-nrf"))
            .lock()
            .await
            .unwrap(),
    ] {
        let bare = guard.name().strip_prefix(PREFIX).unwrap().to_owned();
        assert!(!client.inspect(bare).await.unwrap().holders.is_empty());
        guard.unlock().await.unwrap();
    }
    let rw = client.rw_lock(name("lp-rw"));
    let read = rw.read_lock().lock().await.unwrap();
    read.unlock().await.unwrap();
    let write = rw.write_lock().lock().await.unwrap();
    write.unlock().await.unwrap();

    let sem = client.semaphore(name("lp-sem"));
    assert!(sem.try_set_permits(1).await.unwrap());
    let permits = sem.acquire(1).await.unwrap();
    permits.release().await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);

    let psem = client.permit_expirable_semaphore(name("lp-psem"));
    assert!(psem.try_set_permits(1).await.unwrap());
    let ids = psem
        .acquire(1, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    psem.release(&ids).await.unwrap();

    let latch = client.count_down_latch(name("lp-latch"));
    assert!(latch.try_set_count(1).await.unwrap());
    let opened = latch.clone();
    let awaiting = tokio::spawn(async move { opened.await_for(Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    latch.count_down().await.unwrap();
    assert!(awaiting.await.unwrap().unwrap());

    let token = client.token_lock(name("lp-token")).lock().await.unwrap();
    token.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_rules_run_every_primitive_on_a_server() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    set_user(&mut raw).await;
    let client = Client::builder()
        .url(format!("redis://app:pw@127.0.0.1:{}", server.port()))
        .key_prefix(PREFIX)
        .connect()
        .await
        .unwrap();
    every_primitive(&client).await;
    client.shutdown().await;
    assert_eq!(acl_log(&mut raw).await, Vec::new(), "refusals in ACL LOG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_rules_run_every_primitive_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let mut raws = Vec::new();
    for node in cluster.nodes() {
        let mut raw = cluster.server(node.index).conn().await;
        set_user(&mut raw).await;
        raws.push(raw);
    }
    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("redis://app:pw@127.0.0.1:{}", n.port))
        .collect();
    let client = Client::builder()
        .cluster(seeds)
        .key_prefix(PREFIX)
        .connect()
        .await
        .unwrap();
    every_primitive(&client).await;
    client.shutdown().await;
    for raw in &mut raws {
        assert_eq!(acl_log(raw).await, Vec::new(), "refusals in ACL LOG");
    }
}

#[test]
fn docs_servers_md_quotes_the_rules() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/servers.md")).unwrap();
    let line = format!(
        "ACL SETUSER app on >PASSWORD {}",
        acl::rules(PREFIX, true).join(" ")
    );
    assert!(
        doc.contains(&line),
        "docs/servers.md does not quote the rules of testkit::acl:\n{line}"
    );
}
