//! `directory::skills::list`, answered from the rows of one index revision decoded once and
//! kept as JSON text: a list of every row costs little more than copying that text. With
//! `since_revision`, from the change log and the few rows it names (`delta`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod delta;

use crate::error::Result;
use crate::index::Reader;
use crate::index::changelog::Logged;
use crate::list_revision::{self, ListRevision, Since};
use crate::request;
use crate::rules::skill::{SkillRow, Visibility};

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

/// The rows `list` serves, decoded once per index revision, each with its JSON text ready:
/// a `list` of every row then costs little more than copying that text.
pub struct ListCache {
    pub revision: u64,
    /// The index file's identity: a rebuilt index starts its revisions again.
    pub epoch: u64,
    rows: Vec<Listed>,
}

/// One row of the cache, kept compact (a tree of 50,000 skills holds 50,000 of these): the
/// response text and only what the filters look at.
struct Listed {
    id: Box<str>,
    /// The id the row is shown under, when it is not `id` (`<ns>/index` shown as `<ns>`).
    display: Option<Box<str>>,
    always_visible: bool,
    kind: Option<Box<str>>,
    /// Lowercase display id, title and description one after another, for `search`; `ends`
    /// marks where the first two end.
    lowercase: Box<str>,
    ends: [usize; 2],
    /// The row as the response carries it.
    json: Box<str>,
    /// Where the description's text sits in `json`, cut out for `include_description: false`.
    description: std::ops::Range<usize>,
}

impl Listed {
    fn new(id: String, row: &SkillRow) -> Listed {
        let json = ListRow::of(row, true).json();
        // The description is followed only by `bytes` and `modified_at`, so the last match of
        // its key is the key itself, never text inside an earlier string.
        const KEY: &str = "\"description\":\"";
        let start = json.rfind(KEY).expect("a list row has a description") + KEY.len();
        let end = start
            + serde_json::to_string(&row.description)
                .expect("a string serializes")
                .len()
            - 2;
        let fields = [&row.display_id, &row.title, &row.description].map(|f| f.to_lowercase());
        let display = (row.display_id != id).then(|| row.display_id.as_str().into());
        Listed {
            id: id.into(),
            display,
            always_visible: row.always_visible,
            kind: row.r#type.as_deref().map(Into::into),
            ends: [fields[0].len(), fields[0].len() + fields[1].len()],
            lowercase: fields.concat().into(),
            json: json.into(),
            description: start..end,
        }
    }

    /// The id the answer shows.
    fn shown_id(&self) -> &str {
        self.display.as_deref().unwrap_or(&self.id)
    }

    fn matches(&self, needle: &str) -> bool {
        let [a, b] = self.ends;
        [
            &self.lowercase[..a],
            &self.lowercase[a..b],
            &self.lowercase[b..],
        ]
        .iter()
        .any(|field| field.contains(needle))
    }

    fn push_json(&self, out: &mut String, include_description: bool) {
        if include_description {
            out.push_str(&self.json);
        } else {
            out.push_str(&self.json[..self.description.start]);
            out.push_str(&self.json[self.description.end..]);
        }
    }
}

/// A list row on the wire.
#[derive(Serialize)]
struct ListRow<'a> {
    id: &'a str,
    title: &'a str,
    #[serde(rename = "type")]
    kind: Option<&'a str>,
    function_id: Option<&'a str>,
    disable_model_invocation: bool,
    description: &'a str,
    bytes: u64,
    modified_at: &'a str,
}

impl ListRow<'_> {
    fn of(row: &SkillRow, include_description: bool) -> ListRow<'_> {
        ListRow {
            id: &row.display_id,
            title: &row.title,
            kind: row.r#type.as_deref(),
            function_id: row.function_id.as_deref(),
            disable_model_invocation: row.disable_model_invocation,
            description: if include_description {
                &row.description
            } else {
                ""
            },
            bytes: row.bytes,
            modified_at: &row.modified_at,
        }
    }

    fn json(&self) -> String {
        serde_json::to_string(self).expect("a list row serializes")
    }
}

impl ListCache {
    /// Decodes every skill row of a snapshot (on every core: this runs once per revision, on
    /// the first whole list after a change).
    pub fn build(reader: &Reader) -> Result<ListCache> {
        use rayon::prelude::*;
        let revision = reader.revision()?;
        let epoch = reader.epoch()?;
        let rows = reader
            .skills()?
            .into_par_iter()
            .map(|(id, row)| Listed::new(id, &row))
            .collect();
        Ok(ListCache {
            revision,
            epoch,
            rows,
        })
    }

    /// `{"skills":[row…]` and `tail` then `}`: every row the filter admits, in on-disk id order.
    fn rows_json(&self, filter: &Filter<'_>, include_description: bool, tail: &str) -> String {
        let mut out =
            String::with_capacity(self.rows.iter().map(|r| r.json.len() + 1).sum::<usize>() + 64);
        out.push_str("{\"skills\":[");
        let mut first = true;
        for listed in self.rows.iter().filter(|l| filter.admits(l)) {
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
    cache: impl FnOnce() -> Result<std::sync::Arc<ListCache>>,
) -> Result<String> {
    let req: ListRequest = request::parse(request)?;
    let filter = Filter::of(&req, visibility);
    let include_description = req.include_description.unwrap_or(true);
    if req.if_revision.is_none() && req.since_revision.is_none() {
        return Ok(cache()?.rows_json(&filter, include_description, ""));
    }
    let current = ListRevision::current(reader, Logged::Skills, Some(visibility))?;
    let revision = current.token;
    let since = match (req.since_revision, req.if_revision) {
        (Some(asked), _) => current.since(reader, asked)?,
        (None, Some(asked)) if asked == revision => Since::Unchanged,
        (None, _) => {
            let tail = format!(",\"revision\":{revision}");
            return Ok(cache()?.rows_json(&filter, include_description, &tail));
        }
    };
    match since {
        Since::Unchanged => Ok(list_revision::unchanged(revision).to_string()),
        Since::Full => {
            let tail = format!(",\"revision\":{revision},\"full\":true");
            Ok(cache()?.rows_json(&filter, include_description, &tail))
        }
        Since::Delta(keys) => delta::answer(reader, &filter, include_description, &keys, revision),
    }
}
