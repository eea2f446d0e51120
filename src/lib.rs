//! iii-directory: skills, system prompts and agent profiles served from folders on disk through
//! an embedded redb index.
//!
//! [`Directory`] is the whole library surface a caller needs: open it on a [`config::Config`],
//! [`Directory::reconcile`] it with the disk, and call the `directory::*` functions, which
//! answer in the contract's exact JSON shapes. [`worker`] puts it on the iii engine's bus.
//!
//! The layers point one way (see `ARCHITECTURE.md`): `doc` (one document) → `rules` (what a
//! document is to each family) → `index` (walk, reconcile, views, reader) → the families' read
//! and write functions → [`Directory`] → `watch`, [`worker`] and the command line.

// No `unwrap()` on input, I/O or lock results in library code (an `expect` documents an
// invariant); unit tests may unwrap (`clippy.toml`).
#![warn(clippy::unwrap_used)]

pub mod arena;
pub mod config;
pub mod doc;
pub mod download;
pub mod dry_run;
pub mod embed;
pub mod registry;
pub mod worker;

mod agents;
mod answer;
mod bundled;
mod code;
mod digest;
mod directory;
mod error;
mod events;
mod family_writes;
mod index;
mod list_revision;
mod locks;
mod request;
mod roots;
mod rules;
mod schema;
mod skills;
mod store;
mod sync_cookie;
mod system_prompts;
mod time;
mod watch;
mod yaml;

pub use agents::AgentProblem;
pub use answer::Answer;
pub use code::{Class, Code};
pub use directory::{
    Directory, MODEL_NAME, ModelState, ReadFunction, Skipped, WriteFunction, vectors_model,
};
pub use error::{
    ContentError, Error, IndexError, IoError, MAX_ERROR_BYTES, Result, UNNOTED_HOLDER,
};
pub use events::{ChangeEvent, Family, Subscriber};
pub use index::holder::{
    Holder as IndexHolder, NotedConfig, WORKER as WORKER_ROLE, declare as declare_process_role,
    read as read_index_holder, write_note as write_index_holder,
};
pub use index::{OpenError, Progress, Report, files as index_files, remove_files as remove_index};
pub use roots::{Root, Roots};
/// Why `check` lists a file: a [`SkipReason`] and the problems it carries.
pub use rules::FrontmatterProblem;
pub use rules::agent::ProfileProblem;
pub use rules::prompt::Problem as PromptProblem;
pub use rules::skip::{SkipReason, Special};
/// What `check --spec` reports: the Agent Skills specification's rules per served `SKILL.md`.
pub use rules::spec::{Rule as SpecRule, Severity as SpecSeverity};
pub use skills::no_skill_file;
pub use skills::resources::possible_owners as skill_resource_owners;
pub use skills::spec::{SpecReport, SpecSummary};
/// What the command line asks a running worker through a sync cookie (`reindex` beside it).
pub use sync_cookie::{
    Ask as WriterAsk, Synced, ask_writer, ask_writer_afresh, worker_folder_beside,
};
pub use watch::{RootState, RootWatch, WatchOptions, WatchStatus, Watcher};

// Text retrieval (tokenizer, BM25, the dense lane and fusion): public to the tests, which
// plug a dense lane of their own into it. (A plain comment: an outer doc here would be joined
// to the module's own, and rustdoc would resolve that one's links from this scope.)
#[cfg(any(test, feature = "testing"))]
pub mod retrieval;
#[cfg(not(any(test, feature = "testing")))]
mod retrieval;

// Function search: public to the tests and benchmarks, which rank golden catalogs with it.
#[cfg(any(test, feature = "testing"))]
pub mod search;
#[cfg(not(any(test, feature = "testing")))]
mod search;

/// What the tests, the benchmarks and the fuzz targets reach inside the crate (the `testing`
/// feature, which the crate's own dev-dependency on itself turns on; never in a release build).
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    pub use crate::bundled::parsed_skills as bundled_skills;
    pub use crate::error::quoted;
    pub use crate::index::reconcile::fresh_views;
    pub use crate::index::records::encode;
    pub use crate::index::tables::SCHEMA_VERSION;
    pub use crate::index::views::Views;
    pub use crate::index::walk::walk;
    pub use crate::rules::agent::{MAX_EXTENDS_HOPS, Profile, extends_chain, profile};
    pub use crate::rules::skill::SkillRow;
    pub use crate::rules::spec;
    pub use crate::rules::{Reading, Source};
    pub use crate::skills::{OverviewEntry, RowForms, list_row_forms, list_row_json, render_index};
    pub use crate::store::beside;
    pub use crate::time::Stamp;
}
