//! Name mapping (issue 13, Redisson's `NameMapper`): a client with a key prefix (or a mapper)
//! derives every key, queue and channel from the mapped name and writes nothing under the bare
//! one; ACL credentials from `Config` reach the server. One `redis-server` per test.

mod common;

use std::time::Duration;

use common::{RedisServer, exists, hash, queue, unique_name, wait_llen};
use redis::AsyncCommands;
use redisson_sync::{BuildError, Client, LockOptions, Owner, config::NameMapper};

#[tokio::test]
async fn a_prefix_is_put_before_every_name_and_nothing_is_written_under_the_bare_one() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = Client::builder()
        .url(server.url())
        .key_prefix("app:")
        .build()
        .unwrap();
    let bare = common::client(&server);

    // A lock: the key, its field and the handle's name are the prefixed ones.
    let name = unique_name("names-lock");
    let key = format!("app:{name}");
    let lock = client.lock(&name);
    assert_eq!(lock.name(), key);
    let owner = Owner::new(3);
    let guard = lock
        .lock_with_options(&LockOptions::new().owner(owner))
        .await
        .unwrap();
    assert_eq!(guard.name(), key);
    assert_eq!(
        hash(&mut raw, &key).await,
        vec![(format!("{}:3", client.id()), "1".to_owned())]
    );
    assert!(!exists(&mut raw, &name).await);
    assert!(!bare.lock(&name).is_locked().await.unwrap());
    assert!(bare.lock(&key).is_locked().await.unwrap());
    let snapshot = client.inspect(&name).await.unwrap();
    assert_eq!(snapshot.holders.len(), 1);
    guard.unlock().await.unwrap();

    // A fair lock: the queue of a waiter is named from the prefixed name.
    let fair = unique_name("names-fair");
    let fair_key = format!("app:{fair}");
    let held = client.fair_lock(&fair).lock().await.unwrap();
    let waiter = {
        let lock = client.fair_lock(&fair);
        tokio::spawn(async move { lock.lock().await.map(drop) })
    };
    wait_llen(&mut raw, &fair_key, 1).await;
    assert_eq!(queue(&mut raw, &fair_key).await.len(), 1);
    let bare_queue: i64 = raw
        .llen(format!("redisson_lock_queue:{{{fair}}}"))
        .await
        .unwrap();
    assert_eq!(bare_queue, 0);
    held.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    // A semaphore.
    let sem = unique_name("names-sem");
    assert!(client.semaphore(&sem).try_set_permits(2).await.unwrap());
    let permits: String = raw.get(format!("app:{sem}")).await.unwrap();
    assert_eq!(permits, "2");
    assert!(!exists(&mut raw, &sem).await);

    client.shutdown().await;
    bare.shutdown().await;
}

#[tokio::test]
async fn a_mapper_maps_every_name_and_cannot_be_combined_with_a_prefix() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let client = Client::builder()
        .url(server.url())
        .name_mapper(NameMapper::new(|name| format!("{{t7}}:{name}")))
        .build()
        .unwrap();
    let name = unique_name("names-mapper");
    let guard = client.lock(&name).lock().await.unwrap();
    assert!(exists(&mut raw, &format!("{{t7}}:{name}")).await);
    guard.unlock().await.unwrap();
    client.shutdown().await;

    let err = Client::builder()
        .url(server.url())
        .key_prefix("app:")
        .name_mapper(NameMapper::prefix("other:"))
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::InvalidConfig(_)), "{err}");
    assert!(
        err.to_string().contains("key_prefix and name_mapper"),
        "{err}"
    );
}

#[tokio::test]
async fn acl_credentials_from_the_config_reach_the_server() {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("on")
        .arg(">s3cret")
        .arg("~app:*")
        // Lock scripts name their channel among their keys, as Redisson's do.
        .arg("~redisson_lock__channel:*")
        .arg("&*")
        .arg("+@all")
        .query_async(&mut raw)
        .await
        .unwrap();
    let client = Client::builder()
        .url(server.url())
        .username("app")
        .password("s3cret")
        .key_prefix("app:")
        .build()
        .unwrap();
    let name = unique_name("names-acl");
    let guard = client.lock(&name).lock().await.unwrap();
    assert!(exists(&mut raw, &format!("app:{name}")).await);
    let text = format!("{client:?}");
    assert!(!text.contains("s3cret"), "{text}");
    guard.unlock().await.unwrap();
    client.shutdown().await;

    // Outside the user's keys: refused by Redis, an error, nothing written.
    let outside = Client::builder()
        .url(server.url())
        .username("app")
        .password("s3cret")
        .build()
        .unwrap();
    let err = outside.lock(&name).try_lock().await.unwrap_err();
    // Redis says "no permissions", Valkey "No permissions".
    assert!(
        err.to_string().to_lowercase().contains("no permissions"),
        "{err}"
    );
    assert!(!exists(&mut raw, &name).await);
    outside.shutdown().await;

    // A wrong password: an authentication error at connect.
    let err = Client::builder()
        .url(server.url())
        .username("app")
        .password("wrong")
        .connect()
        .await
        .unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("auth") || err.to_string().contains("WRONGPASS"),
        "{err}"
    );
}

/// `ACL SETUSER app ... >password`: a user that may touch only `app:*` and the lock channels.
async fn acl_user(raw: &mut redis::aio::MultiplexedConnection, password: &str) {
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("on")
        .arg("resetpass")
        .arg(format!(">{password}"))
        .arg("~app:*")
        .arg("~redisson_lock__channel:*")
        .arg("&*")
        .arg("+@all")
        .query_async(raw)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_credentials_provider_logs_in_every_new_connection_with_its_current_answer() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use redisson_sync::config::{Credentials, CredentialsProvider};

    let server = RedisServer::start();
    let mut raw = server.conn().await;
    acl_user(&mut raw, "token-1").await;
    let current = Arc::new(Mutex::new("token-1".to_owned()));
    let asked = Arc::new(AtomicUsize::new(0));
    let provider = {
        let (current, asked) = (current.clone(), asked.clone());
        CredentialsProvider::new(move || {
            asked.fetch_add(1, Ordering::SeqCst);
            let token = current.lock().unwrap().clone();
            async move { Ok(Credentials::new("app", token)) }
        })
    };
    // The URL's login is wrong: the provider's answer replaces it.
    let url = format!("redis://nobody:wrong@127.0.0.1:{}", server.port());
    let client = Client::builder()
        .url(url)
        .credentials_provider(provider)
        .key_prefix("app:")
        .watchdog_timeout(Duration::from_secs(3))
        .connect()
        .await
        .unwrap();
    let name = unique_name("names-provider");
    let guard = client.lock(&name).lock().await.unwrap();
    assert!(exists(&mut raw, &format!("app:{name}")).await);
    let first = asked.load(Ordering::SeqCst);
    assert!(first >= 1, "the provider was not asked");
    let users: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(users.contains("user=app"), "{users}");

    // The token rotates: the server takes only the new one, the provider answers it, and
    // the user's open connections are closed (as a rotation that revokes sessions does).
    acl_user(&mut raw, "token-2").await;
    *current.lock().unwrap() = "token-2".to_owned();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("app")
        .query_async(&mut raw)
        .await
        .unwrap();
    // New connections log in with token-2: a waiting acquire gets through (it retries a
    // dropped connection), the held lock's unlock works, its watchdog kept it.
    let other = client.lock(unique_name("names-provider-2"));
    let second = tokio::time::timeout(Duration::from_secs(10), other.lock())
        .await
        .expect("no acquire within 10 s")
        .unwrap();
    assert!(asked.load(Ordering::SeqCst) > first, "not asked again");
    second.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, &format!("app:{name}")).await);
    let text = format!("{client:?}");
    assert!(!text.contains("token-2"), "{text}");
    client.shutdown().await;

    // A provider that fails: a clear error at connect, naming the provider.
    let failing = Client::builder()
        .url(server.url())
        .credentials_provider(CredentialsProvider::new(|| async {
            Err("token service unreachable".into())
        }))
        .connect()
        .await
        .unwrap_err();
    assert!(
        failing.to_string().contains("credentials provider"),
        "{failing}"
    );
}
