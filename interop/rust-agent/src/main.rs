//! Conformance agent of redisson-sync: reads the JSON-lines requests of
//! CONFORMANCE_PROTOCOL.md on stdin, runs them with the crate, and answers on stdout.
//!
//! Each protocol owner N is `Owner::new(N)` (hash field `<client id>:N`) and has a task of its
//! own that runs its requests one after another; requests without an owner each get a task.

// `Agent::handle` awaits every operation of the protocol in one async fn; the layout of that
// future nests deeper than the compiler's default limit of 128.
#![recursion_limit = "256"]

mod agent;
mod bench;
mod counter;
mod holds;
mod keep_going;
mod locks;
mod options;
mod protocol;

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use redisson_sync::Client;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use crate::agent::Agent;
use crate::counter::Counter;
use crate::options::{Mode, Options};
use crate::protocol::{Rejected, Request, Response};

/// Connections used for lock commands: enough for a `bench` of 512 tasks.
const POOL_SIZE: usize = 64;
/// At end of input, how long requests still running may take to finish.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// At end of input, how long the client's shutdown may take.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(1);

#[tokio::main]
async fn main() -> ExitCode {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(Some(options)) => options,
        Ok(None) => {
            eprintln!("{}", options::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(message) => return fail(2, &message),
    };
    let mut builder = Client::builder()
        .watchdog_timeout(options.watchdog)
        .fair_wait_timeout(options.fair_wait)
        .pool_size(POOL_SIZE);
    builder = match options.mode {
        Mode::Cluster => builder
            .cluster([options.redis.clone()])
            .pubsub(options.pubsub),
        Mode::Sentinel => builder.sentinel([options.redis.clone()], options.master.clone()),
        Mode::Single => builder.url(&options.redis),
    };
    if let Some(user) = &options.user {
        builder = builder.username(user);
    }
    if let Some(password) = &options.password {
        builder = builder.password(password);
    }
    if let Some(ca) = &options.tls_ca {
        builder = builder.tls_ca_cert(ca);
    }
    builder = builder
        .key_prefix(options.name_prefix.clone())
        .sync_replicas(options.sync_replicas);
    let client = match builder.connect().await {
        Ok(client) => client,
        Err(e) => return fail(1, &format!("cannot reach Redis at {}: {e}", options.redis)),
    };
    let agent = match connect(client, &options).await {
        Ok(agent) => Arc::new(agent),
        Err(message) => return fail(1, &message),
    };
    protocol::emit(&[
        ("event", "ready".into()),
        ("impl", "rust".into()),
        ("version", redisson_sync::VERSION.into()),
        ("client_id", agent.client.id().into()),
    ]);

    serve(&agent).await;

    // End of input: the locks still held stay in Redis until their leases end.
    agent.forget_all();
    if tokio::time::timeout(SHUTDOWN_BOUND, agent.client.shutdown())
        .await
        .is_err()
    {
        eprintln!("redisson-sync-agent: client shutdown did not finish in {SHUTDOWN_BOUND:?}");
    }
    // Owner tasks may still be blocked in Redis calls: end the process without waiting for
    // them (every response was flushed when it was written).
    std::process::exit(0)
}

fn fail(status: u8, message: &str) -> ExitCode {
    eprintln!("redisson-sync-agent: {message}");
    ExitCode::from(status)
}

/// Checks that Redis answers through the counter connection too (the crate's was checked by
/// `connect()`, which touches no key: an ACL user may be limited to some), before the ready
/// line.
async fn connect(client: Client, options: &Options) -> Result<Agent, String> {
    let timeout = client.config().command_timeout;
    let url = options.redis.clone();
    let counter = Counter::connect(options, timeout)
        .await
        .map_err(|e| format!("cannot reach Redis at {url}: {e}"))?;
    Ok(Agent::new(client, counter))
}

/// Reads requests until end of input and starts each one; then gives those still running
/// [`DRAIN_GRACE`] to finish.
async fn serve(agent: &Arc<Agent>) {
    let tasks = TaskTracker::new();
    let mut owners: HashMap<u64, mpsc::UnboundedSender<Request>> = HashMap::new();
    let mut input = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("redisson-sync-agent: cannot read stdin: {e}");
                break;
            }
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            let rejected = Rejected::bad_request(Value::Null, "a request must be UTF-8");
            Response::from(rejected).emit();
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        let request = match protocol::parse(text) {
            Ok(request) => request,
            Err(rejected) => {
                Response::from(rejected).emit();
                continue;
            }
        };
        match request.op.owner() {
            Some(owner) => {
                let queue = owners
                    .entry(owner)
                    .or_insert_with(|| spawn_owner(&tasks, agent.clone()));
                // The owner task lives as long as its sender: the send cannot fail.
                let _ = queue.send(request);
            }
            None => {
                let agent = agent.clone();
                tasks.spawn(async move { agent.handle(request).await.emit() });
            }
        }
    }
    drop(owners);
    tasks.close();
    if tokio::time::timeout(DRAIN_GRACE, tasks.wait())
        .await
        .is_err()
    {
        eprintln!("redisson-sync-agent: end of input; shutting down with requests still running");
    }
}

/// Starts the task of one owner: it runs the owner's requests in arrival order.
fn spawn_owner(tasks: &TaskTracker, agent: Arc<Agent>) -> mpsc::UnboundedSender<Request> {
    let (queue, mut requests) = mpsc::unbounded_channel::<Request>();
    tasks.spawn(async move {
        while let Some(request) = requests.recv().await {
            agent.handle(request).await.emit();
        }
    });
    queue
}
