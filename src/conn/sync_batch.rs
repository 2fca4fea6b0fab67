//! Synced calls in flight together, written before one `WAIT`.
//!
//! A synced call goes with `WAIT <replicas> <timeout>` on a connection it holds (sync.rs):
//! `WAIT` blocks its connection until the replicas answer. Alone, that costs the call nothing
//! more; with many in flight, each held a connection of the synced pool (the rest waiting for
//! one) and each sent its own `WAIT`. `WAIT` counts the replicas that acknowledged every write
//! its connection sent before it, so the scripts of several calls followed by one `WAIT` each
//! get the answer they would have had alone: each write was acknowledged by that many
//! replicas before its call returns, which is all Redisson's `checkLockSyncedSlaves` asks.
//!
//! While another synced call is in flight, a synced call joins the open [`Round`]: the calls of
//! one connection not written yet. The call that finds none open checks out a connection,
//! opens a round on it and spawns the task that, once every task ready to run has had its turn
//! to join (`yield_now`), takes the round and writes its calls and one `WAIT` as one pipeline,
//! then hands each call its own reply and the `WAIT`'s. A call knows its round's connection
//! when it joins, and records it then (for the cut-off of an unknown outcome). Calls arriving
//! meanwhile open the next round: each round in flight holds a connection of its own, so that
//! a slow `WAIT` delays only its own calls, and the calls waiting for a connection form the
//! next round while they wait.
//!
//! A pipeline of plain commands is not a transaction: each script runs as it would alone, in
//! order, and an error answers only its own call. A round whose task was dropped unrun (the
//! runtime shut down) answers its calls as never sent.

use std::sync::{Arc, Mutex};

use redis::aio::MultiplexedConnection;
use redis::{Cmd, RedisResult, Value};
use tokio::sync::oneshot;

use super::batch::{lock, query_each, unsent};
use super::sync::{WaitFor, WaitReply};

/// One call's reply in a round: its own, and the round's `WAIT`'s.
type Reply = RedisResult<(Value, WaitReply)>;

/// A reply, and what keeps the round's connection checked out: the connection goes back to its
/// pool once every call of the round has settled its outcome (and marked it broken if it
/// failed), as a call alone keeps its own until then.
type Answer<H> = (Reply, Arc<H>);

/// The calls written on one connection before one `WAIT`. `S` is what a call settles its
/// outcome with (the connection's handle), `H` what keeps the connection checked out until
/// the round's reply.
struct Round<S, H> {
    shared: S,
    conn: MultiplexedConnection,
    held: H,
    wait: WaitFor,
    calls: Vec<(Cmd, oneshot::Sender<Answer<H>>)>,
}

type Open<S, H> = Arc<Mutex<Option<Round<S, H>>>>;

/// The open round of a server's synced calls (see the module's documentation).
pub(super) struct Rounds<S, H> {
    open: Open<S, H>,
}

impl<S, H> Default for Rounds<S, H> {
    fn default() -> Self {
        Self {
            open: Arc::new(Mutex::new(None)),
        }
    }
}

/// A call's reply to come from its round.
pub(super) struct Pending<H>(oneshot::Receiver<Answer<H>>);

impl<H> Pending<H> {
    /// The reply, and the round's connection's hold (to keep until the outcome is settled;
    /// `None` when the round was never written).
    pub(super) async fn reply(self) -> (Reply, Option<Arc<H>>) {
        match self.0.await {
            Ok((reply, held)) => (reply, Some(held)),
            Err(_) => (Err(unsent()), None),
        }
    }
}

impl<S: Clone + Send + 'static, H: Send + Sync + 'static> Rounds<S, H> {
    /// Joins `cmd` to the open round if its `WAIT` is `wait`: the round's connection (to be
    /// recorded, and to settle with) and the reply to come. `Err(cmd)` when no such round is
    /// open.
    pub(super) fn join(&self, cmd: Cmd, wait: WaitFor) -> Result<(S, Pending<H>), Cmd> {
        Self::join_open(&mut lock(&self.open), cmd, wait)
    }

    fn join_open(
        open: &mut Option<Round<S, H>>,
        cmd: Cmd,
        wait: WaitFor,
    ) -> Result<(S, Pending<H>), Cmd> {
        match open {
            Some(round) if round.wait == wait => {
                let (reply, pending) = oneshot::channel();
                round.calls.push((cmd, reply));
                Ok((round.shared.clone(), Pending(pending)))
            }
            _ => Err(cmd),
        }
    }

    /// Opens a round with `cmd` on `conn` (`shared`'s connection, kept checked out by `held`),
    /// or joins the round another call opened meanwhile (`held` then goes back to its pool).
    /// `None` when a round with another `WAIT` is open (the replica count changed): the call
    /// goes alone.
    pub(super) fn open(
        &self,
        cmd: Cmd,
        wait: WaitFor,
        shared: S,
        conn: MultiplexedConnection,
        held: H,
    ) -> Option<(S, Pending<H>)> {
        let mut open = lock(&self.open);
        let cmd = match Self::join_open(&mut open, cmd, wait) {
            Ok(joined) => return Some(joined),
            Err(_) if open.is_some() => return None,
            Err(cmd) => cmd,
        };
        let (reply, pending) = oneshot::channel();
        *open = Some(Round {
            shared: shared.clone(),
            conn,
            held,
            wait,
            calls: vec![(cmd, reply)],
        });
        drop(open);
        // The round stays open until this task takes it; the next round opens only after.
        tokio::spawn(
            Flush {
                open: self.open.clone(),
                taken: false,
            }
            .run(),
        );
        Some((shared, Pending(pending)))
    }
}

/// The task that writes one round.
struct Flush<S, H> {
    open: Open<S, H>,
    /// Whether it took the round (until then the open round is its own).
    taken: bool,
}

impl<S, H> Flush<S, H> {
    async fn run(mut self) {
        // Behind every task that is ready to run: those about to call join first.
        tokio::task::yield_now().await;
        let round = lock(&self.open).take();
        self.taken = true;
        if let Some(round) = round {
            send(round).await;
        }
    }
}

impl<S, H> Drop for Flush<S, H> {
    fn drop(&mut self) {
        if !self.taken {
            // Its calls' senders dropped: each call gets `unsent`.
            drop(lock(&self.open).take());
        }
    }
}

/// Writes the round's calls then its `WAIT` as one pipeline, and answers every call.
async fn send<S, H>(round: Round<S, H>) {
    let Round {
        mut conn,
        held,
        wait,
        mut calls,
        ..
    } = round;
    // A call whose caller left before its round went is not sent (as batch.rs).
    calls.retain(|(_, reply)| !reply.is_closed());
    if calls.is_empty() {
        return;
    }
    if calls.len() > 1 {
        crate::observe::batch_written(calls.len());
    }
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    let mut replies = Vec::with_capacity(calls.len());
    for (cmd, reply) in calls {
        pipe.add_command(cmd);
        replies.push(reply);
    }
    super::sync::add_wait(&mut pipe, wait);
    let values = query_each(&pipe, &mut conn, replies.len() + 1).await;
    let held = Arc::new(held);
    match values {
        Ok(mut values) => {
            let waited = super::sync::wait_reply(values.pop());
            for (reply, value) in replies.into_iter().zip(values) {
                let _ = reply.send((value.map(|value| (value, waited.clone())), held.clone()));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send((Err(e.clone()), held.clone()));
            }
        }
    }
}
