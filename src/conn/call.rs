//! One Redis call as the seam sees it ([`Call`]), where its request went ([`Delivery`]), and
//! the renewal group of a key ([`SlotGroup`]): what the seam and its topologies share.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Cmd;

use super::script::ScriptInvocation;

/// A connection as the server knows it (`CLIENT INFO`): what `CLIENT KILL` needs to cut it
/// off.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ServerClient {
    /// `id=`: unique per server process.
    pub(crate) id: u64,
    /// `addr=`: the client's address as the server sees it; with the id it cannot match another
    /// connection, even after a server restart that reuses ids. `None` on servers before 6.2.
    pub(crate) addr: Option<String>,
    /// `laddr=`: the server's own address on this connection (which cluster node it is).
    pub(crate) node: Option<String>,
}

impl ServerClient {
    /// Parses a `CLIENT INFO` line (`id=7 addr=127.0.0.1:50000 laddr=... fd=...`).
    pub(crate) fn parse(info: &str) -> Option<Self> {
        let mut id = None;
        let mut addr = None;
        let mut node = None;
        for field in info.split_whitespace() {
            match field.split_once('=') {
                Some(("id", v)) => id = v.parse().ok(),
                Some(("addr", v)) => addr = Some(v.to_owned()),
                Some(("laddr", v)) => node = Some(v.to_owned()),
                _ => {}
            }
        }
        Some(Self {
            id: id?,
            addr,
            node,
        })
    }
}

/// Where a request went: the seam records it when it hands the request to a connection. Until
/// then a failure means the request was never sent; after, its outcome is unknown, and
/// [`Conn::cut_off`] can make sure it never runs later.
#[derive(Debug, Default)]
pub(crate) struct Delivery(Mutex<Option<Option<Arc<ServerClient>>>>);

impl Delivery {
    /// `true` once the request may have reached Redis.
    pub(crate) fn was_sent(&self) -> bool {
        self.lock().is_some()
    }

    /// Records the connection the request goes out on; a request sent again (after a replica
    /// refused it, so that nothing of the first send ran) records its new connection.
    pub(super) fn record(&self, client: Option<Arc<ServerClient>>) {
        *self.lock() = Some(client);
    }

    /// The connection the request last went out on, if it was sent on one the server could
    /// name.
    pub(super) fn client(&self) -> Option<Arc<ServerClient>> {
        self.lock().clone().flatten()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Option<Arc<ServerClient>>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

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
#[derive(Clone, Copy)]
pub(crate) enum Body<'a> {
    /// A script: EVALSHA, loaded and sent again on NOSCRIPT.
    Script(&'a ScriptInvocation<'a>),
    /// A plain command.
    Command(&'a Cmd),
}

impl Body<'_> {
    /// The request as one command of its own (a script as EVALSHA), to write in a pipeline.
    pub(super) fn to_cmd(self) -> Cmd {
        match self {
            Body::Script(invocation) => invocation.eval_cmd().into_owned(),
            Body::Command(cmd) => cmd.clone(),
        }
    }
}

/// One Redis call, as the seam sees it.
#[derive(Clone)]
pub(crate) struct Call<'a> {
    pub(crate) op: &'static str,
    pub(crate) key: &'a str,
    pub(crate) access: Access,
    pub(crate) resend: Resend,
    /// How long to wait for the reply; `None`: the command timeout.
    pub(crate) limit: Option<Duration>,
    pub(crate) body: Body<'a>,
    /// Records where the request went (see [`Delivery`]).
    pub(crate) sent: Option<&'a Delivery>,
    /// Followed by `WAIT` on the replicas when replica sync is on (see [`Call::synced`]).
    pub(crate) synced: bool,
    /// A script sent again after `NOSCRIPT` twice: loaded and run in one transaction
    /// (`capabilities::load_and_run`).
    pub(super) load_first: bool,
    /// A command about the server, not a name (the capability probes): its empty key is not a
    /// user's name, so the cluster's name rule does not apply to it.
    pub(super) keyless: bool,
}

impl<'a> Call<'a> {
    /// A read-only command on `key`, sent again once if its connection dropped.
    pub(crate) fn read(op: &'static str, key: &'a str, cmd: &'a Cmd) -> Self {
        Self::new(op, key, Access::Read, Resend::Once, Body::Command(cmd))
    }

    /// A read-only script on `key`, sent again once if its connection dropped.
    pub(crate) fn read_script(
        op: &'static str,
        key: &'a str,
        invocation: &'a ScriptInvocation<'a>,
    ) -> Self {
        Self::new(
            op,
            key,
            Access::Read,
            Resend::Once,
            Body::Script(invocation),
        )
    }

    /// A script that writes `key`: never sent twice (see [`idempotent`](Self::idempotent)).
    pub(crate) fn write(
        op: &'static str,
        key: &'a str,
        invocation: &'a ScriptInvocation<'a>,
    ) -> Self {
        Self::new(
            op,
            key,
            Access::Write,
            Resend::Never,
            Body::Script(invocation),
        )
    }

    /// A plain command that writes `key`: never sent twice (see
    /// [`idempotent`](Self::idempotent)).
    pub(crate) fn write_command(op: &'static str, key: &'a str, cmd: &'a Cmd) -> Self {
        Self::new(op, key, Access::Write, Resend::Never, Body::Command(cmd))
    }

    /// A call with the command timeout, whose delivery is not tracked.
    pub(super) fn new(
        op: &'static str,
        key: &'a str,
        access: Access,
        resend: Resend,
        body: Body<'a>,
    ) -> Self {
        Self {
            op,
            key,
            access,
            resend,
            limit: None,
            body,
            sent: None,
            synced: false,
            load_first: false,
            keyless: false,
        }
    }

    /// A write Redisson syncs to the replicas (docs/LAYOUT.md §1.7): with replica sync on,
    /// it is pipelined with `WAIT` (see [`Conn::call_synced`]).
    pub(crate) fn synced(mut self) -> Self {
        self.synced = true;
        self
    }

    /// Marks a call about the server itself, with no key (see the `keyless` field).
    pub(super) fn about_server(mut self) -> Self {
        self.keyless = true;
        self
    }

    /// Marks a write as safe to send a second time.
    pub(crate) fn idempotent(mut self) -> Self {
        self.resend = Resend::Once;
        self
    }

    /// Records in `delivery` whether, and on which connection, the request was sent.
    pub(crate) fn tracked(mut self, delivery: &'a Delivery) -> Self {
        self.sent = Some(delivery);
        self
    }

    /// Waits up to `limit` for the reply instead of the command timeout.
    pub(crate) fn limit(mut self, limit: Duration) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// The renewal group of a key: a watchdog batch script only ever holds keys of one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SlotGroup(pub(super) Option<redis::cluster_routing::Slot>);
