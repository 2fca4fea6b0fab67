//! The process plumbing of the scenario runner, shared with the benchmark harness
//! (`bench/`): a throwaway `redis-server` ([`server`]) and the conformance agents driven over
//! their JSON-lines protocol ([`agent`]).

pub mod agent;
pub mod server;
