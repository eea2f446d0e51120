//! `directory::skills::list`, answered from the cached rows of the snapshot's revision (see
//! `cache`), each kept as JSON text: a list of every row costs little more than copying that
//! text, and a `prefix` only looks at the rows under it. With `since_revision`, from the change
//! log and the few rows it names (`delta`).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

mod delta;

use super::cache::{Listed, SkillCache};
use crate::error::Result;
use crate::index::Reader;
use crate::index::changelog::Logged;
use crate::list_revision::{self, ListRevision, Since};
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

/// `{"skills":[row…]` and `tail` then `}`: every row of `cache` the filter admits, in on-disk
/// id order. With a `prefix`, only the rows under it are looked at.
fn rows_json(
    cache: &SkillCache,
    filter: &Filter<'_>,
    include_description: bool,
    tail: &str,
) -> String {
    let rows = match filter.prefix {
        Some(prefix) => cache.with_prefix(prefix),
        None => cache.rows(),
    };
    let mut out = String::with_capacity(rows.iter().map(|r| r.json_len() + 1).sum::<usize>() + 64);
    out.push_str("{\"skills\":[");
    let mut first = true;
    for listed in rows.iter().filter(|l| filter.admits(l)) {
        if !first {
            out.push(',');
        }
        first = false;
        listed.push_json(&mut out, include_description);
    }
    out.push(']');
    out.push_str(tail);
    out.push('}');
    out
}

/// What a request's filters keep, in the contract's order: visibility, `prefix` on the on-disk
/// id, `type`, then `search` over display id, title and description.
struct Filter<'a> {
    visibility: Visibility<'a>,
    prefix: Option<&'a str>,
    kind: Option<&'a str>,
    /// Lowercase; `None` when absent or empty.
    search: Option<String>,
}

impl<'a> Filter<'a> {
    fn of(req: &'a ListRequest, visibility: Visibility<'a>) -> Filter<'a> {
        Filter {
            visibility,
            prefix: req.prefix.as_deref(),
            kind: req.kind.as_deref(),
            search: req
                .search
                .as_deref()
                .map(str::to_lowercase)
                .filter(|s| !s.is_empty()),
        }
    }

    fn admits(&self, listed: &Listed) -> bool {
        self.visibility.allows_id(&listed.id, listed.always_visible)
            && self.prefix.is_none_or(|p| listed.id.starts_with(p))
            && self.kind.is_none_or(|t| listed.kind.as_deref() == Some(t))
            && self
                .search
                .as_deref()
                .is_none_or(|needle| listed.matches(needle))
    }
}

/// `directory::skills::list` as JSON text: `{"skills":[row…]}` sorted by on-disk id, or with
/// `if_revision` / `since_revision` one of the answers `list_revision` describes. `cache`
/// gives the decoded rows of `reader`'s revision; it is called only for a whole list (an
/// unchanged answer or a delta reads the few rows it needs from the snapshot).
pub fn list_json(
    reader: &Reader,
    visibility: Visibility<'_>,
    request: &Value,
    cache: impl FnOnce() -> Result<Arc<SkillCache>>,
) -> Result<String> {
    let req: ListRequest = request::parse(request)?;
    let filter = Filter::of(&req, visibility);
    let include_description = req.include_description.unwrap_or(true);
    if req.if_revision.is_none() && req.since_revision.is_none() {
        return Ok(rows_json(&*cache()?, &filter, include_description, ""));
    }
    let current = ListRevision::current(reader, Logged::Skills, Some(visibility))?;
    let revision = current.token;
    let since = match (req.since_revision, req.if_revision) {
        (Some(asked), _) => current.since(reader, asked)?,
        (None, Some(asked)) if asked == revision => Since::Unchanged,
        (None, _) => {
            let tail = format!(",\"revision\":{revision}");
            return Ok(rows_json(&*cache()?, &filter, include_description, &tail));
        }
    };
    match since {
        Since::Unchanged => Ok(list_revision::unchanged(revision).to_string()),
        Since::Full => {
            let tail = format!(",\"revision\":{revision},\"full\":true");
            Ok(rows_json(&*cache()?, &filter, include_description, &tail))
        }
        Since::Delta(keys) => delta::answer(reader, &filter, include_description, &keys, revision),
    }
}
