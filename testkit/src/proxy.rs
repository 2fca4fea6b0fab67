//! [`FaultProxy`]: a TCP proxy in front of one upstream address that can delay, freeze, drop
//! or reset the traffic of its connections on demand.

use std::collections::HashMap;
use std::fmt;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// How much of each connection's client→server bytes is kept, so a selector added later
/// ([`FaultProxy::set_mode_for`]) still finds a pattern sent earlier.
const HISTORY_CAP: usize = 1 << 20;
/// The longest pattern a selector or trigger may have (a pattern split across two reads is
/// still found).
const MAX_PATTERN: usize = 1024;
/// Bytes read at once from either side.
const READ_BUF: usize = 16 * 1024;
/// How long connecting to the upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`FaultProxy::reset_after`] waits for the server to start replying (proof that
/// it ran the command) before it resets the connection anyway.
const REPLY_WAIT: Duration = Duration::from_secs(1);

/// What the proxy does with the bytes of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Forward every byte at once.
    #[default]
    Pass,
    /// Forward each chunk `up` (client→server) or `down` (server→client) after it was read,
    /// in order; reading goes on meanwhile.
    Delay {
        /// Delay of the client→server bytes.
        up: Duration,
        /// Delay of the server→client bytes.
        down: Duration,
    },
    /// Hold every byte, in order, both ways; what is held is delivered when the mode goes
    /// back to [`Pass`](Self::Pass) or [`Delay`](Self::Delay) (and discarded if it goes to
    /// [`Blackhole`](Self::Blackhole)). Connections stay open.
    Freeze,
    /// Read and discard every byte, both ways; connections stay open while it lasts. A
    /// connection that lost bytes to it is reset (TCP RST both sides) once its mode is no
    /// longer `Blackhole`: TCP never goes on with a gap in its stream, so a real black hole
    /// ends either with every byte delivered late ([`Freeze`](Self::Freeze)) or with the
    /// connection broken, and this is the second. (Before, the connection went on after the
    /// gap, and every later reply answered the request before it: a fault no network makes,
    /// which the soak met, RELIABILITY.md "What the suite found in its own test bed".)
    Blackhole,
    /// Close every connection with a TCP RST on both sides (`SO_LINGER 0`); as a global
    /// mode, new connections are reset as soon as they are accepted.
    Reset,
}

impl Mode {
    /// The same delay both ways.
    pub fn delay(both: Duration) -> Self {
        Self::Delay {
            up: both,
            down: both,
        }
    }
}

/// A one-shot trigger of [`FaultProxy::reset_before`] or [`FaultProxy::reset_after`].
pub struct Trigger {
    id: u64,
    fired: Arc<AtomicBool>,
    shared: Arc<Shared>,
}

impl Trigger {
    /// Whether it has fired (a client→server chunk contained its pattern).
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Withdraws it if it has not fired yet; returns whether it had fired.
    pub fn cancel(&self) -> bool {
        self.shared.lock().triggers.retain(|t| t.id != self.id);
        self.fired()
    }
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trigger")
            .field("id", &self.id)
            .field("fired", &self.fired())
            .finish()
    }
}

/// A TCP proxy on a free port of 127.0.0.1 in front of one upstream address (on loopback),
/// with faults switched on and off at any moment through `&self`.
///
/// It runs its own tokio runtime on its own thread, so sync and async tests can both use it.
/// A mode set with [`set_mode`](Self::set_mode) applies to every connection, those already
/// open included; [`set_mode_for`](Self::set_mode_for) overrides it for the connections
/// whose client→server bytes contained a pattern. [`reset_before`](Self::reset_before) and
/// [`reset_after`](Self::reset_after) reset the connection that sends a pattern, once.
///
/// The proxy never connects anywhere but its upstream. Dropping it stops its thread and
/// closes every connection.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("upstream", &self.shared.upstream)
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (a loopback address) in [`Mode::Pass`].
    ///
    /// Panics if `upstream` is not a loopback address or the proxy cannot listen.
    pub fn start(upstream: SocketAddr) -> Self {
        assert!(
            upstream.ip().is_loopback(),
            "FaultProxy only forwards to loopback addresses, not {upstream}"
        );
        let listener = StdTcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("set the listener non-blocking");
        let addr = listener.local_addr().expect("local_addr");
        let shared = Arc::new(Shared {
            upstream,
            state: Mutex::new(State::default()),
            changes: watch::Sender::new(0),
            accepted: AtomicU64::new(0),
            open: AtomicU64::new(0),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("build the proxy's tokio runtime");
        let (shutdown, stopped) = oneshot::channel();
        let task_shared = Arc::clone(&shared);
        let thread = thread::Builder::new()
            .name(format!("fault-proxy-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("register the listener");
                    tokio::select! {
                        () = accept_loop(listener, task_shared) => {}
                        _ = stopped => {}
                    }
                });
                // Dropping the runtime drops every connection task, closing its sockets.
                drop(runtime);
            })
            .expect("spawn the proxy thread");
        Self {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The address clients connect to: `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:<port>` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.addr.port())
    }

    /// The address the proxy forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// The global mode.
    pub fn mode(&self) -> Mode {
        self.shared.lock().global
    }

    /// Sets the global mode, which every connection not picked by a
    /// [`set_mode_for`](Self::set_mode_for) selector follows, at once (open ones included).
    pub fn set_mode(&self, mode: Mode) {
        self.shared.lock().global = mode;
        self.shared.bump();
    }

    /// Gives `mode` to every connection whose client→server bytes ever contained `pattern`
    /// (e.g. `b"SUBSCRIBE"` picks the pub/sub connection), now and as connections send it
    /// later; other connections keep the global mode. When a connection matches several
    /// selectors, the one set last wins. "Ever" covers the first MiB a connection sent, and
    /// everything sent while the selector is set.
    ///
    /// Panics if `pattern` is empty or longer than 1024 bytes.
    pub fn set_mode_for(&self, pattern: &[u8], mode: Mode) {
        check_pattern(pattern);
        let mut state = self.shared.lock();
        state.selectors.retain(|(p, _)| p != pattern);
        state.selectors.push((pattern.to_vec(), mode));
        for entry in state.conns.values_mut() {
            if !entry.matched.iter().any(|m| m == pattern)
                && (contains(&entry.history, pattern) || contains(&entry.recent, pattern))
            {
                entry.matched.push(pattern.to_vec());
            }
        }
        drop(state);
        self.shared.bump();
    }

    /// Removes the selector of `pattern`: its connections follow the global mode again.
    pub fn clear_mode_for(&self, pattern: &[u8]) {
        self.shared.lock().selectors.retain(|(p, _)| p != pattern);
        self.shared.bump();
    }

    /// Removes every selector: all connections follow the global mode again.
    pub fn clear_modes_for(&self) {
        self.shared.lock().selectors.clear();
        self.shared.bump();
    }

    /// The next client→server chunk (of any connection) that contains `pattern` is not
    /// forwarded, and its connection is reset on both sides at once. Fires once.
    ///
    /// Panics if `pattern` is empty or longer than 1024 bytes.
    pub fn reset_before(&self, pattern: &[u8]) -> Trigger {
        self.add_trigger(pattern, TriggerKind::Before)
    }

    /// The next client→server chunk (of any connection) that contains `pattern` is forwarded
    /// to the server; then its connection is reset on both sides before any more
    /// server→client bytes reach the client (the proxy waits up to 1 s for the server to start
    /// replying, so the command has run). Fires once.
    ///
    /// Panics if `pattern` is empty or longer than 1024 bytes.
    pub fn reset_after(&self, pattern: &[u8]) -> Trigger {
        self.add_trigger(pattern, TriggerKind::After)
    }

    /// Resets every open connection now, on both sides; the mode does not change.
    pub fn reset_all(&self) {
        self.shared.lock().reset_epoch += 1;
        self.shared.bump();
    }

    /// How many connections the proxy has accepted so far.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// How many accepted connections are open now.
    pub fn open_connections(&self) -> u64 {
        self.shared.open.load(Ordering::SeqCst)
    }

    fn add_trigger(&self, pattern: &[u8], kind: TriggerKind) -> Trigger {
        check_pattern(pattern);
        let fired = Arc::new(AtomicBool::new(false));
        let mut state = self.shared.lock();
        state.next_id += 1;
        let id = state.next_id;
        state.triggers.push(PendingTrigger {
            id,
            pattern: pattern.to_vec(),
            kind,
            fired: Arc::clone(&fired),
        });
        Trigger {
            id,
            fired,
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn check_pattern(pattern: &[u8]) {
    assert!(
        !pattern.is_empty() && pattern.len() <= MAX_PATTERN,
        "a pattern must have 1 to {MAX_PATTERN} bytes, not {}",
        pattern.len()
    );
}

// ---- shared state -------------------------------------------------------------------------

struct Shared {
    upstream: SocketAddr,
    state: Mutex<State>,
    /// Bumped after every change of the state that can change what a connection does.
    changes: watch::Sender<u64>,
    accepted: AtomicU64,
    open: AtomicU64,
}

#[derive(Default)]
struct State {
    global: Mode,
    /// `(pattern, mode)`, the last set last.
    selectors: Vec<(Vec<u8>, Mode)>,
    triggers: Vec<PendingTrigger>,
    conns: HashMap<u64, ConnEntry>,
    next_id: u64,
    /// Connections accepted before the last increment are reset ([`FaultProxy::reset_all`]).
    reset_epoch: u64,
}

struct PendingTrigger {
    id: u64,
    pattern: Vec<u8>,
    kind: TriggerKind,
    fired: Arc<AtomicBool>,
}

#[derive(Clone, Copy)]
enum TriggerKind {
    Before,
    After,
}

/// What the state knows of one open connection.
struct ConnEntry {
    epoch: u64,
    /// The first [`HISTORY_CAP`] client→server bytes.
    history: Vec<u8>,
    /// The last [`MAX_PATTERN`] client→server bytes.
    recent: Vec<u8>,
    /// The selector patterns its client→server bytes contained.
    matched: Vec<Vec<u8>>,
}

/// What to do with a client→server chunk.
enum Up {
    Forward,
    ForwardThenReset,
    Discard,
    ResetNow,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changes.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Registers a new connection: its id and the global mode.
    fn register(&self) -> (u64, Mode) {
        let mut state = self.lock();
        state.next_id += 1;
        let id = state.next_id;
        let epoch = state.reset_epoch;
        state.conns.insert(
            id,
            ConnEntry {
                epoch,
                history: Vec::new(),
                recent: Vec::new(),
                matched: Vec::new(),
            },
        );
        (id, state.global)
    }

    fn unregister(&self, id: u64) {
        self.lock().conns.remove(&id);
    }

    fn mode_of(&self, id: u64) -> Mode {
        let state = self.lock();
        match state.conns.get(&id) {
            Some(entry) => state.mode_of(entry),
            None => Mode::Reset,
        }
    }

    fn should_reset(&self, id: u64) -> bool {
        let state = self.lock();
        match state.conns.get(&id) {
            Some(entry) => entry.epoch < state.reset_epoch || state.mode_of(entry) == Mode::Reset,
            None => true,
        }
    }

    /// Looks at a client→server chunk: selectors, history, triggers, mode.
    fn inspect_up(&self, id: u64, chunk: &[u8]) -> Up {
        let mut state = self.lock();
        let State {
            global,
            selectors,
            triggers,
            conns,
            ..
        } = &mut *state;
        let Some(entry) = conns.get_mut(&id) else {
            return Up::ResetNow;
        };
        let seen = entry.recent.len();
        let mut window = std::mem::take(&mut entry.recent);
        window.extend_from_slice(chunk);
        let mut matched_more = false;
        for (pattern, _) in selectors.iter() {
            if !entry.matched.contains(pattern) && contains_new(&window, pattern, seen) {
                entry.matched.push(pattern.clone());
                matched_more = true;
            }
        }
        let room = HISTORY_CAP.saturating_sub(entry.history.len());
        entry
            .history
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
        entry.recent = window[window.len().saturating_sub(MAX_PATTERN)..].to_vec();
        let decision = match triggers
            .iter()
            .position(|t| contains_new(&window, &t.pattern, seen))
        {
            Some(i) => {
                let trigger = triggers.remove(i);
                trigger.fired.store(true, Ordering::SeqCst);
                match trigger.kind {
                    TriggerKind::Before => Up::ResetNow,
                    TriggerKind::After => Up::ForwardThenReset,
                }
            }
            None => match mode_of(selectors, *global, entry) {
                Mode::Reset => Up::ResetNow,
                Mode::Blackhole => Up::Discard,
                _ => Up::Forward,
            },
        };
        drop(state);
        if matched_more {
            self.bump();
        }
        decision
    }
}

impl State {
    fn mode_of(&self, entry: &ConnEntry) -> Mode {
        mode_of(&self.selectors, self.global, entry)
    }
}

fn mode_of(selectors: &[(Vec<u8>, Mode)], global: Mode, entry: &ConnEntry) -> Mode {
    selectors
        .iter()
        .rev()
        .find(|(p, _)| entry.matched.contains(p))
        .map_or(global, |(_, mode)| *mode)
}

fn contains(haystack: &[u8], pattern: &[u8]) -> bool {
    haystack.windows(pattern.len()).any(|w| w == pattern)
}

/// Whether `pattern` occurs in `window` ending after its first `seen` bytes (those were
/// looked at before).
fn contains_new(window: &[u8], pattern: &[u8], seen: usize) -> bool {
    let start = (seen + 1).saturating_sub(pattern.len());
    window.len() >= start && contains(&window[start..], pattern)
}

// ---- the proxy's tasks --------------------------------------------------------------------

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                tokio::spawn(serve(Arc::clone(&shared), client));
            }
            // Out of file descriptors or the like: try again shortly.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Counts an open connection while its task lives.
struct OpenGuard<'a>(&'a Shared);

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Closes `stream` with a TCP RST.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

async fn serve(shared: Arc<Shared>, mut client: TcpStream) {
    shared.accepted.fetch_add(1, Ordering::SeqCst);
    shared.open.fetch_add(1, Ordering::SeqCst);
    let _open = OpenGuard(&shared);
    let (id, mode) = shared.register();
    let _registered = Unregister(&shared, id);
    if mode == Mode::Reset {
        reset(client);
        return;
    }
    let mut upstream =
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(shared.upstream)).await {
            Ok(Ok(upstream)) => upstream,
            _ => {
                reset(client);
                return;
            }
        };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let conn = Conn {
        id,
        shared: Arc::clone(&shared),
        reset: AtomicBool::new(false),
        mute_down: AtomicBool::new(false),
        down_reads: watch::Sender::new(0),
        lost_bytes: AtomicBool::new(false),
    };
    let reset_wanted = {
        let (client_read, client_write) = client.split();
        let (upstream_read, upstream_write) = upstream.split();
        let (up_tx, up_rx) = mpsc::unbounded_channel();
        let (down_tx, down_rx) = mpsc::unbounded_channel();
        let pump = async {
            tokio::join!(
                conn.read_up(client_read, up_tx),
                conn.write(Dir::Up, up_rx, upstream_write),
                conn.read_down(upstream_read, down_tx),
                conn.write(Dir::Down, down_rx, client_write),
            )
        };
        tokio::select! {
            _ = pump => false,
            () = conn.reset_wanted() => true,
        }
    };
    if reset_wanted {
        reset(client);
        reset(upstream);
    }
}

/// Removes a connection's entry from the state when its task ends.
struct Unregister<'a>(&'a Shared, u64);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.0.unregister(self.1);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

struct Chunk {
    data: Vec<u8>,
    read_at: Instant,
    /// Reset the connection once this chunk is written ([`FaultProxy::reset_after`]).
    reset_after: bool,
}

/// One proxied connection, shared by its four pumps (two readers, two writers).
struct Conn {
    id: u64,
    shared: Arc<Shared>,
    /// Set to reset the connection (a trigger fired, or a side failed).
    reset: AtomicBool,
    /// Set once a [`FaultProxy::reset_after`] trigger fired: nothing more reaches the client.
    mute_down: AtomicBool,
    /// How many server→client chunks were read.
    down_reads: watch::Sender<u64>,
    /// Set once a byte of either direction was discarded by a [`Mode::Blackhole`]: the
    /// connection is reset as soon as its mode is another.
    lost_bytes: AtomicBool,
}

impl Conn {
    fn request_reset(&self) {
        self.reset.store(true, Ordering::SeqCst);
        self.shared.bump();
    }

    /// Returns when the connection is to be reset.
    async fn reset_wanted(&self) {
        let mut changes = self.shared.changes.subscribe();
        loop {
            changes.borrow_and_update();
            if self.reset.load(Ordering::SeqCst) || self.shared.should_reset(self.id) {
                return;
            }
            if self.lost_bytes.load(Ordering::SeqCst)
                && self.shared.mode_of(self.id) != Mode::Blackhole
            {
                return;
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Reads client→server chunks and queues those to forward. When the client closes or
    /// resets its side, what it sent before is still delivered (it was "in the network"), with
    /// its delay; then the server side is closed.
    async fn read_up(&self, mut input: ReadHalf<'_>, queue: mpsc::UnboundedSender<Chunk>) {
        let mut buf = vec![0; READ_BUF];
        loop {
            let n = match input.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let read_at = Instant::now();
            let chunk = |reset_after| Chunk {
                data: buf[..n].to_vec(),
                read_at,
                reset_after,
            };
            match self.shared.inspect_up(self.id, &buf[..n]) {
                Up::Forward => {
                    let _ = queue.send(chunk(false));
                }
                Up::Discard => self.lose_bytes(),
                Up::ForwardThenReset => {
                    self.mute_down.store(true, Ordering::SeqCst);
                    let _ = queue.send(chunk(true));
                    // The writer resets the connection after this chunk: read no more.
                    return std::future::pending().await;
                }
                Up::ResetNow => return self.fail().await,
            }
        }
    }

    /// Reads server→client chunks and queues those to forward.
    async fn read_down(&self, mut input: ReadHalf<'_>, queue: mpsc::UnboundedSender<Chunk>) {
        let mut buf = vec![0; READ_BUF];
        loop {
            let n = match input.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => n,
                Err(_) => return self.fail().await,
            };
            let read_at = Instant::now();
            self.down_reads.send_modify(|c| *c += 1);
            if self.mute_down.load(Ordering::SeqCst) {
                continue;
            }
            if self.shared.mode_of(self.id) == Mode::Blackhole {
                self.lose_bytes();
                continue;
            }
            let _ = queue.send(Chunk {
                data: buf[..n].to_vec(),
                read_at,
                reset_after: false,
            });
        }
    }

    /// Writes the queued chunks of one direction as the mode allows; shuts the direction
    /// down once its reader is done and the queue is empty.
    async fn write(
        &self,
        dir: Dir,
        mut queue: mpsc::UnboundedReceiver<Chunk>,
        mut output: WriteHalf<'_>,
    ) {
        let mut changes = self.shared.changes.subscribe();
        while let Some(chunk) = queue.recv().await {
            let deliver = self.wait_deliverable(dir, &chunk, &mut changes).await;
            if chunk.reset_after && !deliver {
                return self.fail().await;
            }
            if !deliver {
                // Queued (delayed or frozen) when the black hole began: discarded by it.
                self.lose_bytes();
                continue;
            }
            if dir == Dir::Down && self.mute_down.load(Ordering::SeqCst) {
                continue;
            }
            let replies_before = *self.down_reads.borrow();
            if output.write_all(&chunk.data).await.is_err() {
                return self.fail().await;
            }
            if chunk.reset_after {
                // The server has the command; reset once it starts replying (it ran it).
                let mut reads = self.down_reads.subscribe();
                let _ =
                    tokio::time::timeout(REPLY_WAIT, reads.wait_for(|n| *n > replies_before)).await;
                return self.fail().await;
            }
        }
        let _ = output.shutdown().await;
    }

    /// Waits until `chunk` may be written (true) or is to be discarded (false).
    async fn wait_deliverable(
        &self,
        dir: Dir,
        chunk: &Chunk,
        changes: &mut watch::Receiver<u64>,
    ) -> bool {
        loop {
            changes.borrow_and_update();
            match self.shared.mode_of(self.id) {
                Mode::Pass => return true,
                Mode::Blackhole => return false,
                Mode::Delay { up, down } => {
                    let due = chunk.read_at + if dir == Dir::Up { up } else { down };
                    if Instant::now() >= due {
                        return true;
                    }
                    tokio::select! {
                        () = tokio::time::sleep_until(due) => {}
                        _ = changes.changed() => {}
                    }
                }
                // Held until the mode changes (a reset is done by `serve`).
                Mode::Freeze | Mode::Reset => {
                    if changes.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            }
        }
    }

    /// Notes that a black hole discarded bytes of this connection; `reset_wanted` resets it
    /// once the mode is another (the mode change wakes it).
    fn lose_bytes(&self) {
        if !self.lost_bytes.swap(true, Ordering::SeqCst) {
            // The mode may have changed between its check and this store: look again.
            self.shared.bump();
        }
    }

    /// Asks for the connection to be reset and waits for `serve` to do it.
    async fn fail(&self) {
        self.request_reset();
        std::future::pending::<()>().await;
    }
}
