//! The library in process, on real files in temporary trees: each family's reads (`skills`,
//! `system_prompts`, `agents`) and writes (`writes`), the watcher and fresh reads (`watch`),
//! the index against a fresh index of the same disk (`differential`, `differential_writes`,
//! `list_deltas`), damage and rebuild (`recovery`, `texts_store`), hostile input (`hostile`),
//! racing writers (`concurrency`), the contract's line rule and the shared corpus
//! (`contract_rule`, `corpus`), the reading rules the console page shares (`vectors`), and the
//! layering of `src/` (`layers`).
//!
//! One test binary of modules: each module was a binary of its own, and every binary links the
//! whole library again. `cargo test --test library <module>::` runs one module.

mod agents;
mod concurrency;
mod contract_rule;
mod corpus;
mod differential;
mod differential_writes;
mod hostile;
mod layers;
mod list_deltas;
mod manifest;
mod recovery;
mod revision_structures;
mod skills;
mod spec_agreement;
mod system_prompts;
mod texts_store;
mod vectors;
mod watch;
mod writes;
