//! A Java service (Redisson) and a Rust service (this crate) sharing one lock: the handoffs
//! both ways, with the lock's hash field each time. Run with `scripts/demo` (after the tour),
//! which builds the Java side first; or by hand:
//!
//! ```text
//! interop/java/build 4.7.0 && cargo run --example java_handoff
//! ```
//!
//! The Java service is the project's Java conformance agent (`interop/agent java`, Redisson
//! 4.7.0 by default, `REDISSON_VERSION` for another built version), a JVM that takes its lock
//! calls as JSON lines on stdin; each of its owners runs on a thread of its own, so its hash
//! field is `<Redisson's client id>:<Java thread id>`, as in any Java service. The Rust
//! service is a `Client` of this crate in this process.
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server` on a free
//! port of 127.0.0.1 (no persistence) and stops it at the end. The JVM is stopped at the end
//! too (its stdin closed; killed by its own pid if it does not exit).

#[path = "support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::AsyncCommands;
use redisson_sync::Client;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

type Result<T> = std::result::Result<T, support::Error>;

/// The lock both services share: `client.lock(NAME)` here, `redisson.getLock(NAME)` in Java.
const NAME: &str = "demo:shipment:7";

/// The Java service's owner (one Java thread of the agent).
const JAVA_OWNER: u64 = 1;

#[tokio::main]
async fn main() -> Result<()> {
    let (url, _server) = support::redis()?;
    let version = std::env::var("REDISSON_VERSION").unwrap_or_else(|_| "4.7.0".to_owned());
    let mut java = JavaService::start(&url, &version).await?;
    // The Rust side runs in a task of its own: its owner is that task (Owner::current()).
    let run = tokio::spawn(demo(url.clone(), java.client_id.clone(), java.handle()));
    let outcome = run.await;
    java.stop().await;
    outcome??;
    println!("\ndone");
    Ok(())
}

async fn demo(url: String, java_id: String, java: JavaHandle) -> Result<()> {
    let raw_client = redis::Client::open(url.as_str())?;
    let mut raw = raw_client.get_multiplexed_async_connection().await?;
    // A plain subscriber on the lock's channel: the unlock messages, as both sides see them.
    let channel = format!("redisson_lock__channel:{{{NAME}}}");
    let mut pubsub = raw_client.get_async_pubsub().await?;
    pubsub.subscribe(&channel).await?;
    let (messages_tx, mut messages) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = pubsub.into_on_message();
        while let Some(msg) = stream.next().await {
            let payload: String = msg.get_payload().unwrap_or_default();
            if messages_tx.send(payload).is_err() {
                break;
            }
        }
    });

    // connect(): checks the connection now, as a service does at startup.
    let client = Client::builder().url(&url).connect().await?;
    println!("Redis:        {url}");
    println!(
        "Java service: Redisson {}, client id {java_id}",
        java.version
    );
    println!(
        "Rust service: redisson-sync {}, client id {}",
        redisson_sync::VERSION,
        client.id()
    );
    println!("one lock:     client.lock(\"{NAME}\") = redisson.getLock(\"{NAME}\")");
    let lock = client.lock(NAME);

    println!("\n1. Rust holds, Java waits");
    let guard = lock.lock().await?;
    println!("   [rust] lock()      -> held; {}", hash(&mut raw).await?);
    let java_lock =
        java.call(json!({"op": "lock", "kind": "lock", "name": NAME, "owner": JAVA_OWNER}));
    tokio::time::sleep(Duration::from_millis(800)).await;
    let seen = java
        .call(json!({"op": "is_locked", "kind": "lock", "name": NAME}))
        .await?;
    println!(
        "   [java] lock()      -> waiting (Java's isLocked() = {})",
        seen.value["locked"]
    );
    let released = Instant::now();
    guard.unlock().await?;
    println!(
        "   [rust] unlock()    -> published {}",
        message(&mut messages).await
    );
    let acquired = java_lock.await?.at;
    println!(
        "   [java] lock()      -> acquired {:.1} ms after the Rust unlock; {}",
        ms(acquired.saturating_duration_since(released)),
        hash(&mut raw).await?
    );
    let busy = lock.try_lock().await?.is_none();
    println!("   [rust] try_lock()  -> busy = {busy}");

    println!("\n2. Java holds, Rust waits");
    let waiter_lock = lock.clone();
    let waiter = tokio::spawn(async move {
        let guard = waiter_lock.lock().await?;
        Ok::<_, redisson_sync::Error>((guard, Instant::now()))
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    println!(
        "   [rust] lock()      -> waiting (is_locked() = {})",
        lock.is_locked().await?
    );
    let unlocked = Instant::now();
    java.call(json!({"op": "unlock", "kind": "lock", "name": NAME, "owner": JAVA_OWNER}))
        .await?;
    println!(
        "   [java] unlock()    -> published {}",
        message(&mut messages).await
    );
    let (guard, acquired) = waiter.await??;
    println!(
        "   [rust] lock()      -> acquired {:.1} ms after Java's unlock() was called; {}",
        ms(acquired.saturating_duration_since(unlocked)),
        hash(&mut raw).await?
    );
    let java_try = java
        .call(json!({"op": "try_lock", "kind": "lock", "name": NAME, "owner": JAVA_OWNER}))
        .await?;
    println!(
        "   [java] tryLock()   -> {}",
        if java_try.value["acquired"] == json!(false) {
            "false (busy)"
        } else {
            "true"
        }
    );
    guard.unlock().await?;
    println!(
        "   [rust] unlock()    -> published {}",
        message(&mut messages).await
    );

    println!("\n3. Ten more handoffs each way, the JVM warm");
    let (mut to_java, mut to_rust) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let guard = lock.lock().await?;
        let java_lock =
            java.call(json!({"op": "lock", "kind": "lock", "name": NAME, "owner": JAVA_OWNER}));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let released = Instant::now();
        guard.unlock().await?;
        to_java.push(java_lock.await?.at.saturating_duration_since(released));

        let waiter_lock = lock.clone();
        let waiter = tokio::spawn(async move {
            let guard = waiter_lock.lock().await?;
            Ok::<_, redisson_sync::Error>((guard, Instant::now()))
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let unlocked = Instant::now();
        java.call(json!({"op": "unlock", "kind": "lock", "name": NAME, "owner": JAVA_OWNER}))
            .await?;
        let (guard, acquired) = waiter.await??;
        to_rust.push(acquired.saturating_duration_since(unlocked));
        guard.unlock().await?;
    }
    println!("   Rust unlock -> Java acquires: {}", summary(&mut to_java));
    println!("   Java unlock -> Rust acquires: {}", summary(&mut to_rust));
    println!("   (each side woken by the other's unlock message, not by a lease running out)");

    client.shutdown().await;
    Ok(())
}

/// The median and the slowest of some handoff times.
fn summary(times: &mut [Duration]) -> String {
    times.sort();
    format!(
        "median {:.1} ms, slowest {:.1} ms",
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    )
}

/// The lock's hash as Redis holds it: `holder field = hold count`.
async fn hash(raw: &mut redis::aio::MultiplexedConnection) -> Result<String> {
    let fields: BTreeMap<String, String> = raw.hgetall(NAME).await?;
    let shown: Vec<String> = fields.iter().map(|(f, n)| format!("{f} = {n}")).collect();
    Ok(format!("HGETALL {NAME}: {}", shown.join(", ")))
}

/// The next message on the lock's channel, within 2 s.
async fn message(messages: &mut mpsc::UnboundedReceiver<String>) -> String {
    match tokio::time::timeout(Duration::from_secs(2), messages.recv()).await {
        Ok(Some(m)) => format!("\"{m}\" on redisson_lock__channel:{{{NAME}}}"),
        _ => "no message seen".to_owned(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A reply of the Java service, and when it arrived.
struct Reply {
    value: Value,
    at: Instant,
}

/// The Java service: the conformance agent's JVM, its stdin and the replies it sends back.
struct JavaService {
    child: Child,
    client_id: String,
    handle: JavaHandle,
}

/// What the Rust side needs to send the Java service a call and wait for its reply.
#[derive(Clone)]
struct JavaHandle {
    version: String,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>,
    next_id: Arc<Mutex<u64>>,
}

impl JavaService {
    /// Starts `interop/agent java --redis <url>` and waits for its ready line.
    async fn start(url: &str, version: &str) -> Result<Self> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let logs = root.join("target/demo");
        std::fs::create_dir_all(&logs)?;
        let log = std::fs::File::create(logs.join("java-service.log"))?;
        let mut child = Command::new(root.join("interop/agent"))
            .args(["java", "--redisson", version, "--redis", url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stdin = child.stdin.take();
        let pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>> = Arc::default();
        let (ready_tx, ready_rx) = oneshot::channel();
        let replies = pending.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut ready = Some(ready_tx);
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(value) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if value["event"] == "ready" {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(value);
                    }
                } else if let Some(id) = value["id"].as_u64()
                    && let Some(tx) = replies.lock().unwrap().remove(&id)
                {
                    let _ = tx.send(Reply {
                        value,
                        at: Instant::now(),
                    });
                }
            }
        });
        let ready = match tokio::time::timeout(Duration::from_secs(60), ready_rx).await {
            Ok(Ok(ready)) => ready,
            _ => {
                let _ = child.kill().await;
                return Err(format!(
                    "the Java service did not start; see {}",
                    logs.join("java-service.log").display()
                )
                .into());
            }
        };
        let client_id = ready["client_id"].as_str().unwrap_or("?").to_owned();
        let version = ready["version"].as_str().unwrap_or(version).to_owned();
        Ok(Self {
            child,
            client_id,
            handle: JavaHandle {
                version,
                stdin: Arc::new(tokio::sync::Mutex::new(stdin)),
                pending,
                next_id: Arc::new(Mutex::new(0)),
            },
        })
    }

    fn handle(&self) -> JavaHandle {
        self.handle.clone()
    }

    /// Closes the agent's stdin (it then exits) and waits for it; kills it after 5 s.
    async fn stop(&mut self) {
        self.handle.stdin.lock().await.take();
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

impl JavaHandle {
    /// Sends one request; the returned future is its reply (an error for `"ok": false`).
    fn call(&self, mut request: Value) -> impl std::future::Future<Output = Result<Reply>> + use<> {
        let id = {
            let mut next = self.next_id.lock().unwrap();
            *next += 1;
            *next
        };
        request["id"] = json!(id);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let stdin = self.stdin.clone();
        let line = format!("{request}\n");
        // Written now, so that the request is on its way before the caller goes on.
        let sent = tokio::spawn(async move {
            let mut stdin = stdin.lock().await;
            match stdin.as_mut() {
                Some(stdin) => stdin
                    .write_all(line.as_bytes())
                    .await
                    .map_err(|e| e.to_string()),
                None => Err("the Java service is stopped".to_owned()),
            }
        });
        async move {
            sent.await?
                .map_err(|e| format!("writing to the Java service: {e}"))?;
            let reply = tokio::time::timeout(Duration::from_secs(30), rx)
                .await
                .map_err(|_| "the Java service did not answer within 30 s")??;
            if reply.value["ok"] == json!(true) {
                Ok(reply)
            } else {
                Err(format!("the Java service answered {}", reply.value).into())
            }
        }
    }
}
