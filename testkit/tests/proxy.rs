//! `FaultProxy` in front of a real `redis-server`: every mode, the selectors and the triggers.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisResult};
use testkit::{FaultProxy, Mode, RedisServer};

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// A multiplexed connection to `url` that waits up to 10 s for a reply, so a held reply is
/// not mistaken for a lost one.
async fn connect(url: &str) -> RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(10)));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

async fn ping(con: &mut MultiplexedConnection) -> RedisResult<String> {
    redis::cmd("PING").query_async(con).await
}

/// `INCR key` through `con`.
async fn incr(con: &mut MultiplexedConnection, key: &str) -> RedisResult<i64> {
    redis::cmd("INCR").arg(key).query_async(con).await
}

/// The integer at `key`, read from `server` directly (not through the proxy).
async fn server_value(server: &RedisServer, key: &str) -> Option<i64> {
    let mut direct = server.conn().await;
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut direct)
        .await
        .unwrap()
}

/// Asserts `result` is a connection failure that came at once (not a reply, not a timeout).
fn assert_connection_error<T: std::fmt::Debug>(result: RedisResult<T>, took: Duration) {
    let err = result.expect_err("expected a connection error");
    assert!(
        err.is_connection_dropped() || err.is_io_error(),
        "expected a connection error, got {err:?}"
    );
    assert!(
        took < Duration::from_secs(5),
        "the error took {took:?}: a timeout, not a reset"
    );
}

/// A raw socket to `proxy` with a read timeout.
fn raw(proxy: &FaultProxy, read_timeout: Duration) -> TcpStream {
    let stream = TcpStream::connect(proxy.addr()).unwrap();
    stream.set_read_timeout(Some(read_timeout)).unwrap();
    stream
}

/// Reads until `\r\n` (or EOF, or the read timeout).
fn read_line(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let mut byte = [0; 1];
    while !line.ends_with(b"\r\n") {
        match stream.read(&mut byte)? {
            0 => break,
            _ => line.push(byte[0]),
        }
    }
    Ok(line)
}

#[tokio::test]
async fn pass_forwards_both_ways() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    assert_eq!(proxy.upstream(), server.addr());
    assert_eq!(
        proxy.url(),
        format!("redis://127.0.0.1:{}", proxy.addr().port())
    );
    assert_eq!(proxy.mode(), Mode::Pass);
    let mut con = connect(&proxy.url()).await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("through")
        .arg("proxy")
        .query_async(&mut con)
        .await
        .unwrap();
    let mut direct = server.conn().await;
    let value: String = redis::cmd("GET")
        .arg("through")
        .query_async(&mut direct)
        .await
        .unwrap();
    assert_eq!(value, "proxy");
    // A large value crosses in many chunks, intact.
    let big = "x".repeat(300_000);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query_async(&mut con)
        .await
        .unwrap();
    let back: String = redis::cmd("GET")
        .arg("big")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(back, big);
    assert_eq!(proxy.connections_accepted(), 1);
    assert_eq!(proxy.open_connections(), 1);
    drop(con);
    let deadline = Instant::now() + Duration::from_secs(5);
    while proxy.open_connections() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        proxy.open_connections(),
        0,
        "a closed client closes its connection"
    );
}

#[tokio::test]
async fn delay_adds_at_least_the_delay() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut con = connect(&proxy.url()).await.unwrap();
    ping(&mut con).await.unwrap();
    proxy.set_mode(Mode::Delay {
        up: Duration::from_millis(150),
        down: Duration::from_millis(100),
    });
    let started = Instant::now();
    assert_eq!(ping(&mut con).await.unwrap(), "PONG");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(250), "took {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // Only the server→client delay.
    proxy.set_mode(Mode::Delay {
        up: Duration::ZERO,
        down: Duration::from_millis(200),
    });
    let started = Instant::now();
    ping(&mut con).await.unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(200), "took {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    proxy.set_mode(Mode::Pass);
    let started = Instant::now();
    ping(&mut con).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn freeze_holds_a_reply_until_pass() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut con = connect(&proxy.url()).await.unwrap();
    ping(&mut con).await.unwrap();
    proxy.set_mode(Mode::Freeze);
    let mut frozen = con.clone();
    let reply = tokio::spawn(async move { incr(&mut frozen, "frozen").await });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!reply.is_finished(), "a reply came through a frozen proxy");
    assert_eq!(
        server_value(&server, "frozen").await,
        None,
        "the command was held, not forwarded"
    );
    proxy.set_mode(Mode::Pass);
    let n = tokio::time::timeout(Duration::from_secs(5), reply)
        .await
        .expect("the held reply arrives after Pass")
        .unwrap()
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(ping(&mut con).await.unwrap(), "PONG");
}

#[test]
fn blackhole_discards_then_resets_the_connections_that_lost_bytes() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut stream = raw(&proxy, Duration::from_millis(400));
    stream.write_all(PING).unwrap();
    assert_eq!(read_line(&mut stream).unwrap(), b"+PONG\r\n");
    // A second connection, idle through the black hole: it lost nothing.
    let mut idle = raw(&proxy, Duration::from_secs(5));
    idle.write_all(PING).unwrap();
    assert_eq!(read_line(&mut idle).unwrap(), b"+PONG\r\n");
    let accepted = proxy.connections_accepted();

    proxy.set_mode(Mode::Blackhole);
    stream.write_all(PING).unwrap();
    let err = read_line(&mut stream).expect_err("no reply through a blackhole");
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{err:?}"
    );
    assert_eq!(
        proxy.open_connections(),
        2,
        "open while the black hole lasts"
    );

    // The heal: the stream that lost its PING cannot go on with a gap (every later reply
    // would answer the request before it); it is reset, as TCP would end it.
    proxy.set_mode(Mode::Pass);
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let err = read_line(&mut stream).expect_err("the connection that lost bytes is reset");
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err:?}");
    // The idle one goes on, and new connections pass.
    idle.write_all(PING).unwrap();
    assert_eq!(read_line(&mut idle).unwrap(), b"+PONG\r\n");
    let mut fresh = raw(&proxy, Duration::from_secs(5));
    fresh.write_all(PING).unwrap();
    assert_eq!(read_line(&mut fresh).unwrap(), b"+PONG\r\n");
    assert_eq!(proxy.connections_accepted(), accepted + 1);
    // The reset connection's task ends just after the RST it sent.
    let deadline = Instant::now() + Duration::from_secs(5);
    while proxy.open_connections() > 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        proxy.open_connections(),
        2,
        "the idle one and the fresh one"
    );
}

#[tokio::test]
async fn reset_fails_open_and_new_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut con = connect(&proxy.url()).await.unwrap();
    ping(&mut con).await.unwrap();
    let mut stream = raw(&proxy, Duration::from_secs(5));
    stream.write_all(PING).unwrap();
    assert_eq!(read_line(&mut stream).unwrap(), b"+PONG\r\n");

    proxy.set_mode(Mode::Reset);
    let started = Instant::now();
    assert_connection_error(ping(&mut con).await, started.elapsed());
    // The raw socket sees the RST.
    let err = read_line(&mut stream).expect_err("the connection was reset");
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err:?}");

    // New connections are reset at once while the mode lasts.
    let started = Instant::now();
    let result = async {
        let mut con = connect(&proxy.url()).await?;
        ping(&mut con).await
    }
    .await;
    assert_connection_error(result, started.elapsed());
    let mut fresh = raw(&proxy, Duration::from_secs(5));
    let err = match fresh.write_all(PING) {
        Err(e) => e,
        Ok(()) => read_line(&mut fresh).expect_err("a new connection is reset"),
    };
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err:?}");

    proxy.set_mode(Mode::Pass);
    let mut con = connect(&proxy.url()).await.unwrap();
    assert_eq!(ping(&mut con).await.unwrap(), "PONG");
}

#[tokio::test]
async fn reset_all_resets_open_connections_only() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut a = connect(&proxy.url()).await.unwrap();
    let mut b = connect(&proxy.url()).await.unwrap();
    ping(&mut a).await.unwrap();
    ping(&mut b).await.unwrap();
    proxy.reset_all();
    let started = Instant::now();
    assert_connection_error(ping(&mut a).await, started.elapsed());
    let started = Instant::now();
    assert_connection_error(ping(&mut b).await, started.elapsed());
    assert_eq!(proxy.mode(), Mode::Pass);
    let mut c = connect(&proxy.url()).await.unwrap();
    assert_eq!(ping(&mut c).await.unwrap(), "PONG");
    assert_eq!(proxy.connections_accepted(), 3);
}

#[tokio::test]
async fn reset_after_forwards_the_command_then_resets() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut con = connect(&proxy.url()).await.unwrap();
    ping(&mut con).await.unwrap();
    let trigger = proxy.reset_after(b"INCR");
    assert!(!trigger.fired());
    let started = Instant::now();
    let result = incr(&mut con, "counter").await;
    assert_connection_error(result, started.elapsed());
    assert!(trigger.fired());
    assert_eq!(
        server_value(&server, "counter").await,
        Some(1),
        "the server ran the INCR"
    );
    // It fired once: the next INCR goes through.
    let mut con = connect(&proxy.url()).await.unwrap();
    assert_eq!(incr(&mut con, "counter").await.unwrap(), 2);
}

#[tokio::test]
async fn reset_before_drops_the_command_then_resets() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut con = connect(&proxy.url()).await.unwrap();
    ping(&mut con).await.unwrap();
    let trigger = proxy.reset_before(b"INCR");
    let unused = proxy.reset_before(b"NEVER-SENT");
    let started = Instant::now();
    let result = incr(&mut con, "counter").await;
    assert_connection_error(result, started.elapsed());
    assert!(trigger.fired());
    assert!(!unused.cancel(), "the other trigger had not fired");
    assert_eq!(
        server_value(&server, "counter").await,
        None,
        "the server never saw the INCR"
    );
    let mut con = connect(&proxy.url()).await.unwrap();
    assert_eq!(incr(&mut con, "counter").await.unwrap(), 1);
}

#[tokio::test]
async fn a_selector_freezes_the_subscriber_only() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut plain = connect(&proxy.url()).await.unwrap();
    ping(&mut plain).await.unwrap();
    let mut pubsub = redis::Client::open(proxy.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    pubsub.subscribe("news").await.unwrap();
    // Selected after the subscriber sent SUBSCRIBE: "ever contained" covers the past.
    proxy.set_mode_for(b"SUBSCRIBE", Mode::Freeze);
    let mut direct = server.conn().await;
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("first")
        .query_async(&mut direct)
        .await
        .unwrap();
    assert_eq!(receivers, 1);
    {
        let mut messages = pubsub.on_message();
        let held = tokio::time::timeout(Duration::from_millis(400), messages.next()).await;
        assert!(
            held.is_err(),
            "the subscriber's message came through the freeze"
        );
    }
    // The plain connection, and a new one, still work.
    assert_eq!(ping(&mut plain).await.unwrap(), "PONG");
    let mut fresh = connect(&proxy.url()).await.unwrap();
    assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
    // A connection that subscribes while the selector is set is frozen as it does.
    let mut late = redis::Client::open(proxy.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    let late_subscribe = tokio::spawn(async move {
        late.subscribe("other").await?;
        Ok::<_, redis::RedisError>(late)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !late_subscribe.is_finished(),
        "SUBSCRIBE was confirmed through the freeze"
    );

    proxy.clear_mode_for(b"SUBSCRIBE");
    tokio::time::timeout(Duration::from_secs(5), late_subscribe)
        .await
        .expect("the held SUBSCRIBE is confirmed once the selector is cleared")
        .unwrap()
        .unwrap();
    let mut messages = pubsub.on_message();
    let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("the held message arrives once the selector is cleared")
        .expect("the subscription is still open");
    assert_eq!(message.get_payload::<String>().unwrap(), "first");
}

#[test]
fn dropping_the_proxy_closes_its_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.addr());
    let mut stream = raw(&proxy, Duration::from_secs(5));
    stream.write_all(PING).unwrap();
    assert_eq!(read_line(&mut stream).unwrap(), b"+PONG\r\n");
    let addr = proxy.addr();
    drop(proxy);
    match read_line(&mut stream) {
        Ok(rest) => assert!(rest.is_empty(), "EOF expected, got {rest:?}"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e:?}"),
    }
    assert!(TcpStream::connect(addr).is_err(), "nobody listens any more");
}
