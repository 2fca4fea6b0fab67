//! The connection seam: every Redis call of the crate goes through [`Conn::call`].
//!
//! A [`Call`] says what it is (an operation name, for errors and tracing), which key it is for
//! (where a topology routes it, and the key an error names), whether it reads or writes, and
//! whether it may be sent a second time after its connection broke. Everything that depends on
//! the topology (a single server today; Redis Cluster and Sentinel next), replica sync after
//! writes, tracing and metrics hooks in here and nowhere else; the pub/sub transport gets its
//! subscriber connections here too.
//!
//! Retries: a call is sent at most twice, and only a call marked [`Resend::Once`] (reads,
//! and writes that are idempotent) is sent again, once, on a fresh connection, after its
//! connection dropped. Acquire and release scripts are never re-sent from here: whether they
//! took effect is then unknown, and their callers find out (`crate::holds`).

mod single;

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use redis::aio::PubSub;
use redis::{Cmd, ScriptInvocation, Value};

use crate::config::Config;
use crate::error::{BuildError, Result};

use single::Single;

/// Whether a call reads or writes: where a topology may send it (replicas serve reads), and
/// which calls replica sync follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// Whether a call may be sent a second time after its connection broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resend {
    /// Never: its effect is not idempotent (acquire, release), the caller resolves an unknown
    /// outcome itself.
    Never,
    /// Once, on a fresh connection, when the connection dropped: reads, and writes whose
    /// second run changes nothing more (renewal, force unlock, cleanup).
    Once,
}

/// What a call sends.
pub(crate) enum Body<'a> {
    /// A script: EVALSHA, loaded and sent again on NOSCRIPT.
    Script(&'a ScriptInvocation<'a>),
    /// A plain command.
    Command(&'a Cmd),
}

/// One Redis call, as the seam sees it.
pub(crate) struct Call<'a> {
    pub(crate) op: &'static str,
    pub(crate) key: &'a str,
    pub(crate) access: Access,
    pub(crate) resend: Resend,
    /// How long to wait for the reply; `None`: the command timeout.
    pub(crate) limit: Option<Duration>,
    pub(crate) body: Body<'a>,
    /// Set once the request was handed to a connection: from then on a failure leaves its
    /// outcome unknown; before, nothing was sent.
    pub(crate) sent: Option<&'a AtomicBool>,
}

impl<'a> Call<'a> {
    /// A read-only command on `key`, sent again once if its connection dropped.
    pub(crate) fn read(op: &'static str, key: &'a str, cmd: &'a Cmd) -> Self {
        Self {
            op,
            key,
            access: Access::Read,
            resend: Resend::Once,
            limit: None,
            body: Body::Command(cmd),
            sent: None,
        }
    }

    /// A read-only script on `key`, sent again once if its connection dropped.
    pub(crate) fn read_script(
        op: &'static str,
        key: &'a str,
        invocation: &'a ScriptInvocation<'a>,
    ) -> Self {
        Self {
            op,
            key,
            access: Access::Read,
            resend: Resend::Once,
            limit: None,
            body: Body::Script(invocation),
            sent: None,
        }
    }

    /// A script that writes `key`: never sent twice (see [`idempotent`](Self::idempotent)).
    pub(crate) fn write(
        op: &'static str,
        key: &'a str,
        invocation: &'a ScriptInvocation<'a>,
    ) -> Self {
        Self {
            op,
            key,
            access: Access::Write,
            resend: Resend::Never,
            limit: None,
            body: Body::Script(invocation),
            sent: None,
        }
    }

    /// Marks a write as safe to send a second time.
    pub(crate) fn idempotent(mut self) -> Self {
        self.resend = Resend::Once;
        self
    }

    /// Records in `flag` whether the request was handed to a connection.
    pub(crate) fn tracked(mut self, flag: &'a AtomicBool) -> Self {
        self.sent = Some(flag);
        self
    }

    /// Waits up to `limit` for the reply instead of the command timeout.
    pub(crate) fn limit(mut self, limit: Duration) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// The client's way to Redis.
pub(crate) struct Conn {
    topology: Topology,
    command_timeout: Duration,
}

enum Topology {
    Single(Single),
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.topology {
            Topology::Single(single) => single.fmt(f),
        }
    }
}

impl Conn {
    pub(crate) fn new(config: &Config) -> Result<Self, BuildError> {
        Ok(Self {
            topology: Topology::Single(Single::new(config)?),
            command_timeout: config.command_timeout,
        })
    }

    /// Runs one call. The only function of the crate that sends a request to Redis.
    pub(crate) async fn call(&self, call: Call<'_>) -> Result<Value> {
        let limit = call.limit.unwrap_or(self.command_timeout);
        let Topology::Single(single) = &self.topology;
        let result = match single.run(&call, limit).await {
            Err(e) if call.resend == Resend::Once && e.connection_dropped() => {
                tracing::debug!(op = call.op, key = call.key, error = %e, "connection dropped; sending once more");
                single.run(&call, limit).await
            }
            other => other,
        };
        if let Err(e) = &result {
            tracing::debug!(op = call.op, key = call.key, access = ?call.access, error = %e, "redis call failed");
        }
        result
    }

    /// A dedicated connection for the pub/sub transport's subscriptions.
    pub(crate) async fn subscriber(&self) -> Result<PubSub> {
        let Topology::Single(single) = &self.topology;
        single.subscriber().await
    }

    /// The command a release script publishes its message with: `PUBLISH` (a single server;
    /// a cluster with sharded pub/sub will use `SPUBLISH`, docs/LAYOUT.md §1.6).
    pub(crate) fn publish_command(&self) -> &'static str {
        "PUBLISH"
    }

    /// The time limit of one command.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// Closes the connections; later calls fail with `Error::Shutdown`.
    pub(crate) fn close(&self) {
        let Topology::Single(single) = &self.topology;
        single.close();
    }
}
