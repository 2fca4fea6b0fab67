//! `RedisCluster` against real `redis-server` nodes.

use std::time::Duration;

use testkit::{RedisCluster, Role};

fn connect(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap()
}

#[test]
fn three_masters_come_up_and_route_a_key() {
    let cluster = RedisCluster::start();
    let nodes = cluster.nodes();
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(|n| n.role == Role::Master));
    assert_eq!(cluster.seed_urls().len(), 3);

    let owner = cluster.node_for_key("{lock}");
    assert_eq!(owner.role, Role::Master);
    let mut con = connect(&owner.url());
    let _: () = redis::cmd("SET")
        .arg("{lock}")
        .arg(1)
        .query(&mut con)
        .unwrap();
    // Another master answers MOVED to the owner.
    let other = nodes.iter().find(|n| n.index != owner.index).unwrap();
    let mut con = connect(&other.url());
    let err = redis::cmd("GET")
        .arg("{lock}")
        .query::<Option<String>>(&mut con)
        .unwrap_err();
    assert!(err.is_cluster_error(), "{err:?}");
    assert!(err.to_string().contains(&owner.port.to_string()), "{err}");
}

#[test]
fn a_paused_and_a_stopped_node() {
    let mut cluster = RedisCluster::start();
    let node = cluster.node(1);
    cluster.pause(1);
    let mut con = redis::Client::open(node.url())
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(2));
    // The kernel still accepts connections of a SIGSTOPped server, but nothing answers.
    if let Ok(con) = con.as_mut() {
        con.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        assert!(redis::cmd("PING").query::<String>(con).is_err());
    }
    cluster.resume(1);
    cluster.stop(1);
    assert!(!cluster.server(1).is_running());
    // Node 0 still answers.
    let mut con = connect(&cluster.node(0).url());
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn masters_with_replicas() {
    let cluster = RedisCluster::builder().masters(3).replicas(1).start();
    let nodes = cluster.nodes();
    assert_eq!(nodes.len(), 6);
    assert_eq!(nodes.iter().filter(|n| n.role == Role::Master).count(), 3);
    assert_eq!(nodes.iter().filter(|n| n.role == Role::Replica).count(), 3);
    assert_eq!(cluster.node_for_key("k").role, Role::Master);
}
