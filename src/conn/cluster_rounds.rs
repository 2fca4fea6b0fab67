//! A cluster's synced calls in rounds, on a connection of their own per node.
//!
//! redis-rs's cluster client keeps one multiplexed connection per node, and `WAIT` blocks the
//! connection it is sent on until the replicas answer: every call queued behind a synced call
//! waited for its `WAIT`, and each `WAIT` needed an acknowledgement round of its own. It also
//! reads a pipeline's replies as one: a `MOVED` (or `ASK`, `TRYAGAIN`, ...) for one command
//! fails the whole pipeline, so the replies of the commands that did run are lost, and a round
//! of several calls' scripts could not go through it.
//!
//! So a synced call goes in its node's round (sync_batch.rs, as on a single server; a call
//! alone is a round of one) on connections of the rounds' own to that node, opened on first
//! use to the address the node reports for the call's slot (`laddr` of `CLIENT INFO`), with
//! the client's login and TLS settings: the scripts of the calls that come while the round
//! forms, then one `WAIT`, as one pipeline. Each round in flight holds one of the node's
//! connections (at most the client's pool size per node), so that a slow `WAIT` delays only
//! its own calls; while all are in rounds, a call waits for one to come back (or for a round
//! it can join). No `WAIT` then blocks the cluster connection that every other call shares
//! (with synced calls alone on it, a flood of them held up the replica count's `INFO` for
//! seconds: S14 at 10,000 fair-lock waiters on a cluster). Each reply is the call's own: a
//! call the node refused without running it (`MOVED`, `ASK`, a transition, `NOSCRIPT`) goes
//! again alone through the cluster client, which follows the redirect or loads the script. A
//! call records its round's connection before the round goes, so that an unknown outcome is
//! cut off there; that connection is not used again. A node that cannot be reached this way
//! (an address not reachable from here, a certificate for another name) is tried again after
//! [`RETRY_AFTER`], its synced calls going alone meanwhile.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, RedisResult};
use tokio::sync::Notify;

use super::call::{Call, ServerClient};
use super::sync::WaitFor;
use super::sync_batch::{Pending, Rounds};
use super::tls::Tls;
use crate::credentials::{self, CredentialsProvider};

/// How long a node that could not be connected to has its synced calls go alone.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The node connections of a cluster's synced rounds, by the node's reported address.
pub(super) struct NodeRounds {
    /// The first seed's connection settings with the configured login: each node's
    /// connection is this, at the node's address.
    base: ConnectionInfo,
    provider: Option<CredentialsProvider>,
    tls: Tls,
    config: AsyncConnectionConfig,
    /// At most this many connections per node (the client's pool size).
    per_node: usize,
    links: Mutex<HashMap<String, Arc<Link>>>,
}

/// A node connection and its identity.
type Opened = (MultiplexedConnection, Arc<ServerClient>);

/// One node's connections not in a round now, how many it has, and its open round. Each
/// round in flight holds a connection of its own (as a single server's rounds hold one of the
/// synced pool): `WAIT` blocks its connection, and a round behind it on the same connection
/// would wait for it.
struct Link {
    idle: Mutex<(Vec<Opened>, usize)>,
    /// Notified whenever a connection leaves a round (back to `idle`, or closed).
    freed: Notify,
    /// Since when the node could not be connected to (its calls go alone until
    /// [`RETRY_AFTER`] later).
    unreachable: Mutex<Option<Instant>>,
    rounds: Rounds<Arc<ServerClient>, Held>,
}

/// A node connection a round holds until every call of it has settled: back to the node's
/// idle connections then, unless a call found it broken.
pub(super) struct Held {
    link: Arc<Link>,
    opened: Option<Opened>,
    broken: AtomicBool,
}

impl Held {
    /// The connection failed (an unknown outcome): it is closed, not used again.
    pub(super) fn broken(&self) {
        self.broken.store(true, Ordering::Release);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        {
            let mut idle = self.link.idle();
            match self.opened.take() {
                Some(opened) if !self.broken.load(Ordering::Acquire) => idle.0.push(opened),
                _ => idle.1 -= 1,
            }
        }
        self.link.freed.notify_waiters();
    }
}

impl Link {
    fn idle(&self) -> std::sync::MutexGuard<'_, (Vec<Opened>, usize)> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl NodeRounds {
    pub(super) fn new(
        base: ConnectionInfo,
        provider: Option<CredentialsProvider>,
        tls: Tls,
        timeouts: (Duration, Duration),
        per_node: usize,
    ) -> Self {
        Self {
            base,
            provider,
            tls,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(timeouts.0))
                .set_response_timeout(Some(timeouts.1)),
            per_node: per_node.max(1),
            links: Mutex::new(HashMap::new()),
        }
    }

    /// `call` in the open round of `node` (the address its slot's master reports), or in one
    /// it opens there: the identity of the round's connection and the reply to come. While
    /// every connection to the node is in a round, it waits for one (or for a round it can
    /// join) up to the call's time limit, which bounds the whole call. `None` when it is to go
    /// alone: the node cannot be connected to this way, or a round with another `WAIT` is
    /// open there.
    pub(super) async fn join(
        &self,
        call: &Call<'_>,
        node: &str,
        wait: WaitFor,
    ) -> Option<(Arc<ServerClient>, Pending<Held>)> {
        let link = self.link(node);
        let mut cmd = call.body.to_cmd();
        loop {
            // Created first: woken by any connection freed from here on.
            let freed = link.freed.notified();
            cmd = match link.rounds.join(cmd, wait) {
                Ok(joined) => return Some(joined),
                Err(cmd) => cmd,
            };
            match self.checkout(&link, node).await {
                Ok(held) => {
                    let (conn, identity) = held.opened.clone()?;
                    return link.rounds.open(cmd, wait, identity, conn, held);
                }
                Err(false) => return None,
                Err(true) => freed.await,
            }
        }
    }

    /// Closes the idle connections (those in a round close once it has settled).
    pub(super) fn close(&self) {
        self.links
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The node's link, made on first use.
    fn link(&self, node: &str) -> Arc<Link> {
        let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(link) = links.get(node) {
            return link.clone();
        }
        let link = Arc::new(Link {
            idle: Mutex::new((Vec::new(), 0)),
            freed: Notify::new(),
            unreachable: Mutex::new(None),
            rounds: Rounds::default(),
        });
        links.insert(node.to_owned(), link.clone());
        link
    }

    /// An idle connection to the node, or a new one while it has fewer than `per_node`;
    /// `Err(true)` when every one is in a round, `Err(false)` when the node cannot be
    /// connected to this way.
    async fn checkout(&self, link: &Arc<Link>, node: &str) -> Result<Held, bool> {
        {
            let mut idle = link.idle();
            if let Some(opened) = idle.0.pop() {
                return Ok(Held {
                    link: link.clone(),
                    opened: Some(opened),
                    broken: AtomicBool::new(false),
                });
            }
            if idle.1 >= self.per_node {
                return Err(true);
            }
            let mut unreachable = link
                .unreachable
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if unreachable.is_some_and(|since| since.elapsed() < RETRY_AFTER) {
                return Err(false);
            }
            *unreachable = None;
            idle.1 += 1;
        }
        // Counted from here: a failure (or a drop of this future) gives the place back.
        let mut held = Held {
            link: link.clone(),
            opened: None,
            broken: AtomicBool::new(false),
        };
        held.opened = Box::pin(self.open(node)).await;
        if held.opened.is_none() {
            *link
                .unreachable
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
            return Err(false);
        }
        Ok(held)
    }

    /// Opens a connection to `node`, and has it name itself; `None` (with a warning) if it
    /// cannot be.
    async fn open(&self, node: &str) -> Option<Opened> {
        match self.try_open(node).await {
            Ok(Some(opened)) => Some(opened),
            Ok(None) => {
                tracing::warn!(
                    node,
                    "the node does not name its connection (CLIENT INFO, CLIENT ID): its synced calls go one at a time for a while"
                );
                None
            }
            Err(error) => {
                tracing::warn!(node, %error, "no connection of its own to this node for its synced calls; they go one at a time for a while");
                None
            }
        }
    }

    async fn try_open(&self, node: &str) -> RedisResult<Option<Opened>> {
        let Some(addr) = at(self.base.addr(), node) else {
            return Ok(None);
        };
        let mut info = self.base.clone().set_addr(addr);
        if let Some(provider) = &self.provider {
            info = credentials::apply(info, provider.fetch().await?);
        }
        let client = self.tls.client(info)?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        Ok(super::single::identify(&mut conn)
            .await?
            .map(|identity| (conn, identity)))
    }
}

/// `base` (a seed's address: plain or TLS, with its TLS settings) at `node` (`host:port`).
fn at(base: &ConnectionAddr, node: &str) -> Option<ConnectionAddr> {
    let (host, port) = node.rsplit_once(':')?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = port.parse().ok()?;
    match base {
        ConnectionAddr::Tcp(..) => Some(ConnectionAddr::Tcp(host, port)),
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => Some(ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_address_keeps_the_seed_kind() {
        let plain = ConnectionAddr::Tcp("seed".into(), 1);
        assert_eq!(
            at(&plain, "10.0.0.2:7001"),
            Some(ConnectionAddr::Tcp("10.0.0.2".into(), 7001))
        );
        assert_eq!(
            at(&plain, "[::1]:7002"),
            Some(ConnectionAddr::Tcp("::1".into(), 7002))
        );
        assert_eq!(at(&plain, "no-port"), None);
        let tls = ConnectionAddr::TcpTls {
            host: "seed".into(),
            port: 1,
            insecure: true,
            tls_params: None,
        };
        assert_eq!(
            at(&tls, "10.0.0.2:7001"),
            Some(ConnectionAddr::TcpTls {
                host: "10.0.0.2".into(),
                port: 7001,
                insecure: true,
                tls_params: None,
            })
        );
    }
}
