//! The binary's command line, above the library: its grammar (`args`), the process set-up
//! (`process`), each command carried out (`run`, with `reindex`, `check`, `download`, `bundles`
//! and the search model in `model`), and what it prints (`output`, `render`, `progress`). It
//! reaches the library only through its public paths.

pub(crate) mod args;
mod bundles;
mod check;
mod download;
pub(crate) mod error;
mod model;
pub(crate) mod open_files;
pub(crate) mod output;
pub(crate) mod process;
mod progress;
mod reindex;
mod render;
pub(crate) mod run;
