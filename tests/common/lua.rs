//! The Lua scripts of one lock kind, `lua/<dir>/` (`dir` is `"lock"`, `"rwlock"` or `"fair"`),
//! for the script tests (`tests/scripts.rs`, `tests/rwlock_scripts.rs`,
//! `tests/fair_scripts.rs`): reading them, raw `EVAL` and `SCRIPT` commands, and the checks
//! every kind's scripts share (the file list, the header, the SHA redis-rs sends).

use std::path::PathBuf;

use redis::aio::MultiplexedConnection;
use redis::{ToRedisArgs, Value};

/// `lua/<dir>` of the crate.
pub fn lua_dir(dir: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("lua")
        .join(dir)
}

/// Every `*.lua` under `lua/<dir>/`, sorted by file name, with its text.
pub fn scripts(dir: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(lua_dir(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "lua"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// The text of `lua/<dir>/<file>`.
pub fn script(dir: &str, file: &str) -> String {
    std::fs::read_to_string(lua_dir(dir).join(file)).unwrap()
}

/// `EVAL <text> <keys> <args>` with the reply undecoded.
pub async fn eval<A: ToRedisArgs>(
    raw: &mut MultiplexedConnection,
    text: &str,
    keys: &[&str],
    args: &[A],
) -> Value {
    redis::cmd("EVAL")
        .arg(text)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query_async(raw)
        .await
        .unwrap()
}

/// `SCRIPT FLUSH`.
pub async fn script_flush(raw: &mut MultiplexedConnection) {
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(raw)
        .await
        .unwrap();
}

/// `SCRIPT EXISTS sha`.
pub async fn script_exists(raw: &mut MultiplexedConnection, sha: &str) -> bool {
    let v: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(sha)
        .query_async(raw)
        .await
        .unwrap();
    v == [true]
}

/// `SCRIPT LOAD text`, asserting that the SHA Redis computes is the one redis-rs sends with
/// EVALSHA; `what` names the script in failure messages.
pub async fn script_load(raw: &mut MultiplexedConnection, what: &str, text: &str) -> String {
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(text)
        .query_async(raw)
        .await
        .unwrap_or_else(|e| panic!("{what}: SCRIPT LOAD failed: {e}"));
    assert_eq!(
        sha,
        redis::Script::new(text).get_hash(),
        "{what}: the sha redis-rs sends with EVALSHA must be the one Redis computes"
    );
    sha
}

/// Asserts that the `*.lua` files under `lua/<dir>/` are exactly the files of `expected`
/// (`(file, Redisson name)` pairs, in any order).
pub fn assert_files(dir: &str, expected: &[(&str, &str)]) {
    let names: Vec<String> = scripts(dir).into_iter().map(|(n, _)| n).collect();
    let mut files: Vec<&str> = expected.iter().map(|(f, _)| *f).collect();
    files.sort_unstable();
    assert_eq!(names, files, "files under lua/{dir}/");
}

/// Asserts the comment header of every script under `lua/<dir>/`: at least 4 lines, the first
/// starting with the script's own path (`-- <dir>/<file>`), holding every one of `words` and
/// the Redisson name `redisson` gives the file; and a body that calls `redis.call`.
pub fn assert_headers(dir: &str, redisson: &[(&str, &str)], words: &[&str]) {
    for (file, text) in scripts(dir) {
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with("--")).collect();
        assert!(
            header.len() >= 4,
            "{file}: expected a comment header, got {header:?}"
        );
        let header = header.join("\n");
        assert!(
            header.starts_with(&format!("-- {dir}/{file}")),
            "{file}: header must start with its own path: {header}"
        );
        for word in words {
            assert!(
                header.contains(word),
                "{file}: header lacks {word:?}:\n{header}"
            );
        }
        let name = redisson
            .iter()
            .find(|(f, _)| *f == file)
            .map(|(_, r)| *r)
            .unwrap_or_else(|| panic!("{file}: not among the expected scripts"));
        assert!(
            header.contains(name),
            "{file}: header must cite Redisson's {name}:\n{header}"
        );
        assert!(
            text.lines()
                .any(|l| !l.starts_with("--") && l.contains("redis.call")),
            "{file}: no redis calls"
        );
    }
}
