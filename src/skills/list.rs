//! `directory::skills::list`, answered from the cached rows of the snapshot's revision (see
//! `cache`): a whole list is the rows the filters admit, written out once, by copying each
//! row's JSON text or serializing its fields into a value, and a `prefix` only looks at the
//! rows under it. With `since_revision`, from the change log and the few rows it names
//! (`delta`).

use std::sync::Arc;

use serde::Deserialize;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

mod delta;

use super::cache::SkillCache;
use super::listed::{Listed, Search, decimal_len};
use crate::error::Result;
use crate::index::Reader;
use crate::index::changelog::Logged;
use crate::list_revision::{self, ListRevision, ListScope, Since};
use crate::request;
use crate::rules::skill::Visibility;

/// The filters of `directory::skills::list`, applied in the contract's order: visibility,
/// `prefix` on the on-disk id, `type`, then `search` over display id, title and description.
#[derive(Deserialize, Default)]
struct ListRequest {
    search: Option<String>,
    prefix: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    include_description: Option<bool>,
    /// Beyond the original: the revision the caller already has. When the index is still at
    /// it, the answer is `{unchanged: true, revision}`; otherwise the usual answer plus
    /// `revision`.
    if_revision: Option<u64>,
    /// Beyond the original: the revision the caller already has, answered with what changed
    /// since (see `list_revision`).
    since_revision: Option<u64>,
}

/// A `skills::list` answer, written out once, in the form its caller needs: a whole list stays
/// the cached rows it lists (copied out as JSON text, or serialized straight into the value the
/// SDK sends, with no text to parse on the way); an unchanged answer or a delta is a small
/// value.
pub enum ListAnswer {
    Rows(ListRows),
    Value(Value),
}

/// `{"skills":[row…]}`, with `revision` (and `full`) when the request held a revision: the
/// rows of a cache a filter admitted, in on-disk id order.
pub struct ListRows {
    cache: Arc<SkillCache>,
    /// Positions in `cache.rows()`.
    picked: Vec<u32>,
    include_description: bool,
    revision: Option<u64>,
    full: bool,
}

impl ListRows {
    /// The rows of `cache` the filter admits. With a `prefix`, only the rows under it are
    /// looked at.
    fn pick(
        cache: Arc<SkillCache>,
        filter: &Filter<'_>,
        include_description: bool,
        revision: Option<u64>,
        full: bool,
    ) -> ListRows {
        let rows = cache.rows();
        let range = match filter.prefix {
            Some(prefix) => cache.prefix_range(prefix),
            None => 0..rows.len(),
        };
        let picked = rows
            .span(range.clone())
            .zip(range)
            .filter(|(row, _)| filter.admits(row))
            .map(|(_, i)| i as u32)
            .collect();
        ListRows {
            cache,
            picked,
            include_description,
            revision,
            full,
        }
    }

    /// How many rows the answer lists.
    pub fn len(&self) -> usize {
        self.picked.len()
    }

    fn rows(&self) -> impl ExactSizeIterator<Item = &Listed> {
        self.cache.rows().picked(&self.picked).map(|r| &**r)
    }

    /// The length of the answer as JSON, exactly, without writing it.
    pub fn json_len(&self) -> usize {
        let include_description = self.include_description;
        let rows: usize = self.rows().map(|r| r.json_len(include_description)).sum();
        let commas = self.picked.len().saturating_sub(1);
        let revision = self
            .revision
            .map_or(0, |r| ",\"revision\":".len() + decimal_len(r));
        let full = if self.full { ",\"full\":true".len() } else { 0 };
        "{\"skills\":[]}".len() + rows + commas + revision + full
    }

    /// The answer as JSON text: each row's text copied as it is cached.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(self.json_len());
        out.push_str("{\"skills\":[");
        for (i, listed) in self.rows().enumerate() {
            if i > 0 {
                out.push(',');
            }
            listed.push_json(&mut out, self.include_description);
        }
        out.push(']');
        if let Some(revision) = self.revision {
            out.push_str(&format!(",\"revision\":{revision}"));
        }
        if self.full {
            out.push_str(",\"full\":true");
        }
        out.push('}');
        out
    }
}

impl Serialize for ListRows {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(None)?;
        out.serialize_entry("skills", &Each(self))?;
        if let Some(revision) = self.revision {
            out.serialize_entry("revision", &revision)?;
        }
        if self.full {
            out.serialize_entry("full", &true)?;
        }
        out.end()
    }
}

/// The `skills` array of a [`ListRows`].
struct Each<'a>(&'a ListRows);

impl Serialize for Each<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let include_description = self.0.include_description;
        serializer.collect_seq(self.0.rows().map(|r| r.as_row(include_description)))
    }
}

impl ListRequest {
    /// The filters as the bytes a list revision is tagged with: equal for two requests whose
    /// answers hold the same rows and fields (an empty `search` or `prefix` filters nothing).
    fn filter_bytes(&self) -> Vec<u8> {
        let key = (
            self.prefix.as_deref().unwrap_or_default(),
            self.kind.as_deref(),
            self.search.as_deref().unwrap_or_default(),
            self.include_description.unwrap_or(true),
        );
        serde_json::to_vec(&key).expect("strings and a bool serialize")
    }
}

/// What a request's filters keep, in the contract's order: visibility, `prefix` on the on-disk
/// id, `type`, then `search` over display id, title and description.
struct Filter<'a> {
    visibility: Visibility<'a>,
    prefix: Option<&'a str>,
    kind: Option<&'a str>,
    /// `None` when absent or empty.
    search: Option<Search>,
}

impl<'a> Filter<'a> {
    fn of(req: &'a ListRequest, visibility: Visibility<'a>) -> Filter<'a> {
        Filter {
            visibility,
            prefix: req.prefix.as_deref(),
            kind: req.kind.as_deref(),
            search: req.search.as_deref().and_then(Search::new),
        }
    }

    fn admits(&self, listed: &Listed) -> bool {
        self.visibility
            .allows_id(listed.id(), listed.always_visible)
            && self.prefix.is_none_or(|p| listed.id().starts_with(p))
            && self
                .kind
                .is_none_or(|t| listed.kind().as_deref() == Some(t))
            && self.search.as_ref().is_none_or(|s| s.finds_in(listed))
    }
}

/// The filters of a well-formed `skills::list` request, as its revision is tagged with them
/// (the answer to one whose caller holds the current revision needs nothing else).
pub fn list_filter_bytes(request: &Value) -> Result<Vec<u8>> {
    request::parse::<ListRequest>(request).map(|req| req.filter_bytes())
}

/// `directory::skills::list`: `{"skills":[row…]}` sorted by on-disk id, or with `if_revision` /
/// `since_revision` one of the answers `list_revision` describes. `cache` gives the decoded
/// rows of `reader`'s revision; it is called only for a whole list (an unchanged answer or a
/// delta reads the few rows it needs from the snapshot).
pub fn list(
    reader: &Reader,
    visibility: Visibility<'_>,
    request: &Value,
    cache: impl FnOnce() -> Result<Arc<SkillCache>>,
) -> Result<ListAnswer> {
    let req: ListRequest = request::parse(request)?;
    let filter = Filter::of(&req, visibility);
    let include_description = req.include_description.unwrap_or(true);
    let whole = |revision, full| -> Result<ListAnswer> {
        let rows = ListRows::pick(cache()?, &filter, include_description, revision, full);
        Ok(ListAnswer::Rows(rows))
    };
    if req.if_revision.is_none() && req.since_revision.is_none() {
        return whole(None, false);
    }
    let filters = req.filter_bytes();
    let scope = ListScope {
        visibility,
        filters: &filters,
    };
    let current = ListRevision::current(reader, Logged::Skills, Some(scope))?;
    let revision = current.token;
    let since = match (req.since_revision, req.if_revision) {
        (Some(asked), _) => current.since(reader, asked)?,
        (None, Some(asked)) if asked == revision => Since::Unchanged,
        (None, _) => return whole(Some(revision), false),
    };
    match since {
        Since::Unchanged => Ok(ListAnswer::Value(list_revision::unchanged(revision))),
        Since::Full => whole(Some(revision), true),
        Since::Delta(keys) => delta::answer(reader, &filter, include_description, &keys, revision)
            .map(ListAnswer::Value),
    }
}
