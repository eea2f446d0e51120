//! `directory::skills::get`: one skill by id, and what to answer when the id is not visible
//! (a worker's overview when the id names an installed worker, else a coded not-found with
//! the closest ids).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::doc::distance::{SUGGESTIONS, levenshtein};
use crate::doc::frontmatter;
use crate::doc::ids::first_segment;
use crate::error::{Error, Result};
use crate::index::Reader;
use crate::request;
use crate::roots::Roots;
use crate::rules::Source;
use crate::rules::skill::{NEXT_ON_MISS, SkillRow, Visibility, parse_id};

/// `directory::skills::get`.
pub fn get(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Value> {
    let req: request::GetById = request::parse(request)?;
    let id = parse_id(&req.id)?;
    if let Some((found, row)) = reader.resolve_skill(visibility, &id)? {
        return serve(reader, roots, &found, row, req.raw, None);
    }
    recover_miss(reader, roots, visibility, &id, req.raw)
}

/// The absolute path of a row's file ("" for bundled content).
fn path_of(roots: &Roots, source: &Source) -> String {
    match source {
        Source::File { root, rel, .. } => roots.file(*root, rel).display().to_string(),
        Source::Bundled => String::new(),
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
    let text = reader.text(roots, &row.source, id)?;
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
    let rows = reader.visible_skills(visibility)?;
    let top = first_segment(missed);
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
