//! Running the nine tests of one [`per_kind!`](crate::common::per_kind) group at once, for the
//! groups whose tests spend their time waiting on timers (lease ends, partitions, stalls): the
//! test harness runs as many tests at a time as the machine has cores (two in CI), so nine
//! tests that each sleep for seconds would take nine times as long as one. With
//! `per_kind!(at_once multi_thread(2), async fn NAME)`, the first of the group's tests to run starts every kind's body at
//! once, each on a thread of its own with a runtime of its own (what `#[tokio::test]` would
//! give it), and each test waits for its own kind's outcome and reports it: a failure still
//! fails the test of its kind, with the panic's message and place.
//!
//! At most [`AT_ONCE`] bodies run at a time in the whole test binary, so that two groups the
//! harness runs side by side do not crowd the machine.
//!
//! Only the kinds whose tests the harness will run are started: a run filtered to some tests
//! (`cargo test --test NAME -- GROUP::lock`, `--exact`, `--skip`) starts those alone, so that no
//! body is still running (with its servers) when the harness exits. The harness's filter is
//! read from the command line as libtest reads it ([`selected`]); a kind left out by a mistake
//! there is started when its test runs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Condvar, Mutex, Once, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use futures_util::future::LocalBoxFuture;

use super::Kind;

/// How many bodies may run at a time in one test binary.
pub const AT_ONCE: usize = 9;

/// How long a test waits for its kind's body before it fails as hung.
const PATIENCE: Duration = Duration::from_secs(600);

/// The runtime a body runs on, as `#[tokio::test]` would build it.
#[derive(Clone, Copy, Debug)]
pub enum Flavor {
    /// `#[tokio::test]`: one thread.
    CurrentThread,
    /// `#[tokio::test(flavor = "multi_thread", worker_threads = N)]`.
    MultiThread(usize),
}

impl Flavor {
    fn runtime(self) -> tokio::runtime::Runtime {
        match self {
            Self::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            Self::MultiThread(n) => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(n);
                b
            }
        }
        .enable_all()
        .build()
        .unwrap()
    }
}

/// The outcomes of one group's bodies, by kind: `None` while it runs.
pub struct Batch {
    /// The labels of the kinds the group excludes (never started).
    excluded: &'static [&'static str],
    started: Mutex<[bool; 9]>,
    outcomes: Mutex<[Option<Result<(), String>>; 9]>,
    done: Condvar,
}

/// Bodies running now, in the whole binary.
static RUNNING: Mutex<usize> = Mutex::new(0);
static SLOT_FREED: Condvar = Condvar::new();

/// Where each body thread panicked (its name, the panic's message and place), kept by the
/// panic hook that [`Batch::run`] installs once.
static PANICS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static HOOK: Once = Once::new();

/// The thread name of a body: `matrix:<test>:<kind>`.
fn thread_name(test: &str, kind: Kind) -> String {
    format!("matrix:{test}:{kind}")
}

impl Batch {
    /// A group not started yet, without the kinds labelled in `excluded`.
    pub const fn new(excluded: &'static [&'static str]) -> Self {
        Self {
            excluded,
            started: Mutex::new([false; 9]),
            outcomes: Mutex::new([const { None }; 9]),
            done: Condvar::new(),
        }
    }

    /// Runs the test of `kind` in the group `test` (the group's module, `module_path!()`):
    /// starts the body of every kind the harness will run (the first call of the group) and
    /// `kind`'s if it is not running yet, then waits for `kind`'s and panics as it did.
    pub fn run(
        &'static self,
        module: &'static str,
        kind: Kind,
        body: fn(Kind) -> LocalBoxFuture<'static, ()>,
        flavor: Flavor,
    ) {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if let Some(name) = std::thread::current().name()
                    && name.starts_with("matrix:")
                {
                    PANICS
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((name.to_owned(), info.to_string()));
                }
                previous(info);
            }));
        });
        // The test's name as the harness knows it: the module path without the crate's name.
        let test = module.split_once("::").map_or(module, |(_, path)| path);
        let index = Kind::ALL.iter().position(|&k| k == kind).unwrap();
        {
            let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
            let first = !started.contains(&true);
            for (i, k) in Kind::ALL.into_iter().enumerate() {
                let wanted = i == index
                    || (first
                        && !self.excluded.contains(&k.label())
                        && selected(&format!("{test}::{k}")));
                if wanted && !started[i] {
                    started[i] = true;
                    std::thread::Builder::new()
                        .name(thread_name(test, k))
                        .spawn(move || self.body(k, body, flavor))
                        .unwrap();
                }
            }
        }
        // Wait for this kind's outcome and let go of the lock before reporting it: a test that
        // panicked holding it would poison it, and `wait_timeout_while` returns at once on a
        // poisoned lock, so every test still waiting would end without its outcome (and pass).
        let deadline = Instant::now() + PATIENCE;
        let mut outcomes = self.outcomes.lock().unwrap_or_else(PoisonError::into_inner);
        let outcome = loop {
            if outcomes[index].is_some() {
                break outcomes[index].clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break None;
            }
            outcomes = self
                .done
                .wait_timeout(outcomes, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        drop(outcomes);
        match outcome {
            None => panic!("{test}::{kind} did not finish within {PATIENCE:?}"),
            Some(Err(panic)) => panic!("{test}::{kind}: {panic}"),
            Some(Ok(())) => {}
        }
    }

    /// One body, on its thread: waits for a slot, runs, records the outcome.
    fn body(&self, kind: Kind, body: fn(Kind) -> LocalBoxFuture<'static, ()>, flavor: Flavor) {
        {
            let running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
            let mut running = SLOT_FREED
                .wait_while(running, |n| *n >= AT_ONCE)
                .unwrap_or_else(PoisonError::into_inner);
            *running += 1;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| flavor.runtime().block_on(body(kind))));
        *RUNNING.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        SLOT_FREED.notify_all();
        let outcome = outcome.map_err(|payload| {
            let name = std::thread::current().name().unwrap_or_default().to_owned();
            let recorded = PANICS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .rev()
                .find(|(thread, _)| *thread == name)
                .map(|(_, panic)| panic.clone());
            recorded.unwrap_or_else(|| {
                payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "a panic without a message".to_owned())
            })
        });
        let index = Kind::ALL.iter().position(|&k| k == kind).unwrap();
        self.outcomes.lock().unwrap_or_else(PoisonError::into_inner)[index] = Some(outcome);
        self.done.notify_all();
    }
}

/// The harness's filter, as libtest reads its command line: the free arguments (a test runs
/// when its name contains one of them, or equals one with `--exact`; every test without any),
/// less the tests `--skip` names.
struct Filter {
    include: Vec<String>,
    skip: Vec<String>,
    exact: bool,
}

/// Whether the harness will run the test named `name` (`GROUP::kind` here; a test of its own
/// where a binary is its own harness, as `tests/cluster.rs` is).
pub fn selected(name: &str) -> bool {
    static FILTER: OnceLock<Filter> = OnceLock::new();
    let filter = FILTER.get_or_init(|| {
        // libtest's options that take a value (as `--opt value` or `--opt=value`).
        const VALUED: [&str; 6] = [
            "--test-threads",
            "--logfile",
            "--format",
            "--color",
            "--shuffle-seed",
            "-Z",
        ];
        let mut filter = Filter {
            include: Vec::new(),
            skip: Vec::new(),
            exact: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            if arg == "--exact" {
                filter.exact = true;
            } else if let Some(value) = arg.strip_prefix("--skip=") {
                filter.skip.push(value.to_owned());
            } else if arg == "--skip" {
                filter.skip.extend(args.next());
            } else if VALUED.contains(&arg.as_str()) {
                args.next();
            } else if !arg.starts_with('-') {
                filter.include.push(arg);
            }
        }
        filter
    });
    let matches = |pattern: &String| {
        if filter.exact {
            name == pattern
        } else {
            name.contains(pattern.as_str())
        }
    };
    (filter.include.is_empty() || filter.include.iter().any(matches))
        && !filter.skip.iter().any(matches)
}
