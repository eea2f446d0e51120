//! `directory::system-prompts::*` reads: `list` and `get`, from the index's prompt rows plus
//! the prompts bundled with the worker (a file with the same name shadows a bundled prompt).

pub mod write;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::doc::frontmatter;
use crate::doc::ids::{levenshtein, validate_name};
use crate::doc::{Fields, Frontmatter, ParsedDoc};
use crate::error::next;
use crate::index::{Reader, Roots};
use crate::skills::text_of;
use crate::{Error, Result, bundled_docs, request};

pub const MISSING_FRONTMATTER: &str =
    "missing YAML frontmatter (expected --- ... --- block at file start)";

/// The fields of a frontmatter block a family requires, or why there are none: missing, or
/// not usable. A block that is not YAML is served from its salvaged `key: value` lines when
/// `salvaged` allows it (the scan does, and `check` reports the file), and is refused otherwise
/// (a write should not create such a file).
pub fn required_fields(frontmatter: &Frontmatter, salvaged: bool) -> Result<&Fields, String> {
    match frontmatter {
        Frontmatter::Absent => Err(MISSING_FRONTMATTER.into()),
        Frontmatter::Invalid(why) => Err(format!("invalid frontmatter YAML: {why}")),
        Frontmatter::Salvaged { fields, .. } if salvaged => Ok(fields),
        Frontmatter::Salvaged { error, .. } => Err(format!("invalid frontmatter YAML: {error}")),
        Frontmatter::Present(fields) => Ok(fields),
    }
}

/// A system prompt's name and description from its document, or why the scanner skips it.
/// A salvaged block serves when its lines satisfy the rules; otherwise its YAML error is the
/// reason, which tells the author more than a missing key would.
pub fn from_doc(doc: &ParsedDoc, stem: &str) -> Result<(String, String), String> {
    let fields = required_fields(&doc.frontmatter, true)?;
    from_fields(fields, stem).map_err(|why| match &doc.frontmatter {
        Frontmatter::Salvaged { error, .. } => format!("invalid frontmatter YAML: {error}"),
        _ => why,
    })
}

fn from_fields(fields: &Fields, stem: &str) -> Result<(String, String), String> {
    let name = fields
        .name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .unwrap_or(stem);
    validate_name(name).map_err(|why| format!("invalid system prompt name {name:?}: {why}"))?;
    let description = fields
        .description
        .as_deref()
        .map(str::trim)
        .unwrap_or_default();
    if description.is_empty() {
        return Err("frontmatter is missing a non-empty `description`".into());
    }
    Ok((name.to_string(), description.to_string()))
}

/// `directory::system-prompts::list`: `{ prompts: [{ name, description, modified_at, builtin? }] }`.
pub fn list(reader: &Reader) -> Result<Value> {
    let mut rows: Vec<(String, Value)> = reader
        .prompts()?
        .into_iter()
        .map(|(name, row)| {
            let value = json!({ "name": name, "description": row.description, "modified_at": row.modified_at });
            (name, value)
        })
        .collect();
    for bundled in bundled_docs::prompts() {
        if !rows.iter().any(|(name, _)| name == bundled.name) {
            let value = json!({ "name": bundled.name, "description": bundled.description, "modified_at": "", "builtin": true });
            rows.push((bundled.name.to_string(), value));
        }
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(json!({ "prompts": rows.into_iter().map(|(_, v)| v).collect::<Vec<_>>() }))
}

#[derive(Deserialize)]
struct GetRequest {
    name: String,
    #[serde(default)]
    raw: bool,
}

/// `directory::system-prompts::get`: `{ name, description, body, modified_at, builtin?, raw? }`.
pub fn get(reader: &Reader, roots: &Roots, request: &Value) -> Result<Value> {
    let req: GetRequest = request::parse(request)?;
    validate_name(&req.name).map_err(Error::Invalid)?;
    let mut out = Map::new();
    out.insert("name".into(), json!(req.name));
    if let Some(row) = reader.prompt(&req.name)? {
        let text = text_of(reader, roots, &row.source, || None)?;
        out.insert("description".into(), json!(row.description));
        out.insert(
            "body".into(),
            json!(text[frontmatter::split(&text).body_offset..]),
        );
        out.insert("modified_at".into(), json!(row.modified_at));
        if req.raw {
            out.insert("raw".into(), json!(text));
        }
    } else if let Some(bundled) = bundled_docs::prompt(&req.name) {
        out.insert("description".into(), json!(bundled.description));
        out.insert("body".into(), json!(bundled.body));
        out.insert("modified_at".into(), json!(""));
        out.insert("builtin".into(), json!(true));
        if req.raw {
            out.insert("raw".into(), json!(bundled.raw));
        }
    } else {
        let mut names: Vec<String> = reader.prompts()?.into_iter().map(|(n, _)| n).collect();
        names.extend(bundled_docs::prompts().iter().map(|p| p.name.to_string()));
        return Err(Error::not_found(
            "D210",
            "system prompt",
            &req.name,
            &closest(&req.name, names),
            &[next(
                "directory::system-prompts::list",
                "browse system prompt names",
            )],
        ));
    }
    Ok(Value::Object(out))
}

/// The three names closest to a missed one by edit distance (lowercase), ties by name.
pub fn closest(missed: &str, mut names: Vec<String>) -> Vec<String> {
    let missed = missed.to_lowercase();
    names.sort();
    names.dedup();
    names.sort_by_key(|n| levenshtein(&missed, &n.to_lowercase()));
    names.truncate(3);
    names
}
