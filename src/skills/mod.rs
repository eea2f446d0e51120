//! `directory::skills::*`: `list`, `get`, `index`, `search` and `catalog` answered from the index's skill rows (with
//! `filter_unregistered` applied at read time), and the writes (`create`, `update`, `delete`).

mod cache;
mod catalog;
mod catalog_index;
pub mod doubled;
mod get;
mod list;
mod listed;
mod overview;
mod placement;
pub mod resources;
mod rows;
mod search;
mod segments;
pub mod spec;
mod vectors;
pub mod write;

pub use cache::SkillCache;
#[cfg(any(test, feature = "testing"))]
pub use cache::Structures;
pub use catalog::catalog;
pub use get::{get, no_skill_file};
pub use list::{ListAnswer, ListRows, list, list_filter_bytes};
pub use listed::row_schema as list_row_schema;
#[cfg(any(test, feature = "testing"))]
pub use listed::{RowForms, list_row_forms, list_row_json};
pub use overview::index;
#[cfg(any(test, feature = "testing"))]
pub use overview::{OverviewEntry, render_index};
pub use search::{Asker, Audience, ById, SkillTerms, search};
pub use vectors::{
    SkillLane, SkillVectors, built_as, embed_contents, skill_passages, skill_passages_digest,
};
