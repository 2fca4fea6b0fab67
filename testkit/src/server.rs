//! [`RedisServer`]: one private, throwaway `redis-server` child process.

use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::build::ServerBuild;

/// How long to wait for a freshly spawned server to answer PING.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Poll interval while waiting for the server to come up.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// How many fresh ports to try if another process grabs ours first.
const PORT_ATTEMPTS: usize = 5;
/// How long [`RedisServer::connect`] waits for the TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The message for a missing server binary (names the script that provides it).
pub(crate) fn missing_redis() -> String {
    let build = ServerBuild::current();
    build.missing(build.server())
}

/// Whether the server build accepts `--enable-debug-command` (Redis and Valkey 7.0+, whose
/// `DEBUG` is off by default; before 7.0 the option does not exist and `DEBUG` is on): probed
/// at the first start that tries it, by the server's refusal of the directive.
static DEBUG_OPTION: AtomicU8 = AtomicU8::new(DEBUG_OPTION_UNKNOWN);
const DEBUG_OPTION_UNKNOWN: u8 = 0;
const DEBUG_OPTION_YES: u8 = 1;
const DEBUG_OPTION_NO: u8 = 2;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A private `redis-server` child process bound to 127.0.0.1 on a free port.
///
/// It runs with `--save "" --appendonly no --enable-debug-command local` (plus any extra
/// arguments given to [`RedisServerBuilder::args`] or [`start_with`](Self::start_with), which
/// come last and so override these) in its own fresh directory, which is removed when the
/// server is dropped. Dropping it also kills the process (SIGKILL, by its own pid).
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    config_file: Option<PathBuf>,
    args: Vec<String>,
    child: Option<Child>,
    pid: u32,
}

/// Options of a [`RedisServer`] before it starts; from [`RedisServer::builder`].
#[derive(Debug, Clone, Default)]
pub struct RedisServerBuilder {
    args: Vec<String>,
    parent_dir: Option<PathBuf>,
    config: Option<(String, String)>,
}

impl RedisServerBuilder {
    /// Adds one extra `redis-server` argument, e.g. `"--timeout"` then `"2"`.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds extra `redis-server` arguments, e.g. `&["--appendonly", "yes", "--appendfsync",
    /// "always"]`. They follow the defaults (so `--appendonly yes` wins over the default
    /// `--appendonly no`) and apply on every [`RedisServer::restart`] too. Do not pass
    /// `--port`, `--bind` or `--dir`: the server owns those.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Creates the server's directory (its logs, and any AOF or RDB file) under `parent`
    /// instead of the system temp directory. It is still removed when the server is dropped.
    pub fn dir_in(mut self, parent: impl Into<PathBuf>) -> Self {
        self.parent_dir = Some(parent.into());
        self
    }

    /// Writes `text` to `file_name` in the server's directory and passes that file as the
    /// first argument of `redis-server` (the configuration file), e.g. for `--sentinel`.
    pub(crate) fn config_file(mut self, file_name: &str, text: String) -> Self {
        self.config = Some((file_name.to_owned(), text));
        self
    }

    /// Starts the server and waits until it answers PING.
    ///
    /// Panics if `redis-server` is not on PATH or the server does not come up within ~10 s
    /// (the panic message includes the server's output).
    pub fn start(self) -> RedisServer {
        self.try_start().unwrap_or_else(|msg| panic!("{msg}"))
    }

    /// [`start`](Self::start), reporting failure as an error message instead of panicking.
    pub fn try_start(self) -> Result<RedisServer, String> {
        let dir = make_dir(self.parent_dir.as_deref())?;
        let config_file = match &self.config {
            Some((name, text)) => {
                let path = dir.join(name);
                if let Err(e) = fs::write(&path, text) {
                    let _ = fs::remove_dir_all(&dir);
                    return Err(format!("write {}: {e}", path.display()));
                }
                Some(path)
            }
            None => None,
        };
        let mut server = RedisServer {
            port: 0,
            dir,
            config_file,
            args: self.args,
            child: None,
            pid: 0,
        };
        let mut last_failure = String::new();
        for _ in 0..PORT_ATTEMPTS {
            server.port = free_port()?;
            match server.spawn_and_wait() {
                Ok(()) => return Ok(server),
                // The binary is missing: no other port will help.
                Err(msg) if msg == missing_redis() => return Err(msg),
                // If the server exited on its own this was most likely a port race (someone
                // else bound the port): try another.
                Err(msg) => last_failure = format!("port {}: {msg}", server.port),
            }
        }
        Err(format!(
            "redis-server failed to start after {PORT_ATTEMPTS} attempts; last failure: {last_failure}"
        ))
    }
}

impl RedisServer {
    /// Options for a server with extra arguments or another directory.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// Starts a new server on a free port and waits until it answers PING.
    ///
    /// Panics if `redis-server` is not on PATH or the server does not come up
    /// within ~10 s (the panic message includes the server's output).
    pub fn start() -> Self {
        Self::builder().start()
    }

    /// [`start`](Self::start) with extra `redis-server` arguments (see
    /// [`RedisServerBuilder::args`]), e.g. `&["--appendonly", "yes", "--appendfsync",
    /// "always"]`; they apply on [`restart`](Self::restart) too.
    pub fn start_with(args: &[&str]) -> Self {
        Self::builder().args(args).start()
    }

    /// [`start`](Self::start), reporting failure as an error message instead of panicking.
    pub fn try_start() -> Result<Self, String> {
        Self::builder().try_start()
    }

    /// The TCP port the server listens on (stable across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's own directory (its `stdout.log` and `stderr.log`, and any AOF or RDB
    /// file); removed when the server is dropped.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// PID of the current (or, after [`stop`](Self::stop), the last) server process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether a server process is currently running (i.e. not stopped).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// A fresh `redis::Client` for this server.
    pub fn redis_client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis URL")
    }

    /// A raw multiplexed connection, for assertions independent of the
    /// library under test. Panics if it cannot connect. Its replies may take
    /// up to 10 s (redis-rs's default, 500 ms, failed an observer's `KEYS *`
    /// on a loaded CI machine): an observer waits out the load it observes.
    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(std::time::Duration::from_secs(10)));
        self.redis_client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url()))
    }

    /// A blocking connection (2 s connect timeout), for callers without a runtime. Panics if
    /// it cannot connect.
    pub fn connect(&self) -> redis::Connection {
        self.try_connect().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`connect`](Self::connect), reporting failure as an error message instead of panicking.
    pub fn try_connect(&self) -> Result<redis::Connection, String> {
        self.redis_client()
            .get_connection_with_timeout(CONNECT_TIMEOUT)
            .map_err(|e| format!("connect to {}: {e}", self.url()))
    }

    /// Kills the server (SIGKILL, simulating a crash) and reaps it.
    /// Idempotent. Data is lost unless the server was started with persistence.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_wait(&mut child);
        }
    }

    /// Starts the server again on the same port and in the same directory, with the same
    /// arguments, after [`stop`](Self::stop) (stops it first if still running) and waits
    /// until it answers PING. Panics if it does not come up.
    pub fn restart(&mut self) {
        self.try_restart().unwrap_or_else(|msg| panic!("{msg}"));
    }

    /// [`restart`](Self::restart), reporting failure as an error message instead of panicking.
    pub fn try_restart(&mut self) -> Result<(), String> {
        self.stop();
        let mut last_failure = String::new();
        // The port is ours, but allow a few attempts in case the old socket lingers briefly.
        for _ in 0..PORT_ATTEMPTS {
            match self.spawn_and_wait() {
                Ok(()) => return Ok(()),
                Err(msg) if msg == missing_redis() => return Err(msg),
                Err(msg) => {
                    last_failure = msg;
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
        Err(format!(
            "redis-server failed to restart on port {}: {last_failure}",
            self.port
        ))
    }

    /// Freezes the server with SIGSTOP: connections stay open but nothing is
    /// answered (simulates a hung server / network stall).
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP, "SIGSTOP");
    }

    /// Resumes a server frozen by [`pause`](Self::pause) (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT, "SIGCONT");
    }

    fn signal(&self, sig: libc::c_int, name: &str) {
        assert!(self.child.is_some(), "redis-server is not running");
        let pid = libc::pid_t::try_from(self.pid).expect("pid fits pid_t");
        // SAFETY: kill(2) has no memory-safety preconditions. The pid is that of our own
        // child, which is not reaped yet (we hold its `Child`), so it cannot have been reused.
        let rc = unsafe { libc::kill(pid, sig) };
        assert!(
            rc == 0,
            "kill({}, {name}) failed: {}",
            self.pid,
            std::io::Error::last_os_error()
        );
    }

    /// Spawns `redis-server` on `self.port` and waits until it answers PING; on success the
    /// process is ours, on failure it has been killed and the message includes its output.
    ///
    /// A build that refuses `--enable-debug-command` (before 7.0, where `DEBUG` is on anyway)
    /// is started again at once without it, and from then on never given it.
    fn spawn_and_wait(&mut self) -> Result<(), String> {
        loop {
            let debug_option = DEBUG_OPTION.load(Ordering::Relaxed) != DEBUG_OPTION_NO;
            let mut child = self.spawn(debug_option)?;
            match wait_ready(self.addr(), &mut child) {
                Ok(()) => {
                    if debug_option {
                        DEBUG_OPTION.store(DEBUG_OPTION_YES, Ordering::Relaxed);
                    }
                    self.pid = child.id();
                    self.child = Some(child);
                    return Ok(());
                }
                Err(reason) => {
                    kill_and_wait(&mut child);
                    let output = server_output(&self.dir);
                    if debug_option
                        && DEBUG_OPTION.load(Ordering::Relaxed) == DEBUG_OPTION_UNKNOWN
                        && output.contains("enable-debug-command")
                        && output.contains("Bad directive")
                    {
                        DEBUG_OPTION.store(DEBUG_OPTION_NO, Ordering::Relaxed);
                        continue;
                    }
                    return Err(format!("{reason}\n{output}"));
                }
            }
        }
    }

    fn spawn(&self, debug_option: bool) -> Result<Child, String> {
        let log = |name: &str| {
            let path = self.dir.join(name);
            File::create(&path).map_err(|e| format!("create {}: {e}", path.display()))
        };
        let stdout = log("stdout.log")?;
        let stderr = log("stderr.log")?;
        let mut command = Command::new(ServerBuild::current().server());
        if let Some(config) = &self.config_file {
            command.arg(config);
        }
        command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"]);
        if debug_option {
            command.args(["--enable-debug-command", "local"]);
        }
        let result = command
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn();
        result.map_err(|e| match e.kind() {
            ErrorKind::NotFound => missing_redis(),
            _ => format!(
                "failed to spawn {}: {e}",
                ServerBuild::current().server().display()
            ),
        })
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A blocking connection to `server` whose connect, reads and writes time out after `timeout`.
pub(crate) fn connect_with_timeout(
    server: &RedisServer,
    timeout: Duration,
) -> Result<redis::Connection, String> {
    let con = server
        .redis_client()
        .get_connection_with_timeout(timeout)
        .map_err(|e| format!("connect to {}: {e}", server.url()))?;
    con.set_read_timeout(Some(timeout))
        .and_then(|()| con.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("set timeouts: {e}"))?;
    Ok(con)
}

/// Runs `check` every 50 ms until it succeeds or `limit` has passed; then its last error.
pub(crate) fn poll_until_ok(
    limit: Duration,
    mut check: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let last = match check() {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(last);
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Binds 127.0.0.1:0, reads the assigned port and releases it.
pub(crate) fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
    Ok(listener
        .local_addr()
        .map_err(|e| format!("local_addr: {e}"))?
        .port())
}

/// A fresh, absolute directory under `parent` (the system temp directory by default).
pub(crate) fn make_dir(parent: Option<&Path>) -> Result<PathBuf, String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
    let dir = parent.join(format!(
        "redisson-sync-test-{}-{n}-{nanos}",
        std::process::id()
    ));
    let dir = std::path::absolute(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Polls until the server accepts a connection and replies `+PONG` to PING, and is `child`:
/// another process that took the port meanwhile (another test's server, a fault proxy in front
/// of one) answers PING too, and a test would then run against it.
fn wait_ready(addr: SocketAddr, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("redis-server exited early with {status}"));
        }
        if ping(addr, child.id()) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "redis-server did not answer PING within {STARTUP_TIMEOUT:?}"
            ));
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// One raw RESP round trip of `PING` and `INFO server`: true for a `+PONG` reply from the
/// process `pid` (`process_id:`), or from a server that refuses `INFO` to this connection.
fn ping(addr: SocketAddr, pid: u32) -> bool {
    let timeout = Duration::from_millis(500);
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    if stream
        .write_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    // Bounded: an INFO server reply is a few KiB.
    while buf.len() < 64 * 1024 {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if let Some(verdict) = ping_verdict(&buf, pid) {
            return verdict;
        }
    }
    false
}

/// What the bytes read so far say: `None` until the replies are complete enough.
fn ping_verdict(buf: &[u8], pid: u32) -> Option<bool> {
    const PONG: &[u8] = b"+PONG\r\n";
    if buf.len() < PONG.len() {
        return (!PONG.starts_with(buf)).then_some(false);
    }
    if !buf.starts_with(PONG) {
        return Some(false);
    }
    let rest = &buf[PONG.len()..];
    if rest.first() == Some(&b'-') {
        return rest.windows(2).any(|w| w == b"\r\n").then_some(true);
    }
    let text = String::from_utf8_lossy(rest);
    let line = text
        .split("\r\n")
        .find_map(|l| l.strip_prefix("process_id:"))?;
    // The line is whole once its "\r\n" arrived.
    text.contains(&format!("process_id:{line}\r\n"))
        .then(|| line.trim() == pid.to_string())
}

fn kill_and_wait(child: &mut Child) {
    // Child::kill sends SIGKILL to this pid only (works on SIGSTOPped
    // processes too); ignore "already exited".
    let _ = child.kill();
    let _ = child.wait();
}

fn server_output(dir: &Path) -> String {
    let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap_or_default();
    format!(
        "--- redis-server stdout ---\n{}--- redis-server stderr ---\n{}",
        read("stdout.log"),
        read("stderr.log")
    )
}

/// Whether an `INFO replication` reply is a replica's that has its master's data:
/// `master_link_status:up` (a replica reports it only once a sync has completed) and
/// `master_sync_in_progress:0`. A master's reply, which has neither field, is not.
pub fn replica_link_up(info: &str) -> bool {
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.trim_end().strip_prefix(name)?.strip_prefix(':'))
    };
    field("master_link_status") == Some("up") && field("master_sync_in_progress") == Some("0")
}

#[cfg(test)]
mod ready_tests {
    use super::ping_verdict;

    #[test]
    fn only_the_spawned_process_is_ready() {
        let info = |pid: &str| {
            format!(
                "+PONG\r\n$60\r\n# Server\r\nredis_version:7.0.15\r\nprocess_id:{pid}\r\ntcp_port:1\r\n\r\n"
            )
        };
        assert_eq!(ping_verdict(info("4242").as_bytes(), 4242), Some(true));
        assert_eq!(ping_verdict(info("4243").as_bytes(), 4242), Some(false));
        // Incomplete: read on.
        assert_eq!(ping_verdict(b"+PO", 4242), None);
        assert_eq!(
            ping_verdict(b"+PONG\r\n$60\r\n# Server\r\nprocess_id:42", 4242),
            None
        );
        assert_eq!(ping_verdict(b"+PONG\r\n", 4242), None);
        // Not a server that is up, or one that refuses INFO to this connection.
        assert_eq!(ping_verdict(b"-LOADING\r\n", 4242), Some(false));
        assert_eq!(ping_verdict(b"+PONG\r\n-NOPERM no\r\n", 4242), Some(true));
    }
}

#[cfg(test)]
mod replica_tests {
    use super::replica_link_up;

    #[test]
    fn a_replica_is_in_sync_once_its_link_is_up_and_no_sync_runs() {
        let info = |link: &str, syncing: &str| {
            format!(
                "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7001\r\n\
                 master_link_status:{link}\r\nmaster_last_io_seconds_ago:0\r\n\
                 master_sync_in_progress:{syncing}\r\nslave_read_repl_offset:14\r\n"
            )
        };
        assert!(replica_link_up(&info("up", "0")));
        // Restarted empty and still loading its master's data (Valkey 9.1.2, just after ROLE
        // said slave).
        assert!(!replica_link_up(&info("down", "1")));
        assert!(!replica_link_up(&info("down", "0")));
        assert!(!replica_link_up(&info("up", "1")));
        // A master has no link to report.
        assert!(!replica_link_up(
            "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n"
        ));
        // A prefix of the field's name is not the field.
        assert!(!replica_link_up(
            &info("up", "0").replace("master_link_status", "master_link_status_x")
        ));
    }
}
