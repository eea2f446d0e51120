//! The compact index `skills::catalog` reads (`catalog.rs`), built once per revision by the
//! skill cache (`cache.rs`), apart from both so that neither imports the other.

use super::doubled::Doubled;
use super::rows::Rows;
use crate::doc::ids::first_segment;

/// The Agent Skills of one revision, in on-disk id order, compact: what a catalog filters and
/// counts without reading the rows it does not show (at 50,000 skills, a pass that touched
/// every row cost more than the whole answer).
pub struct CatalogIndex {
    pub(super) rows: Vec<CatalogRow>,
    /// The namespaces (first id segments) the rows fall in, each once.
    pub(super) namespaces: Vec<Box<str>>,
    /// Whether a row is a second reading (`skills::doubled`): without one, the rows a
    /// catalog does not show are counted by their number.
    pub(super) any_doubled: bool,
}

pub(super) struct CatalogRow {
    /// The row's position in the revision's rows.
    pub(super) at: u32,
    /// Its namespace, in `namespaces`.
    pub(super) ns: u32,
    pub(super) always_visible: bool,
    /// The second reading of a local file (`skills::doubled`), shown only when asked for.
    pub(super) doubled: bool,
}

impl CatalogIndex {
    pub fn build(rows: &Rows, doubled: &Doubled) -> CatalogIndex {
        let mut index = CatalogIndex {
            rows: Vec::new(),
            namespaces: Vec::new(),
            any_doubled: false,
        };
        for (at, listed) in rows.iter().enumerate() {
            if listed.catalog.is_none() {
                continue;
            }
            let ns = first_segment(listed.id());
            // Rows come in id order, so a namespace's rows are mostly together (`a-b/x` sorts
            // between `a` and `a/x`): a namespace met again gets another entry.
            if index.namespaces.last().is_none_or(|last| **last != *ns) {
                index.namespaces.push(ns.into());
            }
            let second_reading = doubled.holds_row(listed);
            index.any_doubled |= second_reading;
            index.rows.push(CatalogRow {
                at: at as u32,
                ns: (index.namespaces.len() - 1) as u32,
                always_visible: listed.always_visible,
                doubled: second_reading,
            });
        }
        index
    }
}
