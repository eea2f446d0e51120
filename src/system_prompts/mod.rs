//! `directory::system-prompts::*` reads: `list` and `get`, from the index's prompt rows plus
//! the prompts bundled with the worker (a file with the same name shadows a bundled prompt).

pub mod write;

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::bundled;
use crate::code::Code;
use crate::doc::classify::{PathClass, classify};
use crate::doc::distance::closest;
use crate::doc::frontmatter;
use crate::doc::ids::validate_name;
use crate::error::{Error, Result, next};
use crate::index::Reader;
use crate::index::changelog::Logged;
use crate::list_revision::{self, KeyedRows};
use crate::request;
use crate::roots::{Root, Roots};
use crate::rules::skip::SkipReason;

/// `directory::system-prompts::list`: `{ prompts: [{ name, description, modified_at, builtin? }] }`.
pub fn list(reader: &Reader) -> Result<Value> {
    let prompts = Prompts::load(reader)?;
    let rows: Vec<&Value> = prompts.rows.iter().map(|(_, v)| v).collect();
    Ok(json!({ "prompts": rows }))
}

/// `directory::system-prompts::list` with the revision fields of `list_revision` (the plain
/// answer without them).
pub fn list_answer(reader: &Reader, request: &Value) -> Result<Value> {
    list_revision::answer_keyed(reader, Logged::Prompts, request, || Prompts::load(reader))
}

/// The listed prompts: files, plus the bundled ones no file shadows, by name.
struct Prompts {
    rows: Vec<(String, Value)>,
}

impl Prompts {
    fn load(reader: &Reader) -> Result<Prompts> {
        let mut rows: Vec<(String, Value)> = reader
            .prompts()?
            .into_iter()
            .map(|(name, row)| {
                let value = json!({ "name": name, "description": row.description, "modified_at": row.modified_at });
                (name, value)
            })
            .collect();
        for bundled in bundled::prompts() {
            if !rows.iter().any(|(name, _)| name == bundled.name) {
                let value = json!({ "name": bundled.name, "description": bundled.description, "modified_at": "", "builtin": true });
                rows.push((bundled.name.to_string(), value));
            }
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Prompts { rows })
    }
}

impl KeyedRows for Prompts {
    const FIELD: &'static str = "prompts";

    fn rows(&self) -> &[(String, Value)] {
        &self.rows
    }

    /// A prompt's row is its own file's (or the bundled prompt it stops shadowing).
    fn touched(&self, key: &str, changed: &BTreeSet<String>) -> bool {
        changed.contains(key)
    }
}

/// `directory::system-prompts::get`: `{ name, description, body, modified_at, builtin?, raw? }`.
pub fn get(reader: &Reader, roots: &Roots, request: &Value) -> Result<Value> {
    let req: request::GetByName = request::parse(request)?;
    validate_name(&req.name).map_err(Error::invalid)?;
    let mut out = Map::new();
    out.insert("name".into(), json!(req.name));
    if let Some(row) = reader.prompt(&req.name)? {
        let text = reader.text(roots, &row.source, &req.name, || {
            Error::not_found(Code::PromptNotFound, "system prompt", &req.name, &[], &[])
        })?;
        out.insert("description".into(), json!(row.description));
        out.insert(
            "body".into(),
            json!(text[frontmatter::split(&text).body_offset..]),
        );
        out.insert("modified_at".into(), json!(row.modified_at));
        if req.raw {
            out.insert("raw".into(), json!(text));
        }
    } else if let Some(bundled) = bundled::prompt(&req.name) {
        out.insert("description".into(), json!(bundled.description));
        out.insert("body".into(), json!(bundled.body));
        out.insert("modified_at".into(), json!(""));
        out.insert("builtin".into(), json!(true));
        if req.raw {
            out.insert("raw".into(), json!(bundled.raw));
        }
    } else {
        if let Some(skipped) = skipped_prompt(reader, roots, &req.name)? {
            return Err(skipped);
        }
        let mut names: Vec<String> = reader.prompts()?.into_iter().map(|(n, _)| n).collect();
        names.extend(bundled::prompts().iter().map(|p| p.name.to_string()));
        return Err(Error::not_found(
            Code::PromptNotFound,
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
/// The answer for a prompt name no file serves while a file of that name is there, skipped by
/// the scan (unreadable, not a system prompt), in any `system-prompts` folder of the skills
/// roots (a bundle's land in its namespace's): [`Error::not_served`], naming the file and why.
/// A file another `system-prompts` folder overrides, or whose name another file serves, is no
/// such case.
pub(crate) fn skipped_prompt(reader: &Reader, roots: &Roots, name: &str) -> Result<Option<Error>> {
    Ok(
        skipped_prompt_file(reader, roots, name)?.map(|(path, why)| {
            Error::not_served(Code::PromptNotFound, "system prompt", name, &path, why)
        }),
    )
}

/// The file of that name [`skipped_prompt`] answers about, and why the scan skips it.
pub(crate) fn skipped_prompt_file(
    reader: &Reader,
    roots: &Roots,
    name: &str,
) -> Result<Option<(std::path::PathBuf, SkipReason)>> {
    let file = format!("{name}.md");
    let skipped = reader.skipped_where(|root, rel, why| {
        matches!(root, Root::Skills | Root::LocalSkills)
            && classify(rel) == PathClass::SystemPrompt
            && rel.rsplit('/').next() == Some(file.as_str())
            && !matches!(
                why,
                SkipReason::NamespaceShadowed { .. } | SkipReason::DuplicatePromptName { .. }
            )
    })?;
    Ok(skipped.map(|(root, rel, why)| (roots.file(root, &rel), why)))
}
