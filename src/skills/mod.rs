//! `directory::skills::*` reads: `list`, `get` and `index`, answered from the index's skill
//! rows, with `filter_unregistered` applied at read time.

pub mod write;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::doc::ParsedDoc;
use crate::doc::frontmatter;
use crate::doc::ids::{levenshtein, normalize_id_input, validate_skill_id};
use crate::error::{Next, next};
use crate::index::records::{SkillRow, Source};
use crate::index::{Reader, Roots};
use crate::{Error, Result, bundled_docs, request};

/// Characters of overview descriptions `skills::index` includes before it leaves the rest out
/// (contract: 3,000).
pub const INDEX_BUDGET_CHARS: usize = 3_000;
/// "Did you mean" suggestions on a miss (contract: 3).
const SUGGESTIONS: usize = 3;
/// Namespaces `filter_unregistered` never hides: this worker's (`directory` in the contract,
/// and `iii-directory`, where its own bundled skills live) and the engine's (`iii`).
pub const ALWAYS_VISIBLE_NAMESPACES: [&str; 3] = ["directory", "iii-directory", "iii"];

const NEXT_ON_MISS: [Next; 2] = [
    next("directory::skills::list", "browse skill ids"),
    next("directory::skills::index", "see the per-worker overview"),
];

/// Which skills a caller may see: `filter_unregistered` hides a namespace that is not an
/// installed worker. `installed: None` means the set is unknown, and then nothing is hidden.
#[derive(Clone, Copy, Debug)]
pub struct Visibility<'a> {
    pub filter_unregistered: bool,
    pub installed: Option<&'a BTreeSet<String>>,
}

impl Visibility<'_> {
    pub fn allows(&self, id: &str, row: &SkillRow) -> bool {
        self.allows_id(id, row.always_visible)
    }

    fn allows_id(&self, id: &str, always_visible: bool) -> bool {
        match (self.filter_unregistered, self.installed) {
            (true, Some(installed)) => {
                always_visible || installed.contains(SkillRow::namespace(id))
            }
            _ => true,
        }
    }
}

/// What a skill's document says about itself.
pub struct Identity {
    /// Frontmatter `title`, then `name`, then the first H1, then the fallback (the id).
    pub title: String,
    pub r#type: Option<String>,
    pub function_id: Option<String>,
}

/// A frontmatter value trimmed, when it is not blank.
fn trimmed(value: Option<&String>) -> Option<String> {
    value
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

pub fn identity(doc: Option<&ParsedDoc>, fallback_title: &str) -> Identity {
    let fields = doc.and_then(ParsedDoc::fields);
    Identity {
        title: trimmed(fields.and_then(|f| f.title.as_ref()))
            .or_else(|| trimmed(fields.and_then(|f| f.name.as_ref())))
            .or_else(|| doc.and_then(|d| d.h1.clone()))
            .unwrap_or_else(|| fallback_title.to_string()),
        r#type: trimmed(fields.and_then(|f| f.r#type.as_ref())),
        function_id: trimmed(fields.and_then(|f| f.function_id.as_ref())),
    }
}

/// Builds a skill row from its parsed document (`None` when the file cannot be served, in which
/// case the row carries defaults, as the contract asks).
#[allow(clippy::too_many_arguments)]
pub fn row_for(
    id: &str,
    display_id: String,
    doc: Option<&ParsedDoc>,
    bytes: u64,
    modified_at: String,
    source: Source,
    agents_skill: bool,
    agents_namespaces: &BTreeSet<String>,
) -> SkillRow {
    let namespace = SkillRow::namespace(id);
    let always_visible = !id.contains('/')
        || ALWAYS_VISIBLE_NAMESPACES.contains(&namespace)
        || agents_namespaces.contains(namespace);
    let fields = doc.and_then(ParsedDoc::fields);
    let identity = identity(doc, &display_id);
    let description = trimmed(fields.and_then(|f| f.description.as_ref()))
        .or_else(|| doc.map(|d| d.first_paragraph.clone()))
        .unwrap_or_default();
    SkillRow {
        title: identity.title,
        r#type: identity.r#type,
        function_id: identity.function_id,
        disable_model_invocation: fields.is_some_and(|f| f.disable_model_invocation),
        description,
        bytes,
        modified_at,
        source,
        always_visible,
        agents_skill,
        display_id,
    }
}

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

#[derive(Deserialize)]
struct GetRequest {
    id: String,
    #[serde(default)]
    raw: bool,
}

/// Normalizes and checks an id as `get`, `update` and `delete` take it.
pub fn parse_id(raw: &str) -> Result<String> {
    let id = normalize_id_input(raw).map_err(Error::Invalid)?;
    if id.contains("::") {
        return Err(Error::invalid_input(
            "D112",
            format!(
                "{id:?} looks like a FUNCTION id (service::name), not a skill id. Skill ids use '/' (e.g. \"database/index\"). To CALL that function pass the id to agent_trigger; to READ its skill doc, look up the skill id."
            ),
            &NEXT_ON_MISS,
        ));
    }
    validate_skill_id(&id).map_err(Error::Invalid)?;
    Ok(id)
}

/// The visible skills, in on-disk id order.
pub(crate) fn visible(
    reader: &Reader,
    visibility: Visibility<'_>,
) -> Result<Vec<(String, SkillRow)>> {
    let mut rows = reader.skills()?;
    rows.retain(|(id, row)| visibility.allows(id, row));
    Ok(rows)
}

/// Finds a visible skill by id: the exact id wins, then the `<id>/index` overview alias.
pub fn resolve(
    reader: &Reader,
    visibility: Visibility<'_>,
    id: &str,
) -> Result<Option<(String, SkillRow)>> {
    for candidate in [id.to_string(), format!("{id}/index")] {
        if let Some(row) = reader.skill(&candidate)? {
            if visibility.allows(&candidate, &row) {
                return Ok(Some((candidate, row)));
            }
        }
    }
    Ok(None)
}

/// `directory::skills::get`.
pub fn get(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Value> {
    let req: GetRequest = request::parse(request)?;
    let id = parse_id(&req.id)?;
    if let Some((found, row)) = resolve(reader, visibility, &id)? {
        return serve(reader, roots, &found, row, req.raw, None);
    }
    recover_miss(reader, roots, visibility, &id, req.raw)
}

/// The absolute path of a row's file ("" for bundled content).
pub fn path_of(roots: &Roots, source: &Source) -> String {
    match source {
        Source::File { root, rel, .. } => roots.file(*root, rel).display().to_string(),
        Source::Bundled => String::new(),
    }
}

/// The text of a row's file, or the read path's error.
pub fn text_of(
    reader: &Reader,
    roots: &Roots,
    source: &Source,
    bundled: impl FnOnce() -> Option<&'static str>,
) -> Result<String> {
    match source {
        Source::File { root, rel, content } => {
            let path = roots.file(*root, rel);
            match content {
                Err(issue) => Err(Error::Io(issue.message(&path))),
                Ok(hash) => reader.content(hash)?.ok_or_else(|| {
                    Error::Index(format!("content of {} is missing", path.display()))
                }),
            }
        }
        Source::Bundled => bundled()
            .map(str::to_string)
            .ok_or_else(|| Error::Index("bundled content is missing".into())),
    }
}

fn serve(
    reader: &Reader,
    roots: &Roots,
    id: &str,
    row: SkillRow,
    raw: bool,
    note: Option<String>,
) -> Result<Value> {
    let display = row.display_id.clone();
    let text = text_of(reader, roots, &row.source, || bundled_docs::skill_raw(id))?;
    let body = &text[frontmatter::split(&text).body_offset..];
    let body = match note {
        Some(note) => format!("{note}\n\n---\n\n{body}"),
        None => body.to_string(),
    };
    let mut out = Map::new();
    out.insert("id".into(), json!(display));
    out.insert("title".into(), json!(row.title));
    out.insert("type".into(), json!(row.r#type));
    out.insert("function_id".into(), json!(row.function_id));
    out.insert(
        "disable_model_invocation".into(),
        json!(row.disable_model_invocation),
    );
    out.insert("path".into(), json!(path_of(roots, &row.source)));
    out.insert("body".into(), json!(body));
    out.insert("modified_at".into(), json!(row.modified_at));
    if raw {
        out.insert("raw".into(), json!(text));
    }
    Ok(Value::Object(out))
}

/// What `get` does when the id is not visible: serve a worker's overview when the id names an
/// installed worker, else a coded not-found with the closest ids.
fn recover_miss(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    missed: &str,
    raw: bool,
) -> Result<Value> {
    let rows = visible(reader, visibility)?;
    let top = missed.split('/').next().unwrap_or(missed);
    if top != "iii" && !top.is_empty() {
        let mut names: BTreeSet<&str> = visibility
            .installed
            .map(|s| s.iter().map(String::as_str).collect())
            .unwrap_or_default();
        names.extend(["directory", "iii-directory"]);
        if let Some(worker) = resolve_worker(top, &names) {
            let docs: Vec<&(String, SkillRow)> = rows
                .iter()
                .filter(|(id, _)| id == worker || id.starts_with(&format!("{worker}/")))
                .collect();
            let overview_id = format!("{worker}/index");
            let overview = docs.iter().find(|(id, _)| *id == overview_id);
            if let Some((id, row)) = overview {
                if !missed.contains('/') || docs.len() == 1 {
                    let note = format!(
                        "> Note: there is no skill `{missed}`; this is `{shown}`, the worker's overview. For its callable functions call `engine::functions::list` with worker={worker}; for the other skills it ships call `directory::skills::list` with prefix=\"{worker}/\".",
                        shown = row.display_id
                    );
                    return serve(reader, roots, id, row.clone(), raw, Some(note));
                }
            } else if docs.is_empty() {
                if let Some((id, engine)) = rows.iter().find(|(id, _)| id == "iii/index") {
                    let note = format!(
                        "> Note: the worker `{worker}` is installed but ships no skill doc, so it has no overview; below is the iii engine overview. For `{worker}`'s own API call `engine::functions::list` with worker={worker}, or `engine::workers::info` with name={worker}."
                    );
                    return serve(reader, roots, id, engine.clone(), raw, Some(note));
                }
                return Err(Error::Coded {
                    code: "D110",
                    message: format!(
                        "D110 not_found: {missed:?} does not exist; the worker `{worker}` is installed but ships no skill doc. Next: call engine::functions::list with worker={worker} to list its functions; or engine::workers::info with name={worker}."
                    ),
                });
            }
        }
    }
    Err(Error::not_found(
        "D110",
        "skill",
        missed,
        &suggestions(missed, &rows),
        &NEXT_ON_MISS,
    ))
}

/// Matches a requested top segment to an installed worker: a case-insensitive exact match wins,
/// else the unique shortest case-insensitive substring match.
pub fn resolve_worker<'a>(top: &str, names: &BTreeSet<&'a str>) -> Option<&'a str> {
    let wanted = top.to_lowercase();
    if wanted.is_empty() || wanted == "iii" {
        return None;
    }
    if let Some(exact) = names.iter().find(|n| n.to_lowercase() == wanted) {
        return Some(exact);
    }
    let mut matches: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.to_lowercase().contains(&wanted))
        .collect();
    matches.sort_by_key(|n| n.len());
    match matches.as_slice() {
        [only] => Some(only),
        [a, b, ..] if a.len() < b.len() => Some(a),
        _ => None,
    }
}

/// Up to three visible ids closest to a missed one: shared segments count 100 each, minus the
/// edit distance; non-positive scores are dropped.
fn suggestions(missed: &str, rows: &[(String, SkillRow)]) -> Vec<String> {
    let missed_lower = missed.to_lowercase();
    let missed_segments: Vec<&str> = missed.split('/').collect();
    let mut scored: Vec<(i64, &SkillRow)> = rows
        .iter()
        .map(|(id, row)| {
            let segments: Vec<&str> = id.split('/').collect();
            let shared = missed_segments
                .iter()
                .filter(|s| segments.contains(s))
                .count() as i64;
            (
                100 * shared - levenshtein(&missed_lower, &id.to_lowercase()) as i64,
                row,
            )
        })
        .collect();
    scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
    scored
        .into_iter()
        .take(SUGGESTIONS)
        .filter(|(score, _)| *score > 0)
        .map(|(_, row)| row.display_id.clone())
        .collect()
}

/// `directory::skills::index`: one heading, first paragraph and pointer per worker overview
/// (`type: index`), descriptions within a character budget.
pub fn index(reader: &Reader, visibility: Visibility<'_>) -> Result<Value> {
    let overviews: Vec<(String, SkillRow)> = visible(reader, visibility)?
        .into_iter()
        .filter(|(_, row)| !row.agents_skill && row.r#type.as_deref() == Some("index"))
        .collect();
    Ok(json!({ "body": render_index(&overviews), "workers_count": overviews.len() }))
}

pub fn render_index(overviews: &[(String, SkillRow)]) -> String {
    let mut body = format!("# Skills index\n\n{} worker(s).\n", overviews.len());
    let mut omitted = false;
    let mut chars = body.chars().count();
    let push = |body: &mut String, chars: &mut usize, text: &str| {
        body.push_str(text);
        *chars += text.chars().count();
    };
    for (id, row) in overviews {
        push(&mut body, &mut chars, &format!("\n## {}\n", row.title));
        let description = row.description.trim();
        if !description.is_empty() {
            let len = description.chars().count();
            // The description line and the blank line before it must fit the budget.
            if chars + len + 2 <= INDEX_BUDGET_CHARS {
                push(&mut body, &mut chars, &format!("\n{description}\n"));
            } else {
                omitted = true;
            }
        }
        push(&mut body, &mut chars, &format!("\nRead iii://{id}\n"));
    }
    if omitted {
        body.push_str("\n(some descriptions omitted to save space; call directory::skills::get for the full reference)\n");
    }
    body
}
