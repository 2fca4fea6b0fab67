//! `RedisSentinel` against real `redis-server` processes.

use std::time::{Duration, Instant};

use testkit::RedisSentinel;

#[test]
fn sentinels_report_the_master() {
    let setup = RedisSentinel::start();
    assert_eq!(setup.master_name(), "mymaster");
    assert_eq!(setup.sentinel_urls().len(), 3);
    assert_eq!(setup.replicas().len(), 2);
    assert_eq!(setup.current_master_addr().unwrap(), setup.master().addr());
    for url in setup.sentinel_urls() {
        let mut con = redis::Client::open(url)
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap();
        let (host, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(setup.master_name())
            .query(&mut con)
            .unwrap();
        assert_eq!((host.as_str(), port), ("127.0.0.1", setup.master().port()));
    }
    // Both replicas replicate.
    let mut master = setup.master().connect();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut master)
        .unwrap();
    let _: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(2000)
        .query(&mut master)
        .unwrap();
    for replica in setup.replicas() {
        let mut replica = replica.connect();
        let value: Option<String> = redis::cmd("GET").arg("k").query(&mut replica).unwrap();
        assert_eq!(value.as_deref(), Some("v"));
    }
}

#[test]
fn a_paused_master_fails_over() {
    let setup = RedisSentinel::start();
    setup.pause_master();
    let deadline = Instant::now() + Duration::from_secs(20);
    let replicas: Vec<_> = setup.replicas().iter().map(|r| r.addr()).collect();
    while !setup
        .current_master_addr()
        .is_ok_and(|addr| replicas.contains(&addr))
    {
        assert!(Instant::now() < deadline, "no failover within 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    setup.resume_master();
}
