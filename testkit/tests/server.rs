//! `RedisServer` against a real `redis-server`: start, stop, restart, pause, extra arguments.

use std::time::Duration;

use testkit::RedisServer;

fn ping(con: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("PING").query(con)
}

#[test]
fn start_stop_restart_pause() {
    let mut server = RedisServer::start();
    assert!(server.is_running());
    assert_ne!(server.port(), 0);
    assert_eq!(server.addr().port(), server.port());
    assert!(server.addr().ip().is_loopback());
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port()));
    let first_pid = server.pid();

    let mut con = server.connect();
    assert_eq!(ping(&mut con).unwrap(), "PONG");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    // DEBUG is enabled for local connections.
    let _: () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg(0)
        .query(&mut con)
        .unwrap();

    // Paused: the connection stays open but nothing answers.
    server.pause();
    con.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let err = ping(&mut con).unwrap_err();
    assert!(
        err.is_timeout(),
        "expected a timeout while paused, got {err}"
    );
    server.resume();
    // The PING sent while paused is answered now; a fresh connection sees a fresh reply.
    let mut con = server.connect();
    assert_eq!(ping(&mut con).unwrap(), "PONG");

    // Stopped: connections are refused.
    server.stop();
    assert!(!server.is_running());
    assert_eq!(server.pid(), first_pid);
    assert!(server.try_connect().is_err());
    server.stop(); // idempotent

    // Restarted on the same port, as a new process, without the data (no persistence).
    let port = server.port();
    server.restart();
    assert!(server.is_running());
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), first_pid);
    let mut con = server.connect();
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(value, None);

    let dir = server.dir().to_path_buf();
    assert!(dir.join("stdout.log").exists());
    drop(server);
    assert!(!dir.exists(), "the server's directory is removed on drop");
}

#[tokio::test]
async fn async_connection() {
    let server = RedisServer::start();
    let mut con = server.conn().await;
    let pong: String = redis::cmd("PING").query_async(&mut con).await.unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn restart_with_aof_keeps_a_key() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut con = server.connect();
    let _: () = redis::cmd("SET")
        .arg("kept")
        .arg("42")
        .query(&mut con)
        .unwrap();
    server.stop();
    server.restart();
    let mut con = server.connect();
    let value: Option<String> = redis::cmd("GET").arg("kept").query(&mut con).unwrap();
    assert_eq!(value.as_deref(), Some("42"));
    // The extra arguments applied on restart too.
    let appendonly: (String, String) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query(&mut con)
        .unwrap();
    assert_eq!(appendonly.1, "yes");
}

#[test]
fn builder_arguments_and_directory() {
    let parent = std::env::temp_dir().join(format!("testkit-parent-{}", std::process::id()));
    std::fs::create_dir_all(&parent).unwrap();
    let server = RedisServer::builder()
        .args(&["--timeout", "2"])
        .dir_in(&parent)
        .try_start()
        .unwrap();
    assert!(
        server
            .dir()
            .starts_with(std::path::absolute(&parent).unwrap())
    );
    let mut con = server.try_connect().unwrap();
    let timeout: (String, String) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("timeout")
        .query(&mut con)
        .unwrap();
    assert_eq!(timeout.1, "2");
    let dir = server.dir().to_path_buf();
    drop(server);
    assert!(!dir.exists());
    std::fs::remove_dir(&parent).unwrap();
}

#[test]
fn a_bad_argument_is_an_error_with_the_server_output() {
    let err = RedisServer::builder()
        .args(&["--no-such-option", "1"])
        .try_start()
        .unwrap_err();
    assert!(
        err.contains("redis-server stderr") || err.contains("redis-server stdout"),
        "{err}"
    );
    assert!(err.contains("no-such-option"), "{err}");
}
