//! One conformance agent process (`interop/agent rust|java`), driven over its JSON-lines
//! protocol: requests go to its stdin, a reader thread files each response under its `id`.

use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Which agent: the crate's own, or Redisson's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    Rust,
    Java,
}

impl Impl {
    pub fn name(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Java => "java",
        }
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How long a started agent may take to print its ready line (a cold JVM is slow).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a call may take unless the scenario says otherwise.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Inbox {
    responses: HashMap<u64, Value>,
    /// Responses with `"id": null` (to lines that were not a request at all).
    unnumbered: Vec<Value>,
    ready: Option<Value>,
    closed: bool,
}

type Shared = Arc<(Mutex<Inbox>, Condvar)>;

pub struct Agent {
    /// e.g. `java#2`, for messages.
    pub label: String,
    pub client_id: String,
    pub version: String,
    child: Child,
    /// Set once the child is reaped: its pid may then belong to another process.
    reaped: AtomicBool,
    stdin: Mutex<Option<ChildStdin>>,
    next_id: AtomicU64,
    inbox: Shared,
}

impl Agent {
    /// Starts `interop/agent <imp> --redis <url> <extra...>` with its stderr in `log`, and
    /// waits for its ready line.
    pub fn start(
        root: &Path,
        imp: Impl,
        label: String,
        redis_url: &str,
        extra: &[String],
        log: &Path,
    ) -> Result<Self, String> {
        let log_file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut child = Command::new(root.join("interop/agent"))
            .arg(imp.name())
            .args(["--redis", redis_url])
            .args(extra)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start interop/agent {imp}: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let inbox: Shared = Arc::default();
        let reader_inbox = Arc::clone(&inbox);
        let reader_label = label.clone();
        thread::spawn(move || read_lines(stdout, &reader_inbox, &reader_label));

        let mut agent = Self {
            label,
            client_id: String::new(),
            version: String::new(),
            child,
            reaped: AtomicBool::new(false),
            stdin: Mutex::new(stdin),
            next_id: AtomicU64::new(1),
            inbox,
        };
        let ready = agent.wait_for(READY_TIMEOUT, |inbox| inbox.ready.take())?;
        if ready["impl"] != imp.name() {
            return Err(format!(
                "{}: ready line names impl {}",
                agent.label, ready["impl"]
            ));
        }
        agent.client_id = str_field(&ready, "client_id")?;
        agent.version = str_field(&ready, "version")?;
        Ok(agent)
    }

    /// Sends `request` (an object without `id`) and returns the id it was given.
    pub fn send(&self, mut request: Value) -> Result<u64, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        request["id"] = json!(id);
        self.send_raw(&request.to_string())?;
        Ok(id)
    }

    /// Writes one line, which need not be a request, to the agent's stdin.
    pub fn send_raw(&self, line: &str) -> Result<(), String> {
        let mut stdin = self.stdin.lock().unwrap();
        let pipe = stdin
            .as_mut()
            .ok_or_else(|| format!("{}: stdin closed", self.label))?;
        pipe.write_all(format!("{line}\n").as_bytes())
            .and_then(|()| pipe.flush())
            .map_err(|e| format!("{}: cannot write: {e}", self.label))
    }

    /// The next response with `"id": null`, waiting at most `timeout`.
    pub fn wait_unnumbered(&self, timeout: Duration) -> Result<Value, String> {
        self.wait_for(timeout, |inbox| {
            (!inbox.unnumbered.is_empty()).then(|| inbox.unnumbered.remove(0))
        })
    }

    /// The response to request `id`, waiting at most `timeout`.
    pub fn wait(&self, id: u64, timeout: Duration) -> Result<Value, String> {
        self.wait_for(timeout, |inbox| inbox.responses.remove(&id))
            .map_err(|e| format!("request {id}: {e}"))
    }

    /// The response to request `id` if it has arrived, without waiting.
    pub fn poll(&self, id: u64) -> Option<Value> {
        let (lock, _) = &*self.inbox;
        lock.lock().unwrap().responses.get(&id).cloned()
    }

    /// Sends `request` and waits for its response, which must be `ok`.
    pub fn call(&self, request: Value) -> Result<Value, String> {
        let op = request["op"].clone();
        let reply = self.reply(request)?;
        if reply["ok"] != true {
            return Err(format!("{}: {op} failed: {reply}", self.label));
        }
        Ok(reply)
    }

    /// Sends `request` and waits for its response, whatever it is.
    pub fn reply(&self, request: Value) -> Result<Value, String> {
        let id = self.send(request)?;
        self.wait(id, CALL_TIMEOUT)
    }

    /// The agent's process id (`interop/agent` execs the agent, so it is the JVM's or the
    /// Rust binary's); `None` once the process was reaped, when it may name another process.
    pub fn pid(&self) -> Option<u32> {
        (!self.reaped.load(Ordering::Relaxed)).then(|| self.child.id())
    }

    /// Stops the process with SIGSTOP (a GC pause, a stalled VM), until [`resume`](Self::resume).
    pub fn pause(&self) -> Result<(), String> {
        self.signal(libc::SIGSTOP)
    }

    /// Continues a process stopped by [`pause`](Self::pause).
    pub fn resume(&self) -> Result<(), String> {
        self.signal(libc::SIGCONT)
    }

    fn signal(&self, signal: libc::c_int) -> Result<(), String> {
        if self.reaped.load(Ordering::Relaxed) {
            return Err(format!("{} has exited", self.label));
        }
        let pid = libc::pid_t::try_from(self.child.id()).map_err(|e| e.to_string())?;
        // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
        if unsafe { libc::kill(pid, signal) } == 0 {
            Ok(())
        } else {
            Err(format!(
                "{}: kill({pid}, {signal}): {}",
                self.label,
                std::io::Error::last_os_error()
            ))
        }
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reaped.store(true, Ordering::Relaxed);
    }

    fn wait_for<T>(
        &self,
        timeout: Duration,
        mut take: impl FnMut(&mut Inbox) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + timeout;
        let (lock, cond) = &*self.inbox;
        let mut inbox = lock.lock().unwrap();
        loop {
            if let Some(value) = take(&mut inbox) {
                return Ok(value);
            }
            if inbox.closed {
                return Err(format!(
                    "{} exited (its log is under the logs directory)",
                    self.label
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("{}: no answer within {timeout:?}", self.label));
            }
            inbox = cond.wait_timeout(inbox, deadline - now).unwrap().0;
        }
    }
}

impl Drop for Agent {
    /// Closes stdin (the agent then shuts its client down and exits), and kills it if it is
    /// still running five seconds later. A paused agent is resumed first.
    fn drop(&mut self) {
        // A paused agent would never read its end of input.
        let _ = self.resume();
        drop(self.stdin.lock().unwrap().take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                self.reaped.store(true, Ordering::Relaxed);
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "{}: still running 5 s after end of input; killing it",
            self.label
        );
        self.kill();
    }
}

fn read_lines(stdout: impl std::io::Read, inbox: &Shared, label: &str) {
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let value: Value = match serde_json::from_str(&line) {
            Ok(value) => value,
            Err(e) => {
                eprintln!("{label}: not JSON on stdout ({e}): {line}");
                continue;
            }
        };
        let (lock, cond) = &**inbox;
        let mut inbox = lock.lock().unwrap();
        if value["event"] == "ready" {
            inbox.ready = Some(value);
        } else if let Some(id) = value["id"].as_u64() {
            inbox.responses.insert(id, value);
        } else if value.get("id").is_some_and(Value::is_null) {
            inbox.unnumbered.push(value);
        } else {
            eprintln!("{label}: line without id: {line}");
        }
        cond.notify_all();
    }
    let (lock, cond) = &**inbox;
    lock.lock().unwrap().closed = true;
    cond.notify_all();
}

fn str_field(value: &Value, field: &str) -> Result<String, String> {
    value[field]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no string {field:?} in {value}"))
}
