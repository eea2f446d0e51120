//! What the tests, the benchmarks and the examples of `iii-directory` share, as one dev-only
//! crate (the library's dev-dependency, never a dependency: nothing here ships).
//!
//! - [`common`]: a temporary tree laid out with the default roots, a `Directory` opened over
//!   it, and the accessors the family tests read answers with; `common::child` re-executes a
//!   test binary as a child process; `common::shared_path` finds `../shared`.
//! - [`fake_engine`]: a loopback fake of the iii engine, built to the protocol notes (§5.3).
//! - [`worker_process`]: the real `iii-directory` binary as a child process on a wire.
//! - [`engine_client`]: the test's own worker on a real engine.
//! - [`loopback`]: loopback HTTP, the workers registry stand-in and the HTTPS git server of the
//!   download tests.
//! - [`search_eval`]: the retrieval evaluation sets and their scorer.
//! - [`generate`]: deterministic skill trees for tests, benchmarks and the `generate_tree`
//!   example.
//!
//! What is tested lives in the library; what the tests share lives here. This crate holds no
//! test of the library itself, and the library never depends on it.

pub mod common;
pub mod engine_client;
pub mod fake_engine;
pub mod generate;
pub mod loopback;
pub mod search_eval;
pub mod worker_process;
