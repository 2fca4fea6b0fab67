//! Redis Cluster (issue 12), against a real cluster the test starts: 6 `redis-server`
//! processes on free loopback ports (3 masters, 3 replicas, `redis-cli --cluster create
//! --cluster-replicas 1`), shared by every test of this binary (it has its own `main`, so the
//! cluster is started once and torn down at the end), each test on names of its own.
//!
//! The tests that change the topology (failover, slot migration, a killed master) run last,
//! in that order. Run one test with `cargo test --test cluster -- NAME`.

mod common;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use common::{ms, unique_name};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{ProtocolVersion, PushInfo, PushKind, Value};
use redisson_sync::{Client, Error, LockOptions, Owner, config::PubSubMode};
use testkit::{ClusterNode, RedisCluster, Role};
use tokio::sync::mpsc;
use tokio::time::{sleep, timeout};

type TestFn = for<'a> fn(&'a mut Ctx) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

/// What every test gets: the cluster.
struct Ctx {
    cluster: RedisCluster,
}

impl Ctx {
    fn seeds(&self) -> Vec<String> {
        self.cluster.seed_urls()
    }

    /// A client of the cluster in `mode`, with these watchdog and re-check periods.
    async fn client(&self, mode: PubSubMode, watchdog: Duration, recheck: Duration) -> Client {
        Client::builder()
            .cluster(self.seeds())
            .pubsub(mode)
            .watchdog_timeout(watchdog)
            .recheck_interval(recheck)
            .connect()
            .await
            .unwrap()
    }

    /// A raw cluster connection, for looking at keys.
    async fn raw(&self) -> ClusterConnection {
        ClusterClient::new(self.seeds())
            .unwrap()
            .get_async_connection()
            .await
            .unwrap()
    }

    /// Names `<prefix>:<i>` whose slots are served by each of the masters, one per master.
    fn names_on_every_master(&self, prefix: &str) -> Vec<(String, ClusterNode)> {
        let mut found: Vec<(String, ClusterNode)> = Vec::new();
        for i in 0..200 {
            let name = format!("{prefix}:{i}");
            let node = self.cluster.node_for_key(&name);
            if !found.iter().any(|(_, n)| n.port == node.port) {
                found.push((name, node));
            }
            if found.len() == 3 {
                return found;
            }
        }
        panic!("no names found on all three masters: {found:?}");
    }

    /// `CLUSTER MYID` of the node at `index`.
    fn node_id(&self, index: usize) -> String {
        let mut con = self.cluster.server(index).connect();
        redis::cmd("CLUSTER").arg("MYID").query(&mut con).unwrap()
    }

    /// `CLUSTER SETSLOT <slot> NODE <id>` on every node that answers: the slot is `id`'s.
    fn assign_slot(&self, slot: i64, id: &str) {
        for node in self.cluster.nodes() {
            let mut con = self.cluster.server(node.index).connect();
            let _: Value = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(id)
                .query(&mut con)
                .unwrap_or(Value::Nil);
        }
    }

    /// The index of the node listening on `port`.
    fn index_of(&self, port: u16) -> usize {
        self.cluster
            .nodes()
            .iter()
            .find(|n| n.port == port)
            .map(|n| n.index)
            .expect("a node of the cluster")
    }

    /// Waits (up to 10 s) until `replica` has everything `master` wrote so far (its replication
    /// offset reached the master's).
    fn wait_synced(&self, master: ClusterNode, replica: ClusterNode) {
        let field = |index: usize, name: &str| -> i64 {
            let mut con = self.cluster.server(index).connect();
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut con)
                .unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(-1)
        };
        let target = field(master.index, "master_repl_offset");
        let deadline = Instant::now() + Duration::from_secs(10);
        while field(replica.index, "slave_repl_offset") < target {
            assert!(
                Instant::now() < deadline,
                "replica {} never caught up",
                replica.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Restarts `node`, a master the test killed, and waits until it is back as the replica of
    /// `key`'s master and in sync with it: the next test finds every shard with a replica to
    /// fail over to.
    fn rejoin(&mut self, node: ClusterNode, key: &str) {
        self.cluster.restart(node.index);
        let rejoined = self.replica_of(key);
        self.wait_synced(self.cluster.node_for_key(key), rejoined);
    }

    /// The replica of the master serving `key` (asked of that master: `ROLE`), waiting up to
    /// 10 s for one to be attached (right after the cluster started, or after a node rejoined).
    fn replica_of(&self, key: &str) -> ClusterNode {
        let master = self.cluster.node_for_key(key);
        let mut con = self.cluster.server(master.index).connect();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let role: Vec<Value> = redis::cmd("ROLE").query(&mut con).unwrap();
            if let Some(Value::Array(replicas)) = role.get(2) {
                for replica in replicas {
                    if let Value::Array(fields) = replica
                        && let Some(Value::BulkString(port)) = fields.get(1)
                    {
                        let port: u16 = String::from_utf8_lossy(port).parse().unwrap();
                        return self.cluster.node(self.index_of(port));
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "master {} has no replica: {role:?}",
                master.port
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// An observer of one channel: a RESP3 cluster connection subscribed with `SSUBSCRIBE`
/// (on the slot's master) or `SUBSCRIBE`.
struct Observer {
    _conn: ClusterConnection,
    pushes: mpsc::UnboundedReceiver<PushInfo>,
}

impl Observer {
    async fn new(ctx: &Ctx, channel: &str, sharded: bool) -> Self {
        let (tx, pushes) = mpsc::unbounded_channel();
        let mut conn = ClusterClient::builder(ctx.seeds())
            .use_protocol(ProtocolVersion::RESP3)
            .push_sender(tx)
            .build()
            .unwrap()
            .get_async_connection()
            .await
            .unwrap();
        if sharded {
            // A server without sharded pub/sub (before 7.0) has no sharded channel to watch.
            if let Err(e) = conn.ssubscribe(channel).await {
                assert!(!has_sharded_pubsub(ctx), "SSUBSCRIBE: {e}");
            }
        } else {
            conn.subscribe(channel).await.unwrap();
        }
        Self {
            _conn: conn,
            pushes,
        }
    }

    /// The messages received within `within`, as `(kind, payload)`.
    async fn messages(&mut self, within: Duration) -> Vec<(&'static str, String)> {
        let until = tokio::time::Instant::now() + within;
        let mut got = Vec::new();
        while let Ok(Some(push)) = tokio::time::timeout_at(until, self.pushes.recv()).await {
            let kind = match push.kind {
                PushKind::Message => "message",
                PushKind::SMessage => "smessage",
                _ => continue,
            };
            let payload = match push.data.get(1) {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            };
            got.push((kind, payload));
        }
        got
    }
}

/// The hash `key` (sorted; empty when absent), through a cluster connection or on one node.
async fn hgetall<C: redis::aio::ConnectionLike + Send>(
    raw: &mut C,
    key: &str,
) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(key)
        .query_async(raw)
        .await
        .unwrap();
    all.sort();
    all
}

async fn pttl(raw: &mut ClusterConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(raw).await.unwrap()
}

async fn exists_on(ctx: &Ctx, node: ClusterNode, key: &str) -> bool {
    let mut con = ctx
        .cluster
        .server(node.index)
        .redis_client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // READONLY-free: EXISTS on the node itself answers MOVED unless it serves the slot.
    let reply: redis::RedisResult<i64> = redis::cmd("EXISTS").arg(key).query_async(&mut con).await;
    matches!(reply, Ok(1))
}

fn field(client: &Client, owner: Owner) -> String {
    format!("{}:{}", client.id(), owner.id())
}

/// `redisson_lock__channel:{N}` (prefixName, docs/LAYOUT.md §1.2).
fn channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

// -----------------------------------------------------------------------------------------
// Every primitive on every master
// -----------------------------------------------------------------------------------------

fn every_primitive_on_every_master(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let client = ctx
            .client(
                PubSubMode::Auto,
                Duration::from_secs(30),
                Duration::from_secs(1),
            )
            .await;
        let mut raw = ctx.raw().await;
        let owner = Owner::new(1);
        let opts = LockOptions::new().owner(owner);
        let prefix = unique_name("every");
        let mut names = ctx.names_on_every_master(&prefix);
        // A tagged name too: its keys go by the tag.
        let tagged = format!("{{{prefix}-tag}}:order:42");
        let node = ctx.cluster.node_for_key(&tagged);
        names.push((tagged, node));
        let mut masters = BTreeSet::new();
        for (name, node) in &names {
            masters.insert(node.port);
            // lock, fair, write, read, fenced, spin, non-reentrant: the hash on the slot's
            // master, then nothing once released.
            let rw = client.rw_lock(name.clone());
            let kinds: Vec<(&str, Box<dyn redisson_sync::DistributedLock>)> = vec![
                ("lock", client.lock(name.clone()).into()),
                ("fair", client.fair_lock(name.clone()).into()),
                ("write", rw.write_lock().into()),
                ("read", rw.read_lock().into()),
                ("fenced", client.fenced_lock(name.clone()).into()),
                ("spin", client.spin_lock(name.clone()).into()),
                (
                    "nonreentrant",
                    client.non_reentrant_lock(name.clone()).into(),
                ),
            ];
            for (kind, lock) in kinds {
                let guard = lock.lock_with_options(&opts).await.unwrap();
                let hash = hgetall(&mut raw, name).await;
                let expected_field = match kind {
                    "write" => format!("{}:write", field(&client, owner)),
                    _ => field(&client, owner),
                };
                assert!(
                    hash.iter().any(|(f, v)| *f == expected_field && v == "1"),
                    "{kind} {name}: {hash:?}"
                );
                assert!(
                    exists_on(ctx, *node, name).await,
                    "{kind} {name} not on {node:?}"
                );
                let ttl = pttl(&mut raw, name).await;
                assert!(ttl > 29_000 && ttl <= 30_000, "{kind} {name}: pttl {ttl}");
                guard.unlock().await.unwrap();
                assert!(hgetall(&mut raw, name).await.is_empty(), "{kind} {name}");
            }
            // Semaphore, expirable semaphore, latch.
            let sem_name = format!("{name}:sem");
            let sem = client.semaphore(sem_name.clone());
            assert!(sem.try_set_permits(2).await.unwrap());
            let permits = sem.acquire(2).await.unwrap();
            assert_eq!(sem.available_permits().await.unwrap(), 0);
            permits.release().await.unwrap();
            assert_eq!(sem.available_permits().await.unwrap(), 2);
            let psem_name = format!("{name}:psem");
            let psem = client.permit_expirable_semaphore(psem_name.clone());
            assert!(psem.try_set_permits(1).await.unwrap());
            let ids = psem
                .acquire(1, Some(Duration::from_secs(10)))
                .await
                .unwrap();
            assert_eq!(psem.available_permits().await.unwrap(), 0);
            psem.release(&ids).await.unwrap();
            assert_eq!(psem.available_permits().await.unwrap(), 1);
            if !name.contains('{') {
                let latch = client.count_down_latch(format!("{name}:latch"));
                assert!(latch.try_set_count(1).await.unwrap());
                latch.count_down().await.unwrap();
                assert!(latch.await_for(ms(100)).await.unwrap());
            }
            for key in [&sem_name, &psem_name] {
                let _: () = redis::cmd("DEL")
                    .arg(key)
                    .query_async(&mut raw)
                    .await
                    .unwrap();
            }
        }
        assert_eq!(masters.len(), 3, "names on {masters:?}");
        client.shutdown().await;
    })
}

// -----------------------------------------------------------------------------------------
// Pub/sub flavours
// -----------------------------------------------------------------------------------------

/// In each mode: which verb the unlock message goes out with (a plain `SSUBSCRIBE` on the
/// slot's master and a plain `SUBSCRIBE` listen), and a waiter of the same mode is woken by it
/// (its re-check is 60 s away, so only the message can wake it within the bound).
async fn flavour(ctx: &Ctx, mode: PubSubMode, sharded_seen: bool, classic_seen: bool) {
    let holder = ctx
        .client(mode, Duration::from_secs(30), Duration::from_secs(60))
        .await;
    let waiter = ctx
        .client(mode, Duration::from_secs(30), Duration::from_secs(60))
        .await;
    for (name, _) in ctx.names_on_every_master(&unique_name(mode.as_str())) {
        let mut sharded = Observer::new(ctx, &channel(&name), true).await;
        let mut classic = Observer::new(ctx, &channel(&name), false).await;
        let guard = holder.lock(name.clone()).lock().await.unwrap();
        let lock = waiter.lock(name.clone());
        let waiting = tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            (g, Instant::now())
        });
        sleep(ms(300)).await; // the waiter has tried, failed and subscribed
        let released = Instant::now();
        guard.unlock().await.unwrap();
        let (g, woken) = timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        let delay = woken - released;
        assert!(
            delay < Duration::from_secs(2),
            "{mode:?} {name}: woken {delay:?} after the unlock (not by message)"
        );
        g.unlock().await.unwrap();
        let s = sharded.messages(ms(300)).await;
        let c = classic.messages(ms(50)).await;
        assert_eq!(
            s,
            if sharded_seen {
                vec![("smessage", "0".to_owned()), ("smessage", "0".to_owned())]
            } else {
                vec![]
            },
            "{mode:?} {name}: sharded observer"
        );
        assert_eq!(
            c,
            if classic_seen {
                vec![("message", "0".to_owned()), ("message", "0".to_owned())]
            } else {
                vec![]
            },
            "{mode:?} {name}: classic observer"
        );
        eprintln!("{mode:?} {name}: waiter woken {delay:?} after the unlock");
    }
    holder.shutdown().await;
    waiter.shutdown().await;
}

fn auto_publishes_sharded_on_redis_7(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(flavour(ctx, PubSubMode::Auto, true, false))
}

fn sharded_publishes_sharded(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(flavour(ctx, PubSubMode::Sharded, true, false))
}

fn classic_publishes_classic(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(flavour(ctx, PubSubMode::Classic, false, true))
}

fn both_publishes_both(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(flavour(ctx, PubSubMode::Both, true, true))
}

/// A `both` waiter is woken by a sharded-only and by a classic-only holder.
fn both_hears_either(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let waiter = ctx
            .client(
                PubSubMode::Both,
                Duration::from_secs(30),
                Duration::from_secs(60),
            )
            .await;
        for mode in [PubSubMode::Sharded, PubSubMode::Classic] {
            let holder = ctx
                .client(mode, Duration::from_secs(30), Duration::from_secs(60))
                .await;
            let name = unique_name("either");
            let guard = holder.lock(name.clone()).lock().await.unwrap();
            let lock = waiter.lock(name.clone());
            let waiting = tokio::spawn(async move { lock.lock().await.unwrap() });
            sleep(ms(300)).await;
            let released = Instant::now();
            guard.unlock().await.unwrap();
            let g = timeout(Duration::from_secs(5), waiting)
                .await
                .unwrap()
                .unwrap();
            assert!(released.elapsed() < Duration::from_secs(2), "{mode:?}");
            g.unlock().await.unwrap();
            holder.shutdown().await;
        }
        waiter.shutdown().await;
    })
}

// -----------------------------------------------------------------------------------------
// Watchdog, names, bad input
// -----------------------------------------------------------------------------------------

/// Holds on all three masters renew (a batch script never spans slots): over three
/// watchdog timeouts every key keeps a TTL and it rises again after each renewal.
fn watchdog_renews_on_every_master(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let watchdog = ms(1500);
        let client = ctx
            .client(PubSubMode::Auto, watchdog, Duration::from_secs(1))
            .await;
        let mut raw = ctx.raw().await;
        let names = ctx.names_on_every_master(&unique_name("renew"));
        let mut guards = Vec::new();
        for (name, _) in &names {
            guards.push(client.lock(name.clone()).lock().await.unwrap());
            guards.push(
                client
                    .fair_lock(format!("{name}:fair"))
                    .lock()
                    .await
                    .unwrap(),
            );
            guards.push(
                client
                    .rw_lock(format!("{name}:rw"))
                    .read_lock()
                    .lock()
                    .await
                    .unwrap(),
            );
        }
        let keys: Vec<String> = names
            .iter()
            .flat_map(|(n, _)| [n.clone(), format!("{n}:fair"), format!("{n}:rw")])
            .collect();
        let mut last = vec![i64::MAX; keys.len()];
        let mut rises = vec![0; keys.len()];
        let until = Instant::now() + watchdog * 3;
        while Instant::now() < until {
            for (i, key) in keys.iter().enumerate() {
                let ttl = pttl(&mut raw, key).await;
                assert!(ttl > 0, "{key} lost its TTL or expired: {ttl}");
                if ttl > last[i] {
                    rises[i] += 1;
                }
                last[i] = ttl;
            }
            sleep(ms(50)).await;
        }
        assert!(rises.iter().all(|&r| r >= 2), "renewals per key: {rises:?}");
        for g in &guards {
            assert!(!g.is_lost());
        }
        for g in guards {
            g.unlock().await.unwrap();
        }
        for key in &keys {
            assert_eq!(pttl(&mut raw, key).await, -2, "{key}");
        }
        client.shutdown().await;
    })
}

/// With a credentials provider every node connection logs in as the provider's user; with
/// replica sync (`auto`: on in a cluster) every acquire and unlock is followed by one `WAIT`
/// on the master of its slot, on each of the three masters.
fn replica_sync_and_credentials_on_every_master(
    ctx: &mut Ctx,
) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        use redisson_sync::config::{Credentials, CredentialsProvider};

        for node in ctx.cluster.nodes() {
            let mut con = ctx.cluster.server(node.index).conn().await;
            let _: () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg("cluster-app")
                .arg("on")
                .arg(">cluster-token")
                .arg("~*")
                .arg("&*")
                .arg("+@all")
                .query_async(&mut con)
                .await
                .unwrap();
        }
        let asked = Arc::new(AtomicUsize::new(0));
        let provider = {
            let asked = asked.clone();
            CredentialsProvider::new(move || {
                asked.fetch_add(1, Ordering::SeqCst);
                async { Ok(Credentials::new("cluster-app", "cluster-token")) }
            })
        };
        let client = Client::builder()
            .cluster(ctx.seeds())
            .credentials_provider(provider)
            .connect()
            .await
            .unwrap();
        let names = ctx.names_on_every_master(&unique_name("sync"));
        // Scripts loaded on every master first (a NOSCRIPT sends the pipeline twice).
        for (name, _) in &names {
            let guard = client.lock(name.clone()).try_lock().await.unwrap().unwrap();
            guard.unlock().await.unwrap();
        }
        for (name, node) in &names {
            let mut master = ctx.cluster.server(node.index).conn().await;
            let waits = |info: String| {
                info.lines()
                    .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
                    .and_then(|rest| rest.split(',').next())
                    .map_or(0, |n| n.parse::<u64>().unwrap())
            };
            let before = waits(
                redis::cmd("INFO")
                    .arg("commandstats")
                    .query_async(&mut master)
                    .await
                    .unwrap(),
            );
            let guard = client.lock(name.clone()).try_lock().await.unwrap().unwrap();
            guard.unlock().await.unwrap();
            let after = waits(
                redis::cmd("INFO")
                    .arg("commandstats")
                    .query_async(&mut master)
                    .await
                    .unwrap(),
            );
            assert_eq!(after - before, 2, "WAITs on the master of {name}");
            let clients: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query_async(&mut master)
                .await
                .unwrap();
            assert!(clients.contains("user=cluster-app"), "{clients}");
        }
        assert!(
            asked.load(Ordering::SeqCst) >= 3,
            "the provider was not asked per node"
        );
        client.shutdown().await;
    })
}

/// Synced calls in flight together go in rounds per node (sync_batch.rs, cluster.rs): on each
/// master one script per call and fewer `WAIT`s than calls, and every call returns only once its
/// write is on that master's replica. A call its node refuses in a round (here `MOVED`: its slot
/// was handed to another master behind the client's back) is sent again alone and taken where
/// the slot now is. With a replica stopped, every grant on its master is given back.
fn synced_calls_in_flight_share_a_wait_per_node(
    ctx: &mut Ctx,
) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        use std::collections::BTreeMap;

        use common::{command_stats, reset_stats, script_calls};

        const PER_MASTER: usize = 12;
        // Replica sync is on by default in a cluster (`auto`).
        let client = Client::builder()
            .cluster(ctx.seeds())
            .replica_sync_timeout(ms(500))
            .connect()
            .await
            .unwrap();
        // PER_MASTER names on each master, by its port.
        let base = unique_name("round");
        let mut by_master: BTreeMap<u16, (ClusterNode, Vec<String>)> = BTreeMap::new();
        for i in 0..2000 {
            if by_master.len() == 3 && by_master.values().all(|(_, n)| n.len() == PER_MASTER) {
                break;
            }
            let name = format!("{base}:{i}");
            let node = ctx.cluster.node_for_key(&name);
            let (_, names) = by_master.entry(node.port).or_insert((node, Vec::new()));
            if names.len() < PER_MASTER {
                names.push(name);
            }
        }
        assert!(
            by_master.len() == 3 && by_master.values().all(|(_, n)| n.len() == PER_MASTER),
            "{PER_MASTER} names on each master: {by_master:?}"
        );
        let names: Vec<String> = by_master
            .values()
            .flat_map(|(_, n)| n.iter().cloned())
            .collect();
        let mut masters = Vec::new();
        let mut replicas = Vec::new();
        for (node, names) in by_master.values() {
            masters.push(ctx.cluster.server(node.index).conn().await);
            let replica = ctx.replica_of(&names[0]);
            let mut con = ctx.cluster.server(replica.index).conn().await;
            let () = redis::cmd("READONLY").query_async(&mut con).await.unwrap();
            replicas.push(con);
        }
        // Each replica acknowledges writes (right after the cluster started it may still be
        // loading what its master sent it).
        for (i, (node, names)) in by_master.values().enumerate() {
            let probe = format!("{{{}}}:probe", names[0]);
            let () = redis::cmd("SET")
                .arg(&probe)
                .arg(1)
                .query_async(&mut masters[i])
                .await
                .unwrap();
            let acked: i64 = redis::cmd("WAIT")
                .arg(1)
                .arg(10_000)
                .query_async(&mut masters[i])
                .await
                .unwrap();
            assert_eq!(
                acked, 1,
                "the replica of {} acknowledged nothing in 10 s",
                node.port
            );
            let () = redis::cmd("DEL")
                .arg(&probe)
                .query_async(&mut masters[i])
                .await
                .unwrap();
        }
        // One call at a time (each alone): scripts loaded on every master, every slot's
        // connection identity and every master's replica count read.
        one_at_a_time(&client, &names).await;

        for master in &mut masters {
            reset_stats(master).await;
        }
        let guards = all_taken(&client, &names).await;
        for (i, (node, names)) in by_master.values().enumerate() {
            let waited = command_stats(&mut masters[i], "wait").await.calls;
            assert_eq!(
                script_calls(&mut masters[i]).await,
                PER_MASTER as u64,
                "one script per acquire on master {}",
                node.port
            );
            assert!(
                (1..PER_MASTER as u64).contains(&waited),
                "{waited} WAITs on master {} for {PER_MASTER} acquires in flight together",
                node.port
            );
            for name in names {
                let held = hgetall(&mut masters[i], name).await;
                assert_eq!(held.len(), 1, "{name}: {held:?}");
                assert_eq!(
                    hgetall(&mut replicas[i], name).await,
                    held,
                    "{name} on the replica of {}",
                    node.port
                );
            }
        }
        let released = futures_util::future::join_all(guards.into_iter().map(|g| g.unlock())).await;
        for r in released {
            r.expect("released");
        }
        for (i, (node, names)) in by_master.values().enumerate() {
            let waited = command_stats(&mut masters[i], "wait").await.calls;
            assert_eq!(script_calls(&mut masters[i]).await, 2 * PER_MASTER as u64);
            assert!(
                waited < 2 * PER_MASTER as u64,
                "{waited} WAITs on master {} for {} synced calls",
                node.port,
                2 * PER_MASTER
            );
            for name in names {
                assert!(
                    hgetall(&mut replicas[i], name).await.is_empty(),
                    "{name} still on the replica of {}",
                    node.port
                );
            }
        }

        // A round refused in part: `a`'s slot handed from the first master to the second
        // everywhere, which the client's slot map does not know yet. `c` goes in a round on the
        // third master; `a` opens a round on the first master and `b` joins it. The first
        // master answers `a` MOVED and runs `b`: one WAIT there; `a` goes again alone and is
        // taken on the second master. (Without rounds `a` and `b` would each send a WAIT there.)
        let (first, second, third) = {
            let nodes: Vec<&(ClusterNode, Vec<String>)> = by_master.values().collect();
            (nodes[0].clone(), nodes[1].0, nodes[2].1[0].clone())
        };
        let (a, b, c) = (first.1[0].clone(), first.1[1].clone(), third);
        let slot: i64 = {
            let mut con = ctx.cluster.server(first.0.index).connect();
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&a)
                .query(&mut con)
                .unwrap()
        };
        let hand_over = |to: usize| ctx.assign_slot(slot, &ctx.node_id(to));
        // Replica counts read again (they are kept for 5 s), so that no call waits for one.
        one_at_a_time(&client, &[c.clone(), a.clone(), b.clone()]).await;
        hand_over(second.index);
        reset_stats(&mut masters[0]).await;
        reset_stats(&mut masters[1]).await;
        let tries = [c.clone(), a.clone(), b.clone()];
        let guards = all_taken(&client, &tries).await;
        assert_eq!(
            command_stats(&mut masters[0], "wait").await.calls,
            1,
            "a and b in one round on the first master"
        );
        assert_eq!(script_calls(&mut masters[0]).await, 1, "b ran there");
        assert_eq!(hgetall(&mut masters[0], &b).await.len(), 1);
        assert_eq!(script_calls(&mut masters[1]).await, 1, "a ran there");
        assert_eq!(hgetall(&mut masters[1], &a).await.len(), 1);
        for guard in guards {
            guard.unlock().await.unwrap();
        }
        hand_over(first.0.index);
        let deadline = Instant::now() + Duration::from_secs(10);
        while ctx.cluster.node_for_key(&a).port != first.0.port {
            assert!(Instant::now() < deadline, "slot {slot} not back in 10 s");
            sleep(ms(50)).await;
        }

        // The first master's replica stopped: no round there is acknowledged, and every grant
        // is given back.
        let paused = ctx.replica_of(&first.1[0]);
        one_at_a_time(&client, &first.1).await;
        ctx.cluster.pause(paused.index);
        let refused = in_flight_together(&client, &first.1).await;
        ctx.cluster.resume(paused.index);
        for (name, r) in first.1.iter().zip(refused) {
            match r {
                Err(Error::ReplicasNotSynced { replicas: 1, .. }) => {}
                other => panic!("{name}: expected ReplicasNotSynced, got {other:?}"),
            }
            assert!(
                hgetall(&mut masters[0], name).await.is_empty(),
                "{name} was given back"
            );
        }
        client.shutdown().await;
    })
}

/// Takes and releases each lock, one call at a time (each a round of one).
async fn one_at_a_time(client: &Client, names: &[String]) {
    for name in names {
        let guard = client.lock(name.clone()).try_lock().await.unwrap().unwrap();
        guard.unlock().await.unwrap();
    }
}

/// Every lock taken by [`in_flight_together`], each free and acknowledged.
async fn all_taken(client: &Client, names: &[String]) -> Vec<redisson_sync::LockGuard> {
    in_flight_together(client, names)
        .await
        .into_iter()
        .zip(names)
        .map(|(r, name)| r.unwrap_or_else(|e| panic!("{name}: {e}")).expect(name))
        .collect()
}

/// `try_lock()` on every name, all in flight together, polled in one pass of one spawned task
/// (so that a round's task, spawned by the first call of the round, runs only after every call
/// of the pass joined); the results in order.
async fn in_flight_together(
    client: &Client,
    names: &[String],
) -> Vec<Result<Option<redisson_sync::LockGuard>, Error>> {
    let client = client.clone();
    let names = names.to_vec();
    tokio::spawn(async move {
        let tries = names.iter().map(|name| {
            let lock = client.lock(name.clone());
            async move { lock.try_lock().await }
        });
        futures_util::future::join_all(tries).await
    })
    .await
    .unwrap()
}

/// A name whose derived keys fall in other slots is refused before anything is written.
fn names_across_slots_are_refused(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let client = ctx
            .client(
                PubSubMode::Auto,
                Duration::from_secs(30),
                Duration::from_secs(1),
            )
            .await;
        let mut raw = ctx.raw().await;
        let bad = format!("{}{{b", unique_name("a"));
        let err = client.lock(bad.clone()).lock().await.unwrap_err();
        assert!(
            matches!(&err, Error::Topology(m) if m.contains("CROSSSLOT") && m.contains("nothing was written")),
            "{err}"
        );
        let err = client.fair_lock(bad.clone()).try_lock().await.unwrap_err();
        assert!(matches!(err, Error::Topology(_)), "{err}");
        let err = client
            .semaphore(bad.clone())
            .try_set_permits(1)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Topology(_)), "{err}");
        let latch = format!("{{{}}}", unique_name("latch"));
        let err = client
            .count_down_latch(latch.clone())
            .try_set_count(1)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Topology(_)), "{err}");
        for key in [bad.clone(), latch, channel(&bad)] {
            let n: i64 = redis::cmd("EXISTS")
                .arg(&key)
                .query_async(&mut raw)
                .await
                .unwrap();
            assert_eq!(n, 0, "{key}");
        }
        // A '}' without a '{', and the empty name: the braces the derived names add make
        // another tag (tests/fuzz_names.rs has why any other name is fine).
        for bad in [format!("{}}}b", unique_name("a")), String::new()] {
            let err = client.lock(bad.clone()).lock().await.unwrap_err();
            assert!(
                matches!(&err, Error::Topology(m) if m.contains("CROSSSLOT") && m.contains("nothing was written")),
                "{bad:?}: {err}"
            );
            let n: i64 = redis::cmd("EXISTS")
                .arg(&bad)
                .query_async(&mut raw)
                .await
                .unwrap();
            assert_eq!(n, 0, "{bad:?}");
        }
        // A balanced tag is fine.
        let good = format!("{{{}}}:b", unique_name("a"));
        client
            .lock(good)
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        client.shutdown().await;
    })
}

/// Misconfigurations fail at `connect()`, with an error naming the fix, never a hang.
fn wrong_topologies_fail_at_startup(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let started = Instant::now();
        // A seed list that reaches no node.
        let dead = testkit::RedisServer::start();
        let dead_url = dead.url();
        drop(dead);
        let err = Client::builder()
            .cluster([dead_url.clone()])
            .connect_timeout(ms(500))
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Topology(m) if m.contains("no Redis Cluster")),
            "{err}"
        );
        // A single server given as a cluster.
        let single = testkit::RedisServer::start();
        let err = Client::builder()
            .cluster([single.url()])
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Topology(m) if m.contains("single Redis server") && m.contains(".url(")),
            "{err}"
        );
        // A cluster node given as a single server: at connect, and on a call.
        let node = ctx.cluster.node(0).url();
        let err = Client::builder()
            .url(node.clone())
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Topology(m) if m.contains("Redis Cluster node") && m.contains(".cluster(")),
            "{err}"
        );
        let lazy = Client::open(node).unwrap();
        let mut moved = None;
        for i in 0..20 {
            if let Err(e) = lazy
                .lock(format!("{}:{i}", unique_name("moved")))
                .try_lock()
                .await
            {
                moved = Some(e);
                break;
            }
        }
        let err = moved.expect("some name is served by another node");
        assert!(
            matches!(&err, Error::Topology(m) if m.contains("MOVED")),
            "{err}"
        );
        lazy.shutdown().await;
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    })
}

// -----------------------------------------------------------------------------------------
// Topology changes (run last, in order)
// -----------------------------------------------------------------------------------------

/// `CLUSTER FAILOVER` on the replica of a held lock's slot, while the holder holds (watchdog
/// 1.5 s) and two waiters wait: the holder keeps the lock through the switch (renewals reach
/// the new master), its unlock works, and the waiters are woken within the re-check bound.
fn failover_keeps_the_holder_and_wakes_the_waiters(
    ctx: &mut Ctx,
) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let watchdog = ms(1500);
        let holder = ctx
            .client(PubSubMode::Auto, watchdog, Duration::from_secs(1))
            .await;
        let waiters = ctx
            .client(PubSubMode::Auto, watchdog, Duration::from_secs(1))
            .await;
        let mut raw = ctx.raw().await;
        let name = unique_name("failover");
        let old_master = ctx.cluster.node_for_key(&name);
        let replica = ctx.replica_of(&name);
        let guard = holder.lock(name.clone()).lock().await.unwrap();
        let mut waiting = Vec::new();
        for i in 0..2 {
            let lock = waiters.lock(name.clone());
            let opts = LockOptions::new().owner(Owner::new(10 + i));
            waiting.push(tokio::spawn(async move {
                let g = lock.lock_with_options(&opts).await.unwrap();
                let at = Instant::now();
                g.unlock().await.unwrap();
                at
            }));
        }
        sleep(ms(300)).await;
        ctx.wait_synced(old_master, replica);
        let switched = Instant::now();
        let mut con = ctx.cluster.server(replica.index).connect();
        // A manual failover can time out on a cluster that has just formed (its nodes still
        // agreeing on epochs): ask again, up to three times.
        let mut done = false;
        for _ in 0..3 {
            let () = redis::cmd("CLUSTER")
                .arg("FAILOVER")
                .query(&mut con)
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if ctx.cluster.node_for_key(&name).port == replica.port {
                    done = true;
                    break;
                }
                sleep(ms(50)).await;
            }
            if done {
                break;
            }
        }
        assert!(
            done,
            "the failover did not happen after three CLUSTER FAILOVER"
        );
        let took = switched.elapsed();
        // Over three watchdog timeouts the holder keeps the lock on the new master.
        let until = Instant::now() + watchdog * 3;
        while Instant::now() < until {
            let hash = hgetall(&mut raw, &name).await;
            assert!(
                hash.iter().any(|(f, _)| f.starts_with(holder.id())),
                "the holder lost the lock in the failover: {hash:?}"
            );
            assert!(!guard.is_lost());
            sleep(ms(100)).await;
        }
        let released = Instant::now();
        guard.unlock().await.unwrap();
        let mut woken = Vec::new();
        for w in waiting {
            let at = timeout(Duration::from_secs(10), w).await.unwrap().unwrap();
            woken.push(at.saturating_duration_since(released));
        }
        eprintln!(
            "failover of {} to {} took {took:?}; waiters got the lock {woken:?} after the unlock",
            old_master.port, replica.port
        );
        assert!(woken[0] < Duration::from_secs(2), "{woken:?}");
        assert_eq!(pttl(&mut raw, &name).await, -2);
        holder.shutdown().await;
        waiters.shutdown().await;
    })
}

/// The slot of a held lock migrates to another master (`SETSLOT IMPORTING/MIGRATING`, keys
/// moved with `MIGRATE` one at a time, `SETSLOT NODE`) while waiters wait: acquisitions,
/// renewals and the unlock go on through `ASK` and `MOVED` without an error reaching anyone,
/// and the waiters, whose sharded subscription Redis drops, subscribe again and are woken.
fn slot_migration_is_transparent(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let watchdog = ms(1500);
        let holder = ctx
            .client(PubSubMode::Auto, watchdog, Duration::from_secs(1))
            .await;
        let waiters = ctx
            .client(PubSubMode::Auto, watchdog, Duration::from_secs(1))
            .await;
        let mut raw = ctx.raw().await;
        let name = unique_name("migrate");
        let source = ctx.cluster.node_for_key(&name);
        let target = ctx
            .cluster
            .nodes()
            .into_iter()
            .find(|n| {
                n.port != source.port
                    && matches!(node_role(&ctx.cluster, n.index).as_deref(), Some("master"))
            })
            .expect("another master");
        let guard = holder.lock(name.clone()).lock().await.unwrap();
        // A second lock in the same slot, taken half-way through, exercises ASK.
        let sibling = format!("{{{name}}}:sibling");
        let mut waiting = Vec::new();
        for i in 0..2 {
            let lock = waiters.lock(name.clone());
            let opts = LockOptions::new().owner(Owner::new(20 + i));
            waiting.push(tokio::spawn(async move {
                let g = lock.lock_with_options(&opts).await.unwrap();
                let at = Instant::now();
                g.unlock().await.unwrap();
                at
            }));
        }
        sleep(ms(300)).await;
        let slot: i64 = {
            let mut con = ctx.cluster.server(source.index).connect();
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&name)
                .query(&mut con)
                .unwrap()
        };
        let (source_id, target_id) = (ctx.node_id(source.index), ctx.node_id(target.index));
        let mut src = ctx.cluster.server(source.index).connect();
        let mut dst = ctx.cluster.server(target.index).connect();
        let () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("IMPORTING")
            .arg(&source_id)
            .query(&mut dst)
            .unwrap();
        let () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("MIGRATING")
            .arg(&target_id)
            .query(&mut src)
            .unwrap();
        // Mid-migration: a new lock in the slot (absent on the source: ASK) is taken, and held
        // through the migration; the held one is renewed meanwhile.
        let sibling_guard = holder.lock(sibling.clone()).lock().await.unwrap();
        sleep(watchdog / 2).await;
        // Move the keys of the slot, then hand the slot over everywhere.
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut src)
                .unwrap();
            if keys.is_empty() {
                break;
            }
            let mut migrate = redis::cmd("MIGRATE");
            migrate
                .arg("127.0.0.1")
                .arg(target.port)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys);
            let _: Value = migrate.query(&mut src).unwrap();
        }
        ctx.assign_slot(slot, &target_id);
        let deadline = Instant::now() + Duration::from_secs(10);
        while ctx.cluster.node_for_key(&name).port != target.port {
            assert!(
                Instant::now() < deadline,
                "the slot did not move within 10 s"
            );
            sleep(ms(50)).await;
        }
        // The holder keeps it on the new master for two more watchdog timeouts.
        let until = Instant::now() + watchdog * 2;
        while Instant::now() < until {
            let hash = hgetall(&mut raw, &name).await;
            assert!(
                hash.iter().any(|(f, _)| f.starts_with(holder.id())),
                "{hash:?}"
            );
            assert!(!guard.is_lost());
            sleep(ms(100)).await;
        }
        assert!(!sibling_guard.is_lost());
        sibling_guard.unlock().await.unwrap();
        let released = Instant::now();
        guard.unlock().await.unwrap();
        let mut woken = Vec::new();
        for w in waiting {
            let at = timeout(Duration::from_secs(10), w).await.unwrap().unwrap();
            woken.push(at.saturating_duration_since(released));
        }
        eprintln!(
            "slot {slot} moved from {} to {}; waiters got the lock {woken:?} after the unlock",
            source.port, target.port
        );
        assert!(woken[0] < Duration::from_secs(2), "{woken:?}");
        assert_eq!(pttl(&mut raw, &name).await, -2);
        holder.shutdown().await;
        waiters.shutdown().await;
    })
}

fn node_role(cluster: &RedisCluster, index: usize) -> Option<String> {
    let mut con = cluster.server(index).try_connect().ok()?;
    let role: Vec<Value> = redis::cmd("ROLE").query(&mut con).ok()?;
    match role.first() {
        Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// `SCRIPT FLUSH` on every node (as after a failover to a node that never ran them, or a new
/// node): every script is loaded again where it is needed, on `NOSCRIPT`, and nothing fails.
fn flushed_scripts_are_loaded_again(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let client = ctx
            .client(
                PubSubMode::Auto,
                Duration::from_secs(30),
                Duration::from_secs(1),
            )
            .await;
        let names = ctx.names_on_every_master(&unique_name("noscript"));
        for (name, _) in &names {
            client
                .lock(name.clone())
                .lock()
                .await
                .unwrap()
                .unlock()
                .await
                .unwrap();
        }
        for node in ctx.cluster.nodes() {
            let mut con = ctx.cluster.server(node.index).connect();
            let () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut con).unwrap();
        }
        for (name, _) in &names {
            let fair = client.fair_lock(format!("{name}:fair"));
            fair.lock().await.unwrap().unlock().await.unwrap();
            let guard = client.lock(name.clone()).lock().await.unwrap();
            guard.unlock().await.unwrap();
        }
        client.shutdown().await;
    })
}

/// A fair-lock waiter gives up while the master of its slot is dead: its give-up cleanup
/// (leaving the queue) cannot run then, and must run once the slot is served again, by the
/// promoted replica: no queue entry or deadline is left behind, and the holder, whose hold
/// was replicated, keeps the lock and releases it.
fn a_give_up_during_a_failover_is_cleaned_up_after_it(
    ctx: &mut Ctx,
) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let watchdog = Duration::from_secs(10);
        let holder = ctx
            .client(PubSubMode::Auto, watchdog, Duration::from_secs(1))
            .await;
        let waiter = ctx
            .client(PubSubMode::Auto, watchdog, Duration::from_secs(1))
            .await;
        let mut raw = ctx.raw().await;
        let name = format!("{{{}}}", unique_name("giveup"));
        let queue = format!("redisson_lock_queue:{name}");
        let timeouts = format!("redisson_lock_timeout:{name}");
        let master = ctx.cluster.node_for_key(&name);
        let replica = ctx.replica_of(&name);
        let guard = holder.fair_lock(name.clone()).lock().await.unwrap();
        let lock = waiter.fair_lock(name.clone());
        let attempt = tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(2)).await });
        // The waiter is queued (and replicated) before the master dies.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let len: i64 = redis::cmd("LLEN")
                .arg(&queue)
                .query_async(&mut raw)
                .await
                .unwrap();
            if len == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "the waiter never queued");
            sleep(ms(20)).await;
        }
        ctx.wait_synced(master, replica);
        ctx.cluster.stop(master.index);
        let killed = Instant::now();
        let given_up = timeout(Duration::from_secs(30), attempt)
            .await
            .unwrap()
            .unwrap();
        assert!(!matches!(given_up, Ok(Some(_))), "{given_up:?}");
        let gave_up_after = killed.elapsed();
        // Once the replica serves the slot, the queue and deadlines are gone.
        let deadline = Instant::now() + Duration::from_secs(30);
        let left = loop {
            let served = ctx.cluster.node_for_key(&name).port == replica.port;
            if served {
                let q: i64 = redis::cmd("LLEN")
                    .arg(&queue)
                    .query_async(&mut raw)
                    .await
                    .unwrap_or(-1);
                let t: i64 = redis::cmd("ZCARD")
                    .arg(&timeouts)
                    .query_async(&mut raw)
                    .await
                    .unwrap_or(-1);
                if q == 0 && t == 0 {
                    break (q, t);
                }
            }
            if Instant::now() > deadline {
                break (-2, -2);
            }
            sleep(ms(100)).await;
        };
        assert_eq!(
            left,
            (0, 0),
            "queue and deadlines left behind after the failover"
        );
        eprintln!(
            "master {} killed; the waiter gave up {gave_up_after:?} later ({given_up:?}); queue \
             and deadlines gone {:?} after the kill",
            master.port,
            killed.elapsed()
        );
        let unlocked = guard.unlock().await;
        assert!(
            unlocked.is_ok(),
            "the holder's unlock after the failover: {unlocked:?}"
        );
        assert_eq!(pttl(&mut raw, &name).await, -2);
        holder.shutdown().await;
        waiter.shutdown().await;
        ctx.rejoin(master, &name);
    })
}

/// Permits released while the master of their slot is dead (SIGKILL, its replica not yet
/// promoted) come back once the promoted replica serves the slot: the release, which Redis
/// could not take then, is settled by its grant marker and sent again, exactly once, and the
/// marker is gone. Before, the caller got the error and the permits stayed taken for good:
/// the semaphore has no lease (a Valkey cluster fault run, 2026-12-07: 0 of 2 permits).
fn permits_released_while_their_master_is_dead_come_back(
    ctx: &mut Ctx,
) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let client = ctx
            .client(
                PubSubMode::Auto,
                Duration::from_secs(10),
                Duration::from_secs(1),
            )
            .await;
        let mut raw = ctx.raw().await;
        let name = format!("{{{}}}", unique_name("permits"));
        let sem = client.semaphore(name.clone());
        assert!(sem.try_set_permits(2).await.unwrap());
        let permits = sem.acquire(2).await.unwrap();
        let master = ctx.cluster.node_for_key(&name);
        let replica = ctx.replica_of(&name);
        ctx.wait_synced(master, replica);
        ctx.cluster.stop(master.index);
        let killed = Instant::now();
        let released = timeout(Duration::from_secs(30), permits.release())
            .await
            .expect("the release did not return within 30 s");
        let deadline = Instant::now() + Duration::from_secs(40);
        let count = loop {
            let served = ctx.cluster.node_for_key(&name).port == replica.port;
            let count: Option<String> = if served {
                redis::cmd("GET")
                    .arg(&name)
                    .query_async(&mut raw)
                    .await
                    .unwrap_or(None)
            } else {
                None
            };
            if count.as_deref() == Some("2") || Instant::now() > deadline {
                break count;
            }
            sleep(ms(100)).await;
        };
        assert_eq!(
            count.as_deref(),
            Some("2"),
            "the permits never came back (the release: {released:?})"
        );
        eprintln!(
            "master {} killed; the release returned {released:?}; 2 of 2 permits {:?} after the \
             kill",
            master.port,
            killed.elapsed()
        );
        // Exactly once, and the marker went with the release.
        sleep(ms(500)).await;
        let count: Option<String> = redis::cmd("GET")
            .arg(&name)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert_eq!(count.as_deref(), Some("2"));
        let mut on_replica = ctx.cluster.server(replica.index).connect();
        let markers: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{name}:redisson_sync:grant:*"))
            .query(&mut on_replica)
            .unwrap();
        assert!(markers.is_empty(), "{markers:?}");
        client.shutdown().await;
        ctx.rejoin(master, &name);
    })
}

/// The master of a held lock's slot is killed (SIGKILL) before its replica had the lock (the
/// replica was paused while the lock was taken: asynchronous replication loses the write), and
/// the replica is promoted: the lock is gone on the new master, and the holder's guard reports
/// it lost when its watchdog finds it gone; another client then takes it.
fn a_killed_master_loses_an_unreplicated_lock_and_the_guard_says_so(
    ctx: &mut Ctx,
) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let watchdog = ms(1500);
        // Without replica sync: with it, an acquire the paused replica cannot acknowledge is
        // refused (`replica_sync_and_credentials_on_every_master` and tests/replica_sync.rs).
        let unsynced = || {
            Client::builder()
                .cluster(ctx.seeds())
                .watchdog_timeout(watchdog)
                .sync_replicas(redisson_sync::config::SyncReplicas::Off)
                .connect()
        };
        let holder = unsynced().await.unwrap();
        let other = unsynced().await.unwrap();
        let name = unique_name("killed");
        let master = ctx.cluster.node_for_key(&name);
        let replica = ctx.replica_of(&name);
        ctx.cluster.pause(replica.index);
        let guard = holder.lock(name.clone()).lock().await.unwrap();
        let killed = Instant::now();
        ctx.cluster.stop(master.index);
        ctx.cluster.resume(replica.index);
        let lost = timeout(Duration::from_secs(30), guard.lost()).await;
        assert!(lost.is_ok(), "the guard never reported the lost lock");
        let lost_after = killed.elapsed();
        // A request sent to the dead master before the slot map changed times out (the
        // caller learns it after one command timeout, by design); the next one goes to the
        // promoted replica.
        let deadline = Instant::now() + Duration::from_secs(20);
        let g = loop {
            assert!(
                Instant::now() < deadline,
                "no one could take the lock after the failover"
            );
            match timeout(Duration::from_secs(20), other.lock(name.clone()).lock()).await {
                Ok(Ok(g)) => break g,
                Ok(Err(e)) if e.is_timeout() => {
                    eprintln!("acquire after the kill: {e}; again");
                }
                Ok(Err(e)) => panic!("acquire after the kill: {e}"),
                Err(_) => panic!("no one could take the lock after the failover"),
            }
        };
        // The lock was taken on the promoted replica, but the node asked for the slot map may
        // not have heard of the failover yet (seen on Redis 6.2: it still named the killed
        // master a moment after the new one served the key): wait for its view, bounded.
        let deadline = Instant::now() + Duration::from_secs(10);
        let serving = loop {
            let port = ctx.cluster.node_for_key(&name).port;
            if port != master.port || Instant::now() > deadline {
                break port;
            }
            sleep(ms(50)).await;
        };
        assert_eq!(
            serving, replica.port,
            "the key's slot after the kill of {}",
            master.port
        );
        eprintln!(
            "master {} killed; replica {} promoted; the guard reported the loss {lost_after:?} \
             after the kill",
            master.port, replica.port
        );
        assert!(guard.unlock().await.unwrap_err().is_not_held());
        g.unlock().await.unwrap();
        holder.shutdown().await;
        other.shutdown().await;
        // Bring the old master back (it rejoins as a replica) for whatever runs next.
        ctx.rejoin(master, &name);
    })
}

/// A cluster without sharded pub/sub (a Redis before 7; emulated by disabling `PUBSUB` with
/// `rename-command`, since `PUBSUB SHARDNUMSUB` is how `auto` decides, as Redisson does): `auto`
/// falls back to classic `PUBLISH`/`SUBSCRIBE` and its waiters are woken by message; `sharded`
/// and `both` fail at `connect()`, naming the fix. A 3-master cluster of its own.
fn a_cluster_without_sharded_pubsub(_: &mut Ctx) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let old = tokio::task::spawn_blocking(|| {
            RedisCluster::builder()
                .masters(3)
                .replicas(0)
                .args(&["--rename-command", "PUBSUB", ""])
                .start()
        })
        .await
        .unwrap();
        let old = Ctx { cluster: old };
        flavour(&old, PubSubMode::Auto, false, true).await;
        for mode in [PubSubMode::Sharded, PubSubMode::Both] {
            let started = Instant::now();
            let err = Client::builder()
                .cluster(old.seeds())
                .pubsub(mode)
                .connect()
                .await
                .unwrap_err();
            assert!(
                matches!(&err, Error::Topology(m) if m.contains("needs sharded pub/sub") && m.contains("Classic or Auto")),
                "{mode:?}: {err}"
            );
            assert!(started.elapsed() < Duration::from_secs(10), "{mode:?}");
        }
        tokio::task::spawn_blocking(move || drop(old))
            .await
            .unwrap();
    })
}

/// Whether the cluster's servers have sharded pub/sub (probed: `PUBSUB SHARDNUMSUB`).
fn has_sharded_pubsub(ctx: &Ctx) -> bool {
    let mut con = ctx.cluster.server(0).connect();
    redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .query::<Value>(&mut con)
        .is_ok()
}

/// The tests that need sharded pub/sub on the cluster: skipped on a server without it, whose
/// `Auto` is classic (`a_cluster_without_sharded_pubsub` and `classic_publishes_classic`
/// still run there, and `tests/capabilities.rs` checks the refusal of `Sharded` and `Both`).
const NEEDS_SHARDED: &[&str] = &[
    "auto_publishes_sharded_on_redis_7",
    "sharded_publishes_sharded",
    "both_publishes_both",
    "both_hears_either",
];

const TESTS: &[(&str, TestFn)] = &[
    (
        "every_primitive_on_every_master",
        every_primitive_on_every_master,
    ),
    (
        "auto_publishes_sharded_on_redis_7",
        auto_publishes_sharded_on_redis_7,
    ),
    ("sharded_publishes_sharded", sharded_publishes_sharded),
    ("classic_publishes_classic", classic_publishes_classic),
    ("both_publishes_both", both_publishes_both),
    ("both_hears_either", both_hears_either),
    (
        "a_cluster_without_sharded_pubsub",
        a_cluster_without_sharded_pubsub,
    ),
    (
        "watchdog_renews_on_every_master",
        watchdog_renews_on_every_master,
    ),
    (
        "replica_sync_and_credentials_on_every_master",
        replica_sync_and_credentials_on_every_master,
    ),
    (
        "synced_calls_in_flight_share_a_wait_per_node",
        synced_calls_in_flight_share_a_wait_per_node,
    ),
    (
        "names_across_slots_are_refused",
        names_across_slots_are_refused,
    ),
    (
        "wrong_topologies_fail_at_startup",
        wrong_topologies_fail_at_startup,
    ),
    (
        "failover_keeps_the_holder_and_wakes_the_waiters",
        failover_keeps_the_holder_and_wakes_the_waiters,
    ),
    (
        "slot_migration_is_transparent",
        slot_migration_is_transparent,
    ),
    (
        "flushed_scripts_are_loaded_again",
        flushed_scripts_are_loaded_again,
    ),
    (
        "a_give_up_during_a_failover_is_cleaned_up_after_it",
        a_give_up_during_a_failover_is_cleaned_up_after_it,
    ),
    (
        "permits_released_while_their_master_is_dead_come_back",
        permits_released_while_their_master_is_dead_come_back,
    ),
    (
        "a_killed_master_loses_an_unreplicated_lock_and_the_guard_says_so",
        a_killed_master_loses_an_unreplicated_lock_and_the_guard_says_so,
    ),
];

fn main() -> std::process::ExitCode {
    // `cargo test` passes the filter and libtest's options (`--test-threads 4` from
    // scripts/test among them): read as libtest reads them, or the `4` filters every test out.
    let selected: Vec<&(&str, TestFn)> = TESTS
        .iter()
        .filter(|(name, _)| common::selected(name))
        .collect();
    if std::env::args().any(|a| a == "--list") {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        return std::process::ExitCode::SUCCESS;
    }
    if selected.is_empty() {
        println!("running 0 tests");
        return std::process::ExitCode::SUCCESS;
    }
    let started = Instant::now();
    let cluster = RedisCluster::builder().masters(3).replicas(1).start();
    assert_eq!(
        cluster
            .nodes()
            .iter()
            .filter(|n| n.role == Role::Master)
            .count(),
        3
    );
    println!(
        "running {} tests on a cluster of 6 nodes (started in {:?})",
        selected.len(),
        started.elapsed()
    );
    let mut ctx = Ctx { cluster };
    let sharded = has_sharded_pubsub(&ctx);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut failed = Vec::new();
    for (name, test) in selected {
        if !sharded && NEEDS_SHARDED.contains(name) {
            println!("test {name} ... skipped (this server has no sharded pub/sub)");
            continue;
        }
        let t = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.block_on(async {
                timeout(Duration::from_secs(120), test(&mut ctx))
                    .await
                    .expect("the test did not finish within 120 s");
            });
        }));
        match outcome {
            Ok(()) => println!("test {name} ... ok ({:.1} s)", t.elapsed().as_secs_f64()),
            Err(_) => {
                println!(
                    "test {name} ... FAILED ({:.1} s)",
                    t.elapsed().as_secs_f64()
                );
                failed.push(*name);
            }
        }
    }
    drop(runtime);
    drop(ctx);
    if failed.is_empty() {
        println!(
            "test result: ok. cluster tests passed in {:?}",
            started.elapsed()
        );
        std::process::ExitCode::SUCCESS
    } else {
        println!("test result: FAILED: {failed:?}");
        std::process::ExitCode::FAILURE
    }
}
