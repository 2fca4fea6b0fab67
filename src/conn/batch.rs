//! The requests of concurrent calls on one connection, written to it together.
//!
//! redis-rs's multiplexed connection writes what its queue holds whenever its task runs, and
//! that task runs right after each call that wakes it (tokio runs a task another task woke
//! next, on the same worker): with many tasks calling at once, it wrote about 0.6 times per
//! request (`pairs --throughput --tasks 512` under `perf stat`: 617k `writev` for 1M
//! requests), each write a system call and a wake-up of the server.
//!
//! While many calls are in flight on a server (`single::SPREAD_BELOW`, 32), a call instead
//! puts its command in its lane's [`Batch`]. The call that finds the batch empty spawns a task that
//! first lets every task that is ready to run send its call too (`yield_now`), then sends all
//! that came as one redis-rs pipeline (one write, one reply array) and hands each call its own
//! reply. A pipeline of plain commands is not a transaction: each runs as it would alone, in
//! order, and an error answers only its own command (`ignore_errors`).
//!
//! Nothing else changes for a call: it was given its connection (and recorded where it went,
//! for the cut-off of an unknown outcome) before it joined; its reply, error or timeout (the
//! connection's response timeout bounds the pipeline) comes back to it alone, and it settles
//! its outcome as if sent alone. A batch that could not be sent (its task dropped unrun, as
//! when the runtime shuts down) answers every call in it with a dropped connection.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use redis::aio::MultiplexedConnection;
use redis::{Cmd, RedisError, RedisResult, Value};
use tokio::sync::oneshot;

/// One call waiting to be sent.
struct Entry {
    cmd: Cmd,
    /// The handle of the call's connection.
    conn: MultiplexedConnection,
    /// The pooled connection the call was given, by its broken flag (one per connection):
    /// calls given different connections (one was replaced meanwhile) go on their own.
    connection: Arc<AtomicBool>,
    reply: oneshot::Sender<RedisResult<Value>>,
}

type Queue = Arc<Mutex<Vec<Entry>>>;

/// The calls waiting in a queue of this module or of sync_batch.rs.
pub(super) fn lock<T>(queue: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding it leaves a plain value behind: still usable.
    queue.lock().unwrap_or_else(|e| e.into_inner())
}

/// The calls of one lane waiting for the next write (see the module's documentation).
#[derive(Default)]
pub(super) struct Batch {
    queue: Queue,
}

impl Batch {
    /// Sends `cmd` on `conn` (the pooled connection `connection` names) with the other calls
    /// that join before the batch goes, and waits for its reply.
    pub(super) async fn send(
        &self,
        cmd: Cmd,
        conn: &MultiplexedConnection,
        connection: &Arc<AtomicBool>,
    ) -> RedisResult<Value> {
        let (reply, replied) = oneshot::channel();
        let first = {
            let mut queue = lock(&self.queue);
            queue.push(Entry {
                cmd,
                conn: conn.clone(),
                connection: connection.clone(),
                reply,
            });
            queue.len() == 1
        };
        if first {
            let flush = Flush {
                queue: self.queue.clone(),
                taken: false,
            };
            tokio::spawn(flush.run());
        }
        replied.await.unwrap_or_else(|_| Err(unsent()))
    }
}

/// The error of a call whose batch (or round of synced calls, sync_batch.rs) was never sent,
/// or whose task ended without its reply.
pub(super) fn unsent() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the batch of calls this call was in was dropped before its reply (the runtime shut down)",
    ))
}

/// Sends `pipe` (`ignore_errors`) on `conn`: each command's reply, its error as an `Err` (as
/// `sync.rs` reads its pipeline), or the pipeline's error, also when the reply does not have
/// one value per command.
pub(super) async fn query_each(
    pipe: &redis::Pipeline,
    conn: &mut MultiplexedConnection,
    commands: usize,
) -> RedisResult<Vec<RedisResult<Value>>> {
    let values = pipe.query_async::<Vec<RedisResult<Value>>>(conn).await?;
    if values.len() == commands {
        Ok(values)
    } else {
        Err(RedisError::from((
            redis::ErrorKind::Client,
            "a pipeline's reply did not have one value per command",
            format!("{commands} commands, {} values", values.len()),
        )))
    }
}

/// The task that sends one batch: the calls queued from the first until it takes them.
struct Flush {
    queue: Queue,
    /// Whether it took the queue's calls (which, until then, are its own: the next batch's
    /// task is spawned only by a call that finds the queue empty).
    taken: bool,
}

impl Flush {
    async fn run(mut self) {
        // Behind every task that is ready to run: those about to call join first.
        tokio::task::yield_now().await;
        let entries = {
            let mut queue = lock(&self.queue);
            // The next batch will likely be about as large.
            let capacity = queue.len();
            std::mem::replace(&mut *queue, Vec::with_capacity(capacity))
        };
        self.taken = true;
        send(entries).await;
    }
}

impl Drop for Flush {
    fn drop(&mut self) {
        if !self.taken {
            for entry in std::mem::take(&mut *lock(&self.queue)) {
                let _ = entry.reply.send(Err(unsent()));
            }
        }
    }
}

/// Sends `entries` in runs of the same connection (in practice one run), each as one
/// pipeline, and answers every entry.
async fn send(mut entries: Vec<Entry>) {
    // A call whose caller left before its batch went is not sent, as redis-rs does not send
    // a request whose caller left before its write.
    entries.retain(|e| !e.reply.is_closed());
    while !entries.is_empty() {
        let same = entries
            .iter()
            .take_while(|e| Arc::ptr_eq(&e.connection, &entries[0].connection))
            .count();
        let rest = entries.split_off(same);
        let run = std::mem::replace(&mut entries, rest);
        if entries.is_empty() {
            send_run(run).await;
        } else {
            // Rare: another connection's calls go meanwhile, in a task of their own.
            tokio::spawn(send_run(run));
        }
    }
}

async fn send_run(mut run: Vec<Entry>) {
    let mut conn = run[0].conn.clone();
    if run.len() == 1 {
        let Some(entry) = run.pop() else { return };
        let _ = entry.reply.send(entry.cmd.query_async(&mut conn).await);
        return;
    }
    crate::observe::batch_written(run.len());
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    let mut replies = Vec::with_capacity(run.len());
    for entry in run {
        pipe.add_command(entry.cmd);
        replies.push(entry.reply);
    }
    match query_each(&pipe, &mut conn, replies.len()).await {
        Ok(values) => {
            for (reply, value) in replies.into_iter().zip(values) {
                let _ = reply.send(value);
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}
