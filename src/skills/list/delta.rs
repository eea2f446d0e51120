//! A `skills::list` delta: the rows that changed since a revision, with the request's filters
//! applied as to a whole list, and the ids a client holding the earlier answer must drop.
//!
//! A client keys its rows by the id the answer shows (the display id). For each on-disk id the
//! change log names, `changed` holds its row when the filters admit it now; `removed` holds
//! each id that row could have been shown under (its own, and for `<ns>/index` also `<ns>`)
//! when no row of the current answer is shown under it. An id shown now whose row did not
//! change was shown, with the same row, at the earlier revision (the filters and the
//! visibility depend only on the row, and a visibility change makes the answer whole), so a
//! client that drops `removed` and sets `changed` holds exactly the current answer. `removed`
//! may name an id the client never held (a row that was filtered out before and still is, or
//! the other of a row's two possible ids); dropping it is harmless. Keys outside the request's
//! `prefix` are left out altogether: the prefix applies to the on-disk id, which never changes.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::{Filter, Listed};
use crate::error::{Error, Result};
use crate::index::Reader;

/// `{"revision":…,"changed":[row…],"removed":[id…]}` for the on-disk ids `keys` that changed.
pub(super) fn answer(
    reader: &Reader,
    filter: &Filter<'_>,
    include_description: bool,
    keys: &BTreeSet<String>,
    revision: u64,
) -> Result<Value> {
    // `prefix` applies to the on-disk id, which a row keeps for life: a key outside it was in
    // no earlier answer of this request and is in none now.
    let keys: Vec<&String> = keys
        .iter()
        .filter(|k| filter.prefix.is_none_or(|p| k.starts_with(p)))
        .collect();
    let mut rows = Rows {
        reader,
        decoded: HashMap::new(),
    };
    let mut changed = Vec::new();
    for key in &keys {
        if let Some(listed) = rows.get(key)?.filter(|l| filter.admits(l)) {
            changed.push(
                serde_json::to_value(listed.as_row(include_description)).map_err(Error::json)?,
            );
        }
    }
    let mut removed = BTreeSet::new();
    for key in &keys {
        for shown in [Some(key.as_str()), key.strip_suffix("/index")]
            .into_iter()
            .flatten()
        {
            if !rows.shows(shown, filter)? {
                removed.insert(shown);
            }
        }
    }
    Ok(json!({ "revision": revision, "changed": changed, "removed": removed }))
}

/// The rows of the snapshot a delta looks at, decoded once each.
struct Rows<'r> {
    reader: &'r Reader,
    decoded: HashMap<String, Option<Listed>>,
}

impl Rows<'_> {
    fn get(&mut self, id: &str) -> Result<Option<&Listed>> {
        if !self.decoded.contains_key(id) {
            let listed = self
                .reader
                .skill(id)?
                .map(|row| Listed::new(id.to_string(), &row));
            self.decoded.insert(id.to_string(), listed);
        }
        Ok(self.decoded[id].as_ref())
    }

    /// Whether the current answer shows a row under `shown`: the row of that on-disk id, or
    /// of `<shown>/index` shown without its `/index`.
    fn shows(&mut self, shown: &str, filter: &Filter<'_>) -> Result<bool> {
        for id in [shown.to_string(), format!("{shown}/index")] {
            if self
                .get(&id)?
                .is_some_and(|l| l.shown_id() == shown && filter.admits(l))
            {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
