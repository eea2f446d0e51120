//! `directory::skills::*`: `list`, `get` and `index` answered from the index's skill rows (with
//! `filter_unregistered` applied at read time), and the writes (`create`, `update`, `delete`).

mod cache;
mod get;
mod list;
mod listed;
mod overview;
pub mod write;

pub use cache::SkillCache;
#[cfg(any(test, feature = "testing"))]
pub use cache::Structures;
pub use get::get;
pub use list::{ListAnswer, ListRows, check_list_request, list};
#[cfg(any(test, feature = "testing"))]
pub use listed::list_row_json;
pub use overview::index;
#[cfg(any(test, feature = "testing"))]
pub use overview::{OverviewEntry, render_index};
