//! The server build chosen by `REDISSON_SYNC_SERVER` is the one that runs, `DEBUG` works on it
//! whether or not it has `--enable-debug-command`, and the TLS probe agrees with the server.

use testkit::{RedisServer, ServerBuild};

#[test]
fn the_selected_build_runs_with_debug_enabled() {
    let build = ServerBuild::current();
    let line = build
        .version_line()
        .unwrap_or_else(|| panic!("{} cannot be run", build.server().display()));
    // "Redis server v=7.0.15 ..." or "Valkey server v=9.1.2 ...".
    let version = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or_else(|| panic!("no version in {line:?}"))
        .to_owned();
    let server = RedisServer::start();
    let mut con = server.connect();
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    // Valkey also reports the Redis version it is compatible with: its own comes first.
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
    };
    let reported = field("valkey_version:")
        .or_else(|| field("redis_version:"))
        .unwrap_or_default();
    assert_eq!(reported, version, "{line} but INFO says {info}");
    let () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg(0)
        .query(&mut con)
        .unwrap();
    eprintln!(
        "build {}: {line}; TLS: {}",
        build.name(),
        build.supports_tls()
    );
}

#[test]
fn the_tls_probe_matches_a_tls_start() {
    let build = ServerBuild::current();
    let files = testkit::TlsFiles::generate();
    let started = RedisServer::try_start_tls(&files, &[]);
    assert_eq!(started.is_ok(), build.supports_tls(), "{:?}", started.err());
}
