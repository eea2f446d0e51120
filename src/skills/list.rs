//! `directory::skills::list`, answered from the rows of one index revision decoded once and
//! kept as JSON text: a list of every row costs little more than copying that text.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::index::Reader;
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
}

/// The rows `list` serves, decoded once per index revision, each with its JSON text ready:
/// a `list` of every row then costs little more than copying that text.
pub struct ListCache {
    pub revision: u64,
    rows: Vec<Listed>,
}

/// One row of the cache, kept compact (a tree of 50,000 skills holds 50,000 of these): the
/// response text and only what the filters look at.
struct Listed {
    id: Box<str>,
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
        Listed {
            id: id.into(),
            always_visible: row.always_visible,
            kind: row.r#type.as_deref().map(Into::into),
            ends: [fields[0].len(), fields[0].len() + fields[1].len()],
            lowercase: fields.concat().into(),
            json: json.into(),
            description: start..end,
        }
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

/// The revision `list` reports: the index revision combined with what decides visibility (the
/// filter setting and the installed workers), so that `if_revision` answers "unchanged" only
/// when the rows really are. It stays below 2^53, safe for JSON numbers in any client.
fn list_revision(index_revision: u64, visibility: Visibility<'_>) -> u64 {
    use std::hash::{Hash, Hasher};
    /// Room for the visibility fingerprint in the low bits.
    const FINGERPRINT: u64 = 1 << 20;
    let mut hasher = std::hash::DefaultHasher::new();
    visibility.filter_unregistered.hash(&mut hasher);
    visibility.installed.hash(&mut hasher);
    index_revision * FINGERPRINT + hasher.finish() % FINGERPRINT
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
    /// the first list after a change).
    pub fn build(reader: &Reader) -> Result<ListCache> {
        use rayon::prelude::*;
        let revision = reader.revision()?;
        let rows = reader
            .skills()?
            .into_par_iter()
            .map(|(id, row)| Listed::new(id, &row))
            .collect();
        Ok(ListCache { revision, rows })
    }

    /// `directory::skills::list` as JSON text: `{"skills":[row…]}` sorted by on-disk id.
    pub fn list_json(&self, visibility: Visibility<'_>, request: &Value) -> Result<String> {
        let req: ListRequest = request::parse(request)?;
        let revision = list_revision(self.revision, visibility);
        if req.if_revision == Some(revision) {
            return Ok(format!("{{\"unchanged\":true,\"revision\":{}}}", revision));
        }
        let search = req
            .search
            .as_deref()
            .map(str::to_lowercase)
            .filter(|s| !s.is_empty());
        let include_description = req.include_description.unwrap_or(true);
        let mut out =
            String::with_capacity(self.rows.iter().map(|r| r.json.len() + 1).sum::<usize>() + 16);
        out.push_str("{\"skills\":[");
        let mut first = true;
        for listed in &self.rows {
            if !visibility.allows_id(&listed.id, listed.always_visible)
                || req
                    .prefix
                    .as_deref()
                    .is_some_and(|p| !listed.id.starts_with(p))
                || req
                    .kind
                    .as_deref()
                    .is_some_and(|t| listed.kind.as_deref() != Some(t))
                || search
                    .as_deref()
                    .is_some_and(|needle| !listed.matches(needle))
            {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            listed.push_json(&mut out, include_description);
        }
        out.push(']');
        if req.if_revision.is_some() {
            out.push_str(&format!(",\"revision\":{revision}"));
        }
        out.push('}');
        Ok(out)
    }
}
