//! The library and the binary as processes: the command line on real trees (`cli`), SIGKILL
//! of a process in the middle of writes and reconciles (`crash`), and a process whose file-size
//! limit stands in for a full disk (`disk_full`), and the binary under a low open-file limit
//! (`open_files`). `crash` and `disk_full` run their child as
//! this binary again, limited to one ignored test (`test_support::common::child`).
//!
//! `cargo test --test processes <module>::` runs one module.

mod cli;
mod crash;
mod disk_full;
mod index_removed;
mod open_files;
mod operator;
