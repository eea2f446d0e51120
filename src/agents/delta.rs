//! Which agent rows a `list` delta carries: a profile's row is resolved along its `extends`
//! chain (model, reasoning effort, skill count, inheritance error), so it changes when its own
//! file or any profile its chain looks up changes, including one whose absence broke it.

use std::cell::RefCell;
use std::collections::BTreeSet;

use serde_json::Value;

use super::Catalog;
use crate::list_revision::KeyedRows;
use crate::rules::agent::extends_chain;

/// The listed profiles with what each row is derived from.
pub(super) struct Listed {
    pub catalog: Catalog,
    pub rows: Vec<(String, Value)>,
}

impl Listed {
    /// Every id the resolution of `id`'s row looks up: its own, then each parent up to where
    /// the chain ends or breaks (a missing parent included).
    fn looked_up(&self, id: &str) -> BTreeSet<String> {
        let looked = RefCell::new(BTreeSet::from([id.to_string()]));
        if let Some(entry) = self.catalog.get(id) {
            let _ = extends_chain(
                id,
                entry,
                |entry| entry.profile().extends.as_deref(),
                |parent| {
                    looked.borrow_mut().insert(parent.to_string());
                    self.catalog.get(parent)
                },
            );
        }
        looked.into_inner()
    }
}

impl KeyedRows for Listed {
    const FIELD: &'static str = "agents";

    fn rows(&self) -> &[(String, Value)] {
        &self.rows
    }

    /// The walk is the same at both revisions up to its first lookup of a changed id, so a
    /// row that differs looks one up now.
    fn touched(&self, key: &str, changed: &BTreeSet<String>) -> bool {
        self.looked_up(key).iter().any(|id| changed.contains(id))
    }
}
