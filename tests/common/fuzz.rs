//! The fuzz tests' runner settings (`tests/fuzz_*.rs`): a fixed seed and a short run by
//! default, so that CI is deterministic and quick; a longer or another run through the
//! environment (CONTRIBUTING.md, "Fuzz tests"):
//!
//! - `REDISSON_FUZZ_CASES=N`: N cases per property instead of the test's own short count;
//! - `REDISSON_FUZZ_SEED=S`: the RNG seed (a `u64`) instead of [`SEED`].

use proptest::test_runner::{Config, RngSeed, TestRunner};

/// The seed of every fuzz test unless `REDISSON_FUZZ_SEED` says otherwise.
pub const SEED: u64 = 29;

/// A number from the environment variable `var`, or `default` when it is unset; panics with
/// the variable's name when it is set to something else.
fn from_env<T: std::str::FromStr>(var: &str, default: T) -> T {
    match std::env::var(var) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{var} must be a number, got {v:?}")),
        Err(_) => default,
    }
}

/// The runner settings of a property: `cases` cases (or `REDISSON_FUZZ_CASES`), the fixed
/// seed (or `REDISSON_FUZZ_SEED`), no failure files, and shrinking bounded in steps and time
/// (a failure is reported with its smallest input found within them).
pub fn config(cases: u32) -> Config {
    Config {
        cases: from_env("REDISSON_FUZZ_CASES", cases),
        rng_seed: RngSeed::Fixed(from_env("REDISSON_FUZZ_SEED", SEED)),
        failure_persistence: None,
        max_shrink_iters: 2_000,
        max_shrink_time: 30_000,
        ..Config::default()
    }
}

/// A runner with [`config`]`(cases)`, for properties run by hand (`runner.run(...)`), such
/// as those that talk to a server from a runtime of their own.
pub fn runner(cases: u32) -> TestRunner {
    TestRunner::new(config(cases))
}
